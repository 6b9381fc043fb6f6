import ConcordCore
import Foundation
import Testing

/// `sync --relay URL --live` (SPEC.md §16.5, "Live") with real processes: devices that never meet
/// stay in step through a relay, each write reaching the others within seconds, across kills of
/// the relay, and each live sync stops cleanly.
@Suite struct RelayLiveTests {
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
        let converged = try eventually(timeout: 60) { try devices.allSatisfy { try $0.reminderTitles() == written } }
        let missing = try devices.map { written.subtracting(try $0.reminderTitles()).sorted() }
        #expect(converged, "every write reaches every device after \(kills) relay kills (seed \(KillTests.seed)); missing: \(missing)")
        let dumps = try devices.map { try $0.dump() }
        #expect(dumps[0] == dumps[1] && dumps[1] == dumps[2])

        for live in lives {
            live.send(SIGTERM)
            let result = live.wait(timeout: 30)
            #expect(result.succeeded && !result.crashed, "\(result)")
            #expect(result.stdoutLines.last == "stopped", "\(result)")
            // A sync cut by a kill of the relay is a warning, and is tried again.
            for line in result.stderrLines {
                #expect(line.hasPrefix("syncctl: warning: sync with \(relay.url) failed: ") && line.contains("; trying again in "), "\(line)")
            }
        }
        _ = relay.stop()
    }

    /// A store without a key, or a relay URL that is not one: one line, nothing started.
    @Test func aLiveSyncThatCannotStartSaysWhy() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        try store.expectRefused(["sync", "--relay", "http://127.0.0.1:9", "--live"], mentions: ["has no sync key"], code: 1)
        try store.expectRefused(["sync", "--relay", "127.0.0.1:9", "--live"], mentions: ["is not a relay's URL"], code: 64)
    }
}
