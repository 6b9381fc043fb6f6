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
    /// record's operations, which its row lists (its operation spans, SPEC.md §9).
    public func history(of ref: RecordRef) throws(ConcordError) -> [HistoryEntry]? {
        try guarded {
            try connection.read { db -> [HistoryEntry]? in
                let directory = try ReplicaDirectory(db)
                guard let state = try RecordRows.load(ref, db, directory) else { return nil }
                var operations: [Op] = []
                for span in state.operations.spans {
                    guard let index = directory.indexByID[span.replica] else { continue }
                    // The row that holds the span's start may begin before it: it is the last one
                    // that begins at or before it.
                    let start = try Int64.fetchOne(db, sql: """
                        SELECT first_seq FROM log WHERE replica = ? AND first_seq <= ? ORDER BY first_seq DESC LIMIT 1
                        """, arguments: [index, Int64(span.first)]) ?? Int64(span.first)
                    let statement = try HotStatement(db, """
                        SELECT first_seq, last_seq, ops FROM log
                        WHERE replica = ? AND first_seq BETWEEN ? AND ? ORDER BY first_seq
                        """)
                    statement.bind(1, index)
                    statement.bind(2, start)
                    statement.bind(3, Int64(span.last))
                    while try statement.step() {
                        let first = UInt64(bitPattern: statement.int64(0))
                        let last = UInt64(bitPattern: statement.int64(1))
                        guard first <= last, last - first < 4096 else { throw ConcordError(.corrupt, "a log row has an impossible range") }
                        let bytes = statement.withBlob(2) { [UInt8]($0) }
                        let run: [Op]
                        do {
                            run = try OperationCodec.decode(bytes, author: span.replica, firstSeq: first, count: Int(last - first + 1))
                        } catch {
                            throw ConcordError(.corrupt, "a log chunk of replica \(span.replica) is damaged (\(error))")
                        }
                        operations += run.lazy.filter { $0.record == ref && (span.first...span.last).contains($0.id.seq) }
                    }
                }
                operations.sort { $0.stamp < $1.stamp }
                return operations.map { HistoryEntry(operation: $0, standing: state.standing(of: $0)) }
            }
        }
    }
}
