/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of Concord's bundle blocks.
/// `CRC32C.checksum(Array("123456789".utf8)) == 0xE3069283`.
///
/// Computed eight bytes at a time ("slicing by 8", eight 256-entry tables), over contiguous
/// memory: bundles are checksummed whole, twice per merge, so this is on the merge's hot path.
package struct CRC32C: Sendable {
    /// `tables[k * 256 + b]`: the CRC of byte `b` followed by `k` zero bytes.
    private static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for index in 0..<256 {
            var crc = UInt32(index)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            tables[index] = crc
        }
        for slice in 1..<8 {
            for index in 0..<256 {
                let previous = tables[(slice - 1) * 256 + index]
                tables[slice * 256 + index] = tables[Int(previous & 0xFF)] ^ (previous >> 8)
            }
        }
        return tables
    }()

    private var state: UInt32 = 0xFFFF_FFFF

    /// A checksum of no bytes yet.
    package init() {}

    /// Adds the bytes of `buffer` to the checksum.
    package mutating func update(_ buffer: UnsafeRawBufferPointer) {
        guard !buffer.isEmpty else { return }
        var crc = state
        Self.tables.withUnsafeBufferPointer { table in
            var offset = 0
            let count = buffer.count
            while count - offset >= 8 {
                let low = crc ^ (UInt32(buffer[offset]) | UInt32(buffer[offset + 1]) << 8
                    | UInt32(buffer[offset + 2]) << 16 | UInt32(buffer[offset + 3]) << 24)
                let high = UInt32(buffer[offset + 4]) | UInt32(buffer[offset + 5]) << 8
                    | UInt32(buffer[offset + 6]) << 16 | UInt32(buffer[offset + 7]) << 24
                crc = table[7 * 256 + Int(low & 0xFF)] ^ table[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ table[5 * 256 + Int((low >> 16) & 0xFF)] ^ table[4 * 256 + Int(low >> 24)]
                    ^ table[3 * 256 + Int(high & 0xFF)] ^ table[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ table[1 * 256 + Int((high >> 16) & 0xFF)] ^ table[Int(high >> 24)]
                offset += 8
            }
            while offset < count {
                crc = table[Int((crc ^ UInt32(buffer[offset])) & 0xFF)] ^ (crc >> 8)
                offset += 1
            }
        }
        state = crc
    }

    /// Adds `bytes` to the checksum.
    package mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Adds `bytes` to the checksum.
    package mutating func update(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The checksum of every byte added so far.
    package var value: UInt32 { state ^ 0xFFFF_FFFF }

    /// The CRC-32C of `bytes`, in one call.
    package static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var crc = CRC32C()
        crc.update(bytes)
        return crc.value
    }

    /// The CRC-32C of `bytes`, in one call.
    package static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc = CRC32C()
        crc.update(bytes)
        return crc.value
    }
}
