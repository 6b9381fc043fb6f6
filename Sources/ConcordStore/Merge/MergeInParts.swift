import ConcordCore
import Foundation
import GRDB

/// A merge whose input arrives in parts over time: a peer session's batches (SPEC.md §5.6,
/// §15.6). Each part is logged as it arrives, in a transaction of its own, so that it is held
/// (and can be acknowledged) at once; its operations wait, listed as pending, until `apply()`
/// applies those of every part logged so far together, in record order. A record that several
/// parts touch (a reminder created in one batch and updated in a later one) is then read and
/// written once, as in the merge of one bundle.
///
/// Each part comes sorted by record (`prepareMerge`), in a file of its own, which the merge keeps;
/// `apply()` folds the kept sorts together as they are, rather than reading the operations back
/// from the log and sorting them again, which took a sixth of a peer session
/// (Benchmarks/README.md). It reads the log when the kept sorts may not say exactly what waits:
/// when an operation of a part turned out held after all; when more than `maxKeptParts` parts
/// wait, or the store object's merges keep `KeptSorts.limit` files already; after an apply
/// failed (it may have applied some records); and when another store object applied some of the
/// merge's rows meanwhile (as every merge first does, and a compaction), which a compaction may
/// have followed, dropping operations the kept sorts still hold.
///
/// Every part is logged only while the store holds the sync key the session authenticated with,
/// checked inside the part's transaction: a key replaced by any process stops the next part
/// (SPEC.md §15.1). What was logged before is applied all the same: it was received under the key.
///
/// Not thread-safe: a peer connection uses one from a serial queue.
package struct MergeInParts {
    private let store: ConcordStore
    private let keyBytes: [UInt8]
    /// The log rows of the parts logged and not yet applied.
    private var pending: [PendingRow] = []
    /// Those parts' sorts, while their sorted operations are exactly what `pending` holds; nil
    /// once they may not be (the operations are then read back from the log).
    private var keptSorts: [KeptSort]? = []
    private var started = false
    /// How many operations the parts logged that are not yet applied.
    package private(set) var waiting = 0

    /// A merge into `store` of parts that a peer holding the sync key `keyBytes` sends.
    package init(into store: ConcordStore, ifSyncKeyIs keyBytes: [UInt8]) {
        self.store = store
        self.keyBytes = keyBytes
    }

    /// Whether as many operations wait as a merge logs before it applies (`MergeBatch.operations`,
    /// SPEC.md §5.6), or a million if that is less: time to `apply()`, so that records never lag
    /// far behind the log. (A session sends nothing while it applies: a million take about a
    /// second on a small machine, far inside the peer protocol's 60 s idle timeout, whatever
    /// bound a user sets for other merges.)
    package var isFull: Bool { waiting >= min(store.environment.mergeBatch.operations, Self.maxWaiting) }

    static let maxWaiting = 1_000_000

    /// How many parts' sorts a merge keeps at most, each with its file open, and each read
    /// through a window of its own when applied (a peer that sends its operations one at a time
    /// makes a part of each).
    package static let maxKeptParts = 64

    /// Where `apply()` took what it applied from.
    package enum Source: Equatable, Sendable {
        /// Nothing waited.
        case nothing
        /// The parts' sorts, kept since they were prepared.
        case keptSorts
        /// The log rows of the merge still pending, read back.
        case log
    }

    /// Logs the operations of `part` (prepared by `ConcordStore.prepareMerge(_:)`) in one
    /// transaction, if the store still holds the session's sync key; otherwise nothing is written
    /// and the call fails with `.keyReplaced`. Held operations are compared with the ones held (a
    /// different one is a clash, and nothing of the part is logged). The first part first applies
    /// what an earlier merge left pending, as every merge does.
    package mutating func log(_ part: PreparedMerge) throws(ConcordError) -> MergeReport {
        precondition(part.path == store.path, "a merge prepared for \(part.path) is merged into \(store.path)")
        let (store, keyBytes) = (store, keyBytes)
        let (report, rows, heldAfterAll) = try store.guarded {
            if !started { try store.finishPendingMerge() }
            started = true
            return try store.log(
                sorted: part.operations, bounds: store.environment.mergeBatch.unbounded(holding: part.count),
                checking: { db in
                    guard try ConcordStore.syncKeyBytes(db) == keyBytes else {
                        throw ConcordError(.keyReplaced, "the sync key of the store at \(store.path) was replaced")
                    }
                })
        }
        pending += rows
        waiting += report.newOperationCount
        if heldAfterAll {
            keptSorts = nil
        } else if part.operations.sortedCount > 0 {
            // A part with nothing to sort adds nothing to apply, and keeps nothing.
            if (keptSorts?.count ?? Self.maxKeptParts) < Self.maxKeptParts, let kept = KeptSort(part.operations, within: store.keptSorts) {
                keptSorts!.append(kept)
            } else {
                keptSorts = nil
            }
        }
        return report
    }

    /// Applies the operations of the parts logged so far to their records, in record order, in
    /// transactions of at most `MergeBatch.records` records. If it fails, they stay pending: a
    /// later `apply()` tries again (from the log), and so do the next merge and the next process
    /// to open the store (this process no longer claims them, SPEC.md §9).
    @discardableResult
    package mutating func apply() throws(ConcordError) -> Source {
        guard !pending.isEmpty else { return .nothing }
        let (store, pending, bounds) = (store, pending, store.environment.mergeBatch)
        let ours = Set(pending.map(\.key))
        let sorted = keptSorts.map { kept in OperationSorter.Finished.concatenating(kept.map(\.sorted)) }
        // A failed apply may have applied some records: only the log's rows say which.
        keptSorts = nil
        let source = try store.releasingPendingOnFailure { () throws(ConcordError) -> Source in
            try store.guarded {
                // (Sorts with nothing to apply would settle no row: the log's rows do.)
                if let sorted, sorted.sortedCount > 0 {
                    do {
                        // Checked in each transaction: while every row of the merge is listed,
                        // no other store object has applied them, and no compaction has run
                        // since they were logged (a compaction waits for what is pending).
                        try store.apply(sorted: sorted, pending: pending, bounds: bounds, checking: { db in
                            guard ours.isSubset(of: try PendingRow.fetchAll(db).lazy.map(\.key)) else { throw AppliedElsewhere() }
                        })
                        return .keptSorts
                    } catch let error as ConcordError where error.cause is AppliedElsewhere {}
                }
                // What of the merge's rows is still pending, each as far as it was applied.
                let rows = try store.readOnWriter { db in try PendingRow.fetchAll(db).filter { ours.contains($0.key) } }
                if rows.isEmpty {
                    try store.write { db in try PendingRow.unmarkThisProcessMerging(db) }
                } else {
                    try store.applyPending(rows, bounds: bounds, afterEachBatch: {})
                }
                return .log
            }
        }
        self.pending = []
        keptSorts = []
        waiting = 0
        return source
    }

    /// Another store object applied some of the merge's pending rows.
    private struct AppliedElsewhere: Error {}
}

/// A part's sort that a merge in parts keeps for its apply, holding the sort's file open, and
/// counted against its store object's `KeptSorts` while it lives.
private final class KeptSort: Sendable {
    let sorted: OperationSorter.Finished
    private let count: KeptSorts

    /// Nil when the store object's merges keep as many as they may.
    init?(_ sorted: OperationSorter.Finished, within count: KeptSorts) {
        guard count.take() else { return nil }
        self.sorted = sorted
        self.count = count
    }

    deinit { count.giveBack() }
}

/// How many parts' sorts the merges in parts of one store object keep (`MergeInParts`), each with
/// a file open: at most `limit`, so that a server's sessions, which share its store object, never
/// run the process out of file descriptors (sixty-four sessions of `maxKeptParts` parts each would
/// hold 4,096, where a process may open 1,024 by default on Linux and 256 on macOS).
final class KeptSorts: Sendable {
    static let limit = 256
    private let held = LockedState(0)

    /// How many are kept now.
    var count: Int { held.withLock { $0 } }

    /// Counts one more, unless `limit` are kept already.
    fileprivate func take() -> Bool {
        held.withLock { held in
            guard held < Self.limit else { return false }
            held += 1
            return true
        }
    }

    fileprivate func giveBack() {
        held.withLock { $0 -= 1 }
    }
}

extension ConcordStore {
    /// The first stages of a merge of `operations` (SPEC.md §5.6: read, validate, sort by record),
    /// done ahead of the rest, so that a peer session sorts its next batches while the part before
    /// them is logged (`MergeInParts`). What the store holds is read through this store object: a
    /// read-only one of the same file reads it without waiting for the writer. Fails, writing
    /// nothing, if an operation is invalid.
    package func prepareMerge(_ operations: some Sequence<Op>) throws(ConcordError) -> PreparedMerge {
        let bounds = environment.mergeBatch.unbounded(holding: operations.underestimatedCount)
        return try guarded {
            PreparedMerge(
                operations: try readAndSort(
                    { each in for operation in operations { try each(operation) } }, sortRun: bounds.sortRun, toFile: true),
                path: path)
        }
    }
}

/// Operations read, validated and sorted by record for a merge into the store of one file
/// (`ConcordStore.prepareMerge(_:)`), waiting to be logged (`MergeInParts.log(_:)`).
package struct PreparedMerge: Sendable {
    fileprivate let operations: OperationSorter.Finished
    fileprivate let path: String

    /// How many operations it holds.
    package var count: Int { operations.count }
}
