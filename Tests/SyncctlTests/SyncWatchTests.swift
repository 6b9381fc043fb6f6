import Foundation
import Testing

/// `syncctl sync --folder DIR --watch` running in the background (SPEC.md §11, §14 "Watching").
@Suite(.waitsForProcesses) struct SyncWatchTests {
    /// Generous: a watcher looking every 0.2 s normally reacts well within a second.
    static let deadline: TimeInterval = 20

    /// Starts a watcher on `store`, lets `a` publish a new reminder through the folder, waits
    /// until the watcher brought it into `store` (read concurrently with the watcher's writes),
    /// then stops it with `signal` and checks it stopped cleanly.
    func watchThenStop(with signal: Int32) throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let idB = try b.replicaID()
        // b has something of its own, so the watcher's first sync publishes it: a sign it runs.
        let fromB = try b.addNote("from b before watching")
        let watcher = try sandbox.start(["sync", "--folder", folder, "--watch", "--interval", "0.2", "--store", b.path])
        let ownFile = folder + "/concord-v1/\(idB)-0000000001.cbundle"
        #expect(eventually(timeout: Self.deadline) { FileManager.default.fileExists(atPath: ownFile) || !watcher.isRunning },
                "the watcher publishes b's operations at once")
        #expect(watcher.isRunning, "the watcher keeps running: \(watcher.stdout) \(watcher.stderr)")

        // a syncs through the folder while b's watcher runs.
        let reminder = try a.addReminder("from a while b watches", "--tag", "live")
        let published = try a.ok("sync", "--folder", folder)
        #expect(published.hasPrefix("imported 3 operations from 1 file; published "), "a takes b's note and publishes its reminder: \(published)")
        let arrived = try eventually(timeout: Self.deadline) {
            try b.reminders().contains { $0.string("id") == reminder }
        }
        #expect(arrived, "the watcher imports a's file within \(Self.deadline) s")
        #expect(try b.show(reminder).strings("tags") == ["live"])

        // A change made on b while it is watched is published by the watcher too.
        let later = try b.addReminder("from b while watching")
        let secondFile = folder + "/concord-v1/\(idB)-0000000002.cbundle"
        #expect(eventually(timeout: Self.deadline) { FileManager.default.fileExists(atPath: secondFile) }, "the watcher publishes b's new change")
        #expect(try a.ok("sync", "--folder", folder) == "imported 5 operations from 1 file")
        #expect(try a.show(later).string("title") == "from b while watching")
        #expect(watcher.isRunning, "\(watcher.stderr)")

        watcher.send(signal)
        let result = watcher.wait(timeout: Self.deadline)
        #expect(!result.timedOut, "the watcher stops on signal \(signal): \(result)")
        #expect(!result.crashed && result.status == 0, "and exits 0: \(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        let lines = result.stdoutLines
        #expect(lines.first == "watching \(folder) every 0.2 s; stop with Ctrl-C", "\(result)")
        #expect(lines.last == "stopped", "\(result)")
        #expect(lines.contains("published 3 operations as \(idB)-0000000001.cbundle"), "\(result)")
        // (Each report is one line; an import and a publish may share one.)
        #expect(lines.contains { $0.hasPrefix("imported 6 operations from 1 file") }, "\(result)")
        #expect(lines.contains { $0.hasSuffix("published 5 operations as \(idB)-0000000002.cbundle") }, "\(result)")

        // The store is whole and in step with a afterwards.
        let dump = try b.dump()
        #expect(dump == (try a.dump()))
        #expect(try b.show(fromB).string("title") == "from b before watching")
        #expect(try b.ok("sync", "--folder", folder) == "up to date")
    }

    /// With a poll every minute, the watcher still imports a file renamed into the folder, and
    /// publishes a commit another process makes to its store, within seconds: it wakes on the
    /// folder's notifications and on the store's commit bell (SPEC.md §14, "Watching").
    @Test func theWatcherWakesOnTheFolderAndTheStoreWithoutWaitingForItsPoll() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let idB = try b.replicaID()
        _ = try b.addNote("from b before watching")
        let watcher = try sandbox.start(["sync", "--folder", folder, "--watch", "--interval", "60", "--store", b.path])
        defer { watcher.send(SIGKILL) }
        #expect(eventually(timeout: Self.deadline) { FileManager.default.fileExists(atPath: folder + "/concord-v1/\(idB)-0000000001.cbundle") })

        let fromA = try a.addReminder("renamed into the folder")
        _ = try a.ok("sync", "--folder", folder)
        let started = Date()
        #expect(try eventually(timeout: 25) { try b.reminders().contains { $0.string("id") == fromA } }, "imported without waiting for the poll")
        let imported = Date().timeIntervalSince(started)

        let later = try b.addReminder("committed by another process")
        let secondFile = folder + "/concord-v1/\(idB)-0000000002.cbundle"
        #expect(eventually(timeout: 25) { FileManager.default.fileExists(atPath: secondFile) }, "published without waiting for the poll")
        #expect(try a.ok("sync", "--folder", folder).hasPrefix("imported "))
        #expect(try a.show(later).string("title") == "committed by another process")
        #expect(imported < 30, "\(imported) s")
        watcher.send(SIGTERM)
        let result = watcher.wait(timeout: Self.deadline)
        #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
    }

    /// Two watchers that look every minute go on hearing each other through the folder after its
    /// `concord-v1` directory is moved away (their next sync makes it again), and after a restored
    /// copy of it is put in its place: a watch follows what the path names, not the directory it
    /// began with (SPEC.md §14, "Watching"). A watch of the old directory alone would hear nothing
    /// more until the poll, a minute later.
    @Test func watchersFollowTheFolderDirectoryMovedAwayAndRestored() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let layout = folder + "/concord-v1"
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        // Each has something of its own, published by its first sync: a sign that it watches.
        let ownFiles = try [a, b].map { store in
            try store.addNote("from \(store.path)")
            return layout + "/\(try store.replicaID())-0000000001.cbundle"
        }
        let watchers = try [a, b].map { store in
            try sandbox.start(["sync", "--folder", folder, "--watch", "--interval", "60", "--store", store.path])
        }
        defer { for watcher in watchers { watcher.send(SIGKILL) } }
        #expect(eventually(timeout: Self.deadline) { ownFiles.allSatisfy { FileManager.default.fileExists(atPath: $0) } },
                "\(watchers.map(\.stderr))")

        /// Adds a reminder on a (whose watcher publishes it at once, on its store's bell) and
        /// waits for b to hold it: the seconds it took, or nil after `deadline`.
        func secondsToReachB(_ title: String) throws -> TimeInterval? {
            let id = try a.addReminder(title)
            let started = Date()
            let arrived = try eventually(timeout: Self.deadline) { try b.reminders().contains { $0.string("id") == id } }
            return arrived ? Date().timeIntervalSince(started) : nil
        }
        let before = try secondsToReachB("before the move")
        #expect(before != nil, "\(watchers.map(\.stderr))")

        #expect(rename(layout, folder + "/moved-away") == 0)
        let afterMove = try secondsToReachB("after the move")
        #expect(afterMove != nil, "b hears the folder again within \(Self.deadline) s of its directory moving away, not at its poll a minute later")

        // A restored copy of the directory as it was before the move, put in place of the one the
        // watchers made again.
        let restored = sandbox.path("restored")
        try FileManager.default.copyItem(atPath: folder + "/moved-away", toPath: restored)
        try replaceDirectory(layout, with: restored, asideIn: folder)
        let afterRestore = try secondsToReachB("after the restore")
        #expect(afterRestore != nil, "b hears the restored directory within \(Self.deadline) s")

        for watcher in watchers {
            watcher.send(SIGTERM)
            let result = watcher.wait(timeout: Self.deadline)
            #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
        }
        #expect(try a.dump() == (try b.dump()))
    }

    /// Puts the directory `replacement` at `path`, moving what is there aside first. Watchers
    /// may make `path` again in between (their next sync does), so it tries again until the
    /// replacement is in place.
    func replaceDirectory(_ path: String, with replacement: String, asideIn folder: String) throws {
        for attempt in 0..<50 {
            if rename(path, folder + "/aside-\(attempt)") != 0 { try #require(errno == ENOENT, "\(String(cString: strerror(errno)))") }
            if rename(replacement, path) == 0 { return }
            try #require(errno == ENOTEMPTY || errno == EEXIST, "\(String(cString: strerror(errno)))")
        }
        Issue.record("\(replacement) could not be put at \(path)")
    }

    @Test func sigtermStopsTheWatcherAfterItSynced() throws {
        try watchThenStop(with: SIGTERM)
    }

    @Test func sigintStopsTheWatcherAfterItSynced() throws {
        try watchThenStop(with: SIGINT)
    }

    /// A watcher's report of each sync must reach its output when it happens, not only when the
    /// watcher stops: its output is usually a log file or a pipe to a service manager.
    @Test func theWatcherReportsEachSyncAsItHappens() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let watcher = try sandbox.start(["sync", "--folder", folder, "--watch", "--interval", "0.2", "--store", b.path])
        let reminder = try a.addReminder("from a")
        try a.ok("sync", "--folder", folder)
        #expect(try eventually(timeout: Self.deadline) { try b.reminders().contains { $0.string("id") == reminder } })

        // The line is due as soon as the sync that imported the reminder returned; 10 s is generous.
        let reported = eventually(timeout: 10) {
            watcher.stdout.split(separator: "\n").contains { $0.hasPrefix("imported 5 operations from 1 file") }
        }
        let seenWhileRunning = watcher.stdout
        #expect(watcher.isRunning)
        #expect(reported, "the watcher's output while it runs holds the sync it made: \(String(reflecting: seenWhileRunning))")

        watcher.send(SIGTERM)
        let result = watcher.wait(timeout: Self.deadline)
        #expect(result.succeeded, "\(result)")
        #expect(result.stdoutLines.last == "stopped", "\(result)")
    }
}
