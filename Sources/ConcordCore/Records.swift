import Foundation

/// How urgent a reminder is. Values other than 0...3 (from a newer version) are kept as they are.
public struct Priority: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }

    public static let none = Priority(rawValue: 0)
    public static let low = Priority(rawValue: 1)
    public static let medium = Priority(rawValue: 2)
    public static let high = Priority(rawValue: 3)

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
    public var id: RecordID
    public var title: String
    public var notes: String?
    public var due: Date?
    public var priority: Priority
    /// When it was completed; `nil` while it is open.
    public var completedAt: Date?
    public var snoozedUntil: Date?
    /// The stored repeat rule (`nil` when it does not repeat, or repeats by a rule this version does not know).
    public var repeatRule: RepeatRule?
    public var tags: [String]
    public var isDeleted: Bool

    public var isCompleted: Bool { completedAt != nil }

    public init(state: RecordState) {
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
    }

    public init(
        id: RecordID, title: String, notes: String?, due: Date?, priority: Priority, completedAt: Date?,
        snoozedUntil: Date?, repeatRule: RepeatRule?, tags: [String], isDeleted: Bool
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
    public var id: RecordID
    public var title: String
    public var body: String
    public var isPinned: Bool
    public var tags: [String]
    public var isDeleted: Bool

    public init(state: RecordState) {
        precondition(state.ref.kind == .note)
        id = state.ref.id
        title = state.value(.title).stringValue ?? ""
        body = state.value(.body).stringValue ?? ""
        isPinned = state.value(.pinned).boolValue ?? false
        tags = state.tags.present.map(\.string)
        isDeleted = state.isDeleted
    }

    public init(id: RecordID, title: String, body: String, isPinned: Bool, tags: [String], isDeleted: Bool) {
        self.id = id
        self.title = title
        self.body = body
        self.isPinned = isPinned
        self.tags = tags
        self.isDeleted = isDeleted
    }
}

extension RepeatRule: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        guard let rule = RepeatRule(rawValue: raw) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "unknown repeat rule \(raw)")
        }
        self = rule
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
