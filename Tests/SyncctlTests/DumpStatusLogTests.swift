import Foundation
import Testing

@Suite(.waitsForProcesses) struct DumpStatusLogTests {
    @Test func dumpIsCanonicalJSON() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let tricky = "Quote \" backslash \\ tab \t newline \n slash / é 🎉 \u{7F} end"
        let reminder = try store.addReminder(tricky, "--notes", "line1\r\nline2", "--tag", "zeta", "--tag", "Alpha", "--tag", "ä",
                                             "--due", "2027-01-01T00:00:00Z", "--priority", "low", "--repeat", "weekly")
        let note = try store.addNote("note \u{1}", "--body", "body\u{1F}", "--pinned")
        let second = try store.addReminder("second")
        try store.ok("reminder", "delete", second)

        let result = try store.run("dump")
        #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
        #expect(result.stdoutLines.count == 1, "the dump is one line")
        let dump = result.out
        let parsed = try OrderedJSON.parse(dump)
        #expect(parsed.canonical == dump, "dump must be canonical:\n\(dump)\nvs\n\(parsed.canonical)")
        #expect(parsed.keys == ["format", "records", "version"])
        #expect(parsed["format"] == .string("concord-dump"))
        #expect(parsed["version"] == .number("1"))

        let records = parsed["records"]?.items ?? []
        let ids = records.compactMap { $0["id"]?.stringValue }
        #expect(ids.count == 3)
        #expect(ids == ids.sorted(), "records are in id order")
        #expect(Set(ids) == [reminder, note, second])
        for record in records {
            let kind = record["kind"]?.stringValue
            #expect(Set(record.keys) == (kind == "note" ? noteKeys : reminderKeys), "keys of \(record.canonical)")
        }
        let trickyRecord = try #require(records.first { $0["id"]?.stringValue == reminder })
        #expect(trickyRecord["title"] == .string(tricky), "strings survive the round trip")
        #expect(trickyRecord["tags"] == .array([.string("Alpha"), .string("zeta"), .string("ä")]), "tags in UTF-8 byte order")
        #expect(trickyRecord["repeat"] == .string("weekly"))
        #expect(dump.contains(#"tab \u0009 newline \u000a"#), "control characters are written as \\u00XX")
        #expect(dump.contains("slash / é 🎉"), "no other escaping")
        #expect(records.first { $0["id"]?.stringValue == second }?["deleted"] == .bool(true), "the dump includes deleted records")

        // JSONSerialization reads it too, and another dump is byte-identical.
        let object = try jsonObject(dump)
        #expect((object["records"] as? [Any])?.count == 3)
        #expect(try store.dump() == dump)
    }

    @Test func statusTextAndJSON() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore(replicaName: "desk")
        let replica = try #require(try store.status().string("replica"))
        _ = try store.addReminder("open one")
        let done = try store.addReminder("done one")
        let gone = try store.addReminder("gone one")
        _ = try store.addNote("live note")
        let deadNote = try store.addNote("dead note")
        try store.ok("reminder", "complete", done)
        try store.ok("reminder", "delete", gone)
        try store.ok("note", "delete", deadNote)

        let status = try store.status()
        for key in ["replica", "name", "store", "schemaVersion", "reminders", "notes", "operations", "versionVector"] {
            #expect(status[key] != nil, "status --json lacks \(key)")
        }
        #expect(status.string("replica") == replica)
        #expect(status.string("name") == "desk")
        #expect(status.string("store") == store.path)
        #expect(status.int("schemaVersion") == 9)
        let reminders = try #require(status.object("reminders"))
        #expect(reminders.int("open") == 1)
        #expect(reminders.int("completed") == 1)
        #expect(reminders.int("deleted") == 1)
        let notes = try #require(status.object("notes"))
        #expect(notes.int("live") == 1)
        #expect(notes.int("deleted") == 1)
        // 3 reminders x 5 operations, 2 notes x 3, then complete, delete and delete.
        #expect(status.int("operations") == 3 * 5 + 2 * 3 + 3)
        let vector = try #require(status.object("versionVector"))
        #expect(vector.count == 1)
        #expect(vector.int(replica) == status.int("operations"))
        #expect(try OrderedJSON.parse(store.ok("status", "--json")).canonical == store.ok("status", "--json"))

        let text = try store.ok("status").split(separator: "\n").map(String.init)
        #expect(text.contains("replica   \(replica) (desk)"))
        #expect(text.contains("store     \(store.path)"))
        #expect(text.contains("reminders 1 open, 1 completed, 1 deleted"))
        #expect(text.contains("notes     1 live, 1 deleted"))
        #expect(text.contains("log       24 operations"))
        #expect(text.contains { $0.contains(replica) && $0.contains("24") && $0.contains("(this replica)") })
    }

    @Test func logShowsTheNewestOperations() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let replica = try #require(try store.status().string("replica"))
        let first = try store.addReminder("first", "--tag", "a", "--tag", "b")
        let second = try store.addReminder("second", "--tag", "c")
        let note = try store.addNote("third", "--tag", "d")
        try store.ok("reminder", "edit", first, "--title", "renamed \"first\"")
        try store.ok("reminder", "tag", second, "--remove", "c")
        let total = try store.operationCount()
        #expect(total == 7 + 6 + 4 + 1 + 1)

        // Text: one line per operation, newest first.
        let one = try store.ok("log", "--limit", "1").split(separator: "\n")
        #expect(one.count == 1)
        #expect(one.first?.contains("tag -\"c\"") == true, "\(one)")
        let three = try store.ok("log", "--limit", "3").split(separator: "\n").map(String.init)
        #expect(three.count == 3)
        #expect(three[1].contains(#"title = "renamed \"first\"""#), "\(three)")
        #expect(three[1].contains("\(replica.prefix(8)):\(total - 1)"))
        #expect(three[1].contains("reminder …\(first.suffix(8))"))
        #expect(try store.ok("log").split(separator: "\n").count == 19, "the default limit (20) is more than the log holds")
        #expect(try store.ok("log", "--limit", "1000").split(separator: "\n").count == total)

        let json = try jsonArray(store.ok("log", "--json", "--limit", "4"))
        #expect(json.count == 4)
        #expect(json.compactMap { $0.int("seq") } == [total, total - 1, total - 2, total - 3], "newest first")
        for operation in json {
            for key in ["replica", "seq", "timestamp", "time", "kind", "record", "action"] {
                #expect(operation[key] != nil, "log --json lacks \(key): \(operation)")
            }
            #expect(operation.string("replica") == replica)
            #expect(Instant.parse(operation.string("time")) != nil)
        }
        let removal = json[0]
        #expect(removal.string("action") == "removeTag")
        #expect(removal.string("tag") == "c")
        #expect(removal.string("record") == second)
        #expect((removal["observed"] as? [String])?.count == 1)
        let edit = json[1]
        #expect(edit.string("action") == "assign")
        #expect(edit.string("field") == "title")
        #expect(edit.string("value") == "renamed \"first\"")
        #expect(edit.string("kind") == "reminder")
        let tagAdd = json[2]
        #expect(tagAdd.string("action") == "addTag")
        #expect(tagAdd.string("kind") == "note")
        #expect(tagAdd.string("record") == note)
        let timestamps = json.compactMap { $0["timestamp"] as? Int }
        #expect(timestamps == timestamps.sorted(by: >), "timestamps decrease")

        // Many operations: the default shows 20.
        for index in 0..<3 { _ = try store.addReminder("more \(index)") }
        #expect(try store.ok("log").split(separator: "\n").count == 20)
        #expect(try jsonArray(store.ok("log", "--json")).count == 20)
    }

    @Test func verifyReportsASoundStoreAndChangesNothing() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore("a.db")
        _ = try store.addReminder("checked", "--tag", "x")
        let before = try store.bytes()
        let text = try store.run("verify")
        #expect(text.succeeded && text.stderr.isEmpty, "\(text)")
        #expect(text.out == "sound: 1 records, 6 operations", "\(text)")
        let json = try store.run("verify", "--json")
        #expect(json.succeeded, "\(json)")
        #expect(json.out == #"{"operations":6,"pendingOperations":0,"problems":[],"records":1,"sound":true}"#, "\(json)")
        #expect(try store.bytes() == before)
    }
}

/// Points a second implementation needed settled (SPEC.md §10, §11).
@Suite(.waitsForProcesses) struct CommandSpecPointsTests {
    /// `dump` prints the dump's text and exactly one newline.
    @Test func theDumpEndsWithOneNewline() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        try store.addReminder("one")
        let result = try store.run("dump")
        #expect(result.succeeded && result.stdout.hasSuffix("}\n") && !result.stdout.hasSuffix("\n\n"), "\(result)")
    }

    /// `--repeat` takes exactly hourly, daily, weekly and monthly (stored `monthly:D`); anything
    /// else is a bad argument.
    @Test func repeatTakesFourValues() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        for (value, stored) in [("hourly", "hourly"), ("daily", "daily"), ("weekly", "weekly"), ("monthly", "monthly:31")] {
            let id = try store.addReminder("r", "--due", "2027-01-31T09:00:00Z", "--repeat", value)
            #expect(try store.show(id).string("repeat") == stored, "\(value)")
        }
        for value in ["yearly", "Daily", "monthly:3", ""] {
            expectOneLineFailure(try store.run("reminder", "add", "r", "--repeat", value), code: 64)
        }
    }
}

@Suite(.waitsForProcesses) struct VersionTests {
    /// `--version` names the tool's version and every format it reads and writes (SPEC.md §11).
    @Test func versionNamesEveryFormat() throws {
        let sandbox = try Sandbox()
        let result = try sandbox.run(["--version"])
        #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
        #expect(result.stdoutLines == [
            "syncctl 0.1.0", "store schema 9", "bundle format 7, encrypted bundle format 1", "shared folder layout 1",
            "peer protocol 10", "dump format 1",
        ], "\(result)")
    }
}
