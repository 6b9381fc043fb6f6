import ConcordCore
import ConcordExchange
import ConcordStore
import Foundation
import Testing

/// What a store knows of the other replicas (SPEC.md §5.8, "Stable removes"): it learns what each
/// holds from the files it reads and the bundles and stores it merges; the stable frontier is
/// what all of them hold; a replica never heard from again holds it back until it is retired,
/// and a retired replica writes and syncs no more until it is forked.
@Suite struct ReplicaStandingTests {
    func standing(_ node: Node, of other: Node) throws -> ReplicaStanding? {
        try node.store.replicas().first { $0.id == other.store.replicaID }
    }

    @Test func aStoreLearnsWhatEachReplicaHoldsFromTheFilesItReads() throws {
        let directory = try TemporaryDirectory()
        let folder = directory.file("shared")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        let (a, b, c) = (try Node(in: directory, "a", seed: 1), try Node(in: directory, "b", seed: 2), try Node(in: directory, "c", seed: 3))
        for node in [a, b, c] { _ = try node.store.addReminder(ReminderDraft(title: node.name)) }
        // What each published last is what the others learn it held: its file's `top`.
        for node in [a, b, c] { try node.sync(folder) }
        let cTop = try c.store.versionVector()
        _ = try b.store.addReminder(ReminderDraft(title: "b again"))
        try b.sync(folder)
        let bTop = try b.store.versionVector()
        try a.sync(folder)

        #expect(try a.store.replicas().map(\.id) == [a, b, c].map(\.store.replicaID).sorted())
        #expect(try standing(a, of: c)?.holds == cTop && standing(a, of: b)?.holds == bTop)
        #expect(try standing(a, of: c)?.heardAt != nil && standing(a, of: a)?.isLocal == true)
        #expect(try a.store.stableFrontier() == cTop, "c, last heard from before b wrote again, holds the rest back")

        // C goes silent; a and b write on. The frontier stays where c was until c is retired.
        _ = try a.store.addReminder(ReminderDraft(title: "later"))
        for node in [a, b, a] { try node.sync(folder) }
        #expect(try a.store.stableFrontier() == cTop)
        #expect(try a.store.retire(c.store.replicaID))
        #expect(try !a.store.retire(c.store.replicaID), "retired already")
        #expect(try standing(a, of: c)?.isRetired == true)
        #expect(try a.store.stableFrontier() == bTop, "b has published nothing since a wrote")

        // The retirement travels. C, back, merges it, then neither writes nor syncs.
        for node in [a, c] { try node.sync(folder) }
        #expect(try c.store.isRetired())
        #expect(throws: ConcordError.self) { try c.store.addReminder(ReminderDraft(title: "refused")) }
        do {
            try c.sync(folder)
            Issue.record("a retired store synced")
        } catch let error as ConcordError {
            #expect(error.code == .retired && error.message.contains(c.store.replicaID.hex))
        }
        let dump = try c.dump()
        #expect(dump.contains(#""kind":"replica","retired":true"#))

        // Forked, it goes on as a new replica, keeping what it held, and the others learn of it.
        try c.store.close()
        let (forked, former) = try ConcordStore.fork(at: directory.file("c.db"))
        #expect(former == c.store.replicaID)
        _ = try forked.addReminder(ReminderDraft(title: "back"))
        try FolderSync(store: forked, folder: folder).sync()
        try a.sync(folder)
        #expect(try a.store.replicas().first { $0.id == forked.replicaID }?.holds == forked.versionVector())
        #expect(try a.store.reminders().contains { $0.title == "back" })
        try forked.close()
    }

    @Test func aStoreLearnsFromTheBundlesAndStoresItMerges() throws {
        let directory = try TemporaryDirectory()
        let (a, b, c) = (try Node(in: directory, "a", seed: 1), try Node(in: directory, "b", seed: 2), try Node(in: directory, "c", seed: 3))
        _ = try b.store.addReminder(ReminderDraft(title: "b"))
        _ = try c.store.addReminder(ReminderDraft(title: "c"))
        let bundle = directory.file("b.cbundle")
        try b.store.exportBundle(to: bundle)
        try a.store.mergeBundle(at: bundle)
        try a.store.merge(storeAt: directory.file("c.db"))
        #expect(try standing(a, of: b)?.holds == b.store.versionVector())
        #expect(try standing(a, of: c)?.holds == c.store.versionVector())
        #expect(try a.store.stableFrontier() == VersionVector(), "b and c never heard of each other's writes, nor of a's")
    }

    @Test func aStoreRetiresNeitherItselfNorAReplicaItDoesNotKnow() throws {
        let directory = try TemporaryDirectory()
        let a = try Node(in: directory, "a", seed: 1)
        let stranger = ReplicaID(high: 0xDEAD, low: 0xBEEF)
        #expect { try a.store.retire(a.store.replicaID) } throws: { ($0 as? ConcordError)?.code == .invalidChange }
        #expect { try a.store.retire(stranger) } throws: { ($0 as? ConcordError)?.code == .notFound }
        #expect(try a.store.status().operations == 0, "nothing was written")
    }
}
