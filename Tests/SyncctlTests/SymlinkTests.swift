import Foundation
import Testing

/// Stores, their directories, bundles and shared folders reached through symbolic links, and
/// chains of them (SPEC.md §9): dotfile managers, a data directory moved to another disk and the
/// XDG directory itself put them there. Each is the file it names: no command takes the link for
/// another file, a copy (§9.1), or a path too long to read.
@Suite(.waitsForProcesses) struct SymlinkTests {
    /// Every kind of command, run on one store through a link, a chain of links, and a linked
    /// directory, is the same as on the store itself; a bundle reached through links merges.
    @Test func everyCommandWorksOnAStoreReachedThroughLinks() throws {
        let sandbox = try Sandbox()
        let real = try sandbox.makeDirectory("real")
        let original = try sandbox.makeStore("real/a.db")
        let other = try sandbox.makeStore("b.db")
        let folder = try sandbox.makeDirectory("shared")
        #expect(symlink("\(real)/a.db", sandbox.path("link.db")) == 0)
        #expect(symlink(sandbox.path("link.db"), sandbox.path("chain.db")) == 0)
        #expect(symlink(real, sandbox.path("linked-dir")) == 0)
        let reached = ["link.db", "chain.db", "linked-dir/a.db"].map { Store(sandbox: sandbox, path: sandbox.path($0)) }

        let fromOther = try other.addReminder("from b")
        try other.ok("export", sandbox.path("b.cbundle"))
        #expect(symlink(sandbox.path("b.cbundle"), sandbox.path("link.cbundle")) == 0)
        #expect(symlink(sandbox.path("link.cbundle"), sandbox.path("chain.cbundle")) == 0)

        for (index, store) in reached.enumerated() {
            let context = "through \(store.path)"
            let id = try store.addReminder("reminder \(index)", "--tag", "t\(index)")
            try store.ok("reminder", "edit", id, "--notes", "edited")
            try store.ok("reminder", "complete", id)
            try store.addNote("note \(index)")
            #expect(try store.show(id)["notes"] as? String == "edited", "\(context)")
            #expect(try store.ok("reminder", "list", "--all").contains("reminder \(index)"), "\(context)")
            try store.ok("status")
            try store.ok("log", "--limit", "2")
            try store.ok("history", id)
            try store.ok("conflicts")
            try store.ok("verify")
            try store.ok("dump")
            try store.ok("changes", "--since", "{}")
            try store.ok("merge", index == 0 ? sandbox.path("link.cbundle") : sandbox.path("chain.cbundle"))
            try store.ok("merge", other.path)
            try store.ok("export", sandbox.path("out-\(index).cbundle"))
            try store.ok("sync", "--folder", folder)
        }
        #expect(try original.show(fromOther)["title"] as? String == "from b", "the bundle and the store merged through links")
        #expect(try original.reminders(all: true).count == 4)
        // One store: one lock file, beside the file the links name, and no copy refused.
        #expect(FileManager.default.fileExists(atPath: "\(real)/a.db-lock"))
        for name in ["link.db-lock", "chain.db-lock"] { #expect(!FileManager.default.fileExists(atPath: sandbox.path(name))) }
        try original.ok("reminder", "add", "written at the file itself")
        for store in reached { #expect(try store.dump() == (try original.dump())) }

        // Keys, a fork through a link, and `init` through a link to a store refused as existing.
        try reached[1].ok("key", "generate")
        #expect(try reached[0].ok("key", "show", "--id") == (try original.ok("key", "show", "--id")))
        try reached[1].ok("init", "--moved")
        let refused = try sandbox.run(["init", "--store", sandbox.path("chain.db")])
        expectOneLineFailure(refused, mentions: ["a store already exists at"], code: 1)
        try reached[2].ok("init", "--fork")
        #expect(try original.replicaID() == (try reached[0].replicaID()))
        try original.ok("verify")
    }

    /// A server, a peer client, an import, notes, a follower and a watcher, each on a store
    /// reached through links: the same as on the files they name.
    @Test func longLivedModesAndPeerSyncWorkThroughLinks() throws {
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let folder = try sandbox.makeDirectory("shared")
        #expect(symlink(a.path, sandbox.path("a-link.db")) == 0)
        #expect(symlink(b.path, sandbox.path("b-link.db")) == 0)
        #expect(symlink(sandbox.path("b-link.db"), sandbox.path("b-chain.db")) == 0)
        let aLink = Store(sandbox: sandbox, path: sandbox.path("a-link.db"))
        let bChain = Store(sandbox: sandbox, path: sandbox.path("b-chain.db"))

        let server = try sandbox.start(["serve", "--listen", "127.0.0.1:0", "--store", aLink.path])
        #expect(eventually(timeout: 20) { server.stdout.contains("\n") || !server.isRunning })
        let listening = server.stdout.firstMatch(of: #/on 127\.0\.0\.1:(\d+) /#)
        let port = try #require(listening.map { String($0.1) }, "\(server.stdout) \(server.stderr)")
        let follower = try sandbox.start(["changes", "--follow", "--json", "--store", bChain.path])
        let watcher = try sandbox.start(["sync", "--folder", folder, "--watch", "--interval", "0.2", "--store", aLink.path])

        let note = try aLink.addNote("through a link", "--body", "first")
        try aLink.ok("note", "edit", note, "--body", "second")
        let reminder = try aLink.addReminder("snoozed through a link", "--due", "2026-12-01T09:00:00Z")
        try aLink.ok("reminder", "snooze", reminder, "--minutes", "30")
        try aLink.ok("reminder", "due", "--at", "2026-12-02T00:00:00Z")
        try sandbox.write(Data(#"[{"kind":"note","title":"imported through a chain"}]"#.utf8), to: "import.json")
        try bChain.ok("import", sandbox.path("import.json"))
        try bChain.ok("sync", "--peer", "127.0.0.1:\(port)")
        #expect(try b.dump() == (try a.dump()))
        #expect(eventually(timeout: 20) { follower.stdout.contains("\"origin\":\"merge\"") }, "\(follower.stdout) \(follower.stderr)")
        #expect(eventually(timeout: 20) { (try? bundleNames(in: folder).count) ?? 0 > 0 }, "the watcher published through the link")

        for process in [server, follower, watcher] { process.send(SIGTERM) }
        for process in [server, follower, watcher] {
            let result = process.wait(timeout: 30)
            #expect(result.succeeded, "\(result)")
            #expect(!result.stderr.contains("copy"), "\(result)")
        }
        try a.ok("verify")
        try b.ok("verify")
    }

    /// A wipe through a link removes the store the link names, with its side files, and the link.
    @Test func aWipeThroughALinkRemovesTheStoreAndTheLink() throws {
        let sandbox = try Sandbox()
        let real = try sandbox.makeDirectory("real")
        let store = try sandbox.makeStore("real/a.db")
        try store.addReminder("kept until the wipe")
        #expect(symlink("\(real)/a.db", sandbox.path("link.db")) == 0)
        let result = try sandbox.run(["wipe", "--yes", "--store", sandbox.path("link.db")])
        #expect(result.succeeded, "\(result)")
        for path in ["\(real)/a.db", "\(real)/a.db-wal", "\(real)/a.db-shm", "\(real)/a.db-lock", sandbox.path("link.db")] {
            var status = stat()
            #expect(lstat(path, &status) != 0, "\(path) is gone")
        }
    }
}
