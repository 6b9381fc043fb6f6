import ArgumentParser
import ConcordCore
import ConcordStore
import Foundation

/// `syncctl import FILE [--json]`: reminders and notes from the JSON form `reminder list --json`
/// and `note list --json` print, created as local writes (SPEC.md §10, "Import form"; §11).
struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the reminders and notes of a JSON file (as 'reminder list --json' prints them).",
        discussion: """
            Each line of FILE is a JSON array of reminder and note objects, or one object. A record \
            whose id the store already holds is left as it is, so importing a file again creates \
            nothing new. The whole file is checked first: a wrong value is refused with its line, \
            record and field, and nothing is written.
            """)
    @OptionGroup var store: StoreOptions
    @Argument(help: "The file to import.") var file: String
    @OptionGroup var output: JSONFlag

    func run() throws {
        // The file is read whole before the store is opened: FILE might name one of the store's
        // own files, and a descriptor of it closed while this process holds a connection would
        // drop SQLite's locks on it.
        let records = try Self.read(file, makeID: try StoreOptions.environment().makeRecordID)
        let store = try store.open()
        let summary = try Self.create(records, in: store)
        if output.json {
            say(JSON.object([
                ("alreadyHeld", .int(Int64(summary.held))), ("notes", .int(Int64(summary.notes))),
                ("reminders", .int(Int64(summary.reminders))),
            ]).canonical)
        } else {
            say("imported \(summary.reminders) reminder\(summary.reminders == 1 ? "" : "s") and \(summary.notes) note\(summary.notes == 1 ? "" : "s")"
                + (summary.held > 0 ? " (\(summary.held) already held)" : ""))
        }
    }

    /// What an import did.
    struct Summary {
        var reminders = 0
        var notes = 0
        var held = 0
    }

    /// Creates the records the store does not hold yet.
    static func create(_ records: [ImportedRecord], in store: ConcordStore) throws -> Summary {
        var changes: [(RecordRef, Change)] = []
        var (reminders, notes, held) = (0, 0, 0)
        for record in records {
            if try record.isHeld(in: store) {
                held += 1
                continue
            }
            changes += record.changes
            if record.ref.kind == RecordKind.reminder { reminders += 1 } else { notes += 1 }
        }
        // Each record alone against an empty store first, so that a refusal names its record;
        // then all of them in one transaction.
        let scratch = try ConcordStore.inMemory()
        for record in records {
            do {
                try scratch.perform(record.changes)
            } catch let error as ConcordError {
                throw ImportError(record.place + ": " + error.message)
            }
        }
        if !changes.isEmpty { try store.perform(changes) }
        return Summary(reminders: reminders, notes: notes, held: held)
    }

    /// Every record of the file, checked; the first wrong one is refused with its place.
    static func read(_ file: String, makeID: () -> RecordID) throws -> [ImportedRecord] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: file))
        } catch {
            throw ImportError("cannot read \(file): \(error.localizedDescription)")
        }
        var records: [ImportedRecord] = []
        var ids: Set<RecordRef> = []
        for (index, line) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            guard !line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) else { continue }
            let lineNumber = index + 1
            let value: Any
            do {
                value = try JSONSerialization.jsonObject(with: Data(line), options: [])
            } catch {
                throw ImportError("\(file) line \(lineNumber): not JSON")
            }
            let objects: [Any] = (value as? [Any]) ?? [value]
            for (position, object) in objects.enumerated() {
                let place = "\(file) line \(lineNumber), record \(position + 1)"
                let record = try ImportedRecord(object, place: place, makeID: makeID)
                guard ids.insert(record.ref).inserted else { throw ImportError("\(place): id: \(record.ref.id.hex) is given twice") }
                records.append(record)
            }
        }
        return records
    }
}

/// A reminder or a note of an import file, as the changes that create it (SPEC.md §10).
struct ImportedRecord {
    let ref: RecordRef
    let changes: [(RecordRef, Change)]
    /// Where it is in the file, for an error: `FILE line L, record R`.
    let place: String

    /// The fields of a record object as `reminder list --json` and `note list --json` print them.
    private struct Fields: Decodable {
        var kind: String?
        var id: String?
        var title: String?
        var notes: String?
        var due: String?
        var priority: PriorityValue?
        var completed: Bool?
        var completedAt: String?
        var snoozedUntil: String?
        var `repeat`: String?
        var tags: [String]?
        var deleted: Bool?
        var body: String?
        var pinned: Bool?
    }

    /// A priority by name or by number.
    private enum PriorityValue: Decodable {
        case name(String)
        case number(Int)

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let name = try? container.decode(String.self) {
                self = .name(name)
            } else {
                self = .number(try container.decode(Int.self))
            }
        }
    }

    init(_ value: Any, place: String, makeID: () -> RecordID) throws {
        self.place = place
        func fail(_ field: String, _ problem: String) -> ImportError { ImportError("\(place): \(field): \(problem)") }
        guard value is [String: Any] else { throw ImportError("\(place): not an object") }
        let fields: Fields
        do {
            fields = try JSONDecoder().decode(Fields.self, from: try JSONSerialization.data(withJSONObject: value))
        } catch let DecodingError.typeMismatch(type, context) {
            let field = context.codingPath.first?.stringValue ?? "?"
            throw fail(field, field == "priority" ? "must be none, low, medium, high or an integer" : "must be \(Self.describe(type))")
        } catch {
            throw ImportError("\(place): not a record object")
        }
        func instant(_ text: String?, _ field: String) throws -> Date? {
            guard let text else { return nil }
            guard text.hasSuffix("Z"), let date = DateArgument.parse(text) else { throw fail(field, "must be an instant such as 2026-11-25T09:30:00.000Z") }
            return date
        }
        guard let kind = fields.kind else { throw fail("kind", "missing") }
        guard kind == "reminder" || kind == "note" else { throw fail("kind", "must be \"reminder\" or \"note\"") }
        let id: RecordID
        if let text = fields.id {
            guard let parsed = RecordID(hex: text), parsed.hex == text else { throw fail("id", "must be 32 lower-case hex digits") }
            id = parsed
        } else {
            id = makeID()
        }
        guard let title = fields.title else { throw fail("title", "missing") }
        let tags = fields.tags ?? []
        var changes: [(RecordRef, Change)]
        if kind == "reminder" {
            ref = .reminder(id)
            let priority: Priority
            switch fields.priority {
            case nil: priority = .none
            case .name(let name)?:
                guard let named = Priority(name: name) else { throw fail("priority", "must be none, low, medium, high or an integer") }
                priority = named
            case .number(let number)?:
                guard (0...255).contains(number) else { throw fail("priority", "must be none, low, medium, high or an integer") }
                priority = Priority(rawValue: Int64(number))
            }
            let completed = fields.completed ?? false
            let completedAt = completed ? try instant(fields.completedAt, "completedAt") ?? Date() : nil
            let draft = ReminderDraft(
                title: title, notes: fields.notes, due: try instant(fields.due, "due"), priority: priority, tags: tags,
                repeatRule: fields.repeat, completedAt: completedAt)
            changes = [(ref, .createReminder(draft))]
            // A snooze that has ended changes nothing now (and §6.2 refuses one that ends by now):
            // a list exported a while ago still imports.
            if let snoozed = try instant(fields.snoozedUntil, "snoozedUntil"), snoozed > Date() {
                changes.append((ref, .snooze(until: snoozed)))
            }
        } else {
            ref = .note(id)
            changes = [(ref, .createNote(NoteDraft(title: title, body: fields.body ?? "", tags: tags, isPinned: fields.pinned ?? false)))]
        }
        if fields.deleted ?? false { changes.append((ref, .delete)) }
        self.changes = changes
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is Bool.Type: "true or false"
        case is [String].Type, is [Any].Type: "an array of strings"
        default: "a string"
        }
    }

    /// Whether the store holds a record under its id already (imported before, or made there).
    func isHeld(in store: ConcordStore) throws -> Bool {
        ref.kind == RecordKind.reminder ? try store.reminder(ref.id) != nil : try store.note(ref.id) != nil
    }
}

struct ImportError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
