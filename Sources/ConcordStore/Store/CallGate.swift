import ConcordCore
import Foundation

/// Lets a store object's calls reach its connections until the object closes, and lets the close
/// wait for the calls under way: a connection that GRDB closes while another thread starts a read
/// or a write on it is used after it was freed (a crash, not an error), so no call may start on a
/// connection once its close began.
final class CallGate: @unchecked Sendable {
    // @unchecked Sendable: `calls` and `closed` are read and written under `condition`'s lock.
    private let condition = NSCondition()
    private var calls = 0
    private var closed = false

    /// Runs `body` unless the gate is closed; a close waits for it to return.
    /// - Throws: `closedError()` once the gate is closed, or what `body` throws.
    func pass<T>(closedError: () -> any Error, _ body: () throws -> T) throws -> T {
        condition.lock()
        guard !closed else {
            condition.unlock()
            throw closedError()
        }
        calls += 1
        condition.unlock()
        defer {
            condition.lock()
            calls -= 1
            if calls == 0 { condition.broadcast() }
            condition.unlock()
        }
        return try body()
    }

    /// Whether `close()` was called.
    var isClosed: Bool {
        condition.lock()
        defer { condition.unlock() }
        return closed
    }

    /// Closes the gate, and waits until no call is under way. Called from inside a call, it
    /// would wait for itself: a store is not closed from one of its own calls.
    /// - Returns: whether this was the gate's first close.
    func close() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let first = !closed
        closed = true
        while calls > 0 { condition.wait() }
        return first
    }
}
