import ConcordCore
import Foundation

/// Threads that keep cores busy beside a benchmark, as other programs on a user's machine do
/// (`bench merge --busy-cores`): each spins until `stop`. Each has a flag of its own, so that the
/// spinners never contend for a lock (a contended lock would put them to sleep, not keep a core).
/// Threads, not tasks: a task that never suspends would hold one of the few threads Swift's
/// cooperative pool has (two on a 2-core machine), which the bench's own awaits need.
final class BusyCores: Sendable {
    private let flags: [LockedState<Bool>]

    init(_ count: Int) {
        flags = (0..<count).map { _ in LockedState(false) }
        for flag in flags {
            Thread.detachNewThread {
                while !flag.withLock({ $0 }) {}
            }
        }
    }

    /// Lets every spinner end; they do within a lock's turn.
    func stop() {
        for flag in flags { flag.withLock { $0 = true } }
    }
}
