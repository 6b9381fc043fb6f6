import Foundation
import Testing

/// The lines syncctl prints for the errors whose remedy is one of its commands, whole (SPEC.md
/// §12): the library's message, and syncctl's advice after it.
@Suite(.waitsForProcesses) struct ErrorLineTests {
    /// Runs `arguments` on `store`, which must fail with exactly `line` on stderr (exit 1).
    func expectLine(_ store: Store, _ arguments: [String], _ line: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try store.run(arguments: arguments)
        #expect(result.status == 1 && !result.crashed, "\(result)", sourceLocation: sourceLocation)
        #expect(result.stderr == "syncctl: \(line)\n", "\(result)", sourceLocation: sourceLocation)
    }

    @Test func aMissingACopiedAndAClashingStore() throws {
        let sandbox = try Sandbox()
        let missing = Store(sandbox: sandbox, path: sandbox.path("missing.db"))
        try expectLine(missing, ["status"], "no store at \(missing.path); run 'syncctl init' to create one")

        let original = try sandbox.makeStore("original.db")
        try original.addReminder("water the plants")
        let copy = Store(sandbox: sandbox, path: sandbox.path("copy.db"))
        try FileManager.default.copyItem(atPath: original.path, toPath: copy.path)
        try expectLine(
            copy, ["reminder", "add", "on the copy"],
            "\(copy.path) is a copy of the store at \(original.path) (another file): run 'syncctl init --fork' to make it a replica of its own, or 'syncctl init --moved' if it was moved and the original is no longer used")

        try copy.ok("init", "--moved")
        try original.addReminder("on the original")
        try copy.addReminder("on the copy")
        let replica = try original.replicaID()
        let result = try original.run("merge", copy.path)
        #expect(result.status == 1 && result.stderrLines.count == 1, "\(result)")
        let clash = try #require(result.stderr.wholeMatch(of: /syncctl: replica ([0-9a-f]{32}) has two different operations with seq (\d+), here and in what is being merged: (.*)\n/), "\(result)")
        #expect(String(clash.1) == replica)
        #expect(String(clash.3) == "one of the two stores is a copy of the other; run 'syncctl init --fork' on the copy (nothing of this batch was merged)")
    }

    @Test func aStoreWithoutASyncKeyAndAnEncryptedBundle() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        try expectLine(b, ["key", "show"], "the store at \(b.path) has no sync key; run 'syncctl key generate', or 'syncctl key import KEY' with the key of another store")
        try a.ok("key", "generate")
        let id = try a.ok("key", "show", "--id")
        try a.addReminder("sealed")
        let bundle = sandbox.path("sealed.cbundle")
        try a.ok("export", bundle, "--encrypt")
        try expectLine(b, ["merge", bundle], "\(bundle): the bundle is encrypted (with sync key \(id)), and this store has no sync key; run 'syncctl key import KEY'")

        // In a shared folder the file is skipped with a warning, the same on every sync (the
        // second from what the store recorded of it).
        let folder = try sandbox.makeDirectory("Shared")
        try a.ok("sync", "--folder", folder)
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: folder + "/concord-v1").first)
        for _ in 0..<2 {
            let synced = try b.run("sync", "--folder", folder)
            #expect(synced.succeeded, "\(synced)")
            #expect(synced.stderrLines == ["syncctl: warning: skipping \(name): the bundle is encrypted (with sync key \(id)), and this store has no sync key; run 'syncctl key import KEY'"], "\(synced)")
        }
    }

    /// Two stores of one replica id: the side that finds it says so, and so does its peer, which
    /// reads it in the `error` message (SPEC.md §15.6).
    @Test func twoStoresOfOneReplicaIDOverThePeerProtocol() throws {
        let sandbox = try Sandbox()
        let (a, _) = try sandbox.makePairedStores()
        let copy = Store(sandbox: sandbox, path: sandbox.path("copy.db"))
        try FileManager.default.copyItem(atPath: a.path, toPath: copy.path)
        try copy.ok("init", "--moved")
        let replica = try a.replicaID()
        let (server, port) = try PeerCommandTests().serve(sandbox, a)
        let reason = "both stores have replica id \(replica); one is a copy of the other: run 'syncctl init --fork' on one"
        let result = try copy.run("sync", "--peer", "127.0.0.1:\(port)")
        let failed = "syncctl: sync with 127.0.0.1:\(port) failed: "
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr == failed + reason + "\n" || result.stderr == failed + "the peer ended the session: " + reason + "\n", "\(result)")
        server.send(SIGTERM)
        let served = server.wait(timeout: 20)
        let sessions = served.stdoutLines.filter { $0.hasPrefix("peer 127.0.0.1:") }
        #expect(sessions.count == 1 && (sessions[0].contains(": \(reason) [") || sessions[0].contains(": the peer ended the session: \(reason) [")), "\(served)")
    }
}
