import ConcordCore
@testable import ConcordStore
import Foundation
import GRDB
import Testing

/// A peer session's batches as one merge in parts (`MergeInParts`, SPEC.md §5.6, §15.6): each part
/// is prepared ahead (`prepareMerge(_:)`: read, validate, sort), logged in a transaction of its
/// own while the store holds the session's key, and waits listed as pending until `apply()`
/// applies every part together. Whatever was written between the steps, the result is that of
/// one merge.
@Suite struct MergeInPartsTests {
    static let key = [UInt8](repeating: 7, count: 32)

    /// A store file with the sync key, and operations of another replica to merge into it: 50
    /// reminders created, then each retitled, so that the second half of the operations updates
    /// the records the first half creates.
    static func storeAndOperations(
        in directory: TemporaryDirectory, mergeBatch: MergeBatch = .standard
    ) throws -> (store: ConcordStore, operations: [Op]) {
        let clock = ManualClock(baseMillis)
        var storeEnvironment = environment(clock: clock, seed: 1)
        storeEnvironment.mergeBatch = mergeBatch
        let store = try ConcordStore.create(at: directory.file("store.db"), environment: storeEnvironment)
        try store.setSyncKeyBytes(key)
        let source = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 2))
        var ids: [RecordID] = []
        for index in 0..<50 { ids.append(try source.addReminder(ReminderDraft(title: "from a peer \(index)", tags: ["t\(index % 3)"]))) }
        for (index, id) in ids.enumerated() { try source.editReminder(id, ReminderPatch(title: "retitled \(index)")) }
        return (store, try source.allOperations())
    }

    /// What merging the operations in one step gives.
    static func expectedDump(of operations: [Op]) throws -> String {
        let directory = try TemporaryDirectory()
        let (store, _) = try storeAndOperations(in: directory)
        try store.merge(operations)
        return try store.dump()
    }

    /// Logs `operations` as parts of `size` operations, prepared on `preparer` (the store itself
    /// by default), and returns the merge, not yet applied.
    static func logInParts(
        _ operations: [Op], of size: Int, into store: ConcordStore, preparedOn preparer: ConcordStore? = nil
    ) throws -> MergeInParts {
        var merge = MergeInParts(into: store, ifSyncKeyIs: key)
        for start in stride(from: 0, to: operations.count, by: size) {
            try merge.log(try (preparer ?? store).prepareMerge(operations[start..<min(start + size, operations.count)]))
        }
        return merge
    }

    /// Applied from the parts' sorts, kept since they were prepared; folded on the writing thread,
    /// and on a thread of its own.
    @Test(arguments: [20_000, 0]) func partsAreHeldAtOnceAndReachTheirRecordsWhenApplied(foldThreadFrom: Int) throws {
        let directory = try TemporaryDirectory()
        var bounds = MergeBatch.standard
        bounds.foldThreadFrom = foldThreadFrom
        let (store, operations) = try Self.storeAndOperations(in: directory, mergeBatch: bounds)
        var merge = try Self.logInParts(operations, of: 30, into: store)

        // Logged: held, counted in the version vector, listed as pending; the records wait.
        #expect(merge.waiting == operations.count)
        #expect(try store.allOperations().count == operations.count)
        #expect(try store.reminders().isEmpty)
        let pending = try store.verify()
        #expect(pending.isSound)
        #expect(pending.pendingOperations == operations.count)

        #expect(try merge.apply() == .keptSorts)
        #expect(merge.waiting == 0)
        #expect(store.keptSorts.count == 0)
        #expect(try store.dump() == (try Self.expectedDump(of: operations)))
        let applied = try store.verify()
        #expect(applied.isSound)
        #expect(applied.pendingOperations == 0)
        #expect(try store.reminders().map(\.title).sorted() == (0..<50).map { "retitled \($0)" }.sorted())
    }

    /// A part logged and never applied (the process stopped, say) is applied by the next merge
    /// of any store object, which first applies what waits.
    @Test func partsLeftPendingAreAppliedByTheNextMerge() throws {
        let directory = try TemporaryDirectory()
        let (store, operations) = try Self.storeAndOperations(in: directory)
        _ = try Self.logInParts(operations, of: 40, into: store)
        let other = try ConcordStore.open(at: store.path, environment: environment(clock: ManualClock(baseMillis), seed: 3))
        defer { try? other.close() }
        try other.merge([Op]())
        #expect(try store.dump() == (try Self.expectedDump(of: operations)))
        #expect(try store.verify().pendingOperations == 0)
    }

    /// Once as many operations wait as a merge logs before it applies, the merge says so.
    @Test func aMergeIsFullAtTheLoggingBound() throws {
        let directory = try TemporaryDirectory()
        let (store, operations) = try Self.storeAndOperations(in: directory, mergeBatch: MergeBatch(operations: 60, records: 10))
        var merge = MergeInParts(into: store, ifSyncKeyIs: Self.key)
        try merge.log(try store.prepareMerge(operations[0..<40]))
        #expect(!merge.isFull)
        try merge.log(try store.prepareMerge(operations[40..<70]))
        #expect(merge.isFull)
        try merge.apply()
        #expect(!merge.isFull)
        try merge.log(try store.prepareMerge(operations[70...]))
        try merge.apply()
        #expect(try store.dump() == (try Self.expectedDump(of: operations)))
    }

    @Test func preparingOnAReadOnlyObjectDoesNotWaitForAWriter() throws {
        let directory = try TemporaryDirectory()
        let (store, operations) = try Self.storeAndOperations(in: directory)
        let reader = try ConcordStore.open(at: store.path, readOnly: true)
        defer { try? reader.close() }

        // Another connection holds a write transaction open until the merge has been prepared
        // (or 10 s have passed, if preparing waited for it).
        let writer = try ConcordStore.open(at: store.path)
        let inTransaction = DispatchSemaphore(value: 0)
        let prepared = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? writer.write { db in
                try db.execute(sql: "UPDATE meta SET value = value WHERE key = 'clock'")  // holds the write lock
                inTransaction.signal()
                _ = prepared.wait(timeout: .now() + 10)
            }
            done.signal()
        }
        inTransaction.wait()
        let started = Date()
        let part = try reader.prepareMerge(operations)
        let waited = Date().timeIntervalSince(started)
        prepared.signal()
        done.wait()
        try writer.close()
        #expect(waited < 5, "preparing took \(waited) s")
        #expect(part.count == operations.count)

        var merge = MergeInParts(into: store, ifSyncKeyIs: Self.key)
        let report = try merge.log(part)
        try merge.apply()
        #expect(report.newOperationCount == operations.count)
        #expect(try store.dump() == (try Self.expectedDump(of: operations)))
        #expect(try store.verify().isSound)
    }

    /// Another writer merges some of the same operations between preparing and logging: they are
    /// compared with the ones it logged, not logged twice, and every record holds them once.
    @Test func operationsLoggedAfterPreparingAreComparedNotLoggedTwice() throws {
        let directory = try TemporaryDirectory()
        let (store, operations) = try Self.storeAndOperations(in: directory)
        let part = try store.prepareMerge(operations)
        let other = try ConcordStore.open(at: store.path)
        var otherMerge = MergeInParts(into: other, ifSyncKeyIs: Self.key)
        try otherMerge.log(try other.prepareMerge(operations.prefix(30)))
        try otherMerge.apply()
        try other.close()

        var merge = MergeInParts(into: store, ifSyncKeyIs: Self.key)
        let report = try merge.log(part)
        try merge.apply()
        #expect(report.newOperationCount == operations.count - 30)
        #expect(report.duplicates == 30)
        #expect(try store.dump() == (try Self.expectedDump(of: operations)))
        #expect(try store.verify().isSound)
    }

    /// A part prepared before the part ahead of it was logged, repeating some of its operations:
    /// they are held after all when it is logged, the parts' sorts no longer say exactly what
    /// waits, and the apply reads the log.
    @Test func aPartThatRepeatsOperationsOfThePartAheadIsAppliedFromTheLog() throws {
        let directory = try TemporaryDirectory()
        let (store, operations) = try Self.storeAndOperations(in: directory)
        let first = try store.prepareMerge(operations[0..<60])
        let second = try store.prepareMerge(operations[40...])
        var merge = MergeInParts(into: store, ifSyncKeyIs: Self.key)
        try merge.log(first)
        #expect(try merge.log(second).duplicates == 20)
        #expect(try merge.apply() == .log)
        #expect(try store.dump() == (try Self.expectedDump(of: operations)))
        #expect(try store.verify().isSound)
        #expect(try store.verify().pendingOperations == 0)
        #expect(store.keptSorts.count == 0)
    }

    /// Another store object (another process) applies the merge's pending rows between its
    /// logging and its applying, and compacts the store: the parts' sorts still hold operations
    /// the compaction dropped, which must not reach their records again, so the apply reads what
    /// is still pending from the log (here: nothing) and leaves no `merging` mark behind.
    @Test func rowsAppliedAndCompactedElsewhereAreNotAppliedFromTheSorts() throws {
        let directory = try TemporaryDirectory()
        let (store, operations) = try Self.storeAndOperations(in: directory)
        var merge = try Self.logInParts(operations, of: 30, into: store)
        let other = try ConcordStore.open(at: store.path, environment: environment(clock: ManualClock(baseMillis + 86_400_000), seed: 3))
        #expect(try other.compact(keeping: .none).droppedOperations > 0)
        try other.close()

        #expect(try merge.apply() == .log)
        let expected = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 1))
        try expected.merge(operations)
        #expect(try store.reminders().map(\.title).sorted() == (try expected.reminders().map(\.title).sorted()))
        let verified = try store.verify()
        #expect(verified.isSound, "\(verified.problems)")
        #expect(verified.pendingOperations == 0)
        #expect(try store.readOnWriter { db in try PendingRow.mergingProcesses(db) }.isEmpty)
    }

    /// A part of each operation: up to `maxKeptParts` parts, their sorts are kept; past it, they
    /// are let go (and their files closed), and the apply reads what waits from the log.
    @Test func partsPastTheKeptBoundAreAppliedFromTheLog() throws {
        for parts in [MergeInParts.maxKeptParts, MergeInParts.maxKeptParts + 1] {
            let directory = try TemporaryDirectory()
            let (store, operations) = try Self.storeAndOperations(in: directory)
            var merge = try Self.logInParts(Array(operations.prefix(parts)), of: 1, into: store)
            #expect(store.keptSorts.count == (parts <= MergeInParts.maxKeptParts ? parts : 0))
            #expect(try merge.apply() == (parts <= MergeInParts.maxKeptParts ? .keptSorts : .log))
            #expect(store.keptSorts.count == 0)
            #expect(try store.dump() == (try Self.expectedDump(of: Array(operations.prefix(parts)))))
            #expect(try store.verify().pendingOperations == 0)
        }
    }

    /// The merges into one store object (a server's sessions) keep at most `KeptSorts.limit`
    /// sorts between them: the merge that would keep more reads the log instead.
    @Test func theMergesOfOneStoreObjectKeepABoundedNumberOfSorts() throws {
        let directory = try TemporaryDirectory()
        let (store, operations) = try Self.storeAndOperations(in: directory)
        let perMerge = MergeInParts.maxKeptParts - 4
        let count = KeptSorts.limit / perMerge + 1
        #expect(operations.count >= count * perMerge)
        var merges: [MergeInParts] = []
        for index in 0..<count {
            let slice = operations[(index * perMerge)..<((index + 1) * perMerge)]
            merges.append(try Self.logInParts(Array(slice), of: 1, into: store))
            // The merge that would pass the limit lets go of its own too.
            let kept = (index + 1) * perMerge
            #expect(store.keptSorts.count == (kept <= KeptSorts.limit ? kept : index * perMerge))
        }
        // The first merges' rows were applied by the next one's first part (every merge first
        // applies what waits): they read the log too.
        for index in merges.indices { #expect(try merges[index].apply() == .log) }
        #expect(store.keptSorts.count == 0)
        #expect(try store.dump() == (try Self.expectedDump(of: Array(operations.prefix(count * perMerge)))))
        #expect(try store.verify().isSound)
    }

    /// Operations read as held, against a file that has since been replaced by one that lacks
    /// them, are still applied to their records (from the log).
    @Test func operationsPreparedAsHeldThatAreNotAreAppliedAllTheSame() throws {
        let directory = try TemporaryDirectory()
        let (store, operations) = try Self.storeAndOperations(in: directory)
        try store.merge(operations)
        let part = try store.prepareMerge(operations)  // all held here
        let path = store.path
        try store.close()
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let replaced = try ConcordStore.create(at: path, environment: environment(clock: ManualClock(baseMillis), seed: 1))
        try replaced.setSyncKeyBytes(Self.key)

        var merge = MergeInParts(into: replaced, ifSyncKeyIs: Self.key)
        let report = try merge.log(part)
        try merge.apply()
        #expect(report.newOperationCount == operations.count)
        #expect(try replaced.reminders().count == 50)
        #expect(try replaced.dump() == (try Self.expectedDump(of: operations)))
        #expect(try replaced.verify().isSound)
    }

    /// A key replaced by another connection (another process) stops the next part, which writes
    /// nothing; the parts logged before it were received under the key, and are applied.
    @Test func aKeyReplacedByAnotherConnectionStopsTheNextPartAndWritesNothing() throws {
        let directory = try TemporaryDirectory()
        let (store, operations) = try Self.storeAndOperations(in: directory)
        // The operations that create the reminders; one retitling each follows them.
        let created = operations.count - 50
        var merge = MergeInParts(into: store, ifSyncKeyIs: Self.key)
        try merge.log(try store.prepareMerge(operations.prefix(created)))

        let other = try ConcordStore.open(at: store.path, environment: environment(clock: ManualClock(baseMillis), seed: 3))
        try other.setSyncKeyBytes([UInt8](repeating: 2, count: 32), replacing: true)
        try other.close()

        let before = try store.allOperations()
        #expect {
            try merge.log(try store.prepareMerge(operations.dropFirst(created)))
        } throws: { error in
            (error as? ConcordError)?.code == .keyReplaced
        }
        #expect(try store.allOperations() == before)
        try merge.apply()
        #expect(try store.reminders().count == 50)
        #expect(try store.reminders().allSatisfy { $0.title.hasPrefix("from a peer") })
        #expect(try store.verify().isSound)
        #expect(try store.versionVector()[operations[0].id.replica] == UInt64(created))
    }
    /// A purge meets a merge's pending rows both ways: a record purged while the merge that
    /// edits it waits has its pending operations elided at once, and a merge that brings edits
    /// of a record purged before logs them elided. No reader of the log (an export, a peer) meets
    /// the content in between (SPEC.md §5.7).
    @Test func aPurgeMeetsPendingRowsEitherWay() throws {
        let directory = try TemporaryDirectory()
        let (store, operations) = try Self.storeAndOperations(in: directory)
        let created = Array(operations.prefix(operations.count / 2))
        let edits = Array(operations.suffix(operations.count - created.count))
        try store.merge(created)
        let first = try #require(created.first?.record)
        let second = try #require(created.last?.record)

        // Purged while edits of it wait.
        var merge = try Self.logInParts(edits, of: 40, into: store)
        #expect(try store.allOperations().contains { $0.record == first && !$0.purges })
        try store.purge(first)
        #expect(try !store.allOperations().contains { $0.record == first && !$0.purges })
        try merge.apply()

        // Purged before a merge brings edits of it.
        try store.purge(second)
        let later = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis + 10_000), seed: 3))
        try later.merge(created)
        try later.editReminder(second.id, ReminderPatch(title: "edited-after-the-purge"))
        var another = MergeInParts(into: store, ifSyncKeyIs: Self.key)
        _ = try another.log(try store.prepareMerge(try later.allOperations()))
        #expect(try !store.allOperations().contains { $0.record == second && !$0.purges })
        try another.apply()

        #expect(try store.reminder(first.id) == nil && store.reminder(second.id) == nil)
        #expect(try store.verify().problems == [])
        #expect(filesHolding("edited-after-the-purge", in: [directory.file("store.db")]) == [])
    }
}
