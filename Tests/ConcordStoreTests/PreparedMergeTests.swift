import ConcordCore
import ConcordStore
import Foundation
import GRDB
import Testing

/// A merge prepared ahead (`prepareMerge(_:)`: read, validate, sort), then logged and applied
/// (`merge(_:ifSyncKeyIs:)`), as a peer session does while the merge before it writes (SPEC.md
/// §5.6, §15.9): preparing never waits for a writer, and whatever was written between the two
/// steps, the result is that of one merge.
@Suite struct PreparedMergeTests {
    static let key = [UInt8](repeating: 7, count: 32)

    /// A store file with the sync key, and operations of another replica to merge into it.
    static func storeAndOperations(in directory: TemporaryDirectory) throws -> (store: ConcordStore, operations: [Op]) {
        let clock = ManualClock(baseMillis)
        let store = try ConcordStore.create(at: directory.file("store.db"), environment: environment(clock: clock, seed: 1))
        try store.setSyncKeyBytes(key)
        let source = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 2))
        for index in 0..<50 { try source.addReminder(ReminderDraft(title: "from a peer \(index)", tags: ["t\(index % 3)"])) }
        return (store, try source.allOperations())
    }

    /// What merging the operations in one step gives.
    static func expectedDump(of operations: [Op]) throws -> String {
        let directory = try TemporaryDirectory()
        let (store, _) = try storeAndOperations(in: directory)
        try store.merge(operations, ifSyncKeyIs: key)
        return try store.dump()
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
        let merge = try reader.prepareMerge(operations)
        let waited = Date().timeIntervalSince(started)
        prepared.signal()
        done.wait()
        try writer.close()
        #expect(waited < 5, "preparing took \(waited) s")
        #expect(merge.count == operations.count)

        let report = try store.merge(merge, ifSyncKeyIs: Self.key)
        #expect(report.newOperationCount == operations.count)
        #expect(try store.dump() == (try Self.expectedDump(of: operations)))
        #expect(try store.verify().isSound)
    }

    /// Another writer merges the same operations between the two steps: they are compared with
    /// the ones it logged, not logged twice, and every record holds them once.
    @Test func operationsLoggedAfterPreparingAreComparedNotLoggedTwice() throws {
        let directory = try TemporaryDirectory()
        let (store, operations) = try Self.storeAndOperations(in: directory)
        let merge = try store.prepareMerge(operations)
        let other = try ConcordStore.open(at: store.path)
        try other.merge(Array(operations.prefix(30)), ifSyncKeyIs: Self.key)
        try other.close()

        let report = try store.merge(merge, ifSyncKeyIs: Self.key)
        #expect(report.newOperationCount == operations.count - 30)
        #expect(report.duplicates == 30)
        #expect(try store.dump() == (try Self.expectedDump(of: operations)))
        #expect(try store.verify().isSound)
    }

    /// Operations read as held, against a file that has since been replaced by one that lacks
    /// them, are still applied to their records (from the log).
    @Test func operationsPreparedAsHeldThatAreNotAreAppliedAllTheSame() throws {
        let directory = try TemporaryDirectory()
        let (store, operations) = try Self.storeAndOperations(in: directory)
        try store.merge(operations, ifSyncKeyIs: Self.key)
        let merge = try store.prepareMerge(operations)  // all held here
        let path = store.path
        try store.close()
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let replaced = try ConcordStore.create(at: path, environment: environment(clock: ManualClock(baseMillis), seed: 1))
        try replaced.setSyncKeyBytes(Self.key)

        let report = try replaced.merge(merge, ifSyncKeyIs: Self.key)
        #expect(report.newOperationCount == operations.count)
        #expect(try replaced.reminders().count == 50)
        #expect(try replaced.dump() == (try Self.expectedDump(of: operations)))
        #expect(try replaced.verify().isSound)
    }
}
