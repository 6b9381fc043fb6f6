import Foundation
import Testing

/// Disk faults (issue 6): a read-only store or directory, a read-only or vanished shared folder,
/// unreadable files, a full disk and a file size limit. Each is one clear line on stderr and a
/// non-zero exit, loses nothing, and the next run recovers once the fault is gone.
///
/// Permissions mean nothing to root, and CI runs as root: there the commands run through
/// `setpriv` without the capabilities that override file permissions.
@Suite(.waitsForProcesses) struct DiskFaultTests {
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
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(files == ["store.db", "store.db-lock"])
        chmod(directory, 0o555)
        defer { chmod(directory, 0o755) }
        // SQLite cannot create the store's -wal and -shm files beside it: not even reads work.
        let message = "the store at \(store.path) is read-only: its directory cannot be written"
        expectFailure(try store.runAsUser("reminder", "add", "refused"), message)
        expectFailure(try store.runAsUser("reminder", "list"), message)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == files)

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
        expectOneLineFailure(refused, mentions: ["cannot write in \(bare) (Permission denied)"], code: 1)

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
        // Under its next serial: a replica never uses a name twice (SPEC.md §14).
        #expect(republished == "published \(total) operations as \(try a.replicaID())-0000000002.cbundle (\(total) of them the folder had lost)")
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

        // The folder vanishes at once, as an unmounted drive does: removed in place, it would
        // vanish file by file, and a sync woken in between may fail otherwise (writing into a
        // directory removed under it), before it finds the folder gone.
        #expect(rename(folder, sandbox.path("gone")) == 0)
        try FileManager.default.removeItem(atPath: sandbox.path("gone"))
        let second = try a.addReminder("while the folder is gone")
        let warning = "syncctl: warning: the shared folder \(folder) does not exist or is not a directory (is it mounted?); retrying"
        #expect(eventually(timeout: 20) { watcher.stderr.contains(warning) }, "the watcher says why it cannot sync: \(watcher.stderr)")
        #expect(watcher.isRunning, "and keeps running")

        try sandbox.makeDirectory("Shared")
        #expect(eventually(timeout: 20) { (try? bundleNames(in: folder).count) == 1 }, "the watcher publishes again once the folder is back")
        try b.ok("sync", "--folder", folder)
        #expect(Set(try b.reminders().compactMap { $0.string("id") }) == [first, second])
        watcher.send(SIGTERM)
        let result = watcher.wait(timeout: 20)
        #expect(result.succeeded, "\(result)")
        // A sync under way as the folder vanished may fail writing into it, before it can find
        // it gone: a warning of its own, for that attempt.
        let interrupted = "syncctl: warning: cannot write in \(folder)/concord-v1 (No such file or directory); retrying"
        for line in result.stderrLines {
            #expect(line == warning || line == interrupted, "only the warnings, once per attempt: \(result)")
        }
        #expect(try a.dump() == b.dump())
    }

    @Test func unreadableAndUnwritableFilesAreOneLineErrors() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        _ = try store.addReminder("mine")
        let other = try sandbox.makeStore("other.db")
        let theirs = try other.addReminder("theirs")
        let bundle = sandbox.path("theirs.cbundle")
        try other.ok("export", bundle)
        let before = try store.snapshot()

        // A bundle that cannot be read.
        chmod(bundle, 0o000)
        expectFailure(try store.runAsUser("merge", bundle), "cannot read \(bundle) (Permission denied)")
        // A store that cannot be read, given to merge.
        chmod(other.path, 0o000)
        expectFailure(try store.runAsUser("merge", other.path), "cannot read \(other.path) (Permission denied)")
        chmod(other.path, 0o644)
        #expect(try store.snapshot() == before)

        // An unreadable bundle in a shared folder is skipped with a warning, then imported once readable.
        let folder = try sandbox.makeDirectory("Shared")
        try other.ok("sync", "--folder", folder)
        let name = try #require(try bundleNames(in: folder).first)
        chmod(folder + "/concord-v1/" + name, 0o000)
        let skipped = try store.runAsUser("sync", "--folder", folder)
        #expect(skipped.succeeded && skipped.stderrLines.count == 1, "\(skipped)")
        #expect(skipped.stderr.hasPrefix("syncctl: warning: skipping \(name): cannot read "), "\(skipped)")
        chmod(folder + "/concord-v1/" + name, 0o644)
        chmod(bundle, 0o644)
        let imported = try store.runAsUser("sync", "--folder", folder)
        #expect(imported.succeeded && imported.out.hasPrefix("imported 5 operations from 1 file"), "\(imported)")
        #expect(try store.show(theirs).string("title") == "theirs")

        // An export into a directory that cannot be written: no file, one line.
        let locked = try sandbox.makeDirectory("locked")
        chmod(locked, 0o555)
        defer { chmod(locked, 0o755) }
        let exported = try store.runAsUser("export", locked + "/out.cbundle")
        expectOneLineFailure(exported, mentions: ["cannot write in \(locked)", "permission denied"], code: 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: locked).isEmpty)
        try store.expectSound("after the refused commands")
    }

    /// A store on a read-only mount cannot even be read: SQLite cannot make its `-shm` file
    /// beside it. `init` there makes nothing. Once the mount is writable again, all works.
    @Test func aStoreOnAReadOnlyMountIsRefusedWithTheDirectoryMessage() throws {
        let sandbox = try Sandbox()
        let disk = try sandbox.makeDirectory("disk")
        try sandbox.mount(["-t", "tmpfs", "-o", "size=4m", "tmpfs", disk])
        defer { sandbox.unmount(disk) }
        let store = try sandbox.makeStore("disk/store.db")
        let kept = try store.addReminder("written before")
        try sandbox.mount(["-o", "remount,ro", disk])
        let files = try FileManager.default.contentsOfDirectory(atPath: disk).sorted()

        let message = "the store at \(store.path) is read-only: its directory cannot be written"
        expectFailure(try store.run("reminder", "add", "refused"), message)
        expectFailure(try store.run("reminder", "list"), message)
        expectFailure(try sandbox.run(["init", "--store", "\(disk)/new.db"]), "cannot write in \(disk) (Read-only file system)")
        expectFailure(try sandbox.run(["init", "--store", "\(disk)/sub/new.db"]), "cannot create the directory \(disk)/sub: Read-only file system")
        #expect(try FileManager.default.contentsOfDirectory(atPath: disk).sorted() == files)

        try sandbox.mount(["-o", "remount,rw", disk])
        let added = try store.addReminder("written after")
        #expect(try Set(store.reminders().compactMap { $0.string("id") }) == [kept, added])
        try store.expectSound("after the mount was writable again")
    }

    /// A full disk, for real: a small tmpfs (mounting one needs root, as CI and this project's
    /// machines have).
    @Test func aFullDiskIsOneLineLosesNothingAndRecovers() throws {
        let sandbox = try Sandbox()
        let disk = try sandbox.makeDirectory("disk")
        try sandbox.mount(["-t", "tmpfs", "-o", "size=2m", "tmpfs", disk])
        defer { sandbox.unmount(disk) }

        let store = try sandbox.makeStore("disk/store.db")
        let kept = try store.addReminder("written before", "--tag", "kept")
        try LargeStores.makeB(at: sandbox.path("big.db"), records: 1000, seed: 41)
        let big = Store(sandbox: sandbox, path: sandbox.path("big.db"))
        let bundle = sandbox.path("big.cbundle")
        try big.ok("export", bundle)
        let folder = try sandbox.makeDirectory("disk/Shared")
        let before = try store.snapshot()

        /// Fills the disk to `free` bytes of room.
        func fill(leaving free: Int) throws {
            let filler = disk + "/filler"
            try? FileManager.default.removeItem(atPath: filler)
            var info = statvfs()
            try #require(statvfs(disk, &info) == 0)
            let available = Int(info.f_bavail) * Int(info.f_frsize)
            try Data(count: max(0, available - free)).write(to: URL(fileURLWithPath: filler))
        }
        let full = "the disk is full; nothing was written to \(store.path)"

        // Room for the store to open, not for the merge's log: SQLite says the disk is full.
        try fill(leaving: 200 * 1024)
        expectFailure(try store.run("merge", bundle), full)
        try fill(leaving: 100 * 1024)
        expectFailure(try store.run("reminder", "add", "refused", "--notes", String(repeating: "n", count: 120_000)), full)
        // No room at all: SQLite cannot even open the store, and says only "disk I/O error".
        try fill(leaving: 0)
        expectFailure(try store.run("reminder", "add", "refused"), full)
        // A bundle written to the full disk (from a store elsewhere): none of it stays.
        let exported = try big.run("export", disk + "/out.cbundle")
        expectFailure(exported, "the disk is full; nothing was written to \(disk)/out.cbundle")
        // Less room than the bundle takes.
        let bundleBytes = try #require(try FileManager.default.attributesOfItem(atPath: bundle)[.size] as? Int)
        try fill(leaving: bundleBytes / 2)
        let published = try big.run("sync", "--folder", folder)
        expectOneLineFailure(published, mentions: ["the disk is full; nothing was written to \(folder)/concord-v1/"], code: 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder + "/concord-v1").isEmpty, "no half-written file is left")

        // Room again: nothing was lost, and everything goes through.
        try FileManager.default.removeItem(atPath: disk + "/filler")
        #expect(try store.snapshot() == before, "the failed commands changed nothing")
        try store.ok("merge", bundle)
        let added = try store.addReminder("written after")
        try big.ok("sync", "--folder", folder)
        #expect(try store.ok("sync", "--folder", folder).hasPrefix("imported 0 operations from 1 file; published "))
        #expect(try store.show(kept).strings("tags") == ["kept"])
        #expect(try store.show(added).string("title") == "written after")
        #expect(try store.operationCount() == (try big.operationCount()) + 11)
        try store.expectSound("after the disk had room again")
    }

    /// A file size limit (`ulimit -f`): writes past it fail with EFBIG, which syncctl reports
    /// (rather than dying of SIGXFSZ); nothing is lost and the next run without it succeeds.
    @Test func aFileSizeLimitIsOneLineLosesNothingAndRecovers() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let kept = try store.addReminder("written before")
        try LargeStores.makeB(at: sandbox.path("big.db"), records: 1000, seed: 42)
        let big = Store(sandbox: sandbox, path: sandbox.path("big.db"))
        let bundle = sandbox.path("big.cbundle")
        try big.ok("export", bundle)
        let before = try store.snapshot()
        let binary = try SyncctlBinary.require().path

        /// Runs syncctl under a file size limit of 40 KiB (room for the store's 32 KiB
        /// shared-memory file, not for the merge's log or the bundle; SIGXFSZ at its default).
        func limited(_ arguments: [String]) throws -> RunResult {
            let script = "ulimit -f 40; exec \"$0\" \"$@\""
            return try runProcess(URL(fileURLWithPath: "/bin/bash"), ["-c", script, binary] + arguments, environment: sandbox.environment(), scratch: sandbox.root)
        }
        // The merge's log outgrows the limit.
        let merged = try limited(["merge", bundle, "--store", store.path])
        expectFailure(merged, "SQLite error on \(store.path): disk I/O error")
        #expect(try store.snapshot() == before)
        // So does the exported bundle: nothing of it is left.
        let out = sandbox.path("out.cbundle")
        let exported = try limited(["export", out, "--store", big.path])
        expectFailure(exported, "cannot write \(out): File too large")
        #expect(!FileManager.default.fileExists(atPath: out))
        #expect(try FileManager.default.contentsOfDirectory(atPath: sandbox.root.path).allSatisfy { !$0.contains(".tmp-") })

        try store.ok("merge", bundle)
        try store.ok("export", out)
        #expect(try store.show(kept).string("title") == "written before")
        #expect(try store.operationCount() == (try big.operationCount()) + 5)
        try store.expectSound("after the limit")
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

extension Sandbox {
    /// Runs `mount` with `arguments` (it needs root, as CI and this project's machines have).
    func mount(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["mount"] + arguments, environment: environment(), scratch: root)
        try #require(result.succeeded, "mount failed (this test needs root): \(result)", sourceLocation: sourceLocation)
    }

    /// Unmounts what `mount` mounted at `path`.
    func unmount(_ path: String) {
        _ = try? runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["umount", path], environment: environment(), scratch: root)
    }
}
