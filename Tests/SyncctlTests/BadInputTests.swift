import Foundation
import Testing

/// Bad input: each is refused with a non-zero exit and exactly one line on standard error naming
/// the problem, and leaves the store as it was (same dump, same `status --json`).
@Suite(.waitsForProcesses) struct BadInputTests {
    struct Fixture {
        let sandbox: Sandbox
        let store: Store
        let reminder: String
        let note: String
    }

    func fixture() throws -> Fixture {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let reminder = try store.addReminder("Existing", "--due", "2027-01-01T09:00:00Z", "--tag", "t")
        let note = try store.addNote("Existing note")
        return Fixture(sandbox: sandbox, store: store, reminder: reminder, note: note)
    }

    @Test func unknownIDsAndBadPrefixes() throws {
        let f = try fixture()
        let unknown = unusedPrefix(avoiding: [f.reminder, f.note])
        let unknownFull = unknown + String(f.reminder.dropFirst(4))
        try f.store.expectRefused(["show", unknownFull], mentions: ["no record with id \(unknownFull)"], code: 1)
        try f.store.expectRefused(["reminder", "complete", unknown], mentions: ["no reminder with id \(unknown)"], code: 1)
        try f.store.expectRefused(["reminder", "edit", unknown + "abc", "--title", "x"], mentions: ["no reminder with id"], code: 1)
        try f.store.expectRefused(["note", "delete", unknown], mentions: ["no note with id \(unknown)"], code: 1)
        try f.store.expectRefused(["show", unknown, "--json"], mentions: ["no record with id"], code: 1)

        // Fewer than 4 digits, not hex, or too long: not an id at all.
        let three = String(f.reminder.prefix(3))
        try f.store.expectRefused(["show", three], mentions: ["'\(three)' is not a record id", "at least 4"], code: 1)
        try f.store.expectRefused(["reminder", "delete", three], mentions: ["is not a record id"], code: 1)
        try f.store.expectRefused(["reminder", "complete", "zzzz"], mentions: ["'zzzz' is not a record id"], code: 1)
        try f.store.expectRefused(["note", "edit", "", "--title", "x"], mentions: ["is not a record id"], code: 1)
        try f.store.expectRefused(["show", f.reminder + "0"], mentions: ["is not a record id"], code: 1)
        try f.store.expectRefused(["show", String(f.reminder.prefix(4)) + "-"], mentions: ["is not a record id"], code: 1)
    }

    /// Copies the fixture's note row under each of `ids`, with python's sqlite3.
    func copyNote(_ f: Fixture, as ids: [String]) throws {
        try f.sandbox.python("""
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1])
            source = bytes.fromhex(sys.argv[2])
            for new_id in sys.argv[3:]:
                c.execute("INSERT INTO notes (id, title, body, pinned, deleted, tags, crdt) "
                          "SELECT ?, title, body, pinned, deleted, tags, crdt FROM notes WHERE id = ?",
                          (bytes.fromhex(new_id), source))
            c.commit(); c.close()
            """, [f.store.path, f.note] + ids)
    }

    /// Two note rows are copied under chosen ids that share 4 hex digits not otherwise in use;
    /// the prefix then matches both and must be refused, listing them.
    @Test func anAmbiguousPrefixIsRefusedAndListsTheMatches() throws {
        let f = try fixture()
        let shared = unusedPrefix(avoiding: [f.reminder, f.note]) + "00000000"
        let first = shared + String(repeating: "0", count: 19) + "1"
        let second = shared + String(repeating: "0", count: 19) + "2"
        try copyNote(f, as: [first, second])
        #expect(try f.store.show(first).string("id") == first, "the full id still resolves")

        let prefix = String(shared.prefix(4))
        let result = try f.store.expectRefused(["show", prefix], mentions: ["id \(prefix) is ambiguous", first, second], code: 1)
        #expect(!result.stderr.contains(f.note))
        try f.store.expectRefused(["note", "edit", shared.uppercased(), "--title", "x"], mentions: ["is ambiguous", first, second], code: 1)
        try f.store.expectRefused(["note", "delete", String(first.prefix(31))], mentions: ["is ambiguous"], code: 1)
        // A reminder command does not see notes, so the prefix matches nothing there.
        try f.store.expectRefused(["reminder", "complete", prefix], mentions: ["no reminder with id \(prefix)"], code: 1)
        // The same digits, as the suffix of one record and the prefix of another.
        let suffixed = "ffff" + String(repeating: "0", count: 24) + String(shared.prefix(4))
        try copyNote(f, as: [suffixed])
        try f.store.expectRefused(["show", prefix], mentions: ["is ambiguous", first, second, suffixed], code: 1)
    }

    /// A prefix that matches 15 records lists the first 10 and says how many more there are.
    @Test func anAmbiguousPrefixOfManyRecordsSaysHowManyMore() throws {
        let f = try fixture()
        let shared = unusedPrefix(avoiding: [f.reminder, f.note]) + "00000000"
        let ids = (1...15).map { shared + String(format: "%020x", $0) }
        try copyNote(f, as: ids)
        let prefix = String(shared.prefix(4))
        let result = try f.store.expectRefused(["show", prefix], mentions: ["id \(prefix) is ambiguous", ids[0], ids[9], " and 5 more"], code: 1)
        #expect(!result.stderr.contains(ids[10]), "\(result)")
    }

    /// Records made close together share the first digits of their time-ordered ids (SPEC.md §2);
    /// their last digits name them, in either case, and a suffix that ends two ids is refused.
    @Test func aUniqueSuffixNamesARecord() throws {
        let f = try fixture()
        for length in [4, 8, 31] {
            let suffix = String(f.reminder.suffix(length))
            guard !f.note.hasSuffix(suffix), !f.note.hasPrefix(suffix), !f.reminder.hasPrefix(suffix) else { continue }
            #expect(try f.store.show(suffix).string("id") == f.reminder)
            #expect(try f.store.show(suffix.uppercased()).string("id") == f.reminder)
        }
        let noteSuffix = String(f.note.suffix(6))
        try f.store.expectRefused(["reminder", "complete", noteSuffix], mentions: ["no reminder with id \(noteSuffix)"], code: 1)
        let ending = String(f.reminder.suffix(4))
        let twin = String(f.note.prefix(28)) + ending
        try copyNote(f, as: [twin])
        try f.store.expectRefused(["show", ending], mentions: ["id \(ending) is ambiguous", f.reminder, twin], code: 1)
    }

    /// `SYNCCTL_MERGE_BATCH` is OPERATIONS or OPERATIONS,RECORDS, positive whole numbers; a
    /// valid one changes only how a merge commits, not what it merges (SPEC.md §5.6).
    @Test func mergeBatchFromTheEnvironment() throws {
        let f = try fixture()
        for value in ["0", "-5", "ten", "100,", ",100", "1,2,3", "100,0", "1.5"] {
            try f.store.expectRefused(
                ["reminder", "add", "x"], mentions: ["SYNCCTL_MERGE_BATCH", "'\(value)'"], code: 64,
                environment: ["SYNCCTL_MERGE_BATCH": value])
        }
        let source = try f.sandbox.makeStore("source.db")
        for index in 0..<20 { _ = try source.addReminder("reminder \(index)", "--tag", "t\(index % 3)") }
        let bundle = f.sandbox.path("source.cbundle")
        try source.ok("export", bundle)
        let batched = try f.sandbox.makeStore("batched.db")
        let whole = try f.sandbox.makeStore("whole.db")
        let merged = try batched.run("merge", bundle, environment: ["SYNCCTL_MERGE_BATCH": "7,3"])
        let operations = try source.operationCount()
        #expect(merged.succeeded && merged.out == "merged \(operations) new operations from 1 replica", "\(merged)")
        _ = try whole.ok("merge", bundle)
        #expect(try batched.dump() == (try whole.dump()))
        #expect(try batched.operationCount() == operations)
        try batched.expectSound("after a merge in batches of 7 operations")
    }

    @Test func badDates() throws {
        let f = try fixture()
        for date in ["tomorrow", "2027-02-30", "2027-13-01", "2027-1-5", "2027-01-01T25:00Z", "2027-01-01T09:00:00+2", "2027-01-01Tnoon", ""] {
            try f.store.expectRefused(["reminder", "edit", f.reminder, "--due", date], mentions: ["--due", "'\(date)'"], code: 64)
        }
        try f.store.expectRefused(["reminder", "add", "New", "--due", "2027-02-29"], mentions: ["--due", "2027-02-29"], code: 64)
        try f.store.expectRefused(["reminder", "snooze", f.reminder, "--until", "later"], mentions: ["--until", "later"], code: 64)
        try f.store.expectRefused(["reminder", "due", "--at", "now"], mentions: ["--at", "now"], code: 64)
    }

    @Test func emptyTitles() throws {
        let f = try fixture()
        try f.store.expectRefused(["reminder", "add", ""], mentions: ["title is empty"], code: 1)
        try f.store.expectRefused(["reminder", "add", "  \t "], mentions: ["title is empty"], code: 1)
        try f.store.expectRefused(["note", "add", ""], mentions: ["title is empty"], code: 1)
        try f.store.expectRefused(["reminder", "edit", f.reminder, "--title", ""], mentions: ["title is empty"], code: 1)
        try f.store.expectRefused(["reminder", "edit", f.reminder, "--title", " ", "--priority", "high"], mentions: ["title is empty"], code: 1)
        try f.store.expectRefused(["note", "edit", f.note, "--title", "\n"], mentions: ["title is empty"], code: 1)
    }

    @Test func conflictingOrMissingOptions() throws {
        let f = try fixture()
        let id = f.reminder
        try f.store.expectRefused(["reminder", "edit", id, "--due", "2027-05-01", "--no-due"], mentions: ["--due and --no-due"], code: 64)
        try f.store.expectRefused(["reminder", "edit", id, "--repeat", "daily", "--no-repeat"], mentions: ["--repeat and --no-repeat"], code: 64)
        try f.store.expectRefused(["reminder", "edit", id], mentions: ["nothing to change"], code: 64)
        try f.store.expectRefused(["note", "edit", f.note], mentions: ["nothing to change"], code: 64)
        try f.store.expectRefused(["note", "edit", f.note, "--pin", "--unpin"], mentions: ["--pin and --unpin"], code: 64)
        try f.store.expectRefused(["reminder", "tag", id], mentions: ["--add or --remove"], code: 64)
        try f.store.expectRefused(["note", "tag", f.note], mentions: ["--add or --remove"], code: 64)
        try f.store.expectRefused(["reminder", "snooze", id], mentions: ["exactly one of --minutes and --until"], code: 64)
        try f.store.expectRefused(
            ["reminder", "snooze", id, "--minutes", "5", "--until", Instant.format(Date().addingTimeInterval(86_400))],
            mentions: ["exactly one of --minutes and --until"], code: 64)
        try f.store.expectRefused(["reminder", "add"], mentions: ["<title>"], code: 64)
        try f.store.expectRefused(["merge"], mentions: ["<paths>"], code: 64)
        try f.store.expectRefused(["log", "--limit", "0"], mentions: ["--limit"], code: 64)
        try f.store.expectRefused(["log", "--limit", "-3"], mentions: ["--limit"], code: 64)
    }

    @Test func snoozeOutOfRange() throws {
        let f = try fixture()
        let id = f.reminder
        try f.store.expectRefused(["reminder", "snooze", id, "--minutes", "0"], mentions: ["--minutes", "0"], code: 64)
        try f.store.expectRefused(["reminder", "snooze", id, "--minutes", "-5"], mentions: ["--minutes"], code: 64)
        try f.store.expectRefused(["reminder", "snooze", id, "--minutes", "600000"], mentions: ["--minutes", "600000"], code: 64)
        try f.store.expectRefused(["reminder", "snooze", id, "--minutes", "527041"], mentions: ["--minutes", "527041"], code: 64)
        try f.store.expectRefused(["reminder", "snooze", id, "--until", "2020-01-01T00:00:00Z"], mentions: ["snooze must end after now"], code: 1)
        let past = Instant.format(Instant.wholeSecond(Date().addingTimeInterval(-60)))
        try f.store.expectRefused(["reminder", "snooze", id, "--until", past], mentions: ["snooze must end after now"], code: 1)
        let tooFar = Instant.format(Date().addingTimeInterval(367 * 86_400))
        try f.store.expectRefused(["reminder", "snooze", id, "--until", tooFar], mentions: ["at most 366 days"], code: 1)
    }

    @Test func invalidValues() throws {
        let f = try fixture()
        try f.store.expectRefused(["reminder", "add", "x", "--priority", "urgent"], mentions: ["--priority", "urgent"], code: 64)
        try f.store.expectRefused(["reminder", "edit", f.reminder, "--priority", "3"], mentions: ["--priority"], code: 64)
        try f.store.expectRefused(["reminder", "add", "x", "--repeat", "yearly"], mentions: ["--repeat", "yearly"], code: 64)
        try f.store.expectRefused(["reminder", "edit", f.reminder, "--repeat", "monthly:5"], mentions: ["--repeat"], code: 64)
        try f.store.expectRefused(["reminder", "add", "x", "--tag", ""], mentions: ["invalid tag"], code: 1)
        try f.store.expectRefused(["reminder", "tag", f.reminder, "--add", "ok", "--add", "bad\u{7}tag"], mentions: ["invalid tag"], code: 1)
        try f.store.expectRefused(["note", "add", "x", "--tag", "tab\there"], mentions: ["invalid tag"], code: 1)
        try f.store.expectRefused(["reminder", "snooze", f.reminder, "--minutes", "ten"], mentions: ["--minutes", "ten"], code: 64)
    }

    @Test func changesToDeletedRecordsAreRefused() throws {
        let f = try fixture()
        try f.store.ok("reminder", "delete", f.reminder)
        try f.store.ok("note", "delete", f.note)
        try f.store.expectRefused(["reminder", "edit", f.reminder, "--title", "x"], mentions: ["is deleted", "restore it first"], code: 1)
        try f.store.expectRefused(["reminder", "complete", f.reminder], mentions: ["is deleted"], code: 1)
        try f.store.expectRefused(["reminder", "snooze", f.reminder, "--minutes", "5"], mentions: ["is deleted"], code: 1)
        try f.store.expectRefused(["reminder", "tag", f.reminder, "--add", "x"], mentions: ["is deleted"], code: 1)
        try f.store.expectRefused(["note", "edit", f.note, "--body", "x"], mentions: ["is deleted"], code: 1)
        try f.store.expectRefused(["note", "tag", f.note, "--remove", "x"], mentions: ["is deleted"], code: 1)
    }

    @Test func unknownCommandsAndOptions() throws {
        let f = try fixture()
        // Without --store: the root command has no --store option to report first.
        expectOneLineFailure(try f.sandbox.run(["frobnicate"]), mentions: ["frobnicate"], code: 64)
        expectOneLineFailure(try f.sandbox.run(["reminder", "frobnicate"]), mentions: ["frobnicate"], code: 64)
        try f.store.expectRefused(["reminder", "frobnicate"], code: 64)
        try f.store.expectRefused(["reminder", "list", "--colour"], mentions: ["--colour"], code: 64)
        try f.store.expectRefused(["note", "add", "x", "--pin"], mentions: ["--pin"], code: 64)
        try f.store.expectRefused(["reminder", "add", "a", "b"], mentions: ["b"], code: 64)
    }
}

@Suite(.waitsForProcesses) struct ControlCharacterMessageTests {
    /// Every control character a message quotes is escaped, C1 too (SPEC.md §12): U+0085 (NEL)
    /// would break the one line, U+009B (CSI) start a terminal control sequence.
    @Test func messagesEscapeEveryControlCharacter() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        for (tag, shown) in [("a\u{85}b", #""a\u{85}b""#), ("a\u{9B}31mb", #""a\u{9b}31mb""#), ("a\u{7F}b", #""a\u{7f}b""#), ("a\u{01}b", #""a\u{01}b""#)] {
            let result = try store.expectRefused(["reminder", "add", "x", "--tag", tag], mentions: ["invalid tag \(shown)"], code: 1)
            #expect(!result.stderr.unicodeScalars.contains { $0.properties.generalCategory == .control && $0 != "\n" }, "\(result)")
        }
    }
}
