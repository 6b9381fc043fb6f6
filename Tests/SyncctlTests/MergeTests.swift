import Foundation
import Testing

/// Two or more replicas converging through `syncctl merge`.
@Suite(.waitsForProcesses) struct MergeTests {
    /// Merges each store into the other and checks they print byte-identical dumps.
    func sync(_ a: Store, _ b: Store, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try a.ok("merge", b.path, sourceLocation: sourceLocation)
        try b.ok("merge", a.path, sourceLocation: sourceLocation)
        #expect(try a.dump(sourceLocation: sourceLocation) == b.dump(sourceLocation: sourceLocation), "replicas diverged", sourceLocation: sourceLocation)
    }

    @Test func twoStoresConvergeAndReportWhatTheyMerged() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let reminderA = try a.addReminder("from A", "--due", "2027-01-01T00:00:00Z", "--tag", "x")
        let noteA = try a.addNote("note from A")
        let reminderB = try b.addReminder("from B")
        let operationsA = try a.operationCount()
        let operationsB = try b.operationCount()

        let intoB = try b.run("merge", a.path)
        #expect(intoB.succeeded && intoB.stderr.isEmpty, "\(intoB)")
        #expect(intoB.out == "merged \(operationsA) new operations from 1 replica")
        let intoA = try a.run("merge", b.path)
        #expect(intoA.out == "merged \(operationsB) new operations from 1 replica")

        let dump = try a.dump()
        #expect(try b.dump() == dump)
        #expect(Set(try a.reminders().compactMap { $0.string("id") }) == [reminderA, reminderB])
        #expect(try b.show(noteA).string("title") == "note from A")
        #expect(try b.show(reminderA).strings("tags") == ["x"])
        let statusA = try a.status()
        let statusB = try b.status()
        #expect(statusA.int("operations") == operationsA + operationsB)
        #expect(statusB.int("operations") == operationsA + operationsB)
        #expect(NSDictionary(dictionary: statusA.object("versionVector") ?? [:]).isEqual(to: statusB.object("versionVector") ?? [:]))
        #expect(statusA.object("versionVector")?.count == 2)
        #expect(statusA.string("replica") != statusB.string("replica"), "a merge keeps each replica's identity")

        // Singular wording.
        try a.ok("reminder", "complete", reminderB)
        #expect(try b.ok("merge", a.path) == "merged 1 new operation from 1 replica")
        #expect(try a.dump() == b.dump())
    }

    @Test func mergingAgainOrIntoItselfChangesNothing() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        _ = try a.addReminder("one")
        _ = try b.addNote("two")
        try sync(a, b)
        let before = try a.snapshot()

        #expect(try a.ok("merge", b.path) == "merged 0 new operations from 0 replicas")
        #expect(try a.ok("merge", a.path) == "merged 0 new operations from 0 replicas")
        #expect(try a.ok("merge", b.path, a.path, b.path) == "merged 0 new operations from 0 replicas")
        #expect(try a.snapshot() == before)

        // A fresh store merged into itself, too.
        let lonely = try sandbox.makeStore("lonely.db")
        _ = try lonely.addReminder("mine")
        let lonelyBefore = try lonely.snapshot()
        #expect(try lonely.ok("merge", lonely.path) == "merged 0 new operations from 0 replicas")
        #expect(try lonely.snapshot() == lonelyBefore)
    }

    @Test func theSourceStoreIsNotModified() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        _ = try a.addReminder("target's own")
        _ = try b.addReminder("source's", "--tag", "t")
        _ = try b.addNote("source note")
        let sourceOperations = try b.operationCount()
        let sourceSnapshot = try b.snapshot()
        // Taken after the last command run on b itself (any command that opens a store for
        // writing rewrites its header on close), so only the merges below can change it.
        let bytes = try b.bytes()

        let merged = try a.run("merge", b.path)
        #expect(merged.succeeded, "\(merged)")
        #expect(merged.out == "merged \(sourceOperations) new operations from 1 replica")
        #expect(try b.bytes() == bytes, "merge must not modify the store it reads from")
        #expect(try b.snapshot() == sourceSnapshot)

        // Also when several stores are merged at once, and when there is nothing new to merge.
        let c = try sandbox.makeStore("c.db")
        _ = try c.addNote("c's note")
        let cBytes = try c.bytes()
        let bBytes = try b.bytes()
        #expect(try a.ok("merge", c.path, b.path) == "merged 3 new operations from 1 replica")
        #expect(try c.bytes() == cBytes)
        #expect(try b.bytes() == bBytes)
    }

    @Test func mergeCountsTheReplicasThatAuthoredNewOperations() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let c = try sandbox.makeStore("c.db")
        let d = try sandbox.makeStore("d.db")
        _ = try a.addReminder("a1")
        _ = try b.addReminder("b1")
        _ = try b.addNote("b2")
        let total = try a.operationCount() + b.operationCount()

        #expect(try c.ok("merge", a.path, b.path) == "merged \(total) new operations from 2 replicas")
        // d learns a's and b's operations through c, which authored none.
        #expect(try d.ok("merge", c.path) == "merged \(total) new operations from 2 replicas")
        #expect(try d.dump() == c.dump())
        // And a catches up from d with b's only.
        #expect(try a.ok("merge", d.path) == "merged \(try b.operationCount()) new operations from 1 replica")
        #expect(try a.dump() == d.dump())
    }

    @Test func completedOnOneReplicaWhileRenamedOnTheOther() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let id = try a.addReminder("Old name", "--due", "2027-01-01T09:00:00Z")
        try b.ok("merge", a.path)

        try a.ok("reminder", "complete", id)
        try b.ok("reminder", "edit", id, "--title", "New name from B")
        try sync(a, b)

        for store in [a, b] {
            let reminder = try store.show(id)
            #expect(reminder.bool("completed") == true, "the completion survives")
            #expect(reminder.string("title") == "New name from B", "the rename survives")
            #expect(try store.reminders().isEmpty)
        }
    }

    @Test func aTagReAddedOnOneReplicaSurvivesItsRemovalOnTheOther() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let id = try a.addReminder("Tagged", "--tag", "urgent", "--tag", "work")
        try b.ok("merge", a.path)

        try a.ok("reminder", "tag", id, "--remove", "urgent", "--remove", "work")
        try b.ok("reminder", "tag", id, "--add", "urgent")
        try sync(a, b)

        for store in [a, b] {
            #expect(try store.show(id).strings("tags") == ["urgent"], "add wins for urgent; work's removal holds")
        }

        // A removal that has seen the add does remove it, everywhere.
        try b.ok("reminder", "tag", id, "--remove", "urgent")
        try sync(a, b)
        #expect(try a.show(id).strings("tags") == [])
    }

    @Test func aNoteDeletedOnOneReplicaWhileEditedOnTheOtherStaysDeleted() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let id = try a.addNote("Shared", "--body", "v1")
        try b.ok("merge", a.path)

        try a.ok("note", "delete", id)
        try b.ok("note", "edit", id, "--body", "v2 from B", "--pin")
        try sync(a, b)

        for store in [a, b] {
            #expect(try store.notes().isEmpty, "the deletion holds")
            let note = try #require(try store.notes(all: true).first)
            #expect(note.bool("deleted") == true)
            #expect(note.string("body") == "v2 from B")
            #expect(try store.status().object("notes")?.int("deleted") == 1)
        }

        try b.ok("note", "restore", id)
        try sync(a, b)
        for store in [a, b] {
            let note = try store.show(id)
            #expect(note.bool("deleted") == false)
            #expect(note.string("body") == "v2 from B", "the edit made while it was deleted elsewhere is kept")
            #expect(note.bool("pinned") == true)
            #expect(try store.notes().count == 1)
        }
    }

    @Test func concurrentRenamesSettleOnOneTitleEverywhere() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let id = try a.addReminder("Original")
        try b.ok("merge", a.path)
        try a.ok("reminder", "edit", id, "--title", "A's title")
        try b.ok("reminder", "edit", id, "--title", "B's title")
        try sync(a, b)
        let title = try a.show(id).string("title")
        #expect(title == "B's title", "B renamed last, so its write wins: \(String(describing: title))")
        #expect(try b.show(id).string("title") == title)

        // A rename made after seeing the other's wins.
        try a.ok("reminder", "edit", id, "--title", "A after merge")
        try sync(a, b)
        #expect(try b.show(id).string("title") == "A after merge")
    }

    @Test func bothReplicasCompletingTheSameOccurrenceMoveItOnce() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let id = try a.addReminder("Daily standup", "--due", "2027-03-01T09:00:00Z", "--repeat", "daily")
        try b.ok("merge", a.path)
        try a.ok("reminder", "complete", id)
        try b.ok("reminder", "complete", id)
        try sync(a, b)
        for store in [a, b] {
            let reminder = try store.show(id)
            #expect(reminder.string("due") == "2027-03-02T09:00:00.000Z")
            #expect(reminder.bool("completed") == false)
        }
    }

    /// A replica whose clock runs far ahead: the merge warns on stderr (still succeeding), and the
    /// receiving replica's clock follows, so its later edits still win.
    @Test func mergingAFarFutureTimestampWarnsAndTheClockFollows() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        // Year 2100 in b's hybrid logical clock (milliseconds << 16).
        let future: Int64 = 4_102_444_800_000 << 16
        try sandbox.python("""
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1]); c.execute("UPDATE meta SET value = ? WHERE key = 'clock'", (int(sys.argv[2]),)); c.commit(); c.close()
            """, [b.path, String(future)])
        let id = try b.addReminder("From the future")
        let futureLog = try jsonArray(b.ok("log", "--json", "--limit", "1"))
        #expect(futureLog.first?.string("time")?.hasPrefix("2100-01-01") == true, "\(futureLog)")

        let merged = try a.run("merge", b.path)
        #expect(merged.succeeded, "\(merged)")
        #expect(merged.out == "merged 5 new operations from 1 replica")
        #expect(merged.stderrLines.count == 1)
        #expect(merged.stderr.hasPrefix("syncctl: warning: "), "\(merged)")
        #expect(merged.stderr.contains("2100-01-01"))

        try a.ok("reminder", "edit", id, "--title", "Edited on A")
        let edit = try jsonArray(a.ok("log", "--json", "--limit", "1"))
        #expect(edit.first?.string("field") == "title")
        #expect((edit.first?["timestamp"] as? Int).map { $0 > Int(future) } == true, "a's clock follows the merged timestamp")
        // b's clock is still far ahead, so b warns too when it takes a's edit.
        let back = try b.run("merge", a.path)
        #expect(back.out == "merged 1 new operation from 1 replica", "\(back)")
        #expect(back.stderr.hasPrefix("syncctl: warning: "))
        #expect(try b.show(id).string("title") == "Edited on A", "a's later edit wins although b stamped the record in 2100")
        #expect(try a.dump() == b.dump())
    }

    @Test func mergeIsAllOrNothing() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        _ = try a.addReminder("mine")
        _ = try b.addReminder("theirs")
        let junk = sandbox.path("junk.db")
        try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 13) }).write(to: URL(fileURLWithPath: junk))
        let bBytes = try b.bytes()

        try a.expectRefused(["merge", b.path, junk], mentions: [junk, "not a Concord store"])
        try a.expectRefused(["merge", junk, b.path], mentions: ["not a Concord store"])
        try a.expectRefused(["merge", b.path, sandbox.path("missing.db")], mentions: ["no store or bundle at"])
        #expect(try b.bytes() == bBytes)
        #expect(try a.reminders().count == 1)
    }
}
