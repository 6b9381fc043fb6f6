import Foundation
import Testing

/// What `serve` and `sync --watch` log, at each level, as text and as JSON (SPEC.md §11, "Logs").
@Suite(.waitsForProcesses) struct LogTests {
    /// Starts `serve` with `options`, waits for its "serving" event, and returns it with its port.
    func serve(_ sandbox: Sandbox, _ store: Store, _ options: [String]) throws -> (BackgroundRun, Int) {
        let server = try sandbox.start(["serve", "--listen", "127.0.0.1:0", "--store", store.path] + options)
        #expect(eventually(timeout: 20) { server.stdout.contains("serving ") || !server.isRunning }, "\(server.stderr)")
        let match = try #require(server.stdout.firstMatch(of: /serving .+ on 127\.0\.0\.1:(\d+) \(sync key/), "\(server.stdout)")
        return (server, Int(match.1)!)
    }

    /// One JSON object a line, each with the time, level, label, message and metadata.
    func events(_ output: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
        try output.split(separator: "\n").map { line in
            let event = try jsonObject(String(line), sourceLocation: sourceLocation)
            #expect(Set(event.keys) == ["time", "level", "label", "message", "metadata"], "\(line)", sourceLocation: sourceLocation)
            #expect((event["time"] as? String)?.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "\(line)", sourceLocation: sourceLocation)
            return event
        }
    }

    func pair(_ sandbox: Sandbox) throws -> (Store, Store, wrongKey: Store) {
        let (a, b) = try sandbox.makePairedStores()
        try b.addReminder("from b")
        let c = try sandbox.makeStore("c.db")
        try c.ok("key", "generate")
        return (a, b, c)
    }

    @Test func serveLogsEachEventAsJSONDownToDebug() throws {
        let sandbox = try Sandbox()
        let (a, b, wrongKey) = try pair(sandbox)
        let (server, port) = try serve(sandbox, a, ["--log-format", "json", "--log-level", "debug"])
        try b.ok("sync", "--peer", "127.0.0.1:\(port)")
        _ = try wrongKey.run("sync", "--peer", "127.0.0.1:\(port)")
        server.send(SIGTERM)
        let result = server.wait(timeout: 20)
        #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
        let log = try events(result.stdout)
        #expect(log.map { $0["level"] as? String } == ["notice", "debug", "info", "debug", "notice", "notice"], "\(result)")
        #expect(log.allSatisfy { $0["label"] as? String == "concord.serve" })
        #expect((log[0]["message"] as? String)?.hasPrefix("serving \(a.path) on 127.0.0.1:\(port) (sync key ") == true)
        let session = try #require(log[2]["metadata"] as? [String: Any])
        #expect(session["operations_received"] as? String == "5" && session["operations_sent"] as? String == "0", "\(session)")
        #expect((session["peer"] as? String)?.hasPrefix("127.0.0.1:") == true && session["seconds"] != nil && session["bytes_received"] != nil)
        #expect((log[2]["message"] as? String)?.hasPrefix("peer 127.0.0.1:") == true)
        let failed = try #require(log[4]["metadata"] as? [String: Any])
        #expect(failed["failure"] as? String == "the peer does not hold this store's sync key", "\(failed)")
        #expect(log[5]["message"] as? String == "stopped")
    }

    /// Text: at `notice`, a finished session is not logged and a failed one is; at `debug`, each
    /// connection too, with its level first.
    @Test func serveLogsTextAtTheLevelAsked() throws {
        let sandbox = try Sandbox()
        let (a, b, wrongKey) = try pair(sandbox)
        for level in ["notice", "debug"] {
            let (server, port) = try serve(sandbox, a, ["--log-level", level])
            try b.ok("sync", "--peer", "127.0.0.1:\(port)")
            _ = try wrongKey.run("sync", "--peer", "127.0.0.1:\(port)")
            server.send(SIGTERM)
            let result = server.wait(timeout: 20)
            #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
            let lines = result.stdoutLines
            let connected = lines.filter { $0.hasPrefix("debug: peer 127.0.0.1:") && $0.hasSuffix(": connected") }
            let finished = lines.filter { $0.hasPrefix("peer 127.0.0.1:") && !$0.contains("failed") }
            let failed = lines.filter { $0.hasPrefix("peer 127.0.0.1:") && $0.contains(": failed after ") }
            #expect(connected.count == (level == "debug" ? 2 : 0), "\(result)")
            #expect(finished.count == (level == "debug" ? 1 : 0), "\(result)")
            #expect(failed.count == 1, "\(result)")
            #expect(lines.first?.hasPrefix("serving ") == true && lines.last == "stopped", "\(result)")
        }
    }

    /// A compaction by itself that fails (a damaged log row, here) is logged once and tried again
    /// a minute later at the soonest (SPEC.md §5.8, "Compacting by itself"): `serve` looks once a
    /// second, and used to read the whole log and log the failure at each look.
    @Test func aFailedCompactionIsNotTriedAgainAtEachLook() throws {
        let sandbox = try Sandbox()
        let (a, _, _) = try pair(sandbox)
        for index in 0..<5 { try a.addReminder("r\(index)") }
        try sandbox.python("""
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1]); c.execute("UPDATE log SET ops = x'FF'"); c.commit(); c.close()
            """, [a.path])
        let (server, _) = try serve(sandbox, a, ["--compact-after", "1"])
        #expect(eventually(timeout: 20) { server.stderr.contains("compaction failed") }, "\(server.stderr)")
        // Four looks, a second apart.
        Thread.sleep(forTimeInterval: 4.5)
        server.send(SIGTERM)
        let result = server.wait(timeout: 20)
        let failures = result.stderr.split(separator: "\n").filter { $0.contains("compaction failed: ") && $0.hasSuffix("; it is tried again later") }
        #expect(failures.count == 1, "\(result)")
        #expect(result.succeeded, "\(result)")
    }

    @Test func watchLogsEachSyncAndEachSkippedFile() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let b = try sandbox.makeStore("b.db")
        try b.addNote("from b")
        let junk = "\(String(repeating: "ab", count: 16))-0000000001.cbundle"
        try FileManager.default.createDirectory(atPath: folder + "/concord-v1", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: folder + "/concord-v1/" + junk, contents: Data("not a bundle".utf8)))
        let watcher = try sandbox.start(["sync", "--folder", folder, "--watch", "--interval", "0.2", "--store", b.path,
                                         "--log-format", "json", "--log-level", "debug"])
        #expect(eventually(timeout: 20) { watcher.stdout.contains("published 3 operations") })
        try b.addNote("later")
        #expect(eventually(timeout: 20) { watcher.stdout.components(separatedBy: "published 3 operations").count == 3 })
        // A sync's own writes cost one more sync that finds nothing to do: logged at debug.
        #expect(eventually(timeout: 20) { watcher.stdout.contains("\"message\":\"up to date\"") }, "\(watcher.stdout)")
        watcher.send(SIGINT)
        let result = watcher.wait(timeout: 20)
        #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
        let log = try events(result.stdout)
        #expect(log.allSatisfy { $0["label"] as? String == "concord.watch" })
        #expect(log.first?["level"] as? String == "notice" && (log.first?["message"] as? String)?.hasPrefix("watching ") == true)
        #expect(log.last?["message"] as? String == "stopped")
        let skipped = log.filter { $0["level"] as? String == "warning" }
        #expect(skipped.count >= 1 && skipped.allSatisfy { ($0["message"] as? String)?.hasPrefix("skipping \(junk): ") == true }, "\(result)")
        let synced = log.filter { $0["level"] as? String == "info" }
        #expect(synced.count == 2, "\(result)")
        let metadata = try #require(synced.first?["metadata"] as? [String: Any])
        #expect(metadata["operations_published"] as? String == "3" && metadata["folder"] != nil && metadata["seconds"] != nil, "\(metadata)")
        #expect(log.contains { $0["level"] as? String == "debug" && $0["message"] as? String == "up to date" }, "\(result)")
    }

    @Test func logOptionsGoWithLongRunningModesOnly() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let folder = try sandbox.makeDirectory("Shared")
        try store.expectRefused(["sync", "--folder", folder, "--log-level", "debug"], mentions: ["--log-level and --log-format go with --watch"], code: 64)
        try store.expectRefused(["serve", "--log-level", "loud"], mentions: ["loud"], code: 64)
        try store.expectRefused(["serve", "--log-format", "xml"], mentions: ["xml"], code: 64)
    }
}
