import ConcordCore
import Foundation
import GRDB

extension ConcordStore {
    /// Carries out changes in one transaction: all of them or, if one is refused, none.
    /// - Returns: the operations they appended to the log.
    @discardableResult
    public func perform(_ changes: [(RecordRef, Change)]) throws(ConcordError) -> [Op] {
        let now = environment.wallClock()
        let (operations, erased) = try guarded {
            try write { db in
                try prepareWrite(db)
                var context = try WriteContext(db, localReplica: replicaID)
                var made: [Op] = []
                for (ref, change) in changes {
                    let current = try context.state(of: ref)
                    if current == nil, change.creates, let other = try context.otherKind(holdingIDOf: ref) {
                        throw ConcordError.idOfAnotherKind(ref, heldAs: other)
                    }
                    let actions = try change.plan(on: ref, current: current, now: Int64(clamping: now))
                    for action in actions {
                        var predecessors: Predecessors?
                        if case .assign(let field, _) = action {
                            // What this replica has seen of the register: a write that settles any
                            // conflict in it. The state before the change tells it: a change's own
                            // writes are this replica's, which no predecessors list.
                            predecessors = current?.register(field)?.predecessors(ofWriteBy: replicaID) ?? Predecessors.empty
                        }
                        let operation = Op(
                            id: OperationID(replica: replicaID, seq: try context.nextLocalSeq()),
                            timestamp: try context.clock.tick(wallMillis: now), record: ref, action: action,
                            predecessors: predecessors)
                        try context.append(operation)
                        made.append(operation)
                    }
                }
                try context.flush()
                return (made, context.erased)
            }
        }
        if !operations.isEmpty { committed() }
        if erased { eraseFreedPages() }
        return operations
    }

    /// Carries out one change on one record, as `perform(_:)` does; returns the operations it wrote.
    @discardableResult
    public func perform(_ change: Change, on ref: RecordRef) throws(ConcordError) -> [Op] {
        try perform([(ref, change)])
    }

    /// Merges operations from anywhere, in one transaction: all of them or, if one is invalid or
    /// clashes with one held (SPEC.md §9.1), none. Operations already held are skipped.
    ///
    /// Operations alone carry no compacted seqs (SPEC.md §5.8): between replicas that compact,
    /// exchange bundles, stores or peer sessions, which carry them. A replica fed only this way by
    /// one that dropped a stable remove keeps the adds that remove named.
    @discardableResult
    public func merge(_ operations: some Sequence<Op>) throws(ConcordError) -> MergeReport {
        try guarded {
            try merge(bounds: environment.mergeBatch.unbounded(holding: operations.underestimatedCount)) { each in
                for operation in operations { try each(operation) }
            }
        }
    }

    /// Merges every operation of the store at `path` that this one lacks. The other store is
    /// opened read-only and never modified; merging a store into itself changes nothing.
    @discardableResult
    public func merge(storeAt otherPath: String) throws(ConcordError) -> MergeReport {
        try merge(storesAt: [otherPath])
    }

    /// Merges several stores: each is opened read-only and read whole before anything is written,
    /// so if one cannot be read, nothing is merged.
    @discardableResult
    public func merge(storesAt paths: [String]) throws(ConcordError) -> MergeReport {
        var others: [ConcordStore] = []
        defer { for other in others { try? other.close() } }
        for path in paths { others.append(try ConcordStore.open(at: path, readOnly: true, environment: environment)) }
        return try merge(stores: others)
    }

    /// Merges the stores `others`, open already (in memory, say), as `merge(storesAt:)` does:
    /// their operations, their compacted seqs, and what they hold (SPEC.md §5.8).
    @discardableResult
    package func merge(stores others: [ConcordStore]) throws(ConcordError) -> MergeReport {
        // A store with a sync key takes no compacted seqs from another store, which no seal
        // vouches for (SPEC.md §13).
        let trustsPlain = try syncKeyBytes() == nil
        var compacted: [CompactedSeqs] = []
        var heard: [(replica: ReplicaID, holds: VersionVector)] = []
        var dropped = VersionVector()
        let report = try guarded {
            try merge(reading: { each in
                for other in others {
                    let claimed = try other.forEachOperation(lackedBy: self, each)
                    if trustsPlain {
                        compacted.append(claimed)
                        heard.append((other.replicaID, try other.versionVector()))
                        dropped.merge(try other.droppedStableThrough())
                    }
                }
            }, compacted: { compacted })
        }
        try learn(heard, dropped: dropped)
        return report
    }

    /// Merges the operations `read` passes to its argument: input of any size, read once. `read`
    /// throws if the input is damaged or cannot be read; then nothing of it is applied (what an
    /// earlier merge left pending may have been finished first), and its error is passed on as a
    /// `ConcordError` (of code `invalidInput` for an `InvalidInputError`). Every operation is checked
    /// and kept, sorted by record, before anything of it is written; then they are logged and
    /// applied in batches (`StoreEnvironment.mergeBatch`), each its own transaction, so that other
    /// writers get the store between them and a merge interrupted halfway keeps every committed
    /// batch (SPEC.md §5.6). The records' observers hear
    /// of each batch as it commits; the report leaves `touchedRecords` empty.
    @discardableResult
    package func merge(reading read: (_ each: (Op) throws -> Void) throws -> Void) throws(ConcordError) -> MergeReport {
        try guarded { try merge(bounds: environment.mergeBatch, reading: read) }
    }

    /// `merge(reading:)`, and then the seqs its senders hold compacted, which `compacted` gives
    /// once `read` has returned: each taken if this store holds its export's base (SPEC.md §5.8).
    package func merge(
        reading read: (_ each: (Op) throws -> Void) throws -> Void, compacted: () -> [CompactedSeqs]
    ) throws(ConcordError) -> MergeReport {
        try guarded { try merge(bounds: environment.mergeBatch, reading: read, compacted: compacted) }
    }

    /// Passes `each` the operations of this store that `target` lacks: first the last operation
    /// both hold of each replica (two stores that share a replica id and both wrote differ there,
    /// SPEC.md §9.1), then every one `target`'s version vector does not cover (every one, when it
    /// does not hold `droppedStableThrough()`). Returns the seqs this store holds compacted past
    /// that vector, its base (SPEC.md §5.8).
    @discardableResult
    package func forEachOperation(lackedBy target: ConcordStore, _ each: (Op) throws -> Void) throws -> CompactedSeqs {
        // A target that does not hold where removes were dropped as stable gets every compacted
        // seq, from the empty vector (SPEC.md §5.8).
        let held = try target.versionVector()
        let dropped = try droppedStableThrough()
        let since = held.covers(dropped) ? held : VersionVector()
        for probe in try overlapProbes(for: since) { try each(probe) }
        var compacted: [(replica: ReplicaID, seqs: ClosedRange<UInt64>)] = []
        try forEachRun(since: since) { author, seqs, operations in
            try Self.forEachEntry(of: seqs, holding: operations) { entry in
                switch entry {
                case .operation(let operation): try each(operation)
                case .compacted(let stretch): compacted.append((author, stretch))
                }
            }
        }
        // A compaction records where it drops removes before it drops them: read after the log,
        // the vector tells whether the claims read are the ones it says.
        guard try droppedStableThrough() == dropped else {
            throw ConcordError(.local, "the store at \(path) dropped removes as stable while it was read; merge it again")
        }
        return CompactedSeqs(seqs: SeqRanges(compacted), base: since, droppedStableThrough: dropped)
    }

    // MARK: Conveniences over `perform`

    /// Adds a reminder and returns its new id.
    @discardableResult
    public func addReminder(_ draft: ReminderDraft) throws(ConcordError) -> RecordID {
        let id = environment.makeRecordID()
        try perform(.createReminder(draft), on: .reminder(id))
        return id
    }

    /// Sets the fields the patch names on a reminder.
    public func editReminder(_ id: RecordID, _ patch: ReminderPatch) throws(ConcordError) {
        try perform(.editReminder(patch), on: .reminder(id))
    }

    /// Completes ("dismisses") a reminder; a repeating one moves to its next occurrence instead.
    public func completeReminder(_ id: RecordID) throws(ConcordError) {
        try perform(.complete, on: .reminder(id))
    }

    /// Reopens a completed reminder.
    public func reopenReminder(_ id: RecordID) throws(ConcordError) {
        try perform(.reopen, on: .reminder(id))
    }

    /// Snoozes a reminder: it does not alert before `until`.
    public func snoozeReminder(_ id: RecordID, until: Date) throws(ConcordError) {
        try perform(.snooze(until: until), on: .reminder(id))
    }

    /// Adds a note and returns its new id.
    @discardableResult
    public func addNote(_ draft: NoteDraft) throws(ConcordError) -> RecordID {
        let id = environment.makeRecordID()
        try perform(.createNote(draft), on: .note(id))
        return id
    }

    /// Sets the fields the patch names on a note.
    public func editNote(_ id: RecordID, _ patch: NotePatch) throws(ConcordError) {
        try perform(.editNote(patch), on: .note(id))
    }

    /// Adds and removes tags of a record. Removing a tag removes only the adds of it this replica has seen, so a tag added meanwhile elsewhere stays.
    public func tag(_ ref: RecordRef, add: [String] = [], remove: [String] = []) throws(ConcordError) {
        try perform(.tag(add: add, remove: remove), on: ref)
    }

    /// Deletes a record: it leaves the lists, and `restore` brings it back.
    public func delete(_ ref: RecordRef) throws(ConcordError) {
        try perform(.delete, on: ref)
    }

    /// Restores a deleted record.
    public func restore(_ ref: RecordRef) throws(ConcordError) {
        try perform(.restore, on: ref)
    }

    /// Deletes every record of `kind` that this store holds and that is not deleted ("delete all
    /// data"), in one transaction: a delete each, as `delete(_:)` writes, so the deletes reach
    /// every replica, and a record that another replica creates meanwhile stays (SPEC.md §7).
    /// Returns how many records it deleted.
    @discardableResult
    public func deleteAll(_ kind: RecordKind) throws(ConcordError) -> Int {
        let refs: [RecordRef] =
            if kind == .reminder {
                try reminders(includeCompleted: true).map { .reminder($0.id) }
            } else if kind == .note {
                try notes().map { .note($0.id) }
            } else {
                []
            }
        guard !refs.isEmpty else { return 0 }
        try perform(refs.map { ($0, Change.delete) })
        return refs.count
    }
}
