import ConcordCore
import Foundation
import GRDB

/// Sequence numbers of one replica's operations that a store holds: everything up to
/// `contiguous`, plus runs above it that arrived out of order.
struct HeldSequence {
    private(set) var contiguous: UInt64
    /// Held runs that start above `contiguous + 1` (one that starts there joins the prefix).
    private var above: SeqRuns
    /// Single seqs that arrived between two runs of `above`: a set takes each in O(1), where
    /// the runs would move to make room (input in shuffled order brings one seq at a time).
    /// `missing(in:)` folds them into the runs.
    private var between: Set<UInt64> = []

    init(contiguous: UInt64, ranges: [ClosedRange<UInt64>]) {
        self.contiguous = contiguous
        above = SeqRuns(ranges)
        absorb()
    }

    func contains(_ seq: UInt64) -> Bool {
        // The prefix first: this runs for every operation merged.
        seq <= contiguous || (!above.isEmpty && above.contains(seq)) || (!between.isEmpty && between.contains(seq))
    }

    /// The seqs of `range` not held, in ascending ranges.
    mutating func missing(in range: ClosedRange<UInt64>) -> [ClosedRange<UInt64>] {
        guard range.upperBound > contiguous else { return [] }
        if !between.isEmpty {
            above = SeqRuns(above.ranges + between.map { $0...$0 })
            between.removeAll()
        }
        return above.missing(in: max(range.lowerBound, contiguous + 1)...range.upperBound)
    }

    /// Holds every seq of `range`.
    mutating func insert(_ range: ClosedRange<UInt64>) {
        if range.lowerBound <= contiguous + 1 {
            contiguous = max(contiguous, range.upperBound)
        } else {
            above.insert(range)
        }
        absorb()
    }

    mutating func insert(_ seq: UInt64) {
        if seq > contiguous + 1, let last = above.last, seq < last.lowerBound, !above.contains(seq) {
            between.insert(seq)
        } else {
            insert(seq...seq)
        }
    }

    /// Moves the runs, and the single seqs, that now continue the prefix into it.
    private mutating func absorb() {
        var advanced = true
        while advanced {
            advanced = false
            if let first = above.first, first.lowerBound <= contiguous + 1 {
                contiguous = max(contiguous, above.removeFirst().upperBound)
                advanced = true
            }
            if !between.isEmpty, between.remove(contiguous + 1) != nil {
                contiguous += 1
                advanced = true
            }
        }
    }
}

/// The state of one write transaction: the records it touched, the operations it adds to the
/// log, the clock. `flush` writes them out; a transaction may flush several times to bound memory.
///
/// This is the merge's hot path: per operation it does one array access for the record (the last
/// record is remembered, and operations of one record come together), and keeps the bookkeeping
/// of the current author in plain fields rather than in dictionaries.
struct WriteContext {
    let db: Database
    let localReplica: ReplicaID
    var directory: ReplicaDirectory
    var clock: HybridLogicalClock
    /// The records this batch touched, and where each is in `states`; `rows[i]` tells what
    /// `states[i]` is (see `RowState`).
    private var states: [RecordState] = []
    private var rows: [RowState] = []
    /// The rows encoded ahead of the unread states that `join(unread:)` brought (`FoldedRecord`):
    /// the row of `states[i]` as it is, nil once that state changes.
    private var encodedRows: [RecordRows.EncodedRow?] = []
    private var stateIndex: [RecordRef: Int] = [:]
    private var lastRef: RecordRef?
    private var lastIndex = 0
    /// What is held of each replica's log; the current author's is kept out of the dictionary.
    private var held: [ReplicaID: HeldSequence] = [:]
    private var currentAuthor: ReplicaID?
    private var currentHeld = HeldSequence(contiguous: 0, ranges: [])
    /// Each author's open log chunk: operations appended and not yet written to the log, of
    /// consecutive seqs; the current author's is kept out of the dictionary. A chunk is written
    /// as soon as it is full or the next operation does not continue it, so they stay small.
    private var openChunks: [ReplicaID: OpenChunk] = [:]
    private var currentChunk: OpenChunk?
    /// New operations by author, the current author's counted in `currentNew`.
    private var newOperations: [ReplicaID: Int] = [:]
    private var currentNew = 0
    private var statements = RecordStatements()
    /// The log rows written: a merge lists them as pending, since it applies their operations to
    /// their records later, in record order (SPEC.md §5.6).
    private(set) var writtenChunks: [PendingRow] = []

    init(_ db: Database, localReplica: ReplicaID) throws {
        self.db = db
        self.localReplica = localReplica
        directory = try ReplicaDirectory(db)
        let raw = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'clock'") ?? 0
        clock = HybridLogicalClock(latest: Timestamp(rawValue: UInt64(bitPattern: raw)))
    }

    var cachedRecordCount: Int { states.count }

    /// Makes room for `count` records, when a batch knows it will touch that many: growing the
    /// index of a large batch rehashes it again and again.
    mutating func reserveRecords(_ count: Int) {
        states.reserveCapacity(count)
        rows.reserveCapacity(count)
        encodedRows.reserveCapacity(count)
        stateIndex.reserveCapacity(count)
    }

    /// What a state in `states` stands for.
    private enum RowState {
        /// The record's whole state, from its row: written back with an update.
        case stored
        /// The whole state of a record that has no row: written with an insert (unless it is
        /// purged: then listed in `purged`).
        case new
        /// Only what this batch applied, starting from nothing: the record's row (if any) has
        /// not been read. Applying operations to a state is joining it with theirs (SPEC.md §5),
        /// so the flush joins this with the row, in id order, rather than reading each row at
        /// random as operations come.
        case unread
    }

    /// The index in `states` of the record, for applying operations to it: an unread state if
    /// the batch has not touched it yet.
    private mutating func index(applyingTo ref: RecordRef) -> Int {
        if ref == lastRef { return lastIndex }
        if let index = stateIndex[ref] {
            lastRef = ref
            lastIndex = index
            return index
        }
        return insert(RecordState(ref: ref), row: .unread)
    }

    /// Consuming, so that the state moves into `states` rather than being copied.
    private mutating func insert(_ state: consuming RecordState, row: RowState, encoded: consuming RecordRows.EncodedRow? = nil) -> Int {
        let ref = state.ref
        states.append(state)
        rows.append(row)
        encodedRows.append(encoded)
        let index = states.count - 1
        stateIndex[ref] = index
        lastRef = ref
        lastIndex = index
        return index
    }

    /// The record's whole state (a purged record's is purged), nil when the store does not hold it.
    mutating func state(of ref: RecordRef) throws -> RecordState? {
        guard let index = stateIndex[ref] else {
            if let loaded = try RecordRows.load(ref, db, directory, &statements) { return states[insert(loaded, row: .stored)] }
            guard try isPurged(ref) else { return nil }
            var purged = RecordState(ref: ref)
            purged.purge()
            return states[insert(purged, row: .new)]
        }
        if rows[index] == .unread { try read(index) }
        return states[index]
    }

    /// Whether the store lists `ref` as purged (SPEC.md §9, `purged`). Free for a store that
    /// holds no purge, which the context asks once.
    mutating func isPurged(_ ref: RecordRef) throws -> Bool {
        guard try holdsAnyPurge() else { return false }
        let statement = try HotStatement(db, "SELECT 1 FROM purged WHERE id = ? AND kind = ?")
        statement.bind(1, id: ref.id)
        statement.bind(2, Int64(ref.kind.rawValue))
        return try statement.step()
    }

    /// Whether the store lists a purged record, asked once per context (and true once it purges one).
    private mutating func holdsAnyPurge() throws -> Bool {
        if let holdsPurges { return holdsPurges }
        let holds = try ConcordStore.holdsPurgedRecords(db)
        holdsPurges = holds
        return holds
    }

    /// Whether the `purged` table has a row; nil until `holdsAnyPurge` asks.
    private var holdsPurges: Bool?

    /// Joins the unread state at `index` with its record's row, if it has one.
    private mutating func read(_ index: Int) throws {
        if let loaded = try RecordRows.load(states[index].ref, db, directory, &statements) {
            var whole = loaded
            whole.merge(states[index])
            states[index] = whole
            encodedRows[index] = nil
            rows[index] = .stored
        } else {
            rows[index] = .new
        }
    }

    /// Whether the store holds the record: a row of it, operations of it in this transaction, or
    /// its purge.
    mutating func holds(_ ref: RecordRef) throws -> Bool {
        if try stateIndex[ref] != nil || isPurged(ref) { return true }
        let statement: HotStatement
        if let table = RecordTable.of(ref.kind) {
            statement = try HotStatement(db, table.existsSQL)
            statement.bind(1, id: ref.id)
        } else {
            statement = try HotStatement(db, "SELECT 1 FROM other_records WHERE kind = ? AND id = ?")
            statement.bind(1, Int64(ref.kind.rawValue))
            statement.bind(2, id: ref.id)
        }
        return try statement.step()
    }

    /// A kind other than `ref`'s under which the store holds `ref`'s id, if any: a record id
    /// names one record whatever its kind (SPEC.md §2), so a local create of it is refused.
    mutating func otherKind(holdingIDOf ref: RecordRef) throws -> RecordKind? {
        if storedKinds == nil {
            // The kinds of `other_records`, one index probe each (its key is (kind, id)): there
            // are few, and a lookup by id alone would scan the table.
            var kinds: [RecordKind] = RecordTable.known.map(\.kind)
            var after: Int64 = 0
            while true {
                let statement = try HotStatement(db, "SELECT kind FROM other_records WHERE kind > ? ORDER BY kind LIMIT 1")
                statement.bind(1, after)
                guard try statement.step() else { break }
                after = statement.int64(0)
                guard let byte = UInt8(exactly: after), byte != 0 else { throw ConcordError(.corrupt, "a record has a malformed kind") }
                kinds.append(RecordKind(rawValue: byte))
            }
            // A purged record's id stays taken, and its row is gone (SPEC.md §5.7).
            if try holdsAnyPurge() {
                for kind in try Int64.fetchAll(db, sql: "SELECT DISTINCT kind FROM purged") {
                    guard let byte = UInt8(exactly: kind), byte != 0 else { throw ConcordError(.corrupt, "a purged record has a malformed kind") }
                    if !kinds.contains(RecordKind(rawValue: byte)) { kinds.append(RecordKind(rawValue: byte)) }
                }
            }
            storedKinds = kinds
        }
        for kind in storedKinds! where kind != ref.kind {
            if try holds(RecordRef(kind: kind, id: ref.id)) { return kind }
        }
        return nil
    }

    /// The kinds whose records the store may hold, found once per context by
    /// `otherKind(holdingIDOf:)`: a context that creates records merges none, so they stay so.
    private var storedKinds: [RecordKind]?

    mutating func isHeld(_ id: OperationID) throws -> Bool {
        try switchAuthor(to: id.replica)
        return currentHeld.contains(id.seq)
    }

    /// Whether `operation`, kept encoded and already held under its id, is the operation held:
    /// the same timestamp, record and action, but for predecessors or content (a purge's elision)
    /// that one copy lost on the way. Two different operations under one id
    /// mean two stores share a replica id (a copied store, SPEC.md §9.1).
    mutating func holdsSame(_ operation: KeptOperation) throws -> Bool {
        try holds(operation.id, encodedAlone: operation.bytes[operation.range])
    }

    /// Purges the record of `operation`, held and compared already, if it came elided and the
    /// store holds it in full: an elided copy stands for its record's purge (SPEC.md §5.7).
    mutating func purgeIfHeldInFull(_ operation: KeptOperation) throws {
        guard operation.range.lowerBound < operation.bytes.count,
              operation.bytes[operation.range.lowerBound] & OperationCodec.elidedFlag != 0,
              case .full(let held) = try heldOperation(operation.id), !held.purges,
              let state = try state(of: held.record), !state.isPurged, let index = stateIndex[held.record]
        else { return }
        states[index].purge()
    }

    private mutating func holds(_ id: OperationID, encodedAlone encoding: ArraySlice<UInt8>) throws -> Bool {
        let held: Op
        switch try heldOperation(id) {
        case .missing: throw ConcordError(.corrupt, "the log lacks operation \(id) that the version vector covers")
        // A compacted seq is a duplicate of whatever comes under it (SPEC.md §4.2, §5.8).
        case .compacted: return true
        case .full(let operation): held = operation
        }
        if Self.encoded(held).elementsEqual(encoding) { return true }
        // One of the two copies may have lost its predecessors on the way, through a peer session
        // or a build that does not carry them: it is the same operation (SPEC.md §4.2).
        var reader = ByteReader(Array(encoding))
        var decoder = OperationCodec.RunDecoder(author: id.replica, firstSeq: id.seq, count: 1)
        guard case .some(.some(var incoming)) = try? decoder.next(from: &reader), reader.isAtEnd else { return false }
        var kept = held
        if incoming.action == .elided || kept.action == .elided {
            // One copy lost its content to a purge of its record (SPEC.md §5.7): the same
            // operation if what an elided copy keeps is the same, and the other is not the purge.
            return incoming.record == kept.record && incoming.timestamp == kept.timestamp
                && incoming.action != .purge && kept.action != .purge
        }
        if incoming.predecessors == nil || kept.predecessors == nil {
            incoming.predecessors = nil
            kept.predecessors = nil
        }
        return incoming == kept
    }

    private static func encoded(_ operation: Op) -> [UInt8] {
        var writer = ByteWriter(capacity: 64)
        var encoder = OperationCodec.RunEncoder()
        encoder.append(operation, into: &writer)
        return writer.bytes
    }

    /// The last log chunk decoded to compare duplicates (they come in runs): read from the log,
    /// or as much as was encoded of an open chunk. Its seqs `first...last` without an operation
    /// are compacted.
    private var comparedChunk: (replica: ReplicaID, seqs: ClosedRange<UInt64>, operations: [Op])?

    /// What the log holds under a seq.
    private enum HeldCopy {
        case full(Op)
        case compacted
        case missing
    }

    /// The operation held under `id`: appended in this transaction, or in the log.
    private mutating func heldOperation(_ id: OperationID) throws -> HeldCopy {
        try switchAuthor(to: id.replica)
        if let chunk = comparedChunk, chunk.replica == id.replica, chunk.seqs.contains(id.seq) {
            return Self.copy(of: id, in: chunk.operations)
        }
        // What this transaction wrote before its open chunk is in the log.
        if let chunk = currentChunk, id.seq >= chunk.firstSeq, id.seq - chunk.firstSeq < UInt64(chunk.count) {
            let seqs = chunk.firstSeq...(chunk.firstSeq + UInt64(chunk.count - 1))
            let operations = try OperationCodec.decode(chunk.writer.bytes, author: id.replica, firstSeq: chunk.firstSeq, count: chunk.count)
            comparedChunk = (id.replica, seqs, operations)
            return Self.copy(of: id, in: operations)
        }
        guard let index = directory.indexByID[id.replica] else { return .missing }
        let statement = try HotStatement(
            db, "SELECT first_seq, last_seq, ops FROM log WHERE replica = ? AND first_seq <= ? ORDER BY first_seq DESC LIMIT 1")
        statement.bind(1, index)
        statement.bind(2, Int64(bitPattern: id.seq))
        guard try statement.step() else { return .missing }
        let first = UInt64(bitPattern: statement.int64(0))
        let last = UInt64(bitPattern: statement.int64(1))
        guard id.seq <= last, first <= last, last - first < UInt64(Int.max) else { return .missing }
        let bytes = statement.withBlob(2) { [UInt8]($0) }
        let operations: [Op]
        do {
            operations = try OperationCodec.decode(bytes, author: id.replica, firstSeq: first, count: Int(last - first + 1))
        } catch {
            throw ConcordError(.corrupt, "a log chunk of replica \(id.replica) is damaged (\(error))")
        }
        comparedChunk = (id.replica, first...last, operations)
        return Self.copy(of: id, in: operations)
    }

    /// The copy of `id` among a chunk's operations (ascending), which covers its seq.
    private static func copy(of id: OperationID, in operations: [Op]) -> HeldCopy {
        var low = 0
        var high = operations.count
        while low < high {
            let middle = (low + high) / 2
            if operations[middle].id.seq < id.seq { low = middle + 1 } else { high = middle }
        }
        return low < operations.count && operations[low].id.seq == id.seq ? .full(operations[low]) : .compacted
    }

    /// The next sequence number of a local operation. A store that holds its own retirement
    /// writes nothing more (SPEC.md §5.8, "Retiring a replica"): the first local write of the
    /// context checks it.
    mutating func nextLocalSeq() throws -> UInt64 {
        if !checkedNotRetired {
            if try state(of: .replica(localReplica))?.retires == true { throw ChangeError.retired(localReplica) }
            checkedNotRetired = true
        }
        try switchAuthor(to: localReplica)
        return currentHeld.contiguous + 1
    }

    /// Whether a local write of this context found the store not retired.
    private var checkedNotRetired = false

    /// Applies a new local operation to its record and queues it for the log.
    mutating func append(_ operation: Op) throws {
        try switchAuthor(to: operation.id.replica)
        let index = index(applyingTo: operation.record)
        // Mutate in place: copying the state out and back would copy its storage on every operation.
        states[index].apply(operation)
        encodedRows[index] = nil
        try openChunk(for: operation.id)
        currentChunk!.append(operation)
        currentNew += 1
    }

    /// Logs a new operation kept encoded by a merge's sort, without decoding it (it was checked
    /// when it was decoded first), and advances the clock to it. Its record is left for the merge
    /// to join (`join(unread:)`).
    mutating func append(kept operation: KeptOperation) throws {
        try switchAuthor(to: operation.id.replica)
        try openChunk(for: operation.id)
        var logged = operation
        if try holdsAnyPurge() {
            // An operation of a record purged here is logged elided, so that no reader of the log
            // (an export, a peer) meets its content before the merge applies it (SPEC.md §5.7).
            let (record, elided) = try OperationCodec.elided(encodedAlone: operation.bytes, in: operation.range)
            if try isPurged(record) {
                logged = KeptOperation(id: operation.id, sorted: operation.sorted, bytes: elided, range: 0..<elided.count)
            }
        }
        clock.observe(try currentChunk!.append(logged))
        currentNew += 1
    }

    /// Makes `currentChunk` the chunk that `id`, of the current author, goes into.
    private mutating func openChunk(for id: OperationID) throws {
        currentHeld.insert(id.seq)
        if let chunk = currentChunk, !chunk.continues(with: id) {
            try writeChunk(id.replica, chunk)
            currentChunk = nil
        }
        if currentChunk == nil { currentChunk = OpenChunk(firstSeq: id.seq) }
    }

    /// Joins a state built from operations the log already holds (folded elsewhere,
    /// `FoldedRecords`) with the record's: its row is joined at the flush.
    mutating func join(unread record: consuming FoldedRecord) {
        if let index = stateIndex[record.state.ref] {
            states[index].merge(record.state)
            encodedRows[index] = nil
        } else {
            _ = insert(record.state, row: .unread, encoded: record.row)
        }
    }

    /// The operations `append` added, by author, over the context's life.
    mutating func newOperationsByAuthor() -> [ReplicaID: Int] {
        parkCurrentAuthor()
        return newOperations
    }

    /// Makes `replica` the current author, parking the previous one's bookkeeping.
    private mutating func switchAuthor(to replica: ReplicaID) throws {
        guard replica != currentAuthor else { return }
        parkCurrentAuthor()
        currentAuthor = replica
        currentHeld = try heldSequence(of: replica)
        currentChunk = openChunks.removeValue(forKey: replica)
        currentNew = 0
    }

    private mutating func parkCurrentAuthor() {
        guard let author = currentAuthor else { return }
        held[author] = currentHeld
        if let chunk = currentChunk { openChunks[author] = chunk }
        if currentNew > 0 { newOperations[author, default: 0] += currentNew }
        currentChunk = nil
        currentNew = 0
        currentAuthor = nil
    }

    private mutating func heldSequence(of replica: ReplicaID) throws -> HeldSequence {
        if let sequence = held[replica] { return sequence }
        var sequence = HeldSequence(contiguous: 0, ranges: [])
        if let index = directory.indexByID[replica] {
            let contiguous = directory.contiguous[replica] ?? 0
            // The runs held above `contiguous`, found through the log's key (replica, first_seq):
            // the one row that may start at or below it and reach past it, then the rows that
            // start above it. Filtering on `last_seq` read every row of the replica's log at each
            // transaction, so that one transaction per record took time in proportion to the log.
            let arguments: StatementArguments = [index, Int64(contiguous)]
            let below = try db.cachedStatement(
                sql: "SELECT first_seq, last_seq FROM log WHERE replica = ? AND first_seq <= ? ORDER BY first_seq DESC LIMIT 1")
            let above = try db.cachedStatement(
                sql: "SELECT first_seq, last_seq FROM log WHERE replica = ? AND first_seq > ? ORDER BY first_seq")
            let rows = try Row.fetchAll(below, arguments: arguments) + Row.fetchAll(above, arguments: arguments)
            let ranges = try rows.map { row in
                let first = UInt64(clamping: try row.column(0) as Int64)
                let last = UInt64(clamping: try row.column(1) as Int64)
                guard first <= last else { throw ConcordError(.corrupt, "a log row has an impossible range") }
                return first...last
            }.filter { $0.upperBound > contiguous }
            sequence = HeldSequence(contiguous: contiguous, ranges: ranges)
        }
        held[replica] = sequence
        return sequence
    }

    /// Writes the touched records, the queued log chunks, the version vector and the clock.
    mutating func flush() throws {
        parkCurrentAuthor()
        let erasedBefore = erasedRows
        // In id order, so the B-tree is written in order rather than at random.
        let order = states.indices.sorted { states[$0].ref < states[$1].ref }
        // An unread record is most often new when a merge brings records this store never saw
        // (one insert that finds no row beats a read that finds none, then an insert), and most
        // often stored when it brings edits (a read, then an update). Which one the batch is
        // doing so far decides how the next is tried; the result is the same either way.
        var found = 0
        var absent = 0
        for index in order {
            if try states[index].isPurged || isPurged(states[index].ref) {
                try purge(index)
                continue
            }
            if rows[index] == .unread {
                if absent * 2 >= found {
                    if try RecordRows.save(states[index], as: .insertIfAbsent, db, &directory, &statements, encoded: encodedRows[index]) {
                        absent += 1
                        continue
                    }
                }
                if let table = RecordTable.of(states[index].ref.kind) {
                    // Joined with its row where the row lies, reading and writing only what the
                    // batch's operations touch.
                    if try RecordRows.patch(states[index], in: table, db, &directory, &statements) {
                        found += 1
                        continue
                    }
                    rows[index] = .new
                } else {
                    try read(index)
                }
                if rows[index] == .stored { found += 1 } else { absent += 1 }
            }
            try RecordRows.save(
                states[index], as: rows[index] == .stored ? .update : .insert, db, &directory, &statements, encoded: encodedRows[index])
        }
        states.removeAll(keepingCapacity: true)
        rows.removeAll(keepingCapacity: true)
        encodedRows.removeAll(keepingCapacity: true)
        stateIndex.removeAll(keepingCapacity: true)
        lastRef = nil
        for (replica, chunk) in openChunks {
            try writeChunk(replica, chunk)
        }
        openChunks.removeAll(keepingCapacity: true)
        try elideQueued()
        if compactedTaken > 0 {
            try db.execute(sql: "UPDATE meta SET value = value + ? WHERE key = 'compacted'", arguments: [Int64(compactedTaken)])
            compactedTaken = 0
        }
        if erasedRows > erasedBefore {
            // Counted, so that a shared folder knows which of its files to rewrite (SPEC.md §14).
            try db.execute(sql: "UPDATE meta SET value = value + 1 WHERE key = 'erasures'")
        }
        for (replica, sequence) in held where sequence.contiguous != directory.contiguous[replica] {
            try db.execute(
                sql: "UPDATE replicas SET contiguous = ? WHERE idx = ?",
                arguments: [Int64(sequence.contiguous), try directory.index(of: replica, db)])
            directory.setContiguous(sequence.contiguous, for: replica)
        }
        try db.execute(
            sql: "UPDATE meta SET value = ? WHERE key = 'clock'", arguments: [Int64(bitPattern: clock.latest.rawValue)])
    }

    // MARK: Purges

    /// The operations of purged records that the log may still hold with their content, by author
    /// (SPEC.md §5.7): `elideQueued` rewrites the log rows they are in.
    private var elisions: [ReplicaID: [ClosedRange<UInt64>]] = [:]
    /// The records purged in this context's flushes: their operations are elided wherever they are.
    private var purgedRefs: Set<RecordRef> = []
    /// Whether this flush listed a record in `purged` that was not yet.
    private var newlyPurged = false
    /// The pending rows of the merge whose records this context applies (`applyBatch`), if any.
    var applyingRows: [PendingRow] = []
    /// How many record rows and log rows the context's flushes erased content from. The store
    /// then checkpoints the WAL, whose earlier frames still hold it (SPEC.md §9, "Erasing").
    private(set) var erasedRows = 0
    var erased: Bool { erasedRows > 0 }

    /// Writes out the purged state at `index`: deletes the record's row, lists it in `purged`, and
    /// queues every operation of it that the log holds for eliding.
    private mutating func purge(_ index: Int) throws {
        if rows[index] == .unread { try read(index) }
        if !states[index].isPurged { states[index].purge() }
        let ref = states[index].ref
        let delete: HotStatement
        if let table = RecordTable.of(ref.kind) {
            delete = try HotStatement(db, table.deleteSQL)
            delete.bind(1, id: ref.id)
        } else {
            delete = try HotStatement(db, "DELETE FROM other_records WHERE kind = ? AND id = ?")
            delete.bind(1, Int64(ref.kind.rawValue))
            delete.bind(2, id: ref.id)
        }
        try delete.execute()
        erasedRows += db.changesCount
        let insert = try HotStatement(db, "INSERT INTO purged (id, kind) VALUES (?, ?) ON CONFLICT DO NOTHING")
        insert.bind(1, id: ref.id)
        insert.bind(2, Int64(ref.kind.rawValue))
        try insert.execute()
        if db.changesCount > 0 { newlyPurged = true }
        holdsPurges = true
        purgedRefs.insert(ref)
        for span in states[index].operations.spans {
            elisions[span.replica, default: []].append(span.first...span.last)
        }
    }

    /// Rewrites every log row that holds a queued operation, each once, with the operations of
    /// purged records elided (`Op.elided`): their ids, timestamps and records stay, so the log
    /// still covers them; their content goes.
    private mutating func elideQueued() throws {
        defer { elisions.removeAll() }
        var keys: [(replica: ReplicaID, first: UInt64)] = []
        for (replica, spans) in elisions {
            for span in spans {
                keys += try logRows(of: replica, overlapping: span).map { (replica, $0) }
            }
        }
        if newlyPurged {
            // Rows a merge logged and has not applied yet may hold operations of a record purged
            // now, which its spans do not list yet (later ones are logged elided). Not the rows of
            // the merge this context applies: each record's operations of it are folded into its
            // state whole, so its spans list them. (Decoding them all at each flush made a merge
            // of many purged records take seconds more.)
            newlyPurged = false
            let applying = Set(try applyingRows.map { OperationID(replica: try directory.id(at: $0.replica), seq: UInt64(bitPattern: $0.firstSeq)) })
            for row in try PendingRow.fetchAll(db) {
                let key = (replica: try directory.id(at: row.replica), first: UInt64(bitPattern: row.firstSeq))
                if !applying.contains(OperationID(replica: key.replica, seq: key.first)) { keys.append(key) }
            }
        }
        var rewritten = Set<OperationID>()
        for key in keys where rewritten.insert(OperationID(replica: key.replica, seq: key.first)).inserted {
            try elide(row: key)
        }
    }

    /// The first seqs of `replica`'s log rows that hold a seq of `range`: the row that starts at
    /// or below it, then those that start in it (the log's key is (replica, first_seq)).
    private mutating func logRows(of replica: ReplicaID, overlapping range: ClosedRange<UInt64>) throws -> [UInt64] {
        guard let index = directory.indexByID[replica] else { return [] }
        var firsts: [UInt64] = []
        let below = try HotStatement(
            db, "SELECT first_seq, last_seq FROM log WHERE replica = ? AND first_seq <= ? ORDER BY first_seq DESC LIMIT 1")
        below.bind(1, index)
        below.bind(2, Int64(range.lowerBound))
        if try below.step(), UInt64(bitPattern: below.int64(1)) >= range.lowerBound {
            firsts.append(UInt64(bitPattern: below.int64(0)))
        }
        let within = try HotStatement(db, "SELECT first_seq FROM log WHERE replica = ? AND first_seq > ? AND first_seq <= ?")
        within.bind(1, index)
        within.bind(2, Int64(range.lowerBound))
        within.bind(3, Int64(range.upperBound))
        while try within.step() { firsts.append(UInt64(bitPattern: within.int64(0))) }
        return firsts
    }

    /// The operations held in full of the log row of `replica` that starts at `first`, the row's
    /// last seq, and its bytes; nil when there is no such row.
    private mutating func logRow(of replica: ReplicaID, from first: UInt64) throws -> (operations: [Op], last: UInt64, bytes: [UInt8])? {
        let select = try HotStatement(db, "SELECT last_seq, ops FROM log WHERE replica = ? AND first_seq = ?")
        select.bind(1, try directory.index(of: replica, db))
        select.bind(2, Int64(first))
        guard try select.step() else { return nil }
        let last = UInt64(bitPattern: select.int64(0))
        let bytes = select.withBlob(1) { [UInt8]($0) }
        guard last >= first, last - first < UInt64(Int.max) else {
            throw ConcordError(.corrupt, "a log row of replica \(replica) has an impossible range")
        }
        do {
            return (try OperationCodec.decode(bytes, author: replica, firstSeq: first, count: Int(last - first + 1)), last, bytes)
        } catch {
            throw ConcordError(.corrupt, "a log chunk of replica \(replica) is damaged (\(error))")
        }
    }

    /// Writes `operations` as the log row of `replica` that covers `first...last`: a seq of the
    /// range that none of them has is compacted; `max_ts` is the greatest of their timestamps.
    private mutating func rewriteLogRow(of replica: ReplicaID, _ first: UInt64, _ last: UInt64, _ operations: [Op], capacity: Int) throws {
        var writer = ByteWriter(capacity: capacity)
        OperationCodec.encode(operations, covering: first...last, into: &writer)
        let update = try HotStatement(db, "UPDATE log SET ops = ?, max_ts = ? WHERE replica = ? AND first_seq = ?")
        update.bind(1, bytes: writer.bytes)
        update.bind(2, Int64(bitPattern: (operations.map(\.timestamp).max() ?? .zero).rawValue))
        update.bind(3, try directory.index(of: replica, db))
        update.bind(4, Int64(first))
        try update.execute()
        if comparedChunk?.replica == replica { comparedChunk = nil }
        erasedRows += 1
    }

    /// Rewrites one log row with the operations of purged records elided, if it holds any
    /// with content.
    private mutating func elide(row key: (replica: ReplicaID, first: UInt64)) throws {
        guard var (operations, last, bytes) = try logRow(of: key.replica, from: key.first) else { return }
        var changed = false
        for position in operations.indices where !operations[position].purges && purgedRefs.contains(operations[position].record) {
            operations[position] = operations[position].elided
            changed = true
        }
        guard changed else { return }
        try rewriteLogRow(of: key.replica, key.first, last, operations, capacity: bytes.count)
    }

    // MARK: Compacted seqs

    /// Holds the seqs of `seqs` that the store does not, as log rows of compacted seqs (SPEC.md
    /// §5.8, §9), if the store holds every seq `base` covers; otherwise holds none of them.
    /// - Returns: how many seqs it took.
    ///
    /// A seq of `seqs` at or below `dropped` (where its sender knew removes were dropped as
    /// stable) that the store holds in full is the sender's word that the operations it keeps
    /// give that one's effect: the copy goes, and its record is folded again from what is left,
    /// so that an add a stable remove named goes with it (SPEC.md §5.8, "Stable removes"). Copies
    /// of other seqs stay, for the store's own compactions.
    ///
    /// The store joins `dropped` into its own (`meta.dropped_stable_through`) in the same
    /// transaction: a store that holds a remove dropped as stable compacted knows where removes
    /// were dropped, and claims every compacted seq to a store behind it.
    mutating func holdCompacted(_ seqs: SeqRanges, ifHolding base: VersionVector, droppingCopiesThrough dropped: VersionVector = VersionVector()) throws -> UInt64 {
        guard try holds(base) else { return 0 }
        try ConcordStore.joinDroppedStableThrough(dropped, db)
        let copies = try heldSeqs(of: seqs, through: dropped)
        if !copies.isEmpty, try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM pending_merge)")! {
            // Another process's merge may apply, from operations it read already, a copy this
            // would drop: the claims wait for the next exchange.
            throw ConcordError(.local, "another process's merge is under way, and these compacted seqs would drop copies it may apply; sync again once it is done")
        }
        var taken: UInt64 = 0
        for (author, range) in seqs.runs {
            try switchAuthor(to: author)
            taken += try appendCompacted(range)
        }
        if !copies.isEmpty { try dropCopies(of: copies) }
        return taken
    }

    /// The seqs of `seqs` at or below `vector` that the store holds.
    mutating func heldSeqs(of seqs: SeqRanges, through vector: VersionVector) throws -> SeqRanges {
        var held: [(replica: ReplicaID, seqs: ClosedRange<UInt64>)] = []
        for (author, range) in seqs.runs where range.lowerBound <= vector[author] {
            let clipped = range.lowerBound...min(range.upperBound, vector[author])
            try switchAuthor(to: author)
            var next = clipped.lowerBound
            for gap in currentHeld.missing(in: clipped) {
                if gap.lowerBound > next { held.append((author, next...(gap.lowerBound - 1))) }
                next = gap.upperBound + 1
            }
            if next <= clipped.upperBound { held.append((author, next...clipped.upperBound)) }
        }
        return SeqRanges(held)
    }

    /// Drops the copies held in full of the operations of `claimed` (but those of purged records,
    /// whose elided copies keep no content) and folds each of their records again from the
    /// operations of it left in full: the log rows keep their seqs, compacted.
    mutating func dropCopies(of claimed: SeqRanges) throws {
        parkCurrentAuthor()
        for (replica, chunk) in openChunks { try writeChunk(replica, chunk) }
        openChunks.removeAll(keepingCapacity: true)
        var dropped: [RecordRef: Set<OperationID>] = [:]
        for (author, range) in claimed.runs {
            for first in try logRows(of: author, overlapping: range) {
                guard let (operations, last, bytes) = try logRow(of: author, from: first) else { continue }
                var kept: [Op] = []
                for operation in operations {
                    if range.contains(operation.id.seq), operation.action != .elided, !operation.purges, try !isPurged(operation.record) {
                        dropped[operation.record, default: []].insert(operation.id)
                    } else {
                        kept.append(operation)
                    }
                }
                guard kept.count < operations.count else { continue }
                compactedTaken += UInt64(operations.count - kept.count)
                try rewriteLogRow(of: author, first, last, kept, capacity: bytes.count)
            }
        }
        for (ref, ids) in dropped {
            guard let state = try state(of: ref) else { continue }
            var refolded = RecordState(ref: ref)
            for span in state.operations.spans {
                for first in try logRows(of: span.replica, overlapping: span.first...span.last) {
                    guard let (operations, _, _) = try logRow(of: span.replica, from: first) else { continue }
                    for operation in operations
                    where operation.record == ref && (span.first...span.last).contains(operation.id.seq) && !ids.contains(operation.id) {
                        refolded.apply(operation)
                    }
                }
            }
            let index = stateIndex[ref]!
            states[index] = refolded
            encodedRows[index] = nil
        }
    }

    /// Whether the store holds every seq `base` covers.
    mutating func holds(_ base: VersionVector) throws -> Bool {
        for (replica, seq) in base.entries where seq > 0 {
            try switchAuthor(to: replica)
            guard currentHeld.contiguous >= seq else { return false }
        }
        return true
    }

    /// Holds the stretch of `seqs` that ends just before `id` compacted, in the log chunk that
    /// `id` then continues, and takes it out of `seqs`: a merge logs an export's compacted seqs
    /// among its operations, in their order, so that its log rows stay as long as the sender's.
    /// - Returns: how many seqs it took.
    mutating func holdCompacted(before id: OperationID, from seqs: inout CompactedToLog) throws -> UInt64 {
        guard let stretch = seqs.take(before: id) else { return 0 }
        try switchAuthor(to: id.replica)
        return try appendCompacted(stretch)
    }

    /// Appends the seqs of `range` that the store does not hold to the current author's log
    /// chunks, compacted.
    private mutating func appendCompacted(_ range: ClosedRange<UInt64>) throws -> UInt64 {
        var taken: UInt64 = 0
        for gap in currentHeld.missing(in: range) {
            let first = OperationID(replica: currentAuthor!, seq: gap.lowerBound)
            if let chunk = currentChunk, !chunk.continues(with: first) {
                try writeChunk(first.replica, chunk)
                currentChunk = nil
            }
            if currentChunk == nil { currentChunk = OpenChunk(firstSeq: gap.lowerBound) }
            currentChunk!.appendCompacted(gap)
            currentHeld.insert(gap)
            taken += gap.upperBound - gap.lowerBound + 1
        }
        compactedTaken += taken
        return taken
    }

    /// The compacted seqs this context took: `meta.compacted` grows by them at the flush.
    private var compactedTaken: UInt64 = 0

    /// Writes one log chunk: operations of one author with consecutive seqs.
    private mutating func writeChunk(_ replica: ReplicaID, _ chunk: OpenChunk) throws {
        let statement = try HotStatement(db, "INSERT INTO log (replica, first_seq, last_seq, max_ts, ops) VALUES (?, ?, ?, ?, ?)")
        statement.bind(1, try directory.index(of: replica, db))
        statement.bind(2, Int64(chunk.firstSeq))
        statement.bind(3, Int64(chunk.firstSeq + UInt64(chunk.count - 1)))
        statement.bind(4, Int64(bitPattern: chunk.maxTimestamp.rawValue))
        statement.bind(5, bytes: chunk.writer.bytes)
        try statement.execute()
        writtenChunks.append(PendingRow(replica: try directory.index(of: replica, db), firstSeq: Int64(chunk.firstSeq)))
    }

    /// The most operations one log chunk holds.
    static let maxChunkOperations = 4096
}

/// Operations of one author with consecutive seqs, encoded for the log as they are appended
/// (SPEC.md, "Op runs"), so the context keeps bytes rather than operations.
private struct OpenChunk {
    let firstSeq: UInt64
    /// The seqs it covers, compacted ones included.
    private(set) var count = 0
    /// The operations it holds: at most `WriteContext.maxChunkOperations`.
    private var operations = 0
    private(set) var maxTimestamp = Timestamp.zero
    private(set) var writer = ByteWriter(capacity: 4096)
    private var encoder = OperationCodec.RunEncoder()

    init(firstSeq: UInt64) {
        self.firstSeq = firstSeq
    }

    /// Whether the operation `id` can be the chunk's next one.
    func continues(with id: OperationID) -> Bool {
        id.seq == firstSeq &+ UInt64(count) && operations < WriteContext.maxChunkOperations
    }

    mutating func append(_ operation: Op) {
        encoder.append(operation, into: &writer)
        maxTimestamp = max(maxTimestamp, operation.timestamp)
        count += 1
        operations += 1
    }

    /// Appends `seqs`, the next ones, compacted (SPEC.md §5.8).
    mutating func appendCompacted(_ seqs: ClosedRange<UInt64>) {
        encoder.appendCompacted(seqs.upperBound - seqs.lowerBound + 1, into: &writer)
        count += Int(seqs.upperBound - seqs.lowerBound + 1)
    }

    /// Appends an operation kept encoded, and returns its timestamp.
    mutating func append(_ operation: KeptOperation) throws -> Timestamp {
        let timestamp: Timestamp
        do {
            timestamp = try encoder.append(encodedAlone: operation.bytes, in: operation.range, into: &writer)
        } catch {
            throw OperationSorter.damaged(error)
        }
        maxTimestamp = max(maxTimestamp, timestamp)
        count += 1
        operations += 1
        return timestamp
    }
}

/// Compacted seqs to log among a merge's operations (SPEC.md §9, "Taking compacted seqs"): per
/// author, disjoint ranges in ascending order, each taken (whole, or the part below an operation)
/// once. Found by binary search, since operations may come in any order.
struct CompactedToLog {
    private var ranges: [ReplicaID: [ClosedRange<UInt64>]]
    private var taken: [ReplicaID: [Bool]]
    /// Whether there were any: a merge without them (the common case) asks nothing per operation.
    let hadAny: Bool

    init(_ seqs: SeqRanges) {
        hadAny = !seqs.isEmpty
        var ranges: [ReplicaID: [ClosedRange<UInt64>]] = [:]
        for replica in seqs.replicas { ranges[replica] = seqs.ranges(of: replica) }
        self.ranges = ranges
        taken = ranges.mapValues { Array(repeating: false, count: $0.count) }
    }

    /// Whether nothing is left to take.
    var isEmpty: Bool { taken.values.allSatisfy { $0.allSatisfy { $0 } } }

    /// Takes the seqs of the range that holds `id.seq - 1`, up to it: what the log holds just
    /// before the operation `id`.
    mutating func take(before id: OperationID) -> ClosedRange<UInt64>? {
        guard id.seq > 1, let list = ranges[id.replica] else { return nil }
        // The last range that starts at or below seq - 1.
        var low = 0
        var high = list.count
        while low < high {
            let middle = (low + high) / 2
            if list[middle].lowerBound <= id.seq - 1 { low = middle + 1 } else { high = middle }
        }
        let index = low - 1
        guard index >= 0, !taken[id.replica]![index], list[index].contains(id.seq - 1) else { return nil }
        let range = list[index]
        if range.upperBound >= id.seq {
            ranges[id.replica]![index] = id.seq...range.upperBound
        } else {
            taken[id.replica]![index] = true
        }
        return range.lowerBound...(id.seq - 1)
    }

    /// The ranges not taken.
    var rest: SeqRanges {
        SeqRanges(ranges.flatMap { replica, list in list.indices.filter { !taken[replica]![$0] }.map { (replica, list[$0]) } })
    }
}
