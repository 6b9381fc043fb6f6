import ConcordCore
import ConcordStore
import Foundation
import Testing

/// Purges in a store file: the content leaves the file and its WAL, byte for byte.
@Suite struct PurgeStoreTests {
    @Test func aPurgeErasesTheRecordFromTheFileAndItsWAL() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.db")
        let store = try ConcordStore.create(at: path, environment: environment(clock: ManualClock(baseMillis), seed: 1))
        let kept = try store.addReminder(ReminderDraft(title: "kept-Q7WX"))
        let id = try store.addReminder(ReminderDraft(title: "secret-title-Z3", notes: "secret-notes-Z3", tags: ["secret-tag-Z3"]))
        // An earlier value, replaced: its bytes were freed, not erased, before secure_delete.
        try store.editReminder(id, ReminderPatch(title: "secret-edited-Z3"))
        try store.tag(.reminder(id), add: ["secret-tag2-Z3"], remove: ["secret-tag-Z3"])
        #expect(!filesHolding("secret-title-Z3", in: [path]).isEmpty)

        try store.purge(.reminder(id))
        for secret in ["secret-title-Z3", "secret-notes-Z3", "secret-tag-Z3", "secret-edited-Z3", "secret-tag2-Z3"] {
            #expect(filesHolding(secret, in: [path]) == [], "\(secret) survives the purge")
        }
        #expect(!filesHolding("kept-Q7WX", in: [path]).isEmpty)
        #expect(try store.reminder(id) == nil)
        #expect(try store.reminders(includeCompleted: true).map(\.id) == [kept])
        #expect(try store.verify().problems == [])
        #expect(try store.holdsPurgedRecords())
        #expect(try store.erasures() == 1)
        // Its operations stay in the log, elided: the log still covers their seqs.
        let operations = try store.allOperations()
        #expect(operations.count == 15)
        #expect(operations.filter { $0.record == .reminder(id) }.allSatisfy { $0.purges })

        // A purged record takes no change; purging it again changes nothing.
        let refusal = #expect(throws: ConcordError.self) { try store.editReminder(id, ReminderPatch(title: "again")) }
        #expect(refusal?.code == .invalidChange)
        #expect(refusal?.message == "reminder \(id.hex) was purged: its content is erased for good")
        try store.purge(.reminder(id))
        #expect(try store.allOperations().count == 15)
        #expect(try store.resolve(id.hex) == .reminder(id))
        try store.close()
    }

    /// An edit made elsewhere before the purge arrived, merged after it, is absorbed: it brings
    /// no content back, in either order, and both stores end with the same dump and no trace.
    @Test func aConcurrentEditIsAbsorbedOnBothSides() throws {
        let directory = try TemporaryDirectory()
        let a = try ConcordStore.create(at: directory.file("a.db"), environment: environment(clock: ManualClock(baseMillis), seed: 1))
        let b = try ConcordStore.create(at: directory.file("b.db"), environment: environment(clock: ManualClock(baseMillis + 5), seed: 2))
        let id = try a.addNote(NoteDraft(title: "diary-AB12", body: "private-body-AB12"))
        try b.merge(try a.allOperations())
        try b.editNote(id, NotePatch(body: "edited-elsewhere-AB12"))
        try b.tag(.note(id), add: ["late-tag-AB12"])
        try a.purge(.note(id))
        try a.merge(try b.allOperations())
        try b.merge(try a.allOperations())
        for (store, name) in [(a, "a.db"), (b, "b.db")] {
            for secret in ["diary-AB12", "private-body-AB12", "edited-elsewhere-AB12", "late-tag-AB12"] {
                #expect(filesHolding(secret, in: [directory.file(name)]) == [], "\(secret) survives in \(name)")
            }
            #expect(try store.note(id) == nil)
            #expect(try store.verify().problems == [])
        }
        #expect(try a.dump() == b.dump())
        #expect(try a.allOperations() == b.allOperations())
        #expect(try a.versionVector() == b.versionVector())
    }

    /// Two replicas purge the same record, each before hearing of the other's purge: each keeps
    /// the other's purge as a purge (never elided), so their copies stay the same and merging
    /// them both ways finds no clash (a store once logged the other's purge elided).
    @Test func twoPurgesOfOneRecordMergeBothWays() throws {
        let directory = try TemporaryDirectory()
        let a = try ConcordStore.create(at: directory.file("a.db"), environment: environment(clock: ManualClock(baseMillis), seed: 1))
        let b = try ConcordStore.create(at: directory.file("b.db"), environment: environment(clock: ManualClock(baseMillis + 5), seed: 2))
        let id = try a.addNote(NoteDraft(title: "twice"))
        try b.merge(try a.allOperations())
        try a.purge(.note(id))
        try b.purge(.note(id))
        for _ in 0..<2 {
            try a.merge(try b.allOperations())
            try b.merge(try a.allOperations())
        }
        #expect(try a.allOperations() == b.allOperations())
        #expect(try a.allOperations().filter { $0.action == .purge }.count == 2)
        #expect(try a.dump() == b.dump())
        for store in [a, b] { #expect(try store.verify().problems == []) }
    }

    /// `purgeAll` purges every record of the kind, deleted ones too, in one transaction; the
    /// other kind stays.
    @Test func purgeAllTakesDeletedRecordsToo() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.db")
        let store = try ConcordStore.create(at: path, environment: environment(clock: ManualClock(baseMillis), seed: 3))
        var ids: [RecordID] = []
        for index in 0..<50 { ids.append(try store.addReminder(ReminderDraft(title: "bulk-\(index)-PA"))) }
        try store.delete(.reminder(ids[0]))
        let note = try store.addNote(NoteDraft(title: "a note stays"))
        #expect(try store.purgeAll(.reminder) == 50)
        #expect(try store.purgeAll(.reminder) == 0)
        #expect(try store.reminders(includeCompleted: true).isEmpty)
        #expect(try store.note(note) != nil)
        #expect(filesHolding("-PA", in: [path]) == [])
        #expect(try store.verify().problems == [])
    }

    /// The elided copy of an operation a store holds in full purges its record there, as the
    /// model does (SPEC.md §5.7): it stands for a purge, which may never come.
    @Test func anElidedCopyOfAnOperationHeldInFullPurgesItsRecord() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("b.db")
        let author = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 1))
        let id = try author.addReminder(ReminderDraft(title: "secret-title-E5"))
        let created = try author.allOperations()
        let store = try ConcordStore.create(at: path, environment: environment(clock: ManualClock(baseMillis), seed: 2))
        try store.merge(created)
        var model = Replica(id: store.replicaID)
        try model.merge(created)
        // Only the elided copy of its title comes: no purge.
        let elided = [created[0].elided]
        #expect(try store.merge(elided).duplicates == 1)
        try model.merge(elided)
        #expect(try store.reminder(id) == nil)
        #expect(try store.dump() == model.dump())
        #expect(try store.allOperations() == model.operations())
        #expect(try store.verify().problems == [])
        #expect(filesHolding("secret-title-E5", in: [path]) == [])
    }
}
