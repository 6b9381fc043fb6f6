import ConcordCore
import Testing

/// Points that a second implementation, written from SPEC.md alone, needed settled: one test per
/// point, so that the code cannot drift from the words (SPEC.md §4.3, §6 "Field codes", §10).
@Suite struct SpecPointsTests {
    static let author = ReplicaID(high: 0xA, low: 1)
    static let id = RecordID(high: 0x0102_0304_0506_0708, low: 0x090A_0B0C_0D0E_0F10)

    static func assign(_ record: RecordRef, _ field: Field, _ value: Value, seq: UInt64 = 1) -> Op {
        Op(id: OperationID(replica: author, seq: seq), timestamp: Timestamp(rawValue: 1_000 + seq), record: record, action: .assign(field, value))
    }

    static func dump(_ operations: [Op]) -> String {
        var state = RecordState(ref: operations[0].record)
        for operation in operations { state.apply(operation) }
        return Dump.canonical([state])
    }

    /// §6: codes 1–10 are valid on every kind; one the kind's table lacks is an unknown field,
    /// named by the tables, its type unchecked. Code 11 and up are malformed on every kind.
    @Test func fieldCodesOfTheOtherKindAreUnknownFieldsNamedByTheTables() throws {
        let onReminder = Self.assign(.reminder(Self.id), Field(code: 9)!, .int(7))  // body, of another type
        try onReminder.validate()
        #expect(Self.dump([onReminder]).contains(#""unknown":{"body":7}"#), "\(Self.dump([onReminder]))")
        let onNote = Self.assign(.note(Self.id), Field(code: 3)!, .string("not an instant"))  // due
        try onNote.validate()
        #expect(Self.dump([onNote]).contains(#""unknown":{"due":"not an instant"}"#), "\(Self.dump([onNote]))")
        let unknownKind = RecordRef(kind: RecordKind(rawValue: 9), id: Self.id)
        for code in UInt8(1)...10 {
            let field = try #require(Field(code: code))
            try Self.assign(unknownKind, field, .int(1)).validate()
            #expect(Self.dump([Self.assign(unknownKind, field, .int(1))]).contains(#""unknown":{"\#(field.name)":1}"#))
        }
        #expect(Field(code: 11) == nil)
        for kind: UInt8 in [1, 2, 9] {
            let bytes: [UInt8] = [0x00, 0x02, kind] + Self.id.bytes + [0x0B, 0x00]
            #expect(throws: DecodeError.malformed("unknown field code 11")) {
                try OperationCodec.decode(bytes, author: Self.author, firstSeq: 1, count: 1)
            }
        }
        // A field the kind knows is type-checked.
        #expect(throws: InvalidOperation.self) { try Self.assign(.note(Self.id), .body, .int(7)).validate() }
    }

    /// §4.3: "a known field's name" is the name of a field of either table, on any kind.
    @Test func aNameOfEitherTableIsRefusedOnEveryKind() {
        for kind: UInt8 in [1, 2, 9] {
            for code in UInt8(1)...10 {
                let name = Field(code: code)!.name
                let operation = Self.assign(RecordRef(kind: RecordKind(rawValue: kind), id: Self.id), .other(ExactString(name)), .int(1))
                #expect(throws: InvalidOperation.self, "\(name) by name on kind \(kind)") { try operation.validate() }
            }
        }
        #expect(throws: Never.self) { try Self.assign(.note(Self.id), .other("Body"), .int(1)).validate() }
    }

    /// §10: for a record of an unknown kind, `deleted` is its code-8 register when that holds
    /// the boolean true, false otherwise; the register also shows under `unknown`.
    @Test func theDeletedOfAnUnknownKindComesFromItsCodeEightRegister() {
        let record = RecordRef(kind: RecordKind(rawValue: 9), id: Self.id)
        let cases: [(Value?, String)] = [
            (nil, #""deleted":false"#), (.bool(true), #""deleted":true"#), (.bool(false), #""deleted":false"#),
            (.string("yes"), #""deleted":false"#), (.int(1), #""deleted":false"#),
        ]
        for (value, expected) in cases {
            var operations = [Self.assign(record, .title, .string("t"))]
            if let value { operations.append(Self.assign(record, .deleted, value, seq: 2)) }
            let dump = Self.dump(operations)
            #expect(dump.contains(expected), "\(String(describing: value)): \(dump)")
            if let value {
                #expect(dump.contains(#""deleted":\#(JSON(value).canonical)"#) && dump.contains(#""unknown":{"deleted":"#), "\(dump)")
            }
        }
    }

    /// §10: `"` and `\` escaped, U+0000–U+001F as `\u00xx` in lower case with no short forms,
    /// everything else raw, DEL and C1 included.
    @Test func jsonEscapesExactlyTheCharactersBelowSpace() {
        let text = "a\"b\\c\u{0}\u{1}\n\u{1F}\u{7F}\u{85}\u{9B}é"
        #expect(JSON.string(text).canonical == "\"a\\\"b\\\\c\\u0000\\u0001\\u000a\\u001f\u{7F}\u{85}\u{9B}é\"")
    }
}
