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
        return fork
    }

    /// Carries out `change` on `ref`, appending the operations it takes to the log.
    @discardableResult
    package mutating func perform(_ change: Change, on ref: RecordRef, wallMillis: UInt64) throws -> [Op] {
        if change.creates, records[ref] == nil, let other = records.keys.first(where: { $0.id == ref.id && $0.kind != ref.kind }) {
            throw IDOfAnotherKind(ref: ref, heldAs: other.kind)
        }
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
    package mutating func merge(
        _ incoming: some Sequence<Op>, covering: SeqRanges = SeqRanges(), since base: VersionVector = VersionVector(),
        wallMillis: UInt64 = 0
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
        // After the operations, so that a seq sent both in full and compacted is kept in full.
        if takesCompacted {
            for (author, seqs) in covering.runs {
                for seq in seqs {
                    let id = OperationID(replica: author, seq: seq)
                    guard !holds(id) else { continue }
                    compacted.insert(id)
                    hold(id)
                    report.compactedSeqs += 1
                }
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
        var byRecord: [RecordRef: [Op]] = [:]
        for operation in operations.values { byRecord[operation.record, default: []].append(operation) }
        // A record with an operation held above a gap keeps everything: that operation could make
        // others redundant, and an export of the gap-free prefix would carry their compacted seqs
        // without it (SPEC.md §5.8).
        for operation in operations.values where !versionVector.covers(operation.id) { byRecord[operation.record] = nil }
        var dropped = 0
        for (ref, held) in byRecord {
            for id in Compaction.redundant(among: held.sorted { $0.id < $1.id }, keeping: history, nowMillis: nowMillis) {
                operations[id] = nil
                compacted.insert(id)
                records[ref]!.forget(id)
                dropped += 1
            }
        }
        return dropped
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
