import Foundation
import Testing

/// "Delete all data" and "remove it from this machine" (SPEC.md §7, §11): `reminder delete
/// --all` and `note delete --all` write ordinary deletes that reach another replica, and `wipe
/// --yes` removes this replica's store and its own folder files, never another replica's.
@Suite(.waitsForProcesses) struct DataOutTests {
    @Test func deleteAllReachesASecondReplicaAndLeavesTheOtherKind() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let folder = try sandbox.makeDirectory("shared")
        let open = try a.addReminder("open one")
        let done = try a.addReminder("done one")
        try a.ok("reminder", "complete", done)
        try a.addReminder("already deleted")
        let deletedID = try a.reminders(all: false).first { $0["title"] as? String == "already deleted" }?["id"] as? String
        try a.ok("reminder", "delete", try #require(deletedID))
        try a.addNote("a note stays")
        try a.ok("sync", "--folder", folder)
        try b.ok("sync", "--folder", folder)
        #expect(try b.reminders(all: true).count == 3)

        #expect(try a.ok("reminder", "delete", "--all") == "deleted 2 reminders")
        #expect(try a.ok("reminder", "delete", "--all") == "deleted 0 reminders")
        #expect(try a.reminders().isEmpty)
        try a.ok("sync", "--folder", folder)
        try b.ok("sync", "--folder", folder)
        #expect(try b.reminders().isEmpty, "the deletes reached b")
        #expect(try b.reminders(all: true).count == 3, "as deletes: b still holds them, deleted")
        #expect(try b.ok("note", "list").contains("a note stays"))
        #expect(try a.dump() == (try b.dump()))
        // Ordinary deletes: restore undoes one.
        try b.ok("reminder", "restore", open)
        #expect(try b.reminders().map { $0["id"] as? String } == [open])

        #expect(try b.ok("note", "delete", "--all") == "deleted 1 note")
        try b.expectRefused(["reminder", "delete"], mentions: ["give either an id or --all"])
        try b.expectRefused(["reminder", "delete", open, "--all"], mentions: ["give either an id or --all"])
    }

    @Test func wipeRemovesThisReplicaAndNothingOfAnother() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let folder = try sandbox.makeDirectory("shared")
        try a.addReminder("from a")
        try b.addReminder("from b")
        try a.ok("sync", "--folder", folder)
        try b.ok("sync", "--folder", folder)
        try a.ok("sync", "--folder", folder)  // a holds b's reminder too
        try b.ok("key", "generate")
        let aID = try a.replicaID()
        let bID = try b.replicaID()
        let bFiles = try bundleNames(in: folder).filter { $0.hasPrefix(bID) }
        #expect(!bFiles.isEmpty)
        let aFiles = try bundleNames(in: folder).filter { $0.hasPrefix(aID) }
        #expect(!aFiles.isEmpty)
        let layout = "\(folder)/concord-v1"

        // Refused without --yes (the store and the folder unchanged), and for a file that is not
        // a store (left as it is).
        let folderBefore = try listing(of: folder)
        try b.expectRefused(["wipe", "--folder", folder], mentions: ["add --yes"])
        let notAStore = try sandbox.write(Data("not a store".utf8), to: "not-a-store.db")
        let refused = try sandbox.run(["wipe", "--yes", "--folder", folder, "--store", notAStore])
        #expect(!refused.succeeded, "\(refused)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: notAStore)) == Data("not a store".utf8))
        #expect(try listing(of: folder) == folderBefore)

        let result = try sandbox.run(["wipe", "--yes", "--folder", folder, "--store", b.path])
        #expect(result.succeeded, "\(result)")
        let lines = result.out.split(separator: "\n").map(String.init)
        #expect(lines.last == "wiped replica \(bID) from this machine")
        for name in bFiles { #expect(lines.contains("removed \(layout)/\(name)"), "\(lines)") }
        #expect(lines.contains("removed \(b.path)"))
        for suffix in ["", "-wal", "-shm", "-lock"] { #expect(!FileManager.default.fileExists(atPath: b.path + suffix)) }
        #expect(try bundleNames(in: folder).allSatisfy { !$0.hasPrefix(bID) })
        // a's files and store are untouched, and a syncs on.
        #expect(try bundleNames(in: folder).filter { $0.hasPrefix(aID) } == aFiles)
        try a.ok("sync", "--folder", folder)
        #expect(try a.reminders().count == 2)
        try a.expectSound("after b was wiped")
    }

    /// A wipe removes only the files this store recorded as its own, as it wrote them. A copy of
    /// the store recorded the original's files: given a folder it removes nothing, and says so; a
    /// forged bundle, a symbolic link or a file rewritten under the replica's names stay.
    @Test func wipeRemovesOnlyWhatThisReplicaWroteAsItWroteIt() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let folder = try sandbox.makeDirectory("shared")
        let layout = "\(folder)/concord-v1"
        let aID = try a.replicaID()
        try a.addReminder("one")
        try a.ok("sync", "--folder", folder)
        try a.addReminder("two")
        try a.ok("sync", "--folder", folder)
        let copy = Store(sandbox: sandbox, path: sandbox.path("copy.db"))
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: a.path + suffix) {
            try FileManager.default.copyItem(atPath: a.path + suffix, toPath: copy.path + suffix)
        }
        try a.addReminder("published after the copy")
        try a.ok("sync", "--folder", folder)
        let published = try bundleNames(in: folder).filter { $0.hasPrefix(aID) }
        #expect(published.count == 3)

        // The copy's records are the original's: with a folder, nothing at all is removed.
        let before = try listing(of: sandbox.root.path)
        let layoutBefore = try listing(of: layout)
        let refused = try copy.run("wipe", "--yes", "--folder", folder)
        expectOneLineFailure(refused, mentions: ["\(copy.path) is a copy of the store at \(a.path)", "the original's; run 'syncctl wipe --yes' without --folder"], code: 1)
        #expect(try listingWithoutReadersFiles(of: sandbox.root.path, before: before) == before)
        #expect(try listing(of: layout) == layoutBefore)
        // Without one, the copy alone goes.
        let wiped = try copy.run("wipe", "--yes")
        #expect(wiped.succeeded, "\(wiped)")
        #expect(!FileManager.default.fileExists(atPath: copy.path))
        #expect(try bundleNames(in: folder).filter { $0.hasPrefix(aID) } == published)

        // Files that merely carry a's name: a forged bundle, a link to a genuine one, and one of
        // a's files rewritten (b's bundle in its place).
        try b.addReminder("from b")
        try b.ok("export", sandbox.path("b.cbundle"))
        let forged = "\(aID)-0000000077.cbundle"
        try FileManager.default.copyItem(atPath: sandbox.path("b.cbundle"), toPath: "\(layout)/\(forged)")
        let linked = "\(aID)-0000000078.cbundle"
        #expect(symlink("\(layout)/\(published[0])", "\(layout)/\(linked)") == 0)
        let rewritten = published[1]
        try FileManager.default.removeItem(atPath: "\(layout)/\(rewritten)")
        try FileManager.default.copyItem(atPath: sandbox.path("b.cbundle"), toPath: "\(layout)/\(rewritten)")

        let result = try a.run("wipe", "--yes", "--folder", folder)
        #expect(result.succeeded, "\(result)")
        #expect(result.stderrLines == ["syncctl: warning: skipping \(rewritten): not the file this replica wrote (its contents changed); it stays"])
        let left = Set(try FileManager.default.contentsOfDirectory(atPath: layout))
        #expect(left == [forged, linked, rewritten], "\(left)")
        #expect(result.stdoutLines.filter { $0.hasPrefix("removed \(layout)") }.sorted() == [published[0], published[2]].map { "removed \(layout)/\($0)" })
        #expect(!FileManager.default.fileExists(atPath: a.path))
    }

    /// A wipe that cannot do all it was asked does none of it: a folder that is not there, or a
    /// directory it cannot remove files from, leave the store and the folder as they were.
    @Test func aWipeThatCannotDoAllOfItRemovesNothing() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        try a.addReminder("kept")
        let folder = try sandbox.makeDirectory("shared")
        try a.ok("sync", "--folder", folder)
        let before = try listing(of: sandbox.root.path)
        let layoutBefore = try listing(of: "\(folder)/concord-v1")
        let missing = sandbox.path("no/such/dir")
        let refused = try a.run("wipe", "--yes", "--folder", missing)
        expectOneLineFailure(refused, mentions: ["the shared folder \(missing) does not exist or is not a directory"], code: 1)
        #expect(try listing(of: sandbox.root.path) == before)

        // A layout directory whose entries cannot be removed (as another user would find it).
        #expect(chmod("\(folder)/concord-v1", 0o555) == 0)
        defer { chmod("\(folder)/concord-v1", 0o755) }
        let locked = try sandbox.runAsUser(["wipe", "--yes", "--folder", folder, "--store", a.path])
        expectOneLineFailure(locked, mentions: ["cannot remove \(folder)/concord-v1/", "Permission denied"], code: 1)
        #expect(try listingWithoutReadersFiles(of: sandbox.root.path, before: before) == before)
        #expect(try listing(of: "\(folder)/concord-v1") == layoutBefore)
        try a.ok("verify")
    }

    /// A directory planted under the name of one of the replica's bundles is skipped with a
    /// warning, as a sync skips it; the rest of the wipe goes on.
    @Test func aDirectoryUnderAReplicasBundleNameIsSkippedWithAWarning() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        try a.addReminder("one")
        let folder = try sandbox.makeDirectory("shared")
        try a.ok("sync", "--folder", folder)
        let name = try #require(try bundleNames(in: folder).first)
        let path = "\(folder)/concord-v1/\(name)"
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let result = try a.run("wipe", "--yes", "--folder", folder)
        #expect(result.succeeded, "\(result)")
        #expect(result.stderrLines == ["syncctl: warning: skipping \(name): a directory, not the file this replica wrote; it stays"])
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue)
        #expect(!FileManager.default.fileExists(atPath: a.path))
    }

    /// A listing of `directory` without the empty `-wal` and the `-shm` that SQLite creates beside
    /// a store to read it at all, and that a read-only connection leaves (SPEC.md §9), when
    /// `before` did not have them.
    private func listingWithoutReadersFiles(of directory: String, before: [String: String]) throws -> [String: String] {
        try listing(of: directory).filter { name, entry in
            before[name] != nil || !(name.hasSuffix("-wal") && entry.hasPrefix("0 bytes") || name.hasSuffix("-shm"))
        }
    }
}
