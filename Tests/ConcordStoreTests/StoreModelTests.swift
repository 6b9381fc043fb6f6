import ConcordCore
import ConcordStore
import Foundation
import PropertyBased
import Testing

/// The SQLite store against the in-memory reference model: the same scripts of local changes and
/// merges must leave both with byte-identical dumps, step by step.
@Suite struct StoreModelTests {
    /// One step: (what, which replica, which record, an argument).
    typealias Step = (Int, Int, Int, Int)

    static let steps = zip(Gen.int(in: 0...11), Gen.int(in: 0...1), Gen.int(in: 0...2), Gen.int(in: 0...5))
        .array(of: 1...30)

    static let records: [RecordRef] = [
        .reminder(RecordID(high: 0, low: 1)), .reminder(RecordID(high: 0, low: 2)), .note(RecordID(high: 0, low: 3)),
    ]
    static let tags = ["home", "work", "é", "e\u{301}"]

    final class Side {
        var model: Replica
        let store: ConcordStore
        let clock: ManualClock

        /// Whether this side merges in batches (of at most 3 operations and 1 record), so that
        /// records are written out and read back between operations of one merge.
        let batched: Bool

        init(seed: UInt64, batched: Bool = false) throws {
            clock = ManualClock(baseMillis)
            var environment = environment(clock: clock, seed: seed)
            if batched { environment.mergeBatch = MergeBatch(operations: 3, records: 1) }
            store = try ConcordStore.inMemory(environment: environment)
            model = Replica(id: store.replicaID)
            self.batched = batched
        }

        /// Performs `change` on both; they must agree on whether it is refused.
        func perform(_ change: Change, on ref: RecordRef, at wall: UInt64) {
            clock.now = wall
            let modelResult = Result { try model.perform(change, on: ref, wallMillis: wall) }
            let storeResult = Result { try store.perform(change, on: ref) }
            switch (modelResult, storeResult) {
            case let (.success(a), .success(b)): #expect(a == b, "model and store made different operations for \(change)")
            case (.failure, .failure): break
            default: Issue.record("model \(modelResult) but store \(storeResult) for \(change) on \(ref)")
            }
        }

        /// As stores merge each other (`merge(storesAt:)`): the operations this side lacks, the
        /// other's compacted seqs, and what it holds; in this side's batches.
        func merge(from other: Side) throws {
            try model.merge(other.model.export(since: model.versionVector))
            try store.merge(stores: [other.store])
        }
    }

    @Test func storeMatchesModel() async throws {
        await propertyCheck(count: 200, input: Self.steps) { steps in
            do {
                let sides = [try Side(seed: 1), try Side(seed: 2, batched: true)]
                for (index, step) in steps.enumerated() {
                    let (what, who, which, argument) = step
                    let side = sides[who]
                    let ref = Self.records[which]
                    // Replica 1's wall clock runs 3 s behind replica 0's, so HLC order and wall order differ.
                    let wall = baseMillis + UInt64(index) * 1000 - UInt64(who) * 3000
                    let change: Change?
                    switch what {
                    case 0:
                        change = ref.kind == .note
                            ? .createNote(NoteDraft(title: "note \(argument)", tags: [Self.tags[argument % 4]]))
                            : .createReminder(ReminderDraft(
                                title: "r\(argument)", due: Date(millisecondsSince1970: Int64(baseMillis) + Int64(argument) * 86_400_000),
                                priority: Priority(rawValue: Int64(argument % 4)), tags: [Self.tags[argument % 4]]))
                    case 1:
                        change = ref.kind == .note
                            ? .editNote(NotePatch(title: "n\(argument)", isPinned: argument % 2 == 0))
                            : .editReminder(ReminderPatch(title: "t\(argument)", notes: .some(argument % 2 == 0 ? nil : "x")))
                    case 2: change = .complete
                    case 3: change = .reopen
                    case 4: change = .delete
                    case 5: change = .restore
                    case 6: change = .tag(add: [Self.tags[argument % 4]], remove: [])
                    case 7: change = .tag(add: [], remove: [Self.tags[argument % 4]])
                    case 8:
                        change = .editReminder(ReminderPatch(
                            due: .some(Date(millisecondsSince1970: Int64(baseMillis) + Int64(argument) * 3_600_000)),
                            repeatRule: .some(["daily", "monthly", "hourly"][argument % 3])))
                    case 11 where argument % 2 == 0: change = .purge
                    case 10 where argument % 2 == 0:
                        // Compaction (SPEC.md §5.8), in transactions of one record on one side.
                        change = nil
                        let dropped = side.model.compact()
                        #expect(try side.store.compact(keeping: .none, recordsPerTransaction: side.batched ? 1 : 100).droppedOperations == dropped)
                    default:
                        change = nil
                        try side.merge(from: sides[1 - who])
                    }
                    if let change { side.perform(change, on: ref, at: wall) }
                    #expect(try side.store.dump() == side.model.dump(), "after step \(index) \(step)")
                    #expect(try side.store.versionVector() == side.model.versionVector)
                }
                try sides[0].merge(from: sides[1])
                try sides[1].merge(from: sides[0])
                let dumps = try sides.map { try $0.store.dump() }
                #expect(dumps[0] == dumps[1], "stores did not converge")
                #expect(dumps[0] == sides[0].model.dump())
                for side in sides {
                    #expect(try side.store.verify().problems == [], "verify found problems")
                    // The same copies: a purged record's operations elided in both, the same ones
                    // compacted.
                    #expect(try side.store.allOperations() == side.model.operations())
                }
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
    }
}
