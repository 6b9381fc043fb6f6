import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordStore
import Foundation
import Testing

/// Sync keys kept in the store (SPEC.md §15.1) and shared folders of stores that hold one (§14, "Keys").
@Suite struct KeyedFolderSyncTests {
    // MARK: Keys in the store

    @Test func aKeyIsKeptInTheStoreAndItsFilesBecomePrivate() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("s.db")
        let store = try ConcordStore.create(at: path, environment: .deterministic(seed: 1))
        try store.addNote(NoteDraft(title: "a note, so the -wal file exists"))
        #expect(try store.syncKey() == nil)
        for file in [path, path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) {
            chmod(file, 0o644)
        }
        let key = SyncKey.generate()
        #expect(try store.setSyncKey(key))
        #expect(try store.syncKey() == key)
        #expect(try store.setSyncKey(key) == false, "the same key again changes nothing")
        for file in [path, path + "-wal", path + "-shm"] {
            #expect(FileManager.default.fileExists(atPath: file), "\(file)")
            #expect(try mode(file) == 0o600, "\(file) is private to its owner")
        }
        // Another key is refused unless replacing, and the store keeps its key.
        let other = SyncKey.generate()
        #expect(throws: ConcordError.self) { try store.setSyncKey(other) }
        #expect(try store.syncKey() == key)
        #expect(try store.setSyncKey(other, replacing: true))
        #expect(try store.syncKey() == other)

        // The key survives reopening, and its bytes are where SPEC.md §9 says.
        try store.close()
        let reopened = try ConcordStore.open(at: path)
        #expect(try reopened.syncKey() == other)
        #expect(try reopened.syncKeyBytes() == other.bytes)
        #expect(try reopened.verify().problems.isEmpty)
        // The -wal and -shm files SQLite makes afresh take the database file's mode.
        try reopened.close()
        for suffix in ["-wal", "-shm"] { unlink(path + suffix) }
        let again = try ConcordStore.open(at: path)
        try again.addNote(NoteDraft(title: "another"))
        for file in [path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) {
            #expect(try mode(file) == 0o600, "\(file), made after the key was set")
        }
    }

    @Test func aStoreInMemoryKeepsAKeyToo() throws {
        let store = try ConcordStore.inMemory()
        let key = SyncKey.generate()
        try store.setSyncKey(key)
        #expect(try store.syncKey() == key)
    }

    func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return ((attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1) & 0o777
    }

    // MARK: Folders

    @Test func keyedReplicasPublishOnlyCiphertextAndConverge() throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1)
        let b = try Node(in: directory, "b", seed: 2)
        try a.store.setSyncKey(key)
        try b.store.setSyncKey(key)
        let refs = try populate(a.store, clock: a.clock, label: "A")
        try populate(b.store, clock: b.clock, label: "B")
        for replica in [a, b, a] { #expect(try replica.sync(folder).warningLines.isEmpty) }
        #expect(try a.dump() == (try b.dump()))
        for name in try listing(folder).keys {
            let bytes = try readBytes(folder + "/concord-v1/" + name)
            #expect(bytes.starts(with: EncryptedBundleFormat.magic), "\(name) is encrypted")
            // No title, replica id or tag in clear.
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(!text.contains("Call Ana") && !text.contains("Ideas"))
            #expect(!bytes.contains(subsequence: a.store.replicaID.bytes) && !bytes.contains(subsequence: b.store.replicaID.bytes))
        }
        // Later changes too, both ways.
        a.clock.advance(10_000)
        try a.store.editReminder(refs[0].id, ReminderPatch(title: "edited on A"))
        for replica in [a, b] { try replica.sync(folder) }
        #expect(try b.store.reminder(refs[0].id)?.title == "edited on A")
    }

    @Test func storesWithoutTheKeySkipEncryptedFilesWithAWarningAndChangeNothing() throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1)
        try a.store.setSyncKey(key)
        try populate(a.store, clock: a.clock, label: "A")
        try a.sync(folder)
        let file = bundleName(a.hex, 1)

        let plain = try Node(in: directory, "plain", seed: 2)
        let report = try plain.sync(folder)
        #expect(report.importedFiles == 0)
        #expect(report.warnings == [ConcordError(.encryptedBundle, "skipping \(file): the bundle is encrypted (with sync key \(key.id)), and this store has no sync key")])
        #expect(try plain.store.allOperations().isEmpty)

        let wrong = try Node(in: directory, "wrong", seed: 3)
        let other = SyncKey.generate()
        try wrong.store.setSyncKey(other)
        try wrong.store.addNote(NoteDraft(title: "from the wrong key"))
        let wrongReport = try wrong.sync(folder)
        #expect(wrongReport.warningLines == ["skipping \(file): the bundle is encrypted with sync key \(key.id), and this store holds sync key \(other.id)"])
        #expect(try wrong.store.allOperations().allSatisfy { $0.id.replica == wrong.store.replicaID }, "only its own note")
        // The wrong-key replica published its own file, sealed with its key, which a skips in turn.
        let back = try a.sync(folder)
        #expect(back.importedFiles == 0)
        #expect(back.warningLines.count == 1 && back.warningLines[0].contains("this store holds sync key \(key.id)"))
    }

    @Test func aStoreWithAKeySkipsPlainAndTamperedFiles() throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = SyncKey.generate()
        let plain = try Node(in: directory, "plain", seed: 1)
        try populate(plain.store, clock: plain.clock, label: "P")
        try plain.sync(folder)

        let a = try Node(in: directory, "a", seed: 2)
        try a.store.setSyncKey(key)
        let report = try a.sync(folder)
        #expect(report.warningLines == ["skipping \(bundleName(plain.hex, 1)): a plain bundle; this store has a sync key, and takes only bundles encrypted with it from a shared folder"])
        #expect(try a.store.allOperations().isEmpty, "a plain file changes nothing")

        // A keyed replica's file, changed in one byte by whoever writes to the folder.
        let b = try Node(in: directory, "b", seed: 3)
        try b.store.setSyncKey(key)
        try populate(b.store, clock: b.clock, label: "B")
        try b.sync(folder)
        let path = folder + "/concord-v1/" + bundleName(b.hex, 1)
        var bytes = try readBytes(path)
        bytes[bytes.count - 20] ^= 0x40
        try writeBytes(bytes, to: path)
        let tampered = try a.sync(folder)
        #expect(tampered.warningLines.contains("skipping \(bundleName(b.hex, 1)): the encrypted bundle failed authentication: it was changed or damaged after it was written"))
        #expect(try a.store.allOperations().isEmpty, "a tampered file changes nothing")
        // Cut in the middle: incomplete, as a plain file would be.
        try writeBytes(Array(bytes[..<(bytes.count / 2)]), to: path)
        #expect(try a.sync(folder).warningLines.contains("skipping \(bundleName(b.hex, 1)): incomplete (still being written?); it is imported once whole"))
    }

    @Test func aStoreThatGetsAKeyRepublishesItsHistoryEncrypted() throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let a = try Node(in: directory, "a", seed: 1)
        try populate(a.store, clock: a.clock, label: "A")
        let plainReport = try a.sync(folder)
        #expect(plainReport.publishedFile == bundleName(a.hex, 1))
        #expect(try readBytes(folder + "/concord-v1/" + bundleName(a.hex, 1)).starts(with: BundleFormat.magic))

        // a gets a key: its plain file stays, and its whole history goes out again, encrypted.
        let key = SyncKey.generate()
        try a.store.setSyncKey(key)
        let keyed = try a.sync(folder)
        #expect(keyed.publishedFile == bundleName(a.hex, 2))
        #expect(keyed.publishedOperations == (try a.store.allOperations()).count)
        #expect(try a.sync(folder).movedSomething == false, "then it is up to date")

        let b = try Node(in: directory, "b", seed: 2)
        try b.store.setSyncKey(key)
        let report = try b.sync(folder)
        #expect(report.importedFiles == 1)
        #expect(report.warningLines.count == 1, "the old plain file is skipped: \(report.warningLines)")
        #expect(try b.dump() == (try a.dump()))
    }

    @Test func coalescingKeepsFilesEncrypted() throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1)
        a.coalesceThreshold = 3
        try a.store.setSyncKey(key)
        for index in 0..<5 {
            a.clock.advance(1_000)
            try a.store.addNote(NoteDraft(title: "note \(index)"))
            try a.sync(folder)
        }
        let names = try listing(folder).keys.sorted()
        #expect(names.count <= 3, "\(names)")
        for name in names { #expect(try readBytes(folder + "/concord-v1/" + name).starts(with: EncryptedBundleFormat.magic)) }
        let b = try Node(in: directory, "b", seed: 2)
        try b.store.setSyncKey(key)
        #expect(try b.sync(folder).warningLines.isEmpty)
        #expect(try b.dump() == (try a.dump()))
    }

    @Test func exportAndMergeOfAnEncryptedBundle() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1)
        try populate(a.store, clock: a.clock, label: "A")
        let path = directory.file("x.cbundle")
        let summary = try a.store.exportBundle(to: path, encryptingWith: key)
        #expect(summary.bytes == (try readBytes(path)).count)
        let b = try Node(in: directory, "b", seed: 2)
        #expect(throws: ConcordError.self) { try b.store.mergeBundle(at: path) }
        try b.store.setSyncKey(key)
        let (report, _) = try b.store.mergeBundle(at: path)
        #expect(report.newOperationCount == summary.operations)
        #expect(try b.dump() == (try a.dump()))
    }
}

extension Array where Element == UInt8 {
    func contains(subsequence: [UInt8]) -> Bool {
        guard subsequence.count <= count else { return false }
        return (0...(count - subsequence.count)).contains { Array(self[$0..<$0 + subsequence.count]) == subsequence }
    }
}
