import ConcordCore
import ConcordStore
import Foundation
import GRDB
import Testing

/// The store's log is read back through the run decoder (SPEC.md §9): a damaged log row (a file
/// damaged on disk, or a hostile store given to `merge`) must be reported, never crash a reader
/// (issue 6, "Hostile bytes").
@Suite struct DamagedLogTests {
    static func populatedStore(at path: String) throws {
        let clock = ManualClock(baseMillis)
        let store = try ConcordStore.create(at: path, environment: environment(clock: clock, seed: 5))
        let id = try store.addReminder(ReminderDraft(title: "one", notes: "n", tags: ["a", "b"]))
        try store.addNote(NoteDraft(title: "two", body: "caf\u{E9} 👩‍👩‍👧", tags: ["x"]))
        try store.tag(.reminder(id), add: ["c"], remove: ["a"])
        try store.completeReminder(id)
        try store.close()
    }

    /// Every way of reading the log, on a store that may be damaged: each returns or throws a
    /// `ConcordError`; what the log yields is valid.
    static func readEverything(_ path: String) -> [String] {
        var outcomes: [String] = []
        func attempt(_ what: String, _ body: () throws -> Void) {
            do {
                try body()
                outcomes.append("\(what): ok")
            } catch let error as ConcordError {
                outcomes.append("\(what): \(error.code == .corrupt ? "corrupt" : "error \(error)")")
            } catch {
                outcomes.append("\(what): unexpected \(type(of: error)) \(error)")
            }
        }
        attempt("open and read") {
            let store = try ConcordStore.open(at: path, readOnly: true)
            defer { try? store.close() }
            attempt("verify") {
                if !(try store.verify().isSound) { throw ConcordError(.corrupt, "verify reports problems") }
            }
            attempt("forEachOperation") {
                try store.forEachOperation { operation in try operation.validate() }
            }
            attempt("recentOperations") { _ = try store.recentOperations(limit: 3) }
            attempt("dump") { _ = try store.dump() }
        }
        attempt("merge it into another store") {
            let target = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 6))
            try target.merge(storeAt: path)
            guard try target.verify().isSound else { throw ConcordError(.corrupt, "merged into an unsound store") }
        }
        return outcomes
    }

    /// `forEachOperation` and `recentOperations` converted the log's seq columns with a trapping
    /// `UInt64(_:)`: a row whose `last_seq` (which has no CHECK constraint) is negative made
    /// `export`, `log` and a `merge` of that store crash. They now read it as an impossible range
    /// (a corrupt store), as `verify` does.
    @Test func negativeSeqColumnsAreReportedNotACrash() async {
        await #expect(processExitsWith: .success) {
            let directory = try TemporaryDirectory()
            let path = directory.file("store.db")
            try DamagedLogTests.populatedStore(at: path)
            // CHECK constraints hold for writes through SQLite, not for a file damaged or made by hand.
            for sql in [
                "UPDATE log SET last_seq = -1",
                "UPDATE log SET first_seq = -5 WHERE first_seq = 1",
                "UPDATE log SET last_seq = 9223372036854775807",
                "UPDATE log SET max_ts = -1",
            ] {
                let copy = directory.file("copy.db")
                try? FileManager.default.removeItem(atPath: copy)
                try FileManager.default.copyItem(atPath: path, toPath: copy)
                try DatabaseQueue(path: copy).writeWithoutTransaction { db in
                    try db.execute(sql: "PRAGMA ignore_check_constraints = 1")
                    try db.execute(sql: sql)
                }
                let outcomes = DamagedLogTests.readEverything(copy)
                guard !outcomes.contains(where: { $0.contains("unexpected") }) else { exit(2) }
                guard outcomes.contains("forEachOperation: corrupt") || sql.contains("max_ts") else { exit(3) }
                guard outcomes.contains("verify: corrupt") else { exit(4) }
            }
        }
    }

    /// Log rows with mutated run bytes and seq columns: verify reports or accepts, every reader
    /// returns or throws a `ConcordError`, nothing crashes.
    @Test func mutatedLogRowsNeverCrashAReader() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("store.db")
        try Self.populatedStore(at: path)
        let rows = try DatabaseQueue(path: path).read { db in
            try Row.fetchAll(db, sql: "SELECT replica, first_seq, last_seq, ops FROM log").map {
                (replica: $0[0] as Int64, first: $0[1] as Int64, last: $0[2] as Int64, ops: [UInt8]($0[3] as Data))
            }
        }
        #expect(!rows.isEmpty)
        var random = SplitMix64(seed: UInt64(ProcessInfo.processInfo.environment["CONCORD_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0x10C))
        var outcomes: [String: Int] = [:]
        var unexpected: [String] = []
        for round in 0..<150 {
            let row = rows[Int(random.next() % UInt64(rows.count))]
            var ops = row.ops
            var first = row.first
            var last = row.last
            for _ in 0...(random.next() % 3) {
                let at = Int(random.next() % UInt64(max(ops.count, 1)))
                switch random.next() % 8 {
                case 0 where !ops.isEmpty: ops[at] ^= UInt8(1) << (random.next() % 8)
                case 1 where !ops.isEmpty: ops[at] = [0x00, 0x01, 0x04, 0x7F, 0x80, 0xFF][Int(random.next() % 6)]
                case 2: ops.insert(UInt8(truncatingIfNeeded: random.next()), at: min(at, ops.count))
                case 3 where !ops.isEmpty: ops.remove(at: at)
                case 4: ops.removeSubrange(min(at, ops.count)...)
                case 5: first = [0, 1, 2, -1, first + 1, Int64.max][Int(random.next() % 6)]
                case 6: last = [0, 1, last + 1, last - 1, first + 5000, -1, Int64.max][Int(random.next() % 7)]
                default: ops += ops.prefix(Int(random.next() % 8))
                }
            }
            let copy = directory.file("round.db")
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: copy + suffix) }
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            do {
                try DatabaseQueue(path: copy).writeWithoutTransaction { db in
                    try db.execute(sql: "PRAGMA ignore_check_constraints = 1")
                    try db.execute(
                        sql: "UPDATE log SET ops = ?, first_seq = ?, last_seq = ? WHERE replica = ? AND first_seq = ?",
                        arguments: [Data(ops), first, last, row.replica, row.first])
                }
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                continue  // the new first seq is another row's key
            }
            for outcome in Self.readEverything(copy) {
                outcomes[outcome, default: 0] += 1
                if outcome.contains("unexpected") { unexpected.append("round \(round): \(outcome)") }
            }
        }
        print("damaged log rows: \(outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
        #expect(unexpected.isEmpty, "\(unexpected.prefix(10))")
        #expect(outcomes["forEachOperation: corrupt", default: 0] > 0)
    }
}

