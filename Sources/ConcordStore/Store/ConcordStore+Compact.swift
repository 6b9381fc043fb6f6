import ConcordCore
import Foundation
import GRDB

/// What a compaction did (SPEC.md §5.8).
public struct CompactionReport: Hashable, Sendable {
    /// How many records it looked at.
    public var records = 0
    /// How many operations it dropped, keeping their seqs.
    public var droppedOperations = 0
    /// Whether it stopped before the end: another process had a merge under way, whose
    /// operations are not applied yet. A later compaction goes on.
    public var deferred = false

    /// A report of nothing done.
    public init() {}
}

extension ConcordStore {
    /// Drops every operation whose effect the operations kept give anyway, keeping its seq
    /// (SPEC.md §5.8): an assign that a later write has seen, an add that a remove names; but for
    /// the history `history` keeps (by default, the writes of the last 30 days). The state, the
    /// dump and the conflicts stay exactly as they were; the log shrinks. It goes through the
    /// records in order, `recordsPerTransaction` of them per write transaction, so that writers in
    /// other processes take their turns between two of them and readers never wait; killed at any
    /// moment, it leaves a sound store that holds the same state.
    @discardableResult
    public func compact(keeping history: KeptHistory = .thirtyDays, recordsPerTransaction: Int = 500) throws(ConcordError) -> CompactionReport {
        try finishPendingMerge()
        var report = CompactionReport()
        var after: RecordRef?
        repeat {
            let batch = try guarded {
                try write { db -> (last: RecordRef?, records: Int, dropped: Int, deferred: Bool) in
                    try prepareWrite(db)
                    // The records of a merge that is logged and not applied lack operations
                    // their log rows hold: they wait for it.
                    guard try !Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM pending_merge)")! else { return (nil, 0, 0, true) }
                    let refs = try Self.records(after: after, limit: max(1, recordsPerTransaction), db)
                    var compactor = try LogCompactor(db, keeping: history, nowMillis: environment.wallClock())
                    try compactor.compact(refs)
                    try compactor.rewriteLogRows()
                    if compactor.dropped > 0 {
                        try db.execute(sql: "UPDATE meta SET value = value + ? WHERE key = 'compacted'", arguments: [compactor.dropped])
                    }
                    return (refs.count < recordsPerTransaction ? nil : refs.last, refs.count, compactor.dropped, false)
                }
            }
            report.records += batch.records
            report.droppedOperations += batch.dropped
            report.deferred = batch.deferred
            after = batch.last
        } while after != nil
        return report
    }

    /// Up to `limit` records that have a row, in `RecordRef` order, after `ref`.
    private static func records(after ref: RecordRef?, limit: Int, _ db: Database) throws -> [RecordRef] {
        // Each table in id order, the kinds in their order: reminders (1), notes (2), then the
        // other kinds.
        var found: [RecordRef] = []
        let afterKind = ref?.kind.rawValue ?? 0
        let afterID = Data(ref?.id.bytes ?? [])
        for table in RecordTable.known where table.kind.rawValue >= afterKind && found.count < limit {
            let from = table.kind.rawValue == afterKind ? afterID : Data()
            for id in try Data.fetchAll(db, sql: "SELECT id FROM \(table.name) WHERE id > ? ORDER BY id LIMIT ?", arguments: [from, limit - found.count]) {
                found.append(RecordRef(kind: table.kind, id: try recordID(id)))
            }
        }
        if found.count < limit {
            let rows = try Row.fetchAll(
                db, sql: "SELECT kind, id FROM other_records WHERE (kind, id) > (?, ?) ORDER BY kind, id LIMIT ?",
                arguments: [Int64(afterKind), afterID, limit - found.count])
            for row in rows { found.append(RecordRef(kind: try kind(try row.column(0)), id: try recordID(try row.column(1)))) }
        }
        return found
    }
}

/// One compaction transaction: reads each record's operations, drops those `Compaction` finds
/// redundant from the record's spans, and rewrites each log row that held one of them once, with
/// its seqs compacted (SPEC.md §5.8, §9).
private struct LogCompactor {
    let db: Database
    var directory: ReplicaDirectory
    var statements = RecordStatements()
    /// The seqs dropped, by author.
    var droppedSeqs: [ReplicaID: [UInt64]] = [:]
    private(set) var dropped = 0

    let history: KeptHistory
    let nowMillis: UInt64

    init(_ db: Database, keeping history: KeptHistory, nowMillis: UInt64) throws {
        self.db = db
        directory = try ReplicaDirectory(db)
        self.history = history
        self.nowMillis = nowMillis
    }

    /// Compacts `refs`, reading the log rows that hold their operations once for all of them (a
    /// row holds operations of many records).
    mutating func compact(_ refs: [RecordRef]) throws {
        var states: [RecordState] = []
        var spans = OperationSpans()
        for ref in refs {
            guard let state = try RecordRows.load(ref, db, directory, &statements) else { continue }
            states.append(state)
            spans.formUnion(state.operations)
        }
        var reader = SpanReader(nil)
        var byRecord: [RecordRef: [Op]] = [:]
        for operation in try reader.operations(in: spans, db, directory) { byRecord[operation.record, default: []].append(operation) }
        for state in states { try compact(state, byRecord[state.ref] ?? []) }
    }

    /// Compacts one record, given every operation of it the log holds in full.
    private mutating func compact(_ record: RecordState, _ operations: [Op]) throws {
        var state = record
        let ref = state.ref
        let redundant = Compaction.redundant(among: operations, keeping: history, nowMillis: nowMillis)
        guard !redundant.isEmpty else { return }
        for id in redundant {
            state.forget(id)
            droppedSeqs[id.replica, default: []].append(id.seq)
        }
        try RecordRows.save(state, as: .update, db, &directory, &statements)
        // Where its history is trimmed: `history` says so.
        let redundantIDs = Set(redundant)
        let through = operations.lazy.filter { redundantIDs.contains($0.id) }.map(\.timestamp).max()!
        let trim = try HotStatement(db, """
            INSERT INTO compacted_records (id, kind, through) VALUES (?1, ?2, ?3)
            ON CONFLICT (id, kind) DO UPDATE SET through = max(through, ?3)
            """)
        trim.bind(1, id: ref.id)
        trim.bind(2, Int64(ref.kind.rawValue))
        trim.bind(3, Int64(bitPattern: through.rawValue))
        try trim.execute()
        dropped += redundant.count
    }

    /// Rewrites every log row that holds a dropped seq, each once.
    mutating func rewriteLogRows() throws {
        for (author, seqs) in droppedSeqs {
            guard let index = directory.indexByID[author] else { continue }
            var remaining = seqs.sorted()[...]
            while let seq = remaining.first {
                let row = try HotStatement(
                    db, "SELECT first_seq, last_seq, ops FROM log WHERE replica = ? AND first_seq <= ? ORDER BY first_seq DESC LIMIT 1")
                row.bind(1, index)
                row.bind(2, Int64(seq))
                guard try row.step() else { throw ConcordError(.corrupt, "the log lacks operation \(author.hex):\(seq), which a record lists") }
                let first = UInt64(bitPattern: row.int64(0))
                let last = UInt64(bitPattern: row.int64(1))
                let inRow = remaining.prefix { $0 <= last }
                remaining = remaining.dropFirst(inRow.count)
                guard !inRow.isEmpty else { throw ConcordError(.corrupt, "the log lacks operation \(author.hex):\(seq), which a record lists") }
                let operations = try ConcordStore.decodeChunk(Data(row.withBlob(2) { [UInt8]($0) }), author: author, first: first, last: last)
                let droppedHere = Set(inRow)
                let kept = operations.filter { !droppedHere.contains($0.id.seq) }
                var writer = ByteWriter()
                OperationCodec.encode(kept, covering: first...last, into: &writer)
                let update = try HotStatement(db, "UPDATE log SET ops = ?, max_ts = ? WHERE replica = ? AND first_seq = ?")
                update.bind(1, bytes: writer.bytes)
                update.bind(2, Int64(bitPattern: (kept.map(\.timestamp).max() ?? .zero).rawValue))
                update.bind(3, index)
                update.bind(4, Int64(first))
                try update.execute()
            }
        }
    }
}

extension ConcordStore {
    /// The size of a copy of the store that `VACUUM INTO` writes at `path` (then removed): what
    /// its content takes once its free and half-empty pages are given back (`syncctl bench compact`).
    package func vacuumedBytes(at path: String) throws(ConcordError) -> Int64 {
        try guarded {
            // Outside a transaction, on a connection of its own (VACUUM refuses to run in one).
            var configuration = Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: self.path, configuration: configuration)
            try queue.inDatabase { db in try db.execute(sql: "VACUUM INTO ?", arguments: [path]) }
            try queue.close()
            defer { try? FileManager.default.removeItem(atPath: path) }
            return (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
        }
    }

    /// How many log rows the store has, and the bytes its pages hold (its file's pages less the
    /// free ones): what compaction shrinks (`syncctl bench compact`).
    package func logFigures() throws(ConcordError) -> (logRows: Int, usedBytes: Int64) {
        try guarded {
            try read { db in
                let rows = try Int.fetchOne(db, sql: "SELECT count(*) FROM log") ?? 0
                let pages = try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0
                let free = try Int64.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
                let size = try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? 0
                return (rows, (pages - free) * size)
            }
        }
    }
}
