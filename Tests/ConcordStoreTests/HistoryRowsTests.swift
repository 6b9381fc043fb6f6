import ConcordCore
@testable import ConcordStore
import Foundation
import GRDB
import PropertyBased
import Testing

/// Reading a record's history (SPEC.md §9, "Reading a record's history") when its writes lie
/// between other records' writes in the log, an operation span each: it reads each log row that
/// holds one of the record's operations once, and no other row, and lists what a replay of the
/// whole log lists.
@Suite struct HistoryRowsTests {
    static let records = (1...4).map { RecordRef.reminder(RecordID(high: 0, low: UInt64($0))) }
    /// The record whose history is read.
    static let hot = records[0]
    static let others = Array(records.dropFirst())
    static let tags = ["home", "work"]

    /// The history a replay of `operations` (every operation in the log) gives, without the
    /// store's rows: the record's operations by stamp, each standing as it does in the replayed state.
    static func replayedHistory(of ref: RecordRef, _ operations: [Op]) throws -> [HistoryEntry]? {
        var model = Replica(id: ReplicaID(high: 0, low: 1))
        try model.merge(operations)
        guard let state = model.records[ref] else { return nil }
        return operations.filter { $0.record == ref }.sorted { $0.stamp < $1.stamp }
            .map { HistoryEntry(operation: $0, standing: state.standing(of: $0)) }
    }

    /// How many log rows hold one of `ref`'s operations (of `operations`, every operation in the
    /// log), and how many spans they make: from the log's rows, not from the record's row.
    static func rowsAndSpans(of ref: RecordRef, _ operations: [Op], in store: ConcordStore) throws -> (rows: Int, spans: Int) {
        let ids = operations.filter { $0.record == ref }.map(\.id)
        let spans = OperationSpans(ids.map { OperationSpans.Span(replica: $0.replica, first: $0.seq, last: $0.seq) })
        let rows = try store.connection.read { db in
            let index = try ReplicaDirectory(db).indexByID
            return try Row.fetchAll(db, sql: "SELECT replica, first_seq, last_seq FROM log").filter { row in
                ids.contains { id in
                    index[id.replica] == row[0] && (UInt64(row[1] as Int64)...UInt64(row[2] as Int64)).contains(id.seq)
                }
            }
        }
        return (rows.count, spans.spans.count)
    }

    /// A reminder written between other reminders' writes, in transactions of several sizes (a
    /// row holds at most 4096 operations, so a larger transaction writes more than one), and by
    /// a second replica whose operations are merged in: each row that holds one of its operations
    /// is read once, though it holds hundreds of its spans, and no row that holds none is read.
    @Test func eachRowThatHoldsTheRecordIsReadOnce() throws {
        let clock = ManualClock(1_800_000_000_000)
        let a = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 1))
        let b = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 2))
        try a.perform(Self.records.map { ($0, .createReminder(ReminderDraft(title: "created"))) })
        try b.merge(try a.allOperations())
        var written = 0
        func edit(_ ref: RecordRef) -> (RecordRef, Change) {
            written += 1
            return (ref, .editReminder(ReminderPatch(title: "title \(written)")))
        }
        // One write of its own, then two of others', 1,500 times: a full row, and 404 operations.
        clock.advance(1_000)
        try a.perform((0..<1_500).flatMap { [edit(Self.hot), edit(Self.others[$0 % 3]), edit(Self.others[($0 + 1) % 3])] })
        // A row of others' writes alone.
        clock.advance(1_000)
        try a.perform((0..<100).map { edit(Self.others[$0 % 3]) })
        // 5,000 of its own in a row: one span across a full row and the next.
        clock.advance(1_000)
        try a.perform((0..<5_000).map { _ in edit(Self.hot) })
        // Interleaved on another replica, merged in.
        clock.advance(1_000)
        try b.perform((0..<300).flatMap { [edit(Self.hot), edit(Self.others[$0 % 3])] })
        try a.merge(try b.allOperations())

        let (entries, rowsRead) = try #require(try a.historyAndRowsRead(of: Self.hot))
        let operations = try a.allOperations()
        let (rows, spans) = try Self.rowsAndSpans(of: Self.hot, operations, in: a)
        // The creates' row; two of the interleaved writes; two of those in a row; B's.
        #expect(rows == 6)
        // The creates; one per interleaved write; those in a row; B's interleaved writes.
        #expect(spans == 1 + 1_500 + 1 + 300)
        #expect(rowsRead == rows)
        #expect(entries == (try Self.replayedHistory(of: Self.hot, operations)))
        #expect(entries.count > 1_500 + 5_000 + 300)
    }

    /// One step: which replica writes, how many changes, what they start from, and whether it
    /// then takes the other's operations.
    typealias Step = (Int, Int, Int, Bool)

    static let steps = zip(Gen.int(in: 0...1), Gen.int(in: 1...12), Gen.int(in: 0...1_000), Gen.bool).array(of: 1...25)

    /// Any interleaving of two replicas' writes of a few reminders (edits and tag changes, some
    /// of one record several times in a row, transactions of any size, merges either way): every
    /// record's history is what a replay of the log gives, read from each row that holds it once.
    @Test func anyInterleavingReadsWhatAReplayGivesEachRowOnce() async {
        await propertyCheck(count: 100, input: Self.steps) { steps in
            do {
                let clock = ManualClock(1_800_000_000_000)
                let stores = [
                    try ConcordStore.inMemory(environment: environment(clock: clock, seed: 1)),
                    try ConcordStore.inMemory(environment: environment(clock: clock, seed: 2)),
                ]
                try stores[0].perform(Self.records.map { ($0, .createReminder(ReminderDraft(title: "created", tags: ["home"]))) })
                try stores[1].merge(try stores[0].allOperations())
                for (index, (who, count, start, merges)) in steps.enumerated() {
                    clock.advance(1_000)
                    let changes = (0..<count).map { offset -> (RecordRef, Change) in
                        let choice = start + offset
                        // Every third change of the step repeats its record: spans of more than one operation.
                        let ref = Self.records[(choice / 3 + choice % 2) % Self.records.count]
                        switch choice % 4 {
                        case 0: return (ref, .tag(add: [Self.tags[choice % 2]], remove: []))
                        case 1: return (ref, .tag(add: [], remove: [Self.tags[choice / 4 % 2]]))
                        case 2: return (ref, .editReminder(ReminderPatch(priority: Priority(rawValue: Int64(choice % 4)))))
                        default: return (ref, .editReminder(ReminderPatch(title: "step \(index) change \(offset)")))
                        }
                    }
                    try stores[who].perform(changes)
                    if merges { try stores[1 - who].merge(try stores[who].allOperations()) }
                }
                for store in stores {
                    let operations = try store.allOperations()
                    for ref in Self.records {
                        let (entries, rowsRead) = try #require(try store.historyAndRowsRead(of: ref))
                        #expect(entries == (try Self.replayedHistory(of: ref, operations)), "\(ref)")
                        #expect(rowsRead == (try Self.rowsAndSpans(of: ref, operations, in: store)).rows, "\(ref)")
                    }
                }
            } catch {
                Issue.record("\(error)")
            }
        }
    }
}
