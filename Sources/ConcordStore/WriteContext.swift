import ConcordCore
import Foundation
import GRDB

/// Sequence numbers of one replica's operations that a store holds: everything up to
/// `contiguous`, plus runs above it that arrived out of order.
struct HeldSequence {
    private(set) var contiguous: UInt64
    /// Held runs above `contiguous`, from the log, sorted.
    private var ranges: [ClosedRange<UInt64>]
    /// Held seqs above `contiguous` that arrived in this transaction.
    private var pending: Set<UInt64> = []

    init(contiguous: UInt64, ranges: [ClosedRange<UInt64>]) {
        self.contiguous = contiguous
        self.ranges = ranges
        absorb()
    }

    func contains(_ seq: UInt64) -> Bool {
        seq <= contiguous || pending.contains(seq) || ranges.contains { $0.contains(seq) }
    }

    mutating func insert(_ seq: UInt64) {
        if seq == contiguous + 1 {
            contiguous = seq
            absorb()
        } else if seq > contiguous {
            pending.insert(seq)
        }
    }

    private mutating func absorb() {
        var advanced = true
        while advanced {
            advanced = false
            if pending.remove(contiguous + 1) != nil {
                contiguous += 1
                advanced = true
            }
            if let first = ranges.first, first.lowerBound <= contiguous + 1 {
                contiguous = max(contiguous, first.upperBound)
                ranges.removeFirst()
                advanced = true
            }
        }
    }
}

/// The state of one write transaction: the records it touched, the operations it adds to the
/// log, the clock. `flush` writes them out; a transaction may flush several times to bound memory.
struct WriteContext {
    let db: Database
    let localReplica: ReplicaID
    var directory: ReplicaDirectory
    var clock: HybridLogicalClock
    private var states: [RecordRef: RecordState] = [:]
    private var held: [ReplicaID: HeldSequence] = [:]
    private var appended: [ReplicaID: [Op]] = [:]
    private(set) var appendedCount = 0
    private(set) var touched: Set<RecordRef> = []

    init(_ db: Database, localReplica: ReplicaID) throws {
        self.db = db
        self.localReplica = localReplica
        directory = try ReplicaDirectory(db)
        let raw = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'clock'") ?? 0
        clock = HybridLogicalClock(latest: Timestamp(rawValue: UInt64(bitPattern: raw)))
    }

    var cachedRecordCount: Int { states.count }

    mutating func state(of ref: RecordRef) throws -> RecordState? {
        if let state = states[ref] { return state }
        let loaded = try RecordRows.load(ref, db, directory)
        if let loaded { states[ref] = loaded }
        return loaded
    }

    mutating func isHeld(_ id: OperationID) throws -> Bool {
        try heldSequence(of: id.replica).contains(id.seq)
    }

    /// The next sequence number of a local operation.
    mutating func nextLocalSeq() throws -> UInt64 {
        let sequence = try heldSequence(of: localReplica)
        return sequence.contiguous + 1
    }

    /// Applies a new operation (one not held yet) to its record and queues it for the log.
    mutating func append(_ operation: Op) throws {
        if try state(of: operation.record) == nil { states[operation.record] = RecordState(ref: operation.record) }
        // Mutate in place: copying the state out and back would copy its storage on every operation.
        states[operation.record]!.apply(operation)
        touched.insert(operation.record)
        held[operation.id.replica]!.insert(operation.id.seq)
        appended[operation.id.replica, default: []].append(operation)
        appendedCount += 1
    }

    private mutating func heldSequence(of replica: ReplicaID) throws -> HeldSequence {
        if let sequence = held[replica] { return sequence }
        var sequence = HeldSequence(contiguous: 0, ranges: [])
        if let index = directory.indexByID[replica] {
            let contiguous = directory.contiguous[replica] ?? 0
            let rows = try Row.fetchAll(
                db, sql: "SELECT first_seq, last_seq FROM log WHERE replica = ? AND last_seq > ? ORDER BY first_seq",
                arguments: [index, Int64(contiguous)])
            let ranges = try rows.map { row in
                let first = UInt64(clamping: try row.column(0) as Int64)
                let last = UInt64(clamping: try row.column(1) as Int64)
                guard first <= last else { throw StoreError(.corrupt, "a log row has an impossible range") }
                return first...last
            }
            sequence = HeldSequence(contiguous: contiguous, ranges: ranges)
        }
        held[replica] = sequence
        return sequence
    }

    /// Writes the touched records, the queued log chunks, the version vector and the clock.
    mutating func flush() throws {
        for state in states.values { try RecordRows.save(state, db, &directory) }
        states.removeAll(keepingCapacity: true)
        for (replica, operations) in appended {
            try appendToLog(replica, operations)
        }
        appended.removeAll(keepingCapacity: true)
        appendedCount = 0
        for (replica, sequence) in held where sequence.contiguous != directory.contiguous[replica] {
            try db.execute(
                sql: "UPDATE replicas SET contiguous = ? WHERE idx = ?",
                arguments: [Int64(sequence.contiguous), try directory.index(of: replica, db)])
            directory.setContiguous(sequence.contiguous, for: replica)
        }
        try db.execute(
            sql: "UPDATE meta SET value = ? WHERE key = 'clock'", arguments: [Int64(bitPattern: clock.latest.rawValue)])
    }

    /// Stores operations of one author as chunks of contiguous sequence numbers.
    private mutating func appendToLog(_ replica: ReplicaID, _ operations: [Op]) throws {
        let index = try directory.index(of: replica, db)
        let sorted = operations.sorted { $0.id.seq < $1.id.seq }
        let statement = try db.cachedStatement(
            sql: "INSERT INTO log (replica, first_seq, last_seq, max_ts, ops) VALUES (?, ?, ?, ?, ?)")
        var start = 0
        while start < sorted.count {
            var end = start + 1
            while end < sorted.count, sorted[end].id.seq == sorted[end - 1].id.seq + 1, end - start < Self.maxChunkOperations {
                end += 1
            }
            let run = sorted[start..<end]
            var writer = ByteWriter(capacity: run.count * 16)
            OperationCodec.encode(run, into: &writer)
            let maxTimestamp = run.map(\.timestamp).max()!
            statement.setUncheckedArguments([
                index, Int64(run.first!.id.seq), Int64(run.last!.id.seq), Int64(bitPattern: maxTimestamp.rawValue),
                Data(writer.bytes),
            ])
            try statement.execute()
            start = end
        }
    }

    /// The most operations one log chunk holds.
    static let maxChunkOperations = 4096
}
