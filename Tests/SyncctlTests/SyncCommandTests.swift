import Foundation
import Testing

/// `syncctl sync --folder` (SPEC.md §11, §14).
@Suite(.waitsForProcesses) struct SyncCommandTests {
    /// Runs `sync --folder` on a store; it must succeed with nothing on stderr. Returns its output.
    @discardableResult
    func sync(_ store: Store, _ folder: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        try store.ok("sync", "--folder", folder, sourceLocation: sourceLocation)
    }

    @Test func twoLaptopsConvergeThroughASharedFolder() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("laptop-a.db", replicaName: "laptop-a")
        let b = try sandbox.makeStore("laptop-b.db", replicaName: "laptop-b")
        let idA = try a.replicaID()
        let idB = try b.replicaID()

        // Both start from the same records.
        let passport = try a.addReminder("Renew passport", "--due", "2027-05-01T09:00:00Z", "--tag", "errands")
        let plants = try a.addReminder("Water the plants", "--tag", "home")
        let trip = try a.addNote("Trip ideas", "--body", "Lisbon in spring")
        let initial = try a.operationCount()
        #expect(try sync(a, folder) == "published \(initial) operations as \(idA)-0000000001.cbundle")
        #expect(try sync(b, folder) == "imported \(initial) operations from 1 file")
        #expect(try sync(a, folder) == "up to date")
        #expect(try a.dump() == b.dump())
        #expect(try bundleNames(in: folder) == ["\(idA)-0000000001.cbundle"], "b had nothing of its own to publish")

        // Offline, conflicting edits on both.
        try a.ok("reminder", "complete", passport)
        try b.ok("reminder", "edit", passport, "--title", "Renew passport (bring photos)")
        try a.ok("reminder", "tag", plants, "--remove", "home")
        try b.ok("reminder", "tag", plants, "--add", "home")
        try a.ok("note", "delete", trip)
        try b.ok("note", "edit", trip, "--body", "Lisbon in spring, Porto in autumn")
        let offlineA = try a.operationCount() - initial
        let offlineB = try b.operationCount() - initial
        #expect(offlineA == 3)
        #expect(offlineB == 3)

        // A, B, A, B.
        #expect(try sync(a, folder) == "published \(offlineA) operations as \(idA)-0000000002.cbundle")
        #expect(try sync(b, folder) == "imported \(offlineA) operations from 1 file; published \(offlineB) operations as \(idB)-0000000001.cbundle")
        #expect(try sync(a, folder) == "imported \(offlineB) operations from 1 file")
        #expect(try sync(b, folder) == "up to date")

        let dump = try a.dump()
        #expect(try b.dump() == dump, "both laptops hold byte-identical state")
        for store in [a, b] {
            let reminder = try store.show(passport)
            #expect(reminder.bool("completed") == true, "the completion on A holds")
            #expect(reminder.string("title") == "Renew passport (bring photos)", "with B's title")
            #expect(try store.show(plants).strings("tags") == ["home"], "B's add wins over A's remove")
            let note = try store.show(trip)
            #expect(note.bool("deleted") == true, "A's delete holds")
            #expect(note.string("body") == "Lisbon in spring, Porto in autumn", "B's edit is kept under the tombstone")
            #expect(try store.operationCount() == initial + offlineA + offlineB)
        }

        // Nothing new: both say so and the folder does not change.
        let files = try listing(of: folder + "/concord-v1")
        #expect(files.keys.sorted() == ["\(idA)-0000000001.cbundle", "\(idA)-0000000002.cbundle", "\(idB)-0000000001.cbundle"].sorted())
        for store in [a, b, a, b] {
            #expect(try sync(store, folder) == "up to date")
        }
        #expect(try listing(of: folder + "/concord-v1") == files)
        #expect(try listing(of: folder).keys.sorted() == ["concord-v1"])
        #expect(try a.dump() == dump)
        #expect(try b.dump() == dump)
    }

    @Test func aThirdReplicaCatchesUpFromTheFolderAlone() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        _ = try a.addReminder("from a")
        _ = try b.addNote("from b")
        try sync(a, folder)
        try sync(b, folder)
        try sync(a, folder)
        let c = try sandbox.makeStore("c.db")
        let total = try a.operationCount()
        #expect(try sync(c, folder) == "imported \(total) operations from 2 files")
        #expect(try c.dump() == a.dump())
        #expect(try sync(c, folder) == "up to date")
        // A relative path to the same folder (syncctl runs in a directory beside it) is the same folder.
        #expect(try c.ok("sync", "--folder", "../Shared/./") == "up to date")
    }

    @Test func hostileFolderContentsAreSkippedWithOneWarningEach() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        _ = try a.addReminder("valid", "--tag", "t")
        _ = try a.addNote("also valid")
        let published = try sync(a, folder)
        let idA = try a.replicaID()
        let good = "\(idA)-0000000001.cbundle"
        #expect(published == "published \(try a.operationCount()) operations as \(good)")
        let directory = folder + "/concord-v1"
        let goodBytes = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + good))

        let garbage = Data((0..<300).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let hostile: [(name: String, data: Data?)] = [
            (".syncthing.x.tmp", Data("partial".utf8)),
            ("~syncthing~\(good).tmp", goodBytes.prefix(40)),
            (".dropbox.cache", nil),
            ("\(idA)-0000000001 (conflicted copy 2026-01-02).cbundle", goodBytes),
            ("\(idA)-0000000001.sync-conflict-20260102-101010-ABCDEFG.cbundle", goodBytes),
            ("0123456789abcdef0123456789abcdef-0000000001.cbundle", garbage),
            ("fedcba9876543210fedcba9876543210-0000000001.cbundle", Data()),
            ("00112233445566778899AABBCCDDEEFF-0000000001.cbundle", goodBytes),
            ("00112233445566778899aabbccddeeff-000000001.cbundle", goodBytes),
            ("notes.txt", Data("hello\n".utf8)),
        ]
        for (name, data) in hostile {
            if let data {
                try sandbox.write(data, to: directory + "/" + name)
            } else {
                try FileManager.default.createDirectory(atPath: directory + "/" + name, withIntermediateDirectories: false)
            }
        }
        // A directory with a bundle's name.
        let directoryNamedLikeABundle = "ffeeddccbbaa99887766554433221100-0000000001.cbundle"
        try FileManager.default.createDirectory(atPath: directory + "/" + directoryNamedLikeABundle, withIntermediateDirectories: false)
        let bad = hostile.map(\.name) + [directoryNamedLikeABundle]
        let folderBefore = try listing(of: directory)

        let result = try b.run("sync", "--folder", folder)
        #expect(result.succeeded, "\(result)")
        #expect(result.out == "imported \(try a.operationCount()) operations from 1 file", "the valid file beside them is imported: \(result)")
        #expect(result.stderrLines.count == bad.count, "one warning per bad file: \(result)")
        for line in result.stderrLines {
            #expect(line.hasPrefix("syncctl: warning: skipping "), "\(line)")
        }
        for name in bad {
            #expect(result.stderrLines.filter { $0.hasPrefix("syncctl: warning: skipping \(name): ") }.count == 1, "one warning for \(name): \(result)")
        }
        #expect(try a.dump() == b.dump())

        // The next sync still warns, imports nothing, publishes nothing; nobody else's file is touched.
        let again = try b.run("sync", "--folder", folder)
        #expect(again.succeeded, "\(again)")
        #expect(again.out == "up to date")
        #expect(again.stderrLines.count == bad.count, "\(again)")
        let fromA = try a.run("sync", "--folder", folder)
        #expect(fromA.succeeded && fromA.out == "up to date", "\(fromA)")
        #expect(fromA.stderrLines.count == bad.count, "\(fromA)")
        #expect(try listing(of: directory) == folderBefore, "a sync never modifies or deletes another replica's files")
    }

    @Test func aBundleStillBeingWrittenIsImportedOnceWhole() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let c = try sandbox.makeStore("c.db")
        _ = try c.addReminder("arrives late", "--tag", "slow")
        _ = try c.addNote("late note")
        // Made by c's own export, delivered by a sync tool piece by piece under c's name.
        let bundle = sandbox.path("c.cbundle")
        try c.ok("export", bundle)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: bundle))
        try FileManager.default.createDirectory(atPath: folder + "/concord-v1", withIntermediateDirectories: true)
        let name = "\(try c.replicaID())-0000000001.cbundle"
        let delivered = folder + "/concord-v1/" + name
        let b = try sandbox.makeStore("b.db")
        let empty = try b.snapshot()

        for part in [0, bytes.count / 2, bytes.count - 1] {
            try sandbox.write(bytes.prefix(part), to: delivered)
            let result = try b.run("sync", "--folder", folder)
            #expect(result.succeeded, "\(result)")
            #expect(result.out == "up to date", "\(result)")
            #expect(result.stderrLines.count == 1, "\(result)")
            #expect(result.stderr.hasPrefix("syncctl: warning: skipping \(name): "), "\(result)")
            #expect(try b.snapshot() == empty, "a partial file changes nothing")
        }
        try sandbox.write(bytes, to: delivered)
        let whole = try b.run("sync", "--folder", folder)
        #expect(whole.succeeded && whole.stderr.isEmpty, "\(whole)")
        #expect(whole.out == "imported \(try c.operationCount()) operations from 1 file")
        #expect(try b.dump() == c.dump())
        #expect(try sync(b, folder) == "up to date")
    }

    @Test func aTemporaryFileOfAnInterruptedSyncIsRemoved() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        _ = try a.addReminder("something")
        try sync(a, folder)
        let idA = try a.replicaID()
        let idB = try b.replicaID()
        let directory = folder + "/concord-v1"
        let own = ".\(idA)-0000000002.tmp-1f2e3d"
        let others = ".\(idB)-0000000001.tmp-abcdef"
        // Both left 16 minutes ago by interrupted syncs (SPEC.md §14: only stale ones are removed).
        let stale = Date().addingTimeInterval(-16 * 60)
        for name in [own, others] {
            try sandbox.write(Data("half".utf8), to: directory + "/" + name)
            try FileManager.default.setAttributes([.modificationDate: stale], ofItemAtPath: directory + "/" + name)
        }
        // A fresh one may be another process of this replica still writing: left alone, silently.
        let fresh = ".\(idA)-0000000003.tmp-777777"
        try sandbox.write(Data("half".utf8), to: directory + "/" + fresh)

        let result = try a.run("sync", "--folder", folder)
        #expect(result.succeeded && result.out == "up to date", "\(result)")
        #expect(result.stderrLines.count == 2, "\(result)")
        #expect(FileManager.default.fileExists(atPath: directory + "/" + fresh), "a fresh temporary file is left alone")
        #expect(result.stderrLines.contains { $0.hasPrefix("syncctl: warning: ") && $0.contains(own) && !$0.contains("skipping") }, "\(result)")
        #expect(result.stderrLines.contains { $0.hasPrefix("syncctl: warning: skipping \(others): ") }, "\(result)")
        #expect(!FileManager.default.fileExists(atPath: directory + "/" + own), "its own half-written file is deleted")
        #expect(FileManager.default.fileExists(atPath: directory + "/" + others), "another replica's is left alone")
    }

    @Test func aMissingFolderIsRefused() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        _ = try a.addReminder("mine")
        let missing = sandbox.path("Nowhere")
        let result = try a.expectRefused(["sync", "--folder", missing], mentions: [missing], code: 1)
        #expect(result.stderr == "syncctl: the shared folder \(missing) does not exist or is not a directory (is it mounted?)\n", "\(result)")
        #expect(!FileManager.default.fileExists(atPath: missing), "the folder is not created")

        // A file where the folder should be.
        let file = try sandbox.write(Data("x".utf8), to: "NotAFolder")
        let notDirectory = try a.expectRefused(["sync", "--folder", file], code: 1)
        #expect(notDirectory.stderr == "syncctl: the shared folder \(file) does not exist or is not a directory (is it mounted?)\n", "\(notDirectory)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == Data("x".utf8))
    }

    @Test func aFolderOfANewerLayoutIsRefused() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        _ = try a.addReminder("mine")
        let folder = try sandbox.makeDirectory("Shared")
        try sandbox.makeDirectory("Shared/concord-v2")
        try sandbox.write(Data("from the future".utf8), to: "Shared/concord-v2/something")
        let before = try listing(of: folder)

        let result = try a.expectRefused(["sync", "--folder", folder], mentions: [folder], code: 1)
        #expect(result.stderr == "syncctl: the shared folder \(folder) uses layout version 2, newer than this build supports (1); upgrade Concord\n", "\(result)")
        #expect(try listing(of: folder) == before, "no concord-v1 is created beside it")

        // With layout 1 beside it, the sync goes on and warns once.
        try sandbox.makeDirectory("Shared/concord-v1")
        let both = try a.run("sync", "--folder", folder)
        #expect(both.succeeded, "\(both)")
        #expect(both.out.hasPrefix("published "), "\(both)")
        #expect(both.stderrLines.count == 1, "\(both)")
        #expect(both.stderr.hasPrefix("syncctl: warning: ") && both.stderr.contains("layout version 2"), "\(both)")
    }
}
