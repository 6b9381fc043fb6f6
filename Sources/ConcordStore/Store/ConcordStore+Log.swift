import ConcordCore
import Foundation
import GRDB

extension ConcordStore {
    /// Calls `body` with every operation in the log that `since` does not cover, in ascending
    /// order of replica id, then seq: the canonical order of a bundle (SPEC.md §13), which no
    /// store's local numbering of replicas changes. Of each replica only the log rows that reach
    /// past `since` are read, and chunks are decoded one at a time, so memory stays flat.
    package func forEachOperation(since: VersionVector = VersionVector(), _ body: (Op) throws -> Void) throws(ConcordError) {
        try guarded {
            try read { db in
                try Self.forEachRow(in: db, since: since, after: nil) { _, _, operations in
                    for operation in operations { try body(operation) }
                    return true
                }
            }
        }
    }

    /// Calls `body` with every log row's seqs that `since` does not cover, in the order of
    /// `forEachOperation(since:)`, and the operations held of them: a seq in `seqs` without an
    /// operation is compacted (SPEC.md §5.8). An export carries both.
    package func forEachRun(
        since: VersionVector = VersionVector(), _ body: (_ author: ReplicaID, _ seqs: ClosedRange<UInt64>, _ operations: ArraySlice<Op>) throws -> Void
    ) throws(ConcordError) {
        try guarded {
            try read { db in
                try Self.forEachRow(in: db, since: since, after: nil) { author, seqs, operations in
                    try body(author, seqs, operations)
                    return true
                }
            }
        }
    }

    /// One entry of a run of the log, in seq order: an operation held, or a stretch of compacted
    /// seqs (SPEC.md §5.8).
    package enum RunEntry {
        case operation(Op)
        case compacted(ClosedRange<UInt64>)
    }

    /// Calls `body` with the entries of the seqs `seqs`, of which `operations` (ascending, all in
    /// `seqs`) are held in full: each operation, and each stretch of seqs between them compacted.
    package static func forEachEntry(of seqs: ClosedRange<UInt64>, holding operations: some Sequence<Op>, _ body: (RunEntry) throws -> Void) rethrows {
        var next = seqs.lowerBound
        for operation in operations {
            if operation.id.seq > next { try body(.compacted(next...(operation.id.seq - 1))) }
            try body(.operation(operation))
            next = operation.id.seq + 1
        }
        if next <= seqs.upperBound { try body(.compacted(next...seqs.upperBound)) }
    }

    /// The seqs the store holds compacted past `since` (SPEC.md §5.8), in one read: a peer
    /// session reads them before the first operation it sends, so that every operation that made
    /// them redundant is among those it sends or those the peer holds.
    package func compactedSeqs(since: VersionVector) throws(ConcordError) -> SeqRanges {
        var compacted: [(replica: ReplicaID, seqs: ClosedRange<UInt64>)] = []
        try forEachRun(since: since) { author, seqs, operations in
            Self.forEachEntry(of: seqs, holding: operations) { entry in
                if case .compacted(let stretch) = entry { compacted.append((author, stretch)) }
            }
        }
        return SeqRanges(compacted)
    }

    /// How many seqs the store holds compacted (`meta.compacted`, SPEC.md §9): a shared folder
    /// rewrites its files once this grew enough (§14).
    package func compactedSeqCount() throws(ConcordError) -> Int64 {
        try guarded {
            try read { db in try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'compacted'") ?? 0 }
        }
    }

    /// The operations of the log that `since` does not cover, in the order of
    /// `forEachOperation(since:)`, from just after `position` (from the start when it is nil), as
    /// many log rows' worth as reach `limit` (so a page holds up to a row more: each row is read
    /// and decoded once): a page of a long read, each page a read transaction of its own, so that
    /// no page waits for a writer or holds one up. The log only grows, so the pages read one after
    /// the other hold every operation it held when the first was read (and may hold some that
    /// arrived since). Empty at the end of the log.
    package func operations(since: VersionVector, after position: OperationID?, limit: Int) throws(ConcordError) -> [Op] {
        try guarded {
            try read { db in
                var page: [Op] = []
                page.reserveCapacity(min(limit, 4096))
                try Self.forEachRow(in: db, since: since, after: position) { _, _, operations in
                    page += operations
                    return page.count < limit
                }
                return page
            }
        }
    }

    /// The walk of `forEachOperation(since:)`, from just after `position`, a log row at a time:
    /// its author, its seqs past `since` and `position`, and their operations; until `body`
    /// returns `false`.
    static func forEachRow(
        in db: Database, since: VersionVector, after position: OperationID?,
        _ body: (ReplicaID, ClosedRange<UInt64>, ArraySlice<Op>) throws -> Bool
    ) throws {
        // A row with a negative seq (a damaged store: the columns have no CHECK that binds a file
        // made by hand) is read too, for `decodeChunk` to refuse.
        let rows = try db.cachedStatement(sql: """
            SELECT first_seq, last_seq, ops FROM log WHERE replica = ? AND (last_seq > ? OR last_seq < 0 OR first_seq < 0)
            ORDER BY first_seq
            """)
        for (author, index) in try ReplicaDirectory(db).indexByID.sorted(by: { $0.key < $1.key }) {
            if let position, author < position.replica { continue }
            // What this walk skips of the author: what `since` covers, and up to the position.
            let floor = position?.replica == author ? max(since[author], position!.seq) : since[author]
            // A seq past Int64.max is never held: no row reaches past it.
            guard floor < UInt64(Int64.max) else { continue }
            let cursor: RowCursor
            if position?.replica == author {
                // Mid-author, a page seeks to the row that holds the seq after the position, the
                // last to start at or before it (an author's rows never overlap; compacted seqs
                // let a row span any number of them). Its rows before the position, a damaged one
                // among them, were walked already.
                let from = try db.cachedStatement(sql: """
                    SELECT first_seq, last_seq, ops FROM log WHERE replica = ?1 AND last_seq > ?2
                        AND first_seq >= (SELECT coalesce(max(first_seq), 0) FROM log WHERE replica = ?1 AND first_seq <= ?2 + 1)
                    ORDER BY first_seq
                    """)
                cursor = try Row.fetchCursor(from, arguments: [index, Int64(floor)])
            } else {
                cursor = try Row.fetchCursor(rows, arguments: [index, Int64(floor)])
            }
            while let row = try cursor.next() {
                // A damaged row's negative seq reads as a huge one, which `decodeChunk` refuses.
                let first = UInt64(bitPattern: try row.column(0) as Int64)
                let last = UInt64(bitPattern: try row.column(1) as Int64)
                let operations = try decodeChunk(try row.column(2), author: author, first: first, last: last)
                // A row's operations ascend; some of its seqs may be compacted (SPEC.md §5.8).
                let skipped = first > floor ? 0 : operations.firstIndex { $0.id.seq > floor } ?? operations.count
                guard try body(author, max(first, floor + 1)...last, operations[skipped...]) else { return }
            }
        }
    }

    /// Calls `body` with the operations in the log that `held` does not contain, author by author
    /// in sequence order, until it returns `false`. Of each author only the log rows past the seqs
    /// `held` covers from 1 on are read (an index range, never the whole log): a live session
    /// pushes from what the peer holds so, whenever the store commits (SPEC.md §15.10 rule 2).
    package func forEachOperation(notIn held: SeqRanges, _ body: (Op) throws -> Bool) throws(ConcordError) {
        try guarded {
            try read { db in
                let rows = try db.cachedStatement(sql: "SELECT first_seq, last_seq, ops FROM log WHERE replica = ? AND last_seq > ? ORDER BY first_seq")
                for (author, index) in try ReplicaDirectory(db).indexByID.sorted(by: { $0.key < $1.key }) {
                    let first = held.ranges(of: author).first
                    let covered = first.map { $0.lowerBound <= 1 ? $0.upperBound : 0 } ?? 0
                    guard covered < UInt64(Int64.max) else { continue }
                    let cursor = try Row.fetchCursor(rows, arguments: [index, Int64(covered)])
                    while let row = try cursor.next() {
                        let chunk = try Self.decodeChunk(
                            try row.column(2), author: author,
                            first: UInt64(bitPattern: try row.column(0) as Int64), last: UInt64(bitPattern: try row.column(1) as Int64))
                        for operation in chunk where !held.contains(operation.id) {
                            guard try body(operation) else { return }
                        }
                    }
                }
            }
        }
    }

    /// The operation held under `id`, if the log has it.
    package func operation(_ id: OperationID) throws(ConcordError) -> Op? {
        try guarded {
            try read { db in
                let directory = try ReplicaDirectory(db)
                guard let index = directory.indexByID[id.replica], id.seq <= UInt64(Int64.max) else { return nil }
                guard let row = try Row.fetchOne(
                    db, sql: "SELECT first_seq, last_seq, ops FROM log WHERE replica = ? AND first_seq <= ? ORDER BY first_seq DESC LIMIT 1",
                    arguments: [index, Int64(id.seq)])
                else { return nil }
                let first = UInt64(try row.column(0) as Int64)
                let last = UInt64(try row.column(1) as Int64)
                guard id.seq <= last else { return nil }
                return try Self.decodeChunk(try row.column(2), author: id.replica, first: first, last: last).first { $0.id == id }
            }
        }
    }

    /// The operations to compare before sending a store with version vector `held` what it
    /// lacks: of every replica both have operations of, the last one both hold. Two stores that
    /// share a replica id and both wrote under it differ there, and a merge that receives these
    /// first refuses the clash (SPEC.md §9.1); otherwise they are duplicates, skipped.
    package func overlapProbes(for held: VersionVector) throws(ConcordError) -> [Op] {
        var probes: [Op] = []
        for (replica, seq) in try versionVector().sorted where min(held[replica], seq) > 0 {
            if let operation = try operation(OperationID(replica: replica, seq: min(held[replica], seq))) {
                probes.append(operation)
            }
        }
        return probes
    }

    /// The `limit` newest operations by timestamp, newest first.
    package func recentOperations(limit: Int) throws(ConcordError) -> [Op] {
        guard limit > 0 else { return [] }
        return try guarded {
            try read { db in
                let directory = try ReplicaDirectory(db)
                let rows = try Row.fetchCursor(db, sql: "SELECT replica, first_seq, last_seq, max_ts, ops FROM log ORDER BY max_ts DESC")
                var collected: [Op] = []
                while let row = try rows.next() {
                    let chunkMax = Timestamp(rawValue: UInt64(bitPattern: try row.column(3) as Int64))
                    if collected.count >= limit, chunkMax < collected[limit - 1].timestamp { break }
                    collected += try Self.decodeChunk(
                        try row.column(4), author: try directory.id(at: try row.column(0)),
                        first: UInt64(bitPattern: try row.column(1) as Int64), last: UInt64(bitPattern: try row.column(2) as Int64))
                    collected.sort { $0.stamp > $1.stamp }
                    if collected.count > limit { collected.removeLast(collected.count - limit) }
                }
                return collected
            }
        }
    }

    static func decodeChunk(_ data: Data, author: ReplicaID, first: UInt64, last: UInt64) throws -> [Op] {
        guard first >= 1, last >= first, last <= Op.maxSeq else {
            throw ConcordError(.corrupt, "log chunk \(author.hex):\(first)-\(last) has an impossible range")
        }
        do {
            return try OperationCodec.decode([UInt8](data), author: author, firstSeq: first, count: Int(last - first + 1))
        } catch {
            throw ConcordError(.corrupt, "log chunk \(author.hex):\(first)-\(last) is damaged (\(error))")
        }
    }
}
