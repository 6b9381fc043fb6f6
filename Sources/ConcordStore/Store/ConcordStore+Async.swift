import ConcordCore
import ConcordKeys
import Foundation

/// The async forms of the store's reads, writes and merges: the same names, called with `await`
/// (`try await store.reminders()`), as GRDB offers `read` and `write` in both forms.
///
/// Each runs its synchronous form off the caller's thread, so that an app's tasks never hold one
/// of the few threads they share while SQLite reads or writes: a write may wait for another
/// process's turn (SPEC.md §9), and a merge may take seconds. This is the one way async code runs
/// blocking store work (`offload`). Writes and merges run one after the other on a queue of the
/// store's own (its writing connection serves them in turn anyway), so however many tasks write
/// at once, one thread waits; a folder watch's syncs run there too. Reads run on queues of their
/// own, over the read-only connections of the store's pool, so a read never waits behind a
/// merge. Cancelling the calling task does not stop a call once it has
/// started: a write or a merge ends as it would have, all of it committed or none.
extension ConcordStore {
    /// Runs `body` on `queue` and returns what it returns; by default on a serial queue of its
    /// own. Blocking work runs on serial queues, each of which Dispatch gives a thread when it has
    /// work, and never on Dispatch's global queue: that one has as many threads as the cores, so
    /// that a few calls blocked there (a write waiting for another process's turn) would hold up
    /// every other user of it, in this process, however unrelated.
    package static func offload<T: Sendable, Failure: Error>(
        on queue: DispatchQueue = DispatchQueue(label: "concord.store.call"), _ body: @escaping @Sendable () throws(Failure) -> T
    ) async throws(Failure) -> T {
        // The job lets go of `body`, and of the store it holds, before the caller resumes: a
        // program that ends right after its last call still closes the store as it releases it
        // (the last connection to close checkpoints the WAL into the store file).
        let job = LockedState(Optional(body))
        let result: Result<T, Failure> = await withCheckedContinuation { continuation in
            queue.async {
                // One expression: what the call returns is handed over, not kept by this thread.
                continuation.resume(returning: Result { () throws(Failure) -> T in try job.withLock { $0.take() }!() })
            }
        }
        return try result.get()
    }

    /// Runs `body`, which writes, on this store's queue for async writes and returns what it
    /// returns.
    package func offload<T: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () throws(Failure) -> T
    ) async throws(Failure) -> T {
        try await Self.offload(on: asyncCalls, body)
    }

    /// Runs `job` on this store's queue for async writes, after the jobs handed to it before, and
    /// returns at once: for a caller that keeps its own order of writes (a peer session's parts)
    /// and hears of each one's end from the job itself.
    package func enqueueWrite(_ job: @escaping @Sendable () -> Void) {
        asyncCalls.async(execute: job)
    }

    /// Runs `body`, which only reads, on one of this store's queues for async reads (as many as its
    /// pool has read connections; the least busy) and returns what it returns.
    package func offloadRead<T: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () throws(Failure) -> T
    ) async throws(Failure) -> T {
        try await asyncReads.offload(body)
    }

    // MARK: Opening

    /// Opens the existing store at `path`; the async form of `open(at:readOnly:environment:)`.
    public static func open(at path: String, readOnly: Bool = false, environment: StoreEnvironment = .live) async throws(ConcordError) -> ConcordStore {
        try await offload { () throws(ConcordError) in try open(at: path, readOnly: readOnly, environment: environment) }
    }

    /// Creates a new store at `path`; the async form of `create(at:name:environment:)`.
    public static func create(at path: String, name: String? = nil, environment: StoreEnvironment = .live) async throws(ConcordError) -> ConcordStore {
        try await offload { () throws(ConcordError) in try create(at: path, name: name, environment: environment) }
    }

    /// The async form of `close()`: the store's writing connection checkpoints the WAL into the
    /// file as it closes.
    public func close() async throws(ConcordError) {
        try await offload { () throws(ConcordError) in try self.close() }
    }

    // MARK: Reads

    /// The async form of `conflicts()`.
    public func conflicts() async throws(ConcordError) -> [Conflict] {
        try await offloadRead { () throws(ConcordError) in try self.conflicts() }
    }

    /// The async form of `history(of:)`.
    public func history(of ref: RecordRef) async throws(ConcordError) -> [HistoryEntry]? {
        try await offloadRead { () throws(ConcordError) in try self.history(of: ref) }
    }

    /// The async form of `reminders(includeCompleted:includeDeleted:)`.
    public func reminders(includeCompleted: Bool = false, includeDeleted: Bool = false) async throws(ConcordError) -> [Reminder] {
        try await offloadRead { () throws(ConcordError) in try self.reminders(includeCompleted: includeCompleted, includeDeleted: includeDeleted) }
    }

    /// The async form of `reminder(_:)`.
    public func reminder(_ id: RecordID) async throws(ConcordError) -> Reminder? {
        try await offloadRead { () throws(ConcordError) in try self.reminder(id) }
    }

    /// The async form of `dueReminders(at:)`.
    public func dueReminders(at instant: Date) async throws(ConcordError) -> [Reminder] {
        try await offloadRead { () throws(ConcordError) in try self.dueReminders(at: instant) }
    }

    /// The async form of `notes(includeDeleted:)`.
    public func notes(includeDeleted: Bool = false) async throws(ConcordError) -> [Note] {
        try await offloadRead { () throws(ConcordError) in try self.notes(includeDeleted: includeDeleted) }
    }

    /// The async form of `note(_:)`.
    public func note(_ id: RecordID) async throws(ConcordError) -> Note? {
        try await offloadRead { () throws(ConcordError) in try self.note(id) }
    }

    /// The async form of `versionVector()`.
    public func versionVector() async throws(ConcordError) -> VersionVector {
        try await offloadRead { () throws(ConcordError) in try self.versionVector() }
    }

    /// The async form of `status()`.
    public func status() async throws(ConcordError) -> StoreStatus {
        try await offloadRead { () throws(ConcordError) in try self.status() }
    }

    /// The async form of `syncKey()`.
    public func syncKey() async throws(ConcordError) -> SyncKey? {
        try await offloadRead { () throws(ConcordError) in try self.syncKey() }
    }

    // MARK: Writes

    /// The async form of `perform(_:)`: the changes in one transaction, all or none.
    @discardableResult
    public func perform(_ changes: [(RecordRef, Change)]) async throws(ConcordError) -> [Op] {
        try await offload { () throws(ConcordError) in try self.perform(changes) }
    }

    /// The async form of `perform(_:on:)`.
    @discardableResult
    public func perform(_ change: Change, on ref: RecordRef) async throws(ConcordError) -> [Op] {
        try await offload { () throws(ConcordError) in try self.perform(change, on: ref) }
    }

    /// The async form of `addReminder(_:)`.
    @discardableResult
    public func addReminder(_ draft: ReminderDraft) async throws(ConcordError) -> RecordID {
        try await offload { () throws(ConcordError) in try self.addReminder(draft) }
    }

    /// The async form of `editReminder(_:_:)`.
    public func editReminder(_ id: RecordID, _ patch: ReminderPatch) async throws(ConcordError) {
        try await offload { () throws(ConcordError) in try self.editReminder(id, patch) }
    }

    /// The async form of `completeReminder(_:)`.
    public func completeReminder(_ id: RecordID) async throws(ConcordError) {
        try await offload { () throws(ConcordError) in try self.completeReminder(id) }
    }

    /// The async form of `reopenReminder(_:)`.
    public func reopenReminder(_ id: RecordID) async throws(ConcordError) {
        try await offload { () throws(ConcordError) in try self.reopenReminder(id) }
    }

    /// The async form of `snoozeReminder(_:until:)`.
    public func snoozeReminder(_ id: RecordID, until: Date) async throws(ConcordError) {
        try await offload { () throws(ConcordError) in try self.snoozeReminder(id, until: until) }
    }

    /// The async form of `addNote(_:)`.
    @discardableResult
    public func addNote(_ draft: NoteDraft) async throws(ConcordError) -> RecordID {
        try await offload { () throws(ConcordError) in try self.addNote(draft) }
    }

    /// The async form of `editNote(_:_:)`.
    public func editNote(_ id: RecordID, _ patch: NotePatch) async throws(ConcordError) {
        try await offload { () throws(ConcordError) in try self.editNote(id, patch) }
    }

    /// The async form of `tag(_:add:remove:)`.
    public func tag(_ ref: RecordRef, add: [String] = [], remove: [String] = []) async throws(ConcordError) {
        try await offload { () throws(ConcordError) in try self.tag(ref, add: add, remove: remove) }
    }

    /// The async form of `delete(_:)`.
    public func delete(_ ref: RecordRef) async throws(ConcordError) {
        try await offload { () throws(ConcordError) in try self.delete(ref) }
    }

    /// The async form of `deleteAll(_:)`.
    @discardableResult
    public func deleteAll(_ kind: RecordKind) async throws(ConcordError) -> Int {
        try await offload { () throws(ConcordError) in try self.deleteAll(kind) }
    }

    /// The async form of `restore(_:)`.
    public func restore(_ ref: RecordRef) async throws(ConcordError) {
        try await offload { () throws(ConcordError) in try self.restore(ref) }
    }

    /// The async form of `purge(_:)`.
    public func purge(_ ref: RecordRef) async throws(ConcordError) {
        try await offload { () throws(ConcordError) in try self.purge(ref) }
    }

    /// The async form of `purgeAll(_:)` for one kind.
    @discardableResult
    public func purgeAll(_ kind: RecordKind) async throws(ConcordError) -> Int {
        try await offload { () throws(ConcordError) in try self.purgeAll(kind) }
    }

    /// The async form of `purgeAll(_:)` for several kinds.
    @discardableResult
    public func purgeAll(_ kinds: [RecordKind]) async throws(ConcordError) -> Int {
        try await offload { () throws(ConcordError) in try self.purgeAll(kinds) }
    }

    // MARK: Merges

    /// The async form of `merge(_:)`: the operations in one transaction.
    @discardableResult
    public func merge(_ operations: [Op]) async throws(ConcordError) -> MergeReport {
        try await offload { () throws(ConcordError) in try self.merge(operations) }
    }

    /// The async form of `merge(storeAt:)`.
    @discardableResult
    public func merge(storeAt otherPath: String) async throws(ConcordError) -> MergeReport {
        try await offload { () throws(ConcordError) in try self.merge(storeAt: otherPath) }
    }

    /// The async form of `merge(storesAt:)`.
    @discardableResult
    public func merge(storesAt paths: [String]) async throws(ConcordError) -> MergeReport {
        try await offload { () throws(ConcordError) in try self.merge(storesAt: paths) }
    }

    /// The async form of `replicas()`.
    public func replicas() async throws(ConcordError) -> [ReplicaStanding] {
        try await offloadRead { () throws(ConcordError) in try self.replicas() }
    }

    /// The async form of `retire(_:)`.
    @discardableResult
    public func retire(_ replica: ReplicaID) async throws(ConcordError) -> Bool {
        try await offload { () throws(ConcordError) in try self.retire(replica) }
    }
}

/// A few serial queues for blocking work, each of which Dispatch gives a thread when it has work
/// (unlike its global queue, with as many threads as the cores). Each job goes to the queue with
/// the fewest jobs waiting or running, so that a short read never waits behind a long one while
/// another queue is idle.
struct LeastBusyQueues: Sendable {
    private let queues: [DispatchQueue]
    /// Jobs handed to each queue and not yet finished.
    private let busy: LockedState<[Int]>

    init(count: Int, label: String) {
        queues = (0..<max(1, count)).map { DispatchQueue(label: "\(label).\($0)") }
        busy = LockedState(Array(repeating: 0, count: queues.count))
    }

    /// Runs `body` on the least busy queue (`ConcordStore.offload`).
    func offload<T: Sendable, Failure: Error>(_ body: @escaping @Sendable () throws(Failure) -> T) async throws(Failure) -> T {
        let index = busy.withLock { busy in
            let index = busy.indices.min { busy[$0] < busy[$1] }!
            busy[index] += 1
            return index
        }
        defer { busy.withLock { $0[index] -= 1 } }
        return try await ConcordStore.offload(on: queues[index], body)
    }
}
