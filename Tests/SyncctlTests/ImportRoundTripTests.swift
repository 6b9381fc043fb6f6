import ConcordCore
import ConcordStore
import Foundation
import PropertyBased
import Testing

@testable import syncctl

/// SPEC.md §10, "Import form": the two lists printed as JSON are an import file, and every value
/// they can print imports as it is. A random store is built from local changes (repeating
/// reminders completed past a month's end, snoozes, tags, deletes), merges of a second replica's
/// concurrent edits (conflicts), and operations of a newer version (priorities and repeat rules
/// this version does not know, a record whose title no replica wrote, tags a local change would
/// refuse, a snooze far ahead); its lists, imported into an empty store through the code
/// `syncctl import` runs, list the same records (but for `conflict`: an imported record has none).
///
/// A failure prints the seed of the run; `@Test(.fixedSeed("…"))` replays it.
@Suite(.waitsForProcesses) struct ImportRoundTripTests {
    /// One step: (what, which record, an argument, another).
    typealias Step = (Int, Int, Int, Int)

    static let steps = zip(Gen.int(in: 0...19), Gen.int(in: 0...4), Gen.int(in: 0...9), Gen.int(in: 0...9)).array(of: 1...40)

    /// 2026-11-18T11:06:40Z: the stores' clocks start here and advance 1 ms a reading.
    static let start: UInt64 = 1_795_000_000_000
    /// Three reminders and two notes, whose ids both replicas write to: few, so that both
    /// replicas often write one at once.
    static let records: [RecordRef] = (0..<5).map { index in
        let id = RecordID(high: 0x0190_0000_0000_0000, low: UInt64(index + 1))
        return index < 3 ? .reminder(id) : .note(id)
    }
    static let titles = ["Buy milk", "caf\u{E9} \u{1F600}", "\"quoted\" \\ slash/", "tab\there", "line\nbreak", "\u{7F}\u{85}", " ", "x"]
    static let tags = ["home", "work", "\u{E9}", "e\u{301}"]
    /// None; 2027-01-31 (a monthly rule clamps at the months' ends), 2028-02-29, the last millisecond
    /// of 2026; the first and last instants of §4.1; 2026-11-30.
    static let dues: [Int64?] = [
        nil, 1_801_386_000_000, 1_835_431_200_000, 1_798_761_599_999, -62_135_596_800_000, 253_402_300_799_999,
        1_796_040_000_000,
    ]
    static let repeatNames: [String?] = [nil, "hourly", "daily", "weekly", "monthly"]

    @Test func theListsOfARandomStoreImportAsTheSameRecords() async {
        await propertyCheck(count: 100, input: Self.steps) { steps in
            do {
                let source = try ConcordStore.inMemory(environment: .deterministic(seed: 1, startMillis: Self.start))
                let other = try ConcordStore.inMemory(environment: .deterministic(seed: 2, startMillis: Self.start + 500))
                var newer = NewerVersion()
                for step in steps { try Self.apply(step, to: source, other: other, newer: &newer) }
                let lists = try Self.lists(of: source)

                let target = try ConcordStore.inMemory(environment: .deterministic(seed: 3, startMillis: Self.start + 10_000_000))
                var reader = ImportReader(JSONReader(bytes: Array(lists.text.utf8)), name: "lists.json", now: 0)
                let summary = try Import.importRecords(&reader, into: target)
                #expect(summary.reminders + summary.notes == lists.count && summary.held == 0)
                #expect(try Self.records(of: target) == Self.records(of: source), "the lists, imported, list other records")
                #expect(try target.verify().problems == [])
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
    }

    /// The text of `reminder list --all --json`, a line break, and `note list --all --json`, as
    /// syncctl prints them (`Output`); and how many records they list.
    static func lists(of store: ConcordStore) throws -> (text: String, count: Int) {
        let reminders = try store.reminders(includeCompleted: true, includeDeleted: true)
        let notes = try store.notes(includeDeleted: true)
        return (JSON.array(reminders.map(\.json)).canonical + "\n" + JSON.array(notes.map(\.json)).canonical + "\n", reminders.count + notes.count)
    }

    /// The records a store lists, as their JSON objects without `conflict`, in id order: a note
    /// whose `pinned` no replica wrote lists after the unpinned ones (its column is null), and
    /// imported, among them.
    static func records(of store: ConcordStore) throws -> [String] {
        let reminders = try store.reminders(includeCompleted: true, includeDeleted: true).map { reminder in
            var reminder = reminder
            reminder.isInConflict = false
            return (reminder.id.hex, reminder.json.canonical)
        }
        let notes = try store.notes(includeDeleted: true).map { note in
            var note = note
            note.isInConflict = false
            return (note.id.hex, note.json.canonical)
        }
        return (reminders + notes).sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// Operations written as a newer version would write them, merged into a store.
    struct NewerVersion {
        static let replica = ReplicaID(high: 0xEEEE_0000_0000_0000, low: 0xEE)
        var seq: UInt64 = 0

        mutating func write(_ action: Action, on ref: RecordRef, into store: ConcordStore) throws {
            seq += 1
            let operation = Op(
                id: OperationID(replica: Self.replica, seq: seq),
                timestamp: Timestamp(physicalMillis: ImportRoundTripTests.start + 1_000 * seq, logical: 0), record: ref,
                action: action, predecessors: nil)
            try store.merge([operation])
        }
    }

    static func apply(_ step: Step, to store: ConcordStore, other: ConcordStore, newer: inout NewerVersion) throws {
        let (what, which, a, b) = step
        let ref = records[which]
        let due = dues[a % dues.count].map(Date.init(millisecondsSince1970:))
        let isReminder = ref.kind == .reminder
        let held = try store.state(of: ref) != nil
        // A change a store refuses (a record missing or deleted, a reminder's change on a note)
        // is part of the script: it changes nothing.
        switch what {
        case 0, 1:
            if isReminder {
                _ = try? store.perform(.createReminder(ReminderDraft(
                    title: titles[a % titles.count].trimmingCharacters(in: .whitespaces).isEmpty ? "t" : titles[a % titles.count],
                    notes: b % 3 == 0 ? nil : titles[b % titles.count], due: due, priority: Priority(rawValue: Int64(b % 4)),
                    tags: Array(tags.prefix(b % 5)), repeatRule: repeatNames[(a + b) % repeatNames.count],
                    completedAt: b % 4 == 3 ? Date(millisecondsSince1970: Int64(start) - 60_000) : nil)), on: ref)
            } else {
                _ = try? store.perform(.createNote(NoteDraft(
                    title: "note \(a)", body: titles[b % titles.count], tags: Array(tags.suffix(b % 3)), isPinned: a % 2 == 0)), on: ref)
            }
        case 2:
            let change: Change = isReminder
                ? .editReminder(ReminderPatch(
                    title: b % 3 == 0 ? "edited \(a)" : nil, due: .some(due), repeatRule: b % 2 == 0 ? nil : .some(repeatNames[b % repeatNames.count])))
                : .editNote(NotePatch(title: b % 3 == 0 ? "edited \(a)" : nil, body: titles[a % titles.count], isPinned: b % 2 == 0))
            _ = try? store.perform(change, on: ref)
        case 3, 4: _ = try? store.perform(.complete, on: ref)
        case 5: _ = try? store.perform(.reopen, on: ref)
        case 6:
            // The clocks stay within a day of `start`: a snooze of up to 10 hours is ahead.
            _ = try? store.perform(.snooze(until: Date(millisecondsSince1970: Int64(start) + 3_600_000 * Int64(a + 1))), on: ref)
        case 7: _ = try? store.perform(.tag(add: [tags[a % tags.count]], remove: b % 2 == 0 ? [tags[b % tags.count]] : []), on: ref)
        case 8: _ = try? store.perform(b % 3 == 0 ? .restore : .delete, on: ref)
        case 9, 10:
            // Both replicas edit a record at once (the other one, if it holds it): conflicts once
            // they meet.
            let theirs: Change = isReminder
                ? .editReminder(ReminderPatch(title: "other \(a)", due: .some(due), priority: Priority(rawValue: Int64(b % 4))))
                : .editNote(NotePatch(title: "other \(a)", isPinned: b % 2 == 1))
            _ = try? other.perform(theirs, on: ref)
            let ours: Change = isReminder
                ? .editReminder(ReminderPatch(title: "mine \(b)", priority: Priority(rawValue: Int64(a % 4))))
                : .editNote(NotePatch(title: "mine \(b)", isPinned: a % 2 == 1))
            _ = try? store.perform(ours, on: ref)
        case 11, 12, 18, 19:
            try other.merge(try allOperations(of: store))
            try store.merge(try allOperations(of: other))
        case 13...16 where !held, 17 where a % 2 == 0 && !held:
            // A newer version's writes to records the store holds: a create of ours refuses an id held.
            break
        case 13:
            let priorities: [Int64] = [7, -3, 1000, Int64.min, Int64.max, 4, 255, 256, 0, 2]
            try newer.write(.assign(.priority, .int(priorities[a])), on: ref, into: store)
        case 14:
            let odd = ["", "a\u{1}b", "\u{85}", "x"]
            try newer.write(.addTag(ExactString(odd[a % odd.count])), on: ref, into: store)
        case 15:
            // A rule this version does not know (kept, listed as null), or one written unlike ours.
            try newer.write(.assign(.repeatRule, .string(["yearly", "monthly:07", "monthly:31", "every:2d"][a % 4])), on: ref, into: store)
        case 16:
            // A snooze that has ended, or that ends more than 366 days ahead.
            let until = a % 2 == 0 ? Int64(start) - 86_400_000 : Int64(start) + 400 * 86_400_000
            try newer.write(.assign(.snoozedUntil, .int(until)), on: ref, into: store)
        case 17:
            // A title written empty or blank, or a record's `deleted` alone (its title never
            // written, when the store does not hold it yet).
            if a % 2 == 0 {
                try newer.write(.assign(.title, .string(["", " "][b % 2])), on: ref, into: store)
            } else {
                try newer.write(.assign(.deleted, .bool(b % 2 == 0)), on: ref, into: store)
            }
        default: break
        }
    }

    static func allOperations(of store: ConcordStore) throws -> [Op] {
        var operations: [Op] = []
        try store.forEachOperation { operations.append($0) }
        return operations
    }
}
