import ConcordCore
import ConcordStore
import Foundation
import Testing

/// Closing a store object while other threads call it: the close waits for the calls under way,
/// later calls fail with `closed`, and none uses a closed connection (which GRDB would crash on).
@Suite struct StoreCloseTests {
    @Test func callsRacingACloseFailCleanly() throws {
        for round in 0..<20 {
            let directory = try TemporaryDirectory()
            let store = try ConcordStore.create(
                at: directory.file("a.db"), environment: environment(clock: ManualClock(baseMillis), seed: UInt64(round)))
            try store.addReminder(ReminderDraft(title: "first"))
            let otherFailures = LockedState<[String]>([])
            let group = DispatchGroup()
            for worker in 0..<4 {
                DispatchQueue.global().async(group: group) {
                    for call in 0..<200 {
                        do {
                            if worker % 2 == 0 {
                                _ = try store.reminders()
                            } else {
                                try store.addReminder(ReminderDraft(title: "w\(worker)-\(call)"))
                            }
                        } catch let error as ConcordError where error.code == .closed {
                            #expect(error.message == "the store at \(directory.file("a.db")) is closed")
                            return
                        } catch {
                            otherFailures.withLock { $0.append("\(error)") }
                            return
                        }
                    }
                }
            }
            usleep(UInt32(round % 5) * 2_000)
            try store.close()
            group.wait()
            #expect(otherFailures.withLock { $0 } == [])
            #expect(throws: ConcordError.self) { try store.reminders() }
            try store.close()
            // What was written before the close is in the file, which another object opens.
            let reopened = try ConcordStore.open(at: directory.file("a.db"))
            #expect(try reopened.verify().problems == [])
            #expect(try reopened.reminders().contains { $0.title == "first" })
        }
    }
}
