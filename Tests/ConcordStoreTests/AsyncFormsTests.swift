import ConcordCore
import ConcordStore
import Foundation
import Testing

/// The async forms of the store's calls (`ConcordStore+Async.swift`) do what the synchronous ones
/// do, from as many tasks at once as an app likes, and report the same errors.
@Suite struct AsyncFormsTests {
    @Test func readsWritesAndMergesInTheirAsyncForms() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("app.db")
        let store = try await ConcordStore.create(at: path, name: "app")
        let due = Date(millisecondsSince1970: 1_800_000_000_000)
        let rent = try await store.addReminder(ReminderDraft(title: "rent", due: due, repeatRule: "monthly"))
        try await store.snoozeReminder(rent, until: due.addingTimeInterval(3600))
        try await store.editReminder(rent, ReminderPatch(title: "pay the rent"))
        try await store.completeReminder(rent)
        let call = try await store.addReminder(ReminderDraft(title: "call"))
        try await store.tag(.reminder(call), add: ["phone"])
        try await store.delete(.reminder(call))
        try await store.restore(.reminder(call))
        let note = try await store.addNote(NoteDraft(title: "ideas"))
        try await store.editNote(note, NotePatch(isPinned: true))

        #expect(try await store.reminder(rent)?.title == "pay the rent")
        #expect(try await store.reminders().map(\.id) == (try store.reminders().map(\.id)))
        #expect(try await store.reminder(call)?.tags == ["phone"])
        #expect(try await store.note(note)?.isPinned == true)
        #expect(try await store.notes().map(\.id) == [note])
        #expect(try await store.dueReminders(at: due.addingTimeInterval(86_400 * 40)).map(\.id) == [rent])

        // Another replica takes it all through a merge of the store file, in its async form.
        let other = try await ConcordStore.create(at: directory.file("other.db"))
        let report = try await other.merge(storeAt: path)
        #expect(report.newOperationCount == (try store.versionVector()[store.replicaID]))
        #expect(try other.dump() == (try store.dump()))
        try store.close()
        let reopened = try await ConcordStore.open(at: path, readOnly: true)
        #expect(try reopened.dump() == (try other.dump()))
    }

    @Test func manyTasksWriteAtOnce() async throws {
        let directory = try TemporaryDirectory()
        let store = try await ConcordStore.create(at: directory.file("app.db"))
        // More tasks than the process has threads for tasks: each write waits off them.
        let ids = try await withThrowingTaskGroup(of: RecordID.self) { group in
            for index in 0..<64 { group.addTask { try await store.addReminder(ReminderDraft(title: "task \(index)")) } }
            return try await group.reduce(into: Set<RecordID>()) { $0.insert($1) }
        }
        #expect(ids.count == 64)
        #expect(Set(try await store.reminders().map(\.id)) == ids)
    }

    @Test func errorsAreTheSynchronousFormsErrors() async throws {
        let directory = try TemporaryDirectory()
        let missing = directory.file("missing.db")
        await #expect(throws: ConcordError.self) { try await ConcordStore.open(at: missing) }
        do {
            _ = try await ConcordStore.open(at: missing)
        } catch {
            #expect(error.code == .missing)
        }
        let store = try await ConcordStore.create(at: directory.file("app.db"))
        let before = try store.dump()
        await #expect(throws: ConcordError.self) { try await store.addReminder(ReminderDraft(title: " ")) }
        #expect(try store.dump() == before)
    }
}
