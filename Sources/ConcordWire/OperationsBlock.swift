import ConcordCore

/// The payload of a bundle's operations block (SPEC.md §13): a replica table, then runs of
/// operations (§8.3). Peer sessions carry the same payload in their batches (§15.6).
package enum OperationsBlock {
    /// Decodes a whole payload, calling `body` with each operation in order, and returns how many
    /// there were. Every operation is validated (§4.3); a payload that breaks any rule of §13 is
    /// refused with a `DecodeError` (whatever `body` throws is passed on as it is).
    ///
    /// - Parameter maxOperations: refuse a payload that holds more operations than this; the runs'
    ///   declared counts are checked before each run is decoded.
    /// - Complexity: O(*n*) in the payload's size; memory is bounded by one run's bytes.
    @discardableResult
    package static func decode(
        _ payload: [UInt8], maxOperations: Int = .max, _ body: (Op) throws -> Void
    ) throws -> Int {
        var cursor = try Cursor(payload, maxOperations: maxOperations)
        while let operation = try cursor.next() { try body(operation) }
        return cursor.operations
    }

    /// Reads a payload's operations one at a time, in order, with every check of `decode`; the
    /// payload's end is checked when `next()` first returns nil.
    package struct Cursor {
        private var reader: ByteReader
        private let replicas: [ReplicaID]
        private let maxOperations: Int
        private var runsLeft: UInt64
        /// The open run: its bytes, and its decoder (nil when no run is open).
        private var runReader = ByteReader([])
        private var runDecoder: OperationCodec.RunDecoder?
        /// The operations returned so far.
        package private(set) var operations = 0
        /// The ids of the runs opened so far (all of the block's, once `next()` returned nil), in
        /// the block's order.
        package private(set) var runs: [(replica: ReplicaID, seqs: ClosedRange<UInt64>)] = []
        /// The compacted seqs read so far (SPEC.md §5.8), in the block's order.
        package private(set) var compacted: [(replica: ReplicaID, seqs: ClosedRange<UInt64>)] = []

        package init(_ payload: [UInt8], maxOperations: Int = .max) throws(DecodeError) {
            reader = ByteReader(payload)
            let replicaCount = try reader.varint()
            guard replicaCount >= 1, replicaCount <= UInt64(reader.remaining / 16) else {
                throw .malformed("a replica table of \(replicaCount) entries")
            }
            var replicas: [ReplicaID] = []
            for _ in 0..<replicaCount { replicas.append(try reader.identifier()) }
            self.replicas = replicas
            runsLeft = try reader.varint()
            guard runsLeft >= 1, runsLeft <= UInt64(reader.remaining / 4) else { throw .malformed("\(runsLeft) runs") }
            self.maxOperations = maxOperations
        }

        /// The next operation, or nil after the last. Compacted seqs (SPEC.md §5.8) are stepped
        /// over: `runs` covers them.
        package mutating func next() throws(DecodeError) -> Op? {
            while true {
                if runDecoder != nil {
                    if !runDecoder!.isAtEnd {
                        let seq = runDecoder!.nextSeq
                        guard let operation = try runDecoder!.next(from: &runReader) else {
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
            let length = try reader.varint()
            // Compacted seqs take two bytes or more, however many they are.
            guard count >= 1, length >= 1, length <= UInt64(reader.remaining) else {
                throw .malformed("a run of \(count) operations in \(length) bytes")
            }
            guard firstSeq >= 1, count - 1 <= UInt64.max - firstSeq else {
                throw .malformed("a run of \(count) operations cannot start at seq \(firstSeq)")
            }
            let bytes = Array(try reader.bytes(Int(length)))
            runReader = ByteReader(bytes)
            runDecoder = OperationCodec.RunDecoder(author: replicas[Int(author)], firstSeq: firstSeq, count: count)
            runs.append((replicas[Int(author)], firstSeq...firstSeq + (count - 1)))
        }
    }

    /// Builds one payload from operations appended one at a time, grouping each author's
    /// consecutive seqs into runs.
    package struct Encoder: Sendable {
        private var replicaIndex: [ReplicaID: Int] = [:]
        private var replicas: [ReplicaID] = []
        private var runs: [PendingRun] = []

        /// How many operations the open payload holds.
        package private(set) var operationCount = 0
        /// The bytes its operations take in their runs (§8.3), exactly: what a bundle writer cuts
        /// its blocks by (SPEC.md §13), so that the same operations always make the same blocks.
        package private(set) var operationBytes = 0
        /// About how many bytes the payload will take once finished (exact for the runs'
        /// operation bytes and the replica table, an estimate for the run headers).
        package private(set) var estimatedBytes = 0

        package init() {}

        /// Whether nothing was appended: no operation and no compacted seq.
        package var isEmpty: Bool { runs.isEmpty }

        /// Adds an operation. Operations of one author should come in ascending seq order for a
        /// compact payload (any order is valid).
        package mutating func append(_ operation: Op) {
            let index = self.index(of: operation.id.replica)
            let bytes: Int
            if let last = runs.indices.last, runs[last].continues(author: index, seq: operation.id.seq) {
                bytes = runs[last].append(operation)
            } else {
                var run = PendingRun(author: index, firstSeq: operation.id.seq)
                bytes = run.append(operation)
                estimatedBytes += 24
                runs.append(run)
            }
            operationBytes += bytes
            estimatedBytes += bytes
            operationCount += 1
        }

        /// Adds compacted seqs of `author` (SPEC.md §5.8), in the same order as operations.
        /// - Returns: how many bytes they took.
        @discardableResult
        package mutating func appendCompacted(_ seqs: ClosedRange<UInt64>, of author: ReplicaID) -> Int {
            let index = self.index(of: author)
            let count = seqs.upperBound - seqs.lowerBound + 1
            let bytes: Int
            if let last = runs.indices.last, runs[last].continues(author: index, seq: seqs.lowerBound) {
                bytes = runs[last].appendCompacted(count)
            } else {
                var run = PendingRun(author: index, firstSeq: seqs.lowerBound)
                bytes = run.appendCompacted(count)
                estimatedBytes += 24
                runs.append(run)
            }
            operationBytes += bytes
            estimatedBytes += bytes
            return bytes
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
            guard !runs.isEmpty else { return [] }
            var payload = ByteWriter(capacity: estimatedBytes + 64)
            payload.varint(UInt64(replicas.count))
            for replica in replicas { payload.identifier(replica) }
            payload.varint(UInt64(runs.count))
            for run in runs {
                payload.varint(UInt64(run.author))
                payload.varint(run.firstSeq)
                payload.varint(run.count)
                payload.varint(UInt64(run.bytes.bytes.count))
                payload.bytes(run.bytes.bytes)
            }
            replicaIndex.removeAll(keepingCapacity: true)
            replicas.removeAll(keepingCapacity: true)
            runs.removeAll(keepingCapacity: true)
            estimatedBytes = 0
            operationBytes = 0
            operationCount = 0
            return payload.bytes
        }

        /// A run being encoded into the open payload.
        private struct PendingRun: Sendable {
            let author: Int
            let firstSeq: UInt64
            /// How many seqs it covers, compacted ones included.
            var count: UInt64 = 0
            var bytes = ByteWriter()
            var encoder = OperationCodec.RunEncoder()

            init(author: Int, firstSeq: UInt64) {
                self.author = author
                self.firstSeq = firstSeq
            }

            func continues(author: Int, seq: UInt64) -> Bool {
                self.author == author && firstSeq &+ count == seq && seq != 0
            }

            /// Appends an operation; returns how many bytes it took.
            mutating func append(_ operation: Op) -> Int {
                let before = bytes.bytes.count
                encoder.append(operation, into: &bytes)
                count += 1
                return bytes.bytes.count - before
            }

            /// Appends `count` compacted seqs; returns how many bytes they took.
            mutating func appendCompacted(_ count: UInt64) -> Int {
                let before = bytes.bytes.count
                encoder.appendCompacted(count, into: &bytes)
                self.count += count
                return bytes.bytes.count - before
            }
        }
    }
}
