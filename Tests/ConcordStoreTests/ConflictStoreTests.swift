import ConcordCore
import ConcordStore
import Foundation
import Testing

/// Conflicts and history through the store (SPEC.md §5.1, §9, §10): what `conflicts()` lists, the
/// flag on the record values, settling, and each record's history read from its operation spans.
@Suite struct ConflictStoreTests {
    /// Two stores that each retitle one reminder without seeing the other's title.
    static func twoStoresInConflict() throws -> (ConcordStore, ConcordStore, RecordID, ManualClock) {
        let clock = ManualClock(1_800_000_000_000)
        let a = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 1))
        let b = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 2))
        let id = try a.addReminder(ReminderDraft(title: "Buy milk"))
        try b.merge(try a.allOperations())
        clock.advance(1_000)
        try a.editReminder(id, ReminderPatch(title: "Buy oat milk"))
        clock.advance(1_000)
        try b.editReminder(id, ReminderPatch(title: "Buy almond milk", priority: .high))
        try a.merge(try b.allOperations())
        try b.merge(try a.allOperations())
        return (a, b, id, clock)
    }

    @Test func bothStoresListTheConflictAndFlagTheRecord() throws {
        let (a, b, id, _) = try Self.twoStoresInConflict()
        let conflicts = try a.conflicts()
        #expect(conflicts == (try b.conflicts()))
        let conflict = try #require(conflicts.first)
        #expect(conflicts.count == 1 && conflict.record == .reminder(id) && conflict.field == .title)
        #expect(conflict.heads.map(\.value) == [.string("Buy almond milk"), .string("Buy oat milk")])
        #expect(conflict.heads.map(\.stamp.replica) == [b.replicaID, a.replicaID])
        for store in [a, b] {
            #expect(try store.reminder(id)?.isInConflict == true)
            #expect(try store.reminders().first?.isInConflict == true)
            #expect(try store.reminder(id)?.title == "Buy almond milk", "the last writer's value shows")
            #expect(try store.verify().isSound)
        }
    }

    /// An edit of the field on either store settles it on both once they have synced; the
    /// predecessors of that edit name both heads.
    @Test func anEditSettlesTheConflictOnEveryStore() throws {
        let (a, b, id, clock) = try Self.twoStoresInConflict()
        clock.advance(1_000)
        let settled = try a.perform(.settle(.title, .string("Buy oat milk")), on: .reminder(id))
        let predecessors = try #require(settled.first?.predecessors)
        #expect(predecessors.entries.map(\.replica) == [b.replicaID])
        #expect(try a.conflicts().isEmpty)
        #expect(try a.reminder(id)?.isInConflict == false)
        #expect(try !b.conflicts().isEmpty)
        try b.merge(try a.allOperations())
        #expect(try b.conflicts().isEmpty)
        #expect(try b.reminder(id)?.isInConflict == false)
        #expect(try b.reminder(id)?.title == "Buy oat milk")
        #expect(try a.dump() == (try b.dump()))
        #expect(try b.verify().isSound)
        // A settle refuses what an edit refuses.
        #expect(throws: ConcordError.self) { try a.perform(.settle(.title, .string("")), on: .reminder(id)) }
        #expect(throws: ConcordError.self) { try a.perform(.settle(.priority, .string("high")), on: .reminder(id)) }
    }

    /// A record's history is its operations, by stamp, each standing as it does now; other
    /// records' operations in the same log rows are left out.
    @Test func historyListsTheRecordsOperationsAndHowEachStands() throws {
        let (a, b, id, _) = try Self.twoStoresInConflict()
        // Other records written in the same transactions and runs as the reminder's edits.
        try a.perform([(.reminder(RecordID(high: 1, low: 1)), .createReminder(ReminderDraft(title: "other"))),
                       (.reminder(id), .tag(add: ["home"], remove: []))])
        try b.merge(try a.allOperations())
        let ref = RecordRef.reminder(id)
        let history = try #require(try b.history(of: ref))
        #expect(history.map(\.operation) == (try b.allOperations()).filter { $0.record == ref }.sorted { $0.stamp < $1.stamp })
        func standing(_ field: Field, _ value: Value) -> HistoryEntry.Standing? {
            history.first { if case .assign(field, value) = $0.operation.action { true } else { false } }?.standing
        }
        #expect(standing(.title, .string("Buy milk")) == .superseded)
        #expect(standing(.title, .string("Buy oat milk")) == .inConflict)
        #expect(standing(.title, .string("Buy almond milk")) == .holds)
        #expect(standing(.priority, .int(3)) == .holds)
        #expect(history.last.map { if case .addTag = $0.operation.action { $0.standing == .holds } else { false } } == true)
        #expect(try b.history(of: .note(id)) == nil)
    }

    /// The async forms answer as the synchronous ones do.
    @Test func theAsyncFormsAnswerAlike() async throws {
        let (a, _, id, _) = try Self.twoStoresInConflict()
        let (conflicts, history) = try Self.answers(a, id)
        #expect(try await a.conflicts() == conflicts)
        #expect(try await a.history(of: .reminder(id)) == history)
    }

    static func answers(_ store: ConcordStore, _ id: RecordID) throws -> ([Conflict], [HistoryEntry]?) {
        (try store.conflicts(), try store.history(of: .reminder(id)))
    }

    /// One assign under one id with two different known predecessor lists is a clash (SPEC.md
    /// §4.2), "none" against a list included; unknown predecessors are the same operation as
    /// either, and the copy held is kept.
    @Test func twoDifferentKnownPredecessorListsOfOneAssignAreAClash() throws {
        let (a, b, _, _) = try Self.twoStoresInConflict()
        let edit = try #require(try b.allOperations().last { $0.id.replica == b.replicaID && $0.predecessors?.entries.isEmpty == false })
        let other = try #require(try a.allOperations().first { $0.id.replica == a.replicaID }?.id)
        let fresh = try ConcordStore.inMemory()
        try fresh.merge(try b.allOperations())
        let dump = try fresh.dump()
        for predecessors in [Predecessors([]), Predecessors([OperationID(replica: other.replica, seq: other.seq + 1)])] {
            var forged = edit
            forged.predecessors = predecessors
            let error = #expect(throws: ConcordError.self) { try fresh.merge([forged]) }
            #expect(error?.code == .clash, "\(predecessors)")
        }
        var unknown = edit
        unknown.predecessors = nil
        #expect(try fresh.merge([unknown]).newOperationCount == 0)
        #expect(try fresh.dump() == dump)
        #expect(try fresh.allOperations().first { $0.id == edit.id }?.predecessors == edit.predecessors, "the copy held is kept")
    }
}
