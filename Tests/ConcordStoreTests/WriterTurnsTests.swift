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

    /// A store's path in a temporary directory (removed when the test ends).
    private let directory: TemporaryDirectory
    private var storePath: String { directory.file("store.db") }

    init() throws {
        directory = try TemporaryDirectory()
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
        let turns = WriterTurns(store: storePath)
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
        let path = storePath
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

    @Test func aStoreWriteWaitsForTheTurnAnotherWriterHolds() throws {
        let store = try ConcordStore.create(at: storePath)
        let events = Events()
        let holding = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        DispatchQueue.global().async(group: done) {
            try? WriterTurns(store: storePath).withTurn {
                holding.signal()
                usleep(300_000)
                events.record("the other writer let go")
            }
        }
        holding.wait()
        try store.addReminder(ReminderDraft(title: "waited"))
        events.record("the store wrote")
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(events.all == ["the other writer let go", "the store wrote"])
    }

    @Test func theSideFileHasTheStoresPermissionsAndItsResolvedName() throws {
        let store = try ConcordStore.create(at: storePath)
        try store.close()
        chmod(storePath, 0o664)
        unlink(storePath + "-lock")
        let previous = umask(0o022)
        defer { umask(previous) }
        // Named through a symbolic link: the side file is the real store's.
        symlink(storePath, directory.file("link.db"))
        try WriterTurns(store: directory.file("link.db")).withTurn {}
        var status = stat()
        #expect(stat(storePath + "-lock", &status) == 0)
        #expect(status.st_mode & 0o777 == 0o664)
        #expect(access(directory.file("link.db-lock"), F_OK) != 0)
    }

    /// A store named as another store's side file is never opened as one: closing a descriptor of
    /// it would drop the locks of this process's connection to it (SPEC.md §9). Descriptors are
    /// counted in /proc, so the test runs where there is one.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/proc/self/fd")))
    func anotherStoreNamedAsTheSideFileIsLeftUnopened() throws {
        let other = try ConcordStore.create(at: storePath + "-lock")
        let before = try other.dump()
        let turns = WriterTurns(store: storePath)
        func descriptors(of path: String) -> Int {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            return names.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) == path }.count
        }
        let open = descriptors(of: storePath + "-lock")
        var ran = false
        try turns.withTurn {
            ran = true
            #expect(descriptors(of: storePath + "-lock") == open, "no descriptor of the other store was opened")
        }
        #expect(ran)
        #expect(!turns.isWriterWaiting())
        try other.addNote(NoteDraft(title: "still writable"))
        #expect(try other.dump() != before)
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
