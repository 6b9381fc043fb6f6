import ConcordCore
import Foundation
import GRDB

/// What a compaction did (SPEC.md §5.8).
public struct CompactionReport: Hashable, Sendable {
    /// How many records it looked at.
    public var records = 0
    /// How many operations it dropped, keeping their seqs.
    public var droppedOperations = 0
    /// Whether it did nothing: another process had a merge under way, whose operations are
    /// logged and not applied yet. A later compaction does it.
    public var deferred = false

    /// A report of nothing done.
    public init() {}
}

extension ConcordStore {
    /// Drops every operation whose effect the operations kept give anyway, keeping its seq
    /// (SPEC.md §5.8): an assign that a later write has seen, an add that a remove names; but for
    /// the history `history` keeps (by default, the writes of the last 30 days). The state, the
    /// dump and the conflicts stay exactly as they were; the log shrinks.
    ///
    /// It reads the log once, sorting its operations by record beside the store to decide what
    /// each record drops (SPEC.md §9, "Compaction"); then it rewrites each log row that holds a
    /// dropped operation once, and each record that lists one once, a bounded number of them per
    /// write transaction, so that writers in other processes take their turns between two of them
    /// and readers never wait. Killed at any moment, it leaves a sound store that holds the same
    /// state, and the next compaction finishes what it began.
    @discardableResult
    public func compact(keeping history: KeptHistory = .thirtyDays, recordsPerTransaction: Int = 500) throws(ConcordError) -> CompactionReport {
        // Before the log is read: a process that holds a copy open (a server, a watch) asks for
        // a compaction every second, and would read and sort the whole log each time, only for
        // its first write to be refused.
        try ensureNotCopied()
        try finishPendingMerge()
        return try guarded {
            var report = CompactionReport()
            guard let plan = try planCompaction(keeping: history) else {
                report.deferred = true
                return report
            }
            if !plan.forgotten.isEmpty {
                // Recorded before any remove is dropped: an export that reads the log once one is
                // says so, and claims every compacted seq to a store that does not hold it.
                try write { db in
                    try prepareWrite(db)
                    try Self.joinDroppedStableThrough(plan.stable, db)
                }
            }
            try recordTrims(plan.trimmed, perTransaction: max(1, recordsPerTransaction))
            // A stable remove is never compacted before an add it names: until the add is, an
            // export carries the remove in full, and the state replays from the log (SPEC.md §9).
            // The few that step 2 would reach before such an add go in a second pass.
            report.droppedOperations = try compactLogRows(plan.drops, operationsPerTransaction: max(1, recordsPerTransaction) * 128)
            report.droppedOperations += try compactLogRows(plan.secondPass, operationsPerTransaction: max(1, recordsPerTransaction) * 128)
            report.records = try forgetCompactedSeqs(plan, perTransaction: max(1, recordsPerTransaction))
            // Where the next one is counted from (`compactIfDue`).
            try write { db in
                try prepareWrite(db)
                try db.execute(
                    sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('compaction_held', ?), ('compaction_millis', ?)",
                    arguments: [plan.held, Int64(bitPattern: plan.millis)])
            }
            return report
        }
    }

    /// Step 1: reads the whole log in one read transaction and decides, record by record, which
    /// operations it drops. Nil if another process has a merge logged and not yet applied: its
    /// records lack operations their log rows hold, and the decision waits for it.
    private func planCompaction(keeping history: KeptHistory) throws -> CompactionPlan? {
        var sorter = OperationSorter(spillPath: spillPath())
        var plan = CompactionPlan()
        // The records with an operation held above a gap keep everything (SPEC.md §5.8): that
        // operation could make others redundant, and a shared folder's files, which hold the
        // gap-free prefix, would carry their compacted seqs without it.
        var aboveGaps = Set<RecordRef>()
        plan.millis = environment.wallClock()
        let pending = try read { db -> Bool in
            guard try !Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM pending_merge)")! else { return true }
            plan.held = try Self.seqsHeld(db)
            plan.stable = ReplicaStanding.stableFrontier(of: try Self.replicas(db, local: replicaID))
            let vector = try ReplicaDirectory(db).versionVector
            try Self.forEachRow(in: db, since: VersionVector(), after: nil) { author, seqs, operations in
                try Self.forEachEntry(of: seqs, holding: operations) { entry in
                    switch entry {
                    case .operation(let operation):
                        if operation.id.seq > vector[author] { aboveGaps.insert(operation.record) }
                        try sorter.add(operation)
                    case .compacted(let stretch): plan.compacted.insert(stretch, of: author)
                    }
                }
                return true
            }
            return false
        }
        guard !pending else { return nil }
        let nowMillis = plan.millis
        let stable = plan.stable
        var stream = try sorter.finish().recordOrder()
        var record: [Op] = []
        func decide() {
            guard !aboveGaps.contains(record[0].record) else { return }
            let ids = Compaction.redundant(among: record, keeping: history, nowMillis: nowMillis, stable: stable)
            guard !ids.isEmpty else { return }
            for operation in record where ids.contains(operation.id) {
                // A stable remove goes in the first pass when every add it drops with it comes
                // before it in that pass's order, which is `OperationID`'s (authors in id order,
                // seqs ascending), so in the same or an earlier transaction: in a lone author's
                // log, all of them.
                if case .removeTag(_, let observed) = operation.action, observed.contains(where: { ids.contains($0) && operation.id < $0 }) {
                    plan.secondPass.insert(operation.id)
                } else {
                    plan.drops.insert(operation.id)
                }
            }
            plan.trimmed[record[0].record] = record.lazy.filter { ids.contains($0.id) }.map(\.timestamp).max()!
            var named = Set<OperationID>()
            var stillNamed = Set<OperationID>()
            for case let (id, .removeTag(_, observed)) in record.lazy.map({ ($0.id, $0.action) }) {
                if ids.contains(id) { named.formUnion(observed) } else { stillNamed.formUnion(observed) }
            }
            if !named.isEmpty { plan.forgotten[record[0].record] = named.subtracting(stillNamed) }
        }
        while let operation = try stream.next() {
            if let first = record.first, first.record != operation.record {
                decide()
                record.removeAll(keepingCapacity: true)
            }
            record.append(operation)
        }
        if !record.isEmpty { decide() }
        return plan
    }

    /// Records where each record's history is trimmed (`history` says so, SPEC.md §10), before
    /// its operations are dropped.
    private func recordTrims(_ trimmed: [RecordRef: Timestamp], perTransaction: Int) throws {
        var rest = trimmed.sorted { $0.key < $1.key }[...]
        while !rest.isEmpty {
            let batch = rest.prefix(perTransaction)
            rest = rest.dropFirst(batch.count)
            try write { db in
                try prepareWrite(db)
                for (ref, through) in batch {
                    // One execution per `HotStatement`: making it resets the cached statement.
                    let trim = try HotStatement(db, """
                        INSERT INTO compacted_records (id, kind, through) VALUES (?1, ?2, ?3)
                        ON CONFLICT (id, kind) DO UPDATE SET through = max(through, ?3)
                        """)
                    trim.bind(1, id: ref.id)
                    trim.bind(2, Int64(ref.kind.rawValue))
                    trim.bind(3, Int64(bitPattern: through.rawValue))
                    try trim.execute()
                }
            }
        }
    }

    /// Step 2: rewrites each log row that holds a dropped operation once, with its seqs
    /// compacted, rows of about `operationsPerTransaction` operations per transaction. An
    /// operation a purge has elided since step 1 stays (§5.7). A rewritten row joins the one
    /// rewritten just before it when they are adjacent and hold 4096 operations at most together,
    /// so that rows stay about as long as they were: a row's bytes fill its pages. Returns how
    /// many operations it compacted.
    private func compactLogRows(_ drops: SeqBitmap, operationsPerTransaction: Int) throws -> Int {
        var total = 0
        for author in drops.replicas {
            var next = drops.first(of: author, from: 0)
            while let start = next {
                let (compacted, resume) = try write { db -> (Int, UInt64?) in
                    try prepareWrite(db)
                    guard let index = try ReplicaDirectory(db).indexByID[author] else { return (0, nil) }
                    var rows = LogRowRewriter(db, author: author, index: index)
                    var decoded = 0
                    var seq: UInt64? = start
                    while let held = seq, decoded < operationsPerTransaction {
                        let (operations, last) = try rows.read(holding: held)
                        decoded += operations.count
                        let kept = operations.filter { $0.purges || !drops.contains($0.id.seq, of: author) }
                        if kept.count < operations.count { try rows.rewrite(keeping: kept, compacted: operations.count - kept.count) }
                        seq = last == .max ? nil : drops.first(of: author, from: last + 1)
                    }
                    try rows.finish()
                    if rows.compacted > 0 {
                        try db.execute(sql: "UPDATE meta SET value = value + ? WHERE key = 'compacted'", arguments: [rows.compacted])
                    }
                    return (rows.compacted, seq)
                }
                total += compacted
                next = resume
            }
        }
        return total
    }

    /// Step 3: forgets, in every record, the seqs it lists that the log holds compacted: those
    /// step 2 compacted, and those of a compaction killed between its steps 2 and 3. Returns how
    /// many records it looked at.
    private func forgetCompactedSeqs(_ plan: CompactionPlan, perTransaction: Int) throws -> Int {
        var records = 0
        var after: RecordRef?
        repeat {
            after = try write { db -> RecordRef? in
                try prepareWrite(db)
                var directory = try ReplicaDirectory(db)
                var statements = RecordStatements()
                let refs = try Self.records(after: after, limit: perTransaction, db)
                for ref in refs {
                    guard var state = try RecordRows.load(ref, db, directory, &statements) else { continue }
                    var compacted: [OperationID] = []
                    for span in state.operations.spans {
                        for seq in span.first...span.last
                        where plan.drops.contains(seq, of: span.replica) || plan.secondPass.contains(seq, of: span.replica)
                            || plan.compacted.contains(OperationID(replica: span.replica, seq: seq)) {
                            compacted.append(OperationID(replica: span.replica, seq: seq))
                        }
                    }
                    guard !compacted.isEmpty else { continue }
                    for id in compacted { state.forget(id) }
                    if let dots = plan.forgotten[ref] { state.forgetRemoved { dots.contains($0) } }
                    try RecordRows.save(state, as: .update, db, &directory, &statements)
                }
                records += refs.count
                return refs.count < perTransaction ? nil : refs.last
            }
        } while after != nil
        return records
    }

    /// Up to `limit` records that have a row, in `RecordRef` order, after `ref`.
    private static func records(after ref: RecordRef?, limit: Int, _ db: Database) throws -> [RecordRef] {        // Each table in id order, the kinds in their order: reminders (1), notes (2), then the
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

/// Rewrites one author's log rows in seq order, within one transaction (step 2 of a compaction):
/// reads the row that holds a seq, writes it again with fewer operations, and joins it to the
/// row it rewrote just before when the two are adjacent and fit in one (SPEC.md §9).
private struct LogRowRewriter: ~Copyable {
    let db: Database
    let author: ReplicaID
    let index: Int64
    /// The row last read: its seqs and operations.
    private var current: (first: UInt64, last: UInt64, operations: [Op])?
    /// The row rewritten last and not yet written: it may take in the next.
    private var unwritten: (first: UInt64, last: UInt64, operations: [Op])?
    private(set) var compacted = 0

    init(_ db: Database, author: ReplicaID, index: Int64) {
        self.db = db
        self.author = author
        self.index = index
    }

    /// Reads the row that holds `seq`: its operations held in full, and its last seq.
    mutating func read(holding seq: UInt64) throws -> (operations: [Op], last: UInt64) {
        let row = try HotStatement(db, "SELECT first_seq, last_seq, ops FROM log WHERE replica = ? AND first_seq <= ? ORDER BY first_seq DESC LIMIT 1")
        row.bind(1, index)
        row.bind(2, Int64(seq))
        guard try row.step(), UInt64(bitPattern: row.int64(1)) >= seq else {
            throw ConcordError(.corrupt, "the log lacks operation \(author.hex):\(seq), which it held when the compaction began")
        }
        let first = UInt64(bitPattern: row.int64(0))
        let last = UInt64(bitPattern: row.int64(1))
        let operations = try ConcordStore.decodeChunk(Data(row.withBlob(2) { [UInt8]($0) }), author: author, first: first, last: last)
        current = (first, last, operations)
        return (operations, last)
    }

    /// Replaces the row last read by one that holds `kept` over the same seqs.
    mutating func rewrite(keeping kept: [Op], compacted: Int) throws {
        let row = current!
        self.compacted += compacted
        // No merge under way names either row in `pending_merge`: both held a dropped operation,
        // so they were logged before step 1, which found no merge pending, and a merge since
        // logs only seqs not held then, in rows of its own.
        if var joined = unwritten, joined.last + 1 == row.first, joined.operations.count + kept.count <= WriteContext.maxChunkOperations {
            try db.execute(sql: "DELETE FROM log WHERE replica = ? AND first_seq = ?", arguments: [index, Int64(row.first)])
            joined.last = row.last
            joined.operations += kept
            unwritten = joined
            return
        }
        try finish()
        unwritten = (row.first, row.last, kept)
    }

    /// Writes the row not yet written, if any.
    mutating func finish() throws {
        guard let row = unwritten else { return }
        unwritten = nil
        var writer = ByteWriter()
        OperationCodec.encode(row.operations, covering: row.first...row.last, into: &writer)
        let update = try HotStatement(db, "UPDATE log SET last_seq = ?, ops = ?, max_ts = ? WHERE replica = ? AND first_seq = ?")
        update.bind(1, Int64(row.last))
        update.bind(2, bytes: writer.bytes)
        update.bind(3, Int64(bitPattern: (row.operations.map(\.timestamp).max() ?? .zero).rawValue))
        update.bind(4, index)
        update.bind(5, Int64(row.first))
        try update.execute()
    }

}

/// What step 1 of a compaction decided (SPEC.md §9, "Compaction").
private struct CompactionPlan {
    /// The operations to drop in the first pass: all but some stable removes.
    var drops = SeqBitmap()
    /// The stable removes to drop (SPEC.md §5.8) that name an add to drop which the first pass
    /// reaches after them: they go in a second pass.
    var secondPass = SeqBitmap()
    /// The seqs the log held compacted already.
    var compacted = SeqRanges()
    /// The records that drop operations, each with the greatest timestamp of those it drops.
    var trimmed: [RecordRef: Timestamp] = [:]
    /// The seqs the store held (`seqsHeld`) and the wall clock, when it decided.
    var held: Int64 = 0
    var millis: UInt64 = 0
    /// The stable frontier when it decided (SPEC.md §5.8, "Stable removes").
    var stable = VersionVector()
    /// The records that drop a remove as stable, each with the removed dots it then forgets:
    /// those the removes it drops named and no remove it keeps names.
    var forgotten: [RecordRef: Set<OperationID>] = [:]
}

/// A set of seqs, one bit each per author: a compaction decides its drops record by record, so
/// in no seq order, over logs of millions of operations (1.25 MB for 10 million seqs).
struct SeqBitmap {
    private var words: [ReplicaID: [UInt64]] = [:]

    /// The authors with a seq in the set, in id order.
    var replicas: [ReplicaID] { words.keys.sorted() }

    mutating func insert(_ id: OperationID) {
        Self.set(id.seq, in: &words[id.replica, default: []])
    }

    /// Sets `seq`'s bit, in place (the dictionary's default subscript does not copy the list).
    private static func set(_ seq: UInt64, in list: inout [UInt64]) {
        let word = Int(seq / 64)
        if list.count <= word { list.append(contentsOf: repeatElement(0, count: word + 1 - list.count)) }
        list[word] |= 1 << (seq % 64)
    }

    func contains(_ seq: UInt64, of replica: ReplicaID) -> Bool {
        guard let list = words[replica], seq / 64 < UInt64(list.count) else { return false }
        return list[Int(seq / 64)] & (1 << (seq % 64)) != 0
    }

    /// The least seq of `replica` in the set that is at least `seq`.
    func first(of replica: ReplicaID, from seq: UInt64) -> UInt64? {
        guard let list = words[replica] else { return nil }
        var index = Int(clamping: seq / 64)
        guard index < list.count else { return nil }
        var word = list[index] & (~0 << (seq % 64))
        while word == 0 {
            index += 1
            guard index < list.count else { return nil }
            word = list[index]
        }
        return UInt64(index) * 64 + UInt64(word.trailingZeroBitCount)
    }
}

extension ConcordStore {
    /// Gives the store file's free pages back to the file system (SQLite's `VACUUM`, then a
    /// checkpoint that empties the WAL), and returns the file's size before and after, in bytes.
    /// A compaction frees pages that later writes reuse, so the file stops growing but does not
    /// shrink; this shrinks it. It rewrites the whole file in one turn at the store's writer:
    /// other writers, in this process and others, wait for it, and it needs about the store's
    /// size free on the disk (SPEC.md §9, "Compaction").
    @discardableResult
    public func vacuum() throws(ConcordError) -> (before: Int64, after: Int64) {
        try guarded {
            let before = Self.fileBytes(path)
            try writeWithoutTransaction { db in
                try db.execute(sql: "VACUUM")
                _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
            return (before, Self.fileBytes(path))
        }
    }

    /// The size of the file at `path` with its WAL, in bytes (0 for a file that is not there).
    private static func fileBytes(_ path: String) -> Int64 {
        [path, path + "-wal"].reduce(0) { total, file in
            total + ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)?.int64Value ?? 0)
        }
    }

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
