import ConcordCore
import ConcordStore
import Foundation
import Testing

/// `merge(_:ifSyncKeyIs:)`: a peer session's batch is applied only while the store holds the key
/// the session authenticated with, checked inside the merge's transaction (SPEC.md §15.1).
@Suite struct SyncKeyMergeTests {
    @Test func aKeyReplacedByAnotherConnectionStopsTheMergeAndWritesNothing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("store.db")
        let clock = ManualClock(baseMillis)
        let store = try ConcordStore.create(at: path, environment: environment(clock: clock, seed: 1))
        let oldKey = [UInt8](repeating: 1, count: 32)
        let newKey = [UInt8](repeating: 2, count: 32)
        try store.setSyncKeyBytes(oldKey)
        let source = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 2))
        try source.addReminder(ReminderDraft(title: "from a peer"))
        let operations = try source.allOperations()

        // Another process (here another connection to the file) replaces the key.
        let other = try ConcordStore.open(at: path, environment: environment(clock: clock, seed: 3))
        try other.setSyncKeyBytes(newKey, replacing: true)
        try other.close()

        let before = try store.dump()
        #expect {
            try store.merge(operations, ifSyncKeyIs: oldKey)
        } throws: { error in
            (error as? ConcordError)?.code == .keyReplaced
        }
        #expect(try store.dump() == before)
        #expect(try store.versionVector()[source.replicaID] == 0)

        let report = try store.merge(operations, ifSyncKeyIs: newKey)
        #expect(report.newOperationCount == operations.count)
        #expect(try store.reminders().map(\.title) == ["from a peer"])
    }
}
