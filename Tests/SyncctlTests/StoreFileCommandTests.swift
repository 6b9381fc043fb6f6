import ConcordCore
import Foundation
import Testing

/// What `syncctl` does to the store's file itself, beside other processes (SPEC.md §9, §9.1,
/// §12, §15.1): paths that are not regular files, modes, leftovers, keys, replica ids.
@Suite(.waitsForProcesses) struct StoreFileCommandTests {
    /// A FIFO blocks whoever opens it until its other end is opened: each is refused at once.
    @Test func pathsThatAreNotRegularFilesAreRefusedBeforeTheyAreOpened() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore("a.db")
        try store.addReminder("kept")
        let fifo = sandbox.path("fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        expectOneLineFailure(try sandbox.run(["status", "--store", fifo]), mentions: ["\(fifo) is not a regular file"], code: 1)
        expectOneLineFailure(try sandbox.run(["reminder", "add", "x", "--store", fifo]), mentions: ["\(fifo) is not a regular file"], code: 1)
        try store.expectRefused(["merge", fifo], mentions: ["\(fifo) is not a regular file"], code: 1)
        try store.expectRefused(["export", fifo], mentions: ["\(fifo) is not a regular file"], code: 1)
        try store.expectRefused(["export", sandbox.path("out.cbundle"), "--since", fifo], mentions: ["\(fifo) is not a regular file"], code: 1)
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("out.cbundle")))
        var status = stat()
        #expect(lstat(fifo, &status) == 0 && status.st_mode & S_IFMT == S_IFIFO, "the FIFO is left as it was")
    }

    /// A store's `-shm` or `-wal` named as a file to merge or export is refused unopened: SQLite
    /// tracks their locks apart from the files it opens, so opening one would drop them.
    @Test func aStoresSideFilesAreNeitherReadNorWritten() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore("a.db")
        try store.addReminder("kept")
        let other = try sandbox.makeStore("b.db")
        for suffix in ["-wal", "-shm"] {
            let side = store.path + suffix
            // SQLite's last connection to close removes them: make sure one is there each time.
            func present() {
                if !FileManager.default.fileExists(atPath: side) { #expect(FileManager.default.createFile(atPath: side, contents: Data())) }
            }
            present()
            try other.expectRefused(["merge", side], mentions: ["\(side) is SQLite's side file of the store at \(store.path)"], code: 1)
            present()
            let result = try sandbox.run(["export", side, "--store", store.path])
            expectOneLineFailure(result, mentions: ["\(side) is SQLite's side file of the store at \(store.path)"], code: 1)
            present()
            expectOneLineFailure(try sandbox.run(["status", "--store", side]), mentions: ["side file"], code: 1)
        }
        try store.ok("verify")
    }

    /// A key command refused on a read-only store leaves every file as it was, its mode included
    /// (it used to make the store 0600, which let the next write through).
    @Test func aKeyRefusedOnAReadOnlyStoreChangesNoMode() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore("a.db")
        try store.addReminder("kept")
        let other = try sandbox.makeStore("b.db")
        let text = String(try other.ok("key", "generate").split(separator: "\n")[0])
        let files = [store.path, store.path + "-wal", store.path + "-shm"].filter { FileManager.default.fileExists(atPath: $0) }
        for file in files { #expect(chmod(file, 0o400) == 0) }
        let before = try listing(of: sandbox.root.path)
        for arguments in [["key", "generate"], ["key", "import", text]] {
            let result = try sandbox.runAsUser(arguments + ["--store", store.path])
            expectOneLineFailure(result, mentions: ["read-only"], code: 1)
            for file in files { #expect(mode(of: file) == 0o400, "\(arguments): \(file) is \(String(mode(of: file), radix: 8))") }
            // (SQLite creates an empty `-wal` and a `-shm` beside a WAL store to read it at all.)
            let after = try listing(of: sandbox.root.path).filter { before[$0.key] != nil }
            #expect(after == before)
        }
        expectOneLineFailure(try store.runAsUser("reminder", "add", "y"), mentions: ["read-only"], code: 1)
        // A writable store is made private to its owner, and no more than that.
        for file in files { #expect(chmod(file, 0o644) == 0) }
        try store.ok("key", "generate")
        for file in files where FileManager.default.fileExists(atPath: file) { #expect(mode(of: file) == 0o600) }
    }

    /// `init` killed part way leaves `STORE.init-PID-HEX` and its sidecars; the next `init` removes
    /// them, but not those of an `init` whose process still runs.
    @Test func initRemovesWhatAKilledInitLeft() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("x.db")
        let dead = ["x.db.init-2147483646-1f2e", "x.db.init-2147483646-1f2e-wal", "x.db.init-2147483646-1f2e-shm",
                    "x.db.init-2147483646-1f2e-journal", "x.db.init-9c0ffee", "x.db.init-9c0ffee-wal"]
        let live = "x.db.init-\(getpid())-abc"
        let recentLegacy = "x.db.init-5eed"
        let notOurs = "x.db.init-notes"
        for name in dead + [live, recentLegacy, notOurs, "y.db.init-2147483646-1"] {
            #expect(FileManager.default.createFile(atPath: sandbox.path(name), contents: Data("left".utf8)))
        }
        // An older build's names carry no process id: they count as abandoned once 15 minutes old.
        for name in ["x.db.init-9c0ffee", "x.db.init-9c0ffee-wal"] {
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -16 * 60)], ofItemAtPath: sandbox.path(name))
        }
        let result = try sandbox.run(["init", "--store", path])
        #expect(result.succeeded, "\(result)")
        for name in dead { #expect(!FileManager.default.fileExists(atPath: sandbox.path(name)), "\(name) is left") }
        #expect(FileManager.default.fileExists(atPath: sandbox.path(live)), "another running init's file is kept")
        #expect(FileManager.default.fileExists(atPath: sandbox.path(recentLegacy)), "a recent one of an older build is kept")
        #expect(FileManager.default.fileExists(atPath: sandbox.path(notOurs)), "a name init does not make is kept")
        #expect(FileManager.default.fileExists(atPath: sandbox.path("y.db.init-2147483646-1")), "another store's is kept")

        // And for real: inits killed at moments spread over their run, then one that finishes.
        for delay in stride(from: 0.0, to: 0.3, by: 0.03) {
            _ = try sandbox.runKilled(["init", "--store", sandbox.path("k.db")], at: .after(delay))
            try? FileManager.default.removeItem(atPath: sandbox.path("k.db"))
        }
        #expect(try sandbox.run(["init", "--store", sandbox.path("k.db")]).succeeded)
        let left = try FileManager.default.contentsOfDirectory(atPath: sandbox.root.path).filter { $0.hasPrefix("k.db.init-") }
        #expect(left.isEmpty, "\(left)")
    }

    /// `key generate --force` while `serve` holds the store open: the old key's bytes are in no
    /// file afterwards (they stayed in the database file until every other process let go).
    @Test func aReplacedKeyIsInNoFileWhileAnotherProcessHoldsTheStore() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore("a.db")
        try store.ok("key", "generate")
        try store.addReminder("kept")
        let old = try keyBytes(sandbox, store)
        let (server, _) = try PeerCommandTests().serve(sandbox, store)
        try store.ok("key", "generate", "--force")
        let new = try keyBytes(sandbox, store)
        #expect(new != old)
        #expect(server.isRunning)
        for file in [store.path, store.path + "-wal"] {
            let contents = (try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data()
            #expect(contents.firstRange(of: old) == nil, "the replaced key is still in \(file)")
        }
        server.send(SIGTERM)
        _ = server.wait(timeout: 20)
    }

    /// A watcher running while another process gives the store a new replica id (`init --fork`)
    /// goes on as the new replica and publishes nothing more under the old one.
    @Test func aWatcherGoesOnAsTheReplicaTheStoreWasForkedInto() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let b = try sandbox.makeStore("b.db")
        let oldID = try b.replicaID()
        try b.addNote("before the fork")
        let watcher = try sandbox.start(["sync", "--folder", folder, "--watch", "--interval", "0.2", "--store", b.path])
        let first = folder + "/concord-v1/\(oldID)-0000000001.cbundle"
        #expect(eventually(timeout: 20) { FileManager.default.fileExists(atPath: first) }, "\(watcher.stderr)")
        let forked = try b.run("init", "--fork")
        #expect(forked.succeeded, "\(forked)")
        let newID = try b.replicaID()
        #expect(newID != oldID)
        let note = try b.addNote("after the fork")
        let published = folder + "/concord-v1/\(newID)-0000000001.cbundle"
        #expect(eventually(timeout: 20) { FileManager.default.fileExists(atPath: published) || !watcher.isRunning },
                "the watcher publishes as \(newID): \(watcher.stdout) \(watcher.stderr)")
        #expect(try bundleNames(in: folder).filter { $0.hasPrefix(oldID) } == ["\(oldID)-0000000001.cbundle"],
                "nothing more under the old id")
        let a = try sandbox.makeStore("a.db")
        try a.ok("sync", "--folder", folder)
        #expect(try a.show(note).string("title") == "after the fork")
        watcher.send(SIGTERM)
        let result = watcher.wait(timeout: 20)
        #expect(result.succeeded, "\(result)")
        #expect(result.stdout.contains("the store is now replica \(newID)"), "\(result)")
        // The library's line, with syncctl's words for what the other process did (SPEC.md §9.1).
        #expect(result.stdoutLines.contains(
            "the store at \(b.path) is now replica \(newID) (another process ran 'syncctl init --fork' on it); this process opened it as replica \(oldID): open it again"),
            "\(result)")
    }

    /// A watcher on a copied store refuses to publish; once another process runs the `init --fork`
    /// its warnings ask for, the watcher goes on as the new replica.
    @Test func aWatcherOnACopyGoesOnOnceTheCopyIsForked() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let original = try sandbox.makeStore("a.db")
        try original.addNote("in the original")
        let copy = Store(sandbox: sandbox, path: sandbox.path("copy.db"))
        try FileManager.default.copyItem(atPath: original.path, toPath: copy.path)
        let oldID = try original.replicaID()
        let watcher = try sandbox.start(["sync", "--folder", folder, "--watch", "--interval", "0.2", "--store", copy.path])
        #expect(eventually(timeout: 20) { watcher.stderr.contains("is a copy of the store at") }, "\(watcher.stdout) \(watcher.stderr)")
        #expect(watcher.stderr.components(separatedBy: "\n").contains(
            "syncctl: warning: \(copy.path) is a copy of the store at \(original.path) (another file): run 'syncctl init --fork' to make it a replica of its own, or 'syncctl init --moved' if it was moved and the original is no longer used; retrying"),
            "\(watcher.stderr)")
        #expect(try copy.run("init", "--fork").succeeded)
        let newID = try copy.replicaID()
        let published = folder + "/concord-v1/\(newID)-0000000001.cbundle"
        #expect(eventually(timeout: 20) { FileManager.default.fileExists(atPath: published) }, "\(watcher.stdout) \(watcher.stderr)")
        #expect(try bundleNames(in: folder).allSatisfy { !$0.hasPrefix(oldID) }, "nothing under the original's id")
        watcher.send(SIGTERM)
        let result = watcher.wait(timeout: 20)
        #expect(result.succeeded && result.stdout.contains("the store is now replica \(newID)"), "\(result)")
    }

    /// `serve` running while another process gives its store a new replica id goes on serving, on
    /// the same port, as the new replica: peers' batches are taken, not refused as the old id's.
    @Test func aServerGoesOnAsTheReplicaTheStoreWasForkedInto() throws {
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let (server, port) = try PeerCommandTests().serve(sandbox, a)
        try b.addReminder("before the fork")
        #expect(try b.ok("sync", "--peer", "127.0.0.1:\(port)").contains("sent 5"))
        #expect(try a.run("init", "--fork").succeeded)
        let newID = try a.replicaID()
        #expect(eventually(timeout: 20) { server.stdout.contains("the store is now replica \(newID)") }, "\(server.stdout) \(server.stderr)")
        let later = try b.addReminder("after the fork")
        try a.addReminder("a as the new replica")
        let synced = try b.ok("sync", "--peer", "127.0.0.1:\(port)")
        #expect(synced.contains("received 5 operations, sent 5"), "\(synced)")
        #expect(try a.show(later).string("title") == "after the fork")
        #expect(try a.dump() == (try b.dump()))
        server.send(SIGTERM)
        let result = server.wait(timeout: 20)
        #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
    }

    /// A watcher whose store file is replaced by another, or moved away, ends with one line and
    /// exit 1, having synced nothing of what is at the path now (SPEC.md §9.1): whether the store
    /// was wiped and created again, wiped and a backup renamed into its place, or moved away
    /// (which nothing but the store observer's poll notices). With a poll of a minute, it learns
    /// of it from the store's own observer, within about a second.
    @Test(arguments: ["wiped and created again", "wiped and a backup put in its place", "moved away"])
    func aWatcherEndsWhenItsStoreFileIsReplaced(_ how: String) throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let b = try sandbox.makeStore("b.db")
        let oldID = try b.replicaID()
        try b.addNote("before the store was replaced")
        let watcher = try sandbox.start(["sync", "--folder", folder, "--watch", "--interval", "60", "--store", b.path])
        let first = folder + "/concord-v1/\(oldID)-0000000001.cbundle"
        #expect(eventually(timeout: 20) { FileManager.default.fileExists(atPath: first) }, "\(watcher.stderr)")
        switch how {
        case "wiped and created again":
            #expect(try b.run("wipe", "--yes").succeeded)
            #expect(try b.run("init").succeeded)
            try b.addNote("in the file now at the path")
        case "wiped and a backup put in its place":
            let backup = try sandbox.makeStore("backup.db")
            #expect(try b.run("wipe", "--yes").succeeded)
            #expect(rename(backup.path, b.path) == 0)
            try b.addNote("in the file now at the path")
        default:
            // With its side files: the watcher's connection still writes into them.
            for suffix in ["", "-wal", "-shm"] { #expect(rename(b.path + suffix, sandbox.path("moved.db") + suffix) == 0) }
        }
        let result = watcher.wait(timeout: 20)
        #expect(!result.timedOut, "the watcher ends by itself: \(result)")
        #expect(result.status == 1 && !result.crashed, "\(result)")
        let line = "the store at \(b.path) was replaced by another file (wiped, restored or moved) since this process opened it; open it again"
        #expect(result.stderrLines == ["syncctl: " + line], "\(result)")
        #expect(result.stdoutLines.last == line, "logged as the watch's last event: \(result)")
        #expect(try bundleNames(in: folder) == ["\(oldID)-0000000001.cbundle"], "nothing published after: \(result)")
    }

    /// `serve` whose store file is wiped and created again ends with one line and exit 1, and the
    /// port is served no more: peers' batches would go into a file no other process finds.
    @Test func aServerEndsWhenItsStoreFileIsReplaced() throws {
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let (server, port) = try PeerCommandTests().serve(sandbox, a)
        #expect(try a.run("wipe", "--yes").succeeded)
        #expect(try a.run("init").succeeded)
        let result = server.wait(timeout: 20)
        #expect(!result.timedOut, "the server ends by itself: \(result)")
        #expect(result.status == 1 && !result.crashed, "\(result)")
        #expect(result.stderrLines == [
            "syncctl: the store at \(a.path) was replaced by another file (wiped, restored or moved) since this process opened it; open it again"
        ], "\(result)")
        try b.addReminder("after the server ended")
        #expect(!(try b.run("sync", "--peer", "127.0.0.1:\(port)").succeeded), "nothing is served at \(port) any more")
    }

    private func mode(of path: String) -> mode_t {
        var status = stat()
        return stat(path, &status) == 0 ? status.st_mode & 0o7777 : 0
    }

    /// The store's sync key as stored, read by another program (Python's sqlite3).
    private func keyBytes(_ sandbox: Sandbox, _ store: Store) throws -> Data {
        let result = try sandbox.python("""
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            print(db.execute("SELECT hex(value) FROM meta WHERE key = 'sync_key'").fetchone()[0])
            """, [store.path])
        #expect(result.succeeded, "\(result)")
        let hex = Array(result.out.utf8)
        return Data(stride(from: 0, to: hex.count - 1, by: 2).map { UInt8(String(decoding: hex[$0...$0 + 1], as: UTF8.self), radix: 16)! })
    }

    /// A failed `init` leaves no file and no directory it made: a name the file system cannot
    /// hold, under directories that were missing; a directory it may not write in.
    @Test func aFailedInitLeavesNoDirectoryAndNoFile() throws {
        let sandbox = try Sandbox()
        let before = try listing(of: sandbox.root.path)
        let long = sandbox.path("missing/deeper/" + String(repeating: "x", count: 220) + ".db")
        let refused = try sandbox.run(["init", "--store", long])
        expectOneLineFailure(refused, mentions: ["cannot create \(long): File name too long"], code: 1)
        #expect(try listing(of: sandbox.root.path) == before)

        let locked = try sandbox.makeDirectory("locked")
        #expect(chmod(locked, 0o555) == 0)
        defer { chmod(locked, 0o755) }
        let inLocked = try sandbox.runAsUser(["init", "--store", "\(locked)/store.db"])
        expectOneLineFailure(inLocked, mentions: ["cannot write in \(locked) (Permission denied)"], code: 1)
        let under = try sandbox.runAsUser(["init", "--store", "\(locked)/sub/store.db"])
        expectOneLineFailure(under, mentions: ["cannot create the directory \(locked)/sub: Permission denied"], code: 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: locked).isEmpty)
    }

    /// `init` killed at random moments leaves either a whole store, with its lock file, or no
    /// store and no lock file (only its temporary files, which the next `init` removes).
    @Test func aKilledInitLeavesAWholeStoreOrNothing() throws {
        let sandbox = try Sandbox()
        let seed = UInt64.random(in: 1...999_999)
        var random = SplitMix64(seed: seed)
        var whole = 0
        for kill in 0..<40 {
            let path = sandbox.path("s\(kill).db")
            let context = "kill \(kill + 1) of 40 (seed \(seed))"
            _ = try sandbox.runKilled(["init", "--store", path], at: .after(Double(random.next() % 120) / 1000))
            if FileManager.default.fileExists(atPath: path) {
                whole += 1
                let verified = try sandbox.run(["verify", "--store", path])
                #expect(verified.succeeded && verified.out.hasPrefix("sound: "), "\(context): \(verified)")
            } else {
                #expect(!FileManager.default.fileExists(atPath: path + "-lock"), "\(context): a lock file beside no store")
                let again = try sandbox.run(["init", "--store", path])
                #expect(again.succeeded, "\(context): \(again)")
                let left = try FileManager.default.contentsOfDirectory(atPath: sandbox.root.path).filter { $0.hasPrefix("s\(kill).db.init-") }
                #expect(left.isEmpty, "\(context): the next init removed what the killed one left: \(left)")
            }
        }
        print("StoreFileCommandTests: \(whole) of 40 killed inits had linked their store (seed \(seed))")
    }
}
