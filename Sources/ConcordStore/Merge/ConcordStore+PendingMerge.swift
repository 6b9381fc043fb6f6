import ConcordCore
import Foundation
import GRDB

/// A log row whose operations a batched merge has not applied to all their records yet
/// (`pending_merge`, SPEC.md §5.6 and §9).
struct PendingRow {
    var replica: Int64
    var firstSeq: Int64
    /// The operations of records up to this one (in record order) are applied; nil: none are.
    var appliedThrough: RecordRef?

    /// The pending rows, in log order.
    static func fetchAll(_ db: Database) throws -> [PendingRow] {
        // A store of schema 2 opened read-only is not migrated: it has nothing pending.
        guard try db.tableExists("pending_merge") else { return [] }
        return try Row.fetchAll(db, sql: "SELECT replica, first_seq, applied_through FROM pending_merge ORDER BY replica, first_seq").map { row in
            let through: Data? = try row.column(2)
            return PendingRow(replica: try row.column(0), firstSeq: try row.column(1), appliedThrough: try through.map(RecordRef.init(appliedThrough:)))
        }
    }

    /// Records in the store that this process applies pending rows (SPEC.md §9): a store opened
    /// meanwhile leaves them to it.
    static func markThisProcessMerging(_ db: Database) throws {
        let process = ProcessIdentity.current
        try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", arguments: [process.key, process.start])
    }

    /// Forgets that this process applies pending rows.
    static func unmarkThisProcessMerging(_ db: Database) throws {
        try db.execute(sql: "DELETE FROM meta WHERE key = ?", arguments: [ProcessIdentity.current.key])
    }

    /// The processes recorded as applying pending rows (`markThisProcessMerging`).
    static func mergingProcesses(_ db: Database) throws -> [ProcessIdentity] {
        try Row.fetchAll(db, sql: "SELECT key, value FROM meta WHERE key LIKE 'merging %'").compactMap { row in
            ProcessIdentity(key: try row.column(0), value: try row.column(1))
        }
    }

    /// The log row it names.
    var key: LogRowKey { LogRowKey(replica: replica, firstSeq: firstSeq) }

    /// A log row's key: its author's index and its first seq.
    struct LogRowKey: Hashable {
        var replica: Int64
        var firstSeq: Int64
    }

    /// Whether the row's operation on `record` is still to be applied.
    func awaits(_ record: RecordRef) -> Bool {
        appliedThrough.map { $0 < record } ?? true
    }
}

extension RecordRef {
    /// `pending_merge.applied_through`: the id's 16 bytes, then the kind, so that byte order is
    /// record order.
    var appliedThroughBytes: Data {
        var writer = ByteWriter(capacity: 17)
        writer.identifier(id)
        writer.byte(kind.rawValue)
        return Data(writer.bytes)
    }

    init(appliedThrough data: Data) throws {
        var reader = ByteReader([UInt8](data))
        guard data.count == 17, let id: RecordID = try? reader.identifier(), let kind = try? reader.byte(), kind != 0 else {
            throw ConcordError(.corrupt, "pending_merge holds a damaged record reference")
        }
        self.init(kind: RecordKind(rawValue: kind), id: id)
    }
}

extension ConcordStore {
    /// How many logged operations wait to be applied to their records: those of a batched merge
    /// under way, or of one a crash interrupted, which the next merge finishes (SPEC.md §5.6).
    package func pendingOperationCount() throws(ConcordError) -> Int {
        try guarded {
            try readOnWriter { db in
                var count = 0
                try forEachPendingOperation(in: try PendingRow.fetchAll(db), db) { _ in count += 1 }
                return count
            }
        }
    }

    /// Applies to their records the operations a merge logged and has not applied yet (one a
    /// crash or a failure interrupted, or one under way in another process): in record order, in
    /// batches of at most `environment.mergeBatch.records` records, each its own transaction.
    /// Every merge does this first; so does opening a store for writing, unless a running process
    /// is applying it (`finishAbandonedMerge`). Returns at once when nothing waits.
    /// - Returns: how many operations it applied.
    @discardableResult
    package func finishPendingMerge() throws(ConcordError) -> Int {
        try guarded { try finishPendingMerge(afterEachBatch: {}) }
    }

    /// Applies what a merge left pending, unless a running process is applying it (SPEC.md §5.6):
    /// what a store opened for writing does first. Forgets the processes recorded as applying
    /// pending rows that no longer run.
    func finishAbandonedMerge() throws(ConcordError) {
        let (pending, appliers) = try guarded {
            try readOnWriter { db in (try !PendingRow.fetchAll(db).isEmpty, try PendingRow.mergingProcesses(db)) }
        }
        let stopped = appliers.filter { !$0.isRunning }
        if !stopped.isEmpty {
            try guarded {
                try write { db in
                    for process in stopped { try db.execute(sql: "DELETE FROM meta WHERE key = ?", arguments: [process.key]) }
                }
            }
        }
        if pending, stopped.count == appliers.count { try finishPendingMerge() }
    }

    /// Runs a merge's stages in `body`. If they fail, what they logged stays pending, and this
    /// process no longer claims to apply it (SPEC.md §9): the next merge, or the next process to
    /// open the store, applies it.
    func releasingPendingOnFailure<T, Failure: Error>(_ body: () throws(Failure) -> T) throws(Failure) -> T {
        do {
            return try body()
        } catch {
            try? write { db in try PendingRow.unmarkThisProcessMerging(db) }
            throw error
        }
    }

    /// `finishPendingMerge`, running `afterEachBatch` after each batch has committed (tests write
    /// there, or stop the merge by throwing).
    @discardableResult
    func finishPendingMerge(afterEachBatch: () throws -> Void) throws -> Int {
        let rows = try guarded { try readOnWriter { db in try PendingRow.fetchAll(db) } }
        return try applyPending(rows, bounds: environment.mergeBatch, afterEachBatch: afterEachBatch)
    }

    /// Applies what waits in the pending `rows`, read back from the log, as the last stage of a
    /// merge does (`applyInRecordOrder`). Returns how many operations it applied.
    @discardableResult
    func applyPending(
        _ rows: [PendingRow], bounds: MergeBatch, checking check: (Database) throws -> Void = { _ in },
        afterEachBatch: () throws -> Void
    ) throws -> Int {
        guard !rows.isEmpty else { return 0 }
        var sorter = OperationSorter(spillPath: spillPath(), runOperations: bounds.sortRun)
        try guarded { try readOnWriter { db in try forEachPendingOperation(in: rows, db) { operation in try sorter.add(operation) } } }
        let operations = try guarded { try sorter.finish() }
        try apply(sorted: operations, pending: rows, bounds: bounds, checking: check, afterEachBatch: afterEachBatch)
        return operations.sortedCount
    }

    /// Calls `body` with every logged operation of the pending `rows` that waits to be applied to
    /// its record, row by row.
    func forEachPendingOperation(in rows: [PendingRow], _ db: Database, _ body: (Op) throws -> Void) throws {
        guard !rows.isEmpty else { return }
        let directory = try ReplicaDirectory(db)
        for row in rows {
            guard let chunk = try Row.fetchOne(
                db, sql: "SELECT last_seq, ops FROM log WHERE replica = ? AND first_seq = ?", arguments: [row.replica, row.firstSeq])
            else {
                throw ConcordError(.corrupt, "pending_merge lists a log row (replica \(row.replica), seq \(row.firstSeq)) that the log lacks")
            }
            let operations = try Self.decodeChunk(
                try chunk.column(1), author: try directory.id(at: row.replica),
                first: UInt64(bitPattern: row.firstSeq), last: UInt64(bitPattern: try chunk.column(0) as Int64))
            for operation in operations where row.awaits(operation.record) { try body(operation) }
        }
    }

    /// Where a merge's sort file goes: beside the store (a store in memory uses the temporary
    /// directory).
    func spillPath() -> String {
        let name = ".concord-merge-\(String(environment.random(), radix: 16))"
        guard path != ":memory:" else { return (NSTemporaryDirectory() as NSString).appendingPathComponent(name) }
        return ((path as NSString).deletingLastPathComponent as NSString).appendingPathComponent(
            "." + (path as NSString).lastPathComponent + name)
    }
}
