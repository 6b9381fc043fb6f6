import ConcordCore
import ConcordStore
import Foundation
import GRDB
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
        #expect(report.newOperationCount == (try await store.versionVector()[store.replicaID]))
        #expect(try other.dump() == (try store.dump()))
        try await store.close()
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

    /// Reads go through the store's read-only pool: one never waits behind a write or a merge of
    /// the same object, here a write transaction that another thread holds open until the reads
    /// have returned (with one connection, they would wait for it forever).
    @Test(.timeLimit(.minutes(1))) func aReadNeverWaitsBehindAWrite() async throws {
        let directory = try TemporaryDirectory()
        let store = try await ConcordStore.create(at: directory.file("app.db"))
        let rent = try await store.addReminder(ReminderDraft(title: "rent"))
        let (inside, entered) = AsyncStream<Void>.makeStream()
        let reads = DispatchSemaphore(value: 0)
        let write = Task.detached {
            try store.write { db in
                try db.execute(sql: "UPDATE meta SET value = value WHERE key = 'name'")
                entered.yield()
                reads.wait()
            }
        }
        for await _ in inside { break }
        #expect(try await store.reminders().map(\.id) == [rent])
        #expect(try await store.reminder(rent)?.title == "rent")
        #expect(try Self.notesBlocking(store).isEmpty)
        reads.signal()
        try await write.value
    }

    /// A store object reads the file it opened, as it writes it (SPEC.md §9.1): after another
    /// file is renamed over its path, a reader connection opened then refuses that file, and the
    /// read goes through the object's writing connection, which still has the one it opened.
    @Test func aStoreReadsTheFileItOpenedAfterItIsReplaced() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("app.db")
        let store = try await ConcordStore.create(at: path)
        let rent = try await store.addReminder(ReminderDraft(title: "rent"))
        // Everything in the file, none in its WAL: a connection opened on the file put in its
        // place would read that store's records.
        _ = try await DatabaseQueue(path: path).writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        let other = try await ConcordStore.create(at: directory.file("other.db"))
        _ = try await other.addReminder(ReminderDraft(title: "another store's"))
        try await other.close()
        #expect(rename(directory.file("other.db"), path) == 0)
        // As many reads at once as the pool has connections and more: some are new.
        let titles = try await withThrowingTaskGroup(of: [String].self) { group in
            for _ in 0..<8 { group.addTask { try await store.reminders().map(\.title) } }
            return try await group.reduce(into: Set<[String]>()) { $0.insert($1) }
        }
        #expect(titles == [["rent"]])
        #expect(try await store.reminder(rent)?.title == "rent")
        await #expect(throws: ConcordError.self) { try await store.addReminder(ReminderDraft(title: "lost")) }
    }

    /// The same once the store was moved away, and nothing is at its path: a reader connection
    /// opened then cannot open anything, and the read goes through the writing connection.
    @Test func aStoreReadsTheFileItOpenedAfterItIsMovedAway() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("app.db")
        let store = try await ConcordStore.create(at: path)
        let rent = try await store.addReminder(ReminderDraft(title: "rent"))
        #expect(rename(path, directory.file("moved.db")) == 0)
        let titles = try await withThrowingTaskGroup(of: [String].self) { group in
            for _ in 0..<8 { group.addTask { try await store.reminders().map(\.title) } }
            return try await group.reduce(into: Set<[String]>()) { $0.insert($1) }
        }
        #expect(titles == [["rent"]])
        #expect(try await store.reminder(rent)?.title == "rent")
    }

    /// The blocking form of a read, as a widget's timeline provider calls it.
    private static func notesBlocking(_ store: ConcordStore) throws -> [Note] {
        try store.notes()
    }
}
