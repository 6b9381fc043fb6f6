import ConcordCore
import Foundation

/// Runs `operation` in a task of its own and returns what it returns, or throws `ConcordError(.io)`
/// once `limit` has passed, whichever comes first, without waiting for the operation to end.
///
/// Why not a task group: a group waits for every child, and the call this bounds may never end.
/// postgres-nio 1.33.2 writes a query to its connection without a promise, so a query written just
/// after the connection closed (the database restarting between two statements of a
/// transaction) is never answered, and its cancellation is not heard either. Such an operation is
/// abandoned here, cancelled; what it holds is a task and a lease of a closed connection.
func withDeadline<Value: Sendable>(
    _ limit: Duration, _ what: @autoclosure () -> String, _ operation: @escaping @Sendable () async throws -> Value
) async throws -> Value {
    let what = what()
    let waiter = LockedState<CheckedContinuation<Value, any Error>?>(nil)
    /// Resumes the waiter once: the first of the operation, the deadline and a cancellation wins.
    @Sendable func finish(_ result: Result<Value, any Error>) {
        waiter.withLock { continuation in
            defer { continuation = nil }
            return continuation
        }?.resume(with: result)
    }
    let tasks = LockedState<[Task<Void, Never>]>([])
    // Whoever wins, the other tasks stop: the timer at once, the operation if it hears it.
    defer { for task in tasks.withLock({ $0 }) { task.cancel() } }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            waiter.withLock { $0 = continuation }
            guard !Task.isCancelled else { return finish(.failure(CancellationError())) }
            let work = Task {
                do { finish(.success(try await operation())) } catch { finish(.failure(error)) }
            }
            let timer = Task {
                guard (try? await Task.sleep(for: limit)) != nil else { return }
                let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
                finish(.failure(ConcordError(.io, "\(what) did not end within \(String(format: "%g", seconds)) s")))
            }
            tasks.withLock { $0 = [work, timer] }
        }
    } onCancel: {
        finish(.failure(CancellationError()))
    }
}
