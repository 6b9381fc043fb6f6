import ConcordCore
@testable import ConcordStore
import Foundation
import GRDB
import PropertyBased
import Testing

/// A batch that touches a record it has not read joins what it applied with the record's row
/// where the row lies, reading only the row's merge metadata and rewriting only the columns it
/// wins (SPEC.md §5.6). The row it leaves must be the one that writing the whole joined state
/// leaves, byte for byte, in every column.
@Suite struct JoinedRowTests {
    static let records: [RecordRef] = [
        .reminder(RecordID(high: 0, low: 1)), .reminder(RecordID(high: 0, low: 2)),
        .note(RecordID(high: 0, low: 3)), RecordRef(kind: RecordKind(rawValue: 9), id: RecordID(high: 0, low: 4)),
    ]
    static let replicas = [ReplicaID(high: 1, low: 1), ReplicaID(high: 2, low: 2), ReplicaID(high: 3, low: 3)]
    /// Fields known to reminders, to notes, to neither (kept as unknown fields), and by name only.
    static let fields: [Field] = [
        .title, .notes, .due, .priority, .completed, .snoozedUntil, .repeatRule, .deleted, .body, .pinned,
        .other(ExactString("x-colour")), .other(ExactString("x-\u{E9}")),
    ]
    static let values: [Value] = [
        .null, .bool(true), .bool(false), .int(0), .int(3), .int(-1_000_000_007), .string(""), .string("caf\u{E9} \u{1F30D}"),
        .string("daily"), .string("a long enough text that is not a small string"),
    ]
    static let tags = ["home", "work", "\u{E9}", "e\u{301}"]

    /// Operations of three replicas on the four records: field writes with clashing timestamps
    /// and predecessors unknown, none, or naming another replica's earlier write (so registers keep
    /// rivals, and a stored winner can lose and stay a head), tags added, and tags removed with
    /// some of the adds seen before.
    static func operations(seed: UInt64) -> [Op] {
        var rng = SplitMix64(seed: seed)
        // Seq 1 of each replica is its introduction (see the test), on a record of its own.
        var seqs = [UInt64](repeating: 1, count: replicas.count)
        var adds: [RecordRef: [String: [OperationID]]] = [:]
        var operations: [Op] = []
        for _ in 0..<Int.random(in: 1...60, using: &rng) {
            let author = Int.random(in: 0..<replicas.count, using: &rng)
            seqs[author] += 1
            let id = OperationID(replica: replicas[author], seq: seqs[author])
            let record = records.randomElement(using: &rng)!
            // Few distinct timestamps, so that registers are often decided by replica and seq.
            let timestamp = Timestamp(physicalMillis: baseMillis + UInt64.random(in: 0...3, using: &rng), logical: 0)
            let tag = tags.randomElement(using: &rng)!
            let action: Action
            var predecessors: Predecessors?
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<6:
                let field = fields.randomElement(using: &rng)!
                let accepted = values.filter { !record.kind.knows(field) || field.accepts($0) }
                action = .assign(field, accepted.randomElement(using: &rng)!)
                let other = (author + Int.random(in: 1..<replicas.count, using: &rng)) % replicas.count
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: predecessors = nil
                case 1: predecessors = .empty
                default: predecessors = Predecessors([OperationID(replica: replicas[other], seq: UInt64.random(in: 1...seqs[other], using: &rng))])
                }
            case 6..<8:
                action = .addTag(ExactString(tag))
                adds[record, default: [:]][tag, default: []].append(id)
            default:
                let seen = (adds[record]?[tag] ?? []).filter { _ in Bool.random(using: &rng) }
                action = .removeTag(ExactString(tag), observed: seen)
            }
            operations.append(Op(id: id, timestamp: timestamp, record: record, action: action, predecessors: predecessors))
        }
        return operations
    }

    /// Every row of the record tables, every column as SQLite holds it (type and bytes).
    static func rows(of path: String) throws -> [String] {
        try DatabaseQueue(path: path).read { db in
            try ["reminders", "notes", "other_records"].flatMap { table in
                try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY id").map { row in
                    table + ": " + row.databaseValues.map { value in
                        switch value.storage {
                        case .null: "null"
                        case .int64(let i): "int \(i)"
                        case .double(let d): "real \(d)"
                        case .string(let s): "text \(s.debugDescription)"
                        case .blob(let data): "blob " + data.map { String(format: "%02x", $0) }.joined()
                        }
                    }.joined(separator: ", ")
                }
            }
        }
    }

    @Test func aRowJoinedInPlaceIsTheRowWrittenWhole() async throws {
        await propertyCheck(count: 100, input: Gen.uint64()) { seed in
            do {
                let directory = try TemporaryDirectory()
                let operations = Self.operations(seed: seed)
                let whole = try ConcordStore.create(
                    at: directory.file("whole.db"), environment: environment(clock: ManualClock(baseMillis), seed: 1))
                // Small batches: a transaction writes out its records once it holds 3.
                var environment = environment(clock: ManualClock(baseMillis), seed: 2)
                environment.mergeBatch = MergeBatch(operations: 5, records: 3)
                let joined = try ConcordStore.create(at: directory.file("joined.db"), environment: environment)
                // Rows name replicas by their number in the store, given when a store first meets
                // one: both meet them in the same order, each in an operation of its own on a
                // record of its own.
                for (index, replica) in Self.replicas.enumerated() {
                    let introduction = Op(
                        id: OperationID(replica: replica, seq: 1), timestamp: Timestamp(physicalMillis: baseMillis, logical: 0),
                        record: .note(RecordID(high: 1, low: 0)), action: .addTag(ExactString("r\(index)")))
                    try whole.merge([introduction])
                    try joined.merge([introduction])
                }
                // Whole: one transaction that writes every record once, whole, as a new row.
                try whole.merge(operations)
                // Joined: the operations shuffled, in three parts: the first writes rows, the
                // second joins several operations per record with them in one transaction, the
                // third in batches of 5 operations.
                var rng = SplitMix64(seed: seed)
                let shuffled = operations.shuffled(using: &rng)
                let cuts = [Int.random(in: 0...shuffled.count, using: &rng), Int.random(in: 0...shuffled.count, using: &rng)].sorted()
                try joined.merge(shuffled[..<cuts[0]])
                try joined.merge(shuffled[cuts[0]..<cuts[1]])
                try joined.merge { each in try shuffled[cuts[1]...].forEach(each) }

                #expect(try joined.dump() == whole.dump())
                #expect(try joined.verify().problems == [])
                #expect(try whole.verify().problems == [])
                try whole.close()
                try joined.close()
                let wholeRows = try Self.rows(of: directory.file("whole.db"))
                #expect(!wholeRows.isEmpty)
                #expect(try Self.rows(of: directory.file("joined.db")) == wholeRows, "seed \(seed)")
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
    }
}

extension JoinedRowTests {
    /// A store on disk with one reminder, whose row `damage` (an SQL assignment) then damages,
    /// merging in batches of one record; and, from another replica, the reminder's operations
    /// plus an edit of its title and a tag added. The directory holds the store's file.
    static func damagedStore(_ damage: String) throws -> (TemporaryDirectory, ConcordStore, edits: [Op]) {
        let directory = try TemporaryDirectory()
        let path = directory.file("store.db")
        var settings = environment(clock: ManualClock(baseMillis), seed: 1)
        settings.mergeBatch = MergeBatch(operations: 1_000, records: 1)
        let store = try ConcordStore.create(at: path, environment: settings)
        let id = try store.addReminder(ReminderDraft(title: "one", notes: "kept", tags: ["a"]))
        let source = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis + 1_000), seed: 2))
        try source.merge(try store.allOperations())
        try source.editReminder(id, ReminderPatch(title: "two"))
        try source.tag(.reminder(id), add: ["b"])
        try store.close()
        try DatabaseQueue(path: path).write { db in try db.execute(sql: "UPDATE reminders SET \(damage)") }
        return (directory, try ConcordStore.open(at: path, environment: settings), try source.allOperations())
    }

    /// A batch that would join its operations with a row whose merge metadata is damaged refuses
    /// the batch: the store is reported corrupt, and nothing of the batch is applied. The merge
    /// fits in one transaction, which logged its operations (SPEC.md §5.6): nothing of it stays,
    /// and the row is as it was.
    @Test(arguments: ["substr(crdt, 1, 3)", "crdt || x'00'", "x'03' || substr(crdt, 2)", "substr(crdt, 1, length(crdt) - 1)"])
    func aDamagedRowRefusesTheBatch(damage: String) throws {
        let (directory, damaged, edits) = try Self.damagedStore("crdt = \(damage)")
        defer { withExtendedLifetime(directory) {} }
        let held = try damaged.allOperations().count
        func row() throws -> Row? {
            try DatabaseQueue(path: directory.file("store.db")).read { db in try Row.fetchOne(db, sql: "SELECT * FROM reminders") }
        }
        let before = try row()
        #expect { try damaged.merge { each in try edits.forEach(each) } } throws: { error in
            (error as? ConcordError)?.code == .corrupt && "\(error)".contains("merge metadata")
        }
        #expect(try damaged.allOperations().count == held)
        #expect(try damaged.pendingOperationCount() == 0)
        #expect(try row() == before)
        // Merged in batches of one operation, the new ones first, the operations stay logged,
        // waiting to be applied: the batch that logs the last (held) one applies the first record.
        let new = edits.filter { $0.id.replica != damaged.replicaID }
        let heldAlready = edits.filter { $0.id.replica == damaged.replicaID }
        #expect { try damaged.merge(bounds: MergeBatch(operations: 1, records: 1)) { each in try (new + heldAlready).forEach(each) } } throws: { error in
            (error as? ConcordError)?.code == .corrupt
        }
        #expect(try damaged.allOperations().count == held + 2)
        #expect(try damaged.pendingOperationCount() == 2)
        #expect(try row() == before)
    }

    /// A join in place reads only the row's merge metadata: a field column it does not rewrite is
    /// not checked there, and `verify` reports it (SPEC.md §5.6).
    @Test func aDamagedColumnAJoinDoesNotRewriteIsLeftForVerify() throws {
        let (directory, damaged, edits) = try Self.damagedStore("notes = x'00ff'")
        defer { withExtendedLifetime(directory) {} }
        #expect(try damaged.verify().problems.count == 1)
        let held = try damaged.allOperations().count
        try damaged.merge { each in try edits.forEach(each) }
        #expect(try damaged.allOperations().count == held + 2)
        #expect(try damaged.verify().problems.count == 1)
    }
}
