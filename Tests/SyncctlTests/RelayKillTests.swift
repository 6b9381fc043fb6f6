import ConcordCore
import Foundation
import Testing

/// A relay and its clients killed with SIGKILL at random moments of syncs (SPEC.md §16.3, §16.5):
/// every sync that exited 0 has all its store held on the relay, whatever was killed after it; a
/// sync cut short fails with one line or is killed, and the next one goes on. Each round, a adds a
/// reminder and syncs while the relay, or a's sync itself, is killed after a random delay; then
/// b syncs with the relay up and must hold everything a held when its last good sync started.
///
/// `CONCORD_KILLS` sets the scale (half as many rounds as kills, at least 3), `CONCORD_KILL_SEED`
/// the seed (printed, shared with KillTests).
@Suite(.waitsForProcesses) struct RelayKillTests {
    static let rounds = max(3, KillTests.kills / 2)

    @Test func syncsThatExitedZeroSurviveKillsOfTheRelayAndOfTheClient() throws {
        var random = SplitMix64(seed: KillTests.seed &+ 3)
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let relay = try RelayProcess(sandbox, data: sandbox.path("relay"))
        var added: [String] = []
        var acknowledged: Set<String> = []
        var relayKills = 0, clientKills = 0, exitedZero = 0, failed = 0
        for round in 1...Self.rounds {
            let context = "round \(round) of \(Self.rounds) (seed \(KillTests.seed))"
            for index in 0..<Int(1 + random.next() % 3) {
                let title = "a \(round).\(index)"
                try a.addReminder(title)
                added.append(title)
            }
            let heldAtStart = Set(added)
            let sync = try sandbox.start(["sync", "--relay", relay.url, "--store", a.path])
            Thread.sleep(forTimeInterval: Double(random.next() % 300) / 1000)
            if random.next() % 2 == 0 {
                try relay.restart()
                relayKills += 1
            } else {
                sync.send(SIGKILL)
                clientKills += 1
            }
            let result = sync.wait(timeout: 60)
            #expect(!result.timedOut, "\(context): \(result)")
            if result.succeeded {
                exitedZero += 1
                acknowledged.formUnion(heldAtStart)
            } else if !result.crashed {
                // Cut short by the relay's kill: one line naming the relay, exit 1.
                failed += 1
                expectOneLineFailure(result, mentions: ["the relay at \(relay.url)"], code: 1)
            }
            let synced = try b.run("sync", "--relay", relay.url)
            #expect(synced.succeeded, "\(context): \(synced)")
            let missing = acknowledged.subtracting(try b.reminderTitles())
            #expect(missing.isEmpty, "\(context): b lacks \(missing.sorted()) after a's sync exited 0")
        }
        print("RelayKillTests (seed \(KillTests.seed)): \(Self.rounds) rounds, \(relayKills) relay kills, \(clientKills) client kills; a's syncs: \(exitedZero) exited 0, \(failed) failed with one line, the others were killed")

        // With nothing killed, everything a added reaches b, and both stores are sound.
        for store in [a, b, a] { _ = try store.ok("sync", "--relay", relay.url) }
        #expect(try b.reminderTitles() == Set(added))
        #expect(try a.dump() == (try b.dump()))
        for store in [a, b] { #expect(try store.ok("verify").hasPrefix("sound: ")) }
        let stopped = relay.stop()
        #expect(stopped.succeeded && stopped.stdoutLines.last == "stopped", "\(stopped)")
    }
}
