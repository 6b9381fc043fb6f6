import ConcordCore
import ConcordWire
import Testing

/// Operations payloads in columns (SPEC.md §13), each with a record table of its own as in format
/// 6: every kind of entry comes back as it went in, records are named once per block, and a
/// payload that breaks a rule is refused.
@Suite struct OperationColumnsTests {
    static let a = ReplicaID(high: 0xA, low: 1)
    static let b = ReplicaID(high: 0xB, low: 2)
    static let milk = RecordRef(kind: .reminder, id: RecordID(high: 0x0123_4567_89AB_CDEF, low: 1))
    static let ideas = RecordRef(kind: .note, id: RecordID(high: 0x0123_4567_89AB_CDEF &+ 3, low: 2))
    static let future = RecordRef(kind: RecordKind(rawValue: 9), id: RecordID(high: 1, low: 3))

    static func op(_ author: ReplicaID, _ seq: UInt64, _ millis: UInt64, _ record: RecordRef, _ action: Action, _ predecessors: Predecessors? = nil) -> Op {
        Op(id: OperationID(replica: author, seq: seq), timestamp: Timestamp(rawValue: millis << 16), record: record, action: action, predecessors: predecessors)
    }

    /// Every action, every value type, a field by name, predecessors known, none and unknown,
    /// records named again after others, a record of a kind this build does not know, and
    /// timestamps that go back.
    static let operations: [Op] = [
        op(a, 1, 100, milk, .assign(.title, .string("Buy milk"))),
        op(a, 2, 101, milk, .assign(.notes, .string("two litres, é")), .empty),
        op(a, 3, 102, milk, .assign(.due, .int(1_796_115_600_000)), .empty),
        op(a, 4, 103, milk, .assign(.completed, .null), .empty),
        op(a, 5, 104, ideas, .assign(.pinned, .bool(true)), .empty),
        op(a, 6, 105, ideas, .assign(.deleted, .bool(false))),
        op(a, 7, 99, milk, .addTag(ExactString("home"))),
        op(a, 8, 106, future, .assign(.other(ExactString("colour")), .string("teal")), .empty),
        op(a, 9, 107, ideas, .assign(.body, .string(""))),
        op(b, 3, 200, milk, .assign(.title, .string("Buy oat milk")), Predecessors([OperationID(replica: a, seq: 1)])),
        op(b, 4, 201, milk, .removeTag(ExactString("home"), observed: [OperationID(replica: a, seq: 7)])),
        op(b, 5, 202, ideas, .elided),
        op(b, 6, 203, ideas, .purge),
        op(b, 7, 204, milk, .assign(.priority, .int(-3))),
    ]

    static func columns(_ operations: [Op], compacting: [(ReplicaID, ClosedRange<UInt64>)] = []) -> [UInt8] {
        var encoder = OperationsBlock.Encoder(layout: .columns)
        for operation in operations { encoder.append(operation) }
        for (author, seqs) in compacting { encoder.appendCompacted(seqs, of: author) }
        return encoder.finish()
    }

    @Test func everyKindOfEntryComesBack() throws {
        let payload = Self.columns(Self.operations)
        var cursor = try OperationsBlock.Cursor(payload, layout: .columns)
        var decoded: [Op] = []
        while let operation = try cursor.next() { decoded.append(operation) }
        #expect(decoded == Self.operations)
        #expect(cursor.runs.map(\.seqs) == [1...9, 3...7])

        // Compacted seqs at the end of a run, and alone in a run.
        var encoder = OperationsBlock.Encoder(layout: .columns)
        for operation in Self.operations.prefix(3) { encoder.append(operation) }
        encoder.appendCompacted(4...6, of: Self.a)
        encoder.appendCompacted(1...2, of: Self.b)
        var withCompacted = try OperationsBlock.Cursor(encoder.finish(), layout: .columns)
        decoded = []
        while let operation = try withCompacted.next() { decoded.append(operation) }
        #expect(decoded == Array(Self.operations.prefix(3)))
        #expect(withCompacted.compacted.map(\.seqs) == [4...6, 1...2])
        #expect(withCompacted.runs.map(\.seqs) == [1...6, 1...2])
    }

    /// A record is named once per block: each later operation on it is a number, and its id is
    /// in the payload once.
    @Test func aRecordIsNamedOncePerBlock() {
        let lowHalf: [UInt8] = [0x5E, 0xED, 0x5E, 0xED, 0x5E, 0xED, 0x5E, 0xED]
        let record = RecordRef(kind: .reminder, id: RecordID(high: 7, low: 0x5EED_5EED_5EED_5EED))
        let many = (1...50).map { seq in
            Self.op(Self.a, UInt64(seq), UInt64(seq), seq % 2 == 0 ? record : Self.ideas, .assign(.title, .string("t\(seq)")))
        }
        let payload = Self.columns(many)
        let occurrences = (0...(payload.count - lowHalf.count)).filter { Array(payload[$0..<$0 + lowHalf.count]) == lowHalf }
        #expect(occurrences.count == 1, "the record's id is named \(occurrences.count) times")
        // Rows name it at each operation that follows one on the other record.
        var rows = OperationsBlock.Encoder(layout: .rows)
        for operation in many { rows.append(operation) }
        #expect(payload.count + 40 * 17 < rows.finish().count)
    }

    /// The same operations, in rows and in columns, decode the same.
    @Test func rowsAndColumnsHoldTheSame() throws {
        var rows = OperationsBlock.Encoder(layout: .rows)
        for operation in Self.operations { rows.append(operation) }
        var fromRows: [Op] = []
        try OperationsBlock.decode(rows.finish(), layout: .rows) { fromRows.append($0) }
        var fromColumns: [Op] = []
        try OperationsBlock.decode(Self.columns(Self.operations), layout: .columns) { fromColumns.append($0) }
        #expect(fromRows == fromColumns)
    }

    static func refusal(_ payload: [UInt8]) -> String? {
        do {
            try OperationsBlock.decode(payload, layout: .columns) { _ in }
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// The payload's parts, to take apart and damage: the tables and runs, then the 32 columns.
    static func parts(_ payload: [UInt8]) throws -> (head: [UInt8], columns: [[UInt8]]) {
        var reader = ByteReader(payload)
        let replicas = try reader.varint()
        for _ in 0..<replicas { _ = try reader.bytes(16) }
        let runs = try reader.varint()
        for _ in 0..<(3 * runs) { _ = try reader.varint() }
        let head = Array(payload[..<reader.offset])
        var columns: [[UInt8]] = []
        for _ in 0..<32 { columns.append(Array(try reader.bytes(Int(try reader.varint())))) }
        #expect(reader.isAtEnd)
        return (head, columns)
    }

    static func assemble(_ head: [UInt8], _ columns: [[UInt8]]) -> [UInt8] {
        var writer = ByteWriter()
        writer.bytes(head)
        for column in columns {
            writer.varint(UInt64(column.count))
            writer.bytes(column)
        }
        return writer.bytes
    }

    @Test func aPayloadThatBreaksARuleIsRefused() throws {
        let payload = Self.columns(Self.operations)
        #expect(Self.refusal(payload) == nil)
        let (head, columns) = try Self.parts(payload)
        #expect(Self.assemble(head, columns) == payload)

        // A byte too many in a column, one too few, a column past the end, bytes after the last.
        var longer = columns
        longer[8] += [0]
        #expect(Self.refusal(Self.assemble(head, longer))?.contains("1 bytes left in the tags column") == true)
        var shorter = columns
        shorter[21 + 2].removeLast()
        #expect(Self.refusal(Self.assemble(head, shorter))?.contains("truncated") == true)
        #expect(
            Self.refusal(Self.assemble(head, Array(columns.dropLast())) + [5])?
                .contains("the texts of field code 10 column of 5 bytes, past the payload's end") == true)
        #expect(Self.refusal(payload + [0])?.contains("bytes after the last column") == true)

        // A record numbered past what the block named; a record of kind 0.
        var records = columns
        records[3][1] = 9
        #expect(Self.refusal(Self.assemble(head, records))?.contains("record #9 of a block that named 1 so far") == true)
        var kinds = columns
        kinds[4][0] = 0
        #expect(Self.refusal(Self.assemble(head, kinds))?.contains("record kind 0") == true)
        // A record id whose first six bytes come out below 0.
        var times = columns
        var firstTime = ByteReader(columns[5])
        _ = try firstTime.varint()
        times[5] = [0x01] + Array(columns[5][firstTime.offset...])
        #expect(Self.refusal(Self.assemble(head, times))?.contains("a record id's first six bytes out of range") == true)

        // A header with a reserved bit, a value of an unknown type, a text that is not UTF-8.
        var headers = columns
        headers[0][0] |= 0x40
        #expect(Self.refusal(Self.assemble(head, headers))?.contains("reserved bits set") == true)
        var values = columns
        values[10 + 1][0] = 7
        #expect(Self.refusal(Self.assemble(head, values))?.contains("unknown value type 7") == true)
        var texts = columns
        texts[21 + 1][0] = 0xFF
        #expect(Self.refusal(Self.assemble(head, texts))?.contains("not valid UTF-8") == true)
    }
}
