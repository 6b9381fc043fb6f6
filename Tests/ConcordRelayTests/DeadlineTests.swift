import ConcordCore
import Foundation
import Testing
@testable import ConcordRelay

/// `withDeadline`, which bounds a back end's request even when the request never ends and does not
/// hear its cancellation (a query to a connection that closed under it). Async tests, not
/// `runOffThePool`: the tasks `withDeadline` starts run on the shared pool, which a test blocking
/// one of its threads to wait would starve.
@Suite struct DeadlineTests {
    @Test func aResultOrAnErrorWithinTheDeadlineIsReturned() async throws {
        #expect(try await withDeadline(.seconds(30), "adding") { 40 + 2 } == 42)
        await #expect(throws: ConcordError(.corrupt, "no")) {
            try await withDeadline(.seconds(30), "failing") { () async throws -> Int in throw ConcordError(.corrupt, "no") }
        }
    }

    /// An operation that never ends, and ignores its cancellation, is abandoned at the deadline.
    @Test func anOperationThatNeverEndsIsAbandonedAtTheDeadline() async throws {
        let never = AsyncStream<Int>.makeStream()
        defer { never.continuation.finish() }
        await #expect(throws: ConcordError(.io, "a query did not end within 0.2 s")) {
            try await withDeadline(.milliseconds(200), "a query") { () async -> Int in
                // Deaf to cancellation: waits on a stream that never yields or finishes.
                await withTaskCancellationHandler {
                    for await value in never.stream { return value }
                    return 0
                } onCancel: {}
            }
        }
    }

    /// Cancelling the caller ends the wait at once, with CancellationError.
    @Test func aCancelledCallerStopsWaiting() async throws {
        let task = Task {
            try await withDeadline(.seconds(60), "a query") { () async throws -> Int in
                try await Task.sleep(for: .seconds(60))
                return 0
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }
}
