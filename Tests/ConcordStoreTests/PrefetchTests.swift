@testable import ConcordStore
import Foundation
import PropertyBased
import Testing

/// `Prefetch` runs a producer on a thread of its own (a large merge folds the next records there
/// while it writes the current ones): the values come out as produced, the producer's error comes
/// out in its place, and a stopped prefetch never outlives its caller.
@Suite struct PrefetchTests {
    private struct Failure: Error, Equatable {
        let at: Int
    }

    /// A counter the producing thread advances, read from the test's.
    private final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func increment() -> Int { lock.withLock { value += 1; return value } }
        var current: Int { lock.withLock { value } }
    }

    /// Every value, in order, then nil (and nil again); or the values before a failure, then the
    /// failure: for any count, chunk size and queue depth.
    @Test func valuesComeOutInOrderAndAFailureInItsPlace() async {
        await propertyCheck(count: 200, input: Gen.int(in: 0...3000), Gen.int(in: 1...300), Gen.int(in: 1...5), Gen.bool) { count, chunk, depth, fails in
            var produced = 0
            let prefetch = Prefetch(chunk: chunk, depth: depth) { () throws -> Int? in
                guard produced < count else {
                    if fails { throw Failure(at: produced) }
                    return nil
                }
                produced += 1
                return produced
            }
            defer { prefetch.stop() }
            var taken: [Int] = []
            do {
                while let value = try prefetch.next() { taken.append(value) }
                #expect(!fails, "count \(count), chunk \(chunk), depth \(depth)")
                #expect(try prefetch.next() == nil)
            } catch {
                #expect(fails && error as? Failure == Failure(at: count), "count \(count), chunk \(chunk): \(error)")
                // The failure stays: asked again, it is thrown again.
                #expect(throws: Failure.self) { try prefetch.next() }
            }
            #expect(taken == Array(stride(from: 1, through: count, by: 1)), "count \(count), chunk \(chunk), depth \(depth)")
        }
    }

    /// A caller that stops early (its merge failed) stops the producer: `stop` returns once the
    /// thread has left, having produced at most the chunks the queue holds and one more.
    @Test func stoppingEndsTheProducer() throws {
        let calls = Counter()
        let prefetch = Prefetch(chunk: 10, depth: 2) { () -> Int? in calls.increment() }
        #expect(try prefetch.next() == 1)
        prefetch.stop()
        let stopped = calls.current
        #expect(stopped <= 10 * (2 + 2))
        Thread.sleep(forTimeInterval: 0.05)
        #expect(calls.current == stopped)
    }

    /// A producer that is never asked still stops.
    @Test func stoppingBeforeTakingAnything() {
        let calls = Counter()
        let prefetch = Prefetch(chunk: 1, depth: 1) { () -> Int? in calls.increment() }
        prefetch.stop()
        let stopped = calls.current
        Thread.sleep(forTimeInterval: 0.02)
        #expect(calls.current == stopped)
    }
}
