import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordPeer
import ConcordStore
import Foundation
import Testing

@testable import ConcordNet

/// A replaced sync key stops working at once (SPEC.md §15.1): a server reads the store's key for
/// each session, and a session under way applies no batch and sends no operations once the store
/// holds another key.
@Suite struct KeyRotationTests {
    static let replaced = ConcordError(.keyReplaced, "this store's sync key was replaced during the session; peers need the new key")
    static let toldPeer = ConcordError(.peerError, "the peer ended the session: its sync key was replaced during the session; this side needs the new key")

    /// Replaces the store's key the first time `onProgress` is called, while the session waits on
    /// its own thread: between two batches applied, or two chunks of operations sent.
    ///
    /// The replacement runs on a thread of its own, and the session goes on once the new key is
    /// committed: `setSyncKey` then checkpoints the old key out of the files (SPEC.md §15.1), which
    /// waits for the session's reads under way to end, as another process's `key generate --force`
    /// would.
    final class Rotation: @unchecked Sendable {
        private let lock = NSLock()
        private var done = false
        let store: ConcordStore
        let newKey = SyncKey.generate()

        init(_ store: ConcordStore) { self.store = store }

        func onProgress(_: PeerProgress) {
            let first = lock.withLock { () -> Bool in
                defer { done = true }
                return !done
            }
            guard first else { return }
            let (store, newKey) = (store, newKey)
            Thread.detachNewThread { _ = try? store.setSyncKey(newKey, replacing: true) }
            while (try? store.syncKey()) != newKey { Thread.sleep(forTimeInterval: 0.001) }
        }
    }

    @Test func eachSessionUsesTheKeyTheStoreHoldsWhenItStarts() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        try a.addReminders(5, label: "A")
        let server = try TestServer(a)
        defer { server.stop() }
        let newKey = SyncKey.generate()
        try a.store.setSyncKey(newKey, replacing: true)

        let old = try Node(in: directory, "old", seed: 2, key: key)
        try old.addReminders(3, label: "old")
        let (opsOld, opsA) = (old.operationCount, a.operationCount)
        let refused = try old.sync(with: server.address)
        #expect(refused.failure == ConcordError(.wrongKey, "the peer does not hold this store's sync key"))
        #expect(old.operationCount == opsOld && a.operationCount == opsA)
        #expect(!(try a.store.allOperations()).contains { $0.id.replica == old.store.replicaID })
        #expect(!(try old.store.allOperations()).contains { $0.id.replica == a.store.replicaID })

        let new = try Node(in: directory, "new", seed: 3, key: newKey)
        #expect(try new.sync(with: server.address).finished)
        #expect(try new.dump() == (try a.dump()))
    }

    @Test func aKeyReplacedDuringASessionStopsTheBatchesItWouldApply() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let b = try Node(in: directory, "b", seed: 2, key: key)
        try b.addReminders(12_000, label: "B")  // 36,000 operations: three batches or more
        let rotation = Rotation(a.store)
        var configuration = quickConfiguration(idle: .seconds(10))
        configuration.batchesPerApply = 1
        let server = try TestServer(a, configuration: configuration, onProgress: rotation.onProgress)
        defer { server.stop() }

        let record = try b.sync(with: server.address)
        #expect(record.failure == Self.toldPeer, "\(record.logLine)")
        let logged = try #require(server.waitForRecords(1).first)
        #expect(logged.failure == Self.replaced, "\(logged.logLine)")
        // The key changes once the first batch has been applied, while the second may be already
        // merging (its transaction began under the old key); none after them is applied.
        let applied = a.operationCount
        #expect(applied > 0 && applied <= 2 * PeerProtocol.maxBatchOperations, "\(applied)")
        #expect(logged.newOperations == applied)
    }

    @Test func aKeyReplacedDuringASessionStopsTheOperationsItWouldSend() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        try a.addReminders(12_000, label: "A")
        let b = try Node(in: directory, "b", seed: 2, key: key)
        let rotation = Rotation(a.store)
        var configuration = quickConfiguration(idle: .seconds(10))
        configuration.readChunkOperations = 1_000
        let server = try TestServer(a, configuration: configuration, onProgress: rotation.onProgress)
        defer { server.stop() }

        let record = try b.sync(with: server.address)
        #expect(record.failure == Self.toldPeer, "\(record.logLine)")
        #expect(server.waitForRecords(1).first?.failure == Self.replaced)
        // At most the first chunk, read before the key changed, went out.
        #expect(b.operationCount <= 1_000, "\(b.operationCount)")
    }
}
