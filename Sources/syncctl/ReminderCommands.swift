import ArgumentParser
import ConcordCore
import ConcordStore
import Foundation

struct ReminderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reminder",
        abstract: "Add, change and list reminders.",
        subcommands: [
            Add.self, Edit.self, Complete.self, Reopen.self, Snooze.self, TagCommand<ReminderKind>.self,
            DeleteCommand<ReminderKind>.self, RestoreCommand<ReminderKind>.self, PurgeCommand<ReminderKind>.self, List.self, Due.self,
        ])

    struct Add: OneShotCommand {
        static let configuration = CommandConfiguration(abstract: "Add a reminder and print its id.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The title.") var title: String
        @Option(help: "Notes.") var notes: String?
        @Option(help: "When it is due (ISO 8601).") var due: DateArgument?
        @Option(help: "none, low, medium or high.") var priority: Priority = .none
        @Option(name: .customLong("tag"), help: "A tag (repeatable).") var tags: [String] = []
        @Option(name: .customLong("repeat"), help: "hourly, daily, weekly or monthly.") var repeatRule: RepeatArgument?

        func work() throws {
            let id = try store.open().addReminder(ReminderDraft(
                title: title, notes: notes, due: due?.date, priority: priority, tags: tags, repeatRule: repeatRule?.name))
            say(id.hex)
        }
    }

    struct Edit: OneShotCommand {
        static let configuration = CommandConfiguration(abstract: "Change a reminder's fields.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The reminder's id or a unique prefix.") var id: String
        @Option var title: String?
        @Option var notes: String?
        @Option(help: "When it is due (ISO 8601).") var due: DateArgument?
        @Flag(help: "Remove the due date.") var noDue = false
        @Option var priority: Priority?
        @Option(name: .customLong("repeat"), help: "hourly, daily, weekly or monthly.") var repeatRule: RepeatArgument?
        @Flag(name: .customLong("no-repeat"), help: "Stop repeating.") var noRepeat = false

        func validate() throws {
            if due != nil, noDue { throw ValidationError("--due and --no-due cannot be combined") }
            if repeatRule != nil, noRepeat { throw ValidationError("--repeat and --no-repeat cannot be combined") }
            if title == nil, notes == nil, due == nil, !noDue, priority == nil, repeatRule == nil, !noRepeat {
                throw ValidationError("nothing to change: give --title, --notes, --due, --no-due, --priority, --repeat or --no-repeat")
            }
        }

        func work() throws {
            let store = try store.open()
            let ref = try store.resolve(id, kind: .reminder)
            var patch = ReminderPatch(title: title, priority: priority)
            if let notes { patch.notes = .some(notes) }
            if let due { patch.due = .some(due.date) } else if noDue { patch.due = .some(nil) }
            if let repeatRule { patch.repeatRule = .some(repeatRule.name) } else if noRepeat { patch.repeatRule = .some(nil) }
            try store.editReminder(ref.id, patch)
        }
    }

    struct Complete: OneShotCommand {
        static let configuration = CommandConfiguration(
            abstract: "Complete (dismiss) a reminder; a repeating one moves to its next occurrence.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The reminder's id or a unique prefix.") var id: String

        func work() throws {
            let store = try store.open()
            try store.completeReminder(try store.resolve(id, kind: .reminder).id)
        }
    }

    struct Reopen: OneShotCommand {
        static let configuration = CommandConfiguration(abstract: "Reopen a completed reminder.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The reminder's id or a unique prefix.") var id: String

        func work() throws {
            let store = try store.open()
            try store.reopenReminder(try store.resolve(id, kind: .reminder).id)
        }
    }

    struct Snooze: OneShotCommand {
        static let configuration = CommandConfiguration(abstract: "Snooze a reminder (1 minute to 366 days).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The reminder's id or a unique prefix.") var id: String
        @Option(help: "For this many minutes (1 to 527040).") var minutes: Int?
        @Option(help: "Until this time (ISO 8601).") var until: DateArgument?

        func validate() throws {
            guard (minutes == nil) != (until == nil) else { throw ValidationError("give exactly one of --minutes and --until") }
            if let minutes, !(1...527_040).contains(minutes) {
                throw ValidationError("--minutes must be from 1 to 527040 (366 days), not \(minutes)")
            }
        }

        func work() throws {
            let store = try store.open()
            let ref = try store.resolve(id, kind: .reminder)
            let end = until?.date ?? Date().addingTimeInterval(TimeInterval(minutes! * 60))
            try store.snoozeReminder(ref.id, until: end)
        }
    }

    struct List: OneShotCommand {
        static let configuration = CommandConfiguration(abstract: "List open reminders (--all: completed and deleted too).")
        @OptionGroup var store: StoreOptions
        @Flag(help: "Include completed and deleted reminders.") var all = false
        @OptionGroup var output: JSONFlag

        func work() throws {
            let reminders = try store.open().reminders(includeCompleted: all, includeDeleted: all)
            Output.printReminders(reminders, json: output.json)
        }
    }

    struct Due: OneShotCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the reminders that should alert at a time: due by then, open, not snoozed past it.")
        @OptionGroup var store: StoreOptions
        @Option(help: "The time (ISO 8601); default now.") var at: DateArgument?
        @OptionGroup var output: JSONFlag

        func work() throws {
            let reminders = try store.open().dueReminders(at: at?.date ?? Date())
            Output.printReminders(reminders, json: output.json)
        }
    }
}
