import ConcordCore
import Foundation
import GRDB

extension ConcordStore {
    /// Every field in conflict, record by record in `RecordRef` order (SPEC.md §5.1): a pure
    /// function of the operations held, so replicas that hold the same list the same. Reads every
    /// record's merge metadata.
    public func conflicts() throws(ConcordError) -> [Conflict] {
        var found: [Conflict] = []
        try forEachRecord { found += $0.conflicts }
        return found
    }

    /// The record's operations, oldest stamp first, each with whether it holds now (SPEC.md §10,
    /// "History"); nil when the store has no such record. Reads only the log rows that hold the
    /// record's operations, which its row lists (its operation spans, SPEC.md §9), each once.
    public func history(of ref: RecordRef) throws(ConcordError) -> [HistoryEntry]? {
        try historyAndRowsRead(of: ref)?.entries
    }

    /// Where this store's compactions trimmed the record's history (SPEC.md §5.8, §10
    /// "History"): the greatest timestamp of an operation of it they dropped; nil when they
    /// dropped none (or the store has no such record). A replica that received compacted seqs
    /// in place of operations does not know their records: its history shows what it holds.
    public func compactedThrough(of ref: RecordRef) throws(ConcordError) -> Timestamp? {
        try guarded {
            try read { db in
                try Int64.fetchOne(
                    db, sql: "SELECT through FROM compacted_records WHERE id = ? AND kind = ?",
                    arguments: [Data(ref.id.bytes), Int64(ref.kind.rawValue)]
                ).map { Timestamp(rawValue: UInt64(bitPattern: $0)) }
            }
        }
    }

    /// `history(of:)`, and how many log rows it read (a test checks that it reads each once).
    func historyAndRowsRead(of ref: RecordRef) throws(ConcordError) -> (entries: [HistoryEntry], rowsRead: Int)? {
        try guarded {
            try read { db -> (entries: [HistoryEntry], rowsRead: Int)? in
                let directory = try ReplicaDirectory(db)
                guard let state = try RecordRows.load(ref, db, directory) else { return nil }
                var reader = SpanReader(ref)
                var operations = try reader.operations(in: state.operations, db, directory)
                operations.sort { $0.stamp < $1.stamp }
                return (operations.map { HistoryEntry(operation: $0, standing: state.standing(of: $0)) }, reader.rowsRead)
            }
        }
    }
}
