import ConcordCore
import Foundation
import GRDB

/// What `verify` found (SPEC.md §9, "Verification").
package struct VerifyReport: Hashable, Sendable {
    package var records = 0
    /// Records purged (SPEC.md §5.7), which have no row.
    package var purgedRecords = 0
    package var operations = 0
    /// Logged operations a batched merge has not applied to their records yet (SPEC.md §5.6): not
    /// a problem; the next merge applies them.
    package var pendingOperations = 0
    /// One line per problem; empty when the store is sound.
    package var problems: [String] = []

    package var isSound: Bool { problems.isEmpty }
}

/// Two integers, as a dictionary key.
private struct Pair: Hashable {
    var a: Int64
    var b: Int64
    init(_ a: Int64, _ b: Int64) {
        self.a = a
        self.b = b
    }
}

extension ConcordStore {
    /// Checks the store without changing it: SQLite's integrity check, then Concord's invariants:
    /// the log's runs decode and do not overlap; each replica's version-vector entry is the end of
    /// its gap-free prefix in the log; the clock is at or after every logged timestamp; every
    /// record's materialized state equals a replay of the log (leaving out the operations a batched
    /// merge has logged and not yet applied, SPEC.md §5.6); the tags column lists the present tags.
    ///
    /// - Complexity: reads the whole store; holds one state per record in memory.
    package func verify() throws(ConcordError) -> VerifyReport {
        try guarded {
            try read { db in
                var report = VerifyReport()
                func problem(_ line: String) {
                    if report.problems.count < 1000 { report.problems.append(line) }
                }
                for line in try String.fetchAll(db, sql: "PRAGMA integrity_check") where line != "ok" {
                    problem("SQLite: \(line)")
                }
                let directory = try ReplicaDirectory(db)

                // The log: runs per replica, in order; replay every operation, but those still
                // pending (SPEC.md §5.6).
                var pending: [Pair: PendingRow] = [:]
                do {
                    for row in try PendingRow.fetchAll(db) { pending[Pair(row.replica, row.firstSeq)] = row }
                } catch let error as ConcordError {
                    problem("pending_merge: \(error.message)")
                }
                var replayed: [RecordRef: RecordState] = [:]
                var runs: [ReplicaID: [ClosedRange<UInt64>]] = [:]
                var latest = Timestamp.zero
                // The records of applied operations that keep their content.
                var logged = Set<RecordRef>()
                // The seqs the log holds compacted.
                var compacted = SeqRanges()
                let rows = try Row.fetchCursor(db, sql: "SELECT replica, first_seq, last_seq, max_ts, ops FROM log ORDER BY replica, first_seq")
                while let row = try rows.next() {
                    let author = try directory.id(at: try row.column(0))
                    let first = UInt64(clamping: try row.column(1) as Int64)
                    let last = UInt64(clamping: try row.column(2) as Int64)
                    let maxTimestamp = Timestamp(rawValue: UInt64(bitPattern: try row.column(3) as Int64))
                    if let previous = runs[author]?.last, previous.upperBound >= first {
                        problem("log: runs \(author.hex):\(previous) and \(first)...\(last) overlap")
                    }
                    runs[author, default: []].append(first...max(first, last))
                    let operations: [Op]
                    do {
                        operations = try Self.decodeChunk(try row.column(4), author: author, first: first, last: last)
                    } catch {
                        problem("log: run \(author.hex):\(first)-\(last) does not decode (\(error))")
                        continue
                    }
                    Self.forEachEntry(of: first...max(first, last), holding: operations) { entry in
                        if case .compacted(let stretch) = entry { compacted.insert(stretch, of: author) }
                    }
                    // A row whose seqs are all compacted records 0 (SPEC.md §9).
                    if operations.map(\.timestamp).max() ?? .zero != maxTimestamp {
                        problem("log: run \(author.hex):\(first)-\(last) records the wrong greatest timestamp")
                    }
                    let pendingRow = pending.removeValue(forKey: Pair(try row.column(0), Int64(bitPattern: first)))
                    for operation in operations {
                        if let pendingRow, pendingRow.awaits(operation.record) {
                            report.pendingOperations += 1
                            latest = max(latest, operation.timestamp)
                            continue
                        }
                        replayed[operation.record, default: RecordState(ref: operation.record)].apply(operation)
                        if !operation.purges { logged.insert(operation.record) }
                        latest = max(latest, operation.timestamp)
                    }
                    report.operations += operations.count
                }
                // The records listed as purged (SPEC.md §5.7); none of them may have a row, or an
                // applied operation that keeps its content.
                var purged = Set<RecordRef>()
                if try Self.holdsPurgedRecords(db) {
                    for row in try Row.fetchAll(db, sql: "SELECT kind, id FROM purged") {
                        purged.insert(RecordRef(kind: try Self.kind(try row.column(0)), id: try Self.recordID(try row.column(1))))
                    }
                }
                report.purgedRecords = purged.count

                for row in pending.values {
                    problem("pending_merge: lists log row (replica #\(row.replica), seq \(row.firstSeq)), which the log lacks")
                }

                // Version vectors: the end of each replica's gap-free prefix.
                for (replica, recorded) in directory.contiguous {
                    var contiguous: UInt64 = 0
                    for run in runs[replica] ?? [] where run.lowerBound == contiguous + 1 { contiguous = run.upperBound }
                    if contiguous != recorded {
                        problem("version vector: \(replica.hex) is recorded at \(recorded), the log holds 1...\(contiguous) without a gap")
                    }
                }
                for replica in runs.keys where directory.indexByID[replica] == nil {
                    problem("log: replica \(replica.hex) is not in the replica table")
                }
                let clock = Timestamp(rawValue: UInt64(bitPattern: try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'clock'") ?? 0))
                if clock < latest { problem("clock: \(clock) is behind the log's greatest timestamp \(latest)") }

                // Materialized state against the replay, but for the removed dots where removes
                // were dropped as stable: a compaction stopped before it forgot them in records
                // leaves them (SPEC.md §5.8).
                let dropped = try Self.droppedStableThrough(db)
                func forgettingDropped(_ state: RecordState) -> RecordState {
                    guard !dropped.entries.isEmpty else { return state }
                    var state = state
                    state.forgetRemoved { dropped.covers($0) }
                    return state
                }
                for table in RecordTable.known {
                    let sql = "SELECT id, " + table.rowColumns + ", crdt, tags FROM \(table.name)"
                    let rows = try Row.fetchCursor(db, sql: sql)
                    while let row = try rows.next() {
                        report.records += 1
                        let ref = RecordRef(kind: table.kind, id: try Self.recordID(try row.column(0)))
                        let stored: RecordState
                        do {
                            stored = try RecordRows.decode(ref: ref, table: table, row: row, offset: 1, directory)
                        } catch {
                            problem("\(ref): \(error)")
                            continue
                        }
                        if purged.contains(ref) { problem("\(ref): has a row but is listed in purged") }
                        if replayed.removeValue(forKey: ref).map(forgettingDropped) != forgettingDropped(Self.withoutCompacted(stored, compacted)) {
                            problem("\(ref): the stored state differs from a replay of the log")
                        }
                        let tags: String = try row.column(table.columns.count + 2)
                        if tags != (stored.tags.entries.isEmpty ? "[]" : JSON.canonicalArray(of: stored.tags.present.map(\.string))) {
                            problem("\(ref): the tags column does not list the present tags")
                        }
                    }
                }
                let others = try Row.fetchCursor(db, sql: "SELECT kind, id, crdt FROM other_records")
                while let row = try others.next() {
                    report.records += 1
                    let ref = RecordRef(kind: try Self.kind(try row.column(0)), id: try Self.recordID(try row.column(1)))
                    do {
                        if purged.contains(ref) { problem("\(ref): has a row but is listed in purged") }
                        let stored = try RecordRows.decode(ref: ref, table: nil, row: row, offset: 2, directory)
                        if replayed.removeValue(forKey: ref).map(forgettingDropped) != forgettingDropped(Self.withoutCompacted(stored, compacted)) {
                            problem("\(ref): the stored state differs from a replay of the log")
                        }
                    } catch {
                        problem("\(ref): \(error)")
                    }
                }
                // Purged records: a purge in the replay, and no operation of theirs with content.
                for ref in purged.sorted() {
                    if let state = replayed.removeValue(forKey: ref), !state.isPurged {
                        problem("\(ref): purged, but the log holds no purge of it")
                    }
                    if logged.contains(ref) { problem("\(ref): purged, but the log keeps content of its operations") }
                }
                for ref in replayed.keys.sorted() where replayed[ref]!.isPurged {
                    problem("\(ref): purged in the log but not listed in purged")
                    replayed[ref] = nil
                }
                for ref in replayed.keys.sorted() { problem("\(ref): in the log but has no row") }
                return report
            }
        }
    }

    /// `state` without the seqs it lists that the log holds compacted: a compaction stopped
    /// between compacting log rows and forgetting in records leaves those, and the next one
    /// forgets them (SPEC.md §9, "Compaction").
    private static func withoutCompacted(_ state: RecordState, _ compacted: SeqRanges) -> RecordState {
        guard !compacted.isEmpty else { return state }
        var state = state
        for span in state.operations.spans {
            for seq in span.first...span.last where compacted.contains(OperationID(replica: span.replica, seq: seq)) {
                state.forget(OperationID(replica: span.replica, seq: seq))
            }
        }
        return state
    }
}
