import ConcordCore
import Foundation
import Testing

@testable import ConcordStore

/// `changes()` reports what anyone commits to the store's file (SPEC.md §7, "Observing changes"):
/// another store object, a merge that applies in batches, a writer that rings no bell.
@Suite struct ObservationTests {
    /// Collects what an observer of a store reports (the observer that `changes()` feeds its
    /// stream from), as the observer's own queue delivers it: no task of the test's is involved,
    /// so a machine busy with other tests' tasks does not hold it up.
    final class Collected: @unchecked Sendable {
        // @unchecked Sendable: `events` is touched only with `lock` held; `observer` is set once.
        private let lock = NSLock()
        private var events: [StoreEvent] = []
        private var observer: StoreObserver?

        init(observing store: ConcordStore, pollEvery: DispatchTimeInterval? = nil) throws {
            observer = try StoreObserver(store, pollEvery: pollEvery) { [weak self] event in
                guard let self else { return }
                lock.withLock { events.append(event) }
            }
        }

        /// Every event, and the changes among them.
        var allEvents: [StoreEvent] { lock.withLock { events } }
        var all: [StoreChange] {
            allEvents.compactMap { event in if case .changed(let change) = event { change } else { nil } }
        }
        var records: [RecordRef] { all.flatMap { $0.records } }

        /// Waits until `done` holds of what was collected, for `seconds` at most.
        func wait(seconds: Double = 20, until done: ([StoreChange]) -> Bool) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if done(all) { return true }
                Thread.sleep(forTimeInterval: 0.005)
            }
            return done(all)
        }

        /// Waits until `done` holds of the events collected, for `seconds` at most.
        func wait(seconds: Double = 20, untilEvents done: ([StoreEvent]) -> Bool) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if done(allEvents) { return true }
                Thread.sleep(forTimeInterval: 0.005)
            }
            return done(allEvents)
        }

        deinit { observer?.stop() }
    }

    func fileStore(_ directory: TemporaryDirectory, seed: UInt64) throws -> ConcordStore {
        let path = directory.file("store.db")
        let settings = environment(clock: ManualClock(baseMillis), seed: seed)
        return FileManager.default.fileExists(atPath: path)
            ? try ConcordStore.open(at: path, environment: settings) : try ConcordStore.create(at: path, environment: settings)
    }

    @Test func anotherStoreObjectsCommitsAreReportedOnceEach() throws {
        let directory = try TemporaryDirectory()
        let observed = try fileStore(directory, seed: 1)
        let writer = try fileStore(directory, seed: 2)
        let collected = try Collected(observing: observed)
        var ids: [RecordRef] = []
        for index in 0..<200 {
            ids.append(.reminder(try writer.addReminder(ReminderDraft(title: "from the other object \(index)"))))
        }
        #expect(collected.wait { Set($0.flatMap(\.records)) == Set(ids) })
        Thread.sleep(forTimeInterval: 0.2)
        #expect(collected.records.count == ids.count, "each record once")
        #expect(collected.all.allSatisfy { $0.origin == .local })
    }

    /// A merge stopped after logging (its operations pending) is reported once its operations are
    /// applied, not before: a reader that hears of a change sees it.
    @Test func operationsOfAMergeAreReportedOnceApplied() throws {
        let directory = try TemporaryDirectory()
        let store = try fileStore(directory, seed: 1)
        let source = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 9))
        for index in 0..<20 { try source.addNote(NoteDraft(title: "note \(index)")) }
        let operations = try source.allOperations()
        let collected = try Collected(observing: store)

        struct Stop: Error {}
        let merger = try fileStore(directory, seed: 1)
        #expect(throws: Stop.self) {
            try merger.merge(bounds: MergeBatch(operations: 1_000, records: 5), afterEachBatch: { throw Stop() }) { each in
                try operations.forEach(each)
            }
        }
        // The first batch logged everything and applied the first five notes.
        Thread.sleep(forTimeInterval: 0.3)
        let early = Set(collected.records)
        #expect(early.count <= 5)
        for record in early { #expect(try store.note(record.id) != nil) }
        try merger.finishPendingMerge()
        #expect(collected.wait { Set($0.flatMap(\.records)).count == 20 })
        #expect(collected.all.allSatisfy { $0.origin == .merge })
    }

    /// The counter in bytes 8–15 of the side file, little-endian (SPEC.md §9, "The commit bell").
    func bell(_ store: ConcordStore) throws -> UInt64 {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: store.path + "-lock")))
        guard bytes.count == 16 else { return 0 }
        return bytes[8..<16].reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// Each committed write rings once, whichever store object makes it; a refused one does not.
    @Test func eachCommitRingsTheBellOnce() throws {
        let directory = try TemporaryDirectory()
        let store = try fileStore(directory, seed: 1)
        let other = try fileStore(directory, seed: 2)
        let before = try bell(store)
        let id = try store.addReminder(ReminderDraft(title: "one"))
        #expect(try bell(store) == before + 1)
        try other.completeReminder(id)
        #expect(try bell(store) == before + 2)
        #expect(throws: ConcordError.self) { try store.addReminder(ReminderDraft(title: "  ")) }
        #expect(try bell(store) == before + 2)
        #expect(try FileManager.default.attributesOfItem(atPath: store.path + "-lock")[.size] as? Int == 16)
    }

    /// The bell wakes a watch of the side file at once, with no poll in between (`FileWatch` on
    /// this platform's notifications); a commit of another store object rings it.
    @Test func theBellWakesAWatchOfTheSideFile() throws {
        let directory = try TemporaryDirectory()
        let store = try fileStore(directory, seed: 1)
        let rung = DispatchSemaphore(value: 0)
        let watch = try #require(CommitBell.watch(store: store.path, queue: DispatchQueue(label: "test.bell")) { rung.signal() })
        defer { watch.cancel() }
        let other = try fileStore(directory, seed: 2)
        _ = try other.addReminder(ReminderDraft(title: "ring"))
        #expect(rung.wait(timeout: .now() + 10) == .success)
    }

    /// The bell is heard again once its side file was replaced by another (a restored copy of the
    /// store's directory, say): writers ring the new one, which the observer watches anew (SPEC.md
    /// §9, "The commit bell"), rather than hear of commits at its poll only, here a minute later.
    @Test func theBellIsHeardAfterItsSideFileIsReplaced() throws {
        let directory = try TemporaryDirectory()
        let observed = try fileStore(directory, seed: 1)
        let writer = try fileStore(directory, seed: 2)
        let collected = try Collected(observing: observed, pollEvery: .seconds(60))
        let first = try writer.addReminder(ReminderDraft(title: "rung on the first side file"))
        #expect(collected.wait { $0.flatMap(\.records).contains(.reminder(first)) })

        let sideFile = observed.path + "-lock"
        let restored = directory.file("restored-lock")
        try FileManager.default.copyItem(atPath: sideFile, toPath: restored)
        #expect(rename(restored, sideFile) == 0)
        let second = try writer.addReminder(ReminderDraft(title: "rung on the side file put in its place"))
        #expect(collected.wait { $0.flatMap(\.records).contains(.reminder(second)) }, "heard within 20 s, not at the poll")
        #expect(collected.records.count == 2)
    }

    /// Another store object forks the store: the observer says so once, before anything it reads
    /// after, and counts the new id's writes `local` (SPEC.md §7.1).
    @Test func aForkIsReportedOnceAndTheNewIDsWritesAreLocal() throws {
        let directory = try TemporaryDirectory()
        let observed = try fileStore(directory, seed: 1)
        let collected = try Collected(observing: observed, pollEvery: .seconds(60))
        let (forked, former) = try ConcordStore.fork(at: observed.path, environment: environment(clock: ManualClock(baseMillis), seed: 2))
        #expect(former == observed.replicaID)
        #expect(collected.wait(untilEvents: { $0 == [.forked(replica: forked.replicaID, former: former)] }), "\(collected.allEvents)")
        let id = try forked.addReminder(ReminderDraft(title: "by the new id"))
        #expect(collected.wait { $0.flatMap(\.records) == [.reminder(id)] }, "\(collected.allEvents)")
        #expect(collected.all.map(\.origin) == [.local])
        #expect(collected.allEvents.count == 2, "the fork once: \(collected.allEvents)")
    }

    /// A store wiped and created again at its path (its files removed, as `syncctl wipe` does,
    /// then a new one made): the store object opened before refuses writes, which no other
    /// process would find at the path, and its observer says so once and reports nothing of the
    /// new file (SPEC.md §7.1, §9.1).
    @Test func aStoreReplacedAtItsPathIsReportedOnceAndRefusesWrites() throws {
        let directory = try TemporaryDirectory()
        let observed = try fileStore(directory, seed: 1)
        let collected = try Collected(observing: observed, pollEvery: .seconds(60))
        for suffix in ["", "-wal", "-shm", "-lock"] { unlink(observed.path + suffix) }
        let writer = try fileStore(directory, seed: 3)
        try writer.addReminder(ReminderDraft(title: "in the file now at the path"))
        let message = "the store at \(observed.path) was replaced by another file (wiped, restored or moved) since this process opened it; open it again"
        #expect(collected.wait(untilEvents: { $0 == [.replaced(ConcordError(.replaced, message))] }), "\(collected.allEvents)")
        #expect(throws: ConcordError(.replaced, message)) { try observed.addReminder(ReminderDraft(title: "into the file no one finds")) }
        Thread.sleep(forTimeInterval: 0.2)
        #expect(collected.allEvents.count == 1, "said once, then stopped")
    }

    /// A writer that rings no bell (here: its side file cannot be made, so it takes no turns) is
    /// still heard, by the observer's poll of `PRAGMA data_version`.
    @Test func aCommitWithoutTheBellIsFoundByThePoll() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("store.db")
        let store = try ConcordStore.create(at: path, environment: environment(clock: ManualClock(baseMillis), seed: 1))
        // The side file is something this build does not open (a directory): writers take no
        // turns and ring no bell, and the observer cannot watch it.
        try FileManager.default.removeItem(atPath: path + "-lock")
        try FileManager.default.createDirectory(atPath: path + "-lock", withIntermediateDirectories: false)
        let collected = try Collected(observing: store)
        let silent = try ConcordStore.open(at: path, environment: environment(clock: ManualClock(baseMillis), seed: 2))
        let id = try silent.addReminder(ReminderDraft(title: "quietly"))
        #expect(collected.wait { $0.flatMap(\.records) == [.reminder(id)] })
    }

    /// A store closed while its changes are followed: its streams end, and its writing connection,
    /// closing last, checkpoints the WAL into the file (SPEC.md §7.1, "Closing the store").
    @Test(.timeLimit(.minutes(1))) func closingAStoreEndsItsStreamsAndLeavesItsFileWhole() async throws {
        let directory = try TemporaryDirectory()
        let store = try fileStore(directory, seed: 1)
        let changes = store.changes()
        let events = store.events()
        try await store.addReminder(ReminderDraft(title: "before closing"))
        try await store.close()
        for try await _ in changes {}
        for try await _ in events {}
        #expect(!FileManager.default.fileExists(atPath: store.path + "-wal"), "the writing connection closed last")
    }
}
