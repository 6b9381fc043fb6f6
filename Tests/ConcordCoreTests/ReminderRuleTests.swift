import ConcordCore
import Foundation
import PropertyBased
import Testing

/// Millis of a UTC civil time.
func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int = 0, _ minute: Int = 0, _ second: Int = 0, _ ms: Int = 0) -> Int64 {
    CivilTime(year: year, month: month, day: day, millisOfDay: Int64(((hour * 60 + minute) * 60 + second) * 1000 + ms)).millis
}

/// A random non-completion edit of a reminder (title, notes, priority, tags, due).
func nonCompletionEdit(_ kind: Int, _ index: Int) -> Change {
    switch kind % 7 {
    case 0: .editReminder(ReminderPatch(title: "edit \(index)"))
    case 1: .editReminder(ReminderPatch(notes: .some("notes \(index)")))
    case 2: .editReminder(ReminderPatch(priority: Priority(rawValue: Int64(index % 4))))
    case 3: .tag(add: [Universe.tags[index % 4]], remove: [])
    case 4: .tag(add: [], remove: [Universe.tags[index % 4]])
    case 5: .editReminder(ReminderPatch(due: .some(Universe.date(Universe.dues[index % Universe.dues.count]))))
    default: .editReminder(ReminderPatch(title: "t", notes: .some(nil), priority: .low))
    }
}

@Suite("Reminder rules under concurrency")
struct ReminderConcurrencyTests {
    /// Property 6: a completed non-repeating reminder stays completed, with the completer's
    /// completion time, whatever the other replicas edit concurrently and whatever their clocks say.
    @Test func completionSurvivesConcurrentEdits() async {
        await propertyCheck(
            count: 300, input: Gen.int(in: 2...4), Gen.int(in: 0...6).array(of: 1...8),
            Gen.int(in: -7_200_000...7_200_000), Gen.int(in: 0...4), Gen<UInt64>.value(in: 0...UInt64.max)
        ) { replicaCount, edits, skew, dueIndex, seed in
            let ref = Universe.records[1]
            var world = World(Script(replicaCount: replicaCount, skews: [0, 0, 0, 0], seed: seed, steps: []))
            world.perform(.createReminder(ReminderDraft(title: "t", due: Universe.date(Universe.dues[dueIndex]), tags: ["home"])), on: ref, by: 0)
            world.syncAll()
            let completedAt = Universe.baseMillis + 60_000
            let completion = world.perform(.complete, on: ref, by: 0, wallMillis: completedAt)
            #expect(completion.map(\.action) == [.assign(.completed, .int(Int64(completedAt)))])

            var rng = world.rng(11)
            for (index, kind) in edits.enumerated() {
                let r = 1 + Int.random(in: 0..<(replicaCount - 1), using: &rng)
                let wall = UInt64(Int64(completedAt) + Int64(skew) + Int64(index) * 1_000)
                world.perform(nonCompletionEdit(kind, index), on: ref, by: r, wallMillis: wall)
                if Bool.random(using: &rng) {
                    let from = Int.random(in: 0..<replicaCount, using: &rng)
                    if from != r { world.merge(world.replicas[from].operations().shuffled(using: &rng), into: r) }
                }
            }
            world.syncAll()
            for replica in world.replicas {
                let reminder = replica.reminders[0]
                #expect(reminder.isCompleted)
                #expect(reminder.completedAt?.millisecondsSince1970 == Int64(completedAt))
                #expect(replica.records[ref]!.value(.completed) == .int(Int64(completedAt)))
                #expect(replica.dump().contains("\"completed\":true"))
            }
            #expect(Set(world.replicas.map { $0.dump() }).count == 1)
        }
    }

    /// Property 7: replicas that complete the same occurrence of a repeating reminder concurrently
    /// move its due date exactly once, to `rule.next(after: due)`; it does not become completed.
    @Test func concurrentCompletionOfRepeatingReminderAdvancesOnce() async {
        await propertyCheck(
            count: 300, input: Gen.int(in: 2...4), Gen.int(in: 0...3), Gen.int(in: 1...4),
            Gen.int(in: -7_200_000...7_200_000).array(of: 4), Gen.bool, Gen<UInt64>.value(in: 0...UInt64.max)
        ) { replicaCount, ruleIndex, dueIndex, skews, snoozeFirst, seed in
            let ref = Universe.records[0]
            let due = Universe.dues[dueIndex]!
            let ruleName = Universe.repeatNames[ruleIndex]!
            var world = World(Script(replicaCount: replicaCount, skews: [0, 0, 0, 0], seed: seed, steps: []))
            world.perform(.createReminder(ReminderDraft(title: "water plants", due: Universe.date(due), repeatRule: ruleName)), on: ref, by: 0)
            if snoozeFirst {
                world.perform(.snooze(until: Date(millisecondsSince1970: Int64(Universe.baseMillis) + 3_600_000)), on: ref, by: 0)
            }
            world.syncAll()
            let rule = RepeatRule(rawValue: world.replicas[0].records[ref]!.value(.repeatRule).stringValue!)!
            #expect(rule == RepeatRule(name: ruleName, due: due))
            let expected = rule.next(after: due)

            let completers = 2 + Int(seed % UInt64(replicaCount - 1))
            for r in 0..<completers {
                let made = world.perform(.complete, on: ref, by: r, wallMillis: UInt64(Int64(Universe.baseMillis) + 100_000 + Int64(skews[r])))
                var expectedActions: [Action] = [.assign(.due, .int(expected))]
                if snoozeFirst { expectedActions.append(.assign(.snoozedUntil, .null)) }
                #expect(made.map(\.action) == expectedActions)
            }
            var rng = world.rng(3)
            for _ in 0..<replicaCount {
                let from = Int.random(in: 0..<replicaCount, using: &rng)
                let to = Int.random(in: 0..<replicaCount, using: &rng)
                if from != to { world.merge(world.replicas[from].operations().shuffled(using: &rng), into: to) }
            }
            world.syncAll()
            for replica in world.replicas {
                let state = replica.records[ref]!
                #expect(state.value(.due) == .int(expected))
                #expect(state.value(.completed) == .null)
                #expect(state.value(.snoozedUntil) == .null)
                #expect(replica.reminders[0].due?.millisecondsSince1970 == expected)
            }
            // A later completion, after sync, moves it to the following occurrence.
            world.perform(.complete, on: ref, by: replicaCount - 1, wallMillis: Universe.baseMillis + 1_000_000)
            world.syncAll()
            for replica in world.replicas {
                #expect(replica.records[ref]!.value(.due) == .int(rule.next(after: expected)))
            }
        }
    }
}

@Suite("Repeat rules and civil time")
struct RepeatRuleTests {
    @Test func monthlyOnDay31ClampsAndKeepsItsAnchor() {
        let rule = RepeatRule.monthly(day: 31)
        // Not a leap year.
        let jan31 = utc(2023, 1, 31, 9, 30)
        let feb28 = rule.next(after: jan31)
        #expect(feb28 == utc(2023, 2, 28, 9, 30))
        #expect(rule.next(after: feb28) == utc(2023, 3, 31, 9, 30))
        #expect(rule.next(after: utc(2023, 3, 31, 9, 30)) == utc(2023, 4, 30, 9, 30))
        #expect(rule.next(after: utc(2023, 4, 30, 9, 30)) == utc(2023, 5, 31, 9, 30))
        // A leap year.
        let feb29 = rule.next(after: utc(2024, 1, 31))
        #expect(feb29 == utc(2024, 2, 29))
        #expect(feb29 == 1_709_164_800_000)  // 2024-02-29T00:00:00Z, independently of CivilTime
        #expect(rule.next(after: feb29) == utc(2024, 3, 31))
        // Year end.
        #expect(rule.next(after: utc(2023, 12, 31, 23, 59, 59, 999)) == utc(2024, 1, 31, 23, 59, 59, 999))
        // Century rules: 2100 is not a leap year, 2000 is.
        #expect(rule.next(after: utc(2100, 1, 31)) == utc(2100, 2, 28))
        #expect(rule.next(after: utc(2000, 1, 31)) == utc(2000, 2, 29))
        // Other anchors.
        #expect(RepeatRule.monthly(day: 30).next(after: utc(2023, 1, 30)) == utc(2023, 2, 28))
        #expect(RepeatRule.monthly(day: 30).next(after: utc(2023, 2, 28)) == utc(2023, 3, 30))
        #expect(RepeatRule.monthly(day: 15).next(after: utc(2024, 11, 15, 8)) == utc(2024, 12, 15, 8))
        #expect(RepeatRule.monthly(day: 1).next(after: utc(2024, 12, 1)) == utc(2025, 1, 1))
    }

    @Test func monthlyCompletionThroughAReplicaFollowsTheAnchor() throws {
        let ref = Universe.records[0]
        var replica = Replica(id: Universe.replicaIDs[0])
        let jan31 = utc(2024, 1, 31, 9)
        try replica.perform(.createReminder(ReminderDraft(title: "rent", due: Date(millisecondsSince1970: jan31), repeatRule: "monthly")), on: ref, wallMillis: 1_000)
        #expect(replica.records[ref]!.value(.repeatRule) == .string("monthly:31"))
        var dues: [Int64] = []
        for step in 0..<4 {
            try replica.perform(.complete, on: ref, wallMillis: UInt64(2_000 + step))
            dues.append(replica.records[ref]!.value(.due).intValue!)
        }
        #expect(dues == [utc(2024, 2, 29, 9), utc(2024, 3, 31, 9), utc(2024, 4, 30, 9), utc(2024, 5, 31, 9)])
        #expect(replica.reminders[0].completedAt == nil)
        #expect(replica.dump().contains("\"due\":\"2024-05-31T09:00:00.000Z\""))
        // Moving the due date re-anchors a monthly rule on the new day.
        try replica.perform(.editReminder(ReminderPatch(due: .some(Date(millisecondsSince1970: utc(2024, 6, 15))))), on: ref, wallMillis: 3_000)
        #expect(replica.records[ref]!.value(.repeatRule) == .string("monthly:15"))
    }

    @Test func hourlyDailyWeekly() {
        let start = utc(2024, 2, 28, 23, 30)
        #expect(RepeatRule.hourly.next(after: start) == utc(2024, 2, 29, 0, 30))
        #expect(RepeatRule.daily.next(after: start) == utc(2024, 2, 29, 23, 30))
        #expect(RepeatRule.weekly.next(after: start) == utc(2024, 3, 6, 23, 30))
        #expect(RepeatRule.daily.next(after: utc(2023, 12, 31, 12)) == utc(2024, 1, 1, 12))
        #expect(RepeatRule.hourly.next(after: 0) == 3_600_000)
        #expect(RepeatRule.daily.next(after: 0) == 86_400_000)
        #expect(RepeatRule.weekly.next(after: 0) == 604_800_000)
    }

    @Test func repeatRuleParsing() {
        #expect(RepeatRule(rawValue: "hourly") == .hourly)
        #expect(RepeatRule(rawValue: "daily") == .daily)
        #expect(RepeatRule(rawValue: "weekly") == .weekly)
        #expect(RepeatRule(rawValue: "monthly:1") == .monthly(day: 1))
        #expect(RepeatRule(rawValue: "monthly:31") == .monthly(day: 31))
        for bad in ["monthly", "monthly:0", "monthly:32", "monthly:-1", "yearly", "Daily", "", "monthly:x", "monthly:031"] {
            #expect(RepeatRule(rawValue: bad) == nil, "\(bad)")
        }
        for rule in [RepeatRule.hourly, .daily, .weekly] + (1...31).map({ RepeatRule.monthly(day: $0) }) {
            #expect(RepeatRule(rawValue: rule.rawValue) == rule)
        }
        #expect(RepeatRule(name: "monthly", due: utc(2024, 3, 17)) == .monthly(day: 17))
        #expect(RepeatRule(name: "monthly", due: nil) == .monthly(day: 1))
        #expect(RepeatRule(name: "monthly:3", due: nil) == nil)
        #expect(RepeatRule.monthly(day: 9).name == "monthly")
    }

    @Test func monthlyNextIsTheAnchorDayOfTheNextMonth() async {
        await propertyCheck(count: 300, input: Gen<Int64>.value(in: utc(1900, 1, 1)...utc(2400, 1, 1)), Gen.int(in: 1...31)) { due, day in
            let civil = CivilTime(millis: due)
            let next = CivilTime(millis: RepeatRule.monthly(day: day).next(after: due))
            let expectedMonth = civil.month == 12 ? 1 : civil.month + 1
            #expect(next.month == expectedMonth)
            #expect(next.year == (civil.month == 12 ? civil.year + 1 : civil.year))
            #expect(next.day == min(day, CivilTime.daysIn(month: next.month, year: next.year)))
            #expect(next.millisOfDay == civil.millisOfDay)
        }
    }

    // MARK: CivilTime

    @Test func civilTimeRoundTripsMillis() async {
        // Years -9999...9999 and a little beyond.
        let range = utc(-9999, 1, 1)...utc(10000, 12, 31, 23, 59, 59, 999)
        await propertyCheck(count: 300, input: Gen<Int64>.value(in: range)) { millis in
            let civil = CivilTime(millis: millis)
            #expect(civil.millis == millis)
            #expect((1...12).contains(civil.month))
            #expect((1...CivilTime.daysIn(month: civil.month, year: civil.year)).contains(civil.day))
            #expect((0..<86_400_000).contains(civil.millisOfDay))
            #expect(CivilTime(year: civil.year, month: civil.month, day: civil.day, millisOfDay: civil.millisOfDay) == civil)
            // The next day's midnight is one day later.
            let midnight = CivilTime(year: civil.year, month: civil.month, day: civil.day).millis
            #expect(millis - midnight == civil.millisOfDay)
        }
    }

    @Test func civilTimeAgreesWithFoundationsGregorianCalendar() async {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let cal = calendar
        // Foundation switches to the Julian calendar before 1582; compare from 1600 on.
        await propertyCheck(count: 300, input: Gen<Int64>.value(in: utc(1600, 1, 1)...utc(9999, 12, 31, 23, 59, 59, 999))) { millis in
            let civil = CivilTime(millis: millis)
            let components = cal.dateComponents([.year, .month, .day, .hour, .minute, .second], from: Date(millisecondsSince1970: millis - ((millis % 1000) + 1000) % 1000))
            #expect(components.year == civil.year)
            #expect(components.month == civil.month)
            #expect(components.day == civil.day)
            #expect(components.hour == Int(civil.millisOfDay / 3_600_000))
            #expect(components.minute == Int(civil.millisOfDay / 60_000 % 60))
            #expect(components.second == Int(civil.millisOfDay / 1000 % 60))
        }
    }

    @Test func civilTimeFromDatesRoundTrips() async {
        let civil = zip(Gen.int(in: -9999...9999), Gen.int(in: 1...12), Gen.int(in: 1...31), Gen<Int64>.value(in: 0...86_399_999))
            .map { y, m, d, ms in CivilTime(year: y, month: m, day: min(d, CivilTime.daysIn(month: m, year: y)), millisOfDay: ms) }
        await propertyCheck(count: 300, input: civil) { civil in
            #expect(CivilTime(millis: civil.millis) == civil)
        }
    }

    @Test func knownInstants() {
        #expect(CivilTime(millis: 0) == CivilTime(year: 1970, month: 1, day: 1))
        #expect(CivilTime(millis: -1) == CivilTime(year: 1969, month: 12, day: 31, millisOfDay: 86_399_999))
        #expect(CivilTime(millis: 1_709_200_800_000) == CivilTime(year: 2024, month: 2, day: 29, millisOfDay: 36_000_000))
        #expect(utc(2000, 3, 1) == 951_868_800_000)
        #expect(utc(9999, 12, 31, 23, 59, 59, 999) == Int64(Timestamp.maxPhysicalMillis))
        #expect(CivilTime.isLeap(2000) && CivilTime.isLeap(2024) && !CivilTime.isLeap(1900) && !CivilTime.isLeap(2023))
        #expect(CivilTime.daysIn(month: 2, year: 2024) == 29)
        #expect(CivilTime.daysIn(month: 2, year: 2100) == 28)
        #expect(CivilTime.daysIn(month: 4, year: 2024) == 30)
        #expect(CivilTime.daysIn(month: 12, year: 2024) == 31)
    }

    @Test func iso8601Formatting() {
        #expect(CivilTime(millis: 0).iso8601 == "1970-01-01T00:00:00.000Z")
        #expect(CivilTime(millis: 1_709_200_800_123).iso8601 == "2024-02-29T10:00:00.123Z")
        #expect(CivilTime(millis: -1).iso8601 == "1969-12-31T23:59:59.999Z")
        #expect(CivilTime(millis: Int64(Timestamp.maxPhysicalMillis)).iso8601 == "9999-12-31T23:59:59.999Z")
        #expect(CivilTime(year: 5, month: 3, day: 7, millisOfDay: 3_723_004).iso8601 == "0005-03-07T01:02:03.004Z")
        #expect(CivilTime(year: 0, month: 1, day: 1).iso8601 == "0000-01-01T00:00:00.000Z")
        #expect(CivilTime(year: -44, month: 3, day: 15).iso8601 == "-0044-03-15T00:00:00.000Z")
        #expect(JSON.instant(1_709_200_800_000) == .string("2024-02-29T10:00:00.000Z"))
        #expect(JSON.instant(nil) == .null)
    }

    @Test func iso8601MatchesFoundationFormatter() async {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")!
        let f = UnsafeSendable(formatter)
        await propertyCheck(count: 200, input: Gen<Int64>.value(in: utc(1600, 1, 1)...utc(9999, 12, 31))) { millis in
            let iso = CivilTime(millis: millis).iso8601
            #expect(iso.utf8.count == 24)
            let parsed = f.value.date(from: iso)
            #expect(parsed?.millisecondsSince1970 == millis, "\(iso)")
        }
    }
}

struct UnsafeSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

@Suite("Planning changes")
struct ChangePlanTests {
    let ref = Universe.records[0]
    let noteRef = Universe.records[2]

    func replicaWithReminder(_ draft: ReminderDraft = ReminderDraft(title: "t")) throws -> Replica {
        var replica = Replica(id: Universe.replicaIDs[0])
        try replica.perform(.createReminder(draft), on: ref, wallMillis: 1_000)
        return replica
    }

    @Test func createWritesEveryField() throws {
        let replica = try replicaWithReminder(ReminderDraft(title: "t", notes: "n", due: Date(millisecondsSince1970: 5_000), priority: .high, tags: ["a", "b", "a"], repeatRule: "daily"))
        let state = replica.records[ref]!
        #expect(state.value(.title) == .string("t"))
        #expect(state.value(.notes) == .string("n"))
        #expect(state.value(.due) == .int(5_000))
        #expect(state.value(.priority) == .int(3))
        #expect(state.value(.completed) == .null)
        #expect(state.register(.completed) != nil)
        #expect(state.value(.repeatRule) == .string("daily"))
        #expect(state.tags.present == ["a", "b"])
        #expect(replica.versionVector[replica.id] == 8)
    }

    /// A tag may hold any character but a control character (general category Cc), in any
    /// position: checked against Unicode's own property around every edge of that category.
    @Test func tagsRefuseExactlyTheControlCharacters() throws {
        let replica = try replicaWithReminder()
        let scalars = (0...0x2FF).compactMap(Unicode.Scalar.init) + ["\u{2028}", "\u{200B}", "\u{FEFF}", "\u{FFFD}", "\u{1F600}", "\u{10FFFF}"]
        for scalar in scalars {
            let isControl = scalar.properties.generalCategory == .control
            for tag in ["\(scalar)", "a\(scalar)", "\(scalar)é", "é\(scalar)x"] {
                var copy = replica
                do {
                    try copy.perform(.tag(add: [tag], remove: []), on: ref, wallMillis: 2)
                    #expect(!isControl, "U+\(String(scalar.value, radix: 16)) was accepted in \(tag.debugDescription)")
                } catch {
                    #expect(isControl && (error as? ChangeError) == .invalidTag(tag), "U+\(String(scalar.value, radix: 16)) in \(tag.debugDescription): \(error)")
                }
            }
        }
    }

    @Test func refusals() throws {
        var replica = try replicaWithReminder()
        #expect(throws: ChangeError.alreadyExists(ref)) { try replica.perform(.createReminder(ReminderDraft(title: "x")), on: ref, wallMillis: 2) }
        #expect(throws: ChangeError.emptyTitle) { try replica.perform(.editReminder(ReminderPatch(title: " \n\t")), on: ref, wallMillis: 2) }
        #expect(throws: ChangeError.invalidTag("a\u{7}")) { try replica.perform(.tag(add: ["a\u{7}"], remove: []), on: ref, wallMillis: 2) }
        #expect(throws: ChangeError.invalidTag("")) { try replica.perform(.tag(add: [], remove: [""]), on: ref, wallMillis: 2) }
        #expect(throws: ChangeError.unknownRepeatRule("yearly")) { try replica.perform(.editReminder(ReminderPatch(repeatRule: .some("yearly"))), on: ref, wallMillis: 2) }
        #expect(throws: ChangeError.wrongKind(ref, expected: .note)) { try replica.perform(.editNote(NotePatch(title: "x")), on: ref, wallMillis: 2) }
        #expect(throws: ChangeError.notFound(Universe.records[1])) { try replica.perform(.complete, on: Universe.records[1], wallMillis: 2) }
        #expect(throws: ChangeError.notFound(Universe.records[1])) { try replica.perform(.delete, on: Universe.records[1], wallMillis: 2) }
        // Snoozes end after now and at most 366 days later.
        #expect(throws: ChangeError.snoozeOutOfRange) { try replica.perform(.snooze(until: Date(millisecondsSince1970: 5_000)), on: ref, wallMillis: 5_000) }
        #expect(throws: ChangeError.snoozeOutOfRange) {
            try replica.perform(.snooze(until: Date(millisecondsSince1970: 5_001 + Change.maxSnoozeMillis)), on: ref, wallMillis: 5_000)
        }
        try replica.perform(.snooze(until: Date(millisecondsSince1970: 5_000 + Change.maxSnoozeMillis)), on: ref, wallMillis: 5_000)
        #expect(replica.records[ref]!.value(.snoozedUntil) == .int(5_000 + Change.maxSnoozeMillis))
        // Deleted records refuse edits until restored.
        try replica.perform(.delete, on: ref, wallMillis: 6_000)
        #expect(throws: ChangeError.deleted(ref)) { try replica.perform(.editReminder(ReminderPatch(title: "x")), on: ref, wallMillis: 7_000) }
        #expect(throws: ChangeError.deleted(ref)) { try replica.perform(.complete, on: ref, wallMillis: 7_000) }
        #expect(try replica.perform(.delete, on: ref, wallMillis: 7_000).isEmpty)
        #expect(try replica.perform(.restore, on: ref, wallMillis: 7_000).count == 1)
        #expect(try replica.perform(.restore, on: ref, wallMillis: 7_000).isEmpty)
        #expect(try replica.perform(.editReminder(ReminderPatch(title: "x")), on: ref, wallMillis: 8_000).count == 1)
    }

    @Test func completeAndReopenAreIdempotent() throws {
        var replica = try replicaWithReminder()
        #expect(try replica.perform(.reopen, on: ref, wallMillis: 2_000).isEmpty)
        #expect(try replica.perform(.complete, on: ref, wallMillis: 2_000).map(\.action) == [.assign(.completed, .int(2_000))])
        #expect(try replica.perform(.complete, on: ref, wallMillis: 3_000).isEmpty)
        #expect(replica.reminders[0].completedAt == Date(millisecondsSince1970: 2_000))
        #expect(try replica.perform(.reopen, on: ref, wallMillis: 4_000).map(\.action) == [.assign(.completed, .null)])
        #expect(!replica.reminders[0].isCompleted)
        // A repeating reminder without a due date completes like any other.
        var repeating = try replicaWithReminder(ReminderDraft(title: "t", repeatRule: "daily"))
        #expect(try repeating.perform(.complete, on: ref, wallMillis: 2_000).map(\.action) == [.assign(.completed, .int(2_000))])
    }

    /// SPEC §5.2 and §7: an explicit add is always issued (even for a present tag), a remove only
    /// for a present tag (naming all its live dots), and a tag both added and removed is added.
    @Test func tagChangePlanning() throws {
        var replica = try replicaWithReminder(ReminderDraft(title: "t", tags: ["a"]))
        let firstDot = replica.records[ref]!.tags.liveDots(of: "a")
        let again = try replica.perform(.tag(add: ["a", "a"], remove: []), on: ref, wallMillis: 2)
        #expect(again.map(\.action) == [.addTag("a")])
        #expect(replica.records[ref]!.tags.liveDots(of: "a") == (firstDot + again.map(\.id)).sorted())
        #expect(try replica.perform(.tag(add: [], remove: ["zzz"]), on: ref, wallMillis: 2).isEmpty)
        // Adding and removing the same tag adds it.
        #expect(try replica.perform(.tag(add: ["a"], remove: ["a"]), on: ref, wallMillis: 2).map(\.action) == [.addTag("a")])
        let dots = replica.records[ref]!.tags.liveDots(of: "a")
        #expect(dots.count == 3)
        let made = try replica.perform(.tag(add: ["b"], remove: ["a"]), on: ref, wallMillis: 2)
        #expect(made.map(\.action) == [.removeTag("a", observed: dots), .addTag("b")])
        #expect(replica.records[ref]!.tags.present == ["b"])
        #expect(try replica.perform(.tag(add: [], remove: ["a"]), on: ref, wallMillis: 2).isEmpty)
    }

    /// SPEC §6.1: a reminder with a repeat rule this version does not know completes normally.
    @Test func unknownRepeatRuleCompletesNormally() throws {
        var replica = try replicaWithReminder(ReminderDraft(title: "t", due: Date(millisecondsSince1970: 50_000)))
        try replica.merge([op(Universe.replicaIDs[1], 1, at: ts(1_500), ref, .assign(.repeatRule, .string("yearly")))])
        let made = try replica.perform(.complete, on: ref, wallMillis: 2_000)
        #expect(made.map(\.action) == [.assign(.completed, .int(2_000))])
        #expect(replica.records[ref]!.value(.due) == .int(50_000))
        #expect(replica.dump().contains("\"repeat\":\"yearly\""))
    }

    @Test func notesAreEditedAndTagged() throws {
        var replica = Replica(id: Universe.replicaIDs[0])
        try replica.perform(.createNote(NoteDraft(title: "n", body: "b", tags: ["x"], isPinned: true)), on: noteRef, wallMillis: 1)
        try replica.perform(.editNote(NotePatch(body: "c", isPinned: false)), on: noteRef, wallMillis: 2)
        #expect(replica.notes == [Note(id: noteRef.id, title: "n", body: "c", isPinned: false, tags: ["x"], isDeleted: false)])
        #expect(throws: ChangeError.wrongKind(noteRef, expected: .reminder)) { try replica.perform(.complete, on: noteRef, wallMillis: 3) }
        #expect(throws: ChangeError.wrongKind(ref, expected: .note)) { try replica.perform(.createNote(NoteDraft(title: "n")), on: ref, wallMillis: 3) }
    }

    @Test func isDueHonoursSnoozeCompletionAndDeletion() {
        let due = Date(millisecondsSince1970: 10_000)
        var reminder = Reminder(id: ref.id, title: "t", notes: nil, due: due, priority: .none, completedAt: nil, snoozedUntil: nil, repeatRule: nil, tags: [], isDeleted: false)
        #expect(!reminder.isDue(at: Date(millisecondsSince1970: 9_999)))
        #expect(reminder.isDue(at: due))
        reminder.snoozedUntil = Date(millisecondsSince1970: 20_000)
        #expect(!reminder.isDue(at: Date(millisecondsSince1970: 19_999)))
        #expect(reminder.isDue(at: Date(millisecondsSince1970: 20_000)))
        reminder.completedAt = due
        #expect(!reminder.isDue(at: Date(millisecondsSince1970: 30_000)))
        reminder.completedAt = nil
        reminder.isDeleted = true
        #expect(!reminder.isDue(at: Date(millisecondsSince1970: 30_000)))
    }
}
