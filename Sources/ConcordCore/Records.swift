import Foundation

/// How urgent a reminder is. Values other than 0...3 (from a newer version) are kept as they are.
public struct Priority: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The stored number: 0 none, 1 low, 2 medium, 3 high.
    public let rawValue: Int64
    /// The priority with this stored number, known or not.
    public init(rawValue: Int64) { self.rawValue = rawValue }

    /// No priority.
    public static let none = Priority(rawValue: 0)
    /// Low priority.
    public static let low = Priority(rawValue: 1)
    /// Medium priority.
    public static let medium = Priority(rawValue: 2)
    /// High priority.
    public static let high = Priority(rawValue: 3)

    /// Parses `none`, `low`, `medium` or `high`.
    public init?(name: String) {
        switch name {
        case "none": self = .none
        case "low": self = .low
        case "medium": self = .medium
        case "high": self = .high
        default: return nil
        }
    }

    /// `none`, `low`, `medium`, `high`, or the number for a priority this version does not know.
    public var name: String {
        switch rawValue {
        case 0: "none"
        case 1: "low"
        case 2: "medium"
        case 3: "high"
        default: String(rawValue)
        }
    }

    /// The priority's name.
    public var description: String { name }
}

extension Date {
    /// The instant `millis` milliseconds after the Unix epoch.
    public init(millisecondsSince1970 millis: Int64) {
        self.init(timeIntervalSince1970: Double(millis) / 1000)
    }

    /// Milliseconds since the Unix epoch, rounded to the nearest millisecond (clamped to what an
    /// `Int64` holds; dates that far out are refused by `Field.accepts` anyway).
    public var millisecondsSince1970: Int64 {
        let millis = (timeIntervalSince1970 * 1000).rounded()
        guard millis.isFinite else { return millis > 0 ? .max : .min }
        return Int64(exactly: millis) ?? (millis > 0 ? .max : .min)
    }
}

/// A reminder as an app shows it: the current value of each of its registers.
public struct Reminder: Hashable, Sendable, Codable, Identifiable {
    /// The record's id.
    public var id: RecordID
    /// The title.
    public var title: String
    /// Free-form notes, if any.
    public var notes: String?
    /// When it is due, if ever.
    public var due: Date?
    /// How urgent it is.
    public var priority: Priority
    /// When it was completed; `nil` while it is open.
    public var completedAt: Date?
    /// Until when it is snoozed, if it is: it does not alert before then.
    public var snoozedUntil: Date?
    /// The stored repeat rule (`nil` when it does not repeat, or repeats by a rule this version does not know).
    public var repeatRule: RepeatRule?
    /// Its tags.
    public var tags: [String]
    /// Whether it is deleted (a tombstone that `restore` undoes).
    public var isDeleted: Bool
    /// Whether a field of it was written on replicas that had not seen each other's write, and
    /// keeps the competing values until one write settles it (SPEC.md §5.1; `ConcordStore.conflicts()`).
    public var isInConflict = false

    /// Whether it is completed.
    public var isCompleted: Bool { completedAt != nil }

    /// The reminder its record's state shows (the state must be a reminder's).
    package init(state: RecordState) {
        precondition(state.ref.kind == .reminder)
        id = state.ref.id
        title = state.value(.title).stringValue ?? ""
        notes = state.value(.notes).stringValue
        due = state.value(.due).intValue.map(Date.init(millisecondsSince1970:))
        priority = Priority(rawValue: state.value(.priority).intValue ?? 0)
        completedAt = state.value(.completed).intValue.map(Date.init(millisecondsSince1970:))
        snoozedUntil = state.value(.snoozedUntil).intValue.map(Date.init(millisecondsSince1970:))
        repeatRule = state.value(.repeatRule).stringValue.flatMap(RepeatRule.init(rawValue:))
        tags = state.tags.present.map(\.string)
        isDeleted = state.isDeleted
        isInConflict = state.inConflict
    }

    /// A reminder with these values, as a preview or a test builds one; a store makes its own from its records.
    public init(
        id: RecordID, title: String, notes: String?, due: Date?, priority: Priority, completedAt: Date?,
        snoozedUntil: Date?, repeatRule: RepeatRule?, tags: [String], isDeleted: Bool, isInConflict: Bool = false
    ) {
        self.id = id
        self.title = title
        self.notes = notes
        self.due = due
        self.priority = priority
        self.completedAt = completedAt
        self.snoozedUntil = snoozedUntil
        self.repeatRule = repeatRule
        self.tags = tags
        self.isDeleted = isDeleted
        self.isInConflict = isInConflict
    }

    /// Whether the reminder should alert at `instant`: due at or before it, open, not deleted,
    /// and not snoozed past it.
    public func isDue(at instant: Date) -> Bool {
        guard let due, due <= instant, !isCompleted, !isDeleted else { return false }
        if let snoozedUntil, snoozedUntil > instant { return false }
        return true
    }
}

/// A note as an app shows it.
public struct Note: Hashable, Sendable, Codable, Identifiable {
    /// The record's id.
    public var id: RecordID
    /// The title.
    public var title: String
    /// The text.
    public var body: String
    /// Whether it is pinned.
    public var isPinned: Bool
    /// Its tags.
    public var tags: [String]
    /// Whether it is deleted (a tombstone that `restore` undoes).
    public var isDeleted: Bool
    /// Whether a field of it is in conflict (as `Reminder.isInConflict`).
    public var isInConflict = false

    /// The note its record's state shows (the state must be a note's).
    package init(state: RecordState) {
        precondition(state.ref.kind == .note)
        id = state.ref.id
        title = state.value(.title).stringValue ?? ""
        body = state.value(.body).stringValue ?? ""
        isPinned = state.value(.pinned).boolValue ?? false
        tags = state.tags.present.map(\.string)
        isDeleted = state.isDeleted
        isInConflict = state.inConflict
    }

    /// A note with these values, as a preview or a test builds one; a store makes its own from its records.
    public init(id: RecordID, title: String, body: String, isPinned: Bool, tags: [String], isDeleted: Bool, isInConflict: Bool = false) {
        self.id = id
        self.title = title
        self.body = body
        self.isPinned = isPinned
        self.tags = tags
        self.isDeleted = isDeleted
        self.isInConflict = isInConflict
    }
}

extension RepeatRule: Codable {
    /// Decodes the stored form (`rawValue`).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        guard let rule = RepeatRule(rawValue: raw) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "unknown repeat rule \(raw)")
        }
        self = rule
    }

    /// Encodes the stored form (`rawValue`).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

// Values encoded before `isInConflict` existed decode as not in conflict.

extension Reminder {
    /// Decodes a reminder; one encoded without `isInConflict` is not in conflict.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try container.decode(RecordID.self, forKey: .id), title: try container.decode(String.self, forKey: .title),
            notes: try container.decodeIfPresent(String.self, forKey: .notes), due: try container.decodeIfPresent(Date.self, forKey: .due),
            priority: try container.decode(Priority.self, forKey: .priority),
            completedAt: try container.decodeIfPresent(Date.self, forKey: .completedAt),
            snoozedUntil: try container.decodeIfPresent(Date.self, forKey: .snoozedUntil),
            repeatRule: try container.decodeIfPresent(RepeatRule.self, forKey: .repeatRule),
            tags: try container.decode([String].self, forKey: .tags), isDeleted: try container.decode(Bool.self, forKey: .isDeleted),
            isInConflict: try container.decodeIfPresent(Bool.self, forKey: .isInConflict) ?? false)
    }
}

extension Note {
    /// Decodes a note; one encoded without `isInConflict` is not in conflict.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try container.decode(RecordID.self, forKey: .id), title: try container.decode(String.self, forKey: .title),
            body: try container.decode(String.self, forKey: .body), isPinned: try container.decode(Bool.self, forKey: .isPinned),
            tags: try container.decode([String].self, forKey: .tags), isDeleted: try container.decode(Bool.self, forKey: .isDeleted),
            isInConflict: try container.decodeIfPresent(Bool.self, forKey: .isInConflict) ?? false)
    }
}
