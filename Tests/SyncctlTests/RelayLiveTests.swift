import ConcordCore
import Foundation
import Testing

/// `sync --relay URL --live` (SPEC.md §16.5, "Live") with real processes: devices that never meet
/// stay in step through a relay, each write reaching the others within seconds, across kills of
/// the relay, and each live sync stops cleanly.
@Suite(.waitsForProcesses) struct RelayLiveTests {
    /// Three live devices on one relay, written to by other processes while the relay is killed
    /// and started again: every write whose command exited 0 reaches every device.
    @Test func threeLiveDevicesConvergeAcrossKillsOfTheRelay() throws {
        var random = SplitMix64(seed: KillTests.seed &+ 4)
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let c = try sandbox.makeStore("c.db")
        try c.ok("key", "import", String(try a.ok("key", "show").split(separator: "\n")[0]))
        let devices = [a, b, c]
        let relay = try RelayProcess(sandbox, data: sandbox.path("relay"))
        let lives = try devices.map { try sandbox.start(["sync", "--relay", relay.url, "--live", "--store", $0.path]) }
        for live in lives {
            #expect(eventually(timeout: 20) { live.stdout.contains("syncing live with \(relay.url); stop with Ctrl-C\n") }, "\(live.stdout) \(live.stderr)")
        }

        // A first write reaches the other two within seconds.
        let start = Date()
        try a.addReminder("the first")
        #expect(try eventually(timeout: 20) { try [b, c].allSatisfy { try $0.reminderTitles().contains("the first") } })
        print(String(format: "RelayLiveTests: a write on a reached b and c in %.0f ms (polled every 100 ms)", Date().timeIntervalSince(start) * 1000))

        var written: Set<String> = ["the first"]
        var kills = 0
        for index in 1...24 {
            let device = devices[Int(random.next() % 3)]
            let title = "write \(index)"
            if (try device.run("reminder", "add", title)).succeeded { written.insert(title) }
            if index % 8 == 0 {
                try relay.restart()
                kills += 1
            }
            Thread.sleep(forTimeInterval: Double(random.next() % 100) / 1000)
        }
        try Self.expectConverged(devices, holding: written, within: 60, context: "after \(kills) relay kills (seed \(KillTests.seed))")
        Self.stopLiveSyncs(lives)
        _ = relay.stop()
    }

    /// A live device syncs again only when the relay lists other files than its mirror, or when
    /// it wrote past what it published (§16.5, "Live"): one write costs the writer one sync and
    /// the other device one, not a second each for the cursor its own upload moved or for the
    /// commit its own import made.
    @Test func aWriteCostsEachLiveDeviceOneSync() throws {
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let relay = try RelayProcess(sandbox, data: sandbox.path("relay"))
        let lives = try [a, b].map { try sandbox.start(["sync", "--relay", relay.url, "--live", "--log-level", "debug", "--store", $0.path]) }
        func syncs(_ live: BackgroundRun) -> Int { live.stdout.components(separatedBy: "synced with \(relay.url): ").count - 1 }
        for live in lives {
            #expect(eventually(timeout: 20) { syncs(live) >= 1 }, "\(live.stdout) \(live.stderr)")
        }
        // Settled: no sync for a second.
        var before = lives.map(syncs)
        #expect(eventually(timeout: 20) {
            Thread.sleep(forTimeInterval: 1)
            defer { before = lives.map(syncs) }
            return lives.map(syncs) == before
        })
        try a.addReminder("one write")
        #expect(try eventually(timeout: 20) { try b.reminderTitles() == ["one write"] })
        // Long enough for a wake on a cursor or a commit to have come (each within milliseconds).
        Thread.sleep(forTimeInterval: 2)
        #expect(zip(lives, before).map { syncs($0) - $1 } == [1, 1], "\(lives.map(\.stdout))")
        Self.stopLiveSyncs(lives)
        _ = relay.stop()
    }

    /// A store without a key, or a relay URL that is not one: one line, nothing started.
    @Test func aLiveSyncThatCannotStartSaysWhy() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        try store.expectRefused(["sync", "--relay", "http://127.0.0.1:9", "--live"], mentions: ["has no sync key"], code: 1)
        try store.expectRefused(["sync", "--relay", "127.0.0.1:9", "--live"], mentions: ["is not a relay's URL"], code: 64)
    }

    /// Waits until every store holds exactly the reminders `written`, then checks that their
    /// dumps are the same.
    static func expectConverged(_ stores: [Store], holding written: Set<String>, within seconds: TimeInterval, context: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let converged = try eventually(timeout: seconds) { try stores.allSatisfy { try $0.reminderTitles() == written } }
        let missing = try stores.map { written.subtracting(try $0.reminderTitles()).sorted() }
        #expect(converged, "every write reaches every device \(context); missing: \(missing)", sourceLocation: sourceLocation)
        let dumps = try stores.map { try $0.dump() }
        #expect(Set(dumps).count == 1, sourceLocation: sourceLocation)
    }

    /// Stops live syncs with SIGTERM: each ends with `stopped` and exit 0, having written on stderr
    /// only the warnings of syncs that failed (cut by a kill) and were tried again.
    static func stopLiveSyncs(_ lives: [BackgroundRun], sourceLocation: SourceLocation = #_sourceLocation) {
        for live in lives {
            live.send(SIGTERM)
            let result = live.wait(timeout: 30)
            #expect(result.succeeded && !result.crashed && result.stdoutLines.last == "stopped", "\(result)", sourceLocation: sourceLocation)
            for line in result.stderrLines {
                #expect(line.hasPrefix("syncctl: warning: sync with http://127.0.0.1:") && line.contains("; trying again in "), "\(line)", sourceLocation: sourceLocation)
            }
        }
    }
}
