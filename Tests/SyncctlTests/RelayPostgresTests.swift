import ConcordCore
import Foundation
import Testing

/// The relay scaled out (SPEC.md §16.4): nodes that share one PostgreSQL database, each a real
/// `syncctl relay --postgres` process, with live devices spread over them.
@Suite struct RelayPostgresTests {
    /// Three live devices on two nodes, written to by other processes while each node in turn is
    /// killed and started again: every write whose command exited 0 reaches every device, and a
    /// change through one node reaches a device on the other as it lands. (A restart of PostgreSQL
    /// under load is not yet survived: requests under way hang. Issue 32's note.)
    @Test func liveDevicesOnTwoNodesConvergeAcrossKillsOfTheNodes() throws {
        var random = SplitMix64(seed: KillTests.seed &+ 5)
        let postgres = try PostgresServer()
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let c = try sandbox.makeStore("c.db")
        try c.ok("key", "import", String(try a.ok("key", "show").split(separator: "\n")[0]))
        let nodes = [try RelayProcess(sandbox, postgres: postgres.url), try RelayProcess(sandbox, postgres: postgres.url)]
        let devices = [(a, nodes[0]), (b, nodes[1]), (c, nodes[0])]
        let lives = try devices.map { store, node in try sandbox.start(["sync", "--relay", node.url, "--live", "--store", store.path]) }
        for live in lives {
            #expect(eventually(timeout: 20) { live.stdout.contains("; stop with Ctrl-C\n") }, "\(live.stdout) \(live.stderr)")
        }

        let start = Date()
        try a.addReminder("the first")
        #expect(try eventually(timeout: 20) { try b.reminderTitles().contains("the first") })
        print(String(format: "RelayPostgresTests: a write on a (node 1) reached b (node 2) in %.0f ms (polled every 100 ms)", Date().timeIntervalSince(start) * 1000))

        var written: Set<String> = ["the first"]
        for index in 1...24 {
            let (device, _) = devices[Int(random.next() % 3)]
            let title = "write \(index)"
            if (try device.run("reminder", "add", title)).succeeded { written.insert(title) }
            if index == 8 { try nodes[1].restart() }
            if index == 16 { try nodes[0].restart() }
            Thread.sleep(forTimeInterval: Double(random.next() % 100) / 1000)
        }
        try RelayLiveTests.expectConverged(devices.map(\.0), holding: written, within: 90, context: "across kills of both nodes (seed \(KillTests.seed))")
        RelayLiveTests.stopLiveSyncs(lives)
        for node in nodes {
            let result = node.stop()
            #expect(result.succeeded && !result.crashed && result.stdoutLines.last == "stopped", "\(result)")
        }
    }

    /// A URL that is not PostgreSQL's is a bad argument; a database that cannot be reached stops
    /// the relay before it listens, with one line.
    @Test func aBadOrUnreachableDatabaseIsRefused() throws {
        let sandbox = try Sandbox()
        let bad = try sandbox.run(["relay", "--postgres", "mysql://x@127.0.0.1/db"])
        expectOneLineFailure(bad, mentions: ["'mysql://x@127.0.0.1/db' is not a PostgreSQL URL"], code: 64)
        let both = try sandbox.run(["relay", "--postgres", "postgres://x@127.0.0.1/db", "--data", sandbox.path("d")])
        expectOneLineFailure(both, mentions: ["give --data DIR or --postgres URL, not both"], code: 64)
        let unreachable = try sandbox.run(["relay", "--listen", "127.0.0.1:0", "--postgres", "postgres://concord@127.0.0.1:9/postgres"])
        expectOneLineFailure(unreachable, mentions: ["the relay on 127.0.0.1:0 stopped"], code: 1)
    }
}
