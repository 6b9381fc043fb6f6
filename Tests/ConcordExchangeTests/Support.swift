import ConcordCore
import ConcordExchange
import ConcordStore
import Foundation
import Testing

@_exported import ConcordTestSupport

// Helpers for bundles and shared folders; the shared ones are in Tests/ConcordTestSupport.

/// The repository's `Fixtures/` directory.
let fixturesDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures")

// MARK: Bundles

/// One block of a bundle as its header describes it.
struct BlockInfo: Equatable, CustomStringConvertible {
    var offset: Int
    var type: UInt8
    var flags: UInt8
    var storedLength: Int
    var rawLength: Int

    var payloadOffset: Int { offset + 14 }
    var end: Int { payloadOffset + storedLength }
    var description: String { "block(type \(type) at \(offset), stored \(storedLength), raw \(rawLength))" }
}

/// Walks the blocks of a well-formed bundle (test-side parser of SPEC.md §13's framing).
func blocks(of bytes: [UInt8]) -> [BlockInfo] {
    func u32(_ at: Int) -> Int { bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
    var result: [BlockInfo] = []
    var offset = 10
    while offset + 14 <= bytes.count {
        let block = BlockInfo(offset: offset, type: bytes[offset], flags: bytes[offset + 1], storedLength: u32(offset + 2), rawLength: u32(offset + 6))
        result.append(block)
        offset = block.end
    }
    return result
}

/// Reads a whole bundle from memory: its manifest, operations and summary.
func readBundle(_ bytes: [UInt8], chunk: Int = .max) throws -> (BundleManifest, [Op], BundleSummary) {
    var reader = BundleReader(MemorySource(bytes, chunk: chunk))
    let manifest = try reader.readManifest()
    var operations: [Op] = []
    let summary = try reader.forEachOperation { operations.append($0) }
    return (manifest, operations, summary)
}

/// The error reading `bytes` as a bundle throws, or nil if it reads.
func bundleError(_ bytes: [UInt8], chunk: Int = .max) -> (any Error)? {
    do {
        _ = try readBundle(bytes, chunk: chunk)
        return nil
    } catch {
        return error
    }
}

extension FolderSyncReport {
    /// The lines of the warnings, to compare with text.
    var warningLines: [String] { warnings.map(\.message) }
}
