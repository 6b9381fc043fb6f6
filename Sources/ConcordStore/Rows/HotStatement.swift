import ConcordCore
import GRDB
import GRDBSQLite

/// One execution of a statement GRDB prepared and caches, driven through SQLite's C API.
///
/// The merge reads and writes a row per record and per log chunk; GRDB's `Row` and
/// `StatementArguments` box every value, which cost more than SQLite's own work there. Only the
/// hot statements of `RecordRows` and `WriteContext` use this; everything else goes through GRDB.
/// The statement runs inside GRDB's transaction on GRDB's connection, so busy handling,
/// transactions and observation are GRDB's as usual.
struct HotStatement: ~Copyable {
    private let handle: OpaquePointer
    private let db: Database

    /// Takes `db`'s cached statement for `sql`, reset and with its bindings cleared.
    init(_ db: Database, _ sql: String) throws {
        handle = try db.cachedStatement(sql: sql).sqliteStatement
        self.db = db
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// A statement prepared before, whose every parameter the caller binds.
    init(_ db: Database, prepared statement: Statement) {
        handle = statement.sqliteStatement
        self.db = db
        sqlite3_reset(handle)
    }

    deinit {
        // A statement left on a row would keep its read cursor open.
        sqlite3_reset(handle)
    }

    // MARK: Binding (indexes from 1, as in SQLite)

    func bind(_ index: Int32, _ value: Int64) {
        sqlite3_bind_int64(handle, index, value)
    }

    func bindNull(_ index: Int32) {
        sqlite3_bind_null(handle, index)
    }

    func bind(_ index: Int32, _ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            _ = sqlite3_bind_text(handle, index, utf8.baseAddress, Int32(utf8.count), sqliteTransient)
        }
    }

    /// Binds UTF-8 bytes as text (not NULL, even when empty).
    func bind(_ index: Int32, utf8 bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            let text = (buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!).assumingMemoryBound(to: CChar.self)
            _ = sqlite3_bind_text(handle, index, text, Int32(buffer.count), sqliteTransient)
        }
    }

    func bind(_ index: Int32, bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            // A zero-length blob still needs a non-NULL pointer, or SQLite stores NULL.
            _ = sqlite3_bind_blob(handle, index, buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(buffer.count), sqliteTransient)
        }
    }

    /// Binds UTF-8 bytes as text (not NULL, even when empty) that SQLite reads in place: they
    /// must stay where they are until the statement has run and `clearBindings` was called.
    func bindInPlace(_ index: Int32, text: UnsafeRawBufferPointer) {
        let pointer = (text.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!).assumingMemoryBound(to: CChar.self)
        sqlite3_bind_text(handle, index, pointer, Int32(text.count), sqliteStatic)
    }

    /// Binds a blob that SQLite reads in place, as `bindInPlace(_:text:)` does.
    func bindInPlace(_ index: Int32, blob: UnsafeRawBufferPointer) {
        sqlite3_bind_blob(handle, index, blob.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(blob.count), sqliteStatic)
    }

    /// Unbinds every parameter, so that no binding points to bytes that are gone.
    func clearBindings() {
        sqlite3_clear_bindings(handle)
    }

    /// The 16 big-endian bytes of an identifier.
    func bind(_ index: Int32, id: some Identifier128) {
        withUnsafeBytes(of: (id.high.bigEndian, id.low.bigEndian)) { buffer in
            _ = sqlite3_bind_blob(handle, index, buffer.baseAddress, 16, sqliteTransient)
        }
    }

    // MARK: Running

    /// Steps once: true when a row is ready to read, false when the statement is done.
    func step() throws -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code:
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code), message: db.lastErrorMessage,
                sql: String(cString: sqlite3_sql(handle)))
        }
    }

    /// Runs a statement that returns no rows.
    func execute() throws {
        while try step() {}
    }

    /// The rows the connection's last insert, update or delete changed.
    var changes: Int32 {
        sqlite3_changes(sqlite3_db_handle(handle))
    }

    // MARK: Reading the current row (columns from 0)

    func isNull(_ column: Int32) -> Bool {
        sqlite3_column_type(handle, column) == SQLITE_NULL
    }

    func int64(_ column: Int32) -> Int64 {
        sqlite3_column_int64(handle, column)
    }

    /// The column's value as SPEC.md stores fields: NULL, an integer or text; anything else
    /// (a real, a blob) is nil, for the caller to report as damage.
    func storage(_ column: Int32) -> Storage? {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_NULL: return .null
        case SQLITE_INTEGER: return .int(sqlite3_column_int64(handle, column))
        case SQLITE_TEXT:
            let count = Int(sqlite3_column_bytes(handle, column))
            guard let text = sqlite3_column_text(handle, column) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        default: return nil
        }
    }

    enum Storage {
        case null
        case int(Int64)
        case text(String)
    }

    /// Calls `body` with the bytes of a blob column (empty for NULL or an empty blob); the bytes
    /// are valid only during the call.
    func withBlob<T>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        let pointer = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        return try body(UnsafeRawBufferPointer(start: pointer, count: pointer == nil ? 0 : count))
    }
}

/// SQLite's "copy the bytes now" destructor.
private let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
/// SQLite's "the bytes stay put" destructor.
private let sqliteStatic: sqlite3_destructor_type? = nil
