import Foundation

/// Chunks of values passed from one thread to another through a bounded queue: the giver waits
/// while `depth` chunks wait, the taker while none does. So a large merge works on two cores at
/// once (one thread folds the sorted operations into record states while the other writes them,
/// SPEC.md §5.6), and memory stays bounded by a few chunks.
///
/// The giver ends the queue with `close`, passing its error if it failed: the taker gets every
/// chunk given before, then the error. The taker ends it early with `cancel`: the giver's next
/// `give` returns false, and chunks waiting are dropped.
final class Handoff<Element>: @unchecked Sendable {
    private let condition = NSCondition()
    private let depth: Int
    // Guarded by `condition`.
    private var waiting: [[Element]] = []
    private var ending: Result<Void, any Error>?
    private var cancelled = false

    init(depth: Int = 4) {
        self.depth = max(1, depth)
    }

    /// Queues `chunk`, waiting while the queue is full. Returns false, dropping it, if the taker
    /// cancelled.
    func give(_ chunk: [Element]) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while waiting.count >= depth, !cancelled { condition.wait() }
        guard !cancelled else { return false }
        waiting.append(chunk)
        condition.broadcast()
        return true
    }

    /// Ends the queue: the taker gets what was given, then `nil`, or `error` thrown.
    func close(throwing error: (any Error)? = nil) {
        condition.withLock {
            ending = error.map { .failure($0) } ?? .success(())
            condition.broadcast()
        }
    }

    /// The next chunk, waiting for it; `nil` once the giver closed the queue and every chunk was
    /// taken. Throws the giver's error then, if it closed with one.
    func take() throws -> [Element]? {
        condition.lock()
        defer { condition.unlock() }
        while waiting.isEmpty, ending == nil, !cancelled { condition.wait() }
        if !waiting.isEmpty {
            condition.broadcast()
            return waiting.removeFirst()
        }
        try ending?.get()
        return nil
    }

    /// Stops the giver (its next `give` returns false) and drops what waits.
    func cancel() {
        condition.withLock {
            cancelled = true
            waiting.removeAll()
            condition.broadcast()
        }
    }

    /// Waits until the giver closed the queue (after `cancel`, for a thread that must not outlive
    /// its taker).
    func waitUntilClosed() {
        condition.withLock {
            while ending == nil { condition.wait() }
        }
    }
}

/// Runs `produce` on a thread of its own, ahead of the thread that calls `next`, handing its
/// values over in chunks (`Handoff`): while the caller merges one chunk, the thread decodes the
/// next ones. `produce` is called on that thread only, until it returns nil or throws (its error
/// comes out of `next` after the values produced before it), or until `stop`.
///
/// Call `stop` when done, even after an error: it waits for the thread to leave, so that nothing
/// `produce` holds is used once the caller moves on.
final class Prefetch<Element>: @unchecked Sendable {
    private let handoff: Handoff<Element>
    /// Set on the producing thread only, and cleared there when it ends.
    private var produce: (() throws -> Element?)?
    /// The taker's current chunk, reversed so that taking is `popLast` (a move, not a copy).
    private var current: [Element] = []

    init(chunk: Int = 2048, depth: Int = 4, _ produce: @escaping () throws -> Element?) {
        handoff = Handoff(depth: depth)
        self.produce = produce
        let size = max(1, chunk)
        let thread = Thread { [self] in run(chunk: size) }
        thread.name = "concord.prefetch"
        thread.start()
    }

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

    private func run(chunk size: Int) {
        var chunk: [Element] = []
        chunk.reserveCapacity(size)
        var failure: (any Error)?
        do {
            while let value = try produce!() {
                chunk.append(value)
                guard chunk.count >= size else { continue }
                chunk.reverse()
                guard handoff.give(chunk) else { break }
                chunk = []
                chunk.reserveCapacity(size)
            }
            if !chunk.isEmpty {
                chunk.reverse()
                _ = handoff.give(chunk)
            }
        } catch {
            if !chunk.isEmpty {
                chunk.reverse()
                _ = handoff.give(chunk)
            }
            failure = error
        }
        // Released here, on the thread that used it.
        produce = nil
        handoff.close(throwing: failure)
    }
}
