import ConcordExchange
import ConcordStore
import Foundation

/// Runs `body` to its end on threads of its own (`BlockingWork`), and waits for it. The tests
/// that wait for processes block the few threads that tasks share (as many as the cores) for
/// minutes; a test's async work run here is never starved by them, so that what it times is
/// the code's, not the queue's.
public func runOffThePool<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let outcome = LockedState<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task(executorPreference: BlockingWork.executor) {
        let result: Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return try outcome.withLock { $0! }.get()
}

/// Where the tests' async work that must not wait for the shared pool runs: each job on a thread
/// of its own.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, *)
public final class BlockingWork: TaskExecutor {
    public static let executor = BlockingWork()

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        Thread.detachNewThread { job.runSynchronously(on: executor) }
    }
}
