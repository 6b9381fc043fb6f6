import ConcordCore
import ConcordStore
import Foundation

/// Human-readable and JSON renderings of what syncctl prints.
enum Output {
    static func instant(_ date: Date?) -> String {
        date.map { CivilTime(millis: $0.millisecondsSince1970).iso8601 } ?? "-"
    }

    static func printReminders(_ reminders: [Reminder], json: Bool) {
        if json {
            say(JSON.array(reminders.map(\.json)).canonical)
            return
        }
        for reminder in reminders {
            let state = reminder.isDeleted ? "deleted" : reminder.isCompleted ? "done" : "open"
            var line = "\(reminder.id.hex)  \(state.padding(toLength: 7, withPad: " ", startingAt: 0))  "
                + "\(instant(reminder.due).padding(toLength: 24, withPad: " ", startingAt: 0))  "
                + "\(reminder.priority.name.padding(toLength: 6, withPad: " ", startingAt: 0))  \(reminder.title)"
            if !reminder.tags.isEmpty { line += "  " + reminder.tags.map { "#" + $0 }.joined(separator: " ") }
            say(line)
        }
    }

    static func printNotes(_ notes: [Note], json: Bool) {
        if json {
            say(JSON.array(notes.map(\.json)).canonical)
            return
        }
        for note in notes {
            var line = "\(note.id.hex)  \(note.isDeleted ? "deleted" : note.isPinned ? "pinned " : "       ")  \(note.title)"
            if !note.tags.isEmpty { line += "  " + note.tags.map { "#" + $0 }.joined(separator: " ") }
            say(line)
        }
    }

    static func details(of reminder: Reminder) -> String {
        [
            "reminder  \(reminder.id.hex)",
            "title     \(reminder.title)",
            "notes     \(reminder.notes ?? "-")",
            "due       \(instant(reminder.due))",
            "priority  \(reminder.priority.name)",
            "completed \(instant(reminder.completedAt))",
            "snoozed   \(instant(reminder.snoozedUntil))",
            "repeat    \(reminder.repeatRule?.rawValue ?? "-")",
            "tags      \(reminder.tags.isEmpty ? "-" : reminder.tags.joined(separator: ", "))",
            "deleted   \(reminder.isDeleted ? "yes" : "no")",
        ].joined(separator: "\n") + conflictLine(reminder.isInConflict)
    }

    /// A line under a record's details when a field of it is in conflict.
    private static func conflictLine(_ inConflict: Bool) -> String {
        inConflict ? "\nconflict  yes: 'syncctl conflicts' lists the values, 'syncctl resolve' settles them" : ""
    }

    static func details(of note: Note) -> String {
        [
            "note      \(note.id.hex)",
            "title     \(note.title)",
            "pinned    \(note.isPinned ? "yes" : "no")",
            "tags      \(note.tags.isEmpty ? "-" : note.tags.joined(separator: ", "))",
            "deleted   \(note.isDeleted ? "yes" : "no")",
        ].joined(separator: "\n") + conflictLine(note.isInConflict) + "\n\n" + note.body
    }

    static func text(of status: StoreStatus) -> String {
        var lines = [
            "replica   \(status.replicaID.hex)\(status.name.isEmpty ? "" : " (\(status.name))")",
            "store     \(status.path)",
            "reminders \(status.openReminders) open, \(status.completedReminders) completed, \(status.deletedReminders) deleted",
            "notes     \(status.notes) live, \(status.deletedNotes) deleted",
            "log       \(status.operations) operations",
            "version vector:",
        ]
        for (replica, seq) in status.versionVector.sorted {
            lines.append("  \(replica.hex)  \(seq)\(replica == status.replicaID ? "  (this replica)" : "")")
        }
        return lines.joined(separator: "\n")
    }

    /// One line of `syncctl log`. A record shows the last 8 digits of its id: ids are
    /// time-ordered, so their first digits are shared by records made close together.
    static func text(of operation: Op) -> String {
        let what: String
        switch operation.action {
        case let .assign(field, value): what = "\(field.name) = \(JSON(value).canonical)"
        case let .addTag(tag): what = "tag +\(JSON.string(tag.string).canonical)"
        case let .removeTag(tag, observed): what = "tag -\(JSON.string(tag.string).canonical) (removes \(observed.count) add\(observed.count == 1 ? "" : "s"))"
        case .purge: what = "purge"
        case .elided: what = "(elided: its record was purged)"
        }
        return "\(CivilTime(millis: Int64(operation.timestamp.physicalMillis)).iso8601)  \(operation.id.replica.hex.prefix(8)):\(operation.id.seq)  \(operation.record.kind.name) …\(operation.record.id.hex.suffix(8))  \(what)"
    }
}
