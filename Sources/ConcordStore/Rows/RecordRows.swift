import ConcordCore
import Foundation
import GRDB

/// How a kind's records are laid out in SQLite: one row per record, one column per known field
/// holding its current value, and a `crdt` blob with the merge metadata (SPEC.md, "Store").
/// A class: the merge looks a record's table up for every row, and copying a struct of strings
/// and arrays would retain each of them.
final class RecordTable: Sendable {
    let kind: RecordKind
    let name: String
    /// The known fields and the columns that hold their values.
    let columns: [(field: Field, column: String)]

    /// `SELECT <field columns>, crdt FROM <table> WHERE id = ?`
    let selectSQL: String
    /// `SELECT crdt FROM <table> WHERE id = ?`
    let selectCRDTSQL: String
    /// `SELECT 1 FROM <table> WHERE id = ?`
    let existsSQL: String
    /// `DELETE FROM <table> WHERE id = ?`
    let deleteSQL: String
    /// The field columns for a query read through GRDB's `Row`: text columns as blobs, since
    /// GRDB decodes text as a C string, which ends at a NUL (`RecordRows.value(of:_:)` takes
    /// them back as UTF-8).
    let rowColumns: String
    /// `INSERT INTO <table> (id, <field columns>, tags, conflicts, crdt) VALUES (?1, ?2, …)`
    let insertSQL: String
    /// `insertSQL` that writes nothing when the record has a row.
    let insertIfAbsentSQL: String
    /// `UPDATE <table> SET <field column> = ?2, …, tags = ?, conflicts = ?, crdt = ? WHERE id = ?1`: the same
    /// parameters as `insertSQL`.
    let updateSQL: String

    /// The table's place in `known` (it numbers the table's prepared statements).
    let slot: Int

    init(kind: RecordKind, name: String, slot: Int, columns: [(field: Field, column: String)]) {
        // `RecordRows` binds a state's `knownRegisters` to the columns one for one.
        precondition(columns.map(\.field) == kind.knownFields, "the columns of \(name) are not its kind's known fields in order")
        self.kind = kind
        self.slot = slot
        self.name = name
        self.columns = columns
        selectSQL = "SELECT " + columns.map(\.column).joined(separator: ", ") + ", crdt FROM \(name) WHERE id = ?"
        selectCRDTSQL = "SELECT crdt FROM \(name) WHERE id = ?"
        existsSQL = "SELECT 1 FROM \(name) WHERE id = ?"
        deleteSQL = "DELETE FROM \(name) WHERE id = ?"
        rowColumns = columns.map { Self.textFields.contains($0.field) ? "CAST(\($0.column) AS BLOB)" : $0.column }
            .joined(separator: ", ")
        let names = ["id"] + columns.map(\.column) + ["tags", "conflicts", "crdt"]
        insertSQL = "INSERT INTO \(name) (" + names.joined(separator: ", ") + ") VALUES ("
            + names.indices.map { "?\($0 + 1)" }.joined(separator: ", ") + ")"
        insertIfAbsentSQL = insertSQL + " ON CONFLICT (id) DO NOTHING"
        updateSQL = "UPDATE \(name) SET " + names.indices.dropFirst().map { "\(names[$0]) = ?\($0 + 1)" }.joined(separator: ", ")
            + " WHERE id = ?1"
    }

    /// `UPDATE <table> SET <column> = ?2, …, [tags = ?,] conflicts = ?, crdt = ? WHERE id = ?1`, setting the
    /// columns of the slots whose bits `slots` has (bit i for `columns[i]`), in column order.
    func patchSQL(slots: UInt32, tags: Bool) -> String {
        let names = columns.indices.filter { slots & (1 << $0) != 0 }.map { columns[$0].column } + (tags ? ["tags"] : [])
            + ["conflicts", "crdt"]
        return "UPDATE \(name) SET " + names.enumerated().map { "\($1) = ?\($0 + 2)" }.joined(separator: ", ") + " WHERE id = ?1"
    }

    static let reminders = RecordTable(kind: .reminder, name: "reminders", slot: 0, columns: [
        (.title, "title"), (.notes, "notes"), (.due, "due"), (.priority, "priority"), (.completed, "completed"),
        (.snoozedUntil, "snoozed_until"), (.repeatRule, "repeat"), (.deleted, "deleted"),
    ])
    static let notes = RecordTable(kind: .note, name: "notes", slot: 1, columns: [
        (.title, "title"), (.body, "body"), (.pinned, "pinned"), (.deleted, "deleted"),
    ])
    static let known = [reminders, notes]
    /// The known fields whose values are text.
    static let textFields: Set<Field> = [.title, .notes, .body, .repeatRule]

    static func of(_ kind: RecordKind) -> RecordTable? {
        switch kind {
        case .reminder: reminders
        case .note: notes
        default: nil
        }
    }
}

/// The statements that read and write the rows of the record tables, prepared on first use and
/// kept for a write context's life: looking a statement up by its SQL costs more than running it.
struct RecordStatements {
    /// Per table: the two selects, then one statement per `RecordRows.Write`.
    private static let perTable = 2 + RecordRows.Write.allCases.count
    private var prepared: [Statement?] = Array(repeating: nil, count: RecordTable.known.count * perTable)
    /// The patches by table and by the columns they set (see `patch(of:slots:tags:_:)`).
    private var patches: [Int: Statement] = [:]

    /// `SELECT … WHERE id = ?`
    mutating func select(from table: RecordTable, _ db: Database) throws -> Statement {
        try statement(table, 0, table.selectSQL, db)
    }

    /// `SELECT crdt … WHERE id = ?`
    mutating func selectCRDT(from table: RecordTable, _ db: Database) throws -> Statement {
        try statement(table, 1, table.selectCRDTSQL, db)
    }

    mutating func statement(_ write: RecordRows.Write, of table: RecordTable, _ db: Database) throws -> Statement {
        try statement(table, 2 + write.rawValue, write.sql(of: table), db)
    }

    /// `RecordTable.patchSQL(slots:tags:)`
    mutating func patch(of table: RecordTable, slots: UInt32, tags: Bool, _ db: Database) throws -> Statement {
        let key = Int(slots) << 8 | (tags ? 1 << 7 : 0) | table.slot
        if let statement = patches[key] { return statement }
        let statement = try db.makeStatement(sql: table.patchSQL(slots: slots, tags: tags))
        patches[key] = statement
        return statement
    }

    private mutating func statement(_ table: RecordTable, _ index: Int, _ sql: @autoclosure () -> String, _ db: Database) throws -> Statement {
        let slot = table.slot * Self.perTable + index
        if let statement = prepared[slot] { return statement }
        let statement = try db.makeStatement(sql: sql())
        prepared[slot] = statement
        return statement
    }
}

/// Reads and writes `RecordState`s as rows.
enum RecordRows {
    /// The `crdt` blob's format: 2 keeps each register's heads and the record's operation spans
    /// (SPEC.md §9); format 1, of stores made before them, is read as registers of writes with
    /// unknown predecessors and no spans, and rewritten as format 2 when its record is.
    static let crdtFormat: UInt8 = 2

    static func load(_ ref: RecordRef, _ db: Database, _ directory: ReplicaDirectory) throws -> RecordState? {
        var statements = RecordStatements()
        return try load(ref, db, directory, &statements)
    }

    static func load(
        _ ref: RecordRef, _ db: Database, _ directory: ReplicaDirectory, _ statements: inout RecordStatements
    ) throws -> RecordState? {
        if let table = RecordTable.of(ref.kind) {
            let statement = HotStatement(db, prepared: try statements.select(from: table, db))
            statement.bind(1, id: ref.id)
            guard try statement.step() else { return nil }
            let crdt = statement.withBlob(Int32(table.columns.count)) { [UInt8]($0) }
            return try decode(ref: ref, table: table, crdt: crdt, directory) { index, field in
                guard let storage = statement.storage(Int32(index)) else { throw wrongType(field) }
                return try value(of: field, storage)
            }
        }
        let statement = try HotStatement(db, "SELECT crdt FROM other_records WHERE kind = ? AND id = ?")
        statement.bind(1, Int64(ref.kind.rawValue))
        statement.bind(2, id: ref.id)
        guard try statement.step() else { return nil }
        let crdt = statement.withBlob(0) { [UInt8]($0) }
        return try decode(ref: ref, table: nil, crdt: crdt, directory) { _, _ in .null }
    }

    /// Rebuilds a state from a row whose columns, from `offset` on, are the table's field columns
    /// then `crdt` (just `crdt` for kinds without a table).
    static func decode(
        ref: RecordRef, table: RecordTable?, row: Row, offset: Int = 0, _ directory: ReplicaDirectory
    ) throws -> RecordState {
        let blob: Data = try row.column(offset + (table?.columns.count ?? 0))
        return try decode(ref: ref, table: table, crdt: [UInt8](blob), directory) { index, field in
            try value(of: field, row[offset + index] as DatabaseValue)
        }
    }

    /// Rebuilds a state from its `crdt` blob and its field columns: `column(i, field)` is the
    /// value of the table's i-th field column.
    static func decode(
        ref: RecordRef, table: RecordTable?, crdt: [UInt8], _ directory: ReplicaDirectory,
        column: (Int, Field) throws -> Value
    ) throws -> RecordState {
        var reader = ByteReader(crdt)
        do {
            let format = try readFormat(&reader)
            var known = [LWWRegister?](repeating: nil, count: ref.kind.knownFieldCount)
            let mask = try reader.varint()
            let flagged = format == 1 ? 0 : try reader.varint()
            if let table {
                // The table's columns are the kind's known fields, in order.
                for (index, entry) in table.columns.enumerated() where mask & (1 << UInt64(entry.field.code)) != 0 {
                    let stamp = try readStamp(&reader, directory)
                    let hasFlags = flagged & (1 << UInt64(entry.field.code)) != 0
                    known[index] = try readHeads(of: try column(index, entry.field), stamp, hasFlags: hasFlags, &reader, format, directory)
                }
            }
            let unknown = try readUnknown(&reader, format, directory)
            let tags = try readTags(&reader, directory)
            let operations = format == 1 ? OperationSpans() : try readSpans(&reader, directory)
            guard reader.isAtEnd else { throw DecodeError.malformed("trailing bytes") }
            return RecordState(ref: ref, knownRegisters: known, unknown: unknown, tags: tags, operations: operations)
        } catch let error as DecodeError {
            throw ConcordError(.corrupt, "the merge metadata of \(ref) is damaged (\(error))")
        }
    }

    /// How `save` writes a row.
    enum Write: Int, CaseIterable {
        /// A new row; the record must have none.
        case insert
        /// A new row, unless the record has one: then nothing is written.
        case insertIfAbsent
        /// The record's row, which must exist.
        case update

        func sql(of table: RecordTable) -> String {
            switch self {
            case .insert: table.insertSQL
            case .insertIfAbsent: table.insertIfAbsentSQL
            case .update: table.updateSQL
            }
        }
    }

    /// A record's row as `save` writes it, in one buffer that SQLite reads in place while the
    /// statement runs (rather than copying each value into an allocation of its own): the `crdt`
    /// blob, then the `tags` column, then the values of the text fields, in column order.
    struct EncodedRow {
        /// The record: a row is written for its own state only.
        fileprivate var ref: RecordRef
        fileprivate var bytes: [UInt8]
        fileprivate var crdtEnd: Int
        fileprivate var tagsEnd: Int
        /// The fields in conflict: the `conflicts` column.
        fileprivate var conflicts: Int64
    }

    /// Encodes a state's row for `save`. Without `db` it registers no replica (see
    /// `ReplicaDirectory.index(of:_:)`): a merge's folding thread encodes the rows of new records
    /// ahead of the thread that writes them, with a copy of the directory.
    static func encode(_ state: RecordState, _ db: Database?, _ directory: inout ReplicaDirectory) throws -> EncodedRow {
        var writer = ByteWriter(capacity: 256)
        writer.byte(crdtFormat)
        let table = RecordTable.of(state.ref.kind)
        // The table's columns are the kind's known fields, in the order of `knownRegisters`.
        // Registers are read in place (`known[slot]?.…`): a merge saves every record it touches,
        // and copying a register costs a retain of its value and of its box.
        let known = state.knownRegisters
        var mask: UInt64 = 0
        var flagged: UInt64 = 0
        var conflicts: Int64 = 0
        if let table {
            for (slot, (field, _)) in table.columns.enumerated() {
                guard let isPlain = known[slot]?.isPlain else { continue }
                let bit: UInt64 = 1 << UInt64(field.code)
                mask |= bit
                if !isPlain { flagged |= bit }
                if known[slot]?.inConflict == true { conflicts += 1 }
            }
        }
        writer.varint(mask)
        writer.varint(flagged)
        for slot in known.indices {
            guard case .some(let register) = known[slot] else { continue }
            try writeRegister(register, flagged: !register.isPlain, &writer, db, &directory)
        }
        try writeUnknown(state.unknown, &writer, db, &directory)
        for register in state.unknown.values where register.inConflict { conflicts += 1 }
        try writeTags(state.tags, &writer, db, &directory)
        try writeSpans(state.operations, &writer, db, &directory)
        let crdtEnd = writer.bytes.count
        guard table != nil else {
            return EncodedRow(ref: state.ref, bytes: writer.bytes, crdtEnd: crdtEnd, tagsEnd: crdtEnd, conflicts: conflicts)
        }
        writeTagsColumn(state.tags, into: &writer)
        let tagsEnd = writer.bytes.count
        for slot in known.indices {
            if case .string(let text)? = known[slot]?.value { writer.bytes(text.utf8) }
        }
        return EncodedRow(ref: state.ref, bytes: writer.bytes, crdtEnd: crdtEnd, tagsEnd: tagsEnd, conflicts: conflicts)
    }

    /// Writes a state's row, encoded here unless `encoded` (by `encode`, of this same state), and
    /// tells whether it wrote one (only `insertIfAbsent` may not).
    @discardableResult
    static func save(
        _ state: RecordState, as write: Write, _ db: Database, _ directory: inout ReplicaDirectory,
        _ statements: inout RecordStatements, encoded: EncodedRow? = nil
    ) throws -> Bool {
        let row = try encoded ?? encode(state, db, &directory)
        // The text columns are bound from `row`'s bytes, the others from `state`: they must agree.
        precondition(row.ref == state.ref, "a row encoded for \(row.ref) saved for \(state.ref)")
        guard let table = RecordTable.of(state.ref.kind) else {
            let statement = try HotStatement(
                db, "INSERT \(write == .insertIfAbsent ? "OR IGNORE" : "OR REPLACE") INTO other_records (kind, id, crdt) VALUES (?, ?, ?)")
            statement.bind(1, Int64(state.ref.kind.rawValue))
            statement.bind(2, id: state.ref.id)
            statement.bind(3, bytes: row.bytes)
            try statement.execute()
            return write != .insertIfAbsent || statement.changes > 0
        }
        let known = state.knownRegisters
        let statement = HotStatement(db, prepared: try statements.statement(write, of: table, db))
        return try row.bytes.withUnsafeBytes { payload in
            statement.bind(1, id: state.ref.id)
            var index: Int32 = 2
            var textStart = row.tagsEnd
            for (slot, (field, _)) in table.columns.enumerated() {
                bindColumn(statement, index, field, known[slot]?.value, payload, &textStart)
                index += 1
            }
            statement.bindInPlace(index, text: UnsafeRawBufferPointer(rebasing: payload[row.crdtEnd..<row.tagsEnd]))
            statement.bind(index + 1, row.conflicts)
            // The bindings point into `payload`, which ends with this call.
            defer { statement.clearBindings() }
            statement.bindInPlace(index + 2, blob: UnsafeRawBufferPointer(rebasing: payload[0..<row.crdtEnd]))
            try statement.execute()
            return write != .insertIfAbsent || statement.changes > 0
        }
    }

    /// Joins `state`, which holds only what a batch applied to its record (an unread state of
    /// `WriteContext`), with the record's row where the row lies; false, writing nothing, when the
    /// record has no row. Reads the row's `crdt` blob, and a field column only when the write it
    /// holds loses but stays a head (its value is then a rival's); rewrites the blob and only the
    /// columns whose registers `state` wins (with the tags column when `state` has tags). The
    /// row it leaves is the one `save` writes for the joined state, byte for byte: the values of
    /// the other columns and the other parts of the blob stay as they are, and are not decoded.
    static func patch(
        _ state: RecordState, in table: RecordTable, _ db: Database, _ directory: inout ReplicaDirectory,
        _ statements: inout RecordStatements
    ) throws -> Bool {
        guard let stored = try storedCRDT(of: state.ref, in: table, db, &statements) else { return false }
        let known = state.knownRegisters
        var reader = ByteReader(stored)
        var writer = ByteWriter(capacity: stored.count + 64)
        // Bit i stands for `table.columns[i]`.
        var wonSlots: UInt32 = 0
        var joinedTags: TagSet?
        var joinedValues = [Value?](repeating: nil, count: known.count)
        // The fields in conflict once joined: the `conflicts` column.
        var conflicts: Int64 = 0
        do {
            let format = try readFormat(&reader)
            let storedMask = try reader.varint()
            let storedFlagged = format == 1 ? 0 : try reader.varint()
            var mask: UInt64 = 0
            for (slot, (field, _)) in table.columns.enumerated() {
                let bit: UInt64 = 1 << UInt64(field.code)
                if storedMask & bit != 0 || known[slot] != nil { mask |= bit }
            }
            // The registers go to `registers` first: which of them have a flags byte comes before them.
            var registers = ByteWriter(capacity: stored.count + 32)
            var flagged: UInt64 = 0
            for (slot, (field, _)) in table.columns.enumerated() {
                let bit: UInt64 = 1 << UInt64(field.code)
                let start = reader.offset
                guard storedMask & bit != 0 else {
                    if let register = known[slot] {
                        if !register.isPlain { flagged |= bit }
                        try writeRegister(register, flagged: !register.isPlain, &registers, db, &directory)
                        wonSlots |= 1 << UInt32(slot)
                        joinedValues[slot] = register.value
                        if register.inConflict { conflicts += 1 }
                    }
                    continue
                }
                let storedStamp = try readStamp(&reader, directory)
                let headsStart = reader.offset
                // The column's value is not read: a placeholder stands for it, and is never written.
                let storedRegister = try readHeads(
                    of: .null, storedStamp, hasFlags: storedFlagged & bit != 0, &reader, format, directory)
                guard let register = known[slot] else {
                    if storedRegister.inConflict { conflicts += 1 }
                    if !storedRegister.isPlain { flagged |= bit }
                    if format == crdtFormat {
                        registers.bytes(stored[start..<reader.offset])
                    } else {
                        try writeRegister(storedRegister, flagged: !storedRegister.isPlain, &registers, db, &directory)
                    }
                    continue
                }
                var joined = storedRegister.merging(register)
                if joined.rivals.contains(where: { $0.stamp == storedStamp }) {
                    // The stored winner lost and stays a head, with the value its column holds.
                    var heads = ByteReader(stored, offset: headsStart)
                    let value = try storedValue(of: slot, in: table, ref: state.ref, db, &statements)
                    joined = try readHeads(of: value, storedStamp, hasFlags: storedFlagged & bit != 0, &heads, format, directory)
                        .merging(register)
                }
                if joined.inConflict { conflicts += 1 }
                if !joined.isPlain { flagged |= bit }
                try writeRegister(joined, flagged: !joined.isPlain, &registers, db, &directory)
                if joined.stamp != storedStamp {
                    wonSlots |= 1 << UInt32(slot)
                    joinedValues[slot] = joined.value
                }
            }
            writer.byte(crdtFormat)
            writer.varint(mask)
            writer.varint(flagged)
            writer.bytes(registers.bytes[...])
            if state.unknown.isEmpty, format == crdtFormat {
                let start = reader.offset
                let unknown = try readUnknown(&reader, format, directory)
                conflicts += Int64(unknown.values.filter(\.inConflict).count)
                writer.bytes(stored[start..<reader.offset])
            } else {
                var unknown = try readUnknown(&reader, format, directory)
                for (name, register) in state.unknown { unknown[name] = unknown[name]?.merging(register) ?? register }
                conflicts += Int64(unknown.values.filter(\.inConflict).count)
                try writeUnknown(unknown, &writer, db, &directory)
            }
            if state.tags.entries.isEmpty {
                let start = reader.offset
                try skipTags(&reader, directory)
                writer.bytes(stored[start..<reader.offset])
            } else {
                var tags = try readTags(&reader, directory)
                tags.merge(state.tags)
                try writeTags(tags, &writer, db, &directory)
                joinedTags = tags
            }
            var operations = format == 1 ? OperationSpans() : try readSpans(&reader, directory)
            operations.formUnion(state.operations)
            try writeSpans(operations, &writer, db, &directory)
            guard reader.isAtEnd else { throw DecodeError.malformed("trailing bytes") }
        } catch let error as DecodeError {
            throw ConcordError(.corrupt, "the merge metadata of \(state.ref) is damaged (\(error))")
        }
        let crdtEnd = writer.bytes.count
        // Operations applied again (a merge finished twice) change nothing.
        guard wonSlots != 0 || joinedTags != nil || !writer.bytes[..<crdtEnd].elementsEqual(stored) else { return true }
        if let joinedTags { writeTagsColumn(joinedTags, into: &writer) }
        let tagsEnd = writer.bytes.count
        for slot in known.indices where wonSlots & (1 << UInt32(slot)) != 0 {
            if case .string(let text)? = joinedValues[slot] { writer.bytes(text.utf8) }
        }
        let statement = HotStatement(db, prepared: try statements.patch(of: table, slots: wonSlots, tags: joinedTags != nil, db))
        try writer.bytes.withUnsafeBytes { payload in
            statement.bind(1, id: state.ref.id)
            var index: Int32 = 2
            var textStart = tagsEnd
            for (slot, (field, _)) in table.columns.enumerated() where wonSlots & (1 << UInt32(slot)) != 0 {
                bindColumn(statement, index, field, joinedValues[slot], payload, &textStart)
                index += 1
            }
            if joinedTags != nil {
                statement.bindInPlace(index, text: UnsafeRawBufferPointer(rebasing: payload[crdtEnd..<tagsEnd]))
                index += 1
            }
            statement.bind(index, conflicts)
            // The bindings point into `payload`, which ends with this call.
            defer { statement.clearBindings() }
            statement.bindInPlace(index + 1, blob: UnsafeRawBufferPointer(rebasing: payload[0..<crdtEnd]))
            try statement.execute()
        }
        return true
    }

    /// The value a record's row holds in the column of `slot` (the row exists).
    private static func storedValue(
        of slot: Int, in table: RecordTable, ref: RecordRef, _ db: Database, _ statements: inout RecordStatements
    ) throws -> Value {
        let statement = HotStatement(db, prepared: try statements.select(from: table, db))
        statement.bind(1, id: ref.id)
        guard try statement.step() else { throw ConcordError(.corrupt, "the row of \(ref) went missing during a merge") }
        let field = table.columns[slot].field
        guard let storage = statement.storage(Int32(slot)) else { throw wrongType(field) }
        return try value(of: field, storage)
    }

    /// The `crdt` blob of a record's row, nil when it has none.
    private static func storedCRDT(
        of ref: RecordRef, in table: RecordTable, _ db: Database, _ statements: inout RecordStatements
    ) throws -> [UInt8]? {
        let statement = HotStatement(db, prepared: try statements.selectCRDT(from: table, db))
        statement.bind(1, id: ref.id)
        guard try statement.step() else { return nil }
        return statement.withBlob(0) { [UInt8]($0) }
    }

    /// Binds a known field's value as its column holds it. Text is read in place from `payload`,
    /// where it starts at `textStart`, which moves past it.
    private static func bindColumn(
        _ statement: borrowing HotStatement, _ index: Int32, _ field: Field, _ value: Value?,
        _ payload: UnsafeRawBufferPointer, _ textStart: inout Int
    ) {
        switch value {
        case nil, .null?: if field == .deleted { statement.bind(index, Int64(0)) } else { statement.bindNull(index) }
        case .bool(let b)?: statement.bind(index, Int64(b ? 1 : 0))
        case .int(let i)?: statement.bind(index, i)
        case .string(let text)?:
            let end = textStart + text.utf8.count
            statement.bindInPlace(index, text: UnsafeRawBufferPointer(rebasing: payload[textStart..<end]))
            textStart = end
        }
    }

    /// Appends the `tags` column: the present tags as a canonical JSON array of strings, in UTF-8.
    static func writeTagsColumn(_ tags: TagSet, into writer: inout ByteWriter) {
        writer.byte(UInt8(ascii: "["))
        var first = true
        for entry in tags.entries where entry.state.isPresent {
            if !first { writer.byte(UInt8(ascii: ",")) }
            first = false
            writer.appending { JSON.writeString(entry.tag.string, into: &$0) }
        }
        writer.byte(UInt8(ascii: "]"))
    }

    /// The value of a known field from its column, by the field's type in SPEC.md.
    static func value(of field: Field, _ database: DatabaseValue) throws -> Value {
        switch database.storage {
        case .null: return try value(of: field, HotStatement.Storage.null)
        case .int64(let i): return try value(of: field, .int(i))
        case .string(let s): return try value(of: field, .text(s))
        case .blob(let data) where RecordTable.textFields.contains(field):
            return .string(String(decoding: data, as: UTF8.self))
        default: throw wrongType(field)
        }
    }

    static func value(of field: Field, _ storage: HotStatement.Storage) throws -> Value {
        switch (field, storage) {
        case (_, .null): return .null
        case (.deleted, .int(let i)), (.pinned, .int(let i)): return .bool(i != 0)
        case (_, .int(let i)): return .int(i)
        case (_, .text(let s)): return .string(s)
        }
    }

    static func wrongType(_ field: Field) -> ConcordError {
        ConcordError(.corrupt, "column \(field.name) holds a value of the wrong type")
    }

    private static func writeStamp(_ stamp: Stamp, _ writer: inout ByteWriter, _ db: Database?, _ directory: inout ReplicaDirectory) throws {
        writer.varint(stamp.timestamp.rawValue)
        writer.varint(UInt64(try directory.index(of: stamp.replica, db)))
        writer.varint(stamp.seq)
    }

    private static func readStamp(_ reader: inout ByteReader, _ directory: ReplicaDirectory) throws -> Stamp {
        let timestamp = Timestamp(rawValue: try reader.varint())
        let replica = try directory.id(at: Int64(bitPattern: try reader.varint()))
        return Stamp(timestamp: timestamp, replica: replica, seq: try reader.varint())
    }

    // The sections of the crdt blob after the known fields' stamps (SPEC.md, "Store").

    private static func writeUnknown(
        _ unknown: [ExactString: LWWRegister], _ writer: inout ByteWriter, _ db: Database?, _ directory: inout ReplicaDirectory
    ) throws {
        writer.varint(UInt64(unknown.count))
        guard !unknown.isEmpty else { return }
        for (name, register) in unknown.sorted(by: { $0.key < $1.key }) {
            writer.string(name.string)
            OperationCodec.encode(register.value, into: &writer)
            try writeRegister(register, flagged: true, &writer, db, &directory)
        }
    }

    private static func readUnknown(
        _ reader: inout ByteReader, _ format: UInt8, _ directory: ReplicaDirectory
    ) throws -> [ExactString: LWWRegister] {
        var unknown: [ExactString: LWWRegister] = [:]
        for _ in 0..<(try reader.varint()) {
            let name = try reader.string()
            let value = try OperationCodec.decodeValue(from: &reader)
            let stamp = try readStamp(&reader, directory)
            unknown[ExactString(name)] = try readHeads(of: value, stamp, hasFlags: true, &reader, format, directory)
        }
        return unknown
    }

    private static func readFormat(_ reader: inout ByteReader) throws -> UInt8 {
        let format = try reader.byte()
        guard format == 1 || format == crdtFormat else { throw DecodeError.malformed("unknown crdt format \(format)") }
        return format
    }

    // A register's heads, after its stamp (SPEC.md §9, the `crdt` blob): a flags byte, then what
    // it flags. Format 1 has none: every write it holds had unknown predecessors.
    private static let unknownThroughWinner: UInt8 = 0x01
    private static let unknownThroughStamp: UInt8 = 0x02
    private static let seenFollows: UInt8 = 0x04
    private static let rivalsFollow: UInt8 = 0x08
    private static let hiddenFollow: UInt8 = 0x10

    /// Writes a register's stamp and, when `flagged`, its heads (not the winner's value, which has
    /// its column or is written before). Only a plain register (`isPlain`) goes unflagged.
    private static func writeRegister(
        _ register: LWWRegister, flagged: Bool, _ writer: inout ByteWriter, _ db: Database?, _ directory: inout ReplicaDirectory
    ) throws {
        try writeStamp(register.stamp, &writer, db, &directory)
        guard flagged else { return }
        guard !register.keepsOnlyItsWinner else {
            writer.byte(register.unknownThrough == nil ? 0 : unknownThroughWinner)
            return
        }
        var flags: UInt8 = 0
        if let through = register.unknownThrough { flags |= through == register.stamp ? unknownThroughWinner : unknownThroughStamp }
        if !register.seen.entries.isEmpty { flags |= seenFollows }
        if !register.rivals.isEmpty { flags |= rivalsFollow }
        if !register.hidden.isEmpty { flags |= hiddenFollow }
        writer.byte(flags)
        if flags & unknownThroughStamp != 0 { try writeStamp(register.unknownThrough!, &writer, db, &directory) }
        if flags & seenFollows != 0 {
            writer.varint(UInt64(register.seen.entries.count))
            for entry in register.seen.entries {
                writer.varint(UInt64(try directory.index(of: entry.replica, db)))
                writer.varint(entry.seq)
            }
        }
        if flags & rivalsFollow != 0 {
            writer.varint(UInt64(register.rivals.count))
            for rival in register.rivals {
                OperationCodec.encode(rival.value, into: &writer)
                try writeStamp(rival.stamp, &writer, db, &directory)
            }
        }
        if flags & hiddenFollow != 0 {
            writer.varint(UInt64(register.hidden.count))
            for stamp in register.hidden { try writeStamp(stamp, &writer, db, &directory) }
        }
    }

    /// Reads the heads that follow a register's stamp, for a winner of `value`.
    private static func readHeads(
        of value: Value, _ stamp: Stamp, hasFlags: Bool, _ reader: inout ByteReader, _ format: UInt8, _ directory: ReplicaDirectory
    ) throws -> LWWRegister {
        guard format != 1 else { return LWWRegister(value: value, stamp: stamp) }
        // No flags byte: a register of one write whose writer listed what it had seen (or nothing).
        guard hasFlags else { return LWWRegister(value: value, stamp: stamp, predecessors: .empty) }
        let flags = try reader.byte()
        guard flags & 0xE0 == 0, flags & (unknownThroughWinner | unknownThroughStamp) != unknownThroughWinner | unknownThroughStamp else {
            throw DecodeError.malformed("register flags 0x\(String(flags, radix: 16))")
        }
        var unknownThrough: Stamp?
        if flags & unknownThroughWinner != 0 { unknownThrough = stamp }
        if flags & unknownThroughStamp != 0 { unknownThrough = try readStamp(&reader, directory) }
        var seen: [OperationID] = []
        if flags & seenFollows != 0 {
            let count = try reader.varint()
            guard count <= UInt64(reader.remaining / 2) else { throw DecodeError.truncated }
            for _ in 0..<count {
                let replica = try directory.id(at: Int64(bitPattern: try reader.varint()))
                seen.append(OperationID(replica: replica, seq: try reader.varint()))
            }
        }
        var rivals: [LWWRegister.Write] = []
        if flags & rivalsFollow != 0 {
            let count = try reader.varint()
            guard count <= UInt64(reader.remaining / 4) else { throw DecodeError.truncated }
            for _ in 0..<count {
                let rivalValue = try OperationCodec.decodeValue(from: &reader)
                rivals.append(LWWRegister.Write(value: rivalValue, stamp: try readStamp(&reader, directory)))
            }
        }
        var hidden: [Stamp] = []
        if flags & hiddenFollow != 0 {
            let count = try reader.varint()
            guard count <= UInt64(reader.remaining / 3) else { throw DecodeError.truncated }
            for _ in 0..<count { hidden.append(try readStamp(&reader, directory)) }
        }
        return LWWRegister(
            value: value, stamp: stamp, rivals: rivals, hidden: hidden, seen: Predecessors(seen), unknownThrough: unknownThrough)
    }

    /// The record's operation spans: a count, then each as its author's index, first seq, and
    /// length less one.
    private static func writeSpans(
        _ operations: OperationSpans, _ writer: inout ByteWriter, _ db: Database?, _ directory: inout ReplicaDirectory
    ) throws {
        writer.varint(UInt64(operations.spans.count))
        for span in operations.spans {
            writer.varint(UInt64(try directory.index(of: span.replica, db)))
            writer.varint(span.first)
            writer.varint(span.last - span.first)
        }
    }

    private static func readSpans(_ reader: inout ByteReader, _ directory: ReplicaDirectory) throws -> OperationSpans {
        let count = try reader.varint()
        guard count <= UInt64(reader.remaining / 3) else { throw DecodeError.truncated }
        var spans: [OperationSpans.Span] = []
        spans.reserveCapacity(Int(count))
        for _ in 0..<count {
            let replica = try directory.id(at: Int64(bitPattern: try reader.varint()))
            let first = try reader.varint()
            let length = try reader.varint()
            guard first >= 1, length <= UInt64.max - first else { throw DecodeError.malformed("an impossible span") }
            spans.append(OperationSpans.Span(replica: replica, first: first, last: first + length))
        }
        return OperationSpans(spans)
    }

    private static func writeTags(_ tags: TagSet, _ writer: inout ByteWriter, _ db: Database?, _ directory: inout ReplicaDirectory) throws {
        writer.varint(UInt64(tags.entries.count))
        for entry in tags.entries {
            writer.string(entry.tag.string)
            try writeDots(entry.state.live, &writer, db, &directory)
            try writeDots(entry.state.removed, &writer, db, &directory)
        }
    }

    private static func readTags(_ reader: inout ByteReader, _ directory: ReplicaDirectory) throws -> TagSet {
        var entries: [TagSet.Entry] = []
        let count = try reader.varint()
        guard count <= UInt64(reader.remaining) else { throw DecodeError.truncated }
        entries.reserveCapacity(Int(count))
        for _ in 0..<count {
            let tag = ExactString(try reader.string())
            let live = try readDots(&reader, directory)
            let removed = try readDots(&reader, directory)
            entries.append(TagSet.Entry(tag: tag, state: TagState(live: live, removed: removed)))
        }
        return TagSet(entries: entries)
    }

    /// Reads past the tags section, checking what `readTags` checks but keeping nothing.
    private static func skipTags(_ reader: inout ByteReader, _ directory: ReplicaDirectory) throws {
        let count = try reader.varint()
        guard count <= UInt64(reader.remaining) else { throw DecodeError.truncated }
        for _ in 0..<count {
            _ = try reader.string()
            for _ in 0..<2 {
                for _ in 0..<(try reader.varint()) {
                    _ = try directory.id(at: Int64(bitPattern: try reader.varint()))
                    _ = try reader.varint()
                }
            }
        }
    }

    private static func writeDots(_ dots: Dots, _ writer: inout ByteWriter, _ db: Database?, _ directory: inout ReplicaDirectory) throws {
        writer.varint(UInt64(dots.count))
        for dot in dots {
            writer.varint(UInt64(try directory.index(of: dot.replica, db)))
            writer.varint(dot.seq)
        }
    }

    private static func readDots(_ reader: inout ByteReader, _ directory: ReplicaDirectory) throws -> Dots {
        let count = try reader.varint()
        guard count <= UInt64(reader.remaining / 2) else { throw DecodeError.truncated }
        var dots: [OperationID] = []
        dots.reserveCapacity(Int(count))
        for _ in 0..<count {
            let replica = try directory.id(at: Int64(bitPattern: try reader.varint()))
            dots.append(OperationID(replica: replica, seq: try reader.varint()))
        }
        return Dots(dots)
    }
}
