import ConcordCore
import Foundation
import Testing

/// Golden files under `Fixtures/`: each binary file decodes to exactly the operations its JSON
/// file lists, and encoding those operations again gives the same bytes.
@Suite struct FixtureTests {
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")

    /// `oprun-v1/NAME.oprun`, `oprun-v2/` of runs whose assigns carry predecessors, `oprun-v3/`
    /// of runs with purges and elided operations, and `oprun-v4/` of runs with compacted seqs
    /// (SPEC.md §8.3).
    static func runFixtures() throws -> [String] {
        try ["oprun-v1", "oprun-v2", "oprun-v3", "oprun-v4"].flatMap { version in
            try FileManager.default.contentsOfDirectory(atPath: fixtures.appendingPathComponent(version).path)
                .filter { $0.hasSuffix(".oprun") }.sorted().map { "\(version)/\($0)" }
        }
    }

    @Test func everyOperationRunFixtureHasItsExpectation() throws {
        #expect(try Set(Self.runFixtures().map { $0.prefix(8) }) == ["oprun-v1", "oprun-v2", "oprun-v3", "oprun-v4"])
    }

    @Test(arguments: try runFixtures())
    func operationRunFixtureDecodes(_ name: String) throws {
        let bytes = [UInt8](try Data(contentsOf: Self.fixtures.appendingPathComponent(name)))
        let expectedURL = Self.fixtures.appendingPathComponent(name.replacingOccurrences(of: ".oprun", with: ".json"))
        let expected = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: expectedURL)) as? [String: Any])
        let authorHex = try #require(expected["author"] as? String)
        let author = try #require(ReplicaID(hex: authorHex))
        let firstSeq = UInt64(try #require(expected["firstSeq"] as? Int))
        let count = try #require(expected["count"] as? Int)

        let operations = try OperationCodec.decode(bytes, author: author, firstSeq: firstSeq, count: count)
        let decodedJSON = try JSONSerialization.jsonObject(with: Data(JSON.array(operations.map(\.json)).canonical.utf8))
        #expect(NSArray(array: decodedJSON as! [Any]) == NSArray(array: try #require(expected["operations"] as? [Any])))

        var writer = ByteWriter()
        OperationCodec.encode(operations, covering: firstSeq...(firstSeq + UInt64(count) - 1), into: &writer)
        #expect(writer.bytes == bytes, "re-encoding \(name) changed its bytes")
    }

    @Test func operationRunFixtureRefusesEveryTruncationAndFlippedReservedBit() throws {
        let directory = Self.fixtures.appendingPathComponent("oprun-v1")
        let bytes = [UInt8](try Data(contentsOf: directory.appendingPathComponent("basic.oprun")))
        let author = ReplicaID(hex: "5f0c2a9e4b7d4e21a3c8d6e9f1b27c40")!
        for length in 0..<bytes.count {
            #expect(throws: DecodeError.self, "cut at \(length)") {
                try OperationCodec.decode(Array(bytes[..<length]), author: author, firstSeq: 1, count: 11)
            }
        }
        var reserved = bytes
        reserved[0] |= 0x80
        #expect(throws: DecodeError.self) { try OperationCodec.decode(reserved, author: author, firstSeq: 1, count: 11) }
        #expect(throws: DecodeError.self) { try OperationCodec.decode(bytes + [0], author: author, firstSeq: 1, count: 11) }
    }
}
