import ConcordCore
@testable import ConcordStore
import Foundation
import GRDB
import Testing

@Suite struct StoreTests {
    let clock = ManualClock(baseMillis)

    func makeStore(seed: UInt64 = 7) throws -> ConcordStore {
        try ConcordStore.inMemory(environment: environment(clock: clock, seed: seed))
    }

    @Test func localChangesAreMaterializedAndLogged() throws {
        let store = try makeStore()
        let id = try store.addReminder(ReminderDraft(title: "Call Ana", notes: "about Friday", priority: .high, tags: ["work", "phone"]))
        let reminder = try #require(try store.reminder(id))
        #expect(reminder.title == "Call Ana")
        #expect(reminder.notes == "about Friday")
        #expect(reminder.priority == .high)
        #expect(reminder.tags == ["phone", "work"])
        #expect(!reminder.isCompleted)
        // title, notes, due, completed, priority, and one add per tag.
        let operations = try store.allOperations()
        #expect(operations.map(\.id.seq) == Array(1...7))
        #expect(try store.versionVector()[store.replicaID] == 7)

        try store.completeReminder(id)
        #expect(try store.reminders().isEmpty)
        #expect(try store.reminders(includeCompleted: true).map(\.id) == [id])
        #expect(try store.reminder(id)?.completedAt == Date(millisecondsSince1970: Int64(baseMillis)))
    }

    @Test func clockIsPersistedAndNeverGoesBack() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("store.db")
        clock.now = baseMillis + 60_000
        var store = try ConcordStore.create(at: path, environment: environment(clock: clock, seed: 1))
        try store.addNote(NoteDraft(title: "first"))
        let first = try store.recentOperations(limit: 1)[0].timestamp
        try store.close()

        clock.now = baseMillis  // the wall clock jumped a minute back
        store = try ConcordStore.open(at: path, environment: environment(clock: clock, seed: 2))
        try store.addNote(NoteDraft(title: "second"))
        let second = try store.recentOperations(limit: 1)[0].timestamp
        #expect(second > first)
        #expect(second.physicalMillis == first.physicalMillis)
    }

    @Test func createIsAtomicAndRefusesAnExistingFile() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("nested/dir/store.db")
        let store = try ConcordStore.create(at: path, name: "laptop")
        #expect(try store.status().name == "laptop")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.file("nested/dir"))
            .filter { $0.contains(".init-") }
        #expect(leftovers.isEmpty)
        #expect(throws: ConcordError.self) { try ConcordStore.create(at: path) }
        do {
            _ = try ConcordStore.create(at: path)
        } catch {
            #expect(error.code == .exists)
        }
    }

    @Test func openRefusesWhatIsNotAStore() throws {
        let directory = try TemporaryDirectory()
        func code(_ path: String) -> ConcordError.Code? {
            do {
                _ = try ConcordStore.open(at: path)
                return nil
            } catch {
                return error.code
            }
        }
        #expect(code(directory.file("missing.db")) == .missing)

        let garbage = directory.file("garbage.db")
        try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: URL(fileURLWithPath: garbage))
        let before = try Data(contentsOf: URL(fileURLWithPath: garbage))
        #expect(code(garbage) == .notAStore)
        #expect(try Data(contentsOf: URL(fileURLWithPath: garbage)) == before)

        let foreign = directory.file("foreign.db")
        try DatabaseQueue(path: foreign).write { db in try db.execute(sql: "CREATE TABLE t (x)") }
        #expect(code(foreign) == .notAStore)

        let newer = directory.file("newer.db")
        try ConcordStore.create(at: newer).close()
        try DatabaseQueue(path: newer).writeWithoutTransaction { db in try db.execute(sql: "PRAGMA user_version = 99") }
        #expect(code(newer) == .newerSchema)

        #expect(code(directory.path) == .notAStore)
    }

    @Test func unknownFieldsAndKindsAreKeptAndPassedOn() throws {
        let author = ReplicaID(high: 9, low: 9)
        let record = RecordRef.reminder(RecordID(high: 1, low: 1))
        let future = RecordRef(kind: RecordKind(rawValue: 7), id: RecordID(high: 2, low: 2))
        let stamp = Timestamp(physicalMillis: baseMillis, logical: 0)
        let operations = [
            Op(id: OperationID(replica: author, seq: 1), timestamp: stamp, record: record, action: .assign(.title, .string("hi"))),
            Op(id: OperationID(replica: author, seq: 2), timestamp: Timestamp(rawValue: stamp.rawValue + 1), record: record,
               action: .assign(.other("color"), .string("teal"))),
            Op(id: OperationID(replica: author, seq: 3), timestamp: Timestamp(rawValue: stamp.rawValue + 2), record: future,
               action: .assign(.other("where"), .int(42))),
            Op(id: OperationID(replica: author, seq: 4), timestamp: Timestamp(rawValue: stamp.rawValue + 3), record: future,
               action: .addTag("x")),
        ]
        let first = try makeStore(seed: 1)
        try first.merge(operations)
        let dump = try first.dump()
        #expect(dump.contains(#""unknown":{"color":"teal"}"#))
        #expect(dump.contains(#""kind":"kind-7""#))
        #expect(dump.contains(#""unknown":{"where":42}"#))
        #expect(try first.allOperations() == operations)

        let second = try makeStore(seed: 2)
        try second.merge(try first.allOperations())
        #expect(try second.dump() == dump)
        var model = Replica(id: ReplicaID(high: 5, low: 5))
        try model.merge(operations)
        #expect(model.dump() == dump)
    }

    /// A record id names one record whatever its kind (SPEC.md §2): a create of an id held as a
    /// reminder, a note or a kind this version does not know, or given to two kinds in one
    /// transaction, is refused and writes nothing.
    @Test func aCreateOfAnIDHeldUnderAnotherKindIsRefused() throws {
        let store = try makeStore()
        let reminder = try store.addReminder(ReminderDraft(title: "held"))
        let note = try store.addNote(NoteDraft(title: "held too"))
        let future = RecordID(high: 3, low: 3)
        try store.merge([Op(
            id: OperationID(replica: ReplicaID(high: 9, low: 9), seq: 1), timestamp: Timestamp(physicalMillis: baseMillis, logical: 0),
            record: RecordRef(kind: RecordKind(rawValue: 7), id: future), action: .addTag("x"))])
        let fresh = RecordID(high: 4, low: 4)
        let before = try store.dump()
        let refusals: [([(RecordRef, Change)], String)] = [
            ([(.note(reminder), .createNote(NoteDraft(title: "n")))], "the store holds a reminder with id \(reminder.hex); a note cannot have the same id"),
            ([(.reminder(note), .createReminder(ReminderDraft(title: "r")))], "the store holds a note with id \(note.hex); a reminder cannot have the same id"),
            ([(.reminder(future), .createReminder(ReminderDraft(title: "r")))], "the store holds a kind-7 with id \(future.hex); a reminder cannot have the same id"),
            ([(.reminder(fresh), .createReminder(ReminderDraft(title: "r"))), (.note(fresh), .createNote(NoteDraft(title: "n")))],
             "the store holds a reminder with id \(fresh.hex); a note cannot have the same id"),
        ]
        for (changes, message) in refusals {
            #expect(throws: ConcordError(.invalidChange, message)) { try store.perform(changes) }
        }
        #expect(try store.dump() == before)
        // Its own kind's create is refused as it always was; an edit is no create.
        #expect(throws: ConcordError(.invalidChange, "a reminder with id \(reminder.hex) already exists")) {
            try store.perform(.createReminder(ReminderDraft(title: "again")), on: .reminder(reminder))
        }
        try store.perform(.createReminder(ReminderDraft(title: "fresh")), on: .reminder(fresh))
        #expect(try store.reminder(fresh)?.title == "fresh")
    }

    @Test func outOfOrderAndDuplicateDeliveryConverges() throws {
        let source = try makeStore(seed: 1)
        let id = try source.addReminder(ReminderDraft(title: "a", tags: ["x"]))
        try source.editReminder(id, ReminderPatch(title: "b"))
        try source.tag(.reminder(id), remove: ["x"])
        try source.completeReminder(id)
        let operations = try source.allOperations()

        let target = try makeStore(seed: 2)
        let reversed = Array(operations.reversed())
        for chunk in stride(from: 0, to: reversed.count, by: 3) {
            let report = try target.merge(reversed[chunk..<min(chunk + 3, reversed.count)])
            #expect(report.duplicates == 0)
        }
        #expect(try target.dump() == source.dump())
        #expect(try target.versionVector()[source.replicaID] == UInt64(operations.count))
        let again = try target.merge(operations + operations)
        #expect(again.newOperationCount == 0)
        #expect(again.duplicates == operations.count * 2)
        #expect(try target.dump() == source.dump())
    }

    @Test func gapsInTheLogAreTrackedAcrossTransactions() throws {
        let source = try makeStore(seed: 1)
        for index in 0..<5 { try source.addNote(NoteDraft(title: "n\(index)")) }
        let operations = try source.allOperations()
        let target = try makeStore(seed: 2)
        try target.merge(operations.filter { $0.id.seq % 2 == 0 })
        #expect(try target.versionVector()[source.replicaID] == 0)
        try target.merge(operations.filter { $0.id.seq % 2 == 0 })  // still held, beyond the gap
        #expect(try target.allOperations().count == operations.count / 2)
        try target.merge(operations.filter { $0.id.seq % 2 == 1 })
        #expect(try target.versionVector()[source.replicaID] == UInt64(operations.count))
        #expect(try target.dump() == source.dump())
    }

    @Test func anInvalidOperationRefusesTheWholeMerge() throws {
        let store = try makeStore()
        try store.addReminder(ReminderDraft(title: "keep"))
        let dump = try store.dump()
        let vector = try store.versionVector()
        let author = ReplicaID(high: 3, low: 3)
        let good = Op(
            id: OperationID(replica: author, seq: 1), timestamp: Timestamp(physicalMillis: baseMillis, logical: 0),
            record: .note(RecordID(high: 4, low: 4)), action: .assign(.title, .string("ok")))
        var bad = good
        bad.id.seq = 2
        bad.action = .assign(.title, .int(5))
        #expect(throws: ConcordError.self) { try store.merge([good, bad]) }
        #expect(try store.dump() == dump)
        #expect(try store.versionVector() == vector)
    }

    @Test func farFutureTimestampsAreReportedAndFollowed() throws {
        let store = try makeStore()
        let ahead = Timestamp(physicalMillis: baseMillis + 3 * 86_400_000, logical: 0)
        let report = try store.merge([
            Op(id: OperationID(replica: ReplicaID(high: 1, low: 2), seq: 1), timestamp: ahead,
               record: .note(RecordID(high: 5, low: 5)), action: .assign(.title, .string("from the future"))),
        ])
        #expect(report.farFutureTimestamp == ahead)
        let id = try store.addNote(NoteDraft(title: "now"))
        let mine = try store.allOperations().filter { $0.record.id == id }
        #expect(mine.allSatisfy { $0.timestamp > ahead })
    }

    @Test func mergeOfStoresLeavesTheSourceUntouched() throws {
        let directory = try TemporaryDirectory()
        let a = try ConcordStore.create(at: directory.file("a.db"), environment: environment(clock: clock, seed: 1))
        let b = try ConcordStore.create(at: directory.file("b.db"), environment: environment(clock: clock, seed: 2))
        let id = try a.addReminder(ReminderDraft(title: "milk", tags: ["home"]))
        try a.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: directory.file("a.db")))
        let report = try b.merge(storeAt: directory.file("a.db"))
        #expect(report.newOperations == [try ConcordStore.open(at: directory.file("a.db"), readOnly: true).replicaID: 6])
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.file("a.db"))) == before)
        #expect(try b.reminder(id)?.title == "milk")
        #expect(try b.merge(storeAt: directory.file("a.db")).newOperationCount == 0)
        #expect(try b.merge(storeAt: directory.file("b.db")).newOperationCount == 0)
        #expect(throws: ConcordError.self) { try b.merge(storesAt: [directory.file("a.db"), directory.file("nope.db")]) }
    }

    /// SPEC.md §2: the records a store creates get time-ordered ids, increasing even when its
    /// clock stands still or goes back.
    @Test func newRecordIDsAreTimeOrdered() throws {
        let store = try makeStore()
        var ids: [RecordID] = []
        for step in 0..<40 {
            // Forward, still, then back.
            clock.now = baseMillis + UInt64(step < 20 ? step : step < 30 ? 20 : 10)
            let now = clock.now
            let id = step.isMultiple(of: 2) ? try store.addReminder(ReminderDraft(title: "r")) : try store.addNote(NoteDraft(title: "n"))
            if step < 20 { #expect(id.high >> 16 == now, "a fresh id starts with the time") }
            ids.append(id)
        }
        #expect(ids == ids.sorted() && Set(ids).count == ids.count)
        // Each resolves by its last digits, though all share their first ones.
        for id in ids { #expect(try store.resolve(String(id.hex.suffix(8))).id == id) }
    }

    @Test func resolvesUniquePrefixesAndRefusesAmbiguousOnes() throws {
        let store = try makeStore()
        let first = try store.addReminder(ReminderDraft(title: "one"))
        #expect(try store.resolve(String(first.hex.prefix(6))) == .reminder(first))
        #expect(try store.resolve(first.hex.uppercased()) == .reminder(first))
        // Two records whose ids share a prefix, made through merge.
        let author = ReplicaID(high: 8, low: 8)
        let twins = [RecordID(hex: "abcd0000000000000000000000000001")!, RecordID(hex: "abcd0000000000000000000000000002")!]
        try store.merge(twins.enumerated().map { index, id in
            Op(id: OperationID(replica: author, seq: UInt64(index + 1)), timestamp: Timestamp(physicalMillis: baseMillis, logical: UInt16(index)),
               record: .note(id), action: .assign(.title, .string("twin")))
        })
        do {
            _ = try store.resolve("abcd")
            Issue.record("an ambiguous prefix resolved")
        } catch {
            #expect(error.code == .ambiguous)
            #expect(error.message.contains(twins[0].hex) && error.message.contains(twins[1].hex))
        }
        #expect(try store.resolve("abcd0000000000000000000000000002") == .note(twins[1]))
        #expect(throws: ConcordError.self) { try store.resolve("abc") }
        #expect(throws: ConcordError.self) { try store.resolve("ffffffff") }
    }

    @Test func dueRemindersHonourSnoozeCompletionAndDeletion() throws {
        let store = try makeStore()
        let due = Date(millisecondsSince1970: Int64(baseMillis) + 3_600_000)
        let plain = try store.addReminder(ReminderDraft(title: "plain", due: due))
        let snoozed = try store.addReminder(ReminderDraft(title: "snoozed", due: due))
        let done = try store.addReminder(ReminderDraft(title: "done", due: due))
        let gone = try store.addReminder(ReminderDraft(title: "gone", due: due))
        let later = try store.addReminder(ReminderDraft(title: "later", due: due.addingTimeInterval(86_400)))
        try store.snoozeReminder(snoozed, until: due.addingTimeInterval(1800))
        try store.completeReminder(done)
        try store.delete(.reminder(gone))
        #expect(try store.dueReminders(at: due).map(\.id) == [plain])
        #expect(Set(try store.dueReminders(at: due.addingTimeInterval(1800)).map(\.id)) == [plain, snoozed])
        #expect(Set(try store.dueReminders(at: due.addingTimeInterval(86_400)).map(\.id)) == [plain, snoozed, later])
        #expect(throws: ConcordError.self) { try store.snoozeReminder(plain, until: Date(millisecondsSince1970: Int64(baseMillis) - 1)) }
    }

    @Test func repeatingReminderAdvancesInsteadOfCompleting() throws {
        let store = try makeStore()
        let due = Date(millisecondsSince1970: CivilTime(year: 2027, month: 1, day: 31, millisOfDay: 9 * 3_600_000).millis)
        let id = try store.addReminder(ReminderDraft(title: "rent", due: due, repeatRule: "monthly"))
        try store.completeReminder(id)
        var reminder = try #require(try store.reminder(id))
        #expect(!reminder.isCompleted)
        #expect(reminder.repeatRule == .monthly(day: 31))
        #expect(reminder.due == Date(millisecondsSince1970: CivilTime(year: 2027, month: 2, day: 28, millisOfDay: 9 * 3_600_000).millis))
        try store.completeReminder(id)
        reminder = try #require(try store.reminder(id))
        #expect(reminder.due == Date(millisecondsSince1970: CivilTime(year: 2027, month: 3, day: 31, millisOfDay: 9 * 3_600_000).millis))
    }

    @Test func changesAreObserved() async throws {
        let store = try makeStore()
        let stream = store.changes()
        var iterator = stream.makeAsyncIterator()
        let id = try await store.addNote(NoteDraft(title: "watch me"))
        let local = try await iterator.next()
        #expect(local?.origin == .local && local?.records == [.note(id)])
        try await store.merge([
            Op(id: OperationID(replica: ReplicaID(high: 6, low: 6), seq: 1), timestamp: Timestamp(physicalMillis: baseMillis, logical: 0),
               record: .note(id), action: .assign(.pinned, .bool(true))),
        ])
        let merged = try await iterator.next()
        #expect(merged?.origin == .merge && merged?.records == [.note(id)])
        #expect(merged?.versions == (try await store.versionVector()))
    }

    /// `changes()` fails with `replaced` once the store's path names another file than the one
    /// the object opened (SPEC.md §7.1), whether that happens while it is followed (found by the
    /// next look: the poll's, within a second) or before it is asked for.
    @Test(.timeLimit(.minutes(1))) func changesFailWithReplacedOnceTheFileIsAnother() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("app.db")
        let store = try await ConcordStore.create(at: path)
        let following = store.changes()
        try await ConcordStore.create(at: directory.file("other.db")).close()
        #expect(rename(directory.file("other.db"), path) == 0)
        for changes in [following, store.changes()] {
            do {
                for try await change in changes { Issue.record("a change after the store was replaced: \(change)") }
                Issue.record("the stream ended without an error")
            } catch {
                #expect((error as? ConcordError)?.code == .replaced)
            }
        }
    }

    @Test func refusedChangesLeaveTheStoreUnchanged() throws {
        let store = try makeStore()
        let id = try store.addReminder(ReminderDraft(title: "x"))
        let dump = try store.dump()
        #expect(throws: ConcordError.self) { try store.editReminder(id, ReminderPatch(title: "  ")) }
        #expect(throws: ConcordError.self) { try store.addReminder(ReminderDraft(title: "")) }
        #expect(throws: ConcordError.self) { try store.completeReminder(RecordID(high: 1, low: 1)) }
        // All changes of one call, or none.
        #expect(throws: ConcordError.self) {
            try store.perform([(.reminder(id), .complete), (.reminder(RecordID(high: 1, low: 1)), .complete)])
        }
        #expect(try store.dump() == dump)
        try store.delete(.reminder(id))
        #expect(throws: ConcordError.self) { try store.editReminder(id, ReminderPatch(title: "y")) }
    }

    /// A store that merges in batches of `operations` operations.
    func makeStore(seed: UInt64, mergeBatch operations: Int, path: String? = nil) throws -> ConcordStore {
        var environment = environment(clock: clock, seed: seed)
        environment.mergeBatch = MergeBatch(operations: operations, records: 1_000)
        if let path { return try ConcordStore.create(at: path, environment: environment) }
        return try ConcordStore.inMemory(environment: environment)
    }

    @Test func aBatchedMergeInterruptedHalfwayKeepsItsBatchesAndResumes() throws {
        let source = try makeStore(seed: 1)
        for index in 0..<10 { try source.addNote(NoteDraft(title: "n\(index)")) }
        let operations = try source.allOperations()
        #expect(operations.count == 30)

        struct Interrupted: Error {}
        let target = try makeStore(seed: 2, mergeBatch: 8)
        var batches = 0
        #expect(throws: Interrupted.self) {
            try target.merge(bounds: target.environment.mergeBatch, afterEachBatch: {
                batches += 1
                if batches == 2 { throw Interrupted() }
            }) { each in try operations.forEach(each) }
        }
        // Two whole batches of 8 were committed, each on its own; nothing of the third.
        #expect(try target.allOperations().count == 16)
        #expect(try target.versionVector()[source.replicaID] == 16)

        let resumed = try target.merge { each in try operations.forEach(each) }
        #expect(resumed.newOperationCount == 14)
        #expect(resumed.duplicates == 16)
        #expect(try target.dump() == source.dump())
    }

    /// A merge read once (`merge(reading:)`) commits what fits in one batch in one
    /// transaction; what takes more records than a batch applies, or
    /// more operations than a batch logs, comes out the same through more transactions; input
    /// that fails partway, or holds an invalid operation, changes nothing.
    @Test func aMergeReadOnceCommitsWhatFitsInOneTransaction() throws {
        let source = try makeStore(seed: 1)
        for index in 0..<10 { try source.addNote(NoteDraft(title: "n\(index)")) }
        let operations = try source.allOperations()
        func target(operations: Int, records: Int) throws -> ConcordStore {
            var environment = environment(clock: clock, seed: 2)
            environment.mergeBatch = MergeBatch(operations: operations, records: records)
            let store = try ConcordStore.inMemory(environment: environment)
            try store.addReminder(ReminderDraft(title: "own"))
            return store
        }
        var expected: String?
        for bounds in [(30, 10), (30, 3), (29, 10), (7, 2), (1_000, 1_000)] {
            let store = try target(operations: bounds.0, records: bounds.1)
            let report = try store.merge { each in
                for operation in operations { try each(operation) }
            }
            #expect(report.newOperationCount == 30, "bounds \(bounds)")
            #expect(try store.pendingOperationCount() == 0)
            #expect(try store.verify().problems == [], "bounds \(bounds)")
            let dump = try store.dump()
            #expect(expected == nil || dump == expected, "bounds \(bounds)")
            expected = dump
        }

        struct Damaged: Error {}
        let store = try target(operations: 1_000, records: 1_000)
        let before = try store.dump()
        let own = try store.allOperations().count
        let failed = try #require(throws: ConcordError.self) {
            try store.merge { each in
                for operation in operations.prefix(25) { try each(operation) }
                throw Damaged()
            }
        }
        #expect(failed.cause is Damaged)
        var invalid = operations[3]
        invalid.record = RecordRef(kind: .reminder, id: RecordID(high: 9, low: 9))
        invalid.action = .assign(.title, .int(4))
        let error = try #require(throws: ConcordError.self) {
            try store.merge { each in
                for operation in operations { try each(operation) }
                try each(invalid)
            }
        }
        #expect(error.code == .invalidInput)
        #expect(try store.dump() == before && store.allOperations().count == own)
    }

    /// A merge read once throws the first error in its input's order (an invalid operation before
    /// a failed read, a failed read before an invalid operation), far into a large input, and
    /// applies nothing either way.
    @Test func aMergeReadOnceThrowsTheFirstErrorOfItsInput() throws {
        let source = try makeStore(seed: 1)
        try source.perform((0..<3_000).map { index in (.note(RecordID(high: 1, low: UInt64(index))), Change.createNote(NoteDraft(title: "n\(index)"))) })
        let operations = try source.allOperations()
        #expect(operations.count > 8_000)
        var invalid = operations[5_000]
        invalid.action = .assign(.title, .int(4))
        struct Damaged: Error {}
        let store = try makeStore(seed: 2)
        try store.addReminder(ReminderDraft(title: "own"))
        let before = try store.dump()

        let invalidFirst = try #require(throws: ConcordError.self) {
            try store.merge { each in
                for operation in operations[..<5_000] { try each(operation) }
                try each(invalid)
                for operation in operations[5_001..<7_000] { try each(operation) }
                throw Damaged()
            }
        }
        #expect(invalidFirst.code == .invalidInput && !(invalidFirst.cause is Damaged))
        let readFailedFirst = try #require(throws: ConcordError.self) {
            try store.merge { each in
                for operation in operations[..<3_000] { try each(operation) }
                throw Damaged()
            }
        }
        #expect(readFailedFirst.cause is Damaged)
        #expect(try store.dump() == before && store.pendingOperationCount() == 0)

        let report = try store.merge { each in try operations.forEach(each) }
        #expect(report.newOperationCount == operations.count)
        #expect(try store.notes().count == 3_000)
    }

    /// A batched merge logs in batches of operations, then applies in batches of records: a batch
    /// that applies ends between records, once it holds its bound of them (SPEC.md §5.6).
    @Test func batchesLogByOperationsAndApplyByRecords() throws {
        let source = try makeStore(seed: 1)
        for index in 0..<10 { try source.addNote(NoteDraft(title: "n\(index)")) }
        let operations = try source.allOperations()
        let directory = try TemporaryDirectory()
        var environment = environment(clock: clock, seed: 2)
        environment.mergeBatch = MergeBatch(operations: 12, records: 4)
        let target = try ConcordStore.create(at: directory.file("target.db"), environment: environment)
        // Another connection sees only what has been committed.
        let observer = try ConcordStore.open(at: target.path, readOnly: true)
        var logged: [Int] = []
        var notes: [Int] = []
        let report = try target.merge(bounds: target.environment.mergeBatch, afterEachBatch: {
            logged.append(try observer.allOperations().count)
            notes.append(try observer.notes().count)
            #expect(try target.verify().isSound)
            if logged.count == 2 {
                // Logged, and not applied yet.
                #expect(try target.pendingOperationCount() == 24)
                #expect(try target.verify().pendingOperations == 24)
            }
        }) { each in try operations.forEach(each) }
        #expect(report.newOperationCount == 30)
        // Operations 1–12, 13–24, 25–30, each batch its own transaction; then three batches
        // apply 4, 4 and 2 records.
        #expect(logged == [12, 24, 30, 30, 30, 30])
        #expect(notes == [0, 0, 0, 4, 8, 10])
        #expect(try target.pendingOperationCount() == 0)
        #expect(try target.dump() == source.dump())
    }

    /// A write between two batches of a merge, by this store object or by another connection, is
    /// not lost to the batches after it (nothing of a record may be kept from one batch to the next
    /// without checking that no one wrote it in between): between the batches that log, to a
    /// record whose operations wait to be applied; and between the batches that apply.
    @Test(arguments: [false, true], [false, true])
    func writesBetweenTheBatchesOfAMergeAreKept(byAnotherConnection: Bool, whileApplying: Bool) throws {
        let source = try makeStore(seed: 1)
        let id = try source.addReminder(ReminderDraft(title: "from the source", notes: "n0"))
        let others = try (0..<5).map { try source.addNote(NoteDraft(title: "other \($0)")) }
        for index in 1...6 { try source.editReminder(id, ReminderPatch(notes: .some("n\(index)"))) }
        let operations = try source.allOperations()

        let directory = try TemporaryDirectory()
        let path = directory.file("target.db")
        var settings = environment(clock: clock, seed: 2)
        settings.mergeBatch = MergeBatch(operations: 4, records: 2)
        let target = try ConcordStore.create(at: path, environment: settings)
        // The target holds the reminder's creation already, so that it can be edited while the
        // rest of the merge waits to be applied.
        try target.merge(operations.prefix { $0.record == .reminder(id) })
        clock.advance(60_000)
        func write() throws {
            if byAnotherConnection {
                let other = try ConcordStore.open(at: path, environment: environment(clock: clock, seed: 3))
                try other.editReminder(id, ReminderPatch(title: "written in between"))
                try other.close()
            } else {
                try target.editReminder(id, ReminderPatch(title: "written in between"))
            }
        }
        var batches = 0
        var wrote = false
        let report = try target.merge(bounds: target.environment.mergeBatch, afterEachBatch: {
            batches += 1
            let allLogged = try target.allOperations().count == operations.count
            // Between the first two batches that log (the first has 4 operations), or between the
            // last one that logs and the first that applies.
            if !wrote, whileApplying ? allLogged : batches == 1 {
                #expect(allLogged == whileApplying)
                try write()
                wrote = true
            }
        }) { each in try operations.forEach(each) }
        #expect(wrote)
        #expect(batches >= 3)
        #expect(report.newOperationCount > 0)
        let reminder = try #require(try target.reminder(id))
        #expect(reminder.title == "written in between")
        #expect(reminder.notes == "n6")
        #expect(try target.notes().map(\.id).sorted() == others.sorted())
        #expect(try target.verify().isSound)
        #expect(try target.pendingOperationCount() == 0)
    }

    /// Text is stored and returned byte for byte, NUL included (SQLite is given and asked for
    /// lengths, never C strings).
    @Test func nulInAKnownTextFieldIsKeptByteExact() throws {
        let store = try makeStore(seed: 60)
        let id = try store.addNote(NoteDraft(title: "a\u{0}b", body: "x\u{0}y"))
        let note = try #require(try store.note(id))
        #expect(Array(note.title.utf8) == Array("a\u{0}b".utf8))
        #expect(Array(note.body.utf8) == Array("x\u{0}y".utf8))
        let dump = try store.dump()
        #expect(dump.contains(#""a\u0000b""#) && dump.contains(#""x\u0000y""#), "\(dump)")
        #expect(try store.verify().isSound)
    }

    @Test func verifyFindsWhatWasTamperedWithAndChangesNothing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("store.db")
        let store = try ConcordStore.create(at: path, environment: environment(clock: clock, seed: 3))
        let id = try store.addReminder(ReminderDraft(title: "one", tags: ["a", "b"]))
        try store.addNote(NoteDraft(title: "two"))
        try store.tag(.reminder(id), remove: ["a"])
        let sound = try store.verify()
        #expect(sound.isSound, "\(sound.problems)")
        #expect(sound.records == 2)
        #expect(try sound.operations == store.allOperations().count)
        try store.close()

        func tampered(_ sql: String) throws -> [String] {
            let copy = directory.file("copy-\(UUID().uuidString).db")
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            try DatabaseQueue(path: copy).writeWithoutTransaction { db in try db.execute(sql: sql) }
            let before = try Data(contentsOf: URL(fileURLWithPath: copy))
            let problems = try ConcordStore.open(at: copy, readOnly: true).verify().problems
            #expect(try Data(contentsOf: URL(fileURLWithPath: copy)) == before, "verify changed the file")
            return problems
        }
        #expect(try tampered("UPDATE reminders SET title = 'changed'").contains { $0.contains("differs from a replay") })
        #expect(try tampered("UPDATE reminders SET tags = '[]'").contains { $0.contains("tags column") })
        #expect(try tampered("UPDATE replicas SET contiguous = contiguous + 1").contains { $0.hasPrefix("version vector") })
        #expect(try tampered("UPDATE meta SET value = 0 WHERE key = 'clock'").contains { $0.hasPrefix("clock") })
        #expect(try tampered("DELETE FROM notes").contains { $0.contains("has no row") })
        #expect(try tampered("UPDATE log SET ops = x'00'").contains { $0.contains("does not decode") })
    }
}
