/// An in-memory replica: the operation log, the state it materializes, and the clock.
///
/// This is the reference model of Concord's semantics. The SQLite store keeps the same state
/// durably and is tested against this model.
package struct Replica: Sendable {
    package let id: ReplicaID
    package private(set) var clock: HybridLogicalClock
    package private(set) var operations: [OperationID: Op] = [:]
    package private(set) var records: [RecordRef: RecordState] = [:]
    package private(set) var versionVector = VersionVector()
    /// Seqs held without their operations: compaction dropped them, here or on the replica that
    /// sent them (SPEC.md §5.8).
    package private(set) var compacted = SeqRanges()
    /// Sequence numbers held above the version vector (operations delivered out of order).
    private var held: [ReplicaID: Set<UInt64>] = [:]
    /// What each other replica is known to hold: the join of the version vectors it sent
    /// (SPEC.md §5.8, "Stable removes").
    package private(set) var knownVectors: [ReplicaID: VersionVector] = [:]
    /// A vector at or below which some replica may have dropped stable removes, here or on a
    /// replica whose export this one merged: an export to a replica that does not hold it
    /// claims every compacted seq, so that the receiver drops the adds those removes named.
    package private(set) var droppedStableThrough = VersionVector()

    package init(id: ReplicaID, clock: HybridLogicalClock = HybridLogicalClock()) {
        self.id = id
        self.clock = clock
    }

    /// This replica as a store restored from a backup becomes once `init --fork` gives it the id
    /// `id` (SPEC.md §9.1): what it holds, with its clock, under another id.
    package func forked(as id: ReplicaID) -> Replica {
        var fork = Replica(id: id, clock: clock)
        fork.operations = operations
        fork.records = records
        fork.versionVector = versionVector
        fork.held = held
        fork.compacted = compacted
        fork.knownVectors = knownVectors
        fork.knownVectors[self.id] = versionVector
        fork.droppedStableThrough = droppedStableThrough
        return fork
    }

    /// Notes that `replica` holds every seq `vector` covers (it sent or published it).
    package mutating func learn(_ replica: ReplicaID, holds vector: VersionVector) {
        // An empty vector teaches nothing (SPEC.md §5.8), as in stores (`ConcordStore.learn`).
        guard replica != id, !vector.entries.isEmpty else { return }
        knownVectors[replica, default: VersionVector()].merge(vector)
    }

    /// The replicas retired (SPEC.md §5.8, "Retiring a replica"): they no longer hold back the
    /// stable frontier.
    package var retired: Set<ReplicaID> {
        Set(records.values.lazy.filter(\.retires).map { ReplicaID(high: $0.ref.id.high, low: $0.ref.id.low) })
    }

    /// Whether this replica holds its own retirement: it then takes no local write.
    package var isRetired: Bool { records[.replica(id)]?.retires == true }

    /// The seqs every replica this one knows of holds, as far as it knows: the meet of its own
    /// version vector and of what each other replica (every author it holds a seq of, and every
    /// replica it learned a vector of), but a retired one, is known to hold. An author of which
    /// nothing else is known holds its own seqs.
    package var stableFrontier: VersionVector {
        var members = Set(knownVectors.keys)
        for (author, seq) in versionVector.entries where seq > 0 { members.insert(author) }
        members.remove(id)
        members.subtract(retired)
        var frontier = versionVector
        for member in members {
            frontier.formMeet(knownVectors[member] ?? VersionVector([member: versionVector[member]]))
        }
        return frontier
    }

    /// What a replica that holds `base` lacks of this one: the operations it holds in full past
    /// `base`, and the seqs past `base` it holds compacted; or, when `base` does not hold
    /// `droppedStableThrough`, every seq it holds compacted (SPEC.md §5.8, "Stable removes").
    package func export(since base: VersionVector = VersionVector()) -> Export {
        let claims = base.covers(droppedStableThrough) ? compacted.subtracting(base) : compacted
        return Export(
            sender: id, senderVector: versionVector, base: base, operations: operations(since: base), compacted: claims,
            droppedStableThrough: droppedStableThrough)
    }

    /// Merges `export`: its operations, and its compacted seqs if this replica holds its base
    /// (`merge(_:covering:since:wallMillis:)`); learns what its sender holds, and where removes
    /// were dropped.
    @discardableResult
    package mutating func merge(_ export: Export, wallMillis: UInt64 = 0) throws(InvalidOperation) -> MergeReport {
        let report = try merge(
            export.operations, covering: export.compacted, since: export.base, droppingCopiesThrough: export.droppedStableThrough,
            wallMillis: wallMillis)
        learn(export.sender, holds: export.senderVector)
        droppedStableThrough.merge(export.droppedStableThrough)
        return report
    }

    /// Carries out `change` on `ref`, appending the operations it takes to the log.
    @discardableResult
    package mutating func perform(_ change: Change, on ref: RecordRef, wallMillis: UInt64) throws -> [Op] {
        if change.creates, records[ref] == nil, let other = records.keys.first(where: { $0.id == ref.id && $0.kind != ref.kind }) {
            throw IDOfAnotherKind(ref: ref, heldAs: other.kind)
        }
        guard !isRetired else { throw ChangeError.retired(id) }
        if change == .retire, ref == .replica(id) { throw ChangeError.retiringItself }
        let actions = try change.plan(on: ref, current: records[ref], now: Int64(clamping: wallMillis))
        // Stamp every operation before inserting any, so a refused change leaves nothing behind.
        var ticking = clock
        var made: [Op] = []
        for (index, action) in actions.enumerated() {
            let seq = versionVector[id] + 1 + UInt64(index)
            var predecessors: Predecessors?
            if case .assign(let field, _) = action {
                predecessors = records[ref]?.register(field)?.predecessors(ofWriteBy: id) ?? Predecessors.empty
            }
            made.append(Op(
                id: OperationID(replica: id, seq: seq), timestamp: try ticking.tick(wallMillis: wallMillis),
                record: ref, action: action, predecessors: predecessors))
        }
        clock = ticking
        for operation in made { insert(operation) }
        return made
    }

    /// Merges operations from anywhere, and the seqs their sender holds compacted (`covering`)
    /// when they come from an export since `base`: everything the sender held past `base`.
    /// Operations and seqs already held are skipped; invalid operations are refused before
    /// anything is applied. With a wall-clock reading, the report says when the clock is left
    /// more than a day ahead of it (SPEC.md §3).
    ///
    /// The compacted seqs are taken only if this replica holds every seq `base` covers: then it
    /// holds every operation that made them redundant, or one that made that one redundant, on
    /// to one it holds in full (SPEC.md §5.8). Otherwise they are left for a later exchange.
    @discardableResult
    ///
    /// A compacted seq at or below `dropped` (where the sender knew removes were dropped as
    /// stable) whose operation this replica holds in full drops the copy, and the record is
    /// folded again from what is left (SPEC.md §5.8, "Stable removes").
    package mutating func merge(
        _ incoming: some Sequence<Op>, covering: SeqRanges = SeqRanges(), since base: VersionVector = VersionVector(),
        droppingCopiesThrough dropped: VersionVector = VersionVector(), wallMillis: UInt64 = 0
    ) throws(InvalidOperation) -> MergeReport {
        let incoming = Array(incoming)
        for operation in incoming { try operation.validate() }
        var report = MergeReport()
        let takesCompacted = base.entries.allSatisfy { versionVector[$0.key] >= $0.value }
        for operation in incoming {
            guard !holds(operation.id) else {
                // The elided copy of an operation held in full stands for its record's purge
                // (SPEC.md §5.7): the purge itself may never come.
                if operation.action == .elided, let held = operations[operation.id], !held.purges, !records[held.record]!.isPurged {
                    records[held.record]!.purge()
                    elide(held.record)
                    report.touchedRecords.insert(held.record)
                }
                report.duplicates += 1
                continue
            }
            insert(operation)
            clock.observe(operation.timestamp)
            report.newOperations[operation.id.replica, default: 0] += 1
            report.touchedRecords.insert(operation.record)
        }
        if takesCompacted {
            var refolding: Set<RecordRef> = []
            for (author, seqs) in covering.runs {
                for seq in seqs {
                    let id = OperationID(replica: author, seq: seq)
                    if let operation = operations[id] {
                        // A claim is the sender's word that the operations it keeps give this
                        // one's effect: a copy held in full goes, and with it any add a stable
                        // remove named (SPEC.md §5.8). A purged record's elided copies stay.
                        guard dropped.covers(id), !records[operation.record]!.isPurged else { continue }
                        operations[id] = nil
                        compacted.insert(id)
                        refolding.insert(operation.record)
                        continue
                    }
                    guard !compacted.contains(id) else { continue }
                    compacted.insert(id)
                    hold(id)
                    report.compactedSeqs += 1
                }
            }
            for record in refolding {
                refold(record)
                report.touchedRecords.insert(record)
            }
        }
        if wallMillis > 0, report.newOperationCount > 0, clock.isFarAhead(ofWallMillis: wallMillis) {
            report.farFutureTimestamp = clock.latest
        }
        return report
    }

    /// The operations a peer with version vector `since` lacks, by author and sequence number.
    package func operations(since: VersionVector = VersionVector()) -> [Op] {
        operations.values.filter { !since.covers($0.id) }.sorted { $0.id < $1.id }
    }

    package var reminders: [Reminder] {
        records.values.filter { $0.ref.kind == .reminder && !$0.isPurged }.sorted { $0.ref < $1.ref }.map(Reminder.init(state:))
    }

    package var notes: [Note] {
        records.values.filter { $0.ref.kind == .note && !$0.isPurged }.sorted { $0.ref < $1.ref }.map(Note.init(state:))
    }

    /// Whether the operation `id` is held, in full or compacted.
    package func holds(_ id: OperationID) -> Bool {
        operations[id] != nil || compacted.contains(id)
    }

    /// Drops the operations whose effect the kept ones give (SPEC.md §5.8), keeping their seqs,
    /// but for the history `history` keeps as of `nowMillis`.
    /// - Returns: how many were dropped.
    @discardableResult
    package mutating func compact(keeping history: KeptHistory = .none, nowMillis: UInt64 = 0) -> Int {
        let stable = stableFrontier
        var byRecord: [RecordRef: [Op]] = [:]
        for operation in operations.values { byRecord[operation.record, default: []].append(operation) }
        // A record with an operation held above a gap keeps everything: that operation could make
        // others redundant, and an export of the gap-free prefix would carry their compacted seqs
        // without it (SPEC.md §5.8).
        for operation in operations.values where !versionVector.covers(operation.id) { byRecord[operation.record] = nil }
        var dropped = 0
        for (ref, held) in byRecord {
            let redundant = Compaction.redundant(among: held.sorted { $0.id < $1.id }, keeping: history, nowMillis: nowMillis, stable: stable)
            guard !redundant.isEmpty else { continue }
            for id in redundant.sorted() {
                if case .removeTag = operations[id]!.action { droppedStableThrough.merge(stable) }
                operations[id] = nil
                compacted.insert(id)
                dropped += 1
            }
            // The kept operations give the state but for the dots of the removes dropped as
            // stable, which it so forgets.
            refold(ref)
        }
        return dropped
    }

    /// Folds `record`'s state again from the operations of it held in full.
    private mutating func refold(_ record: RecordRef) {
        var state = RecordState(ref: record)
        for span in records[record]!.operations.spans {
            for seq in span.first...span.last {
                if let operation = operations[OperationID(replica: span.replica, seq: seq)] { state.apply(operation) }
            }
        }
        records[record] = state
    }

    /// Replaces every held operation of `record` by its elided copy.
    private mutating func elide(_ record: RecordRef) {
        for span in records[record]!.operations.spans {
            for seq in span.first...span.last {
                let id = OperationID(replica: span.replica, seq: seq)
                if let operation = operations[id] { operations[id] = operation.elided }
            }
        }
    }

    /// The canonical JSON of the replicated state (SPEC.md, "Dump"): purged records are left out.
    package func dump() -> String {
        Dump.canonical(records.values.sorted { $0.ref < $1.ref })
    }

    private mutating func insert(_ operation: Op) {
        records[operation.record, default: RecordState(ref: operation.record)].apply(operation)
        if records[operation.record]!.isPurged {
            // A store keeps no content of a purged record (SPEC.md §5.7): its operations are
            // elided, those held and those to come.
            operations[operation.id] = operation.elided
            if operation.purges { elide(operation.record) }
        } else {
            operations[operation.id] = operation
        }
        hold(operation.id)
    }

    /// Advances the version vector over `id`, or keeps it above a gap.
    private mutating func hold(_ id: OperationID) {
        let author = id.replica
        var contiguous = versionVector[author]
        if id.seq == contiguous + 1 {
            contiguous += 1
            var pending = held[author] ?? []
            while pending.remove(contiguous + 1) != nil { contiguous += 1 }
            held[author] = pending.isEmpty ? nil : pending
            versionVector[author] = contiguous
        } else if id.seq > contiguous {
            held[author, default: []].insert(id.seq)
        }
    }
}

/// What one replica sends another (SPEC.md §5.8): its operations and compacted seqs past the
/// receiver's version vector, and what it holds and knows of dropped removes.
package struct Export: Sendable {
    /// The replica that sent it.
    package var sender: ReplicaID
    /// The sender's version vector as it sent it.
    package var senderVector: VersionVector
    /// The receiver's version vector: the export holds what the sender holds past it.
    package var base: VersionVector
    /// The operations the sender holds in full past `base`, by id.
    package var operations: [Op]
    /// The seqs the sender holds compacted past `base`, or all of them (`Replica.export(since:)`).
    package var compacted: SeqRanges
    /// The sender's `droppedStableThrough`.
    package var droppedStableThrough: VersionVector
}
