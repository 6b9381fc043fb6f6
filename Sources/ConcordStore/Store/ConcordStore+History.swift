import ConcordCore
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
