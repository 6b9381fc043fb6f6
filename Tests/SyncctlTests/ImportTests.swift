import Foundation
import Testing

/// `syncctl import FILE` (SPEC.md §10, "Import form"): the two lists printed as JSON are an import
/// file, however the JSON is laid out; importing creates the same records, again creates nothing,
/// and a wrong file is refused whole with its line and column, or its line, record and field.
@Suite(.waitsForProcesses) struct ImportTests {
    @Test func theListsRoundTripAndASecondImportCreatesNothing() throws {
        let sandbox = try Sandbox()
        let source = try sandbox.makeStore("source.db")
        let due = try source.addReminder("with everything", "--notes", "n", "--due", "2026-12-01T09:30:00Z", "--priority", "high", "--tag", "home", "--repeat", "weekly")
        let done = try source.addReminder("done")
        try source.ok("reminder", "complete", done)
        let gone = try source.addReminder("deleted")
        try source.ok("reminder", "delete", gone)
        try source.ok("reminder", "snooze", due, "--minutes", "600")  // from now: a snooze must end in the future
        try source.addNote("a note", "--body", "b", "--tag", "x", "--pinned")
        // Due on the 31st and completed once: due on February 28th, its rule still monthly:31.
        let monthly = try source.addReminder("pay rent", "--due", "2027-01-31T09:00:00Z", "--repeat", "monthly")
        try source.ok("reminder", "complete", monthly)
        #expect(try source.show(monthly).string("repeat") == "monthly:31")
        #expect(try source.show(monthly).string("due") == "2027-02-28T09:00:00.000Z")
        let file = sandbox.path("export.jsonl")
        let lists = try source.ok("reminder", "list", "--all", "--json") + "\n" + source.ok("note", "list", "--all", "--json") + "\n"
        try sandbox.write(Data(lists.utf8), to: file)

        let target = try sandbox.makeStore("target.db")
        #expect(try target.ok("import", file) == "imported 4 reminders and 1 note")
        #expect(try target.ok("reminder", "list", "--all", "--json") == (try source.ok("reminder", "list", "--all", "--json")))
        #expect(try target.ok("note", "list", "--all", "--json") == (try source.ok("note", "list", "--all", "--json")))
        let operations = try target.operationCount()
        #expect(try target.ok("import", file) == "imported 0 reminders and 0 notes (5 already held)")
        #expect(try target.ok("import", "--json", file) == #"{"alreadyHeld":5,"notes":0,"reminders":0,"withoutId":0}"#)
        #expect(try target.operationCount() == operations, "a second import writes nothing")
        try target.expectSound("after the imports")
    }

    @Test(arguments: [
        (#"[{"kind":"reminder","title":"ok"},{"kind":"reminder","title":"x","due":"tomorrow"}]"#, "line 1, record 2: due: must be an instant"),
        ("{\"kind\":\"note\",\"title\":\"a\"}\n{\"kind\":\"note\",\"title\":\"t\",\"pinned\":\"yes\"}", "line 2, record 1: pinned: must be true or false"),
        (#"{"kind":"reminder","title":"t","title":"u"}"#, "line 1, record 1: title: is given twice"),
        (#"{"kind":"reminder","title":"t","due":"0000-12-31T23:59:59.999Z"}"#, "line 1, record 1: due: must be an instant within the years 1 to 9999"),
        (#"{"kind":"task","title":"t"}"#, #"line 1, record 1: kind: must be "reminder" or "note""#),
        (#"{"kind":"reminder"}"#, "line 1, record 1: title: missing"),
        (#"{"kind":"reminder","title":"t","id":"XYZ"}"#, "line 1, record 1: id: must be 32 lower-case hex digits"),
        (#"{"kind":"reminder","title":"t","priority":"urgent"}"#, "line 1, record 1: priority: must be none, low, medium, high or an integer"),
        (#"{"kind":"reminder","title":"t","tags":"home"}"#, "line 1, record 1: tags: must be an array of strings"),
        (#"{"kind":"reminder","title":"t","repeat":"fortnightly"}"#, "line 1, record 1: repeat: unknown repeat rule 'fortnightly'"),
        // A rule a newer version may write: the lists never print one, and a local write writes none.
        (#"{"kind":"reminder","title":"t","repeat":"yearly"}"#, "line 1, record 1: repeat: unknown repeat rule 'yearly'"),
        (#"{"kind":"reminder","title":"t","repeat":"monthly:32"}"#, "line 1, record 1: repeat: unknown repeat rule 'monthly:32'"),
        ("[{\"kind\":\"note\",\"title\":\"t\"", "line 1, column 28: not JSON: the text ends inside an object"),
        ("[1]", "line 1, record 1: not an object"),
        ("[\n  {\"kind\": \"note\", \"title\": \"a\"},\n\n  {\"kind\": \"note\"}\n]", "line 4, record 2: title: missing"),
        ("[\n  {\"kind\": \"note\", \"title\": \"a\"}\n  {\"kind\": \"note\", \"title\": \"b\"}\n]", "line 3, column 3: not JSON: expected ',' or ']', found '{'"),
        ("[{\"kind\":\"note\",\"title\":\"a\"},]", "line 1, column 30: not JSON: expected a value, found ']'"),
        // Columns count characters: é and 😀 are one each.
        ("{\"kind\":\"note\",\n\"title\":\"é😀\" \"body\":\"b\"}", "line 2, column 14: not JSON: expected ',' or '}', found '\"'"),
        ("{\"kind\":\"note\",\"title\":\"a\nb\"}", "line 1, column 26: not JSON: a control character (U+000A) must be written as an escape"),
        ("{\"kind\":\"note\",\"title\":tru}", "line 1, column 24: not JSON: expected true here"),
        ("{\"kind\":\"note\",\"title\":\"\\x\"}", "line 1, column 25: not JSON: \\x is not an escape"),
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
        try store.expectRefused(["import", store.path], mentions: ["line 1, column 1: not JSON"])
        try store.expectSound("after importing the store itself")
    }

    /// A list exported a while ago imports as it was listed: its snooze has ended, which changes
    /// nothing, and it is kept as it is; so is one far ahead, which only a merge brings.
    @Test func aSnoozeThatHasEndedImportsAsListed() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let file = try sandbox.write(Data(#"""
            {"id":"0123456789abcdef0123456789abcdef","kind":"reminder","title":"old","snoozedUntil":"2020-01-01T00:00:00.000Z"}
            {"id":"0123456789abcdef0123456789abcdee","kind":"reminder","title":"far","snoozedUntil":"2999-01-01T00:00:00.000Z"}
            """#.utf8), to: "old.json")
        #expect(try store.ok("import", file) == "imported 2 reminders and 0 notes")
        let snoozes = try store.reminders().map { $0.string("snoozedUntil") }
        #expect(snoozes == ["2999-01-01T00:00:00.000Z", "2020-01-01T00:00:00.000Z"], "\(snoozes)")
    }

    /// Any JSON text that holds the lists imports: pretty-printed (Foundation escapes `/` as
    /// `\/`), values one after another with no white space between them, JSON Lines of objects
    /// with CRLF line ends, tabs, a byte order mark.
    @Test func theListsImportWhateverTheLayoutOfTheirJSON() throws {
        let sandbox = try Sandbox()
        let source = try sandbox.makeStore("source.db")
        try source.addReminder("a/b \"quoted\" caf\u{E9} \u{1F600}", "--notes", "line\nbreak\ttab", "--tag", "home", "--due", "2026-12-01T09:30:00Z")
        try source.addReminder("second", "--priority", "low")
        try source.addNote("a note", "--body", "\u{1}control", "--pinned")
        let reminders = try source.ok("reminder", "list", "--all", "--json")
        let notes = try source.ok("note", "list", "--all", "--json")
        let objects = try jsonArray(reminders) + jsonArray(notes)
        let pretty = try JSONSerialization.data(withJSONObject: try jsonArray(reminders), options: [.prettyPrinted])
        #expect(pretty.contains(Data("\\/".utf8)) && pretty.contains(Data("\n  ".utf8)))
        let lines = try objects.map { String(decoding: try JSONSerialization.data(withJSONObject: $0), as: UTF8.self) }
        let layouts: [(String, Data)] = [
            ("pretty", pretty + Data("\n".utf8) + (try JSONSerialization.data(withJSONObject: try jsonArray(notes), options: [.prettyPrinted]))),
            ("run together", Data((reminders + notes).utf8)),
            ("JSON Lines, CRLF", Data((lines.joined(separator: "\r\n") + "\r\n").utf8)),
            ("tabs and a byte order mark", Data([0xEF, 0xBB, 0xBF]) + Data(("\t" + reminders + "\t\n\t" + notes + "\t").utf8)),
        ]
        for (layout, data) in layouts {
            let target = try sandbox.makeStore("\(layout).db")
            let file = try sandbox.write(data, to: "\(layout).json")
            #expect(try target.ok("import", file) == "imported 2 reminders and 1 note", "\(layout)")
            #expect(try target.ok("reminder", "list", "--all", "--json") == reminders, "\(layout)")
            #expect(try target.ok("note", "list", "--all", "--json") == notes, "\(layout)")
        }
    }

    /// `import -` and `import /dev/stdin` read standard input, as `key import` does.
    @Test func standardInputImports() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let first = try runWithInput(sandbox, ["import", "-", "--store", store.path], input: #"[{"id":"0123456789abcdef0123456789abcdef","kind":"note","title":"piped"}]"#)
        #expect(first.status == 0 && first.stderr.isEmpty, "\(first)")
        #expect(first.stdout == "imported 0 reminders and 1 note\n")
        let second = try runWithInput(sandbox, ["import", "/dev/stdin", "--store", store.path], input: "{\"kind\":\"reminder\",\"title\":\"also piped\"}\n")
        #expect(second.status == 0 && second.stderr.isEmpty, "\(second)")
        #expect(second.stdout.hasPrefix("imported 1 reminder and 0 notes"), "\(second)")
        let refused = try runWithInput(sandbox, ["import", "-", "--store", store.path], input: "[{\"kind\":\"note\"}]")
        #expect(refused.status == 1 && refused.stderr == "syncctl: standard input line 1, record 1: title: missing\n", "\(refused)")
        #expect(try store.notes().map { $0.string("title") } == ["piped"])
    }

    /// A record id names one record whatever its kind: a note imported under a reminder's id is
    /// refused, naming the id and both kinds, and nothing of the file is written; so is a file
    /// that gives one id to a reminder and a note.
    @Test func anIDHeldUnderTheOtherKindIsRefused() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let reminder = try store.addReminder("held")
        let file = try sandbox.write(Data("""
            {"kind":"note","title":"first, fine"}
            [{"kind":"note","title":"n"},{"id":"\(reminder)","kind":"note","title":"clash"}]
            """.utf8), to: "clash.json")
        try store.expectRefused(["import", file], mentions: ["clash.json line 2, record 2: id: the store holds a reminder with id \(reminder); a note cannot have the same id"])
        let twice = try sandbox.write(Data("""
            {"id":"0123456789abcdef0123456789abcdef","kind":"reminder","title":"r"}
            {"id":"0123456789abcdef0123456789abcdef","kind":"note","title":"n"}
            """.utf8), to: "twice.json")
        try store.expectRefused(["import", twice], mentions: ["twice.json line 2, record 1: id: 0123456789abcdef0123456789abcdef is given twice"])
        // The id still names one record.
        #expect(try store.show(reminder).string("kind") == "reminder")
    }

    /// A record without an id has nothing to be known again by: each import creates it anew, and
    /// the summary says how many there were.
    @Test func recordsWithoutAnIDAreCountedAsNewAtEveryImport() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let file = try sandbox.write(Data("""
            [{"kind":"reminder","title":"no id"},{"kind":"note","title":"no id either"},
             {"id":"0123456789abcdef0123456789abcdef","kind":"reminder","title":"with an id"}]
            """.utf8), to: "some.json")
        #expect(try store.ok("import", file) == "imported 2 reminders and 1 note (2 without an id, created anew at every import)")
        #expect(try store.ok("import", file) == "imported 1 reminder and 1 note (1 already held; 2 without an id, created anew at every import)")
        #expect(try store.ok("import", "--json", file) == #"{"alreadyHeld":1,"notes":1,"reminders":1,"withoutId":2}"#)
        #expect(try store.reminders().count == 4)
    }

    /// Two imports of one file at once: each record is created once, and the import that comes
    /// second counts it as held (the records held are read in the transaction that writes).
    @Test func twoImportsOfOneFileAtOnceCreateEachRecordOnce() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let count = 3000
        let records = (0..<count).map { index in
            #"{"id":"\#(String(format: "%032x", 0x1000 + index))","kind":"reminder","title":"record \#(index)","tags":["t\#(index % 7)"]}"#
        }
        let file = try sandbox.write(Data(("[" + records.joined(separator: ",\n") + "]\n").utf8), to: "many.json")
        let path = store.path
        let run = try sandbox.runner()
        let results = ResultBox<RunResult>(2)
        DispatchQueue.concurrentPerform(iterations: 2) { index in
            results.set(index, Result { try run(["import", "--json", file, "--store", path]) })
        }
        var created = 0
        var held = 0
        for case let .success(result)? in results.values {
            #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
            let summary = try jsonObject(result.out)
            created += summary.int("reminders") ?? 0
            held += summary.int("alreadyHeld") ?? 0
        }
        #expect(created == count && held == count, "created \(created), held \(held)")
        #expect(try store.reminders().count == count)
        try store.expectSound("after two imports at once")
    }

    /// An import that is refused after it wrote out some thousands of records writes nothing:
    /// it is one transaction.
    @Test func aRefusalAfterThousandsOfRecordsWritesNothing() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        try store.addReminder("already here")
        let records = (0..<2500).map { #"{"kind":"reminder","title":"record \#($0)"}"# } + [#"{"kind":"reminder","title":"last","due":"soon"}"#]
        let file = try sandbox.write(Data(records.joined(separator: "\n").utf8), to: "late.json")
        try store.expectRefused(["import", file], mentions: ["late.json line 2501, record 1: due: must be an instant"])
    }

    /// What only a merge brings, and the lists print, imports as it is: a record whose title no
    /// replica wrote (listed with an empty one), a tag a local change would refuse, a priority
    /// this version does not name.
    @Test func valuesOnlyAMergeBringsImportAsListed() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let file = try sandbox.write(Data(#"""
            {"id":"0123456789abcdef0123456789abcdef","kind":"reminder","title":"","tags":["","a\u0001b"],"priority":-7}
            {"id":"0123456789abcdef0123456789abcdee","kind":"note","title":"  ","tags":["\u0085"]}
            """#.utf8), to: "odd.json")
        #expect(try store.ok("import", file) == "imported 1 reminder and 1 note")
        let reminder = try #require(try store.reminders().first)
        #expect(reminder.string("title") == "" && reminder.strings("tags") == ["", "a\u{1}b"] && reminder.int("priority") == -7, "\(reminder)")
        #expect(try store.notes().first?.strings("tags") == ["\u{85}"])
    }
}
