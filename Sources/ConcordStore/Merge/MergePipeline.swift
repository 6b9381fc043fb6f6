import ConcordCore
import Foundation
import GRDB

/// The one way operations from elsewhere enter a store: bundles, other stores, shared folders and
/// operations in memory all come through `merge(bounds:checking:afterEachBatch:reading:)`; a peer
/// session's batches, which arrive over time, come through `MergeInParts`, which runs the same
/// stages part by part (SPEC.md §5.6). Its stages:
///
/// 1. **Read and validate**: every operation of the input is checked (§4.3) and kept, before
///    anything is written; so invalid or unreadable input applies nothing.
/// 2. **Sort by record**: those the store does not hold (neither covered by its version vector nor
///    held above a gap of it) are also kept in record order (`OperationSorter`: in memory, or in a
///    temporary file beside the store).
/// 3. **Log**: the operations are appended to the log in the order they came, in transactions of
///    at most `MergeBatch.operations` operations, each listing the log rows it writes as pending.
/// 4. **Apply** (`RecordApplier`, its one applier): the operations folded into one state per
///    record (`FoldedRecords`), from the sorted input (a merge in parts: its parts' sorts,
///    concatenated), or from the pending rows read back from the log when the input no longer
///    says exactly what was logged (an operation turned out held after all), are joined with
///    their records' rows in record order, in transactions of at most `MergeBatch.records`
///    records; the last one deletes the pending rows. A merge that fits in one logging batch applies its first records
///    in that batch's transaction, so a small merge is one transaction.
///
/// A merge in one transaction is the same pipeline with `MergeBatch.unbounded`.
extension ConcordStore {
    /// Runs the pipeline over the operations `read` passes to its argument.
    ///
    /// - Parameter check: runs at the start of every transaction (a peer's batch is merged only
    ///   while the store holds the session's key).
    /// - Parameter afterEachBatch: runs after each transaction commits (tests stop a merge there,
    ///   as a crash would).
    ///
    /// - Parameter compacted: once the input is read, the seqs its senders hold compacted, each
    ///   with the base of its export (a bundle's manifest): those of each export whose base the
    ///   store holds are taken (SPEC.md §5.8, §9 "Taking compacted seqs"), logged among the
    ///   operations where they fall, and the rest in the last logging batch.
    func merge(
        bounds: MergeBatch, checking check: (Database) throws -> Void = { _ in },
        afterEachBatch: () throws -> Void = {}, reading read: (_ each: (Op) throws -> Void) throws -> Void,
        compacted: () -> [CompactedSeqs] = { [] }
    ) throws -> MergeReport {
        try finishPendingMerge()
        var delivered = DeliveredSeqs()
        let input = try readAndSort({ each in
            // `each` escapes nothing: it runs only inside `read`, which Swift cannot see when a
            // closure that captures it is passed to another non-escaping parameter.
            try withoutActuallyEscaping(each) { each in
                try read { operation in
                    delivered.note(operation.id)
                    try each(operation)
                }
            }
        }, sortRun: bounds.sortRun)
        // Whether the store holds a base is read before the logging: its vector only grows.
        var taken = SeqRanges()
        // Claims of seqs at or below the sender's G that the store holds in full, or that the
        // input itself delivers in full (an old bundle merged beside a new one), drop the copies:
        // all of the input's claims are then taken in one transaction, once every operation of
        // the input is logged and applied (SPEC.md §5.8, §9), not among the operations, where a
        // crash between two batches would leave some taken and the copies they stand for held.
        var takenAtTheEnd = false
        var dropped = VersionVector()
        let exports = compacted().filter { !$0.seqs.isEmpty }
        if !exports.isEmpty {
            try readOnWriter { db in
                var context = try WriteContext(db, localReplica: replicaID)
                for export in exports where try context.holds(export.base) {
                    taken.formUnion(export.seqs)
                    dropped.merge(export.droppedStableThrough)
                }
                takenAtTheEnd = try !context.heldSeqs(of: taken, through: dropped).isEmpty
                    || taken.clipped(to: dropped).overlaps(delivered.seqs)
            }
        }
        if !taken.isEmpty, !dropped.entries.isEmpty {
            // Before any claim is taken: a store that holds a remove dropped as stable compacted
            // knows where removes were dropped (a crash after this leaves it knowing more).
            try write { db in
                try prepareWrite(db)
                try Self.joinDroppedStableThrough(dropped, db)
            }
        }
        var toLog = CompactedToLog(takenAtTheEnd ? SeqRanges() : taken)
        var report = try releasingPendingOnFailure {
            try logThenApply(input, bounds: bounds, checking: check, afterEachBatch: afterEachBatch, taking: &toLog)
        }
        if takenAtTheEnd {
            report.formUnion(try mergeTransaction(check) { context, report in
                report.compactedSeqs += try context.holdCompacted(taken, ifHolding: VersionVector(), droppingCopiesThrough: dropped)
            })
        } else if toLog.hadAny, !toLog.isEmpty {
            // No operation to log them among.
            let rest = toLog.rest
            report.formUnion(try mergeTransaction(check) { context, report in
                report.compactedSeqs += try context.holdCompacted(rest, ifHolding: VersionVector())
            })
        }
        return report
    }

    /// Stage 3 alone, for operations read and sorted ahead of time (by this store object, or by
    /// another of the same file: `prepareMerge(_:)`): logs them and returns the log rows it listed
    /// as pending, whose operations wait to be applied, and whether an operation turned out held
    /// after all (then only the pending rows read back from the log say which to apply:
    /// `applyPending(_:bounds:checking:afterEachBatch:)`). `MergeInParts` logs each part so.
    func log(
        sorted input: OperationSorter.Finished, bounds: MergeBatch, checking check: (Database) throws -> Void
    ) throws -> (report: MergeReport, rows: [PendingRow], heldAfterAll: Bool) {
        try releasingPendingOnFailure {
            var none = CompactedToLog(SeqRanges())
            return try logInBatches(input, bounds: bounds, checking: check, afterEachBatch: {}, taking: &none)
        }
    }

    /// Stages 3 and 4. The records are applied from the merge's sorted input, folded; or, when an
    /// operation turned out held after all, from the pending rows read back from the log, so as to
    /// leave to the other process what it logged (its records must not show operations still
    /// listed as pending). A merge that fits in one logging batch applies its first records in
    /// that batch's transaction (often all of them: the merge is one transaction).
    private func logThenApply(
        _ input: OperationSorter.Finished, bounds: MergeBatch, checking check: (Database) throws -> Void,
        afterEachBatch: () throws -> Void, taking compacted: inout CompactedToLog
    ) throws -> MergeReport {
        // Folded once the operations are logged (with the replicas the log then names), on a
        // queue of its own for a large merge. A merge larger than one logging batch applies its
        // records in transactions of their own, so that other writers get the store between its
        // logging and its applying too.
        var applier: RecordApplier?
        defer { applier?.stop() }
        let logged = try logInBatches(
            input, bounds: bounds, checking: check, afterEachBatch: afterEachBatch, taking: &compacted,
            inLastBatch: input.count <= bounds.operations ? { context, rows in
                applier = try RecordApplier(input, bounds, encodingWith: context.directory)
                try applier!.applyBatch(into: &context, rows: rows)
            } : nil)
        guard !logged.rows.isEmpty else { return logged.report }
        if logged.heldAfterAll {
            try applyPending(logged.rows, bounds: bounds, checking: check, afterEachBatch: afterEachBatch)
            return logged.report
        }
        if applier == nil {
            try apply(sorted: input, pending: logged.rows, bounds: bounds, checking: check, afterEachBatch: afterEachBatch)
        } else {
            try applyInRecordOrder(&applier!, rows: logged.rows, checking: check, afterEachBatch: afterEachBatch)
        }
        return logged.report
    }

    /// Stage 4 for operations logged already, whose pending log `rows` hold exactly the operations
    /// of `input` to be sorted: they are applied from `input`, folded (with the replicas the log
    /// now names), not read back from the log.
    func apply(
        sorted input: OperationSorter.Finished, pending rows: [PendingRow], bounds: MergeBatch,
        checking check: (Database) throws -> Void = { _ in }, afterEachBatch: () throws -> Void = {}
    ) throws {
        let directory = try readOnWriter { db in try ReplicaDirectory(db) }
        var applier = try RecordApplier(input, bounds, encodingWith: directory)
        defer { applier.stop() }
        try applyInRecordOrder(&applier, rows: rows, checking: check, afterEachBatch: afterEachBatch)
    }

    /// Stage 3: logs the operations in the order they came, in transactions of at most
    /// `bounds.operations`, each listing the log rows it writes as pending. `inLastBatch` runs in
    /// the last one's transaction, after its logging, unless an operation turned out held after
    /// all.
    private func logInBatches(
        _ input: OperationSorter.Finished, bounds: MergeBatch, checking check: (Database) throws -> Void,
        afterEachBatch: () throws -> Void, taking compacted: inout CompactedToLog,
        inLastBatch: ((inout WriteContext, [PendingRow]) throws -> Void)? = nil
    ) throws -> (report: MergeReport, rows: [PendingRow], heldAfterAll: Bool) {
        guard input.count > 0 else { return (MergeReport(), [], false) }
        var added = input.addedOrder()
        var waiting = input.count
        var report = MergeReport()
        var rows: [PendingRow] = []
        // Whether an operation was not what it was read as when it came to be logged: a sorted
        // one held (another process logged it since this merge read what the store holds, and
        // may not have applied it yet, or the input holds it twice), or one read as held that is
        // not (read against another store object, whose file was replaced since).
        var heldAfterAll = false
        repeat {
            report.formUnion(try mergeTransaction(check) { context, report in
                let batch = min(waiting, bounds.operations)
                for _ in 0..<batch {
                    guard let operation = try added.nextKept() else { throw OperationSorter.damaged(DecodeError.truncated) }
                    if compacted.hadAny { report.compactedSeqs += try context.holdCompacted(before: operation.id, from: &compacted) }
                    if try Self.log(operation, &context, &report) { heldAfterAll = true }
                }
                waiting -= batch
                if waiting == 0, compacted.hadAny, !compacted.isEmpty {
                    report.compactedSeqs += try context.holdCompacted(compacted.rest, ifHolding: VersionVector())
                    compacted = CompactedToLog(SeqRanges())
                }
                try context.flush()
                rows += try Self.listPending(context.writtenChunks, context.db)
                if waiting == 0, !heldAfterAll, !rows.isEmpty { try inLastBatch?(&context, rows) }
            })
            try afterEachBatch()
        } while waiting > 0
        return (report, rows, heldAfterAll)
    }

    /// Stages 1 and 2: reads and checks every operation, keeping them all in the order read and
    /// those the store does not hold in record order too; `toFile`, all of them in the sort's file
    /// (`OperationSorter.finish(toFile:)`).
    func readAndSort(
        _ read: (_ each: (Op) throws -> Void) throws -> Void, sortRun: Int, toFile: Bool = false
    ) throws -> OperationSorter.Finished {
        // Through the read pool: a merge prepared while another is written (a peer session's next
        // part) does not wait for it. What it reads as held may be logged, or not, before this
        // merge logs: the log step settles it (SPEC.md §5.6, "Operations held after all").
        let (held, aboveGaps) = try guarded { try self.read { db in try (ReplicaDirectory(db).versionVector, Self.heldAboveGaps(db)) } }
        var sorter = OperationSorter(spillPath: spillPath(), runOperations: sortRun)
        // Operations come in runs of one author: look its seq up once per run.
        var author: (id: ReplicaID, held: UInt64, aboveGaps: [ClosedRange<UInt64>])?
        try read { operation in
            do {
                try operation.validate()
            } catch {
                throw ConcordError.wrap(error, path: path)
            }
            let id = operation.id
            if author?.id != id.replica { author = (id.replica, held[id.replica], aboveGaps[id.replica] ?? []) }
            let new = id.seq > author!.held && (author!.aboveGaps.isEmpty || !author!.aboveGaps.contains { $0.contains(id.seq) })
            try sorter.add(operation, sorting: new)
        }
        // A sort with nothing to sort is not applied from: it keeps no file.
        return try guarded { try sorter.finish(toFile: toFile && sorter.sortedCount > 0) }
    }

    /// The log rows held above a gap of the version vector (operations that arrived out of
    /// order), by author: they are held, though the vector does not cover them. Most often none.
    static func heldAboveGaps(_ db: Database) throws -> [ReplicaID: [ClosedRange<UInt64>]] {
        var ranges: [ReplicaID: [ClosedRange<UInt64>]] = [:]
        let rows = try Row.fetchCursor(db, sql: """
            SELECT replicas.id, log.first_seq, log.last_seq FROM log JOIN replicas ON replicas.idx = log.replica
            WHERE log.last_seq > replicas.contiguous
            """)
        while let row = try rows.next() {
            guard let id = ReplicaID(bytes: try row.column(0) as Data) else { throw ConcordError(.corrupt, "a replica row has a malformed id") }
            let (first, last) = (UInt64(clamping: try row.column(1) as Int64), UInt64(clamping: try row.column(2) as Int64))
            guard first <= last else { throw ConcordError(.corrupt, "a log row has an impossible range") }
            ranges[id, default: []].append(first...last)
        }
        return ranges
    }

    /// Stage 3 for one operation: appends it to the log, or compares it with the one held under
    /// its id. Returns whether it is held although it was counted new when it was read, or the
    /// other way round.
    private static func log(_ operation: KeptOperation, _ context: inout WriteContext, _ report: inout MergeReport) throws -> Bool {
        guard try context.isHeld(operation.id) else {
            try context.append(kept: operation)
            // Not sorted, it is applied from the log.
            return !operation.sorted
        }
        guard try context.holdsSame(operation) else { throw clash(operation.id) }
        // The elided copy of an operation held in full stands for its record's purge (SPEC.md
        // §5.7), which may never come.
        try context.purgeIfHeldInFull(operation)
        report.duplicates += 1
        return operation.sorted
    }

    /// Lists log rows in `pending_merge` (SPEC.md §9): their operations wait to be applied.
    private static func listPending(_ rows: [PendingRow], _ db: Database) throws -> [PendingRow] {
        guard !rows.isEmpty else { return [] }
        let insert = try db.cachedStatement(sql: "INSERT INTO pending_merge (replica, first_seq) VALUES (?, ?)")
        for row in rows { try insert.execute(arguments: [row.replica, row.firstSeq]) }
        try PendingRow.markThisProcessMerging(db)
        return rows
    }

    /// Stage 4, to its end: a batch of records per transaction, recording the progress in the
    /// pending `rows` (SPEC.md §5.6); the last batch deletes them.
    func applyInRecordOrder(
        _ applier: inout RecordApplier, rows: [PendingRow],
        checking check: (Database) throws -> Void = { _ in }, afterEachBatch: () throws -> Void = {}
    ) throws {
        while !applier.isDone {
            _ = try mergeTransaction(check) { context, _ in try applier.applyBatch(into: &context, rows: rows) }
            try afterEachBatch()
        }
    }

    /// Records in the pending `rows` that a batch applied their operations of the records up to
    /// `last`, or, when the merge is `finished`, deletes them.
    static func settle(_ rows: [PendingRow], through last: RecordRef?, finished: Bool, _ db: Database) throws {
        if finished {
            let delete = try db.cachedStatement(sql: "DELETE FROM pending_merge WHERE replica = ? AND first_seq = ?")
            for row in rows { try delete.execute(arguments: [row.replica, row.firstSeq]) }
            try PendingRow.unmarkThisProcessMerging(db)
        } else if let last {
            // Never backwards: another process may be finishing the same rows, further on.
            let update = try db.cachedStatement(sql: """
                UPDATE pending_merge SET applied_through = ?1
                WHERE replica = ?2 AND first_seq = ?3 AND (applied_through IS NULL OR applied_through < ?1)
                """)
            for row in rows { try update.execute(arguments: [last.appliedThroughBytes, row.replica, row.firstSeq]) }
        }
    }

    /// One transaction of a merge: checks that the store may be written and `check`, runs `body`
    /// with a fresh context, writes the context out, and wakes the store's observer once it has
    /// committed.
    private func mergeTransaction(
        _ check: (Database) throws -> Void, _ body: (inout WriteContext, inout MergeReport) throws -> Void
    ) throws -> MergeReport {
        let (report, erased) = try guarded {
            try write { db in
                try prepareWrite(db)
                try check(db)
                var context = try WriteContext(db, localReplica: replicaID)
                var report = MergeReport()
                try body(&context, &report)
                try context.flush()
                report.newOperations = context.newOperationsByAuthor()
                if report.newOperationCount > 0, context.clock.isFarAhead(ofWallMillis: environment.wallClock()) {
                    report.farFutureTimestamp = context.clock.latest
                }
                return (report, context.erased)
            }
        }
        committed()
        if erased { eraseFreedPages() }
        return report
    }

    /// Holds the seqs of `seqs` that the store does not, compacted, if it holds every seq `base`
    /// covers, in one transaction (SPEC.md §5.8, §9 "Taking compacted seqs"): a peer session's,
    /// once the peer has sent everything past this store's vector. Returns how many it took.
    @discardableResult
    package func holdCompacted(
        _ seqs: SeqRanges, ifHolding base: VersionVector = VersionVector(), droppingCopiesThrough dropped: VersionVector = VersionVector()
    ) throws(ConcordError) -> UInt64 {
        guard !seqs.isEmpty else { return 0 }
        return try guarded {
            try mergeTransaction({ _ in }) { context, report in
                report.compactedSeqs += try context.holdCompacted(seqs, ifHolding: base, droppingCopiesThrough: dropped)
            }.compactedSeqs
        }
    }

    static func clash(_ id: OperationID) -> ConcordError {
        ConcordError(
            .clash,
            "replica \(id.replica) has two different operations with seq \(id.seq), here and in what is being merged: one of the two stores is a copy of the other (nothing of this batch was merged)",
            cause: OperationClash(id: id))
    }
}

/// The seqs of the operations a merge's input delivers in full, gathered run by run as it is read
/// (one comparison per operation: inputs bring each author's operations in runs).
private struct DeliveredSeqs {
    private var gathered = SeqRanges()
    private var run: (replica: ReplicaID, seqs: ClosedRange<UInt64>)?

    mutating func note(_ id: OperationID) {
        // `&+`: a run that ends at the greatest seq continues with none (seq 0 is never an id).
        if let current = run, current.replica == id.replica, current.seqs.upperBound &+ 1 == id.seq {
            run!.seqs = current.seqs.lowerBound...id.seq
            return
        }
        if let current = run { gathered.insert(current.seqs, of: current.replica) }
        run = (id.replica, id.seq...id.seq)
    }

    var seqs: SeqRanges {
        var all = gathered
        if let run { all.insert(run.seqs, of: run.replica) }
        return all
    }
}

/// The seqs a sender holds compacted, with the base of the export that carries them (SPEC.md §5.8).
package struct CompactedSeqs: Sendable {
    /// The compacted seqs.
    package var seqs: SeqRanges
    /// The version vector the export was cut from: they are taken only by a store that holds it.
    package var base: VersionVector
    /// Where the sender knew removes were dropped as stable: a claim at or below it of a seq the
    /// store holds in full drops the copy (SPEC.md §5.8).
    package var droppedStableThrough: VersionVector

    package init(seqs: SeqRanges, base: VersionVector, droppedStableThrough: VersionVector = VersionVector()) {
        self.seqs = seqs
        self.base = base
        self.droppedStableThrough = droppedStableThrough
    }
}

/// Stage 4 of a merge (SPEC.md §5.6), its one applier: the records' folded states
/// (`FoldedRecords`), from the merge's sorted input or from pending rows read back from the log,
/// joined with their rows in record order, at most `MergeBatch.records` records per
/// transaction. Call `stop` when done.
struct RecordApplier {
    private let states: FoldedRecords
    private let bounds: MergeBatch
    /// The first state not yet joined.
    private var next: FoldedRecord?

    init(_ operations: OperationSorter.Finished, _ bounds: MergeBatch, encodingWith directory: ReplicaDirectory) throws {
        states = FoldedRecords(operations, bounds, encodingWith: directory)
        self.bounds = bounds
        next = try states.next()
    }

    /// Whether every record has been applied.
    var isDone: Bool { next == nil }

    /// Joins the next batch of records with their rows in `context`'s transaction, and records in
    /// the pending `rows` how far it got (the last batch deletes them).
    mutating func applyBatch(into context: inout WriteContext, rows: [PendingRow]) throws {
        context.reserveRecords(bounds.flushRecords)
        context.applyingRows = rows
        var last: RecordRef?
        var joined = 0
        // Taken out of `next`, so that the record moves into the context rather than being copied;
        // only once the batch has room for it (the count is tested first), so `next` keeps the
        // first record of the next batch.
        while joined < bounds.records, let record = next.take() {
            last = record.state.ref
            context.join(unread: record)
            joined += 1
            // The states come in record order: written out a few at a time, rows are still
            // written in order, and the folding thread folds the next states meanwhile.
            if context.cachedRecordCount >= bounds.flushRecords { try context.flush() }
            next = try states.next()
        }
        try ConcordStore.settle(rows, through: last, finished: next == nil, context.db)
    }

    func stop() {
        states.stop()
    }
}

/// The bounds of a merge's transactions (SPEC.md §5.6). A transaction that logs operations ends
/// once it has logged `operations` of them; one that applies them to their records ends once it
/// has applied them to `records` records (it holds about a thousand at a time in memory: they
/// come in record order). Larger batches merge faster (each commit rewrites every page the batch
/// touched); smaller ones let other writers in sooner. Operations are sorted by record in runs of
/// at most `sortRun` operations (about 30 bytes each, plus 32 of index; at most 4 MiB of them);
/// more than one run goes through a temporary file.
package struct MergeBatch: Sendable, Equatable {
    package var operations: Int
    package var records: Int
    package var sortRun: Int
    /// How many record states a batch that applies holds before it writes them out (they come in
    /// record order).
    var flushRecords = 1024
    /// From how many sorted operations they are folded into record states on a thread of their own:
    /// below it, the thread costs more than it saves.
    var foldThreadFrom = 20_000

    package init(operations: Int, records: Int, sortRun: Int = 125_000) {
        self.operations = max(1, operations)
        self.records = max(1, records)
        self.sortRun = max(1, sortRun)
    }

    /// A local write waits for at most one transaction of a merge (a batch, or the last logging
    /// batch and the first applying one together): a second or two of merging on a 2-core machine.
    package static let standard = MergeBatch(operations: 1_000_000, records: 110_000)

    /// These bounds with no limit on a transaction: the merge is one transaction (its memory is
    /// still bounded by `sortRun` and `flushRecords`).
    var unbounded: MergeBatch {
        var bounds = self
        bounds.operations = .max
        bounds.records = .max
        return bounds
    }

    /// `unbounded`, for `count` operations already in memory (0 when not known): they are sorted
    /// in one run sized to them, rather than in memory reserved for the largest run a merge may
    /// need (a peer sends thousands at a time, and each batch would map and fault that in anew).
    func unbounded(holding count: Int) -> MergeBatch {
        var bounds = unbounded
        if count > 0 { bounds.sortRun = min(bounds.sortRun, count) }
        return bounds
    }
}
