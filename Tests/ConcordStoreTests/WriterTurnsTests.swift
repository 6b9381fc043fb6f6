@testable import ConcordStore
import Foundation
import Testing

/// Writers take turns at a store (SPEC.md §9, "Writers take turns"): one at a time, a writer that
/// waits goes before the writer it waited for takes its next turn, and a wait ends after the
/// writer's patience.
@Suite struct WriterTurnsTests {
    /// Events in the order they happened, from several threads.
    private final class Events: Sendable {
        private let events = LockedState<[String]>([])
        func record(_ event: String) { events.withLock { $0.append(event) } }
        var all: [String] { events.withLock { $0 } }
    }

    private func storePath() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("turns-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory + "/store.db"
    }

    /// Polls `condition` every millisecond for up to 10 s.
    private func eventually(_ condition: () -> Bool) -> Bool {
        for _ in 0..<10_000 {
            if condition() { return true }
            usleep(1_000)
        }
        return condition()
    }

    @Test func aWaitingWriterGoesBeforeTheHolderTakesItsNextTurn() throws {
        let turns = WriterTurns(store: try storePath())
        let events = Events()
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        DispatchQueue.global().async(group: done) {
            // A long merge: one turn per batch, the next taken at once.
            try? turns.withTurn {
                holding.signal()
                release.wait()
            }
            try? turns.withTurn { events.record("holder's next batch") }
        }
        holding.wait()
        DispatchQueue.global().async(group: done) {
            try? turns.withTurn { events.record("waiting writer") }
        }
        #expect(eventually { turns.isWriterWaiting() }, "the second writer waits at the door")
        #expect(events.all.isEmpty, "nobody wrote while the holder had its turn")
        release.signal()
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(events.all == ["waiting writer", "holder's next batch"])
    }

    @Test func aWriterGivesUpAfterItsPatienceAndLeavesNoLockBehind() throws {
        let path = try storePath()
        let holder = WriterTurns(store: path)
        let impatient = WriterTurns(store: path, patience: .milliseconds(200))
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        DispatchQueue.global().async(group: done) {
            try? holder.withTurn {
                holding.signal()
                release.wait()
            }
        }
        holding.wait()
        let start = ContinuousClock.now
        #expect(throws: TurnTimedOut.self) { try impatient.withTurn { Issue.record("ran without its turn") } }
        #expect(ContinuousClock.now - start < .seconds(10))
        release.signal()
        #expect(done.wait(timeout: .now() + 30) == .success)
        // The wait given up let go of what it took once it got it: the next writer gets a turn.
        var ran = false
        try WriterTurns(store: path, patience: .seconds(10)).withTurn { ran = true }
        #expect(ran)
        #expect(eventually { !holder.isWriterWaiting() })
    }

    @Test func withoutALockFileWritersStillRun() throws {
        // A directory that cannot be written: no side file, no turns; SQLite's busy timeout orders
        // the writers.
        let turns = WriterTurns(store: "/proc/no-such-directory/store.db")
        var ran = false
        try turns.withTurn { ran = true }
        #expect(ran)
    }
}
