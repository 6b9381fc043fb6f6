import ConcordCore
import Foundation
import PropertyBased
import Testing

/// `JSONReader`, the pull reader of JSON text that `syncctl import` reads files with: it reads
/// the same values whether the text arrives whole or a byte at a time (as swift-nio checks its
/// decoders), and names the line and column where text is not JSON.
@Suite struct JSONReaderTests {
    /// A JSON value as the tests compare them: numbers as their text.
    indirect enum Value: Equatable {
        case null
        case bool(Bool)
        case number(String)
        case string(String)
        case array([Value])
        case object([(String, Value)])

        static func == (lhs: Value, rhs: Value) -> Bool {
            switch (lhs, rhs) {
            case (.null, .null): true
            case let (.bool(a), .bool(b)): a == b
            case let (.number(a), .number(b)): a == b
            case let (.string(a), .string(b)): a.utf8.elementsEqual(b.utf8)
            case let (.array(a), .array(b)): a == b
            case let (.object(a), .object(b)): a.count == b.count && zip(a, b).allSatisfy { $0.0.utf8.elementsEqual($1.0.utf8) && $0.1 == $1.1 }
            default: false
            }
        }
    }

    /// Reads one value with the reader's walking calls.
    static func read(_ reader: inout JSONReader) throws -> Value {
        switch try reader.peekKind() {
        case .null:
            try reader.readNull()
            return .null
        case .bool: return .bool(try reader.readBool())
        case .number: return .number(try reader.readNumber())
        case .string: return .string(try reader.readString())
        case .array:
            try reader.enterArray()
            var items: [Value] = []
            while try reader.nextElement() { items.append(try read(&reader)) }
            return .array(items)
        case .object:
            try reader.enterObject()
            var members: [(String, Value)] = []
            while let key = try reader.nextKey() { members.append((key, try read(&reader))) }
            return .object(members)
        }
    }

    /// Every top-level value of `text`, delivered `chunk` bytes at a time.
    static func values(of text: [UInt8], chunk: Int) throws -> [Value] {
        var offset = 0
        var reader = JSONReader(bufferSize: 16) { buffer in
            let count = min(chunk, buffer.count, text.count - offset)
            for index in 0..<count { buffer[index] = text[offset + index] }
            offset += count
            return count
        }
        var values: [Value] = []
        while try reader.nextValue() != nil { values.append(try read(&reader)) }
        return values
    }

    /// The error reading `text` ends with, the same at every chunk size.
    static func error(of text: String, sourceLocation: SourceLocation = #_sourceLocation) -> JSONReader.SyntaxError? {
        var errors: [JSONReader.SyntaxError?] = []
        for chunk in [1, 2, 3, 5, 1 << 20] {
            do {
                _ = try values(of: Array(text.utf8), chunk: chunk)
                errors.append(nil)
            } catch let error as JSONReader.SyntaxError {
                errors.append(error)
            } catch {
                Issue.record("\(error)", sourceLocation: sourceLocation)
            }
        }
        #expect(Set(errors.map { $0?.description }).count == 1, "\(errors)", sourceLocation: sourceLocation)
        return errors.first ?? nil
    }

    // MARK: Random documents

    /// A random JSON text from `seed`, and the values it holds: values nested a few levels,
    /// strings with every escape and characters of every UTF-8 length, numbers of every form,
    /// white space of every kind.
    struct Document {
        var generator: SplitMix64
        var text = ""

        init(seed: UInt64) { generator = SplitMix64(seed: seed) }

        mutating func int(_ bound: Int) -> Int { Int(generator.next() % UInt64(bound)) }

        mutating func space() {
            for _ in 0..<int(3) { text += [" ", "\t", "\n", "\r\n"][int(4)] }
        }

        mutating func value(depth: Int) -> Value {
            space()
            defer { space() }
            switch int(depth > 3 ? 5 : 7) {
            case 0:
                text += "null"
                return .null
            case 1:
                let bool = int(2) == 0
                text += bool ? "true" : "false"
                return .bool(bool)
            case 2:
                let number = ["0", "-0", "17", "-42", "3.25", "1e5", "-2.5E-3", "9223372036854775807", "1.0e+2"][int(9)]
                text += number
                return .number(number)
            case 3, 4: return .string(string())
            case 5:
                text += "["
                var items: [Value] = []
                for index in 0..<int(4) {
                    if index > 0 { text += "," }
                    items.append(value(depth: depth + 1))
                }
                space()
                text += "]"
                return .array(items)
            default:
                text += "{"
                var members: [(String, Value)] = []
                for index in 0..<int(4) {
                    if index > 0 { text += "," }
                    space()
                    let key = string()
                    space()
                    text += ":"
                    members.append((key, value(depth: depth + 1)))
                }
                space()
                text += "}"
                return .object(members)
            }
        }

        /// Writes a string; returns what it holds.
        mutating func string() -> String {
            let pieces: [(written: String, meaning: String)] = [
                ("a", "a"), ("\\\"", "\""), ("\\\\", "\\"), ("\\/", "/"), ("\\b\\f\\n\\r\\t", "\u{8}\u{C}\n\r\t"),
                ("\\u00e9", "\u{E9}"), ("\\uD83D\\uDE00", "\u{1F600}"), ("é", "é"), ("😀", "😀"), ("€", "€"), ("\\u0000", "\u{0}"),
                ("\u{7F}", "\u{7F}"), ("\u{85}", "\u{85}"), (" ", " "),
            ]
            text += "\""
            var meaning = ""
            for _ in 0..<int(6) {
                let piece = pieces[int(pieces.count)]
                text += piece.written
                meaning += piece.meaning
            }
            text += "\""
            return meaning
        }
    }

    @Test func readsTheValuesOfRandomTextsWhateverTheChunks() async {
        await propertyCheck(count: 300, input: Gen<UInt64>.value(in: 0...UInt64.max), Gen.int(in: 1...40)) { seed, chunk in
            var document = Document(seed: seed)
            // Values one after another; two numbers or literals in a row need white space between them.
            let expected = (0..<(1 + document.int(3))).map { _ in
                defer { document.text += " " }
                return document.value(depth: 0)
            }
            do {
                #expect(try Self.values(of: Array(document.text.utf8), chunk: chunk) == expected, "\(document.text)")
            } catch {
                Issue.record("\(error) reading \(document.text)")
            }
        }
    }

    @Test func valuesFollowEachOtherWithOrWithoutSpace() throws {
        let text = "\u{FEFF}[1,2]{\"a\":null}\"s\"true 12 3\n[]"
        #expect(try Self.values(of: Array(text.utf8), chunk: 1) == [
            .array([.number("1"), .number("2")]), .object([("a", .null)]), .string("s"), .bool(true), .number("12"), .number("3"), .array([]),
        ])
        #expect(try Self.values(of: Array(" \n\t\r\n".utf8), chunk: 2) == [])
    }

    /// A million nested arrays are skipped without exhausting the stack.
    @Test func skipsDeepNesting() throws {
        let depth = 1_000_000
        var reader = JSONReader(bytes: Array(String(repeating: "[", count: depth).utf8) + Array(String(repeating: "]", count: depth).utf8))
        #expect(try reader.nextValue() == .array)
        try reader.skipValue()
        #expect(try reader.nextValue() == nil)
    }

    @Test(arguments: [
        ("[1,2", "line 1, column 5: the text ends inside an array (a ']' is missing)"),
        ("{\"a\":1,}", "line 1, column 8: expected a key in double quotes, found '}'"),
        ("{\"a\" 1}", "line 1, column 6: expected ':' after the key, found '1'"),
        ("[1 2]", "line 1, column 4: expected ',' or ']', found '2'"),
        ("{\"a\":1 \"b\":2}", "line 1, column 8: expected ',' or '}', found '\"'"),
        ("\n\n  nul", "line 3, column 3: expected null here"),
        ("[01]", "line 1, column 3: a number cannot start with 0 followed by another digit"),
        ("[1.]", "line 1, column 4: a number must go on with a digit here, not ']'"),
        ("[-]", "line 1, column 3: a number must go on with a digit here, not ']'"),
        ("\"é😀\u{1}\"", "line 1, column 4: a control character (U+0001) must be written as an escape such as \\n or \\u0001 inside a string"),
        ("[\"\\q\"]", "line 1, column 3: \\q is not an escape (JSON has \\\", \\\\, \\/, \\b, \\f, \\n, \\r, \\t and \\uXXXX)"),
        ("\"\\u12G4\"", "line 1, column 2: \\u must be followed by four hex digits"),
        ("\"\\uD800x\"", "line 1, column 2: \\uD800 is half of a surrogate pair, without its other half"),
        ("\"\\uDC00\"", "line 1, column 2: \\uDC00 is half of a surrogate pair, without its other half"),
        ("[\"abc", "line 1, column 6: the text ends inside a string"),
        ("é", "line 1, column 1: expected a value, found byte 0xC3"),
        ("[,1]", "line 1, column 2: expected a value, found ','"),
        ("{\"k\":\n}", "line 2, column 1: expected a value, found '}'"),
    ])
    func namesWhereTextIsNotJSON(text: String, expected: String) {
        #expect(Self.error(of: text)?.description == expected)
    }

    /// Read where it lies in the buffer (whole) and copied piece by piece (a byte at a time).
    @Test(arguments: [1, 1 << 20])
    func invalidUTF8InAStringIsRefusedWhereTheStringStarts(chunk: Int) {
        let text: [UInt8] = Array("[1,\n  \"ab".utf8) + [0xFF] + Array("\"]".utf8)
        #expect(throws: JSONReader.SyntaxError(position: .init(line: 2, column: 3), problem: "the string that starts here is not valid UTF-8")) {
            try Self.values(of: text, chunk: chunk)
        }
        let truncated: [UInt8] = Array("\"caf".utf8) + [0xC3] + Array("\"".utf8)
        #expect(throws: JSONReader.SyntaxError(position: .init(line: 1, column: 1), problem: "the string that starts here is not valid UTF-8")) {
            try Self.values(of: truncated, chunk: chunk)
        }
    }

    /// The source's own errors (a file that cannot be read) come out as they are.
    @Test func theSourcesErrorsPassThrough() {
        struct Unreadable: Error, Equatable {}
        var reader = JSONReader { _ in throw Unreadable() }
        #expect(throws: Unreadable()) { try reader.nextValue() }
    }
}
