import ConcordCore
import ConcordKeys
import ConcordTestSupport
import Foundation
import Testing

extension LiveSyncTests {
    /// Purges while `serve`, a `--live` client and two folder watchers run for a while beside
    /// writers on every store, each long-lived process SIGKILLed and started again at random
    /// moments (SPEC.md §5.7, §14, §15.10): a → b live, b ↔ c through the folder. Afterwards
    /// every reminder whose add exited 0 and that no purge exited 0 on is on every store, every
    /// purged one on none, and no store file, WAL or folder file holds a byte of purged content
    /// (folder files are read back as bundles too: they are encrypted).
    @Test(.timeLimit(.minutes(5)))
    func purgesReachEveryStoreThroughLiveSessionsAndWatchersKilledAtRandomMoments() throws {
        let seed = Self.seed &+ 35
        var random = SplitMix64(seed: seed)
        var topology = try Topology(self)
        let (a, b, c, folder, stores) = (topology.a, topology.b, topology.c, topology.folder, topology.stores)

        var kept: Set<String> = []
        var secrets: [(id: String, text: String, author: Store)] = []
        var purged: [(id: String, text: String)] = []
        for round in 0..<16 {
            for (name, store) in stores {
                let title = "kept \(name) \(round)"
                if try store.run("reminder", "add", title).succeeded { kept.insert(title) }
                let text = "secret-\(name)-\(round)-\(seed)"
                let added = try store.run("reminder", "add", text, "--notes", "notes-of-\(text)", "--tag", "tag-\(text)")
                if added.succeeded { secrets.append((added.out, text, store)) }
            }
            // A secret of an earlier round is purged where it was written, or on a store it may
            // have reached by now; an edit of another may race with its purge elsewhere.
            if secrets.count > 3 {
                let victim = secrets.remove(at: Int(random.next() % UInt64(secrets.count - 3)))
                let (_, elsewhere) = stores[Int(random.next() % 3)]
                var done = try elsewhere.run("reminder", "purge", victim.id).succeeded
                if !done { done = try victim.author.run("reminder", "purge", victim.id).succeeded }
                if done {
                    purged.append((victim.id, victim.text))
                }
                if let raced = secrets.first { _ = try raced.author.run("reminder", "edit", raced.id, "--notes", "edited-\(raced.text)") }
            }
            Thread.sleep(forTimeInterval: Double(random.next() % 300) / 1000)
            try topology.killOne(self, &random)
        }
        print("purges through live sessions and watchers (seed \(seed); replay with CONCORD_LIVE_SEED=\(Self.seed)): \(purged.count) purged, kills: \(topology.kills.joined(separator: ", "))")
        #expect(purged.count >= 8)

        let purgedIDs = Set(purged.map(\.id))
        let keptIDs = Set(secrets.map(\.id))
        func settled(_ store: Store) throws -> Bool {
            let reminders = try store.reminders(all: true)
            let ids = Set(reminders.compactMap { $0.string("id") })
            let titles = Set(reminders.compactMap { $0["title"] as? String })
            return titles.isSuperset(of: kept) && ids.isSuperset(of: keptIDs) && ids.isDisjoint(with: purgedIDs)
        }
        for (name, store) in stores {
            let arrived = try eventually(timeout: 60) { try settled(store) }
            #expect(arrived, "seed \(seed): \(name) has not settled")
        }
        #expect(try eventually(timeout: 20) { try a.dump() == (try b.dump()) && (try b.dump()) == (try c.dump()) }, "seed \(seed)")
        topology.stop("seed \(seed)")
        // One folder sync each, which rewrites its own files that were written before a purge
        // reached it (SPEC.md §14).
        for store in [b, c] { try store.ok("sync", "--folder", folder) }
        for (name, store) in stores { try store.expectSound("seed \(seed): \(name)") }

        for victim in purged {
            #expect(filesHolding(victim.text, in: [a.path, b.path, c.path, folder]) == [], "seed \(seed): \(victim.text) survives")
        }
        let key = try SyncKey(text: topology.keyText)
        let directory = try TemporaryDirectory()
        let bundles = FileManager.default.enumerator(atPath: folder)!.compactMap { $0 as? String }.filter { $0.hasSuffix(".cbundle") }
        #expect(!bundles.isEmpty)
        let purgedRecords = Set(purged.compactMap { RecordID(hex: $0.id).map(RecordRef.reminder) })
        for (index, name) in bundles.enumerated() {
            let reader = try Node(in: directory, "reader\(index)", seed: 200 + UInt64(index), key: key)
            try reader.store.mergeBundle(at: folder + "/" + name)
            let content = try reader.store.allOperations().filter { purgedRecords.contains($0.record) && !$0.purges }
            #expect(content.isEmpty, "seed \(seed): \(name) carries content of a purged reminder: \(content.prefix(3))")
        }
    }
}
