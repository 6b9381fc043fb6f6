import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordStore
import Foundation
import Testing

/// A shared folder damaged on purpose, as sync tools and people damage them: files lost,
/// restored to old versions, replaced, junk dropped in, files forged or clashing (SPEC.md §14).
/// Each case runs plain and with a sync key.
@Suite struct FolderDamageTests {
    /// Replicas named `names` sharing one folder, all with `key` when there is one.
    static func replicas(_ names: [String], in directory: TemporaryDirectory, key: SyncKey?, seed: UInt64 = 100) throws -> [Node] {
        try names.enumerated().map { index, name in
            let replica = try Node(in: directory, name, seed: seed + UInt64(index))
            if let key { try replica.store.setSyncKey(key) }
            return replica
        }
    }

    static func path(_ folder: String, _ name: String) -> String { folder + "/concord-v1/" + name }

    /// A store with one reminder, and a copy of its file that took over its replica id as if
    /// moved (`init --moved`): two stores writing under one id, as a copied store would.
    static func storeAndCopy(
        _ name: String, in directory: TemporaryDirectory, clock: ManualClock, key: SyncKey?
    ) throws -> (original: ConcordStore, copy: ConcordStore) {
        let path = directory.file("\(name).db")
        let first = try ConcordStore.create(at: path, name: name, environment: environment(clock: clock, seed: 7))
        if let key { try first.setSyncKey(key) }
        try first.addReminder(ReminderDraft(title: "\(name) before the copy"))
        try first.close()
        try FileManager.default.copyItem(atPath: path, toPath: directory.file("copy.db"))
        let original = try ConcordStore.open(at: path, environment: environment(clock: clock, seed: 8))
        let copy = try ConcordStore.adoptLocation(at: directory.file("copy.db"), environment: environment(clock: clock, seed: 9))
        #expect(copy.replicaID == original.replicaID)
        return (original, copy)
    }

    static func ownFiles(of replica: Node, in folder: String) throws -> [String] {
        try listing(folder).keys.filter { $0.hasPrefix(replica.hex) }.sorted()
    }

    /// Issue 16, failure 1: a file lost for good. Its operations are republished by the replicas
    /// that hold them, so a newcomer converges.
    @Test(arguments: [false, true])
    func aLostFileIsRepublishedAndANewcomerConverges(keyed: Bool) throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = keyed ? SyncKey.generate() : nil
        let replicas = try Self.replicas(["a", "b"], in: directory, key: key)
        let (a, b) = (replicas[0], replicas[1])
        let first = try a.store.addReminder(ReminderDraft(title: "only in a's first file"))
        try a.sync(folder)
        try b.sync(folder)
        try b.store.addReminder(ReminderDraft(title: "from b"))
        try b.sync(folder)
        let lost = bundleName(a.hex, 1)
        try FileManager.default.removeItem(atPath: Self.path(folder, lost))

        var republished = 0
        for round in 1...3 {
            a.clock.advance(1_000)
            try a.store.addReminder(ReminderDraft(title: "a, round \(round)"))
            b.clock.advance(1_000)
            try b.store.addReminder(ReminderDraft(title: "b, round \(round)"))
            for replica in [a, b] {
                let report = try replica.sync(folder)
                #expect(report.warningLines.isEmpty, "\(report.warningLines)")
                republished += report.republishedOperations
            }
        }
        // Both held what the lost file held; each noticed on its next sync.
        #expect(republished > 0)
        #expect(!FileManager.default.fileExists(atPath: Self.path(folder, lost)), "a lost name is not reused")

        let c = try Self.replicas(["c"], in: directory, key: key, seed: 300)[0]
        let report = try c.sync(folder)
        #expect(report.warningLines.isEmpty, "\(report.warningLines)")
        try a.sync(folder)
        #expect(try c.store.reminder(first)?.title == "only in a's first file")
        #expect(try c.dump() == (try a.dump()))
        #expect(try c.store.versionVector() == (try a.store.versionVector()))
        // And a round later, nobody has anything left to publish.
        for replica in [a, b, c] { #expect(try replica.sync(folder).publishedFile == nil, "\(replica.name)") }
    }

    /// Issue 16, failure 2: a file replaced by another of the same name and size, genuine or
    /// junk, is read again (files are known by content, not by name and size).
    @Test(arguments: [false, true])
    func aFileReplacedByOneOfTheSameSizeIsReadAgain(keyed: Bool) throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = keyed ? SyncKey.generate() : nil
        let replicas = try Self.replicas(["a", "b"], in: directory, key: key)
        let (a, b) = (replicas[0], replicas[1])
        try a.store.addReminder(ReminderDraft(title: "title 0000"))
        try a.sync(folder)
        try b.sync(folder)
        let name = bundleName(a.hex, 1)
        let size = try listing(folder)[name]!

        // Another replica's first bundle, of the same size as a's first file (the same edit,
        // at another moment: tried until the sizes agree).
        let staging = try directory.directory("staging")
        var replacement: [UInt8]?
        for attempt in UInt64(1)...200 where replacement == nil {
            let other = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis + attempt * 13), seed: 500 + attempt))
            try other.addReminder(ReminderDraft(title: "title \(String(format: "%04d", attempt))"))
            let path = staging + "/next-\(attempt).cbundle"
            try other.exportBundle(to: path, encryptingWith: key)
            let bytes = try readBytes(path)
            if bytes.count == size { replacement = bytes }
        }
        let bytes = try #require(replacement, "no bundle of \(size) bytes came out")
        try writeBytes(bytes, to: Self.path(folder, name))
        #expect(try listing(folder)[name] == size)
        let report = try b.sync(folder)
        #expect(report.importedFiles == 1, "b read the replaced file again")
        #expect(report.warningLines.isEmpty, "\(report.warningLines)")
        // b had a's first operations from the old file, and publishes them again for the others.
        #expect(report.publishedFile != nil)
        try a.sync(folder)
        try b.sync(folder)
        #expect(try b.dump() == (try a.dump()))
        let c = try Self.replicas(["c"], in: directory, key: key, seed: 300)[0]
        try c.sync(folder)
        #expect(try c.dump() == (try a.dump()))

        // Junk of the same size in place of a file: noticed, skipped with a warning, and what the
        // file held is published again by those that hold it.
        let victim = try Self.ownFiles(of: b, in: folder).last!
        let victimSize = try listing(folder)[victim]!
        try writeBytes(Array(repeating: 0x5A, count: Int(victimSize)), to: Self.path(folder, victim))
        for replica in [a, b] {
            let report = try replica.sync(folder)
            #expect(report.warningLines.contains { $0.hasPrefix("skipping \(victim): ") }, "\(replica.name): \(report.warningLines)")
        }
        let d = try Self.replicas(["d"], in: directory, key: key, seed: 400)[0]
        let newcomer = try d.sync(folder)
        #expect(newcomer.warningLines.count == 1, "\(newcomer.warningLines)")
        #expect(try d.dump() == (try a.dump()))
    }

    /// Issue 16, failure 3: junk under a replica's name with a huge serial, and junk on the
    /// names it would publish next, move nothing: it publishes under its own next serial, others
    /// import it, and syncs with nothing new add no file.
    @Test(arguments: [false, true])
    func junkWithHugeSerialsNeitherDivertsNorGrowsTheFolder(keyed: Bool) throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = keyed ? SyncKey.generate() : nil
        let replicas = try Self.replicas(["a", "b"], in: directory, key: key)
        let (a, b) = (replicas[0], replicas[1])
        try b.store.addReminder(ReminderDraft(title: "first"))
        try b.sync(folder)
        try a.store.addReminder(ReminderDraft(title: "from a"))
        try a.sync(folder)
        let junk = [bundleName(b.hex, 9_999_999_998), bundleName(b.hex, 2), bundleName(b.hex, 3)]
        for name in junk { try writeBytes(Array("junk from someone without the key".utf8), to: Self.path(folder, name)) }
        // A genuine file (a's, sealed with the key when there is one) copied under b's name with
        // the greatest serial: valid, imported, and still no reason to jump.
        try FileManager.default.copyItem(atPath: Self.path(folder, bundleName(a.hex, 1)), toPath: Self.path(folder, bundleName(b.hex, 9_999_999_999)))

        let edited = try b.store.addReminder(ReminderDraft(title: "after the junk"))
        let report = try b.sync(folder)
        #expect(report.publishedFile == bundleName(b.hex, 4), "passes over the names taken, never jumps: \(report)")
        #expect(Set(report.warningLines.map { String($0.prefix(while: { $0 != ":" })) }) == Set(junk.map { "skipping \($0)" }), "\(report.warningLines)")
        let imported = try a.sync(folder)
        #expect(try a.store.reminder(edited)?.title == "after the junk")
        #expect(imported.warningLines.count == 3, "\(imported.warningLines)")
        // Nor do copies planted under b's name make b coalesce (or delete) them.
        b.coalesceThreshold = 2
        for serial in 100..<110 {
            try FileManager.default.copyItem(atPath: Self.path(folder, bundleName(a.hex, 1)), toPath: Self.path(folder, bundleName(b.hex, serial)))
        }
        let planted = try b.sync(folder)
        #expect(planted.coalescedFiles == 0 && planted.publishedFile == nil, "\(planted)")
        #expect(try listing(folder)[bundleName(b.hex, 105)] != nil)

        // Forty-five syncs with nothing new, beside the junk: no file more.
        let files = try listing(folder).count
        for _ in 0..<45 {
            let quiet = try b.sync(folder)
            #expect(quiet.publishedFile == nil && quiet.importedFiles == 0)
        }
        #expect(try listing(folder).count == files)
        #expect(try b.store.lastPublishedSerial(in: b.folderSync(folder).folder) == 4)
    }

    /// Issue 16, failure 4: a store copied (and declared moved, so that it writes) publishes
    /// other operations under the original's id. Whoever meets the second version of an
    /// operation skips that file with one warning line, imports the rest, and publishes.
    @Test(arguments: [false, true])
    func aClashingFileIsAWarningAndTheOwnerGoesOnPublishing(keyed: Bool) throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = keyed ? SyncKey.generate() : nil
        let a = try Self.replicas(["a"], in: directory, key: key)[0]

        // b, and a copy of it that took over its id.
        let clock = ManualClock(baseMillis)
        let (b, copy) = try Self.storeAndCopy("b", in: directory, clock: clock, key: key)

        clock.advance(1_000)
        let genuine = try b.addReminder(ReminderDraft(title: "written by b"))
        try b.sync(folder: folder)
        try a.sync(folder)
        #expect(try a.store.reminder(genuine) != nil)
        // The copy writes under b's next seq, and publishes under b's next serial.
        clock.advance(1_000)
        let forged = try copy.addReminder(ReminderDraft(title: "written by the copy"))
        let copyReport = try copy.sync(folder: folder)
        #expect(copyReport.publishedFile != nil)
        // (Its file clashes with b's: the copy skips b's file with a warning too.)
        #expect(copyReport.warningLines.count == 1, "\(copyReport.warningLines)")

        for (name, store) in [("a", a.store), ("b", b)] {
            clock.advance(1_000)
            try store.addReminder(ReminderDraft(title: "\(name) goes on"))
            let report = try store.sync(folder: folder)
            #expect(report.warningLines.count == 1, "\(name): \(report.warningLines)")
            let warning = report.warningLines.first ?? ""
            #expect(warning.hasPrefix("skipping what \(copyReport.publishedFile!) holds of replica \(b.replicaID) from seq "), "\(warning)")
            #expect(report.warnings.first?.code == .clash)
            #expect(report.publishedFile != nil, "\(name) publishes as usual")
            #expect(try store.reminder(forged) == nil, "\(name) applied the clashing file")
        }
        // The owner's publishing never stops, and a sees what b writes next.
        clock.advance(1_000)
        let later = try b.addReminder(ReminderDraft(title: "b, later"))
        #expect(try b.sync(folder: folder).publishedFile != nil)
        try a.sync(folder)
        #expect(try a.store.reminder(later)?.title == "b, later")

        // One of b's own files rewritten with the copy's operations: what clashes in it is skipped
        // by b, which publishes its own again, and by a, which read the file before and reads it
        // again. (The copy's own file, recorded with what it delivered, is not read again.)
        let bFile = try listing(folder).keys.filter { $0.hasPrefix(b.replicaID.hex) }.sorted().last!
        try FileManager.default.copyItem(atPath: Self.path(folder, copyReport.publishedFile!), toPath: Self.path(folder, bFile) + ".new")
        try FileManager.default.removeItem(atPath: Self.path(folder, bFile))
        try FileManager.default.moveItem(atPath: Self.path(folder, bFile) + ".new", toPath: Self.path(folder, bFile))
        let owner = try b.sync(folder: folder)
        #expect(owner.warningLines.count == 1 && owner.warningLines[0].hasPrefix("skipping what \(bFile) holds of replica "), "\(owner.warningLines)")
        #expect(owner.publishedFile != nil, "b publishes what its rewritten file held")
        let reader = try a.sync(folder)
        #expect(reader.warningLines.count == 1 && reader.warningLines[0].hasPrefix("skipping what \(bFile) holds of replica "), "\(reader.warningLines)")
        let c = try Self.replicas(["c"], in: directory, key: key, seed: 300)[0]
        try c.sync(folder)
        #expect(try c.store.reminder(later)?.title == "b, later")
        #expect(try c.store.reminder(genuine)?.title == "written by b")
    }

    /// A clashing file that also relays other replicas' operations delivers them: only what
    /// clashes is left out. Here d's own file is lost, and d does not publish again, since the
    /// clashing file, which d can read but for the clash, holds d's operations too.
    @Test(arguments: [false, true])
    func aClashingFileStillDeliversWhatItRelays(keyed: Bool) throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = keyed ? SyncKey.generate() : nil
        let clock = ManualClock(baseMillis)
        let (a, copy) = try Self.storeAndCopy("a", in: directory, clock: clock, key: key)
        let d = try Self.replicas(["d"], in: directory, key: key, seed: 40)[0]

        clock.advance(1_000)
        try a.addReminder(ReminderDraft(title: "written by a"))  // not published yet
        let fromD = try d.store.addReminder(ReminderDraft(title: "from d"))
        try d.sync(folder)
        // The copy gets d's operations by hand, writes its own under a's id, and publishes after
        // d's file is lost: its file relays d's operations.
        let staging = try directory.directory("staging")
        try d.store.exportBundle(to: staging + "/d.cbundle")
        try copy.mergeBundle(at: staging + "/d.cbundle")
        clock.advance(1_000)
        try copy.addReminder(ReminderDraft(title: "written by the copy"))
        try FileManager.default.removeItem(atPath: Self.path(folder, bundleName(d.hex, 1)))
        #expect(try copy.sync(folder: folder).publishedFile != nil)
        // d meets no clash in it (it holds nothing of a's), so it counts it, and publishes
        // nothing again.
        let reportD = try d.sync(folder)
        #expect(reportD.warningLines.isEmpty && reportD.publishedFile == nil, "\(reportD)")

        // a clashes with the copy's operations, and takes the rest: d's.
        let reportA = try a.sync(folder: folder)
        #expect(reportA.warningLines.count == 1, "\(reportA.warningLines)")
        #expect(try a.reminder(fromD)?.title == "from d", "a got d's operations from the clashing file")
        for _ in 0..<2 {
            try d.sync(folder)
            try a.sync(folder: folder)
        }
        let c = try Self.replicas(["c"], in: directory, key: key, seed: 300)[0]
        try c.sync(folder)
        #expect(try c.store.reminder(fromD)?.title == "from d")
    }

    /// A skipped file is recorded as such: warned about at every sync, and read again once it
    /// changes or the store's key does (here: the store gets the key the file is sealed with).
    @Test func aFileSkippedForWantOfTheKeyIsImportedOnceTheStoreHasIt() throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = SyncKey.generate()
        let a = try Self.replicas(["a"], in: directory, key: key)[0]
        let b = try Self.replicas(["b"], in: directory, key: nil, seed: 200)[0]
        let id = try a.store.addReminder(ReminderDraft(title: "sealed"))
        try a.sync(folder)
        let name = bundleName(a.hex, 1)
        for _ in 0..<2 {
            let report = try b.sync(folder)
            #expect(report.warningLines.count == 1 && report.warningLines[0].hasPrefix("skipping \(name): the bundle is encrypted"), "\(report.warningLines)")
            #expect(report.importedFiles == 0 && report.publishedFile == nil)
        }
        #expect(try b.store.folderFiles(in: b.folderSync(folder).folder)[name]?.skipped?.hasPrefix("encryptedBundle: the bundle is encrypted") == true)
        try b.store.setSyncKey(key)
        let report = try b.sync(folder)
        #expect(report.warningLines.isEmpty && report.importedFiles == 1, "\(report)")
        #expect(try b.store.reminder(id)?.title == "sealed")
    }

    /// A folder restored from a backup: old files come back, newer ones vanish. Those that hold
    /// what vanished publish it again.
    @Test(arguments: [false, true])
    func aFolderRestoredFromABackupConverges(keyed: Bool) throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = keyed ? SyncKey.generate() : nil
        let replicas = try Self.replicas(["a", "b"], in: directory, key: key)
        for replica in replicas { replica.coalesceThreshold = 2 }
        let (a, b) = (replicas[0], replicas[1])
        try a.store.addReminder(ReminderDraft(title: "a 0"))
        try b.store.addReminder(ReminderDraft(title: "b 0"))
        for replica in [a, b, a] { try replica.sync(folder) }
        let backup = try directory.directory("backup")
        try FileManager.default.removeItem(atPath: backup)
        try FileManager.default.copyItem(atPath: folder + "/concord-v1", toPath: backup)

        for round in 1...4 {
            for replica in [a, b] {
                replica.clock.advance(1_000)
                try replica.store.addReminder(ReminderDraft(title: "\(replica.name) \(round)"))
                try replica.sync(folder)
            }
        }
        try FileManager.default.removeItem(atPath: folder + "/concord-v1")
        try FileManager.default.copyItem(atPath: backup, toPath: folder + "/concord-v1")
        for replica in [a, b, a, b] { #expect(try replica.sync(folder).warningLines.isEmpty) }
        #expect(try a.dump() == (try b.dump()))
        let c = try Self.replicas(["c"], in: directory, key: key, seed: 300)[0]
        try c.sync(folder)
        #expect(try c.dump() == (try a.dump()))
        for replica in [a, b] { #expect(try Self.ownFiles(of: replica, in: folder).count <= 2) }
    }

    /// A skipped file's record keeps the code of its warning, so that the warning given again on
    /// later syncs has it (`encryptedBundle`, for which an app names its command); one an older
    /// build wrote, with no code, is `invalidInput` and shown as it was.
    @Test func aSkippedFilesRecordKeepsItsWarningsCode() {
        #expect(FolderSync.skippedRecord(.encryptedBundle, "the bundle is encrypted") == "encryptedBundle: the bundle is encrypted")
        #expect(FolderSync.skippedRecord(.invalidInput, "not a Concord bundle") == "not a Concord bundle")
        let reasons: [(ConcordError.Code, String)] = [
            (.encryptedBundle, "the bundle is encrypted (with sync key 0123456789abcdef), and this store has no sync key"),
            (.invalidInput, "bundle format version 2 is newer than this build reads (1); upgrade Concord"),
            (.invalidInput, "invalid operation a:1: an empty tag"), (.clash, "replica a has two: x"), (.io, "cannot read it"),
        ]
        for (code, reason) in reasons {
            let (parsedCode, parsedReason) = FolderSync.parseSkipped(FolderSync.skippedRecord(code, reason))
            #expect(parsedCode == code && parsedReason == reason, "\(code) \(reason)")
        }
        let older = "the bundle is encrypted (with sync key 0123456789abcdef), and this store has no sync key; run 'syncctl key import KEY'"
        let (code, reason) = FolderSync.parseSkipped(older)
        #expect(code == .invalidInput && reason == older)
    }

    /// A clashing file's compacted seqs are left out whole (SPEC.md §14): the operations the
    /// clash leaves out may be those that made them redundant. Here a copy of a edits d's
    /// reminder, compacts d's earlier titles away, and publishes after d's own file is lost; a
    /// takes what does not clash, and keeps d's titles until d's full export brings them. (A
    /// review found it: a's title stayed empty for good.)
    @Test func aClashingFilesCompactedSeqsAreLeftOut() throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let clock = ManualClock(baseMillis)
        let (a, copy) = try Self.storeAndCopy("a", in: directory, clock: clock, key: nil)
        let d = try Self.replicas(["d"], in: directory, key: nil, seed: 40)[0]
        clock.advance(1_000)
        try a.addReminder(ReminderDraft(title: "written by a"))  // not published yet: the copy's write clashes with it
        let fromD = try d.store.addReminder(ReminderDraft(title: "from d"))
        d.clock.advance(5)
        try d.store.editReminder(fromD, ReminderPatch(title: "from d v2"))
        try d.sync(folder)
        let staging = try directory.directory("staging")
        try d.store.exportBundle(to: staging + "/d.cbundle")
        try copy.mergeBundle(at: staging + "/d.cbundle")
        clock.advance(100_000)
        try copy.editReminder(fromD, ReminderPatch(title: "edited by the copy"))
        #expect(try copy.compact(keeping: .none).droppedOperations > 0)
        try FileManager.default.removeItem(atPath: Self.path(folder, bundleName(d.hex, 1)))
        #expect(try copy.sync(folder: folder).publishedFile != nil)

        let report = try a.sync(folder: folder)
        #expect(report.warnings.map(\.code) == [.clash], "\(report.warningLines)")
        #expect(try a.verify().problems == [])
        // d's titles came compacted in the clashing file: a lacks them, and holds no seq of
        // them, until a file that holds them arrives.
        let dSeqs = try a.versionVector()[d.store.replicaID]
        #expect(dSeqs == 0, "\(dSeqs)")
        #expect(try a.reminder(fromD)?.title != "edited by the copy")
        try a.mergeBundle(at: staging + "/d.cbundle")
        #expect(try a.reminder(fromD)?.title == "from d v2")
    }
}
