import ConcordCore
import Foundation
import GRDB

/// How a kind's records are laid out in SQLite: one row per record, one column per known field
/// holding its current value, and a `crdt` blob with the merge metadata (SPEC.md, "Store").
struct RecordTable: Sendable {
    let kind: RecordKind
    let name: String
    /// The known fields and the columns that hold their values.
    let columns: [(field: Field, column: String)]

    /// `SELECT <field columns>, crdt FROM <table> WHERE id = ?`
    let selectSQL: String
    /// `INSERT OR REPLACE INTO <table> (id, <field columns>, tags, crdt) VALUES (?, …)`
    let upsertSQL: String

    init(kind: RecordKind, name: String, columns: [(field: Field, column: String)]) {
        self.kind = kind
        self.name = name
        self.columns = columns
        selectSQL = "SELECT " + columns.map(\.column).joined(separator: ", ") + ", crdt FROM \(name) WHERE id = ?"
        let names = ["id"] + columns.map(\.column) + ["tags", "crdt"]
        upsertSQL = "INSERT OR REPLACE INTO \(name) (" + names.joined(separator: ", ") + ") VALUES ("
            + names.map { _ in "?" }.joined(separator: ", ") + ")"
    }

    static let reminders = RecordTable(kind: .reminder, name: "reminders", columns: [
        (.title, "title"), (.notes, "notes"), (.due, "due"), (.priority, "priority"), (.completed, "completed"),
        (.snoozedUntil, "snoozed_until"), (.repeatRule, "repeat"), (.deleted, "deleted"),
    ])
    static let notes = RecordTable(kind: .note, name: "notes", columns: [
        (.title, "title"), (.body, "body"), (.pinned, "pinned"), (.deleted, "deleted"),
    ])
    static let known = [reminders, notes]

    static func of(_ kind: RecordKind) -> RecordTable? {
        switch kind {
        case .reminder: reminders
        case .note: notes
        default: nil
        }
    }
}

/// Reads and writes `RecordState`s as rows.
enum RecordRows {
    static let crdtFormat: UInt8 = 1

    static func load(_ ref: RecordRef, _ db: Database, _ directory: ReplicaDirectory) throws -> RecordState? {
        if let table = RecordTable.of(ref.kind) {
            let statement = try db.cachedStatement(sql: table.selectSQL)
            statement.setUncheckedArguments([Data(ref.id.bytes)])
            guard let row = try Row.fetchOne(statement) else { return nil }
            return try decode(ref: ref, table: table, row: row, directory)
        }
        let statement = try db.cachedStatement(sql: "SELECT crdt FROM other_records WHERE kind = ? AND id = ?")
        statement.setUncheckedArguments([Int64(ref.kind.rawValue), Data(ref.id.bytes)])
        guard let row = try Row.fetchOne(statement) else { return nil }
        return try decode(ref: ref, table: nil, row: row, directory)
    }

    /// Rebuilds a state from a row whose columns, from `offset` on, are the table's field columns
    /// then `crdt` (just `crdt` for kinds without a table).
    static func decode(
        ref: RecordRef, table: RecordTable?, row: Row, offset: Int = 0, _ directory: ReplicaDirectory
    ) throws -> RecordState {
        let columnCount = table?.columns.count ?? 0
        let blob: Data = try row.column(offset + columnCount)
        var reader = ByteReader([UInt8](blob))
        do {
            guard try reader.byte() == crdtFormat else { throw DecodeError.malformed("unknown crdt format") }
            var known = [LWWRegister?](repeating: nil, count: Int(Field.maxKnownCode) + 1)
            var unknown: [ExactString: LWWRegister] = [:]
            let mask = try reader.varint()
            if let table {
                for (index, entry) in table.columns.enumerated() where mask & (1 << UInt64(entry.field.code)) != 0 {
                    let stamp = try readStamp(&reader, directory)
                    known[Int(entry.field.code)] = LWWRegister(value: try value(of: entry.field, row[offset + index]), stamp: stamp)
                }
            }
            let unknownCount = try reader.varint()
            for _ in 0..<unknownCount {
                let name = try reader.string()
                let value = try OperationCodec.decodeValue(from: &reader)
                unknown[ExactString(name)] = LWWRegister(value: value, stamp: try readStamp(&reader, directory))
            }
            var tags: [ExactString: TagState] = [:]
            let tagCount = try reader.varint()
            for _ in 0..<tagCount {
                let tag = ExactString(try reader.string())
                let live = try readDots(&reader, directory)
                let removed = try readDots(&reader, directory)
                tags[tag] = TagState(live: live, removed: removed)
            }
            guard reader.isAtEnd else { throw DecodeError.malformed("trailing bytes") }
            return RecordState(ref: ref, known: known, unknown: unknown, tags: TagSet(tags: tags))
        } catch let error as DecodeError {
            throw StoreError(.corrupt, "the merge metadata of \(ref) is damaged (\(error))")
        }
    }

    static func save(_ state: RecordState, _ db: Database, _ directory: inout ReplicaDirectory) throws {
        var writer = ByteWriter(capacity: 128)
        writer.byte(crdtFormat)
        let table = RecordTable.of(state.ref.kind)
        var mask: UInt64 = 0
        var knownStamps: [Stamp] = []
        if let table {
            for (field, _) in table.columns {
                if let register = state.known[Int(field.code)] {
                    mask |= 1 << UInt64(field.code)
                    knownStamps.append(register.stamp)
                }
            }
        }
        writer.varint(mask)
        for stamp in knownStamps { try writeStamp(stamp, &writer, db, &directory) }
        let unknown = state.unknown.sorted { $0.key < $1.key }
        writer.varint(UInt64(unknown.count))
        for (name, register) in unknown {
            writer.string(name.string)
            OperationCodec.encode(register.value, into: &writer)
            try writeStamp(register.stamp, &writer, db, &directory)
        }
        let tags = state.tags.tags.sorted { $0.key < $1.key }
        writer.varint(UInt64(tags.count))
        for (tag, tagState) in tags {
            writer.string(tag.string)
            try writeDots(tagState.live, &writer, db, &directory)
            try writeDots(tagState.removed, &writer, db, &directory)
        }
        let crdt = Data(writer.bytes)

        guard let table else {
            let statement = try db.cachedStatement(sql: "INSERT OR REPLACE INTO other_records (kind, id, crdt) VALUES (?, ?, ?)")
            statement.setUncheckedArguments([Int64(state.ref.kind.rawValue), Data(state.ref.id.bytes), crdt])
            try statement.execute()
            return
        }
        var arguments: [(any DatabaseValueConvertible)?] = [Data(state.ref.id.bytes)]
        for (field, _) in table.columns {
            arguments.append(column(for: field, state.known[Int(field.code)]?.value))
        }
        arguments.append(state.tags.tags.isEmpty ? "[]" : JSON.canonicalArray(of: state.tags.present.map(\.string)))
        arguments.append(crdt)
        let statement = try db.cachedStatement(sql: table.upsertSQL)
        statement.setUncheckedArguments(StatementArguments(arguments))
        try statement.execute()
    }

    /// The column value of a known field's register (`deleted` is 0 until written).
    static func column(for field: Field, _ value: Value?) -> (any DatabaseValueConvertible)? {
        switch value {
        case nil, .null?: field == .deleted ? Int64(0) : nil
        case .bool(let b)?: Int64(b ? 1 : 0)
        case .int(let i)?: i
        case .string(let s)?: s
        }
    }

    /// The value of a known field from its column, by the field's type in SPEC.md.
    static func value(of field: Field, _ database: DatabaseValue) throws -> Value {
        switch (field, database.storage) {
        case (_, .null): return .null
        case (.deleted, .int64(let i)), (.pinned, .int64(let i)): return .bool(i != 0)
        case (_, .int64(let i)): return .int(i)
        case (_, .string(let s)): return .string(s)
        default: throw StoreError(.corrupt, "column \(field.name) holds a value of the wrong type")
        }
    }

    private static func writeStamp(_ stamp: Stamp, _ writer: inout ByteWriter, _ db: Database, _ directory: inout ReplicaDirectory) throws {
        writer.varint(stamp.timestamp.rawValue)
        writer.varint(UInt64(try directory.index(of: stamp.replica, db)))
        writer.varint(stamp.seq)
    }

    private static func readStamp(_ reader: inout ByteReader, _ directory: ReplicaDirectory) throws -> Stamp {
        let timestamp = Timestamp(rawValue: try reader.varint())
        let replica = try directory.id(at: Int64(bitPattern: try reader.varint()))
        return Stamp(timestamp: timestamp, replica: replica, seq: try reader.varint())
    }

    private static func writeDots(_ dots: Set<OperationID>, _ writer: inout ByteWriter, _ db: Database, _ directory: inout ReplicaDirectory) throws {
        writer.varint(UInt64(dots.count))
        for dot in dots.sorted() {
            writer.varint(UInt64(try directory.index(of: dot.replica, db)))
            writer.varint(dot.seq)
        }
    }

    private static func readDots(_ reader: inout ByteReader, _ directory: ReplicaDirectory) throws -> Set<OperationID> {
        let count = try reader.varint()
        guard count <= UInt64(reader.remaining / 2) else { throw DecodeError.truncated }
        var dots = Set<OperationID>(minimumCapacity: Int(count))
        for _ in 0..<count {
            let replica = try directory.id(at: Int64(bitPattern: try reader.varint()))
            dots.insert(OperationID(replica: replica, seq: try reader.varint()))
        }
        return dots
    }
}
