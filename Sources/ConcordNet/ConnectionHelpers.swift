import ConcordCore
import ConcordPeer
import ConcordStore
import NIOCore

// The child tasks of a peer connection's task (`PeerConnection`): each does one thing, takes its
// requests from the connection's task in order, and answers with events.

/// A wake-up at a time the connection's task sets (a timeout), rung as `.alarm(kind)`. Each is
/// set again only once it has rung, or for a later time, so one task per kind waits for one time
/// at a time, in order.
struct Alarm {
    enum Kind: CaseIterable, Sendable {
        case handshake, idle, heartbeat, linger
    }

    private let requests: AsyncStream<NIODeadline>.Continuation

    /// An alarm woken by `loop`'s timers (`PeerClock`).
    init(
        _ kind: Kind, clock: any PeerClock, loop: any EventLoop, events: AsyncStream<PeerConnection.Event>.Continuation,
        in group: inout TaskGroup<Void>
    ) {
        let (deadlines, requests) = AsyncStream<NIODeadline>.makeStream()
        self.requests = requests
        group.addTask {
            for await deadline in deadlines {
                // A sleep fails only when the task is cancelled: the connection has closed.
                guard (try? await clock.sleep(until: deadline, on: loop)) != nil else { return }
                events.yield(.alarm(kind))
            }
        }
    }

    /// Rings at `deadline`, after the times set before it have rung (it replaces none).
    func set(_ deadline: NIODeadline) { requests.yield(deadline) }
}

/// Reads the operations the peer lacks from the log, a page (`readChunkOperations`) per request,
/// each page a read of its own through the store's read pool, and answers with `.page`: the last
/// shared operations first (SPEC.md §15.6), then those `since` does not cover, in the log's order,
/// and `[]` once there are no more. The connection asks for the next page as it seals one, so at
/// most two are read ahead, and memory stays bounded whatever the size of the log.
struct LogReader {
    private enum Request {
        case start(since: VersionVector, lastShared: [OperationID])
        case next
    }

    private let requests: AsyncStream<Request>.Continuation

    init(store: ConcordStore, chunk: Int, events: AsyncStream<PeerConnection.Event>.Continuation, in group: inout TaskGroup<Void>) {
        let (stream, requests) = AsyncStream<Request>.makeStream()
        self.requests = requests
        group.addTask {
            var since = VersionVector()
            var lastShared: [OperationID] = []
            var position: OperationID?
            var atEnd = true
            func read() async -> Result<[Op], ConcordError> {
                let page: Result<[Op], ConcordError>
                if !lastShared.isEmpty {
                    let ids = lastShared.prefix(chunk)
                    lastShared.removeFirst(ids.count)
                    // The store holds each (its version vector covers it), and never drops operations.
                    page = await Result.of { () async throws(ConcordError) in
                        try await store.offloadRead { () throws(ConcordError) in
                            var operations: [Op] = []
                            for id in ids { if let operation = try store.operation(id) { operations.append(operation) } }
                            return operations
                        }
                    }
                } else {
                    page = await Result.of { [since, position] () async throws(ConcordError) in
                        try await store.offloadRead { () throws(ConcordError) in try store.operations(since: since, after: position, limit: chunk) }
                    }
                    if case .success(let operations) = page {
                        position = operations.last?.id ?? position
                        atEnd = operations.count < chunk
                    }
                }
                if case .failure = page { atEnd = true }
                return page
            }
            for await request in stream {
                if case .start(let from, let shared) = request {
                    (since, lastShared, position, atEnd) = (from, shared, nil, false)
                }
                var page: Result<[Op], ConcordError> = .success([])
                // Empty only at the end: last shared operations the store no longer finds (it
                // never drops one) leave the page to the log's.
                while !atEnd, case .success(let operations) = page, operations.isEmpty {
                    page = await read()
                }
                events.yield(.page(page))
            }
        }
    }

    /// Reads from the start: the operations `lastShared` names, then those `since` does not cover.
    func start(since: VersionVector, lastShared: [OperationID]) { requests.yield(.start(since: since, lastShared: lastShared)) }

    /// Reads the next page.
    func next() { requests.yield(.next) }
}

/// Follows the store's commits in the live phase: `.committed` for each, or `.cannotFollow` if
/// they can no longer be followed.
struct Follower {
    private let requests: AsyncStream<AsyncThrowingStream<StoreChange, any Error>>.Continuation

    init(events: AsyncStream<PeerConnection.Event>.Continuation, in group: inout TaskGroup<Void>) {
        let (stream, requests) = AsyncStream<AsyncThrowingStream<StoreChange, any Error>>.makeStream()
        self.requests = requests
        group.addTask {
            for await changes in stream {
                do {
                    for try await _ in changes { events.yield(.committed) }
                    // Ended without an error: the store was closed, or the connection's task ended.
                } catch {
                    events.yield(.cannotFollow((error as? ConcordError)?.message ?? String(describing: error)))
                }
            }
        }
    }

    /// Follows `changes` (subscribed by the caller, so that no commit after it is missed).
    func follow(_ changes: AsyncThrowingStream<StoreChange, any Error>) { requests.yield(changes) }
}

/// How far a connection's reader may read ahead of its session (inbound flow control, SPEC.md
/// §15.9): once more than `limit` bytes received wait to be handled, the reader waits until the
/// session has taken them down to half.
final class ReadCredit: Sendable {
    private struct State {
        var pending = 0
        var paused = false
        /// Once the session has ended: the reader reads on, and what it reads is dropped.
        var unlimited = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let limit: Int
    private let state = LockedState(State())

    init(limit: Int) {
        self.limit = limit
    }

    /// Whether the reader waits for the session.
    var isPaused: Bool { state.withLock { $0.paused } }

    /// Counts `count` bytes read; returns once the reader may read on.
    func spend(_ count: Int) async {
        let waits = state.withLock { state in
            state.pending += count
            state.paused = !state.unlimited && state.pending > limit
            return state.paused
        }
        guard waits else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let goOn = state.withLock { state in
                    guard state.paused, !Task.isCancelled else { return true }
                    state.waiter = continuation
                    return false
                }
                if goOn { continuation.resume() }
            }
        } onCancel: {
            resume { $0.paused = false }
        }
    }

    /// The session has taken `count` bytes.
    func release(_ count: Int) {
        resume { state in
            state.pending -= count
            if state.pending <= limit / 2 { state.paused = false }
        }
    }

    /// The reader reads on, whatever waits.
    func lift() {
        resume { state in
            state.unlimited = true
            state.paused = false
        }
    }

    /// Changes the state, and resumes the reader if it waits and need not any more.
    private func resume(_ change: (inout State) -> Void) {
        state.withLock { state -> CheckedContinuation<Void, Never>? in
            change(&state)
            guard !state.paused else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }?.resume()
    }
}

/// The peer's batches as one merge (`MergeInParts`), logged part by part and applied by jobs on
/// the store's queue for writes (`enqueueWrite`), in the order the connection hands them over;
/// each job answers with an event.
final class SessionMerge: @unchecked Sendable {
    // @unchecked Sendable: `merge` and `aPartFailed` are touched only by this object's jobs on the
    // store's queue for writes, which runs one job at a time, in the order they were handed over.
    // The rest is immutable.
    private let store: ConcordStore
    private let keyBytes: [UInt8]
    private var merge: MergeInParts?
    /// A part has failed: those handed over after it are not logged (a clash must stop every batch
    /// after it, and the session has failed in any case).
    private var aPartFailed = false

    /// A merge into `store` of what a peer holding the sync key `keyBytes` sends: each part is
    /// logged only while the store holds that key, checked inside the part's own transaction, so
    /// that a key replaced by another process at any moment stops the next part.
    init(store: ConcordStore, keyBytes: [UInt8]) {
        self.store = store
        self.keyBytes = keyBytes
    }

    /// Logs `prepared` as the next part, and applies it at once if `applyNow` (a push, which shows
    /// in the records as soon as it is held, SPEC.md §15.10 rule 3); answers `.logged`.
    func log(_ prepared: Result<PreparedMerge, ConcordError>, applyNow: Bool, then events: AsyncStream<PeerConnection.Event>.Continuation) {
        store.enqueueWrite { [self] in
            let result =
                aPartFailed
                ? .failure(ConcordError(.local, "not merged: a merge before it failed"))
                : prepared.flatMap { prepared in
                    Result { () throws(ConcordError) in
                        if merge == nil { merge = MergeInParts(into: store, ifSyncKeyIs: keyBytes) }
                        let report = try merge!.log(prepared)
                        // Records never lag more than a merge's logging bound behind the log. The
                        // part is held either way: an apply that fails here is tried again at the
                        // end of the input, which reports it then.
                        if applyNow || merge!.isFull { try? merge!.apply() }
                        return report
                    }
                }
            if case .failure = result { aPartFailed = true }
            events.yield(.logged(result))
        }
    }

    /// Applies what the parts logged to their records, then holds `compacted`, the seqs the peer
    /// sent compacted once it had sent everything (SPEC.md §15.10); answers `.mergeApplied`.
    /// With `heard`, the peer's replica and the vector it sent, it then notes what the peer holds,
    /// for the stable frontier, and `dropped`, where the peer knew removes were dropped as stable
    /// (SPEC.md §5.8).
    func apply(
        then events: AsyncStream<PeerConnection.Event>.Continuation, atEnd: Bool, taking compacted: SeqRanges = SeqRanges(),
        heard: (replica: ReplicaID, holds: VersionVector)? = nil, dropped: VersionVector = VersionVector()
    ) {
        store.enqueueWrite { [self] in
            events.yield(.mergeApplied(Result { () throws(ConcordError) in
                try merge?.apply()
                try store.holdCompacted(compacted, droppingCopiesThrough: dropped)
                if let heard { try store.learn([heard], dropped: dropped) }
            }, atEnd: atEnd))
        }
    }
}

/// Runs the tasks that prefer it (`Task(executorPreference:)`, `addTask(executorPreference:)`,
/// and the child tasks of those) on an event loop's thread, one job at a time, in order: a peer
/// connection's tasks, on their channel's loop, as NIO runs a channel's handlers. They then never
/// wait for the threads that the process's tasks share, however many of them an app or a test
/// blocks; and they never block the loop, since store work runs on the store's queues.
final class EventLoopTaskExecutor: TaskExecutor {
    private let loop: any EventLoop

    init(_ loop: any EventLoop) {
        self.loop = loop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

extension Result where Failure == ConcordError {
    /// The value `body` returns, or the error it throws.
    static func of(_ body: () async throws(ConcordError) -> Success) async -> Self {
        do {
            return .success(try await body())
        } catch {
            return .failure(error)
        }
    }
}
