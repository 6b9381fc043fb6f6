import ConcordCore
import Foundation
import GRDB

extension ConcordStore {
    /// Carries out changes in one transaction: all of them or, if one is refused, none.
    /// - Returns: the operations they appended to the log.
    @discardableResult
    public func perform(_ changes: [(RecordRef, Change)]) throws(StoreError) -> [Op] {
        let now = environment.wallClock()
        let (operations, touched) = try guarded {
            try writer.write { db in
                try prepareWrite(db)
                var context = try WriteContext(db, localReplica: replicaID)
                var made: [Op] = []
                for (ref, change) in changes {
                    let actions = try change.plan(on: ref, current: try context.state(of: ref), now: Int64(clamping: now))
                    for action in actions {
                        let operation = Op(
                            id: OperationID(replica: replicaID, seq: try context.nextLocalSeq()),
                            timestamp: try context.clock.tick(wallMillis: now), record: ref, action: action)
                        try context.append(operation)
                        made.append(operation)
                    }
                }
                try context.flush()
                return (made, Set(context.touched))
            }
        }
        notify(StoreChange(origin: .local, records: touched))
        return operations
    }

    @discardableResult
    public func perform(_ change: Change, on ref: RecordRef) throws(StoreError) -> [Op] {
        try perform([(ref, change)])
    }

    /// Merges operations from anywhere, in one transaction. Operations already held are skipped;
    /// if any operation is invalid, nothing is applied.
    @discardableResult
    public func merge(_ operations: some Sequence<Op>) throws(StoreError) -> MergeReport {
        try finishPendingMerge()
        return try merging { context, report in
            for operation in operations { try Self.ingest(operation, &context, &report) }
        }
    }

    /// Merges every operation of the store at `path` that this one lacks. The other store is
    /// opened read-only and never modified; merging a store into itself changes nothing.
    @discardableResult
    public func merge(storeAt otherPath: String) throws(StoreError) -> MergeReport {
        try merge(storesAt: [otherPath])
    }

    /// Merges several stores in one transaction: every one of them, or (if one cannot be read)
    /// none. Each is opened read-only before anything is applied.
    @discardableResult
    public func merge(storesAt paths: [String]) throws(StoreError) -> MergeReport {
        var others: [ConcordStore] = []
        defer { for other in others { try? other.close() } }
        for path in paths { others.append(try ConcordStore.open(at: path, readOnly: true, environment: environment)) }
        try finishPendingMerge()
        return try merging { context, report in
            for other in others {
                // Only what this store lacks is read from the other, so compare the last operation
                // both hold of each replica: two stores that share a replica id and both wrote
                // differ there (SPEC.md §9.1).
                for probe in try other.overlapProbes(for: context.directory.versionVector) {
                    try Self.ingest(probe, &context, &report)
                }
                try other.forEachOperation(since: context.directory.versionVector) { operation in
                    try Self.ingest(operation, &context, &report)
                }
            }
        }
    }

    /// Merges the operations `produce` passes to its argument, in one transaction. If `produce`
    /// throws, nothing is applied.
    @discardableResult
    public func merge(_ produce: (_ ingest: (Op) throws -> Void) throws -> Void) throws(StoreError) -> MergeReport {
        try finishPendingMerge()
        return try merging { context, report in
            try produce { operation in try Self.ingest(operation, &context, &report) }
        }
    }

    /// Merges the operations `next` returns, until it returns nil, in bounded batches, each its
    /// own transaction (`StoreEnvironment.mergeBatch`, SPEC.md §5.6): local writes (and other
    /// processes) get the store between batches, and a merge interrupted halfway keeps every
    /// committed batch. The operations are first logged, in batches of operations; then applied to
    /// their records in record order, in batches of records, so that each record is read and
    /// written once however its operations are spread over the input. If `next` throws, what the
    /// committed batches logged is applied before the error is passed on; if the process dies,
    /// the next merge (or `finishPendingMerge`) applies it. So give `next` input already verified
    /// (see `mergeBundle`).
    ///
    /// `next` is called outside any transaction for the first operation of each batch, and
    /// inside the batch's transaction for the others. Memory is bounded by one batch's records and
    /// one run of sorted operations (`MergeBatch.sortRun`); more go through a temporary file.
    @discardableResult
    public func mergeInBatches(_ next: () throws -> Op?) throws(StoreError) -> MergeReport {
        try finishPendingMerge()
        let report: MergeReport
        do {
            report = try logInBatches(next).report
        } catch {
            _ = try? finishPendingMerge()
            throw error
        }
        try finishPendingMerge()
        return report
    }

    /// Merges input of any size, reading it once: `read` passes every operation to its argument,
    /// and throws if the input is damaged or cannot be read (then nothing is applied, and its
    /// error is passed on as it is). The operations are checked and kept meanwhile, sorted by
    /// record (in memory, or in a temporary file beside the store). Then, if they are no more than
    /// one batch of operations (`StoreEnvironment.mergeBatch`), they are logged and applied in one
    /// transaction (to at most a batch of records; further batches apply the rest); if more, they
    /// are logged and applied in batches as by `mergeInBatches(_:)` (SPEC.md §5.6).
    /// Either way each record is read and written
    /// once, in record order, and the input is read once: it cannot change between its check and
    /// its merge.
    @discardableResult
    public func mergeInBatches(reading read: (_ each: (Op) throws -> Void) throws -> Void) throws -> MergeReport {
        try finishPendingMerge()
        // What the store holds already is logged (each is compared with the one held), not applied again.
        let held = try versionVector()
        var sorter = OperationSorter(spillPath: spillPath(), runOperations: environment.mergeBatch.sortRun)
        var covered = 0
        // Operations come in runs of one author: look its seq up once per run.
        var author: (id: ReplicaID, held: UInt64)?
        try read { operation in
            // Checked here, so that invalid input applies nothing; it is logged without being decoded again.
            do {
                try operation.validate()
            } catch {
                throw StoreError.wrap(error, path: path)
            }
            if author?.id != operation.id.replica { author = (operation.id.replica, held[operation.id.replica]) }
            let new = operation.id.seq > author!.held
            if !new { covered += 1 }
            try sorter.add(operation, sorting: new)
        }
        let kept = try guarded { try sorter.finish() }
        if kept.count <= environment.mergeBatch.operations,
           let report = try mergeInOneTransaction(kept, covered: covered) {
            return report
        }
        var added = kept.addedOrder()
        let logged: (report: MergeReport, rows: [PendingRow])
        do {
            logged = try logInBatches({ try added.nextKept() }, ingest: Self.ingest)
        } catch {
            _ = try? finishPendingMerge()
            throw error
        }
        guard !logged.rows.isEmpty else { return logged.report }
        guard logged.report.duplicates == covered else {
            // Some of the sorted operations were held after all (above a gap, or merged by
            // another process meanwhile, which may still be applying them): apply what is pending,
            // read back from the log.
            try finishPendingMerge()
            return logged.report
        }
        try applyInRecordOrder(kept, rows: logged.rows, afterEachBatch: {})
        return logged.report
    }

    /// Logs the operations `kept`, then applies the sorted ones in record order, in one
    /// transaction if they touch no more records than one batch applies; if more, that transaction
    /// applies the first batch's records (listing the log rows as pending) and the next batches
    /// apply the rest, each its own transaction. Nil, having changed nothing, if some of the
    /// sorted ones turn out to be held already (above a gap of the version vector, or merged by
    /// another process since `covered` was counted, which may not have applied them yet): then
    /// they are merged in batches, which apply what is pending from the log.
    private func mergeInOneTransaction(
        _ kept: OperationSorter.Finished, covered: Int
    ) throws(StoreError) -> MergeReport? {
        struct HeldAfterAll: Error {}
        let states = FoldedRecords(kept, environment.mergeBatch)
        defer { states.stop() }
        var next: RecordState?
        var rows: [PendingRow] = []
        let report: MergeReport
        do {
            report = try merging(reportingTouched: false) { context, report in
                context.defersRecords = true
                // Listed in case the records take more than this transaction.
                context.listsPendingRows = true
                var added = kept.addedOrder()
                while let operation = try added.nextKept() { try Self.ingest(operation, &context, &report) }
                guard report.duplicates == covered else { throw HeldAfterAll() }
                try context.flush()
                rows = context.pendingRows
                next = try states.next()
                let last = try join(states, from: &next, into: &context)
                try Self.settle(rows, through: last, finished: next == nil, context.db)
            }
        } catch where error.underlying is HeldAfterAll {
            return nil
        }
        if next != nil {
            Self.pauseBetweenBatches()
            try applyInRecordOrder(states, from: next, rows: rows, afterEachBatch: {})
        }
        return report
    }

    /// The first half of `mergeInBatches`: logs the operations `next` returns in batches (see
    /// the next function).
    func logInBatches(_ next: () throws -> Op?) throws(StoreError) -> (report: MergeReport, rows: [PendingRow]) {
        try logInBatches(next, ingest: Self.ingest)
    }

    /// The first half of `mergeInBatches`: logs the operations in batches of
    /// `mergeBatch.operations`, each its own transaction, and lists the log rows they write as
    /// pending (SPEC.md §5.6), for `finishPendingMerge` to apply. `ingest` logs one operation,
    /// decoded (`Op`) or kept encoded (`KeptOperation`).
    func logInBatches<Operation>(
        _ next: () throws -> Operation?,
        ingest: (Operation, inout WriteContext, inout MergeReport) throws -> Void
    ) throws(StoreError) -> (report: MergeReport, rows: [PendingRow]) {
        let limits = environment.mergeBatch
        var report = MergeReport()
        var rows: [PendingRow] = []
        var first: Operation?
        do {
            first = try next()
        } catch {
            throw StoreError.wrap(error, path: path)
        }
        repeat {
            var finished = first == nil
            let batchReport = try merging(reportingTouched: false) { context, batchReport in
                context.defersRecords = true
                context.listsPendingRows = true
                var operation = first
                var applied = 0
                while let current = operation {
                    try ingest(current, &context, &batchReport)
                    applied += 1
                    if applied >= limits.operations { break }
                    operation = try next()
                    finished = operation == nil
                }
                try context.flush()
                rows += context.pendingRows
            }
            report.formUnion(batchReport)
            guard !finished else { break }
            Self.pauseBetweenBatches()
            do {
                first = try next()
            } catch {
                throw StoreError.wrap(error, path: path)
            }
        } while first != nil
        return (report, rows)
    }

    /// Runs `body` in one write transaction with a fresh context, flushing every bounded batch.
    /// Without `reportingTouched`, the report leaves `touchedRecords` empty; the records still
    /// reach the store's observers, if it has any.
    func merging(
        reportingTouched: Bool = true, _ body: (inout WriteContext, inout MergeReport) throws -> Void
    ) throws(StoreError) -> MergeReport {
        let (report, touched) = try guarded {
            try writer.write { db in
                try prepareWrite(db)
                var context = try WriteContext(db, localReplica: replicaID)
                context.recordLimit = environment.mergeBatch.records
                // Decided once: an observer that starts meanwhile sees the changes after this one.
                let collectsTouched = reportingTouched || isObserved
                context.collectsTouched = collectsTouched
                var report = MergeReport()
                try body(&context, &report)
                try context.flush()
                let touched = collectsTouched ? Set(context.touched) : []
                if reportingTouched { report.touchedRecords = touched }
                report.newOperations = context.newOperationsByAuthor()
                let wall = environment.wallClock()
                if report.newOperationCount > 0, context.clock.isFarAhead(ofWallMillis: wall) {
                    report.farFutureTimestamp = context.clock.latest
                }
                return (report, touched)
            }
        }
        notify(StoreChange(origin: .merge, records: touched))
        return report
    }


    static func ingest(_ operation: Op, _ context: inout WriteContext, _ report: inout MergeReport) throws {
        try operation.validate()
        if try context.isHeld(operation.id) {
            guard try context.holdsSame(operation) else { throw clash(operation.id) }
            report.duplicates += 1
            return
        }
        context.clock.observe(operation.timestamp)
        try context.append(operation)
        // A long transaction writes out its records as it goes, so memory stays bounded.
        if context.cachedRecordCount >= context.recordLimit { try context.flush() }
    }

    /// `ingest` for an operation kept encoded by a merge's sort, checked when it was read: logged
    /// only (`WriteContext.defersRecords`).
    static func ingest(_ operation: KeptOperation, _ context: inout WriteContext, _ report: inout MergeReport) throws {
        if try context.isHeld(operation.id) {
            guard try context.holdsSame(operation) else { throw clash(operation.id) }
            report.duplicates += 1
            return
        }
        try context.append(kept: operation)
    }

    private static func clash(_ id: OperationID) -> StoreError {
        StoreError(
            .clash,
            "replica \(id.replica) has two different operations with seq \(id.seq), here and in what is being merged: one of the two stores is a copy of the other; run 'syncctl init --fork' on the copy (nothing of this batch was merged)",
            underlying: OperationClash(id: id))
    }

    // MARK: Conveniences over `perform`

    /// Adds a reminder and returns its new id.
    @discardableResult
    public func addReminder(_ draft: ReminderDraft) throws(StoreError) -> RecordID {
        let id = environment.makeRecordID()
        try perform(.createReminder(draft), on: .reminder(id))
        return id
    }

    public func editReminder(_ id: RecordID, _ patch: ReminderPatch) throws(StoreError) {
        try perform(.editReminder(patch), on: .reminder(id))
    }

    /// Completes ("dismisses") a reminder; a repeating one moves to its next occurrence instead.
    public func completeReminder(_ id: RecordID) throws(StoreError) {
        try perform(.complete, on: .reminder(id))
    }

    public func reopenReminder(_ id: RecordID) throws(StoreError) {
        try perform(.reopen, on: .reminder(id))
    }

    public func snoozeReminder(_ id: RecordID, until: Date) throws(StoreError) {
        try perform(.snooze(until: until), on: .reminder(id))
    }

    @discardableResult
    public func addNote(_ draft: NoteDraft) throws(StoreError) -> RecordID {
        let id = environment.makeRecordID()
        try perform(.createNote(draft), on: .note(id))
        return id
    }

    public func editNote(_ id: RecordID, _ patch: NotePatch) throws(StoreError) {
        try perform(.editNote(patch), on: .note(id))
    }

    public func tag(_ ref: RecordRef, add: [String] = [], remove: [String] = []) throws(StoreError) {
        try perform(.tag(add: add, remove: remove), on: ref)
    }

    public func delete(_ ref: RecordRef) throws(StoreError) {
        try perform(.delete, on: ref)
    }

    public func restore(_ ref: RecordRef) throws(StoreError) {
        try perform(.restore, on: ref)
    }
}
