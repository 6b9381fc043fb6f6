import ConcordCore
import ConcordExchange
import ConcordStore
import Foundation
import Testing

/// Bundles built by hand to break one rule each, behind correct checksums: each is refused with
/// one clear line and changes nothing (issue 6, "Hostile bytes"; SPEC.md §4.3, §8, §13).
@Suite struct HostileBundleTests {
    static let author = ReplicaID(high: 0xBAD0_0000_0000_0001, low: 0xBAD)

    static func operation(seq: UInt64, _ action: Action = .assign(.title, .string("t"))) -> Op {
        Op(id: OperationID(replica: author, seq: seq), timestamp: Timestamp(physicalMillis: baseMillis, logical: 0),
           record: .note(RecordID(high: 0x5EC, low: 1)), action: action)
    }

    /// A bundle of `operations` as `BundleWriter` writes it (it checks nothing).
    static func bundle(_ operations: [Op]) throws -> [UInt8] {
        var bytes: [UInt8] = []
        let manifest = BundleManifest(publisher: author, createdMillis: baseMillis, base: VersionVector(), top: VersionVector())
        var writer = try BundleWriter(manifest: manifest) { bytes += $0 }
        for operation in operations { try writer.append(operation) }
        _ = try writer.finish()
        return bytes
    }

    /// Seqs past 2^63−1 are invalid (SPEC.md §4.3): a store keeps seqs in SQLite's signed 64-bit
    /// integers, and `WriteContext.appendToLog` converted them with a trapping `Int64(_:)`, so one
    /// such operation in a bundle (or a shared folder) crashed every merge of it.
    @Test func operationsPastTheLargestSeqAreRefusedNotACrash() async throws {
        for seq in [Op.maxSeq + 1, UInt64.max - 1, UInt64.max] {
            let bytes = try Self.bundle([Self.operation(seq: seq)])
            guard case .corrupt(let why)? = bundleError(bytes) as? BundleError else {
                Issue.record("a bundle holding seq \(seq) was read")
                continue
            }
            #expect(why.contains("sequence number"), "\(why)")
        }
        #expect(throws: Never.self) { try Self.operation(seq: Op.maxSeq).validate() }

        // Merged, whether from a bundle file or as operations: refused, the store unchanged, no crash.
        await #expect(processExitsWith: .success) {
            let directory = try TemporaryDirectory()
            let store = try ConcordStore.create(at: directory.file("store.db"), environment: environment(clock: ManualClock(baseMillis), seed: 3))
            try store.addNote(NoteDraft(title: "mine"))
            let dump = try store.dump()
            let last = HostileBundleTests.operation(seq: Op.maxSeq + 1)
            let bytes = try HostileBundleTests.bundle([last])
            try Data(bytes).write(to: URL(fileURLWithPath: directory.file("huge-seq.cbundle")))
            do {
                try store.mergeBundle(at: directory.file("huge-seq.cbundle"))
                exit(2)
            } catch let error as ConcordError where error.code == .invalidInput {}
            do {
                try store.merge([HostileBundleTests.operation(seq: Op.maxSeq), last])
                exit(3)
            } catch let error as ConcordError where error.code == .invalidInput {}
            guard try store.dump() == dump, try store.verify().isSound else { exit(4) }
            // The largest valid seq is held like any other.
            try store.merge([HostileBundleTests.operation(seq: Op.maxSeq)])
            guard try store.allOperations().contains(HostileBundleTests.operation(seq: Op.maxSeq)), try store.verify().isSound else { exit(5) }
        }
    }
}
