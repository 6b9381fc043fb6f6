import ConcordCore

/// The payload of a bundle's operations block (SPEC.md §13): a replica table, then runs of
/// operations (§8.3), each run's bytes after its header (rows) or the parts of every run's
/// entries in columns after the runs' headers (bundle formats 6 and 7). Peer sessions carry the
/// payload in rows in their batches (§15.6).
package enum OperationsBlock {
    /// How a payload lays out its runs' entries.
    package enum Layout: Sendable {
        /// Each run's header, then its bytes (§8.3): bundle formats 1 to 5, and peer batches.
        case rows
        /// Every run's header, then the entries' parts in columns: bundle formats 6 and 7, which
        /// differ in which records a block names by number (`OperationColumns.Reach`).
        case columns
    }

    /// Decodes a whole payload, calling `body` with each operation in order, and returns how many
    /// there were. Every operation is validated (§4.3); a payload that breaks any rule of §13 is
    /// refused with a `DecodeError` (whatever `body` throws is passed on as it is). A payload in
    /// columns is read with a record table of its own, as a block of format 6 (a block of format 7
    /// needs its bundle's: `Cursor`).
    ///
    /// - Parameter maxOperations: refuse a payload that holds more operations than this; the runs'
    ///   declared counts are checked before each run is decoded.
    /// - Complexity: O(*n*) in the payload's size; memory is bounded by one run's bytes.
    @discardableResult
    package static func decode(
        _ payload: [UInt8], layout: Layout = .rows, maxOperations: Int = .max, _ body: (Op) throws -> Void
    ) throws -> Int {
        var cursor = try Cursor(payload, layout: layout, maxOperations: maxOperations)
        while let operation = try cursor.next() { try body(operation) }
        return cursor.operations
    }

    /// Reads a payload's operations one at a time, in order, with every check of `decode`; the
    /// payload's end is checked when `next()` first returns nil.
    package struct Cursor {
        /// The payload, from the first run's header; in columns, up to the first column.
        private var reader: ByteReader
        private let replicas: [ReplicaID]
        private let maxOperations: Int
        private var runsLeft: UInt64
        /// The open run's decoder (nil when no run is open), and in rows its bytes.
        private var runDecoder: OperationCodec.RunDecoder?
        private var runReader = ByteReader([])
        /// The columns (nil in rows).
        private var columns: OperationColumns.Reader?
        /// The operations returned so far.
        package private(set) var operations = 0
        /// The ids of the runs opened so far (all of the block's, once `next()` returned nil), in
        /// the block's order.
        package private(set) var runs: [(replica: ReplicaID, seqs: ClosedRange<UInt64>)] = []
        /// The compacted seqs read so far (SPEC.md §5.8), in the block's order.
        package private(set) var compacted: [(replica: ReplicaID, seqs: ClosedRange<UInt64>)] = []

        /// - Parameter table: in columns, the record table before the payload: by default an empty
        ///   one of its own, as a block of format 6 has; in format 7, that of the bundle's blocks
        ///   before it.
        package init(
            _ payload: [UInt8], layout: Layout = .rows, table: OperationColumns.RecordsByNumber = .init(reach: .block),
            maxOperations: Int = .max
        ) throws(DecodeError) {
            reader = ByteReader(payload)
            let replicaCount = try reader.varint()
            guard replicaCount >= 1, replicaCount <= UInt64(reader.remaining / 16) else {
                throw .malformed("a replica table of \(replicaCount) entries")
            }
            var replicas: [ReplicaID] = []
            for _ in 0..<replicaCount { replicas.append(try reader.identifier()) }
            self.replicas = replicas
            runsLeft = try reader.varint()
            // A run's header takes 4 bytes or more in rows (with its length), 3 in columns.
            guard runsLeft >= 1, runsLeft <= UInt64(reader.remaining / (layout == .rows ? 4 : 3)) else {
                throw .malformed("\(runsLeft) runs")
            }
            self.maxOperations = maxOperations
            if layout == .columns {
                // The runs' headers come first, the columns after them: find where they start.
                let firstRun = reader.offset
                for _ in 0..<runsLeft {
                    for _ in 0..<3 { _ = try reader.varint() }
                }
                let lastRun = reader.offset
                columns = try OperationColumns.Reader(from: &reader, table: table)
                guard reader.isAtEnd else { throw .malformed("\(reader.remaining) bytes after the last column") }
                reader = ByteReader(payload, range: firstRun..<lastRun)
            }
        }

        /// In columns, the record table as the payload left it: what the next block of a bundle of
        /// format 7 goes on from, once `next()` returned nil.
        package var table: OperationColumns.RecordsByNumber? { columns?.table }

        /// The next operation, or nil after the last. Compacted seqs (SPEC.md §5.8) are stepped
        /// over: `runs` covers them.
        package mutating func next() throws(DecodeError) -> Op? {
            while true {
                if runDecoder != nil {
                    if !runDecoder!.isAtEnd {
                        let seq = runDecoder!.nextSeq
                        let entry = try columns != nil ? runDecoder!.next(from: &columns!) : runDecoder!.next(from: &runReader)
                        guard let operation = entry else {
                            compacted.append((runDecoder!.author, seq...(runDecoder!.nextSeq - 1)))
                            continue
                        }
                        guard operations < maxOperations else { throw .malformed("more than \(maxOperations) operations") }
                        operations += 1
                        return operation
                    }
                    guard runReader.isAtEnd else { throw .malformed("\(runReader.remaining) bytes after the last operation") }
                    runDecoder = nil
                }
                guard runsLeft > 0 else {
                    guard reader.isAtEnd else { throw .malformed("bytes after the last run") }
                    try columns?.checkEnd()
                    return nil
                }
                runsLeft -= 1
                try openRun()
            }
        }

        private mutating func openRun() throws(DecodeError) {
            let author = try reader.varint()
            guard author < UInt64(replicas.count) else { throw .malformed("a run names replica #\(author) of \(replicas.count)") }
            let firstSeq = try reader.varint()
            let count = try reader.varint()
            if columns == nil {
                let length = try reader.varint()
                // Compacted seqs take two bytes or more, however many they are.
                guard count >= 1, length >= 1, length <= UInt64(reader.remaining) else {
                    throw .malformed("a run of \(count) operations in \(length) bytes")
                }
                runReader = ByteReader(Array(try reader.bytes(Int(length))))
            } else {
                guard count >= 1 else { throw .malformed("a run of 0 operations") }
            }
            guard firstSeq >= 1, count - 1 <= UInt64.max - firstSeq else {
                throw .malformed("a run of \(count) operations cannot start at seq \(firstSeq)")
            }
            runDecoder = OperationCodec.RunDecoder(author: replicas[Int(author)], firstSeq: firstSeq, count: count)
            runs.append((replicas[Int(author)], firstSeq...firstSeq + (count - 1)))
        }
    }

    /// An upper bound of the bytes `operation` takes in a run (§8.3) or in columns (§13): its
    /// header, timestamp and record, at most 30 bytes, and its action and predecessors, their
    /// strings and ids at their length and each length or count at 10 bytes.
    package static func sizeBound(_ operation: Op) -> Int {
        var size = 30
        switch operation.action {
        case let .assign(field, value):
            size += 1
            if case .other(let name) = field { size += 10 + name.string.utf8.count }
            if case .string(let text) = value { size += 11 + text.utf8.count } else { size += 11 }
        case let .addTag(tag):
            size += 10 + tag.string.utf8.count
        case let .removeTag(tag, observed):
            size += 20 + tag.string.utf8.count + observed.count * 26
        case .purge, .elided:
            break
        }
        if let predecessors = operation.predecessors { size += 10 + predecessors.entries.count * 26 }
        return size
    }

    /// Whether `operation`'s encoding alone (§8.3: a run of it alone) takes 1 MiB or more: a
    /// writer of columns gives it a block of its own (§13, "Canonical order").
    package static func isLarge(_ operation: Op) -> Bool {
        guard sizeBound(operation) >= largeOperationBytes else { return false }
        var bytes = ByteWriter()
        var encoder = OperationCodec.RunEncoder()
        encoder.append(operation, into: &bytes)
        return bytes.bytes.count >= largeOperationBytes
    }

    /// 1 MiB.
    static let largeOperationBytes = 1 << 20

    /// Builds one payload from operations appended one at a time, grouping each author's
    /// consecutive seqs into runs.
    package struct Encoder: Sendable {
        private let layout: Layout
        private var replicaIndex: [ReplicaID: Int] = [:]
        private var replicas: [ReplicaID] = []
        private var runs: [PendingRun] = []
        /// The entries' parts, in columns.
        private var columns: OperationColumns.Writer

        /// How many operations the open payload holds.
        package private(set) var operationCount = 0
        /// The bytes a bundle writer cuts its blocks by (SPEC.md §13, "Canonical order"): in rows,
        /// the entries' bytes; in columns, the entries' bytes, and 30 for each run and 16 for each
        /// replica of the table, which bound their headers.
        package var blockBytes: Int {
            layout == .rows ? operationBytes : operationBytes + 30 * runs.count + 16 * replicas.count
        }
        /// The bytes its entries take in their runs (§8.3) or in the columns, exactly: what a
        /// bundle writer cuts its blocks by (SPEC.md §13), so that the same operations always
        /// make the same blocks.
        package private(set) var operationBytes = 0
        /// About how many bytes the payload will take once finished (exact for the entries and the
        /// replica table, an estimate for the run headers).
        package private(set) var estimatedBytes = 0

        /// - Parameter reach: in columns, which records a payload names by number: its own (a
        ///   block of format 6), or also those of the payloads before it (format 7, each payload
        ///   then the next block of one bundle).
        package init(layout: Layout = .rows, reach: OperationColumns.Reach = .block) {
            self.layout = layout
            columns = OperationColumns.Writer(reach: reach)
        }

        /// Whether nothing was appended: no operation and no compacted seq.
        package var isEmpty: Bool { runs.isEmpty }

        /// Adds an operation. Operations of one author should come in ascending seq order for a
        /// compact payload (any order is valid).
        package mutating func append(_ operation: Op) {
            let run = openRun(author: operation.id.replica, seq: operation.id.seq)
            count { $0.runs[run].append(operation, columns: &$0.columns) }
            operationCount += 1
        }

        /// Adds compacted seqs of `author` (SPEC.md §5.8), in the same order as operations.
        package mutating func appendCompacted(_ seqs: ClosedRange<UInt64>, of author: ReplicaID) {
            let run = openRun(author: author, seq: seqs.lowerBound)
            count { $0.runs[run].appendCompacted(seqs.upperBound - seqs.lowerBound + 1, columns: &$0.columns) }
        }

        /// The index of the run that `seq` of `author` continues, a new one if none does.
        private mutating func openRun(author: ReplicaID, seq: UInt64) -> Int {
            let index = self.index(of: author)
            if let last = runs.indices.last, runs[last].continues(author: index, seq: seq) { return last }
            runs.append(PendingRun(author: index, firstSeq: seq, bytes: layout == .rows ? ByteWriter() : nil))
            estimatedBytes += 24
            return runs.count - 1
        }

        /// Runs `append`, which adds one entry, and counts the bytes it took.
        private mutating func count(_ append: (inout Self) -> Void) {
            let before = entryBytes
            append(&self)
            operationBytes += entryBytes - before
            estimatedBytes += entryBytes - before
        }

        /// The bytes every entry appended so far takes: in the runs' bytes or in the columns.
        private var entryBytes: Int {
            layout == .rows ? runs.last?.bytes?.bytes.count ?? 0 : columns.bytes
        }

        /// The index of `author` in the replica table, added if it is not there yet.
        private mutating func index(of author: ReplicaID) -> Int {
            if let known = replicaIndex[author] { return known }
            replicaIndex[author] = replicas.count
            replicas.append(author)
            estimatedBytes += 16
            return replicas.count - 1
        }

        /// Returns the payload of everything appended since the last call, and empties the encoder.
        /// An empty encoder gives an empty array (not a valid payload: one holds at least one run).
        package mutating func finish() -> [UInt8] {
            let parts = finishParts()
            return parts.count == 1 ? parts[0] : Array(parts.joined())
        }

        /// `finish()`'s payload as parts to be written one after the other: in columns, the
        /// tables, then each column's length and bytes, none copied (an empty encoder gives none).
        package mutating func finishParts() -> [[UInt8]] {
            guard !runs.isEmpty else { return [] }
            var head = ByteWriter(capacity: layout == .rows ? estimatedBytes + 64 : 16 * replicas.count + 24 * runs.count + 8)
            head.varint(UInt64(replicas.count))
            for replica in replicas { head.identifier(replica) }
            head.varint(UInt64(runs.count))
            for run in runs {
                head.varint(UInt64(run.author))
                head.varint(run.firstSeq)
                head.varint(run.count)
                if let bytes = run.bytes?.bytes {
                    head.varint(UInt64(bytes.count))
                    head.bytes(bytes)
                }
            }
            let parts = layout == .columns ? [head.bytes] + columns.finish() : [head.bytes]
            replicaIndex.removeAll(keepingCapacity: true)
            replicas.removeAll(keepingCapacity: true)
            runs.removeAll(keepingCapacity: true)
            estimatedBytes = 0
            operationBytes = 0
            operationCount = 0
            return parts
        }

        /// A run being encoded into the open payload.
        private struct PendingRun: Sendable {
            let author: Int
            let firstSeq: UInt64
            /// How many seqs it covers, compacted ones included.
            var count: UInt64 = 0
            /// Its bytes, in rows; nil in columns.
            var bytes: ByteWriter?
            var encoder = OperationCodec.RunEncoder()

            init(author: Int, firstSeq: UInt64, bytes: ByteWriter?) {
                self.author = author
                self.firstSeq = firstSeq
                self.bytes = bytes
            }

            func continues(author: Int, seq: UInt64) -> Bool {
                self.author == author && firstSeq &+ count == seq && seq != 0
            }

            /// Encodes `operation` into its bytes in rows, into `columns` otherwise.
            mutating func append(_ operation: Op, columns: inout OperationColumns.Writer) {
                if bytes != nil { encoder.append(operation, into: &bytes!) } else { encoder.append(operation, into: &columns) }
                count += 1
            }

            /// Encodes `count` compacted seqs as `append` encodes an operation.
            mutating func appendCompacted(_ count: UInt64, columns: inout OperationColumns.Writer) {
                if bytes != nil {
                    encoder.appendCompacted(count, into: &bytes!)
                } else {
                    encoder.appendCompacted(count, into: &columns)
                }
                self.count += count
            }
        }
    }
}
