import Foundation
import ConcordCore

/// Wakes the tasks that wait for something named to change: on a relay, the listings that wait
/// for a space to change (SPEC.md §16.3, `wait`) when this process stores or deletes one of its
/// files; on a device, a live sync waiting for its store's next commit (§16.5). A waiter also
/// wakes at its timeout, and when its task is cancelled (the connection closed, the relay
/// stopping).
package final class ChangeBell: Sendable {
    private struct Waiters {
        var bySpace: [String: [UUID: CheckedContinuation<Void, Never>]] = [:]
        /// Waiters cancelled before they were registered: they must not wait at all.
        var cancelled: Set<UUID> = []
        /// How many rings there have been, counted in buckets by a hash of the space's name: a
        /// waiter that read its space before a ring of its bucket that it did not hear (it was
        /// not yet registered) returns at once and reads it again. Not one count for every
        /// space: on a relay where many spaces change, each waiter would then read its space
        /// again at nearly every ring of any other, and the reads would feed on themselves.
        /// Buckets make that rare, in memory that does not grow with the spaces.
        var rings = [UInt64](repeating: 0, count: ChangeBell.buckets)
        /// Rings of every space (`ringAll`).
        var allRings: UInt64 = 0

        func rings(of space: String) -> UInt64 { allRings &+ rings[ChangeBell.bucket(of: space)] }
    }

    private static let buckets = 1024

    private static func bucket(of space: String) -> Int {
        Int(UInt(bitPattern: space.hashValue) % UInt(buckets))
    }

    private let waiters = LockedState(Waiters())

    package init() {}

    /// How many rings of `space` there have been (and of others that share its bucket): read it
    /// before looking at the space, and give it to `wait`.
    package func rings(of space: String) -> UInt64 { waiters.withLock { $0.rings(of: space) } }

    /// Wakes every waiter of `space`.
    package func ring(_ space: String) {
        let woken = waiters.withLock { waiters in
            waiters.rings[Self.bucket(of: space)] &+= 1
            return waiters.bySpace.removeValue(forKey: space) ?? [:]
        }
        for continuation in woken.values { continuation.resume() }
    }

    /// Wakes every waiter, of any space: whatever changed while changes could not be heard.
    package func ringAll() {
        let woken = waiters.withLock { waiters in
            waiters.allRings &+= 1
            defer { waiters.bySpace = [:] }
            return waiters.bySpace.values.flatMap(\.values)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Returns when `space` is rung, `timeout` passes, or the task is cancelled; at once if it
    /// (or a space of its bucket) was rung since `rings` was read. Whether it was rung.
    @discardableResult
    package func wait(for space: String, after rings: UInt64, upTo timeout: Duration) async -> Bool {
        let id = UUID()
        let rung = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let registered = self.waiters.withLock { waiters -> Bool in
                            guard waiters.cancelled.remove(id) == nil, waiters.rings(of: space) == rings else { return false }
                            waiters.bySpace[space, default: [:]][id] = continuation
                            return true
                        }
                        if !registered { continuation.resume() }
                    }
                } onCancel: {
                    let continuation = self.waiters.withLock { waiters -> CheckedContinuation<Void, Never>? in
                        if let continuation = waiters.bySpace[space]?.removeValue(forKey: id) { return continuation }
                        waiters.cancelled.insert(id)
                        return nil
                    }
                    continuation?.resume()
                }
                // Resumed by a ring, or by a cancellation (the timeout's, or the caller's).
                return !Task.isCancelled
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        // A cancellation that came after a ring resumed the waiter left its mark: drop it.
        _ = waiters.withLock { $0.cancelled.remove(id) }
        return rung
    }
}
