import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordNet
import ConcordStore
import ConcordWire
import Foundation
import GRDB
import Testing

/// Removes that every replica holds are dropped with the adds they named (SPEC.md §5.8, "Stable
/// removes"), and a replica that holds such an add and not the remove (a backup restored under
/// a new id) drops it once it merges from a replica that dropped them: by a bundle, or by a peer.
@Suite struct StableRemoveTests {
    /// Three replicas through a folder; c's backup is taken while it holds the tag's add and not
    /// yet its remove. Once every replica has published that it holds the remove, a drops it.
    static func world(_ directory: TemporaryDirectory, key: SyncKey) throws -> (a: Node, backup: String, ref: RecordRef) {
        let folder = try directory.directory("shared")
        let (a, b, c) = (try Node(in: directory, "a", seed: 1, key: key), try Node(in: directory, "b", seed: 2, key: key), try Node(in: directory, "c", seed: 3, key: key))
        let ref = RecordRef.reminder(try a.store.addReminder(ReminderDraft(title: "milk", tags: ["home", "shop"])))
        for node in [a, b, c] { try node.sync(folder) }
        let backup = directory.file("c-backup.db")
        try DatabaseQueue(path: c.store.path).inDatabase { db in try db.execute(sql: "VACUUM INTO ?", arguments: [backup]) }

        b.clock.advance(1_000)
        try b.store.perform(.tag(add: [], remove: ["home"]), on: ref)
        // Each writes and publishes after it holds the remove, so the others learn that it does.
        for node in [b, a, c] { try node.sync(folder) }
        for node in [a, b, c] {
            _ = try node.store.addNote(NoteDraft(title: "from \(node.name)"))
            try node.sync(folder)
        }
        try a.sync(folder)
        #expect(try a.store.stableFrontier().covers(b.store.versionVector()), "every replica is known to hold the remove")

        let dump = try a.dump()
        let report = try a.store.compact(keeping: .none)
        #expect(report.droppedOperations >= 2, "the remove and the add it named")
        #expect(!(try a.store.allOperations()).contains { if case .removeTag = $0.action { true } else { false } })
        #expect(try !a.store.droppedStableThrough().entries.isEmpty)
        #expect(try a.dump() == dump)
        #expect(try a.store.verify().problems == [])
        return (a, backup, ref)
    }

    /// The restored backup, forked: it shows the tag the others removed.
    static func restore(_ backup: String, key: SyncKey) throws -> ConcordStore {
        let (restored, _) = try ConcordStore.fork(at: backup)
        #expect(try restored.state(of: .reminder(try #require(restored.reminders().first).id))?.tags.present.map(\.string) == ["home", "shop"])
        return restored
    }

    @Test func aBackupFromBeforeARemoveDropsTheAddFromABundle() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let (a, backup, _) = try Self.world(directory, key: key)
        let restored = try Self.restore(backup, key: key)
        defer { try? restored.close() }

        // Its vector does not hold where a dropped removes: the bundle is cut from the empty
        // vector, in format 5, and claims every compacted seq.
        let path = directory.file("to-restored.cbundle")
        try a.store.exportBundle(to: path, since: try restored.versionVector(), encryptingWith: key)
        var reader = try ConcordStore.bundleReader(at: path, key: key)
        let manifest = try reader.readManifest()
        let dropped = try a.store.droppedStableThrough()
        #expect(manifest.base == VersionVector() && manifest.droppedStableThrough == dropped)
        try restored.mergeBundle(at: path)
        #expect(try restored.dump() == a.dump())
        #expect(try restored.verify().problems == [])
        #expect(try restored.droppedStableThrough() == a.store.droppedStableThrough())
        #expect(!(try restored.allOperations()).contains { if case .removeTag = $0.action { true } else { false } })
    }

    /// Both in one merge, in either order: a bundle of the backup, which holds the add in full,
    /// and one of a, which claims it compacted (as `syncctl merge OLD NEW` reads them, or a sync
    /// reads a shared folder's files). The copy the merge itself brings goes as one held before.
    @Test func anAddDeliveredBesideAClaimOfItInOneMergeIsDropped() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let (a, backup, _) = try Self.world(directory, key: key)
        let restored = try Self.restore(backup, key: key)
        defer { try? restored.close() }
        let (old, new) = (directory.file("old.cbundle"), directory.file("new.cbundle"))
        try restored.exportBundle(to: old, since: VersionVector(), encryptingWith: key)
        try a.store.exportBundle(to: new, since: VersionVector(), encryptingWith: key)
        for (index, order) in [[old, new], [new, old]].enumerated() {
            let fresh = try Node(in: directory, "fresh\(index)", seed: 10 + UInt64(index), key: key)
            _ = try fresh.store.merge(filesAt: order)
            #expect(try fresh.dump() == a.dump(), "\(order.map { ($0 as NSString).lastPathComponent })")
            #expect(try fresh.store.verify().problems == [])
            #expect(!(try fresh.store.allOperations()).contains { if case .removeTag = $0.action { true } else { false } })
        }
    }

    @Test func aBackupFromBeforeARemoveDropsTheAddInAPeerSession() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let (a, backup, _) = try Self.world(directory, key: key)
        let restored = try Self.restore(backup, key: key)
        defer { try? restored.close() }
        let server = try TestServer(a)
        defer { server.stop() }
        let record = try runOffThePool { [restored] in
            try await PeerClient.sync(store: restored, address: server.address, configuration: quickConfiguration(idle: .seconds(10)))
        }
        #expect(record.finished, "\(record.logLine)")
        #expect(try restored.dump() == a.dump())
        #expect(try restored.verify().problems == [])
        #expect(try restored.droppedStableThrough() == a.store.droppedStableThrough())
    }

    /// a and b sync through a folder (each then knows the other), and a removes the tag of a
    /// reminder both hold.
    static func removedOnceBothSynced(_ directory: TemporaryDirectory) throws -> (a: Node, b: Node, folder: String) {
        let folder = try directory.directory("shared")
        let (a, b) = (try Node(in: directory, "a", seed: 1), try Node(in: directory, "b", seed: 2))
        let ref = RecordRef.reminder(try a.store.addReminder(ReminderDraft(title: "milk", tags: ["home"])))
        _ = try b.store.addNote(NoteDraft(title: "from b"))
        for node in [a, b, a] { try node.sync(folder) }
        a.clock.advance(1_000)
        try a.store.perform(.tag(add: [], remove: ["home"]), on: ref)
        return (a, b, folder)
    }

    static func removesHeld(by node: Node) throws -> Int {
        try node.store.allOperations().filter { if case .removeTag = $0.action { true } else { false } }.count
    }

    /// A replica that only reads says what it holds with a file of nothing, once its newest file
    /// is an hour old (SPEC.md §14, step 2): until then it holds the remove back, and after, the
    /// remove is dropped. With nothing new to hold, it publishes nothing.
    @Test func aReplicaThatOnlyReadsSaysWhatItHoldsOnceAnHour() throws {
        let directory = try TemporaryDirectory()
        let (a, b, folder) = try Self.removedOnceBothSynced(directory)
        try a.sync(folder)
        func removesHeld() throws -> Int { try Self.removesHeld(by: a) }

        // b reads the remove; its own file is newer than an hour: it publishes nothing.
        #expect(try b.sync(folder).publishedFile == nil)
        try a.sync(folder)
        try a.store.compact(keeping: .none)
        #expect(try removesHeld() == 1, "b is known to hold only what its file said")

        b.clock.advance(FolderSync.topRefreshMillis)
        let said = try b.sync(folder)
        #expect(said.publishedFile != nil && said.publishedOperations == 0, "\(said)")
        #expect(try b.sync(folder).publishedFile == nil, "it said so once")
        try a.sync(folder)
        #expect(try a.store.stableFrontier().covers(a.store.versionVector()))
        try a.store.compact(keeping: .none)
        #expect(try removesHeld() == 0)
        #expect(try a.store.verify().problems == [])
        try b.sync(folder)
        #expect(try a.dump() == b.dump())
    }

    /// A replica never heard from since before the remove holds it back: nothing is dropped until
    /// it is retired.
    @Test func aSilentReplicaHoldsTheRemoveBackUntilItIsRetired() throws {
        let directory = try TemporaryDirectory()
        let (a, b, _) = try Self.removedOnceBothSynced(directory)
        func removesHeld() throws -> Int { try Self.removesHeld(by: a) }
        try a.store.compact(keeping: .none)
        #expect(try removesHeld() == 1, "b was last heard of before the remove")
        #expect(try a.store.droppedStableThrough() == VersionVector())
        try a.store.retire(b.store.replicaID)
        try a.store.compact(keeping: .none)
        #expect(try removesHeld() == 0)
        #expect(try a.store.verify().problems == [])
    }
}
