import ConcordCore
import Foundation
import GRDB

extension ConcordStore {
    // MARK: Reminders and notes

    /// Reminders ordered by due date (undated last), then id. By default only open, live ones.
    public func reminders(includeCompleted: Bool = false, includeDeleted: Bool = false) throws(ConcordError) -> [Reminder] {
        var conditions: [String] = []
        if !includeCompleted { conditions.append("completed IS NULL") }
        if !includeDeleted { conditions.append("deleted = 0") }
        return try fetchReminders(where: conditions.isEmpty ? "1" : conditions.joined(separator: " AND "))
    }

    /// The reminder with this id, deleted or not; `nil` if the store holds none.
    public func reminder(_ id: RecordID) throws(ConcordError) -> Reminder? {
        try fetchReminders(where: "id = ?", [Data(id.bytes)]).first
    }

    /// The reminders that should alert at `instant`: due at or before it, open, not deleted, and
    /// not snoozed past it.
    public func dueReminders(at instant: Date) throws(ConcordError) -> [Reminder] {
        let millis = instant.millisecondsSince1970
        return try fetchReminders(
            where: "due <= ? AND completed IS NULL AND deleted = 0 AND (snoozed_until IS NULL OR snoozed_until <= ?)",
            [millis, millis])
    }

    /// Notes, pinned first, then by id. By default only live ones.
    public func notes(includeDeleted: Bool = false) throws(ConcordError) -> [Note] {
        try fetchNotes(where: includeDeleted ? "1" : "deleted = 0")
    }

    /// The note with this id, deleted or not; `nil` if the store holds none.
    public func note(_ id: RecordID) throws(ConcordError) -> Note? {
        try fetchNotes(where: "id = ?", [Data(id.bytes)]).first
    }

    private func fetchReminders(where condition: String, _ arguments: StatementArguments = []) throws(ConcordError) -> [Reminder] {
        try guarded {
            try read { db in
                let rows = try Row.fetchCursor(db, sql: """
                    SELECT id, CAST(title AS BLOB), CAST(notes AS BLOB), due, priority, completed, snoozed_until,
                        CAST(repeat AS BLOB), tags, deleted, conflicts
                    FROM reminders WHERE \(condition) ORDER BY due IS NULL, due, id
                    """, arguments: arguments)
                var result: [Reminder] = []
                while let row = try rows.next() {
                    result.append(Reminder(
                        id: try Self.recordID(try row.column(0)), title: try row.text(1) ?? "", notes: try row.text(2),
                        due: (try row.column(3) as Int64?).map(Date.init(millisecondsSince1970:)),
                        priority: Priority(rawValue: try row.column(4) ?? 0),
                        completedAt: (try row.column(5) as Int64?).map(Date.init(millisecondsSince1970:)),
                        snoozedUntil: (try row.column(6) as Int64?).map(Date.init(millisecondsSince1970:)),
                        repeatRule: try row.text(7).flatMap(RepeatRule.init(rawValue:)),
                        tags: try Self.tags(try row.column(8)), isDeleted: try row.column(9),
                        isInConflict: Self.isInConflict(deleted: try row.column(9), conflicts: try row.column(10))))
                }
                return result
            }
        }
    }

    /// Whether a record row's fields are in conflict (SPEC.md §10): the `conflicts` column counts
    /// the registers with several heads, a deleted record's too, but a deleted record has no field
    /// in conflict until it is restored.
    private static func isInConflict(deleted: Bool, conflicts: Int64) -> Bool {
        !deleted && conflicts > 0
    }

    private func fetchNotes(where condition: String, _ arguments: StatementArguments = []) throws(ConcordError) -> [Note] {
        try guarded {
            try read { db in
                let rows = try Row.fetchCursor(db, sql: """
                    SELECT id, CAST(title AS BLOB), CAST(body AS BLOB), pinned, tags, deleted, conflicts FROM notes WHERE \(condition)
                    ORDER BY pinned DESC, id
                    """, arguments: arguments)
                var result: [Note] = []
                while let row = try rows.next() {
                    result.append(Note(
                        id: try Self.recordID(try row.column(0)), title: try row.text(1) ?? "", body: try row.text(2) ?? "",
                        isPinned: try row.column(3) ?? false, tags: try Self.tags(try row.column(4)), isDeleted: try row.column(5),
                        isInConflict: Self.isInConflict(deleted: try row.column(5), conflicts: try row.column(6))))
                }
                return result
            }
        }
    }

    static func recordID(_ data: Data?) throws -> RecordID {
        guard let data, let id = RecordID(bytes: data) else { throw ConcordError(.corrupt, "a record has a malformed id") }
        return id
    }

    static func kind(_ raw: Int64) throws -> RecordKind {
        guard let byte = UInt8(exactly: raw), byte != 0 else { throw ConcordError(.corrupt, "a record has a malformed kind") }
        return RecordKind(rawValue: byte)
    }

    static func tags(_ json: String) throws -> [String] {
        guard json != "[]" else { return [] }
        do {
            return try JSONDecoder().decode([String].self, from: Data(json.utf8))
        } catch {
            throw ConcordError(.corrupt, "a record's tags column is damaged")
        }
    }

    // MARK: Records by id

    /// Finds the record whose id is `text`, starts with it or ends with it (at least 4 hex
    /// digits). Ids are time-ordered (SPEC.md §2): records made close together share their first
    /// digits, and their last digits tell them apart.
    package func resolve(_ text: String, kind: RecordKind? = nil) throws(ConcordError) -> RecordRef {
        let digits = text.lowercased()
        guard digits.count >= 4, digits.count <= 32, digits.allSatisfy(\.isHexDigit) else {
            throw ConcordError(.notFound, "'\(text)' is not a record id (ids are 32 hex digits; a unique prefix or suffix of at least 4 will do)")
        }
        let low = RecordID(hex: digits.padding(toLength: 32, withPad: "0", startingAt: 0))!
        let high = RecordID(hex: digits.padding(toLength: 32, withPad: "f", startingAt: 0))!
        // Prefixes through the id index; suffixes by a scan (SQLite's hex() is upper case).
        let matching = "(id BETWEEN ? AND ? OR substr(hex(id), ?) = ?)"
        let arguments: StatementArguments = [Data(low.bytes), Data(high.bytes), 33 - digits.count, digits.uppercased()]
        let (matches, total): ([RecordRef], Int) = try guarded {
            try read { db in
                var refs: [RecordRef] = []
                var total = 0
                for table in RecordTable.known where kind == nil || kind == table.kind {
                    for data in try Optional<Data>.fetchAll(db, sql: "SELECT id FROM \(table.name) WHERE \(matching) LIMIT 10", arguments: arguments) {
                        refs.append(RecordRef(kind: table.kind, id: try Self.recordID(data)))
                    }
                }
                if kind == nil || RecordTable.of(kind!) == nil {
                    for row in try Row.fetchAll(db, sql: "SELECT kind, id FROM other_records WHERE \(matching) LIMIT 10", arguments: arguments) {
                        let other = try Self.kind(try row.column(0))
                        if kind == nil || kind == other { refs.append(RecordRef(kind: other, id: try Self.recordID(try row.column(1)))) }
                    }
                }
                if refs.isEmpty, digits.count == 32, try Self.holdsPurgedRecords(db) {
                    // A purged record, named in full: a change to it is refused as purged, and a
                    // purge of it again changes nothing (SPEC.md §5.7).
                    for row in try Row.fetchAll(db, sql: "SELECT kind FROM purged WHERE id = ?", arguments: [Data(low.bytes)]) {
                        let purged = try Self.kind(try row.column(0))
                        if kind == nil || kind == purged { refs.append(RecordRef(kind: purged, id: low)) }
                    }
                }
                if refs.count > 1 {
                    // Ambiguous: how many match in all, for the message (this path only).
                    for table in RecordTable.known where kind == nil || kind == table.kind {
                        total += try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table.name) WHERE \(matching)", arguments: arguments) ?? 0
                    }
                    if kind == nil || RecordTable.of(kind!) == nil {
                        let kindFilter = kind.map { " AND kind = \($0.rawValue)" } ?? ""
                        total += try Int.fetchOne(db, sql: "SELECT count(*) FROM other_records WHERE \(matching)\(kindFilter)", arguments: arguments) ?? 0
                    }
                }
                return (refs.sorted(), max(total, refs.count))
            }
        }
        switch matches.count {
        case 0: throw ConcordError(.notFound, "no \(kind?.name ?? "record") with id \(text)")
        case 1: return matches[0]
        default:
            let shown = matches.prefix(10).map(\.id.hex).joined(separator: ", ")
            let more = total > 10 ? " and \(total - 10) more" : ""
            throw ConcordError(.ambiguous, "id \(text) is ambiguous: it matches \(shown)\(more)")
        }
    }

    /// The full replicated state of a record, merge metadata included.
    package func state(of ref: RecordRef) throws(ConcordError) -> RecordState? {
        try guarded {
            try read { db in try RecordRows.load(ref, db, try ReplicaDirectory(db)) }
        }
    }

    /// Every record's state in `RecordRef` order, one at a time.
    package func forEachRecord(_ body: (RecordState) throws -> Void) throws(ConcordError) {
        try guarded {
            try read { db in
                let directory = try ReplicaDirectory(db)
                var sources: [(kind: RecordKind?, table: RecordTable?, cursor: RowCursor)] = []
                for table in RecordTable.known {
                    let sql = "SELECT id, " + table.rowColumns + ", crdt FROM \(table.name) ORDER BY id"
                    sources.append((table.kind, table, try Row.fetchCursor(db, sql: sql)))
                }
                sources.append((nil, nil, try Row.fetchCursor(db, sql: "SELECT id, crdt, kind FROM other_records ORDER BY id, kind")))
                // A k-way merge of cursors sorted by id, so memory stays flat however large the store.
                var heads: [(RecordRef, Row)?] = []
                func advance(_ index: Int) throws -> (RecordRef, Row)? {
                    guard let row = try sources[index].cursor.next() else { return nil }
                    let kind = try sources[index].kind ?? Self.kind(try row.column(2))
                    return (RecordRef(kind: kind, id: try Self.recordID(try row.column(0))), row.copy())
                }
                for index in sources.indices { heads.append(try advance(index)) }
                while let next = heads.indices.filter({ heads[$0] != nil }).min(by: { heads[$0]!.0 < heads[$1]!.0 }) {
                    let (ref, row) = heads[next]!
                    try body(try RecordRows.decode(ref: ref, table: sources[next].table, row: row, offset: 1, directory))
                    heads[next] = try advance(next)
                }
            }
        }
    }

    /// The canonical JSON of the replicated state (SPEC.md, "Dump"): byte-identical on replicas
    /// that hold the same operations.
    public func dump() throws(ConcordError) -> String {
        var states: [RecordState] = []
        try forEachRecord { states.append($0) }
        return Dump.canonical(states)
    }

    // MARK: Replica

    /// For each replica, the highest sequence number the store holds from it with no gap below: what a peer needs to know to send only what the store lacks.
    public func versionVector() throws(ConcordError) -> VersionVector {
        try guarded { try read { db in try ReplicaDirectory(db).versionVector } }
    }

    /// Counts of records and operations, the store's name, replica id, clock and version vector.
    public func status() throws(ConcordError) -> StoreStatus {
        try guarded {
            try read { db in
                let count = { (sql: String) in try Int.fetchOne(db, sql: sql) ?? 0 }
                return StoreStatus(
                    replicaID: replicaID,
                    name: try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'name'") ?? "",
                    path: path,
                    schemaVersion: try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0,
                    openReminders: try count("SELECT count(*) FROM reminders WHERE completed IS NULL AND deleted = 0"),
                    completedReminders: try count("SELECT count(*) FROM reminders WHERE completed IS NOT NULL AND deleted = 0"),
                    deletedReminders: try count("SELECT count(*) FROM reminders WHERE deleted = 1"),
                    notes: try count("SELECT count(*) FROM notes WHERE deleted = 0"),
                    deletedNotes: try count("SELECT count(*) FROM notes WHERE deleted = 1"),
                    otherRecords: try count("SELECT count(*) FROM other_records"),
                    operations: try count("SELECT coalesce(sum(last_seq - first_seq + 1), 0) FROM log"),
                    versionVector: try ReplicaDirectory(db).versionVector,
                    clock: Timestamp(rawValue: UInt64(bitPattern: try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'clock'") ?? 0)))
            }
        }
    }
}

/// A summary of a store (`syncctl status`).
public struct StoreStatus: Hashable, Sendable {
    /// The store's replica id.
    public var replicaID: ReplicaID
    /// The name given at creation (a device's name, say), or empty.
    public var name: String
    /// The store file's path.
    public var path: String
    /// The version of the store file's schema.
    public var schemaVersion: Int
    /// Open reminders, not deleted.
    public var openReminders: Int
    /// Completed reminders, not deleted.
    public var completedReminders: Int
    /// Deleted reminders.
    public var deletedReminders: Int
    /// Notes, not deleted.
    public var notes: Int
    /// Deleted notes.
    public var deletedNotes: Int
    /// Records of kinds this version does not know.
    public var otherRecords: Int
    /// Operations in the log.
    public var operations: Int
    /// The store's version vector (`versionVector()`).
    public var versionVector: VersionVector
    /// The latest timestamp the store's clock gave or saw.
    public var clock: Timestamp
}
