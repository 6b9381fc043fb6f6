import ConcordCore
import Foundation
import Testing

/// The relay scaled out (SPEC.md §16.4): nodes that share one PostgreSQL database, each a real
/// `syncctl relay --postgres` process, with live devices spread over them.
@Suite(.waitsForProcesses) struct RelayPostgresTests {
    /// Three live devices on two nodes, each written to by a writer process after another, all at
    /// once, while, at random moments, each node is killed and started again, PostgreSQL is
    /// stopped at once (as by a crash) and started again twice, and a device's live sync is
    /// killed and started again: every write whose command exited 0 reaches every device, and a
    /// change through one node reaches a device on the other as it lands.
    @Test func liveDevicesOnTwoNodesConvergeAcrossKillsOfNodesDevicesAndPostgreSQL() throws {
        var random = SplitMix64(seed: KillTests.seed &+ 5)
        let context = "(seed \(KillTests.seed))"
        let postgres = try PostgresServer()
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let c = try sandbox.makeStore("c.db")
        try c.ok("key", "import", String(try a.ok("key", "show").split(separator: "\n")[0]))
        let nodes = [try RelayProcess(sandbox, postgres: postgres.url), try RelayProcess(sandbox, postgres: postgres.url)]
        let devices = [(a, nodes[0]), (b, nodes[1]), (c, nodes[0])]
        func startLive(_ device: Int) throws -> BackgroundRun {
            let (store, node) = devices[device]
            return try sandbox.start(["sync", "--relay", node.url, "--live", "--store", store.path])
        }
        var lives = try devices.indices.map(startLive)
        for live in lives {
            #expect(eventually(timeout: 20) { live.stdout.contains("; stop with Ctrl-C\n") }, "\(live.stdout) \(live.stderr)")
        }

        let start = Date()
        try a.addReminder("the first")
        #expect(try eventually(timeout: 20) { try b.reminderTitles().contains("the first") })
        print(String(format: "RelayPostgresTests: a write on a (node 1) reached b (node 2) in %.0f ms (polled every 100 ms)", Date().timeIntervalSince(start) * 1000))

        // One writer per device, all at once, on other threads; each keeps the titles whose
        // command exited 0.
        let run = try sandbox.runner()
        let paths = devices.map(\.0.path)
        let seeds = devices.map { _ in random.next() }
        let results = ResultBox<[String]>(devices.count)
        let writers = DispatchGroup()
        DispatchQueue.global().async(group: writers) {
            DispatchQueue.concurrentPerform(iterations: paths.count) { device in
                var draws = SplitMix64(seed: seeds[device])
                results.set(device, Result {
                    try (1...12).compactMap { index in
                        let title = "write \(device).\(index)"
                        defer { Thread.sleep(forTimeInterval: Double(draws.next() % 400) / 1000) }
                        return try run(["reminder", "add", title, "--store", paths[device]]).succeeded ? title : nil
                    }
                })
            }
        }
        // Meanwhile, the faults, in a drawn order, at drawn moments.
        var faults = ["node 1", "node 2", "postgres", "postgres", "device"]
        for index in faults.indices.reversed() { faults.swapAt(index, Int(random.next() % UInt64(index + 1))) }
        var met: [String] = []
        for fault in faults {
            Thread.sleep(forTimeInterval: Double(random.next() % 800) / 1000)
            switch fault {
            case "node 1": try nodes[0].restart()
            case "node 2": try nodes[1].restart()
            case "postgres": try postgres.restart()
            default:
                let device = Int(random.next() % 3)
                lives[device].send(SIGKILL)
                _ = lives[device].wait(timeout: 10)
                lives[device] = try startLive(device)
            }
            met.append(fault)
        }
        writers.wait()
        var written: Set<String> = ["the first"]
        for result in results.values { written.formUnion(try #require(result).get()) }
        print("RelayPostgresTests \(context): faults \(met.joined(separator: ", ")); \(written.count) writes exited 0")

        try RelayLiveTests.expectConverged(devices.map(\.0), holding: written, within: 90, context: "across kills of nodes, a device and PostgreSQL \(context)")
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
        let timeout = try sandbox.run(["relay", "--data", sandbox.path("d"), "--request-timeout", "0"])
        expectOneLineFailure(timeout, mentions: ["--request-timeout must be from 1 to 3600"], code: 64)
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("d")), "a refused relay makes no data directory")
        let unreachable = try sandbox.run(["relay", "--listen", "127.0.0.1:0", "--postgres", "postgres://concord@127.0.0.1:9/postgres"])
        expectOneLineFailure(unreachable, mentions: ["the relay on 127.0.0.1:0 stopped"], code: 1)
    }
}
