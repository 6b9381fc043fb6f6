import ConcordCore
import PropertyBased
import Testing

@Suite struct CRC32CTests {
    /// The bit-at-a-time definition (SPEC.md §13), to check the table-driven one against.
    static func reference(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return crc ^ 0xFFFF_FFFF
    }

    @Test func knownAnswers() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8]()) == 0)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)  // RFC 3720, B.4
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
    }

    @Test func agreesWithTheDefinitionWhateverTheSplit() async {
        let input = zip(Gen<UInt8>.value(in: 0...255).array(of: 0...300), Gen.int(in: 0...300))
        await propertyCheck(count: 300, input: input) { bytes, cut in
            let split = min(cut, bytes.count)
            var crc = CRC32C()
            crc.update(bytes[..<split])
            crc.update(Array(bytes[split...]))
            #expect(crc.value == Self.reference(bytes))
            #expect(CRC32C.checksum(bytes) == Self.reference(bytes))
        }
    }
}
