import ConcordCore
import ConcordStore
import ConcordTestSupport
import Foundation
import Testing

/// `syncctl compact` (SPEC.md §5.8, §9 "Compaction", §11) with real processes.
@Suite(.waitsForProcesses) struct CompactCommandTests {
    /// A store of `count` reminders, each with its title edited `edits` times after its creation,
    /// written in transactions of 500 changes.
    static func editedStore(in directory: TemporaryDirectory, _ name: String, count: Int, edits: Int, seed: UInt64) throws -> (dump: String, operations: Int) {
        let node = try Node(in: directory, name, seed: seed)
        var ids: [RecordID] = []
        var changes: [(RecordRef, Change)] = []
        func flush() throws {
            try node.store.perform(changes)
            changes = []
        }
        var generator = SplitMix64(seed: seed)
        for index in 0..<count {
            let id = RecordID.random(using: &generator)
            ids.append(id)
            changes.append((.reminder(id), .createReminder(ReminderDraft(title: "reminder \(index)", tags: ["home"]))))
            if changes.count >= 500 { try flush() }
        }
        try flush()
        for edit in 1...edits {
            node.clock.advance(1)
            for (index, id) in ids.enumerated() {
                changes.append((.reminder(id), .editReminder(ReminderPatch(title: "reminder \(index) v\(edit)"))))
                if changes.count >= 500 { try flush() }
            }
            try flush()
        }
        let result = (try node.dump(), node.operationCount)
        try node.store.close()
        return result
    }

    @Test func compactDropsRedundantWritesAndSaysSo() throws {
        let sandbox = try Sandbox()
        let directory = try TemporaryDirectory()
        let (dump, operations) = try Self.editedStore(in: directory, "c", count: 40, edits: 3, seed: 7)
        let store = Store(sandbox: sandbox, path: directory.file("c.db"))
        #expect(try store.ok("compact") == "dropped 120 operations of 40 records")
        #expect(try store.ok("dump") == dump)
        #expect(try store.ok("compact", "--json") == #"{"deferred":false,"droppedOperations":0,"records":40}"#)
        let verified = try store.ok("verify")
        #expect(verified == "sound: 40 records, \(operations - 120) operations", "\(verified)")
        // What it exports another store takes whole: the same dump, every seq held.
        try store.ok("export", directory.file("c.cbundle"))
        let other = try sandbox.makeStore("other.db")
        #expect(try other.ok("merge", directory.file("c.cbundle")) == "merged \(operations - 120) new operations from 1 replica and 120 compacted seqs")
        #expect(try other.ok("dump") == dump)
    }

    /// `compact` killed at random moments: each kill leaves a store that `verify` passes, with the
    /// same dump; a compaction run to its end then drops the rest, whatever the kill left.
    @Test func compactKilledAtRandomMomentsKeepsTheState() throws {
        let sandbox = try Sandbox()
        var random = SplitMix64(seed: 58)
        var outcomes: [String] = []
        var duration = 0.0
        for round in 0..<5 {
            let directory = try TemporaryDirectory()
            let (dump, operations) = try Self.editedStore(in: directory, "k\(round)", count: 2_500, edits: 3, seed: UInt64(round + 1))
            let store = Store(sandbox: sandbox, path: directory.file("k\(round).db"))
            let fraction = Double(random.next() % 1_000) / 1_000
            let delay = round == 0 ? 1_000 : duration * fraction
            let started = Date()
            // Transactions of 2,000 records: the kills land between and inside them.
            let killed = try sandbox.runKilled(["compact", "--store", store.path], at: .after(delay))
            if round == 0 { duration = Date().timeIntervalSince(started) }
            try store.expectSound("after compact was killed at \(delay) s")
            #expect(try store.ok("dump") == dump, "round \(round): the state changed")
            let line = try store.ok("compact")
            let left = Int(try #require(line.firstMatch(of: /^dropped (\d+) operations? of 2500 records$/), "\(line)").1)!
            #expect(left <= 7_500)
            outcomes.append(killed.status == 0 ? "finished" : "killed with \(left) of 7500 left")
            #expect(try store.ok("verify") == "sound: 2500 records, \(operations - 7_500) operations")
            #expect(try store.ok("dump") == dump)
        }
        print("CompactCommandTests kills (seed 58; a whole compact took \(String(format: "%.2f", duration)) s): \(outcomes)")
        #expect(outcomes.contains { $0.hasPrefix("killed") })
    }
}
