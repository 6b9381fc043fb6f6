import ConcordCore
import ConcordStore
import Foundation

/// Reads the records of an import file (SPEC.md §10, "Import form") one at a time, as the text
/// arrives: any number of JSON values, each a record object or an array of them. Each record is
/// checked and turned into the values it gives; the first thing wrong, in the order of the text,
/// is refused with its place.
struct ImportReader {
    private var json: JSONReader
    /// The file as messages name it.
    private let name: String
    /// The completion time of a completed reminder that gives none.
    private let now: Int64
    /// How many records of the array being read were read, while one is.
    private var recordsInArray: Int?
    /// The ids given so far: an id is given once in a file, whatever the kinds.
    private var ids: Set<RecordID> = []

    /// - Parameters:
    ///   - name: the file as messages name it (`FILE line L, …`).
    ///   - now: milliseconds since the epoch, the completion time of a completed reminder without one.
    init(_ json: JSONReader, name: String, now: Int64) {
        self.json = json
        self.name = name
        self.now = now
    }

    /// A record read from the file.
    struct Record {
        var values: NewRecord
        /// The file as messages name it, the line where the record starts, and its place in its
        /// array (1 for an object alone).
        var file: String
        var line: Int
        var number: Int

        /// Where it is, for a message: `FILE line L, record R`. Made only for one.
        var place: String { "\(file) line \(line), record \(number)" }
    }

    /// The next record; nil at the end of the text.
    mutating func next() throws -> Record? {
        do {
            while true {
                if let read = recordsInArray {
                    if try json.nextElement() {
                        recordsInArray = read + 1
                        return try record(number: read + 1)
                    }
                    recordsInArray = nil
                }
                guard let kind = try json.nextValue() else { return nil }
                guard kind == .array else { return try record(number: 1) }
                try json.enterArray()
                recordsInArray = 0
            }
        } catch let error as JSONReader.SyntaxError {
            throw ImportError("\(name) \(error.position): not JSON: \(error.problem)")
        }
    }

    /// The keys of a record object that this reader takes, as bits: each may be given once.
    private struct Keys: OptionSet {
        let rawValue: UInt16
        /// In the order of the bits, and in the order the lists print them.
        static let names = [
            "completed", "completedAt", "deleted", "due", "id", "kind", "notes", "priority", "repeat", "snoozedUntil",
            "tags", "title", "body", "pinned",
        ]
        static let completed = Keys(rawValue: 1 << 0)
        static let completedAt = Keys(rawValue: 1 << 1)
        static let deleted = Keys(rawValue: 1 << 2)
        static let due = Keys(rawValue: 1 << 3)
        static let id = Keys(rawValue: 1 << 4)
        static let kind = Keys(rawValue: 1 << 5)
        static let notes = Keys(rawValue: 1 << 6)
        static let priority = Keys(rawValue: 1 << 7)
        static let repeatRule = Keys(rawValue: 1 << 8)
        static let snoozedUntil = Keys(rawValue: 1 << 9)
        static let tags = Keys(rawValue: 1 << 10)
        static let title = Keys(rawValue: 1 << 11)
        static let body = Keys(rawValue: 1 << 12)
        static let pinned = Keys(rawValue: 1 << 13)

        init(rawValue: UInt16) { self.rawValue = rawValue }

        init?(name: String) {
            guard let index = Self.names.firstIndex(of: name) else { return nil }
            rawValue = 1 << index
        }
    }

    /// The values of one record object, as given (null as absent).
    private struct Fields {
        var kind, id, title, notes, due, completedAt, snoozedUntil, repeatRule, body: String?
        var priority: Priority?
        var completed, deleted, pinned: Bool?
        var tags: [String]?
    }

    /// Reads the record that starts here, the `number`th of its array (1 for an object alone).
    private mutating func record(number: Int) throws -> Record {
        let kind = try json.peekKind()
        // The line of its first character, white space before it read.
        var record = Record(values: NewRecord(kind: .reminder, id: nil, actions: []), file: name, line: json.position.line, number: number)
        guard kind == .object else {
            try json.skipValue()
            throw ImportError("\(record.place): not an object")
        }
        func fail(_ field: String, _ problem: String) -> ImportError { ImportError("\(record.place): \(field): \(problem)") }
        var fields = Fields()
        var seen: Keys = []
        try json.enterObject()
        while let key = try json.nextKey() {
            guard let bit = Keys(name: key) else {
                // Other keys (`conflict` among them) are ignored.
                try json.skipValue()
                continue
            }
            guard seen.insert(bit).inserted else { throw fail(key, "is given twice") }
            switch bit {
            case .kind: fields.kind = try string(key, fail)
            case .id: fields.id = try string(key, fail)
            case .title: fields.title = try string(key, fail)
            case .notes: fields.notes = try string(key, fail)
            case .due: fields.due = try string(key, fail)
            case .completedAt: fields.completedAt = try string(key, fail)
            case .snoozedUntil: fields.snoozedUntil = try string(key, fail)
            case .repeatRule: fields.repeatRule = try string(key, fail)
            case .body: fields.body = try string(key, fail)
            case .priority: fields.priority = try priority(fail)
            case .completed: fields.completed = try bool(key, fail)
            case .deleted: fields.deleted = try bool(key, fail)
            case .pinned: fields.pinned = try bool(key, fail)
            default: fields.tags = try strings(key, fail)
            }
        }
        record.values = try values(of: fields, fail: fail)
        return record
    }

    /// The record the fields give, checked.
    private mutating func values(of fields: Fields, fail: Failure) throws -> NewRecord {
        guard let kindName = fields.kind else { throw fail("kind", "missing") }
        let kind: RecordKind
        switch kindName {
        case "reminder": kind = .reminder
        case "note": kind = .note
        default: throw fail("kind", #"must be "reminder" or "note""#)
        }
        var id: RecordID?
        if let text = fields.id {
            guard let parsed = RecordID(hex: text), parsed.hex == text else { throw fail("id", "must be 32 lower-case hex digits") }
            guard ids.insert(parsed).inserted else { throw fail("id", "\(text) is given twice") }
            id = parsed
        }
        func text(_ value: String, _ field: String) throws -> Value {
            guard value.utf8.count <= Change.maxTextBytes else { throw fail(field, ChangeError.textTooLong(value.utf8.count).description) }
            return .string(value)
        }
        func instant(_ value: String?, _ field: String) throws -> Value {
            guard let value else { return .null }
            guard let millis = CivilTime.instant(parsing: value) else {
                throw fail(field, "must be an instant within the years 1 to 9999, such as 2026-11-25T09:30:00.000Z")
            }
            return .int(millis)
        }
        guard let title = fields.title else { throw fail("title", "missing") }
        var actions: [Action] = [.assign(.title, try text(title, "title"))]
        if kind == .reminder {
            let due = try instant(fields.due, "due")
            var completed = Value.null
            if fields.completed == true {
                completed = fields.completedAt == nil ? .int(now) : try instant(fields.completedAt, "completedAt")
            }
            actions += [
                .assign(.notes, try fields.notes.map { try text($0, "notes") } ?? .null),
                .assign(.due, due),
                .assign(.completed, completed),
                .assign(.priority, .int((fields.priority ?? .none).rawValue)),
            ]
            if let name = fields.repeatRule {
                // A rule by its name, as `reminder add --repeat` takes it, or as stored and listed.
                let rule = RepeatRule(name: name, due: due.intValue) ?? RepeatRule(rawValue: name).flatMap { $0.rawValue == name ? $0 : nil }
                guard let rule else {
                    throw fail("repeat", "unknown repeat rule '\(name)' (expected hourly, daily, weekly, monthly, or monthly:D with D from 1 to 31)")
                }
                actions.append(.assign(.repeatRule, .string(rule.rawValue)))
            }
        } else {
            actions += [
                .assign(.body, try text(fields.body ?? "", "body")),
                .assign(.pinned, .bool(fields.pinned ?? false)),
            ]
        }
        var tags = Set<ExactString>()
        for tag in fields.tags ?? [] where tags.insert(ExactString(tag)).inserted {
            guard tag.utf8.count <= Change.maxTextBytes else { throw fail("tags", ChangeError.textTooLong(tag.utf8.count).description) }
            actions.append(.addTag(ExactString(tag)))
        }
        if kind == .reminder, fields.snoozedUntil != nil {
            actions.append(.assign(.snoozedUntil, try instant(fields.snoozedUntil, "snoozedUntil")))
        }
        if fields.deleted == true { actions.append(.assign(.deleted, .bool(true))) }
        return NewRecord(kind: kind, id: id, actions: actions)
    }

    // MARK: Values of a type

    /// A field's problem as an error, made only for a refusal: `FILE line L, record R: FIELD: PROBLEM`.
    private typealias Failure = (_ field: String, _ problem: String) -> ImportError

    private mutating func string(_ field: String, _ fail: Failure) throws -> String? {
        switch try json.peekKind() {
        case .null:
            try json.readNull()
            return nil
        case .string: return try json.readString()
        default: throw try wrongType(fail(field, "must be a string"))
        }
    }

    private mutating func bool(_ field: String, _ fail: Failure) throws -> Bool? {
        switch try json.peekKind() {
        case .null:
            try json.readNull()
            return nil
        case .bool: return try json.readBool()
        default: throw try wrongType(fail(field, "must be true or false"))
        }
    }

    private mutating func strings(_ field: String, _ fail: Failure) throws -> [String]? {
        switch try json.peekKind() {
        case .null:
            try json.readNull()
            return nil
        case .array:
            try json.enterArray()
            var strings: [String] = []
            while try json.nextElement() {
                guard try json.peekKind() == .string else { throw try wrongType(fail(field, "must be an array of strings")) }
                strings.append(try json.readString())
            }
            return strings
        default: throw try wrongType(fail(field, "must be an array of strings"))
        }
    }

    /// A priority by name, or any 64-bit integer (the lists print a priority this version does
    /// not name as its number).
    private mutating func priority(_ fail: Failure) throws -> Priority? {
        let problem = "must be none, low, medium, high or an integer"
        switch try json.peekKind() {
        case .null:
            try json.readNull()
            return nil
        case .string:
            guard let priority = Priority(name: try json.readString()) else { throw fail("priority", problem) }
            return priority
        case .number:
            guard let number = Int64(try json.readNumber()) else { throw fail("priority", problem) }
            return Priority(rawValue: number)
        default: throw try wrongType(fail("priority", problem))
        }
    }

    /// `error`, for a value of another type than its field's, once the value is read: text that
    /// is not JSON is refused as such first.
    private mutating func wrongType(_ error: ImportError) throws -> ImportError {
        try json.skipValue()
        return error
    }
}
