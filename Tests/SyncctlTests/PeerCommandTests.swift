import Foundation
import Testing

/// `syncctl serve` in the background and `syncctl sync --peer` from other stores (SPEC.md §11, §15.9).
extension Sandbox {
    /// Stores a.db and b.db holding one sync key, made by a and imported by b, for a peer session.
    func makePairedStores(sourceLocation: SourceLocation = #_sourceLocation) throws -> (a: Store, b: Store) {
        let a = try makeStore("a.db", sourceLocation: sourceLocation)
        let b = try makeStore("b.db", sourceLocation: sourceLocation)
        try b.ok("key", "import", String(try a.ok("key", "generate", sourceLocation: sourceLocation).split(separator: "\n")[0]), sourceLocation: sourceLocation)
        return (a, b)
    }
}

@Suite(.waitsForProcesses) struct PeerCommandTests {
    /// Starts `serve --listen 127.0.0.1:0` on `store` and returns it with the port it printed.
    func serve(_ sandbox: Sandbox, _ store: Store, sourceLocation: SourceLocation = #_sourceLocation) throws -> (BackgroundRun, Int) {
        let server = try sandbox.start(["serve", "--listen", "127.0.0.1:0", "--store", store.path])
        #expect(eventually(timeout: 20) { server.stdout.contains("\n") || !server.isRunning }, sourceLocation: sourceLocation)
        let first = String(server.stdout.split(separator: "\n").first ?? "")
        let match = try #require(first.firstMatch(of: /^serving (.+) on 127\.0\.0\.1:(\d+) \(sync key ([0-9a-f]{16})\); stop with Ctrl-C$/),
                                 "\(server.stdout) \(server.stderr)", sourceLocation: sourceLocation)
        #expect(String(match.1) == store.path, sourceLocation: sourceLocation)
        return (server, Int(match.2)!)
    }

    @Test func serveAndSyncWithKeysFromGenerateAndImport() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let text = String(try a.ok("key", "generate").split(separator: "\n")[0])
        #expect(try b.ok("key", "import", text).hasPrefix("imported sync key "))
        let fromA = try a.addReminder("from a", "--tag", "home")
        let fromB = try b.addNote("from b")
        let opsA = try a.operationCount()
        let opsB = try b.operationCount()

        let (server, port) = try serve(sandbox, a)
        let synced = try b.ok("sync", "--peer", "127.0.0.1:\(port)")
        #expect(synced.hasPrefix("synced with 127.0.0.1:\(port): received \(opsA) operations, sent \(opsB) ("), "\(synced)")
        #expect(try b.show(fromA).string("title") == "from a")
        #expect(try a.show(fromB).string("title") == "from b")
        #expect(try a.dump() == (try b.dump()))
        #expect(try b.ok("sync", "--peer", "127.0.0.1:\(port)").hasPrefix("synced with 127.0.0.1:\(port): up to date ("))

        // Wrong key: a clear line on both sides, and the server keeps serving.
        let c = try sandbox.makeStore("c.db")
        try c.ok("key", "generate")
        try c.addNote("from c")
        try c.expectRefused(["sync", "--peer", "127.0.0.1:\(port)"], mentions: ["sync with 127.0.0.1:\(port) failed: the peer does not hold this store's sync key"], code: 1)
        // No key at all.
        let d = try sandbox.makeStore("d.db")
        try d.expectRefused(["sync", "--peer", "127.0.0.1:\(port)"], mentions: ["has no sync key"], code: 1)
        #expect(try b.ok("sync", "--peer", "127.0.0.1:\(port)").contains("up to date"))
        #expect(server.isRunning)

        server.send(SIGTERM)
        let result = server.wait(timeout: 20)
        #expect(result.succeeded, "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        let lines = result.stdoutLines
        #expect(lines.last == "stopped", "\(result)")
        let sessions = lines.filter { $0.hasPrefix("peer 127.0.0.1:") }
        #expect(sessions.count == 4, "\(result)")
        #expect(sessions.first?.contains(": received \(opsB) operations (") == true, "\(result)")
        #expect(sessions.first?.contains("sent \(opsA) (") == true, "\(result)")
        #expect(sessions.contains { $0.contains(": failed after ") && $0.contains("the peer does not hold this store's sync key") }, "\(result)")
        #expect(!(try a.dump()).contains("from c"), "nothing from the wrong-key store")
    }

    /// `key generate --force` from another process while `serve` runs: the old key stops working
    /// at once, and the new one works, with no restart (SPEC.md §15.1).
    @Test func aKeyReplacedWhileServingStopsTheOldKeyAtOnce() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let oldKey = String(try a.ok("key", "generate").split(separator: "\n")[0])
        let old = try sandbox.makeStore("old.db")
        try old.ok("key", "import", oldKey)
        try old.addNote("from the holder of the old key")
        let (server, port) = try serve(sandbox, a)

        let newKey = String(try a.ok("key", "generate", "--force").split(separator: "\n")[0])
        #expect(newKey != oldKey && newKey.hasPrefix("concord-key-1-"))
        let after = try a.addReminder("written after the new key")
        try old.expectRefused(["sync", "--peer", "127.0.0.1:\(port)"],
                              mentions: ["sync with 127.0.0.1:\(port) failed: the peer does not hold this store's sync key"], code: 1)
        #expect(!(try old.dump()).contains("written after the new key"), "nothing sent to the old key")
        #expect(!(try a.dump()).contains("from the holder of the old key"), "nothing taken from the old key")

        let new = try sandbox.makeStore("new.db")
        try new.ok("key", "import", newKey)
        #expect(try new.ok("sync", "--peer", "127.0.0.1:\(port)").hasPrefix("synced with 127.0.0.1:\(port): received "))
        #expect(try new.show(after).string("title") == "written after the new key")
        #expect(server.isRunning)
        let newID = try new.ok("key", "show", "--id")
        #expect(eventually(timeout: 20) { server.stdout.contains("the store's sync key is now \(newID); peers with the old key are refused") },
                "the server says which key it now serves: \(server.stdout)")

        server.send(SIGTERM)
        let result = server.wait(timeout: 20)
        #expect(result.succeeded, "\(result)")
        let sessions = result.stdoutLines.filter { $0.hasPrefix("peer 127.0.0.1:") }
        #expect(sessions.count == 2, "\(result)")
        #expect(sessions.first?.contains("failed after") == true && sessions.first?.contains("the peer does not hold this store's sync key") == true, "\(result)")
        #expect(sessions.last?.contains("failed") == false, "\(result)")
    }

    /// A copied store whose copy was declared moved, and both wrote: two stores that hold each
    /// one side's operations under the shared id (by `merge`) have equal version vectors, and a peer
    /// session between them, either way round, ends with the clash of SPEC.md §9.1 on both sides,
    /// applying nothing (it used to report them up to date while their dumps differed).
    @Test(arguments: [false, true])
    func storesThatHoldACopysOperationsClashAsClientAndAsServer(swapped: Bool) throws {
        let sandbox = try Sandbox()
        let original = try sandbox.makeStore("laptop-a.db")
        try original.addReminder("water the plants")
        let copy = Store(sandbox: sandbox, path: sandbox.path("laptop-b.db"))
        try FileManager.default.copyItem(atPath: original.path, toPath: copy.path)
        try copy.ok("init", "--moved")
        try original.addReminder("written on the original")
        try copy.addReminder("written on the copy")
        let shared = try #require(original.status()["replica"] as? String)

        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let key = String(try a.ok("key", "generate").split(separator: "\n")[0])
        try b.ok("key", "import", key)
        try a.ok("merge", original.path)
        try b.ok("merge", copy.path)
        #expect(try a.status()["versionVector"] as? [String: Int] == (try b.status()["versionVector"] as? [String: Int]))
        #expect(try a.dump() != (try b.dump()))

        let (serving, syncing) = swapped ? (b, a) : (a, b)
        let servingBefore = try serving.snapshot()
        let (server, port) = try serve(sandbox, serving)
        let clash = "replica \(shared) has two different operations with seq "
        let refused = try syncing.expectRefused(["sync", "--peer", "127.0.0.1:\(port)"], mentions: ["sync with 127.0.0.1:\(port) failed: ", clash], code: 1)
        #expect(refused.stderr.contains("init --fork"), "\(refused)")
        server.send(SIGTERM)
        let result = server.wait(timeout: 20)
        #expect(result.succeeded, "\(result)")
        let sessions = result.stdoutLines.filter { $0.hasPrefix("peer 127.0.0.1:") }
        #expect(sessions.count == 1 && sessions[0].contains(": failed after ") && sessions[0].contains(clash), "\(result)")
        // Its own clash, or the peer's (its reason cut at 200 characters), with syncctl's advice.
        #expect(sessions.first?.contains("one of the two stores is a copy of the other; run 'syncctl init --fork' on the copy") == true, "\(result)")
        #expect(try serving.snapshot() == servingBefore, "nothing of the batch was applied")
    }

    @Test func sigintStopsTheServerCleanly() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        try a.ok("key", "generate")
        let (server, _) = try serve(sandbox, a)
        server.send(SIGINT)
        let result = server.wait(timeout: 20)
        #expect(result.succeeded && result.stdoutLines.last == "stopped", "\(result)")
    }

    @Test func refusalsAreOneLine() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        try a.expectRefused(["serve", "--listen", "127.0.0.1:0"], mentions: ["has no sync key"], code: 1)
        try a.ok("key", "generate")
        // A port nothing listens on (a server started and stopped).
        let (server, port) = try serve(sandbox, a)
        server.send(SIGTERM)
        _ = server.wait(timeout: 20)
        try a.expectRefused(["sync", "--peer", "127.0.0.1:\(port)"], mentions: ["cannot connect to 127.0.0.1:\(port): connection refused"], code: 1)
        try a.expectRefused(["sync", "--peer", "not a host"], mentions: ["is not HOST:PORT"], code: 64)
        try a.expectRefused(["sync"], mentions: ["--folder", "--peer"], code: 64)
        try a.expectRefused(["sync", "--peer", "127.0.0.1:1", "--watch"], mentions: ["--watch"], code: 64)
        // A port in use.
        let (busy, busyPort) = try serve(sandbox, a)
        defer { busy.send(SIGTERM); _ = busy.wait(timeout: 20) }
        try a.expectRefused(["serve", "--listen", "127.0.0.1:\(busyPort)"], mentions: ["cannot listen on 127.0.0.1:\(busyPort)"], code: 1)
    }
}
