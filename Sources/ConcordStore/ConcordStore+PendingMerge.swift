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
            throw StoreError(.corrupt, "pending_merge holds a damaged record reference")
        }
        self.init(kind: RecordKind(rawValue: kind), id: id)
    }
}

extension ConcordStore {
    /// How many logged operations wait to be applied to their records: those of a batched merge
    /// under way, or of one a crash interrupted, which the next merge finishes (SPEC.md §5.6).
    public func pendingOperationCount() throws(StoreError) -> Int {
        try guarded {
            try writer.read { db in
                var count = 0
                try forEachPendingOperation(db) { _ in count += 1 }
                return count
            }
        }
    }

    /// Applies to their records the operations a batched merge logged and has not applied yet (one
    /// a crash or a failure interrupted): in record order, in batches of at most
    /// `environment.mergeBatch.records` records, each its own transaction. Every merge does this
    /// first; an app may call it when it opens a store. Returns at once when nothing waits.
    /// - Returns: how many operations it applied.
    @discardableResult
    public func finishPendingMerge() throws(StoreError) -> Int {
        try finishPendingMerge(afterEachBatch: {})
    }

    /// `finishPendingMerge`, running `afterEachBatch` after each batch has committed (tests write
    /// there, or stop the merge by throwing).
    @discardableResult
    func finishPendingMerge(afterEachBatch: () throws -> Void) throws(StoreError) -> Int {
        var sorter = OperationSorter(spillPath: spillPath(), runOperations: environment.mergeBatch.sortRun)
        let rows = try guarded {
            try writer.read { db in
                try forEachPendingOperation(db) { operation in try sorter.add(operation) }
            }
        }
        guard !rows.isEmpty else { return 0 }
        let applied = sorter.sortedCount
        try applyInRecordOrder(try guarded { try sorter.finish() }, rows: rows, afterEachBatch: afterEachBatch)
        return applied
    }

    /// Applies the sorted `operations`, logged, to their records in record order, in batches of at
    /// most `environment.mergeBatch.records` records, each its own transaction, which also records
    /// the progress in the pending `rows` (their ones to apply are among `operations`); the last
    /// deletes them.
    func applyInRecordOrder(
        _ operations: OperationSorter.Finished, rows: [PendingRow], afterEachBatch: () throws -> Void
    ) throws(StoreError) {
        let states = FoldedRecords(operations, environment.mergeBatch)
        defer { states.stop() }
        let first = try guarded { try states.next() }
        try applyInRecordOrder(states, from: first, rows: rows, afterEachBatch: afterEachBatch)
    }

    /// `applyInRecordOrder` from the state `next` on (nil: none is left).
    func applyInRecordOrder(
        _ states: FoldedRecords, from first: RecordState?, rows: [PendingRow], afterEachBatch: () throws -> Void
    ) throws(StoreError) {
        var next = first
        while next != nil {
            _ = try merging(reportingTouched: false) { context, _ in
                let last = try join(states, from: &next, into: &context)
                try Self.settle(rows, through: last, finished: next == nil, context.db)
            }
            try guarded(afterEachBatch)
            guard next != nil else { break }
            Self.pauseBetweenBatches()
        }
    }

    /// Joins `next` and the states after it with their records' rows, until a batch's records
    /// (`mergeBatch.records`) are joined or the states end; `next` is left at the first state not
    /// joined. Returns the last record joined.
    func join(_ states: FoldedRecords, from next: inout RecordState?, into context: inout WriteContext) throws -> RecordRef? {
        let limits = environment.mergeBatch
        context.reserveRecords(limits.flushRecords)
        var last: RecordRef?
        var joined = 0
        while let state = next, joined < limits.records {
            context.join(unread: state)
            last = state.ref
            joined += 1
            // The states come in record order: written out a few at a time, rows are still
            // written in order, and the folding thread folds the next states meanwhile.
            if context.cachedRecordCount >= limits.flushRecords { try context.flush() }
            next = try states.next()
        }
        return last
    }

    /// Records in the pending `rows` that a batch applied their operations of the records up to
    /// `last`, or, when the merge is `finished`, deletes them.
    static func settle(_ rows: [PendingRow], through last: RecordRef?, finished: Bool, _ db: Database) throws {
        if finished {
            let delete = try db.cachedStatement(sql: "DELETE FROM pending_merge WHERE replica = ? AND first_seq = ?")
            for row in rows { try delete.execute(arguments: [row.replica, row.firstSeq]) }
        } else if let last {
            // Never backwards: another process may be finishing the same rows, further on.
            let update = try db.cachedStatement(sql: """
                UPDATE pending_merge SET applied_through = ?1
                WHERE replica = ?2 AND first_seq = ?3 AND (applied_through IS NULL OR applied_through < ?1)
                """)
            for row in rows { try update.execute(arguments: [last.appliedThroughBytes, row.replica, row.firstSeq]) }
        }
    }

    /// Calls `body` with every logged operation that waits to be applied to its record, row by
    /// row, and returns the rows.
    @discardableResult
    func forEachPendingOperation(_ db: Database, _ body: (Op) throws -> Void) throws -> [PendingRow] {
        let rows = try PendingRow.fetchAll(db)
        guard !rows.isEmpty else { return [] }
        let directory = try ReplicaDirectory(db)
        for row in rows {
            guard let chunk = try Row.fetchOne(
                db, sql: "SELECT last_seq, ops FROM log WHERE replica = ? AND first_seq = ?", arguments: [row.replica, row.firstSeq])
            else {
                throw StoreError(.corrupt, "pending_merge lists a log row (replica \(row.replica), seq \(row.firstSeq)) that the log lacks")
            }
            let operations = try Self.decodeChunk(
                try chunk.column(1), author: try directory.id(at: row.replica),
                first: UInt64(bitPattern: row.firstSeq), last: UInt64(bitPattern: try chunk.column(0) as Int64))
            for operation in operations where row.awaits(operation.record) { try body(operation) }
        }
        return rows
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

/// The sorted operations of a merge folded into one state per record: what applying them to a
/// record that held nothing gives (`RecordState.apply`), to be joined with the record's row. They
/// are folded on a thread of their own, ahead of the batch that writes them (`Prefetch`), when
/// there are enough of them to pay for the thread (`MergeBatch.foldThreadFrom`). Call `stop` when
/// done.
final class FoldedRecords {
    private var inline: Folding?
    private let prefetch: Prefetch<RecordState>?

    init(_ operations: OperationSorter.Finished, _ limits: MergeBatch) {
        var folding = Folding(operations.recordOrder())
        if operations.sortedCount >= limits.foldThreadFrom {
            inline = nil
            prefetch = Prefetch(chunk: 256) { try folding.next() }
        } else {
            inline = folding
            prefetch = nil
        }
    }

    /// A caller that forgot `stop` still leaves no thread behind.
    deinit { prefetch?.stop() }

    func next() throws -> RecordState? {
        if let prefetch { return try prefetch.next() }
        return try inline!.next()
    }

    func stop() {
        prefetch?.stop()
    }

    private struct Folding {
        private var operations: OperationSorter.Stream
        private var lookahead: Op?
        private var started = false

        init(_ operations: OperationSorter.Stream) {
            self.operations = operations
        }

        mutating func next() throws -> RecordState? {
            if !started {
                started = true
                lookahead = try operations.next()
            }
            guard let first = lookahead.take() else { return nil }
            var state = RecordState(ref: first.record)
            state.apply(first)
            while let operation = try operations.next() {
                guard operation.record == state.ref else {
                    lookahead = operation
                    break
                }
                state.apply(operation)
            }
            return state
        }
    }
}
