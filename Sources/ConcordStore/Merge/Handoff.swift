import Foundation

/// Chunks of values passed from a thread that makes them to one that uses them, through a bounded
/// queue: the giver waits while `depth` chunks wait, the taker while none does. It is the one
/// hand-off between threads in Concord, below the store, where everything is synchronous: a large
/// merge folds its sorted operations into record states on one thread while another writes them
/// (`Prefetch`, Benchmarks/README.md). Memory stays bounded by a few chunks. (Above the store,
/// async code hands values over as events: a peer connection's log reader, say.)
///
/// The giver ends the queue with `close`, passing its error if it failed: the taker gets every
/// chunk given before, then the error. The taker ends it early with `cancel`: the giver's next
/// `give` returns false, and chunks waiting are dropped.
///
/// Two counting semaphores do the waiting: `places` counts the free places (the giver waits on
/// it), `ready` counts what the taker may take (a chunk, or the end, which stays). A
/// `LockedState` guards the queue itself, and is never held while waiting.
final class Handoff<Element>: @unchecked Sendable {
    // @unchecked Sendable: the mutable state is read and written only inside `state.withLock`,
    // and the semaphores are thread-safe; the chunks handed over are moved
    // from one thread to the other, never used by both.
    private let places: DispatchSemaphore
    private let ready = DispatchSemaphore(value: 0)
    private let closed = DispatchSemaphore(value: 0)
    private let state = LockedState(Queue())

    private struct Queue {
        var waiting: [[Element]] = []
        var ending: Result<Void, any Error>?
        var cancelled = false
    }

    init(depth: Int = 4) {
        places = DispatchSemaphore(value: max(1, depth))
    }

    /// Runs `produce` on a serial queue of its own, named `name`, as the store runs blocking work
    /// (`ConcordStore.offload`): Dispatch gives it a thread while it runs, and never one of the
    /// threads the process's tasks share, which a producer waiting for its taker would hold.
    /// Closes the queue when `produce` returns (with its error, if it throws). `produce` gives its
    /// chunks with `give`.
    func startProducer(named name: String, _ produce: @escaping (Handoff) throws -> Void) {
        // Safe: `produce`, and what it holds, moves to the producer's queue; this thread never
        // touches it again.
        nonisolated(unsafe) let produce = produce
        DispatchQueue(label: name).async { [self] in
            do {
                try produce(self)
                close()
            } catch {
                close(throwing: error)
            }
        }
    }

    /// Queues `chunk`, waiting while the queue is full. Returns false, dropping it, if the taker
    /// cancelled.
    func give(_ chunk: [Element]) -> Bool {
        places.wait()
        let queued = state.withLock { queue in
            guard !queue.cancelled else { return false }
            queue.waiting.append(chunk)
            return true
        }
        guard queued else {
            // Wake the next give too: after `cancel`, every give returns at once.
            places.signal()
            return false
        }
        ready.signal()
        return true
    }

    /// Ends the queue: the taker gets what was given, then `nil`, or `error` thrown.
    func close(throwing error: (any Error)? = nil) {
        state.withLock { $0.ending = error.map { .failure($0) } ?? .success(()) }
        ready.signal()
        closed.signal()
    }

    /// The next chunk, waiting for it; `nil` once the giver closed the queue and every chunk was
    /// taken. Throws the giver's error then, if it closed with one.
    func take() throws -> [Element]? {
        ready.wait()
        let (chunk, end) = state.withLock { queue -> ([Element]?, Result<Void, any Error>?) in
            if !queue.waiting.isEmpty { return (queue.waiting.removeFirst(), nil) }
            return (nil, queue.ending ?? (queue.cancelled ? .success(()) : nil))
        }
        if let chunk {
            places.signal()
            return chunk
        }
        // The end stays: every later take finds it too.
        ready.signal()
        try end?.get()
        return nil
    }

    /// Stops the giver (its next `give` returns false) and drops what waits.
    func cancel() {
        let dropped = state.withLock { queue in
            queue.cancelled = true
            defer { queue.waiting.removeAll() }
            return queue.waiting.count
        }
        // The places the dropped chunks held, and one to wake a giver that waits for a place.
        for _ in 0...dropped { places.signal() }
        ready.signal()
    }

    /// Waits until the giver closed the queue (after `cancel`, for a thread that must not outlive
    /// its taker).
    func waitUntilClosed() {
        closed.wait()
        closed.signal()
    }
}

/// Runs `produce` on a queue of its own, ahead of the thread that calls `next`, handing its
/// values over in chunks (`Handoff`): while the caller merges one chunk, the thread makes the
/// next ones. `produce` is called on that thread only, until it returns nil or throws (its error
/// comes out of `next` after the values produced before it), or until `stop`.
///
/// Call `stop` when done, even after an error: it waits for the thread to leave, so that nothing
/// `produce` holds is used once the caller moves on.
final class Prefetch<Element> {
    private let handoff: Handoff<Element>
    /// The taker's current chunk, reversed so that taking is `popLast` (a move, not a copy).
    private var current: [Element] = []

    init(chunk: Int = 2048, depth: Int = 4, _ produce: @escaping () throws -> Element?) {
        handoff = Handoff(depth: depth)
        let size = max(1, chunk)
        handoff.startProducer(named: "concord.prefetch") { handoff in
            var chunk: [Element] = []
            chunk.reserveCapacity(size)
            // What was made before a failure is handed over before it.
            defer {
                if !chunk.isEmpty { _ = handoff.give(chunk.reversed()) }
            }
            while let value = try produce() {
                chunk.append(value)
                guard chunk.count >= size else { continue }
                chunk.reverse()
                guard handoff.give(chunk) else { return chunk = [] }
                chunk = []
                chunk.reserveCapacity(size)
            }
        }
    }

    /// A caller that forgot `stop` still leaves no thread behind.
    deinit { stop() }

    /// The next value `produce` returned; nil after its last.
    func next() throws -> Element? {
        if let value = current.popLast() { return value }
        while let chunk = try handoff.take() {
            current = chunk
            if let value = current.popLast() { return value }
        }
        return nil
    }

    /// Stops the thread and waits for it to leave. What it produced and nobody took is dropped.
    func stop() {
        handoff.cancel()
        handoff.waitUntilClosed()
        current = []
    }
}
