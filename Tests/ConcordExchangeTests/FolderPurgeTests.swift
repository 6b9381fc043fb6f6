import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordStore
import ConcordWire
import Foundation
import Testing

/// A purge through a shared folder: once each replica has synced after receiving it, no file of
/// the folder and no store file holds the record's content (SPEC.md §14, "Purges").
@Suite struct FolderPurgeTests {
    @Test(arguments: [false, true])
    func noCopyOfAPurgedRecordSurvivesOneSyncOfEachReplica(encrypted: Bool) throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = encrypted ? SyncKey.generate() : nil
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let b = try Node(in: directory, "b", seed: 2, key: key)
        let c = try Node(in: directory, "c", seed: 3, key: key)
        let id = try a.store.addNote(NoteDraft(title: "secret-title-F9", body: "secret-body-F9", tags: ["secret-tag-F9"]))
        let kept = try a.store.addNote(NoteDraft(title: "kept-note-F9"))
        try a.sync(folder)
        try b.sync(folder)
        // B edits it (its own file holds the edit), and C holds all of it too.
        b.clock.advance(10)
        try b.store.editNote(id, NotePatch(body: "secret-edit-F9"))
        try b.sync(folder)
        try c.sync(folder)
        if !encrypted { #expect(!filesHolding("secret-edit-F9", in: [folder]).isEmpty) }

        a.clock.advance(20)
        try a.store.purge(.note(id))
        // One sync of each replica after the purge reached it: A publishes the purge and rewrites
        // its files; B and C merge it and rewrite theirs.
        for node in [a, b, c] { try node.sync(folder) }
        let secrets = ["secret-title-F9", "secret-body-F9", "secret-tag-F9", "secret-edit-F9"]
        let paths = [folder] + [a, b, c].map { $0.directory.file("\($0.name).db") }
        for secret in secrets {
            #expect(filesHolding(secret, in: paths) == [], "\(secret) survives")
        }
        for node in [a, b, c] {
            #expect(try node.store.note(id) == nil)
            #expect(try node.store.note(kept)?.title == "kept-note-F9")
            #expect(try node.store.verify().problems == [])
            #expect(try node.dump() == (try a.dump()))
        }
        // Byte scans miss what compression rewrote: every bundle of the folder, read on its own,
        // carries the record's operations elided, or not at all.
        let bundles = FileManager.default.enumerator(atPath: folder)!.compactMap { $0 as? String }.filter { $0.hasSuffix(".cbundle") }
        #expect(!bundles.isEmpty)
        for (index, name) in bundles.enumerated() {
            let reader = try Node(in: directory, "reader\(index)", seed: 100 + UInt64(index), key: key)
            try reader.store.mergeBundle(at: folder + "/" + name)
            let ofRecord = try reader.store.allOperations().filter { $0.record == .note(id) }
            #expect(ofRecord.allSatisfy { $0.purges }, "\(name) carries content of the purged note")
        }
        // A newcomer starts from the folder: it holds the purge, and none of the content.
        let d = try Node(in: directory, "d", seed: 4, key: key)
        try d.sync(folder)
        #expect(try d.dump() == (try a.dump()))
        #expect(try d.store.holdsPurgedRecords())
        #expect(filesHolding("secret-title-F9", in: [d.directory.file("d.db")]) == [])
    }

    /// Bundles are written in format 7 with purges or without (SPEC.md §13, "Which format"), and
    /// carry them.
    @Test func aStoreWritesFormat7BeforeAndAfterAPurge() throws {
        let directory = try TemporaryDirectory()
        let a = try Node(in: directory, "a", seed: 1)
        let id = try a.store.addReminder(ReminderDraft(title: "r"))
        try a.store.exportBundle(to: directory.file("before.cbundle"))
        try a.store.purge(.reminder(id))
        try a.store.exportBundle(to: directory.file("after.cbundle"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.file("before.cbundle")))[8] == 7)
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.file("after.cbundle")))[8] == 7)
        let b = try Node(in: directory, "b", seed: 2)
        try b.store.mergeBundle(at: directory.file("after.cbundle"))
        #expect(try b.dump() == (try a.dump()))
        #expect(try b.store.allOperations() == (try a.store.allOperations()))
    }
}
