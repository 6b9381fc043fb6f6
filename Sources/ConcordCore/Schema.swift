/// What a record is. Kinds this version does not know are kept and passed on as they are.
public struct RecordKind: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The kind's code in the formats: 1 reminder, 2 note, 3 replica.
    public let rawValue: UInt8

    /// The kind with this code, known or not.
    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// A reminder.
    public static let reminder = RecordKind(rawValue: 1)
    /// A note.
    public static let note = RecordKind(rawValue: 2)
    /// A replica's standing among the others: whether it was retired (SPEC.md §5.8, "Retiring a
    /// replica"). Its id is the replica's, and its one field, `retired`, is carried by name, so
    /// that builds before it keep and pass it on as a record of a kind they do not know.
    public static let replica = RecordKind(rawValue: 3)

    /// The fields this version materializes for the kind; any other field is kept as an unknown field.
    public var knownFields: [Field] {
        switch self {
        case .reminder: [.title, .notes, .due, .priority, .completed, .snoozedUntil, .repeatRule, .deleted]
        case .note: [.title, .body, .pinned, .deleted]
        default: []
        }
    }

    /// How many fields the kind knows: the length of `knownFields`.
    public var knownFieldCount: Int {
        switch self {
        case .reminder: 8
        case .note: 4
        default: 0
        }
    }

    /// Where `field` is in `knownFields`, nil if the kind does not know it.
    @inline(__always)
    public func slot(of field: Field) -> Int? {
        switch self {
        case .reminder:
            let code = field.code
            return code >= 1 && code <= 8 ? Int(code) - 1 : nil
        case .note:
            switch field {
            case .title: return 0
            case .body: return 1
            case .pinned: return 2
            case .deleted: return 3
            default: return nil
            }
        default:
            return nil
        }
    }

    /// Whether `field` is one of the kind's `knownFields`.
    public func knows(_ field: Field) -> Bool {
        switch self {
        case .reminder: field.code >= 1 && field.code <= 8
        case .note: field == .title || field == .body || field == .pinned || field == .deleted
        default: false
        }
    }

    /// `reminder`, `note`, or `kind-N` for a kind this version does not know.
    public var name: String {
        switch self {
        case .reminder: "reminder"
        case .note: "note"
        case .replica: "replica"
        default: "kind-\(rawValue)"
        }
    }

    /// The kind's name.
    public var description: String { name }

    /// Kinds order by their code.
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A record's identity: its kind and its id.
public struct RecordRef: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// What the record is.
    public var kind: RecordKind
    /// Which record it is.
    public var id: RecordID

    /// The record of this kind with this id.
    public init(kind: RecordKind, id: RecordID) {
        self.kind = kind
        self.id = id
    }

    /// The reminder with this id.
    public static func reminder(_ id: RecordID) -> RecordRef { RecordRef(kind: .reminder, id: id) }
    /// The record that says whether `replica` was retired.
    public static func replica(_ replica: ReplicaID) -> RecordRef {
        RecordRef(kind: .replica, id: RecordID(high: replica.high, low: replica.low))
    }
    /// The note with this id.
    public static func note(_ id: RecordID) -> RecordRef { RecordRef(kind: .note, id: id) }

    /// Records order by id, then by kind.
    public static func < (lhs: Self, rhs: Self) -> Bool { (lhs.id, lhs.kind) < (rhs.id, rhs.kind) }

    /// The kind's name and the id in hex, as in `reminder 0123…`.
    public var description: String { "\(kind.name) \(id.hex)" }
}

/// A field of a record. Known fields have a one-byte code (used by the binary formats); any other
/// field name is carried as `.other(name)`.
public enum Field: Hashable, Sendable, CustomStringConvertible {
    /// A reminder's or a note's title (a string).
    case title
    /// A reminder's notes (a string).
    case notes
    /// A reminder's due instant (an integer of milliseconds).
    case due
    /// A reminder's priority (an integer).
    case priority
    /// When a reminder was completed (an integer of milliseconds), null while it is open.
    case completed
    /// Until when a reminder is snoozed (an integer of milliseconds).
    case snoozedUntil
    /// A reminder's repeat rule (a string, `RepeatRule.rawValue`).
    case repeatRule
    /// Whether the record is deleted (a flag).
    case deleted
    /// A note's text (a string).
    case body
    /// Whether a note is pinned (a flag).
    case pinned
    /// A field this version does not know, by name: kept and passed on as it is.
    case other(ExactString)

    /// The code of a known field in the binary formats (SPEC.md, "Field codes"); 0 for `.other`.
    public var code: UInt8 {
        switch self {
        case .title: 1
        case .notes: 2
        case .due: 3
        case .priority: 4
        case .completed: 5
        case .snoozedUntil: 6
        case .repeatRule: 7
        case .deleted: 8
        case .body: 9
        case .pinned: 10
        case .other: 0
        }
    }

    /// The greatest code of a known field: codes run from 1 to it.
    public static let maxKnownCode: UInt8 = 10

    /// The instants a field may hold: 0001-01-01T00:00:00.000Z through 9999-12-31T23:59:59.999Z.
    public static let instantRange: ClosedRange<Int64> = -62_135_596_800_000...253_402_300_799_999

    /// The known field with this code; nil for 0 or a code this version does not know.
    public init?(code: UInt8) {
        switch code {
        case 1: self = .title
        case 2: self = .notes
        case 3: self = .due
        case 4: self = .priority
        case 5: self = .completed
        case 6: self = .snoozedUntil
        case 7: self = .repeatRule
        case 8: self = .deleted
        case 9: self = .body
        case 10: self = .pinned
        default: return nil
        }
    }

    /// The field's name in JSON and in the binary formats.
    public var name: String {
        switch self {
        case .title: "title"
        case .notes: "notes"
        case .due: "due"
        case .priority: "priority"
        case .completed: "completed"
        case .snoozedUntil: "snoozedUntil"
        case .repeatRule: "repeat"
        case .deleted: "deleted"
        case .body: "body"
        case .pinned: "pinned"
        case .other(let name): name.string
        }
    }

    /// The field with that name: a known field when the name is one, otherwise `.other`.
    public init(name: String) {
        for code in 1...Self.maxKnownCode {
            let field = Field(code: code)!
            if field.name.utf8.elementsEqual(name.utf8) {
                self = field
                return
            }
        }
        self = .other(ExactString(name))
    }

    /// The field's name.
    public var description: String { name }

    /// Whether `value` has the type SPEC.md gives this known field (always true for `.other`).
    /// Only the type is checked: a newer version may add priorities or repeat rules, and those
    /// values are kept and passed on like unknown fields.
    public func accepts(_ value: Value) -> Bool {
        switch (self, value) {
        case (.other, _): true
        case (.title, .string), (.notes, .string), (.body, .string): true
        case (.notes, .null): true
        case (.due, .null), (.completed, .null), (.snoozedUntil, .null): true
        case (.due, .int(let millis)), (.completed, .int(let millis)), (.snoozedUntil, .int(let millis)):
            Field.instantRange.contains(millis)
        case (.priority, .int): true
        case (.repeatRule, .null), (.repeatRule, .string): true
        case (.deleted, .bool), (.pinned, .bool): true
        default: false
        }
    }
}
