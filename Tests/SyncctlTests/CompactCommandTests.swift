import ConcordCore
import ConcordStore
import ConcordTestSupport
import Foundation
import Testing

/// `syncctl compact` (SPEC.md §5.8, §9 "Compaction", §11) with real processes.
@Suite(.waitsForProcesses) struct CompactCommandTests {
    /// A store of `count` reminders, each with its title edited `edits` times after its creation,
    /// written in transactions of 500 changes, two days ago by the wall clock.
    static func editedStore(in directory: TemporaryDirectory, _ name: String, count: Int, edits: Int, seed: UInt64) throws -> (dump: String, operations: Int) {
        let node = try Node(in: directory, name, seed: seed)
        node.clock.now = UInt64(Date().timeIntervalSince1970 * 1000) - 2 * 86_400_000
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
        // By default the writes of the last 30 days stay: these are two days old. Each title was
        // written 4 times: the last 2 stay, then the last (all older than an hour).
        let id = try #require(try store.reminders(all: true).first?.string("id"))
        let before = try store.ok("history", id).split(separator: "\n")
        #expect(before.count == 9 && !before[0].hasPrefix("("), "a create of 5 fields and a tag, and 3 edits: \(before)")
        #expect(try store.ok("compact") == "dropped 0 operations of 40 records")
        #expect(try store.ok("compact", "--keep-history", "3d") == "dropped 0 operations of 40 records")
        #expect(try store.ok("compact", "--keep-history", "2") == "dropped 80 operations of 40 records")
        #expect(try store.ok("compact", "--keep-history", "1h") == "dropped 40 operations of 40 records")
        // History says where it was trimmed, and shows what was kept.
        let history = try store.ok("history", id).split(separator: "\n")
        #expect(history.first?.wholeMatch(of: /\(writes up to [0-9T:.-]+Z that later ones made redundant were compacted\)/) != nil, "\(history)")
        #expect(history.count == 7 && history.last?.hasSuffix("  holds") == true, "\(history)")
        for bad in ["d", "1.5d", "1w", "30 d", "9999999"] {
            try store.expectRefused(["compact", "--keep-history", bad], mentions: ["--keep-history takes days (30d), hours (12h) or a number of writes per field (10), not '\(bad)'"], code: 64)
        }
        #expect(try store.ok("dump") == dump)
        #expect(try store.ok("compact", "--keep-history", "0", "--json") == #"{"deferred":false,"droppedOperations":0,"records":40}"#)
        let verified = try store.ok("verify")
        #expect(verified == "sound: 40 records, \(operations - 120) operations", "\(verified)")
        // What it exports another store takes whole: the same dump, every seq held.
        try store.ok("export", directory.file("c.cbundle"))
        let other = try sandbox.makeStore("other.db")
        #expect(try other.ok("merge", directory.file("c.cbundle")) == "merged \(operations - 120) new operations from 1 replica and 120 compacted seqs")
        #expect(try other.ok("dump") == dump)
        // The other store holds compacted seqs, not which records they were of: it shows what it holds.
        #expect(try other.ok("history", id).split(separator: "\n").count == 6)
    }

    /// `compact --vacuum` gives the pages it freed back to the file system: the store file
    /// shrinks, and holds the same (SPEC.md §9, "Compaction"; §11).
    @Test func compactVacuumShrinksTheStoreFile() throws {
        let sandbox = try Sandbox()
        let directory = try TemporaryDirectory()
        let (dump, _) = try Self.editedStore(in: directory, "c", count: 400, edits: 20, seed: 8)
        let store = Store(sandbox: sandbox, path: directory.file("c.db"))
        let lines = try store.ok("compact", "--keep-history", "0", "--vacuum").split(separator: "\n")
        #expect(lines.count == 2 && lines[0].hasPrefix("dropped "), "\(lines)")
        let sizes = try #require(lines.last?.wholeMatch(of: /the store file takes (\d+) bytes, (\d+) before the vacuum/), "\(lines)")
        #expect(Int(sizes.1)! < Int(sizes.2)! * 3 / 4, "\(lines)")
        #expect(try store.ok("dump") == dump)
        try store.expectSound("after the vacuum")
        let json = try store.ok("compact", "--vacuum", "--json")
        #expect(json.wholeMatch(of: /\{"deferred":false,"droppedOperations":0,"fileBytesAfter":\d+,"fileBytesBefore":\d+,"records":400\}/) != nil, "\(json)")
    }

    /// The long-lived commands' compaction options (SPEC.md §11, "Compacting by itself"): bad
    /// values, and the options without a long-lived mode, are refused with one line, exit 64.
    @Test func theOptionsOfCompactingByItselfAreChecked() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore("s.db")
        let folder = try sandbox.makeDirectory("Shared")
        try store.expectRefused(["serve", "--compact-after=-1"], mentions: ["--compact-after takes a number of operations (0: never), not -1"], code: 64)
        try store.expectRefused(
            ["sync", "--folder", folder, "--watch", "--keep-history", "1w"],
            mentions: ["--keep-history takes days (30d), hours (12h) or a number of writes per field (10), not '1w'"], code: 64)
        for options in [["--folder", folder, "--compact-after", "10"], ["--peer", "127.0.0.1:1", "--keep-history", "2"]] {
            try store.expectRefused(["sync"] + options, mentions: ["--compact-after and --keep-history go with --watch or --live"], code: 64)
        }
        #expect(try listing(of: folder).isEmpty, "nothing written in the folder")
    }

    /// `compact` killed at random moments: each kill leaves a store that `verify` passes, with the
    /// same dump; a compaction run to its end then drops the rest, whatever the kill left.
    @Test func compactKilledAtRandomMomentsKeepsTheState() throws {
        let sandbox = try Sandbox()
        var random = SplitMix64(seed: 58)
        var outcomes: [String] = []
        // Round 0 runs to its end and times its writes: from the compaction's first commit
        // reaching the WAL to the end. A kill timed from the whole run, whose start is spent
        // opening and reading, lands after the end on a busy machine.
        var (duration, writing) = (0.0, 0.0)
        for round in 0..<8 {
            let directory = try TemporaryDirectory()
            let (dump, operations) = try Self.editedStore(in: directory, "k\(round)", count: 2_500, edits: 3, seed: UInt64(round + 1))
            let store = Store(sandbox: sandbox, path: directory.file("k\(round).db"))
            let wal = { sizeOfFile(store.path + "-wal") }
            let fraction = Double(random.next() % 1_000) / 1_000
            // Then every other kill lands a random moment within those writes, the others a random
            // moment from the start. Transactions of 500 records: the kills land between and inside them.
            let point: KillPoint =
                round % 2 == 1 ? .progress(measure: wal, threshold: 1, then: writing * fraction)
                : .after(duration * fraction)
            let killed: RunResult
            let context = round == 0 ? "after a whole compact" : "after compact was killed \(point)"
            if round == 0 {
                var firstWrite: Date?
                let run = try sandbox.runSampling(["compact", "--keep-history", "0", "--store", store.path]) {
                    if firstWrite == nil, wal() > 0 { firstWrite = Date() }
                    return 0
                }
                (killed, duration) = (run.result, run.seconds)
                writing = Date().timeIntervalSince(try #require(firstWrite, "compact wrote to the WAL"))
            } else {
                killed = try sandbox.runKilled(["compact", "--keep-history", "0", "--store", store.path], at: point)
            }
            try store.expectSound(context)
            #expect(try store.ok("dump") == dump, "round \(round), \(context): the state changed")
            let line = try store.ok("compact", "--keep-history", "0")
            let left = Int(try #require(line.firstMatch(of: /^dropped (\d+) operations? of 2500 records$/), "\(line)").1)!
            #expect(left <= 7_500)
            outcomes.append(killed.status == 0 ? "finished" : "killed with \(left) of 7500 left")
            #expect(try store.ok("verify") == "sound: 2500 records, \(operations - 7_500) operations")
            #expect(try store.ok("dump") == dump)
        }
        print("CompactCommandTests kills (seed 58; a whole compact took \(String(format: "%.2f", duration)) s, its writes \(String(format: "%.2f", writing)) s): \(outcomes)")
        #expect(outcomes.contains { $0.hasPrefix("killed") })
    }

    /// Two replicas whose removes name each other's adds, every remove stable (each knows the
    /// other holds everything). The compaction's first pass goes through the authors in id order,
    /// so one of the two directions has removes it reaches before the adds they name (SPEC.md §9,
    /// "Compaction", step 2). `compact` killed at random moments never leaves a remove compacted
    /// while an add it names is held in full: an export would carry the add without the remove.
    @Test func compactKilledNeverDropsARemoveBeforeTheAddsItNames() throws {
        let sandbox = try Sandbox()
        var random = SplitMix64(seed: 59)
        var outcomes: [String] = []
        var duration = 0.0
        for round in 0..<8 {
            let directory = try TemporaryDirectory()
            let (a, b) = (try Node(in: directory, "a", seed: UInt64(2 * round + 1)), try Node(in: directory, "b", seed: UInt64(2 * round + 2)))
            func tagged(by node: Node, removedBy other: Node) throws {
                var generator = SplitMix64(seed: UInt64(round) << 8 | UInt64(node === a ? 1 : 2))
                let refs = (0..<1_500).map { _ in RecordRef.reminder(RecordID.random(using: &generator)) }
                try node.store.perform(refs.map { ($0, .createReminder(ReminderDraft(title: node.name, tags: [node.name]))) })
                try other.store.merge(storeAt: node.store.path)
                other.clock.advance(1_000)
                try other.store.perform(refs.map { ($0, .tag(add: [], remove: [node.name])) })
            }
            try tagged(by: a, removedBy: b)
            try tagged(by: b, removedBy: a)
            try b.store.merge(storeAt: a.store.path)
            try a.store.merge(storeAt: b.store.path)
            #expect(try a.store.stableFrontier().covers(a.store.versionVector()), "every remove is stable on a")
            let removes = try a.store.allOperations().compactMap { operation -> (OperationID, [OperationID])? in
                guard case let .removeTag(_, observed) = operation.action else { return nil }
                return (operation.id, Array(observed))
            }
            #expect(removes.count == 3_000)
            let dump = try a.dump()
            let path = a.store.path
            try a.store.close()
            try b.store.close()

            let store = Store(sandbox: sandbox, path: path)
            let fraction = Double(random.next() % 1_000) / 1_000
            // After round 0, which times a whole compact, each kill lands a random moment after
            // the compaction's first commit reached the WAL: its passes come after its one read.
            let point: KillPoint =
                round == 0 ? .after(1_000) : .progress(measure: { sizeOfFile(path + "-wal") }, threshold: 1, then: duration * fraction / 3)
            let started = Date()
            let killed = try sandbox.runKilled(["compact", "--keep-history", "0", "--store", path], at: point)
            if round == 0 { duration = Date().timeIntervalSince(started) }
            try store.expectSound("after compact was killed \(point)")
            let reopened = try ConcordStore.open(at: path)
            let held = Set(try reopened.allOperations().map(\.id))
            try reopened.close()
            let early = removes.filter { remove, named in !held.contains(remove) && named.contains { held.contains($0) } }
            #expect(early.isEmpty, "round \(round), killed \(point): \(early.count) removes compacted before an add they name, the first \(early.first.map { "\($0.0) naming \($0.1)" } ?? "")")
            #expect(try store.ok("dump") == dump, "round \(round): the state changed")
            outcomes.append(killed.status == 0 ? "finished" : "killed with \(removes.filter { held.contains($0.0) }.count) removes held")
            try store.ok("compact", "--keep-history", "0")
            #expect(try ConcordStore.open(at: path).allOperations().allSatisfy { if case .removeTag = $0.action { false } else { true } }, "every remove dropped in the end")
        }
        print("CompactCommandTests two-author kills (seed 59; a whole compact took \(String(format: "%.2f", duration)) s): \(outcomes)")
    }
}
