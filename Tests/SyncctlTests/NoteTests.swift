import Foundation
import Testing

@Suite(.waitsForProcesses) struct NoteTests {
    @Test func addPrintsOnlyTheIDAndListShowsEveryField() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let result = try store.run("note", "add", "Groceries", "--body", "eggs\nflour", "--tag", "home", "--tag", "food", "--pinned")
        #expect(result.succeeded, "\(result)")
        #expect(result.stderr.isEmpty)
        #expect(result.stdoutLines.count == 1)
        let id = result.out
        #expect(isRecordID(id))

        let notes = try store.notes()
        #expect(notes.count == 1)
        let note = try #require(notes.first)
        #expect(Set(note.keys) == listedNoteKeys)
        #expect(note.string("id") == id)
        #expect(note.string("kind") == "note")
        #expect(note.string("title") == "Groceries")
        #expect(note.string("body") == "eggs\nflour")
        #expect(note.bool("pinned") == true)
        #expect(note.strings("tags") == ["food", "home"])
        #expect(note.bool("deleted") == false)

        let plain = try store.addNote("Plain")
        let plainObject = try store.show(String(plain.suffix(6)))
        #expect(Set(plainObject.keys) == listedNoteKeys)
        #expect(plainObject.string("body") == "")
        #expect(plainObject.bool("pinned") == false)
        #expect(plainObject.strings("tags") == [])

        let text = try store.ok("show", id)
        #expect(text.contains("note      \(id)"))
        #expect(text.contains("pinned    yes"))
        #expect(text.hasSuffix("eggs\nflour"))
    }

    @Test func editTitleBodyAndPin() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let id = try store.addNote("Draft", "--body", "v1")
        let suffix = String(id.suffix(6))
        #expect(try store.ok("note", "edit", suffix, "--title", "Final") == "")
        var note = try store.show(id)
        #expect(note.string("title") == "Final")
        #expect(note.string("body") == "v1")

        try store.ok("note", "edit", suffix, "--body", "v2", "--pin")
        note = try store.show(id)
        #expect(note.string("body") == "v2")
        #expect(note.bool("pinned") == true)
        #expect(note.string("title") == "Final")

        try store.ok("note", "edit", suffix, "--unpin")
        #expect(try store.show(id).bool("pinned") == false)
        try store.ok("note", "edit", suffix, "--body", "")
        #expect(try store.show(id).string("body") == "")
    }

    @Test func listPutsPinnedNotesFirst() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let plain = try [store.addNote("one"), store.addNote("two"), store.addNote("three")]
        let pinned = try store.addNote("pinned one", "--pinned")
        let listed = try store.notes().compactMap { $0.string("id") }
        #expect(listed.first == pinned)
        #expect(listed.dropFirst() == plain.sorted()[...], "then by id")
        let lines = try store.ok("note", "list").split(separator: "\n").map(String.init)
        #expect(lines.count == 4)
        #expect(lines.first?.hasPrefix(pinned) == true)
        #expect(lines.first?.contains("pinned") == true)
        #expect(lines.first?.contains("pinned one") == true)

        try store.ok("note", "edit", plain[1], "--pin")
        let pinnedNow = Set(try store.notes().prefix(2).compactMap { $0.string("id") })
        #expect(pinnedNow == [pinned, plain[1]])
    }

    @Test func tagDeleteAndRestore() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let id = try store.addNote("Ideas", "--tag", "work")
        let other = try store.addNote("Other")
        try store.ok("note", "tag", id, "--add", "later", "--remove", "work")
        #expect(try store.show(id).strings("tags") == ["later"])
        #expect(try store.ok("note", "list").contains("#later"))

        #expect(try store.ok("note", "delete", String(id.suffix(6))) == "")
        #expect(try store.notes().compactMap { $0.string("id") } == [other])
        let all = try store.notes(all: true)
        #expect(all.count == 2)
        #expect(all.first { $0.string("id") == id }?.bool("deleted") == true)
        #expect(try store.ok("note", "list", "--all").split(separator: "\n").first { $0.hasPrefix(id) }?.contains("deleted") == true)
        var status = try store.status()
        #expect(status.object("notes")?.int("live") == 1)
        #expect(status.object("notes")?.int("deleted") == 1)

        try store.ok("note", "restore", id)
        let restored = try store.show(id)
        #expect(restored.bool("deleted") == false)
        #expect(restored.strings("tags") == ["later"])
        #expect(Set(try store.notes().compactMap { $0.string("id") }) == [id, other])
        status = try store.status()
        #expect(status.object("notes")?.int("live") == 2)
        #expect(status.object("notes")?.int("deleted") == 0)

        // Restoring a live note writes nothing.
        let operations = try store.operationCount()
        try store.ok("note", "restore", id)
        #expect(try store.operationCount() == operations)
    }

    @Test func noteAndReminderCommandsOnlyTakeTheirOwnKind() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let note = try store.addNote("A note")
        let reminder = try store.addReminder("A reminder")
        try store.expectRefused(["note", "edit", reminder, "--title", "x"], mentions: ["no note with id \(reminder)"])
        try store.expectRefused(["note", "delete", reminder], mentions: ["no note"])
        try store.expectRefused(["reminder", "complete", note], mentions: ["no reminder with id \(note)"])
        try store.expectRefused(["reminder", "tag", String(note.suffix(8)), "--add", "x"], mentions: ["no reminder"])
        // `show` takes either.
        #expect(try store.show(note).string("kind") == "note")
        #expect(try store.show(reminder).string("kind") == "reminder")
    }
}
