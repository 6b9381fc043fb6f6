import Foundation
import Testing

/// Runs each test of a suite on threads set apart for tests that wait for processes, as many at a
/// time as there are cores (at least two), and not on the threads that tasks share.
///
/// The tests here are synchronous: each waits, blocking its thread, for the `syncctl` processes
/// it starts, often for seconds and in the soak and kill tests for minutes. On the shared pool,
/// which has as many threads as there are cores (two in CI), two such tests leave no thread for
/// the async tests of the other targets: their servers, clients and deadlines stood still for a
/// minute and more in CI, and failed on time. Here the waits queue among themselves.
struct WaitsForProcesses: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(ProcessWaitThreads.shared) { try await function() }
    }
}

extension Trait where Self == WaitsForProcesses {
    /// The suite's tests run on threads set apart for waiting for processes (`WaitsForProcesses`).
    static var waitsForProcesses: Self { WaitsForProcesses() }
}

/// Room for as many jobs that block as there are cores (at least two): as many of these tests
/// ran at once on the shared pool before, and no more run at once here.
final class ProcessWaitThreads: TaskExecutor {
    static let shared = ProcessWaitThreads()

    private let queue: OperationQueue = {
        let queue = OperationQueue()
        queue.name = "concord.tests.process-waits"
        queue.maxConcurrentOperationCount = max(2, ProcessInfo.processInfo.activeProcessorCount)
        return queue
    }()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.addOperation { job.runSynchronously(on: executor) }
    }
}

