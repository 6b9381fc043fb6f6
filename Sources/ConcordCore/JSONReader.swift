/// A pull reader of JSON text (RFC 8259) that arrives in pieces: it hands out one value, one array
/// element or one object member at a time, and holds one buffer of the text, never the whole of
/// it, so that a file of any size is read in constant memory. It knows the line and column of
/// what it reads, so that a reader of a large file names where the text is wrong.
///
/// Any number of values may follow one another at the top level, with or without white space
/// between them (JSON Lines, or `jq`'s output). A byte order mark at the very start is skipped.
///
/// The caller walks the text: `nextValue()` at the top level, then `enterArray()` and
/// `nextElement()`, `enterObject()` and `nextKey()`, and a read or `skipValue()` for each value.
package struct JSONReader {
    /// Where a byte is: its line and its column, both from 1; columns count characters (Unicode
    /// scalars), not bytes.
    package struct Position: Hashable, Sendable, CustomStringConvertible {
        package var line: Int
        package var column: Int

        package init(line: Int, column: Int) {
            self.line = line
            self.column = column
        }

        package var description: String { "line \(line), column \(column)" }
    }

    /// Text that is not JSON, and where.
    package struct SyntaxError: Error, Hashable, Sendable, CustomStringConvertible {
        package var position: Position
        /// What is wrong there, e.g. `expected ',' or ']', found '}'`.
        package var problem: String

        package init(position: Position, problem: String) {
            self.position = position
            self.problem = problem
        }

        package var description: String { "\(position): \(problem)" }
    }

    /// The kinds of JSON value.
    package enum ValueKind: Sendable {
        case object, array, string, number, bool, null

        /// `an object`, `a string`, …, for messages.
        package var described: String {
            switch self {
            case .object: "an object"
            case .array: "an array"
            case .string: "a string"
            case .number: "a number"
            case .bool: "true or false"
            case .null: "null"
            }
        }
    }

    /// Fills the buffer it is given with the next bytes of the text; returns how many, 0 at the end.
    private let read: (UnsafeMutableRawBufferPointer) throws -> Int
    private var buffer: [UInt8]
    /// The bytes of `buffer` that hold text, and the next one to read.
    private var count = 0
    private var index = 0
    /// The offset in the whole text of `buffer[0]`.
    private var bufferOffset = 0
    private var atEndOfInput = false
    private var line = 1
    /// The offset in the whole text where the current line starts, and how many UTF-8
    /// continuation bytes (which start no character) it has before `index`.
    private var lineStart = 0
    private var lineContinuations = 0
    /// The arrays and objects entered and not yet closed, innermost last, with how many elements
    /// or members each has had so far.
    private var openContainers: [(isArray: Bool, count: Int)] = []
    /// The bytes of the string being read.
    private var scratch: [UInt8] = []

    /// A reader of the text that `read` supplies, `bufferSize` bytes at a time.
    package init(bufferSize: Int = 1 << 18, read: @escaping (UnsafeMutableRawBufferPointer) throws -> Int) {
        self.read = read
        buffer = [UInt8](repeating: 0, count: max(16, bufferSize))
    }

    /// A reader of text held in memory.
    package init(bytes: [UInt8]) {
        var offset = 0
        self.init(bufferSize: max(16, min(bytes.count, 1 << 18))) { target in
            let taken = min(target.count, bytes.count - offset)
            if taken > 0 {
                bytes.withUnsafeBytes { source in
                    target.baseAddress!.copyMemory(from: source.baseAddress! + offset, byteCount: taken)
                }
            }
            offset += taken
            return taken
        }
    }

    /// Where the next byte that has not been read is.
    package var position: Position {
        Position(line: line, column: bufferOffset + index - lineStart - lineContinuations + 1)
    }

    // MARK: Walking the text

    /// The kind of the next value at the top level, which is then read as any value is; nil at
    /// the end of the text.
    package mutating func nextValue() throws -> ValueKind? {
        precondition(openContainers.isEmpty, "nextValue() is for the top level")
        if bufferOffset == 0, index == 0 { try skipByteOrderMark() }
        guard try skipSpace() != nil else { return nil }
        return try peekKind()
    }

    /// The kind of the next value, without reading it.
    package mutating func peekKind() throws -> ValueKind {
        guard let byte = try skipSpace() else { throw endOfText() }
        switch byte {
        case UInt8(ascii: "{"): return .object
        case UInt8(ascii: "["): return .array
        case UInt8(ascii: "\""): return .string
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
        case UInt8(ascii: "n"): return .null
        default: throw failure("expected a value, found \(Self.describe(byte))")
        }
    }

    /// Reads the `[` that opens an array.
    package mutating func enterArray() throws {
        try expect(UInt8(ascii: "["), "expected an array")
        openContainers.append((true, 0))
    }

    /// Steps to the next element of the array entered last: true when there is one (read it next),
    /// false when the array has ended (its `]` is read).
    package mutating func nextElement() throws -> Bool {
        precondition(openContainers.last?.isArray == true, "nextElement() outside an array")
        guard let byte = try skipSpace() else { throw endOfText() }
        if byte == UInt8(ascii: "]") {
            index += 1
            openContainers.removeLast()
            return false
        }
        if openContainers[openContainers.count - 1].count > 0 {
            guard byte == UInt8(ascii: ",") else { throw failure("expected ',' or ']', found \(Self.describe(byte))") }
            index += 1
        }
        openContainers[openContainers.count - 1].count += 1
        return true
    }

    /// Reads the `{` that opens an object.
    package mutating func enterObject() throws {
        try expect(UInt8(ascii: "{"), "expected an object")
        openContainers.append((false, 0))
    }

    /// The key of the next member of the object entered last, its `:` read (read its value
    /// next); nil when the object has ended (its `}` is read).
    package mutating func nextKey() throws -> String? {
        precondition(openContainers.last?.isArray == false, "nextKey() outside an object")
        guard var byte = try skipSpace() else { throw endOfText() }
        if byte == UInt8(ascii: "}") {
            index += 1
            openContainers.removeLast()
            return nil
        }
        if openContainers[openContainers.count - 1].count > 0 {
            guard byte == UInt8(ascii: ",") else { throw failure("expected ',' or '}', found \(Self.describe(byte))") }
            index += 1
            guard let next = try skipSpace() else { throw endOfText() }
            byte = next
        }
        guard byte == UInt8(ascii: "\"") else { throw failure("expected a key in double quotes, found \(Self.describe(byte))") }
        let key = try readString()
        guard let colon = try skipSpace() else { throw endOfText() }
        guard colon == UInt8(ascii: ":") else { throw failure("expected ':' after the key, found \(Self.describe(colon))") }
        index += 1
        openContainers[openContainers.count - 1].count += 1
        return key
    }

    /// Reads a string value (or key).
    package mutating func readString() throws -> String {
        guard try skipSpace() == UInt8(ascii: "\"") else { throw failure("expected a string") }
        let start = position
        index += 1
        // Whether the string has been copied to `scratch` (it spans buffers, or has escapes), and
        // whether its bytes as written are not all ASCII (only those can be invalid UTF-8).
        var copied = false
        var nonASCII = false
        while true {
            guard try fill() else { throw failure("the text ends inside a string") }
            var end = index
            var continuations = 0
            while end < count {
                let byte = buffer[end]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { break }
                if byte >= 0x80 {
                    nonASCII = true
                    if byte & 0xC0 == 0x80 { continuations += 1 }
                }
                end += 1
            }
            lineContinuations += continuations
            if !copied, end < count, buffer[end] == UInt8(ascii: "\"") {
                // The whole string is in the buffer, without escapes: decoded where it is.
                guard let string = Self.decode(buffer[index..<end], checking: nonASCII) else { throw notUTF8(start) }
                index = end + 1
                return string
            }
            if !copied {
                scratch.removeAll(keepingCapacity: true)
                copied = true
            }
            scratch.append(contentsOf: buffer[index..<end])
            index = end
            guard index < count else { continue }
            let byte = buffer[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                break
            }
            if byte < 0x20 {
                throw failure("a control character (U+\(Self.hex(UInt32(byte), digits: 4))) must be written as an escape such as \\n or \\u\(Self.hex(UInt32(byte), digits: 4)) inside a string")
            }
            // What an escape stands for is valid UTF-8: it needs no check.
            try readEscape()
        }
        guard let string = Self.decode(scratch[...], checking: nonASCII) else { throw notUTF8(start) }
        return string
    }

    /// The string of UTF-8 `bytes`, nil if they are not valid UTF-8 (checked unless `checking` is
    /// false: bytes all ASCII are valid).
    private static func decode(_ bytes: ArraySlice<UInt8>, checking: Bool) -> String? {
        bytes.withUnsafeBufferPointer { bytes in
            let string = String(decoding: bytes, as: UTF8.self)
            guard checking else { return string }
            // Decoding repairs invalid UTF-8: a string whose bytes changed was not valid.
            var copy = string
            return copy.withUTF8 { $0.elementsEqual(bytes) } ? string : nil
        }
    }

    private func notUTF8(_ start: Position) -> SyntaxError {
        SyntaxError(position: start, problem: "the string that starts here is not valid UTF-8")
    }

    /// Reads `true` or `false`.
    package mutating func readBool() throws -> Bool {
        switch try skipSpace() {
        case UInt8(ascii: "t"):
            try literal("true")
            return true
        case UInt8(ascii: "f"):
            try literal("false")
            return false
        default: throw failure("expected true or false")
        }
    }

    /// Reads `null`.
    package mutating func readNull() throws {
        guard try skipSpace() == UInt8(ascii: "n") else { throw failure("expected null") }
        try literal("null")
    }

    /// Reads a number, and returns its text as written (which RFC 8259's grammar allows).
    package mutating func readNumber() throws -> String {
        guard try skipSpace() != nil else { throw endOfText() }
        var text: [UInt8] = []
        func digits() throws -> Bool {
            var any = false
            while let byte = try peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                text.append(byte)
                index += 1
                any = true
            }
            return any
        }
        func invalid() throws -> Never {
            let found = try peek().map(Self.describe) ?? "the end of the text"
            throw failure("a number must go on with a digit here, not \(found)")
        }
        if try peek() == UInt8(ascii: "-") {
            text.append(UInt8(ascii: "-"))
            index += 1
        }
        if try peek() == UInt8(ascii: "0") {
            text.append(UInt8(ascii: "0"))
            index += 1
            if let byte = try peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                throw failure("a number cannot start with 0 followed by another digit")
            }
        } else if try !digits() {
            try invalid()
        }
        if try peek() == UInt8(ascii: ".") {
            text.append(UInt8(ascii: "."))
            index += 1
            if try !digits() { try invalid() }
        }
        if let byte = try peek(), byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            text.append(byte)
            index += 1
            if let sign = try peek(), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
                text.append(sign)
                index += 1
            }
            if try !digits() { try invalid() }
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Reads a value of any kind and forgets it, checking that it is JSON. Nested arrays and
    /// objects are walked without recursion, so no depth of nesting exhausts the stack.
    package mutating func skipValue() throws {
        let base = openContainers.count
        while true {
            switch try peekKind() {
            case .object: try enterObject()
            case .array: try enterArray()
            case .string: _ = try readString()
            case .number: _ = try readNumber()
            case .bool: _ = try readBool()
            case .null: try readNull()
            }
            // Close what ends here, up to the next value still to read.
            var hasNext = false
            while openContainers.count > base, !hasNext {
                hasNext = openContainers[openContainers.count - 1].isArray ? try nextElement() : try nextKey() != nil
            }
            if openContainers.count == base { return }
        }
    }

    // MARK: Bytes

    /// Makes `buffer[index]` a byte of the text, reading more when the buffer is used up; false at
    /// the end of the text.
    private mutating func fill() throws -> Bool {
        if index < count { return true }
        guard !atEndOfInput else { return false }
        bufferOffset += count
        index = 0
        count = 0
        let read = self.read
        count = try buffer.withUnsafeMutableBytes { try read($0) }
        if count == 0 { atEndOfInput = true }
        return count > 0
    }

    private mutating func peek() throws -> UInt8? {
        try fill() ? buffer[index] : nil
    }

    /// The next byte that is not white space (space, tab, line feed, carriage return), not read.
    private mutating func skipSpace() throws -> UInt8? {
        while try fill() {
            let byte = buffer[index]
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                index += 1
            case UInt8(ascii: "\n"):
                index += 1
                line += 1
                lineStart = bufferOffset + index
                lineContinuations = 0
            default:
                return byte
            }
        }
        return nil
    }

    private mutating func skipByteOrderMark() throws {
        for byte: UInt8 in [0xEF, 0xBB, 0xBF] {
            guard try peek() == byte else { return }
            index += 1
            lineContinuations += byte & 0xC0 == 0x80 ? 1 : 0
        }
        // The mark is no character of the first line.
        lineContinuations += 1
    }

    private mutating func expect(_ byte: UInt8, _ problem: String) throws {
        guard try skipSpace() == byte else { throw failure(problem) }
        index += 1
    }

    private mutating func literal(_ word: StaticString) throws {
        let start = position
        let bytes = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        for byte in bytes {
            guard try peek() == byte else { throw SyntaxError(position: start, problem: "expected \(word) here") }
            index += 1
        }
    }

    /// Reads an escape inside a string, its backslash first, and appends what it stands for.
    private mutating func readEscape() throws {
        let start = position
        index += 1
        guard let byte = try peek() else { throw failure("the text ends inside a string") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scratch.append(byte)
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(0x0A)
        case UInt8(ascii: "r"): scratch.append(0x0D)
        case UInt8(ascii: "t"): scratch.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hexQuad(escapeAt: start)
            if (0xD800...0xDBFF).contains(scalar) {
                // A high surrogate: a low one must follow, and the two make one character.
                guard try peek() == UInt8(ascii: "\\") else { throw lone(start, scalar) }
                index += 1
                guard try peek() == UInt8(ascii: "u") else { throw lone(start, scalar) }
                index += 1
                let low = try hexQuad(escapeAt: start)
                guard (0xDC00...0xDFFF).contains(low) else { throw lone(start, scalar) }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw lone(start, scalar)
            }
            scratch.append(contentsOf: Character(Unicode.Scalar(scalar)!).utf8)
        default:
            throw SyntaxError(position: start, problem: "\\\(Self.describeEscaped(byte)) is not an escape (JSON has \\\", \\\\, \\/, \\b, \\f, \\n, \\r, \\t and \\uXXXX)")
        }
    }

    private mutating func hexQuad(escapeAt start: Position) throws -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            let digit: UInt32
            switch try peek() {
            case let byte? where (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte): digit = UInt32(byte - UInt8(ascii: "0"))
            case let byte? where (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case let byte? where (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw SyntaxError(position: start, problem: "\\u must be followed by four hex digits")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private func lone(_ start: Position, _ scalar: UInt32) -> SyntaxError {
        SyntaxError(position: start, problem: "\\u\(Self.hex(scalar, digits: 4)) is half of a surrogate pair, without its other half")
    }

    // MARK: Errors

    private func failure(_ problem: String) -> SyntaxError {
        SyntaxError(position: position, problem: problem)
    }

    /// The end of the text where more was due.
    private func endOfText() -> SyntaxError {
        switch openContainers.last?.isArray {
        case true?: failure("the text ends inside an array (a ']' is missing)")
        case false?: failure("the text ends inside an object (a '}' is missing)")
        case nil: failure("the text ends where a value was due")
        }
    }

    /// A byte as a message shows it: `'x'` for printable ASCII, else its value.
    private static func describe(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(hex(UInt32(byte), digits: 2))"
    }

    private static func describeEscaped(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? String(Character(Unicode.Scalar(byte))) : "(byte 0x\(hex(UInt32(byte), digits: 2)))"
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
