import Foundation
import NIOConcurrencyHelpers

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
        /// How many rings there have been, of any space: a waiter that read its space before a
        /// ring it did not hear (it was not yet registered) returns at once and reads it again.
        var rings: UInt64 = 0
    }

    private let waiters = NIOLockedValueBox(Waiters())

    package init() {}

    /// How many rings there have been: read it before looking at a space, and give it to `wait`.
    package var rings: UInt64 { waiters.withLockedValue { $0.rings } }

    /// Wakes every waiter of `space`.
    package func ring(_ space: String) {
        let woken = waiters.withLockedValue { waiters in
            waiters.rings += 1
            return waiters.bySpace.removeValue(forKey: space) ?? [:]
        }
        for continuation in woken.values { continuation.resume() }
    }

    /// Wakes every waiter, of any space: whatever changed while changes could not be heard.
    package func ringAll() {
        let woken = waiters.withLockedValue { waiters in
            waiters.rings += 1
            defer { waiters.bySpace = [:] }
            return waiters.bySpace.values.flatMap(\.values)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Returns when `space` is rung, `timeout` passes, or the task is cancelled; at once if any
    /// space was rung since `rings` was read.
    package func wait(for space: String, after rings: UInt64, upTo timeout: Duration) async {
        let id = UUID()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: timeout) }
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let registered = self.waiters.withLockedValue { waiters -> Bool in
                            guard waiters.cancelled.remove(id) == nil, waiters.rings == rings else { return false }
                            waiters.bySpace[space, default: [:]][id] = continuation
                            return true
                        }
                        if !registered { continuation.resume() }
                    }
                } onCancel: {
                    let continuation = self.waiters.withLockedValue { waiters -> CheckedContinuation<Void, Never>? in
                        if let continuation = waiters.bySpace[space]?.removeValue(forKey: id) { return continuation }
                        waiters.cancelled.insert(id)
                        return nil
                    }
                    continuation?.resume()
                }
            }
            await group.next()
            group.cancelAll()
        }
        // A cancellation that came after a ring resumed the waiter left its mark: drop it.
        _ = waiters.withLockedValue { $0.cancelled.remove(id) }
    }
}
