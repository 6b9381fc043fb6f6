import ConcordCore
import ConcordTestSupport
import Foundation
import Testing

extension LiveSyncTests {
    /// `serve`, a `--live` client and two folder watchers compact their stores by themselves
    /// (SPEC.md §5.8, "Compacting by itself") while writers edit the same reminders again and
    /// again on every store, each long-lived process SIGKILLed and started again at random
    /// moments: a → b live, b ↔ c through the folder. Afterwards every add and every last edit
    /// that exited 0 is on every store, the stores are equal and sound, and each has dropped
    /// most of the edits made redundant: the store stays bounded; and so does the folder, from
    /// which a new device receives the compacted log.
    ///
    /// It starts some 200 processes, and waits for convergence up to 200 s by its own bounds: its
    /// time limit lies beyond them, so that stores that do not settle fail with what they lack.
    /// (Alone it takes about 20 s; beside the rest of the suite on 2 cores, it once passed 5 minutes.)
    @Test(.timeLimit(.minutes(10)))
    func storesCompactThemselvesBesideWritersWithEveryLongLivedProcessKilledAtRandomMoments() throws {
        let seed = Self.seed &+ 36
        var random = SplitMix64(seed: seed)
        var topology = try Topology(self, options: ["--compact-after", "50", "--keep-history", "0"])
        let (a, b, c, folder, stores) = (topology.a, topology.b, topology.c, topology.folder, topology.stores)

        // Each store's own reminders, edited every round: their last titles must win everywhere.
        var lastTitles: [String: String] = [:]
        var kept: Set<String> = []
        var edited: [(id: String, store: Store)] = []
        var editOperations = 0
        for (name, store) in stores {
            for index in 0..<3 { edited.append((try store.addReminder("\(name) edited \(index) v0"), store)) }
        }
        for round in 1...16 {
            for (name, store) in stores where try store.run("reminder", "add", "kept \(name) \(round)").succeeded { kept.insert("kept \(name) \(round)") }
            for (index, (id, store)) in edited.enumerated() {
                let title = "edited \(index) v\(round)"
                if try store.run("reminder", "edit", id, "--title", title, "--notes", "round \(round)").succeeded {
                    lastTitles[id] = title
                    editOperations += 2
                }
            }
            Thread.sleep(forTimeInterval: Double(random.next() % 300) / 1000)
            try topology.killOne(self, &random)
        }
        print("compacting by themselves (seed \(seed); replay with CONCORD_LIVE_SEED=\(Self.seed)): kills: \(topology.kills.joined(separator: ", "))")

        func settled(_ store: Store) throws -> Bool {
            let reminders = try store.reminders(all: true)
            let titles = Set(reminders.compactMap { $0["title"] as? String })
            let byID = Dictionary(reminders.compactMap { reminder in reminder.string("id").map { ($0, reminder["title"] as? String) } }) { first, _ in first }
            return titles.isSuperset(of: kept) && lastTitles.allSatisfy { byID[$0.key] == $0.value }
        }
        for (name, store) in stores {
            #expect(try eventually(timeout: 60) { try settled(store) }, "seed \(seed): \(name) has not settled")
        }
        #expect(try eventually(timeout: 20) { try a.dump() == (try b.dump()) && (try b.dump()) == (try c.dump()) }, "seed \(seed)")
        // Long enough for a compaction due at the last writes to run.
        Thread.sleep(forTimeInterval: 3)
        topology.stop("seed \(seed)")
        // One folder sync each rewrites its files once its compactions dropped enough of them
        // (SPEC.md §14, "Compaction"); a new device then syncs from the folder alone.
        for store in [b, c] { try store.ok("sync", "--folder", folder) }
        let d = try topology.sandbox.makeStore("d.db")
        try d.ok("key", "import", topology.keyText)
        try d.ok("sync", "--folder", folder)
        #expect(try d.dump() == (try a.dump()), "seed \(seed): the new device holds what the others hold")
        for (name, store) in stores + [("d", d)] {
            try store.expectSound("seed \(seed): \(name)")
            let seqs = try store.operationCount()
            let held = try #require(try JSONSerialization.jsonObject(with: Data(try store.ok("verify", "--json").utf8)) as? [String: Any])["operations"] as! Int
            // All but each field's last edit are redundant; a compaction is due once a quarter
            // more was logged, so up to that much may wait for the next one.
            #expect(seqs - held >= editOperations / 3, "seed \(seed): \(name) holds \(held) operations in full of \(seqs) seqs, \(editOperations) of them edits")
        }
    }
}
