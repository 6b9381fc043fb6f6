import Foundation
import Testing

@Suite(.waitsForProcesses) struct ReminderTests {
    @Test func addPrintsOnlyTheIDAndListShowsEveryField() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let result = try store.run(
            "reminder", "add", "Buy milk", "--notes", "2% fat", "--due", "2027-03-01T10:30:00+01:00",
            "--priority", "high", "--tag", "shop", "--tag", "home", "--repeat", "daily")
        #expect(result.succeeded, "\(result)")
        #expect(result.stderr.isEmpty)
        #expect(result.stdoutLines.count == 1, "add prints only the id: \(result)")
        let id = result.out
        #expect(isRecordID(id))

        let listed = try store.reminders()
        #expect(listed.count == 1)
        let reminder = try #require(listed.first)
        #expect(Set(reminder.keys) == listedReminderKeys)
        #expect(reminder.string("id") == id)
        #expect(reminder.string("kind") == "reminder")
        #expect(reminder.string("title") == "Buy milk")
        #expect(reminder.string("notes") == "2% fat")
        #expect(reminder.string("due") == "2027-03-01T09:30:00.000Z")
        #expect(reminder.string("priority") == "high")
        #expect(reminder.bool("completed") == false)
        #expect(reminder.isNull("completedAt"))
        #expect(reminder.isNull("snoozedUntil"))
        #expect(reminder.string("repeat") == "daily")
        #expect(reminder.strings("tags") == ["home", "shop"], "tags are listed sorted")
        #expect(reminder.bool("deleted") == false)

        // A bare reminder: optional fields are null, priority none, no tags.
        let bare = try store.addReminder("Bare")
        let bareObject = try store.show(bare)
        #expect(Set(bareObject.keys) == listedReminderKeys)
        #expect(bareObject.isNull("notes"))
        #expect(bareObject.isNull("due"))
        #expect(bareObject.isNull("repeat"))
        #expect(bareObject.string("priority") == "none")
        #expect(bareObject.strings("tags") == [])

        // The text list: one line per open reminder with id, state, due, priority, title, tags.
        let text = try store.ok("reminder", "list")
        let line = try #require(text.split(separator: "\n").map(String.init).first { $0.hasPrefix(id) })
        for part in ["open", "2027-03-01T09:30:00.000Z", "high", "Buy milk", "#home #shop"] {
            #expect(line.contains(part), "list line \(String(reflecting: line)) lacks \(part)")
        }
        #expect(text.split(separator: "\n").count == 2)
    }

    @Test func showAcceptsAUniquePrefixOfFourOrMoreDigits() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let id = try store.addReminder("Call Bob", "--notes", "about the car", "--tag", "phone")
        let full = try store.ok("show", id, "--json")
        #expect(try store.ok("show", String(id.prefix(4)), "--json") == full)
        #expect(try store.ok("show", String(id.prefix(9)), "--json") == full)
        #expect(try store.ok("show", id.uppercased(), "--json") == full, "prefixes are case-insensitive")
        let object = try jsonObject(full)
        #expect(object.string("id") == id)
        #expect(object.string("title") == "Call Bob")
        #expect(try store.ok("reminder", "list", "--json") == "[\(full)]", "show --json prints the list entry")

        let text = try store.ok("show", String(id.prefix(6)))
        #expect(text.contains("reminder  \(id)"))
        #expect(text.contains("title     Call Bob"))
        #expect(text.contains("notes     about the car"))
        #expect(text.contains("tags      phone"))
        #expect(text.contains("deleted   no"))
    }

    @Test func editChangesEachField() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let id = try store.addReminder("Old title", "--notes", "old", "--due", "2027-01-01T08:00:00Z", "--priority", "low")
        let prefix = String(id.prefix(5))

        #expect(try store.ok("reminder", "edit", prefix, "--title", "New title") == "", "edit prints nothing")
        #expect(try store.show(id).string("title") == "New title")

        try store.ok("reminder", "edit", prefix, "--notes", "new notes", "--priority", "medium")
        var reminder = try store.show(id)
        #expect(reminder.string("notes") == "new notes")
        #expect(reminder.string("priority") == "medium")
        #expect(reminder.string("title") == "New title", "fields not given stay")
        #expect(reminder.string("due") == "2027-01-01T08:00:00.000Z")

        try store.ok("reminder", "edit", prefix, "--due", "2027-02-03T04:05:06.789Z")
        #expect(try store.show(id).string("due") == "2027-02-03T04:05:06.789Z")
        try store.ok("reminder", "edit", prefix, "--due", "2027-02-04")
        #expect(try store.show(id).string("due") == "2027-02-04T00:00:00.000Z", "a plain date is local midnight (TZ=UTC)")

        try store.ok("reminder", "edit", prefix, "--repeat", "weekly")
        #expect(try store.show(id).string("repeat") == "weekly")

        try store.ok("reminder", "edit", prefix, "--no-due")
        reminder = try store.show(id)
        #expect(reminder.isNull("due"))
        #expect(reminder.string("repeat") == "weekly")

        try store.ok("reminder", "edit", prefix, "--no-repeat", "--priority", "none")
        reminder = try store.show(id)
        #expect(reminder.isNull("repeat"))
        #expect(reminder.string("priority") == "none")
        #expect(reminder.string("notes") == "new notes")
        #expect(reminder.bool("completed") == false)
    }

    @Test func completeAndReopen() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let id = try store.addReminder("Pay rent", "--due", "2027-01-01T09:00:00Z")
        let other = try store.addReminder("Stay open")

        let before = Date()
        #expect(try store.ok("reminder", "complete", id) == "")
        let after = Date()
        var reminder = try store.show(id)
        #expect(reminder.bool("completed") == true)
        let completedAt = try #require(Instant.parse(reminder.string("completedAt")), "completedAt: \(String(describing: reminder["completedAt"]))")
        #expect(completedAt >= before.addingTimeInterval(-1) && completedAt <= after.addingTimeInterval(1))
        #expect(reminder.string("due") == "2027-01-01T09:00:00.000Z", "a one-off reminder keeps its due date")

        #expect(try store.reminders().compactMap { $0.string("id") } == [other], "list shows open reminders only")
        let all = try store.reminders(all: true)
        #expect(Set(all.compactMap { $0.string("id") }) == [id, other])
        let doneLine = try store.ok("reminder", "list", "--all").split(separator: "\n").first { $0.hasPrefix(id) }
        #expect(doneLine?.contains("done") == true)
        var status = try store.status()
        #expect(status.object("reminders")?.int("completed") == 1)
        #expect(status.object("reminders")?.int("open") == 1)

        // Completing again changes nothing.
        let operations = try store.operationCount()
        try store.ok("reminder", "complete", id)
        #expect(try store.operationCount() == operations)
        #expect(try store.show(id).string("completedAt") == reminder.string("completedAt"))

        try store.ok("reminder", "reopen", String(id.suffix(6)))
        reminder = try store.show(id)
        #expect(reminder.bool("completed") == false)
        #expect(reminder.isNull("completedAt"))
        #expect(Set(try store.reminders().compactMap { $0.string("id") }) == [id, other])
        status = try store.status()
        #expect(status.object("reminders")?.int("open") == 2)

        // Reopening an open reminder changes nothing.
        let reopened = try store.operationCount()
        try store.ok("reminder", "reopen", id)
        #expect(try store.operationCount() == reopened)
    }

    @Test func completingARepeatingReminderMovesItToItsNextOccurrence() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let daily = try store.addReminder("Water plants", "--due", "2027-01-10T08:00:00Z", "--repeat", "daily")
        let weekly = try store.addReminder("Team sync", "--due", "2027-01-10T08:00:00Z", "--repeat", "weekly")
        let hourly = try store.addReminder("Stretch", "--due", "2027-01-10T08:00:00Z", "--repeat", "hourly")

        try store.ok("reminder", "complete", daily)
        var reminder = try store.show(daily)
        #expect(reminder.string("due") == "2027-01-11T08:00:00.000Z")
        #expect(reminder.bool("completed") == false)
        #expect(reminder.isNull("completedAt"))
        #expect(reminder.string("repeat") == "daily")
        #expect(try store.reminders().contains { $0.string("id") == daily }, "it stays open")

        try store.ok("reminder", "complete", daily)
        #expect(try store.show(daily).string("due") == "2027-01-12T08:00:00.000Z")

        try store.ok("reminder", "complete", weekly)
        #expect(try store.show(weekly).string("due") == "2027-01-17T08:00:00.000Z")
        try store.ok("reminder", "complete", hourly)
        #expect(try store.show(hourly).string("due") == "2027-01-10T09:00:00.000Z")

        // Completing a snoozed occurrence clears the snooze.
        try store.ok("reminder", "snooze", daily, "--minutes", "45")
        #expect(!(try store.show(daily).isNull("snoozedUntil")))
        try store.ok("reminder", "complete", daily)
        reminder = try store.show(daily)
        #expect(reminder.isNull("snoozedUntil"))
        #expect(reminder.string("due") == "2027-01-13T08:00:00.000Z")

        let status = try store.status()
        #expect(status.object("reminders")?.int("open") == 3)
        #expect(status.object("reminders")?.int("completed") == 0)
    }

    @Test func monthlyRepeatKeepsItsDayAndClampsToTheMonthEnd() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let id = try store.addReminder("Invoice", "--due", "2027-01-31T12:00:00Z", "--repeat", "monthly")
        #expect(try store.show(id).string("repeat") == "monthly:31", "the stored rule carries its day (SPEC.md §10)")
        try store.ok("reminder", "complete", id)
        #expect(try store.show(id).string("due") == "2027-02-28T12:00:00.000Z")
        try store.ok("reminder", "complete", id)
        #expect(try store.show(id).string("due") == "2027-03-31T12:00:00.000Z", "the rule remembers day 31")
        try store.ok("reminder", "complete", id)
        #expect(try store.show(id).string("due") == "2027-04-30T12:00:00.000Z")
        #expect(try store.show(id).bool("completed") == false)

        // A new due date moves the rule's day with it; without a due date the day is 1.
        try store.ok("reminder", "edit", id, "--due", "2027-05-15T12:00:00Z")
        #expect(try store.show(id).string("repeat") == "monthly:15")
        try store.ok("reminder", "complete", id)
        #expect(try store.show(id).string("due") == "2027-06-15T12:00:00.000Z")
        let undated = try store.addReminder("Undated monthly", "--repeat", "monthly")
        #expect(try store.show(undated).string("repeat") == "monthly:1")
        try store.ok("reminder", "edit", undated, "--repeat", "weekly")
        #expect(try store.show(undated).string("repeat") == "weekly")
    }

    @Test func aRepeatingReminderWithoutADueDateCompletes() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let id = try store.addReminder("Someday", "--repeat", "daily")
        try store.ok("reminder", "complete", id)
        let reminder = try store.show(id)
        #expect(reminder.bool("completed") == true)
        #expect(reminder.isNull("due"))
        #expect(try store.reminders().isEmpty)
    }

    @Test func snoozeForMinutesOrUntilATime() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let id = try store.addReminder("Stand up", "--due", "2027-01-01T09:00:00Z")

        let before = Date()
        #expect(try store.ok("reminder", "snooze", id, "--minutes", "30") == "")
        let after = Date()
        let snoozed = try #require(Instant.parse(try store.show(id).string("snoozedUntil")))
        #expect(snoozed >= before.addingTimeInterval(30 * 60 - 1))
        #expect(snoozed <= after.addingTimeInterval(30 * 60 + 1))

        let until = Instant.wholeSecond(Date().addingTimeInterval(2 * 86_400))
        try store.ok("reminder", "snooze", String(id.suffix(6)), "--until", Instant.format(until))
        #expect(try store.show(id).string("snoozedUntil") == Instant.format(until))

        // An offset in --until is honoured.
        let later = Instant.wholeSecond(Date().addingTimeInterval(3 * 86_400))
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(secondsFromGMT: -5 * 3600)
        formatter.formatOptions = [.withInternetDateTime]
        let withOffset = formatter.string(from: later)
        #expect(withOffset.hasSuffix("-05:00"))
        try store.ok("reminder", "snooze", id, "--until", withOffset)
        #expect(try store.show(id).string("snoozedUntil") == Instant.format(later))

        // The largest snooze is accepted.
        try store.ok("reminder", "snooze", id, "--minutes", "527040")
        #expect(try store.show(id).bool("completed") == false)
    }

    @Test func dueListsOpenRemindersDueByThenAndNotSnoozedPastIt() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let onTime = try store.addReminder("due exactly then", "--due", "2027-05-01T09:00:00Z")
        let earlier = try store.addReminder("due earlier", "--due", "2027-04-30T09:00:00+02:00")
        let later = try store.addReminder("due a second later", "--due", "2027-05-01T09:00:01Z")
        let completed = try store.addReminder("completed", "--due", "2027-04-01T00:00:00Z")
        let deleted = try store.addReminder("deleted", "--due", "2027-04-01T00:00:00Z")
        _ = try store.addReminder("undated")
        try store.ok("reminder", "complete", completed)
        try store.ok("reminder", "delete", deleted)

        let at = "2027-05-01T09:00:00Z"
        let due = try jsonArray(store.ok("reminder", "due", "--at", at, "--json"))
        #expect(due.compactMap { $0.string("id") } == [earlier, onTime], "ordered by due date")
        for reminder in due { #expect(Set(reminder.keys) == listedReminderKeys) }
        let text = try store.ok("reminder", "due", "--at", at)
        #expect(text.split(separator: "\n").count == 2)
        #expect(text.contains("due exactly then") && text.contains("due earlier") && !text.contains(later))

        // Snoozed reminders are left out until their snooze ends.
        let snoozedOne = try store.addReminder("snoozed", "--due", "2020-01-01T00:00:00Z")
        let snoozeEnd = Instant.wholeSecond(Date().addingTimeInterval(3600))
        try store.ok("reminder", "snooze", snoozedOne, "--until", Instant.format(snoozeEnd))
        let beforeEnd = try jsonArray(store.ok("reminder", "due", "--at", Instant.format(snoozeEnd.addingTimeInterval(-60)), "--json"))
        #expect(!beforeEnd.contains { $0.string("id") == snoozedOne })
        let atEnd = try jsonArray(store.ok("reminder", "due", "--at", Instant.format(snoozeEnd), "--json"))
        #expect(atEnd.contains { $0.string("id") == snoozedOne }, "a snooze that ends at the time no longer hides it")
        let longBefore = try jsonArray(store.ok("reminder", "due", "--at", "2019-12-31T23:59:59Z", "--json"))
        #expect(longBefore.isEmpty)

        // Without --at: now, which is past 2020 but before the snooze ends.
        let now = try jsonArray(store.ok("reminder", "due", "--json"))
        #expect(!now.contains { $0.string("id") == snoozedOne })
    }

    @Test func tagAddAndRemove() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let id = try store.addReminder("Tagged", "--tag", "b")
        #expect(try store.ok("reminder", "tag", id, "--add", "c", "--add", "a") == "")
        #expect(try store.show(id).strings("tags") == ["a", "b", "c"])
        try store.ok("reminder", "tag", id, "--remove", "b", "--remove", "a")
        #expect(try store.show(id).strings("tags") == ["c"])
        try store.ok("reminder", "tag", id, "--add", "x", "--remove", "x")
        #expect(try store.show(id).strings("tags") == ["c", "x"], "an add beside a remove of the same tag wins")
        // Removing a tag that is not there is fine and writes nothing.
        let operations = try store.operationCount()
        try store.ok("reminder", "tag", id, "--remove", "absent")
        #expect(try store.operationCount() == operations)
        // Tags are exact strings.
        try store.ok("reminder", "tag", id, "--add", "C", "--add", "café")
        #expect(try store.show(id).strings("tags") == ["C", "c", "café", "x"])
        #expect(try store.ok("reminder", "list").contains("#C #c #café #x"))
    }

    @Test func deleteHidesFromListAndRestoreBringsBack() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let id = try store.addReminder("Ephemeral", "--tag", "t")
        let keep = try store.addReminder("Keep")
        #expect(try store.ok("reminder", "delete", String(id.suffix(6))) == "")

        #expect(try store.reminders().compactMap { $0.string("id") } == [keep])
        let all = try store.reminders(all: true)
        let deleted = try #require(all.first { $0.string("id") == id })
        #expect(deleted.bool("deleted") == true)
        #expect(deleted.string("title") == "Ephemeral")
        #expect(all.first { $0.string("id") == keep }?.bool("deleted") == false)
        #expect(try store.ok("reminder", "list", "--all").split(separator: "\n").first { $0.hasPrefix(id) }?.contains("deleted") == true)
        #expect(try store.show(id).bool("deleted") == true, "show still finds a deleted reminder")
        #expect(try store.status().object("reminders")?.int("deleted") == 1)

        // Deleting again writes nothing.
        let operations = try store.operationCount()
        try store.ok("reminder", "delete", id)
        #expect(try store.operationCount() == operations)

        try store.ok("reminder", "restore", id)
        let restored = try store.show(id)
        #expect(restored.bool("deleted") == false)
        #expect(restored.string("title") == "Ephemeral")
        #expect(restored.strings("tags") == ["t"])
        #expect(Set(try store.reminders().compactMap { $0.string("id") }) == [id, keep])
        #expect(try store.status().object("reminders")?.int("deleted") == 0)
    }

    @Test func listIsOrderedByDueDateWithUndatedLast() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let undated = try store.addReminder("undated")
        let late = try store.addReminder("late", "--due", "2028-01-01T00:00:00Z")
        let early = try store.addReminder("early", "--due", "2027-01-01T00:00:00Z")
        let middle = try store.addReminder("middle", "--due", "2027-06-01T00:00:00Z")
        #expect(try store.reminders().compactMap { $0.string("id") } == [early, middle, late, undated])
        let lines = try store.ok("reminder", "list").split(separator: "\n").map { String($0.prefix(32)) }
        #expect(lines == [early, middle, late, undated])
    }

    @Test func datesInLocalTimeFollowTZ() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        func add(_ due: String, tz: String) throws -> String? {
            let result = try store.run("reminder", "add", "local", "--due", due, environment: ["TZ": tz])
            #expect(result.succeeded, "\(result)")
            return try store.show(result.out).string("due")
        }
        #expect(try add("2027-07-01T09:00", tz: "Europe/Berlin") == "2027-07-01T07:00:00.000Z")
        #expect(try add("2027-01-15T09:00", tz: "Europe/Berlin") == "2027-01-15T08:00:00.000Z")
        #expect(try add("2027-07-01", tz: "America/New_York") == "2027-07-01T04:00:00.000Z")
        #expect(try add("2027-07-01T09:00:00Z", tz: "America/New_York") == "2027-07-01T09:00:00.000Z")
        #expect(try add("2027-07-01 09:00:00+05:30", tz: "UTC") == "2027-07-01T03:30:00.000Z")
        #expect(try add("2027-07-01T09:00+0200", tz: "UTC") == "2027-07-01T07:00:00.000Z")
        #expect(try add("2027-07-01T09:00:00-07:00", tz: "Europe/Berlin") == "2027-07-01T16:00:00.000Z")
        #expect(try add("2028-02-29T23:59:59.5Z", tz: "UTC") == "2028-02-29T23:59:59.500Z")
    }
}
