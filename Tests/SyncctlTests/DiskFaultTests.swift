import Foundation
import Testing

/// Disk faults (issue 6): a read-only store or directory, a read-only or vanished shared folder,
/// unreadable files, a full disk and a file size limit. Each is one clear line on stderr and a
/// non-zero exit, loses nothing, and the next run recovers once the fault is gone.
///
/// Permissions mean nothing to root, and CI runs as root: there the commands run through
/// `setpriv` without the capabilities that override file permissions.
@Suite struct DiskFaultTests {
    /// Checks a failure: exit 1 without a crash, nothing on stdout, exactly `message` on stderr.
    func expectFailure(_ result: RunResult, _ message: String, sourceLocation: SourceLocation = #_sourceLocation) {
        expectOneLineFailure(result, code: 1, sourceLocation: sourceLocation)
        #expect(result.stderr == "syncctl: \(message)\n", "\(result)", sourceLocation: sourceLocation)
    }

    @Test func aReadOnlyStoreRefusesWritesServesReadsAndRecovers() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let store = try sandbox.makeStore()
        let kept = try store.addReminder("written before", "--tag", "kept")
        let other = try sandbox.makeStore("other.db")
        let fromOther = try other.addNote("from the other replica")
        try other.ok("sync", "--folder", folder)
        let bundle = sandbox.path("other.cbundle")
        try other.ok("export", bundle)
        let before = try store.snapshot()
        let folderBefore = try listing(of: folder + "/concord-v1")

        chmod(store.path, 0o444)
        let readOnly = "the store at \(store.path) is read-only"
        expectFailure(try store.runAsUser("reminder", "add", "refused"), readOnly)
        expectFailure(try store.runAsUser("reminder", "edit", kept, "--title", "refused"), readOnly)
        expectFailure(try store.runAsUser("merge", bundle), readOnly)
        expectFailure(try store.runAsUser("sync", "--folder", folder), readOnly)
        // Reading still works.
        let list = try store.runAsUser("reminder", "list", "--json")
        #expect(list.succeeded && list.out.contains(kept), "\(list)")
        let verify = try store.runAsUser("verify")
        #expect(verify.succeeded && verify.out.hasPrefix("sound: "), "\(verify)")
        #expect(try listing(of: folder + "/concord-v1") == folderBefore, "the refused sync wrote nothing to the folder")
        #expect(try store.snapshot() == before, "nothing changed")

        // Writable again: the next runs work (the store's -wal and -shm files, made read-only by
        // the runs above, must not keep it failing).
        chmod(store.path, 0o644)
        let added = try store.runAsUser("reminder", "add", "written after")
        #expect(added.succeeded && added.stderr.isEmpty, "\(added)")
        let synced = try store.runAsUser("sync", "--folder", folder)
        #expect(synced.succeeded && synced.out.hasPrefix("imported 3 operations from 1 file; published "), "\(synced)")
        #expect(try store.show(fromOther).string("title") == "from the other replica")
        #expect(try store.show(kept).strings("tags") == ["kept"])
        #expect(try store.show(added.out).string("title") == "written after")
        try store.expectSound("after the store was writable again")
    }

    @Test func aStoreInAReadOnlyDirectoryIsRefusedWithOneLineAndRecovers() throws {
        let sandbox = try Sandbox()
        let directory = try sandbox.makeDirectory("locked")
        let store = try sandbox.makeStore("locked/store.db")
        let kept = try store.addReminder("written before")
        let before = try store.snapshot()
        chmod(directory, 0o555)
        defer { chmod(directory, 0o755) }
        // SQLite cannot create the store's -wal and -shm files beside it: not even reads work.
        let message = "the store at \(store.path) is read-only: its directory cannot be written"
        expectFailure(try store.runAsUser("reminder", "add", "refused"), message)
        expectFailure(try store.runAsUser("reminder", "list"), message)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["store.db"])

        chmod(directory, 0o755)
        #expect(try store.snapshot() == before, "nothing changed")
        let added = try store.runAsUser("reminder", "add", "written after")
        #expect(added.succeeded, "\(added)")
        #expect(try Set(store.reminders().compactMap { $0.string("id") }) == [kept, added.out])
        try store.expectSound("after the directory was writable again")
    }

    @Test func aReadOnlySharedFolderEndsTheSyncAfterItsImportsAndRecovers() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let fromB = try b.addReminder("from b")
        try b.ok("sync", "--folder", folder)
        let fromA = try a.addReminder("from a")
        let directory = folder + "/concord-v1"
        chmod(directory, 0o555)
        defer { chmod(directory, 0o755) }
        let folderBefore = try listing(of: directory)

        // The import needs only reading: it happens, then publishing fails with one line.
        let result = try a.runAsUser("sync", "--folder", folder)
        expectOneLineFailure(result, mentions: ["cannot write in \(directory)", "permission denied"], code: 1)
        #expect(try a.show(fromB).string("title") == "from b", "what was imported stays imported")
        #expect(try listing(of: directory) == folderBefore, "nothing was written to the folder")
        try a.expectSound("after the failed publish")

        // A folder without its layout directory, read-only: nothing can be created in it.
        let bare = try sandbox.makeDirectory("Bare")
        chmod(bare, 0o555)
        defer { chmod(bare, 0o755) }
        let refused = try a.runAsUser("sync", "--folder", bare)
        expectOneLineFailure(refused, mentions: ["cannot create \(bare)/concord-v1"], code: 1)

        chmod(directory, 0o755)
        let again = try a.runAsUser("sync", "--folder", folder)
        #expect(again.succeeded && again.out.hasPrefix("published "), "the next sync publishes: \(again)")
        try b.ok("sync", "--folder", folder)
        #expect(try b.show(fromA).string("title") == "from a")
        #expect(try a.dump() == b.dump())
    }

    @Test func aSharedFolderDeletedBetweenSyncsIsRefusedThenRebuilt() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        _ = try a.addReminder("from a")
        _ = try b.addNote("from b")
        for store in [a, b, a] { try store.ok("sync", "--folder", folder) }

        try FileManager.default.removeItem(atPath: folder)
        try a.expectRefused(
            ["sync", "--folder", folder], mentions: ["the shared folder \(folder) does not exist or is not a directory (is it mounted?)"], code: 1)
        #expect(!FileManager.default.fileExists(atPath: folder), "a vanished folder is not recreated (it may be an unmounted drive)")

        // The folder comes back empty (a new Dropbox, a fresh mount): A publishes everything it
        // holds again, B's included, and B takes it with nothing lost.
        try sandbox.makeDirectory("Shared")
        let total = try a.operationCount()
        let republished = try a.ok("sync", "--folder", folder)
        #expect(republished == "published \(total) operations as \(try a.replicaID())-0000000001.cbundle")
        let later = try b.addReminder("from b, later")
        try b.ok("sync", "--folder", folder)
        try a.ok("sync", "--folder", folder)
        #expect(try a.show(later).string("title") == "from b, later")
        #expect(try a.dump() == b.dump())
        for store in [a, b] { #expect(try store.ok("sync", "--folder", folder) == "up to date") }
    }

    @Test func aWatcherWarnsWhileItsFolderIsGoneAndResumesWhenItIsBack() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let first = try a.addReminder("before the folder vanished")
        let watcher = try sandbox.start(["sync", "--folder", folder, "--watch", "--interval", "0.1", "--store", a.path])
        #expect(eventually(timeout: 20) { (try? bundleNames(in: folder).count) == 1 }, "the watcher publishes")

        try FileManager.default.removeItem(atPath: folder)
        let second = try a.addReminder("while the folder is gone")
        let warning = "syncctl: warning: the shared folder \(folder) does not exist or is not a directory (is it mounted?); retrying"
        #expect(eventually(timeout: 20) { watcher.stderr.contains(warning) }, "the watcher says why it cannot sync: \(watcher.stderr)")
        #expect(watcher.isRunning, "and keeps running")

        try sandbox.makeDirectory("Shared")
        #expect(eventually(timeout: 20) { (try? bundleNames(in: folder).count) == 1 }, "the watcher publishes again once the folder is back")
        // Wait for the file to be whole (the watcher writes it under a temporary name, then links it).
        #expect(try eventually(timeout: 20) {
            try b.ok("sync", "--folder", folder)
            return try b.reminders().count == 2
        })
        #expect(Set(try b.reminders().compactMap { $0.string("id") }) == [first, second])
        watcher.send(SIGTERM)
        let result = watcher.wait(timeout: 20)
        #expect(result.succeeded, "\(result)")
        for line in result.stderrLines { #expect(line == warning, "only the warning, once per attempt: \(result)") }
        #expect(try a.dump() == b.dump())
    }
}

extension Sandbox {
    /// Runs syncctl as an ordinary user would: as root, through `setpriv` without the
    /// capabilities that override file permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH).
    func runAsUser(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> RunResult {
        let binary = try SyncctlBinary.require()
        guard geteuid() == 0 else { return try run(arguments) }
        let setpriv = try #require(
            ["/usr/bin/setpriv", "/bin/setpriv"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "as root, file permission tests need setpriv (util-linux)", sourceLocation: sourceLocation)
        let result = try runProcess(
            URL(fileURLWithPath: setpriv), ["--bounding-set=-dac_override,-dac_read_search", "--", binary.path] + arguments,
            environment: environment(), scratch: root)
        return result
    }
}

extension Store {
    /// Runs a command on this store as an ordinary user (see `Sandbox.runAsUser`).
    func runAsUser(_ arguments: String..., sourceLocation: SourceLocation = #_sourceLocation) throws -> RunResult {
        try sandbox.runAsUser(arguments + ["--store", path], sourceLocation: sourceLocation)
    }
}
