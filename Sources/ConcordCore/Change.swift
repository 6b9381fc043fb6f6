import Foundation

/// A new reminder's values.
public struct ReminderDraft: Hashable, Sendable {
    /// The reminder's title.
    public var title: String
    /// Free-form notes, if any.
    public var notes: String?
    /// When the reminder is due, if ever.
    public var due: Date?
    /// How urgent it is; `.none` unless set.
    public var priority: Priority
    /// Tags to add with the reminder.
    public var tags: [String]
    /// `hourly`, `daily`, `weekly` or `monthly` (a monthly rule repeats on the due date's day).
    public var repeatRule: String?
    /// Set to create the reminder already completed at that time (imports, for instance).
    public var completedAt: Date?

    /// A draft with the given values; only the title is required.
    public init(
        title: String, notes: String? = nil, due: Date? = nil, priority: Priority = .none, tags: [String] = [],
        repeatRule: String? = nil, completedAt: Date? = nil
    ) {
        self.title = title
        self.notes = notes
        self.due = due
        self.priority = priority
        self.tags = tags
        self.repeatRule = repeatRule
        self.completedAt = completedAt
    }
}

/// Changes to a reminder's fields; `nil` leaves a field as it is, `.some(nil)` clears it.
public struct ReminderPatch: Hashable, Sendable {
    /// A new title, or `nil` to keep the title.
    public var title: String?
    /// New notes, `.some(nil)` to clear them, or `nil` to keep them.
    public var notes: String??
    /// A new due date, `.some(nil)` to clear it, or `nil` to keep it.
    public var due: Date??
    /// A new priority, or `nil` to keep it.
    public var priority: Priority?
    /// A new repeat rule (as in `ReminderDraft.repeatRule`), `.some(nil)` to stop repeating, or `nil` to keep it.
    public var repeatRule: String??

    /// A patch that sets the given fields and leaves the others (`nil`) as they are.
    public init(
        title: String? = nil, notes: String?? = nil, due: Date?? = nil, priority: Priority? = nil,
        repeatRule: String?? = nil
    ) {
        self.title = title
        self.notes = notes
        self.due = due
        self.priority = priority
        self.repeatRule = repeatRule
    }
}

/// A new note's values.
public struct NoteDraft: Hashable, Sendable {
    /// The note's title.
    public var title: String
    /// The note's text.
    public var body: String
    /// Tags to add with the note.
    public var tags: [String]
    /// Whether the note is pinned.
    public var isPinned: Bool

    /// A draft with the given values; only the title is required.
    public init(title: String, body: String = "", tags: [String] = [], isPinned: Bool = false) {
        self.title = title
        self.body = body
        self.tags = tags
        self.isPinned = isPinned
    }
}

/// Changes to a note's fields; `nil` leaves a field as it is.
public struct NotePatch: Hashable, Sendable {
    /// A new title, or `nil` to keep it.
    public var title: String?
    /// A new body, or `nil` to keep it.
    public var body: String?
    /// Pins (`true`) or unpins (`false`) the note, or `nil` to keep it as it is.
    public var isPinned: Bool?

    /// A patch that sets the given fields and leaves the others (`nil`) as they are.
    public init(title: String? = nil, body: String? = nil, isPinned: Bool? = nil) {
        self.title = title
        self.body = body
        self.isPinned = isPinned
    }
}

/// A user's intent on one record. `plan` turns it into the actions that carry it out, given the
/// record's current state; a replica then stamps each action into an operation.
public enum Change: Hashable, Sendable {
    /// Creates a reminder with the draft's values; the record must not exist.
    case createReminder(ReminderDraft)
    /// Sets the fields the patch names on a reminder.
    case editReminder(ReminderPatch)
    /// Completes ("dismisses") a reminder; a repeating one with a due date moves to its next occurrence instead.
    case complete
    /// Reopens a completed reminder.
    case reopen
    /// Snoozes a reminder until the given instant.
    case snooze(until: Date)
    /// Creates a note with the draft's values; the record must not exist.
    case createNote(NoteDraft)
    /// Sets the fields the patch names on a note.
    case editNote(NotePatch)
    /// Adds and removes tags; removing a tag removes only the adds of it that this replica has seen.
    case tag(add: [String], remove: [String])
    /// Marks the record deleted (a tombstone: it can be restored).
    case delete
    /// Restores a deleted record.
    case restore
    /// Writes `value` into a field whose register is in conflict, settling it: like any local
    /// write, it has seen every head (SPEC.md §5.1). Refused for a deleted record, as edits are,
    /// and for a value of another type than the field's.
    case settle(Field, Value)
    /// Erases the record's content (every value, title, text and tag) on every replica, for good
    /// (SPEC.md §5.7). Unlike `delete`, it cannot be undone. Nothing to do for a purged record.
    case purge
    /// Retires the replica whose `RecordRef.replica(_:)` record it is written to: it no longer
    /// holds back the removes every other replica holds from being dropped, and it refuses to
    /// write or sync until it continues under a new id (SPEC.md §5.8, "Retiring a replica").
    /// Nothing to do for a replica retired already.
    case retire

    /// Whether the change creates its record.
    package var creates: Bool {
        switch self {
        case .createReminder, .createNote: true
        default: false
        }
    }

    /// The longest a reminder can be snoozed: 366 days.
    public static let maxSnoozeMillis: Int64 = 366 * 24 * 3_600_000

    /// The actions that carry the change out on `current` (nil when the record does not exist yet)
    /// at wall-clock time `now` (milliseconds since the epoch). Empty when the record already is as asked.
    package func plan(on ref: RecordRef, current: RecordState?, now: Int64) throws(ChangeError) -> [Action] {
        if let current, current.isPurged {
            if case .purge = self { return [] }
            throw .purged(ref)
        }
        // A replica record takes its retirement and nothing else (SPEC.md §6, "Replica").
        if ref.kind == .replica, self != .retire { throw .wrongKind(ref, expected: .reminder) }
        let actions = try unchecked(on: ref, current: current, now: now)
        try Self.check(actions)
        return actions
    }

    /// Checks what every action of a local write must be, whatever its intent: a value of its
    /// field's type (an instant within the years 1 to 9999, SPEC.md §4.3), a text (string value
    /// or tag) of at most `maxTextBytes`.
    package static func check(_ actions: [Action]) throws(ChangeError) {
        for case let .assign(field, value) in actions where !field.accepts(value) {
            throw .outOfRange(field)
        }
        for action in actions {
            let text: String
            switch action {
            case .assign(_, .string(let string)): text = string
            case .addTag(let tag): text = tag.string
            default: continue
            }
            guard text.utf8.count <= Self.maxTextBytes else { throw .textTooLong(text.utf8.count) }
        }
    }

    /// The longest text (title, notes, body, repeat rule, tag) a local change writes: 8 MiB of
    /// UTF-8, so that every operation fits in a bundle block (at most 16 MiB, SPEC.md §13).
    public static let maxTextBytes = 8 << 20

    private func unchecked(on ref: RecordRef, current: RecordState?, now: Int64) throws(ChangeError) -> [Action] {
        switch self {
        case .createReminder(let draft):
            guard ref.kind == .reminder else { throw .wrongKind(ref, expected: .reminder) }
            guard current == nil else { throw .alreadyExists(ref) }
            try Self.checkTitle(draft.title)
            try Self.checkTags(draft.tags)
            var actions: [Action] = [
                .assign(.title, .string(draft.title)),
                .assign(.notes, draft.notes.map(Value.string) ?? .null),
                .assign(.due, draft.due.map { .int($0.millisecondsSince1970) } ?? .null),
                .assign(.completed, draft.completedAt.map { .int($0.millisecondsSince1970) } ?? .null),
                .assign(.priority, .int(draft.priority.rawValue)),
            ]
            if let name = draft.repeatRule {
                actions.append(.assign(.repeatRule, .string(try Self.rule(named: name, due: draft.due?.millisecondsSince1970).rawValue)))
            }
            actions += Self.uniqueTags(draft.tags).map { .addTag(ExactString($0)) }
            return actions

        case .createNote(let draft):
            guard ref.kind == .note else { throw .wrongKind(ref, expected: .note) }
            guard current == nil else { throw .alreadyExists(ref) }
            try Self.checkTitle(draft.title)
            try Self.checkTags(draft.tags)
            return [
                .assign(.title, .string(draft.title)),
                .assign(.body, .string(draft.body)),
                .assign(.pinned, .bool(draft.isPinned)),
            ] + Self.uniqueTags(draft.tags).map { .addTag(ExactString($0)) }

        case .editReminder(let patch):
            let state = try Self.live(ref, current, kind: .reminder)
            var actions: [Action] = []
            if let title = patch.title {
                try Self.checkTitle(title)
                actions.append(.assign(.title, .string(title)))
            }
            if let notes = patch.notes { actions.append(.assign(.notes, notes.map(Value.string) ?? .null)) }
            let patchedDue: Int64?? = patch.due.map { $0?.millisecondsSince1970 }
            if let due = patchedDue { actions.append(.assign(.due, due.map(Value.int) ?? .null)) }
            if let priority = patch.priority { actions.append(.assign(.priority, .int(priority.rawValue))) }
            let newDue = patchedDue ?? state.value(.due).intValue
            if let rule = patch.repeatRule {
                var value = Value.null
                if let rule { value = .string(try Self.rule(named: rule, due: newDue).rawValue) }
                actions.append(.assign(.repeatRule, value))
            } else if patch.due != nil, let newDue,
                      case .monthly(let day)? = state.value(.repeatRule).stringValue.flatMap(RepeatRule.init(rawValue:)),
                      CivilTime(millis: newDue).day != day {
                // A monthly rule follows its due date's day of the month.
                actions.append(.assign(.repeatRule, .string(RepeatRule.monthly(day: CivilTime(millis: newDue).day).rawValue)))
            }
            return actions

        case .editNote(let patch):
            _ = try Self.live(ref, current, kind: .note)
            var actions: [Action] = []
            if let title = patch.title {
                try Self.checkTitle(title)
                actions.append(.assign(.title, .string(title)))
            }
            if let body = patch.body { actions.append(.assign(.body, .string(body))) }
            if let pinned = patch.isPinned { actions.append(.assign(.pinned, .bool(pinned))) }
            return actions

        case .complete:
            let state = try Self.live(ref, current, kind: .reminder)
            let rule = state.value(.repeatRule).stringValue.flatMap(RepeatRule.init(rawValue:))
            if let rule, let due = state.value(.due).intValue {
                var actions: [Action] = [.assign(.due, .int(rule.next(after: due)))]
                if !state.value(.snoozedUntil).isNull { actions.append(.assign(.snoozedUntil, .null)) }
                return actions
            }
            return state.value(.completed).isNull ? [.assign(.completed, .int(now))] : []

        case .reopen:
            let state = try Self.live(ref, current, kind: .reminder)
            return state.value(.completed).isNull ? [] : [.assign(.completed, .null)]

        case .snooze(let date):
            _ = try Self.live(ref, current, kind: .reminder)
            let until = date.millisecondsSince1970
            guard until > now, until - now <= Self.maxSnoozeMillis else { throw .snoozeOutOfRange }
            return [.assign(.snoozedUntil, .int(until))]

        case .tag(let add, let remove):
            let state = try Self.live(ref, current, kind: ref.kind)
            try Self.checkTags(add + remove)
            var actions: [Action] = []
            for tag in Self.uniqueTags(remove) where !add.contains(where: { $0.utf8.elementsEqual(tag.utf8) }) {
                let dots = state.tags.liveDots(of: ExactString(tag))
                if !dots.isEmpty { actions.append(.removeTag(ExactString(tag), observed: dots)) }
            }
            // An explicit add is always issued, even for a tag already present: it is what lets the
            // user's add win over a remove made concurrently elsewhere.
            for tag in Self.uniqueTags(add) {
                actions.append(.addTag(ExactString(tag)))
            }
            return actions

        case .delete:
            guard let current else { throw .notFound(ref) }
            return current.isDeleted ? [] : [.assign(.deleted, .bool(true))]

        case .restore:
            guard let current else { throw .notFound(ref) }
            return current.isDeleted ? [.assign(.deleted, .bool(false))] : []

        case let .settle(field, value):
            _ = try Self.live(ref, current, kind: ref.kind)
            if field == .title, case .string(let title) = value { try Self.checkTitle(title) }
            return [.assign(field, value)]

        case .purge:
            guard current != nil else { throw .notFound(ref) }
            return [.purge]

        case .retire:
            guard ref.kind == .replica else { throw .wrongKind(ref, expected: .replica) }
            return current?.retires == true ? [] : [.assign(RecordState.retiredField, .bool(true))]
        }
    }

    private static func live(_ ref: RecordRef, _ current: RecordState?, kind: RecordKind) throws(ChangeError) -> RecordState {
        guard ref.kind == kind else { throw .wrongKind(ref, expected: kind) }
        guard let current else { throw .notFound(ref) }
        guard !current.isDeleted else { throw .deleted(ref) }
        return current
    }

    private static func checkTitle(_ title: String) throws(ChangeError) {
        guard title.contains(where: { !$0.isWhitespace }) else { throw .emptyTitle }
    }

    private static func checkTags(_ tags: [String]) throws(ChangeError) {
        for tag in tags {
            guard tag.utf8.count <= maxTextBytes else { throw .textTooLong(tag.utf8.count) }
            guard !tag.isEmpty, !containsControl(tag) else { throw .invalidTag(tag) }
        }
    }

    /// Whether `text` holds a control character (general category Cc: U+0000–U+001F and
    /// U+007F–U+009F), looked for in its UTF-8 bytes: the first two ranges are single bytes, the
    /// third is 0xC2 followed by 0x80–0x9F.
    static func containsControl(_ text: String) -> Bool {
        var previous: UInt8 = 0
        for byte in text.utf8 {
            if byte < 0x20 || byte == 0x7F || (previous == 0xC2 && (0x80...0x9F).contains(byte)) { return true }
            previous = byte
        }
        return false
    }

    private static func uniqueTags(_ tags: [String]) -> [String] {
        // A change names a few tags: comparing each with those before it beats hashing.
        guard tags.count > 8 else {
            return tags.indices.compactMap { index in
                let tag = ExactString(tags[index])
                return tags[..<index].contains { ExactString($0) == tag } ? nil : tags[index]
            }
        }
        var seen = Set<ExactString>()
        return tags.filter { seen.insert(ExactString($0)).inserted }
    }

    private static func rule(named name: String, due: Int64?) throws(ChangeError) -> RepeatRule {
        guard let rule = RepeatRule(name: name, due: due) else { throw .unknownRepeatRule(name) }
        return rule
    }
}

/// A create of an id that the store holds under another kind, refused: a record id names one
/// record whatever its kind (SPEC.md §2). Apart from `ChangeError`, whose cases are public API.
package struct IDOfAnotherKind: Error, Hashable, Sendable, CustomStringConvertible {
    /// The record the create was for.
    package var ref: RecordRef
    /// The kind of the record held under its id.
    package var heldAs: RecordKind

    package init(ref: RecordRef, heldAs: RecordKind) {
        self.ref = ref
        self.heldAs = heldAs
    }

    package var description: String {
        "the store holds a \(heldAs.name) with id \(ref.id.hex); a \(ref.kind.name) cannot have the same id"
    }
}

/// Why a local change was refused (SPEC.md §7); nothing was written.
public enum ChangeError: Error, Hashable, CustomStringConvertible {
    /// The record does not exist.
    case notFound(RecordRef)
    /// A create names a record that exists already.
    case alreadyExists(RecordRef)
    /// The record is deleted; it must be restored first.
    case deleted(RecordRef)
    /// The record is not of the kind the change is for.
    case wrongKind(RecordRef, expected: RecordKind)
    /// The title is empty or only whitespace.
    case emptyTitle
    /// A tag is empty or has control characters.
    case invalidTag(String)
    /// A repeat rule other than hourly, daily, weekly or monthly.
    case unknownRepeatRule(String)
    /// A snooze that ends by now, or more than 366 days from now (SPEC.md §6.2).
    case snoozeOutOfRange
    /// A date of this field outside the years 1 to 9999.
    case outOfRange(Field)
    /// A text over `Change.maxTextBytes` of UTF-8; the value is its length in bytes.
    case textTooLong(Int)
    /// The record was purged: its content is erased, and it takes no change (SPEC.md §5.7).
    case purged(RecordRef)
    /// This replica was retired by another: it takes no write until it continues under a new id
    /// (SPEC.md §5.8, "Retiring a replica").
    case retired(ReplicaID)
    /// A replica cannot retire itself: another one retires it.
    case retiringItself

    /// The message.
    public var description: String {
        switch self {
        case .notFound(let ref): "no \(ref.kind.name) with id \(ref.id.hex)"
        case .alreadyExists(let ref): "a \(ref.kind.name) with id \(ref.id.hex) already exists"
        case .deleted(let ref): "\(ref.kind.name) \(ref.id.hex) is deleted; restore it first"
        case .wrongKind(let ref, let expected): "\(ref.id.hex) is a \(ref.kind.name), not a \(expected.name)"
        case .emptyTitle: "the title is empty"
        case .invalidTag(let tag): "invalid tag \"\(escapingControlCharacters(tag))\": tags are non-empty and have no control characters"
        case .unknownRepeatRule(let name): "unknown repeat rule '\(name)' (expected hourly, daily, weekly or monthly)"
        case .snoozeOutOfRange: "a snooze must end after now and at most 366 days from now"
        case .outOfRange(let field): "the \(field.name) date is outside the years 1 to 9999"
        case .textTooLong(let bytes): "the text is too long: \(bytes) bytes, at most \(Change.maxTextBytes) (8 MiB)"
        case .purged(let ref): "\(ref.kind.name) \(ref.id.hex) was purged: its content is erased for good"
        case .retired(let replica): "replica \(replica.hex) was retired by another replica: it writes and syncs no more until it continues under a new id"
        case .retiringItself: "a replica cannot retire itself; retire it from another replica"
        }
    }
}
