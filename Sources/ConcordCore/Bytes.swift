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
package struct ByteWriter: Sendable {
    @usableFromInline var storage: [UInt8]

    package init(capacity: Int = 0) {
        storage = []
        storage.reserveCapacity(capacity)
    }

    /// The bytes written so far.
    package var bytes: [UInt8] {
        _read { yield storage }
    }

    /// Forgets the bytes written, keeping the capacity (for a writer used again and again).
    package mutating func removeAll() { storage.removeAll(keepingCapacity: true) }

    @inlinable
    package mutating func byte(_ value: UInt8) { storage.append(value) }

    package mutating func bytes(_ values: some Sequence<UInt8>) { storage.append(contentsOf: values) }

    /// Lets `body` append to the bytes written so far (for writers of other formats, such as JSON text).
    package mutating func appending<T>(_ body: (inout [UInt8]) throws -> T) rethrows -> T {
        try body(&storage)
    }

    /// Unsigned LEB128.
    @inlinable
    package mutating func varint(_ value: UInt64) {
        var rest = value
        while rest >= 0x80 {
            storage.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        storage.append(UInt8(truncatingIfNeeded: rest))
    }

    /// Zigzag, then unsigned LEB128.
    @inlinable
    package mutating func signedVarint(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// A varint byte count, then the UTF-8 bytes.
    package mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            storage.append(contentsOf: utf8)
        }
    }

    package mutating func identifier(_ id: some Identifier128) {
        fixed64(id.high)
        fixed64(id.low)
    }

    /// Eight bytes, big-endian.
    package mutating func fixed64(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { storage.append(contentsOf: $0) }
    }
}

/// Reads what `ByteWriter` writes, refusing anything malformed with a `DecodeError`.
package struct ByteReader {
    package let bytes: [UInt8]
    package private(set) var offset: Int

    package init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    package var isAtEnd: Bool { offset >= bytes.count }
    package var remaining: Int { bytes.count - offset }

    package mutating func byte() throws(DecodeError) -> UInt8 {
        guard offset < bytes.count else { throw .truncated }
        defer { offset += 1 }
        return bytes[offset]
    }

    package mutating func bytes(_ count: Int) throws(DecodeError) -> ArraySlice<UInt8> {
        guard count >= 0, count <= remaining else { throw .truncated }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    package mutating func varint() throws(DecodeError) -> UInt64 {
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

    package mutating func signedVarint() throws(DecodeError) -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    /// A length-prefixed string; its bytes must be valid UTF-8.
    package mutating func string(maxBytes: Int = Int.max) throws(DecodeError) -> String {
        let length = try varint()
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

    package mutating func fixed64() throws(DecodeError) -> UInt64 {
        var value: UInt64 = 0
        for byte in try bytes(8) { value = value << 8 | UInt64(byte) }
        return value
    }

    package mutating func identifier<ID: Identifier128>(_: ID.Type = ID.self) throws(DecodeError) -> ID {
        let high = try fixed64()
        return ID(high: high, low: try fixed64())
    }
}

package enum DecodeError: Error, Hashable, CustomStringConvertible {
    case truncated
    case malformed(String)

    package var description: String {
        switch self {
        case .truncated: "data ends early (truncated)"
        case .malformed(let why): "malformed data: \(why)"
        }
    }
}
