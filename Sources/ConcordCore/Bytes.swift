#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// Appends the primitives of Concord's binary formats (SPEC.md, "Primitives").
///
/// Inlinable: the merge writes a few varints per record and per operation, and a call across
/// modules for each costs more than the varint.
public struct ByteWriter: Sendable {
    @usableFromInline var storage: [UInt8]

    /// An empty writer with room reserved for `capacity` bytes.
    public init(capacity: Int = 0) {
        storage = []
        storage.reserveCapacity(capacity)
    }

    /// The bytes written so far.
    public var bytes: [UInt8] {
        _read { yield storage }
    }

    /// Forgets the bytes written, keeping the capacity (for a writer used again and again).
    public mutating func removeAll() { storage.removeAll(keepingCapacity: true) }

    /// One byte, as it is.
    @inlinable
    public mutating func byte(_ value: UInt8) { storage.append(value) }

    /// The bytes of `values`, as they are (no length prefix).
    @inlinable
    public mutating func bytes(_ values: some Sequence<UInt8>) { storage.append(contentsOf: values) }

    /// Lets `body` append to the bytes written so far (for writers of other formats, such as JSON text).
    public mutating func appending<T>(_ body: (inout [UInt8]) throws -> T) rethrows -> T {
        try body(&storage)
    }

    /// Unsigned LEB128.
    @inlinable
    public mutating func varint(_ value: UInt64) {
        guard value >= 0x80 else { return storage.append(UInt8(truncatingIfNeeded: value)) }
        longVarint(value)
    }

    /// A varint of two bytes or more, built in a local buffer and appended at once: appending
    /// byte by byte checks the storage's capacity and uniqueness for each byte, and a timestamp
    /// takes nine. Kept out of `varint`, so that the one-byte case inlines small.
    @usableFromInline
    mutating func longVarint(_ value: UInt64) {
        // Ten bytes: the longest varint of a UInt64.
        var buffer: (UInt64, UInt16) = (0, 0)
        withUnsafeMutableBytes(of: &buffer) { raw in
            var rest = value
            var count = 0
            while rest >= 0x80 {
                raw[count] = UInt8(truncatingIfNeeded: rest) | 0x80
                rest >>= 7
                count += 1
            }
            raw[count] = UInt8(truncatingIfNeeded: rest)
            storage.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[...count]))
        }
    }

    /// Zigzag, then unsigned LEB128.
    @inlinable
    public mutating func signedVarint(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// A varint byte count, then the UTF-8 bytes.
    @inlinable
    public mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            storage.append(contentsOf: utf8)
        }
    }

    /// A 128-bit id as 16 bytes, big-endian (SPEC.md §8.1).
    @inlinable
    public mutating func identifier(_ id: some Identifier128) {
        fixed64(id.high)
        fixed64(id.low)
    }

    /// Eight bytes, big-endian.
    @inlinable
    public mutating func fixed64(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { storage.append(contentsOf: $0) }
    }
}

/// Reads what `ByteWriter` writes, refusing anything malformed with a `DecodeError`.
public struct ByteReader {
    /// All the bytes being read, including those already read.
    public let bytes: [UInt8]
    /// Where in `bytes` the next read starts.
    public private(set) var offset: Int
    /// Where in `bytes` reading ends: a read past it is `.truncated`.
    package let end: Int

    /// A reader of `bytes` that starts at `offset`.
    public init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
        end = bytes.count
    }

    /// A reader of `bytes[range]`, which shares `bytes` rather than copying it: one of several
    /// readers of the parts of one buffer (the columns of a bundle's block, SPEC.md §13).
    package init(_ bytes: [UInt8], range: Range<Int>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= bytes.count, "a range outside the bytes")
        self.bytes = bytes
        offset = range.lowerBound
        end = range.upperBound
    }

    /// Whether every byte has been read.
    public var isAtEnd: Bool { offset >= end }
    /// How many bytes are left to read.
    public var remaining: Int { end - offset }

    /// The next byte, left unread; nil at the end.
    public func peek() -> UInt8? {
        offset < end ? bytes[offset] : nil
    }

    /// The next byte; `.truncated` at the end.
    public mutating func byte() throws(DecodeError) -> UInt8 {
        guard offset < end else { throw .truncated }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// The next `count` bytes; `.truncated` if fewer are left (or `count` is negative).
    public mutating func bytes(_ count: Int) throws(DecodeError) -> ArraySlice<UInt8> {
        guard count >= 0, count <= remaining else { throw .truncated }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    /// Unsigned LEB128, refused as malformed when it passes 64 bits, is longer than 10 bytes or
    /// ends in a redundant zero byte (SPEC.md §8.1).
    public mutating func varint() throws(DecodeError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try byte()
            if shift == 63, byte > 1 { throw .malformed("varint overflows 64 bits") }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 {
                if byte == 0, shift > 0 { throw .malformed("varint has a redundant zero byte") }
                return result
            }
            shift += 7
            if shift > 63 { throw .malformed("varint longer than 10 bytes") }
        }
    }

    /// Zigzag, then unsigned LEB128, as `ByteWriter.signedVarint(_:)` writes it.
    public mutating func signedVarint() throws(DecodeError) -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    /// A length-prefixed string; its bytes must be valid UTF-8.
    public mutating func string(maxBytes: Int = Int.max) throws(DecodeError) -> String {
        try string(ofLength: try varint(), maxBytes: maxBytes)
    }

    /// The next `length` bytes as a string: they must be valid UTF-8. For a string whose length
    /// travels apart from its bytes (a column of texts, SPEC.md §13).
    package mutating func string(ofLength length: UInt64, maxBytes: Int = Int.max) throws(DecodeError) -> String {
        guard length <= UInt64(min(remaining, maxBytes)) else {
            throw length > UInt64(remaining) ? .truncated : .malformed("string of \(length) bytes exceeds the limit")
        }
        let slice = try bytes(Int(length))
        // Decoding from a buffer takes the standard library's fast path; it repairs invalid UTF-8,
        // so a string whose bytes changed was not valid.
        let valid: String? = slice.withUnsafeBufferPointer { buffer in
            let string = String(decoding: buffer, as: UTF8.self)
            var copy = string
            let same = copy.withUTF8 { $0.count == buffer.count && (buffer.isEmpty || memcmp($0.baseAddress!, buffer.baseAddress!, buffer.count) == 0) }
            return same ? string : nil
        }
        guard let valid else { throw .malformed("string is not valid UTF-8") }
        return valid
    }

    /// Reads past a length-prefixed string without checking its bytes, as `string()` would read
    /// it; returns its length in bytes.
    @discardableResult
    mutating func skipString() throws(DecodeError) -> Int {
        let length = try varint()
        guard length <= UInt64(remaining) else { throw .truncated }
        offset += Int(length)
        return Int(length)
    }

    /// Eight bytes, big-endian.
    public mutating func fixed64() throws(DecodeError) -> UInt64 {
        var value: UInt64 = 0
        for byte in try bytes(8) { value = value << 8 | UInt64(byte) }
        return value
    }

    /// A 128-bit id of type `ID`, from 16 bytes, big-endian.
    @inlinable
    public mutating func identifier<ID: Identifier128>(_: ID.Type = ID.self) throws(DecodeError) -> ID {
        let high = try fixed64()
        return ID(high: high, low: try fixed64())
    }
}

/// Why bytes could not be decoded: they end early, or break a rule of the format.
/// Plumbing of the binary formats; public so that other modules inline it.
public enum DecodeError: Error, Hashable, CustomStringConvertible {
    /// The bytes end before the value does.
    case truncated
    /// The bytes break a rule of the format; the text says which.
    case malformed(String)

    /// The message.
    public var description: String {
        switch self {
        case .truncated: "data ends early (truncated)"
        case .malformed(let why): "malformed data: \(why)"
        }
    }
}

extension Sequence<UInt8> {
    /// The bytes as lowercase hexadecimal digits, two a byte.
    package var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension Array<UInt8> {
    /// The bytes that `text` spells as lowercase hexadecimal digits, two a byte; nil for anything
    /// else (upper case included, so that each value has one spelling).
    package init?(lowercaseHex text: some StringProtocol) {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        for index in stride(from: 0, to: utf8.count, by: 2) {
            guard let high = hexValue(utf8[index]), let low = hexValue(utf8[index + 1]),
                  !(UInt8(ascii: "A")...UInt8(ascii: "F")).contains(utf8[index]),
                  !(UInt8(ascii: "A")...UInt8(ascii: "F")).contains(utf8[index + 1])
            else { return nil }
            bytes.append(high << 4 | low)
        }
        self = bytes
    }
}
