import Foundation

/// A value behind a lock: the one lock of the house, for the little state that threads share (a
/// store's observers, a server's sessions, a progress line). Hold it briefly, and never across
/// a wait.
package final class LockedState<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is read and written only inside `withLock`, with `lock` held.
    private var value: Value
    private let lock = NSLock()

    package init(_ value: Value) {
        self.value = value
    }

    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
