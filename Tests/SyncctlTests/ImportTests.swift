import Foundation
import Testing

/// `syncctl import FILE` (SPEC.md §10, "Import form"): the two lists printed as JSON are an import
/// file; importing creates the same records, again creates nothing, and a wrong file is refused
/// whole with its line, record and field.
@Suite struct ImportTests {
    @Test func theListsRoundTripAndASecondImportCreatesNothing() throws {
        let sandbox = try Sandbox()
        let source = try sandbox.makeStore("source.db")
        let due = try source.addReminder("with everything", "--notes", "n", "--due", "2026-12-01T09:30:00Z", "--priority", "high", "--tag", "home", "--repeat", "weekly")
        let done = try source.addReminder("done")
        try source.ok("reminder", "complete", done)
        let gone = try source.addReminder("deleted")
        try source.ok("reminder", "delete", gone)
        try source.ok("reminder", "snooze", due, "--until", "2026-12-01T10:00:00Z")
        try source.addNote("a note", "--body", "b", "--tag", "x", "--pinned")
        let file = sandbox.path("export.jsonl")
        let lists = try source.ok("reminder", "list", "--all", "--json") + "\n" + source.ok("note", "list", "--all", "--json") + "\n"
        try sandbox.write(Data(lists.utf8), to: file)

        let target = try sandbox.makeStore("target.db")
        #expect(try target.ok("import", file) == "imported 3 reminders and 1 note")
        #expect(try target.ok("reminder", "list", "--all", "--json") == (try source.ok("reminder", "list", "--all", "--json")))
        #expect(try target.ok("note", "list", "--all", "--json") == (try source.ok("note", "list", "--all", "--json")))
        let operations = try target.operationCount()
        #expect(try target.ok("import", file) == "imported 0 reminders and 0 notes (4 already held)")
        #expect(try target.ok("import", "--json", file) == #"{"alreadyHeld":4,"notes":0,"reminders":0}"#)
        #expect(try target.operationCount() == operations, "a second import writes nothing")
        try target.expectSound("after the imports")
    }

    @Test(arguments: [
        (#"[{"kind":"reminder","title":"ok"},{"kind":"reminder","title":"x","due":"tomorrow"}]"#, "line 1, record 2: due: must be an instant"),
        ("{\"kind\":\"note\",\"title\":\"a\"}\n{\"kind\":\"note\",\"title\":\"t\",\"pinned\":\"yes\"}", "line 2, record 1: pinned: must be true or false"),
        (#"{"kind":"reminder","title":""}"#, "line 1, record 1: the title is empty"),
        (#"{"kind":"task","title":"t"}"#, #"line 1, record 1: kind: must be "reminder" or "note""#),
        (#"{"kind":"reminder"}"#, "line 1, record 1: title: missing"),
        (#"{"kind":"reminder","title":"t","id":"XYZ"}"#, "line 1, record 1: id: must be 32 lower-case hex digits"),
        (#"{"kind":"reminder","title":"t","priority":"urgent"}"#, "line 1, record 1: priority: must be none, low, medium, high or an integer"),
        (#"{"kind":"reminder","title":"t","tags":"home"}"#, "line 1, record 1: tags: must be an array of strings"),
        (#"{"kind":"reminder","title":"t","repeat":"fortnightly"}"#, "line 1, record 1: "),
        ("[{\"kind\":\"note\",\"title\":\"t\"", "line 1: not JSON"),
        ("[1]", "line 1, record 1: not an object"),
    ])
    func aWrongFileIsRefusedWholeAndWritesNothing(text: String, expected: String) throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        try store.addReminder("already here")
        let file = try sandbox.write(Data(text.utf8), to: "bad.json")
        let result = try store.expectRefused(["import", file], mentions: ["bad.json " + expected])
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result)")
    }

    /// The store's own file given as the file to import: refused as not JSON, the store intact
    /// (it is read before the store is opened, so no descriptor of it is closed under SQLite).
    @Test func theStoreItselfIsRefusedAndLeftIntact() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        try store.addReminder("kept")
        try store.expectRefused(["import", store.path], mentions: ["line 1: not JSON"])
        try store.expectSound("after importing the store itself")
    }

    /// A list exported a while ago: its snooze has ended, which changes nothing, and it imports.
    @Test func aSnoozeThatHasEndedIsLeftOut() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let file = try sandbox.write(Data(#"{"id":"0123456789abcdef0123456789abcdef","kind":"reminder","title":"old","snoozedUntil":"2020-01-01T00:00:00.000Z"}"#.utf8), to: "old.json")
        #expect(try store.ok("import", file) == "imported 1 reminder and 0 notes")
        #expect(try store.reminders().first?["snoozedUntil"] is NSNull)
    }
}
