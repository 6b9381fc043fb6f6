/// Encodes and decodes a *run*: operations of one author with contiguous sequence numbers, in
/// sequence order (SPEC.md, "Op runs"). The author and the first sequence number travel
/// beside the run, so they are not repeated per operation.
public enum OperationCodec {
    static let actionMask: UInt8 = 0x03
    static let sameRecordFlag: UInt8 = 0x04
    /// An assign whose predecessors follow its value (bundle format 2 on, SPEC.md §8.3).
    static let predecessorsFlag: UInt8 = 0x08
    /// An elided operation: its record was purged, and nothing follows the record (bundle format
    /// 3 on, SPEC.md §8.3). Its action bits are 0.
    package static let elidedFlag: UInt8 = 0x10
    /// Compacted seqs (SPEC.md §5.8): the header alone, then how many seqs of the run follow
    /// without their operations.
    static let compactedHeader: UInt8 = 0x20
    static let reservedBits: UInt8 = 0xC0
    /// The action bits of a purge, which has no payload.
    static let purgeAction: UInt8 = 3

    /// Checks the bits of an operation's header that no operation may combine: reserved bits,
    /// predecessors on anything but an assign, an elided operation with an action, and compacted
    /// seqs with any other bit.
    static func checkFlags(_ header: UInt8) throws(DecodeError) {
        guard header & reservedBits == 0 else {
            throw .malformed("operation header 0x\(String(header, radix: 16)) has reserved bits set")
        }
        guard header & compactedHeader == 0 || header == compactedHeader else {
            throw .malformed("compacted seqs with other header bits set")
        }
        guard header & predecessorsFlag == 0 || header & (actionMask | elidedFlag) == 0 else {
            throw .malformed("an operation other than an assign with the predecessors bit set")
        }
        guard header & elidedFlag == 0 || header & actionMask == 0 else {
            throw .malformed("an elided operation with an action")
        }
    }

    /// Whether an operation with this (checked) header ends with its record: a purge or an
    /// elided operation, which carry nothing after it.
    static func endsWithRecord(_ header: UInt8) -> Bool {
        header & elidedFlag != 0 || header & actionMask == purgeAction
    }

    /// Appends `operations` (one author, contiguous ascending seqs) to `writer`.
    public static func encode(_ operations: some Sequence<Op>, into writer: inout ByteWriter) {
        var run = RunEncoder()
        for operation in operations { run.append(operation, into: &writer) }
    }

    /// Appends the run of seqs `seqs` of one author, of which `operations` (ascending) are held in
    /// full: every seq of `seqs` without an operation is written as compacted (SPEC.md §5.8).
    package static func encode(_ operations: some Sequence<Op>, covering seqs: ClosedRange<UInt64>, into writer: inout ByteWriter) {
        var run = RunEncoder()
        var next = seqs.lowerBound
        for operation in operations {
            if operation.id.seq > next { run.appendCompacted(operation.id.seq - next, into: &writer) }
            run.append(operation, into: &writer)
            next = operation.id.seq + 1
        }
        if next <= seqs.upperBound { run.appendCompacted(seqs.upperBound - next + 1, into: &writer) }
    }

    /// Encodes the operations of one run one at a time, carrying the deltas between them.
    public struct RunEncoder: Sendable {
        private var previousTimestamp: UInt64 = 0
        private var previousRecord: RecordRef?

        /// An encoder at the start of a run.
        public init() {}

        /// Appends `count` compacted seqs, the next of the run, to `writer` (SPEC.md §8.3): they
        /// change nothing the next operation's encoding is relative to.
        public mutating func appendCompacted(_ count: UInt64, into writer: inout ByteWriter) {
            precondition(count >= 1, "no compacted seqs")
            writer.byte(OperationCodec.compactedHeader)
            writer.varint(count)
        }

        /// Appends `operation`, the next of the run, to `writer` (SPEC.md §8.3).
        public mutating func append(_ operation: Op, into writer: inout ByteWriter) {
            var header: UInt8
            switch operation.action {
            case .assign: header = 0
            case .addTag: header = 1
            case .removeTag: header = 2
            case .purge: header = purgeAction
            case .elided: header = elidedFlag
            }
            let sameRecord = operation.record == previousRecord
            if sameRecord { header |= sameRecordFlag }
            if case .some = operation.predecessors { header |= predecessorsFlag }
            writer.byte(header)
            writer.signedVarint(Int64(bitPattern: operation.timestamp.rawValue &- previousTimestamp))
            previousTimestamp = operation.timestamp.rawValue
            if !sameRecord {
                writer.byte(operation.record.kind.rawValue)
                writer.identifier(operation.record.id)
                previousRecord = operation.record
            }
            switch operation.action {
            case let .assign(field, value):
                writer.byte(field.code)
                if case .other(let name) = field { writer.string(name.string) }
                encode(value, into: &writer)
                if let predecessors = operation.predecessors {
                    writer.varint(UInt64(predecessors.entries.count))
                    for entry in predecessors.entries {
                        writer.identifier(entry.replica)
                        writer.varint(entry.seq)
                    }
                }
            case let .addTag(tag):
                writer.string(tag.string)
            case let .removeTag(tag, observed):
                writer.string(tag.string)
                writer.varint(UInt64(observed.count))
                for dot in observed {
                    writer.identifier(dot.replica)
                    writer.varint(dot.seq)
                }
            case .purge, .elided:
                break
            }
        }

        /// Appends the operation whose encoding alone (what a fresh encoder writes for it) is
        /// `bytes[range]`, writing what `append` writes for it here without decoding its action:
        /// its header, timestamp and record are re-encoded against the run, and the rest is
        /// copied. For operations kept encoded, which were checked when they were decoded first.
        /// - Returns: its timestamp.
        package mutating func append(
            encodedAlone bytes: [UInt8], in range: Range<Int>, into writer: inout ByteWriter
        ) throws(DecodeError) -> Timestamp {
            guard range.lowerBound >= 0, range.upperBound <= bytes.count else { throw .truncated }
            var reader = ByteReader(bytes, offset: range.lowerBound)
            let header = try reader.byte()
            try OperationCodec.checkFlags(header)
            guard header & OperationCodec.sameRecordFlag == 0, header != OperationCodec.compactedHeader else {
                throw .malformed("operation header 0x\(String(header, radix: 16)) is not one of an operation alone")
            }
            let timestamp = UInt64(bitPattern: try reader.signedVarint())
            let kind = try reader.byte()
            let record = RecordRef(kind: RecordKind(rawValue: kind), id: try reader.identifier())
            // An action takes at least a byte; a purge and an elided operation end with their record.
            guard kind != 0, OperationCodec.endsWithRecord(header) ? reader.offset == range.upperBound : reader.offset < range.upperBound else {
                throw .malformed("an operation alone without its record or action, or with bytes after them")
            }
            let sameRecord = record == previousRecord
            writer.byte(sameRecord ? header | OperationCodec.sameRecordFlag : header)
            writer.signedVarint(Int64(bitPattern: timestamp &- previousTimestamp))
            previousTimestamp = timestamp
            if !sameRecord {
                writer.byte(kind)
                writer.identifier(record.id)
                previousRecord = record
            }
            writer.bytes(bytes[reader.offset..<range.upperBound])
            return Timestamp(rawValue: timestamp)
        }
    }

    /// The record of the operation whose encoding alone is `bytes[range]`, and the encoding alone
    /// of its elided copy (SPEC.md §8.3): its timestamp and record, copied, after the elided
    /// header; a purge stays a purge (`Op.elided`). For operations kept encoded, which were
    /// checked when they were decoded first.
    package static func elided(encodedAlone bytes: [UInt8], in range: Range<Int>) throws(DecodeError) -> (RecordRef, [UInt8]) {
        guard range.lowerBound >= 0, range.upperBound <= bytes.count else { throw .truncated }
        var reader = ByteReader(bytes, offset: range.lowerBound)
        let header = try reader.byte()
        _ = try reader.signedVarint()
        let kind = RecordKind(rawValue: try reader.byte())
        let record = RecordRef(kind: kind, id: try reader.identifier())
        guard reader.offset <= range.upperBound else { throw .truncated }
        if header & elidedFlag == 0, header & actionMask == purgeAction { return (record, Array(bytes[range])) }
        return (record, [elidedFlag] + bytes[(range.lowerBound + 1)..<reader.offset])
    }

    /// Appends `value`: a type byte, then its payload (SPEC.md §8.2).
    public static func encode(_ value: Value, into writer: inout ByteWriter) {
        switch value {
        case .null: writer.byte(0)
        case .bool(false): writer.byte(1)
        case .bool(true): writer.byte(2)
        case .int(let i):
            writer.byte(3)
            writer.signedVarint(i)
        case .string(let s):
            writer.byte(4)
            writer.string(s)
        }
    }

    /// Decodes a whole run of `count` seqs by `author` starting at `firstSeq`, validating each
    /// operation: the operations held in full, ascending, without the compacted seqs.
    public static func decode(
        _ bytes: [UInt8], author: ReplicaID, firstSeq: UInt64, count: Int
    ) throws(DecodeError) -> [Op] {
        guard count >= 0, firstSeq >= 1, count == 0 || UInt64(count - 1) <= UInt64.max - firstSeq else {
            throw .malformed("a run of \(count) operations cannot start at seq \(firstSeq)")
        }
        var reader = ByteReader(bytes)
        var run = RunDecoder(author: author, firstSeq: firstSeq, count: UInt64(count))
        var result: [Op] = []
        // `count` is untrusted: every operation takes at least one byte, so reserve no more than that.
        result.reserveCapacity(min(count, bytes.count))
        while !run.isAtEnd {
            if let operation = try run.next(from: &reader) { result.append(operation) }
        }
        guard reader.isAtEnd else { throw .malformed("\(reader.remaining) bytes after the last operation") }
        return result
    }

    /// Decodes the operations of one run one at a time, carrying the deltas between them.
    public struct RunDecoder {
        /// The run's author: every operation decoded gets its id.
        public let author: ReplicaID
        /// The seq the next operation decoded gets.
        public private(set) var nextSeq: UInt64
        /// How many seqs of the run are left to read, past which compacted seqs may not reach.
        private var seqsLeft: UInt64
        private var previousTimestamp: UInt64 = 0
        private var previousRecord: RecordRef?

        /// A decoder at the start of a run of `count` seqs by `author`, the first `firstSeq`
        /// (without a count: the run ends where its reader says).
        public init(author: ReplicaID, firstSeq: UInt64, count: UInt64? = nil) {
            self.author = author
            nextSeq = firstSeq
            seqsLeft = count ?? .max
        }

        /// Whether every seq of the run (given its count) was read.
        public var isAtEnd: Bool { seqsLeft == 0 }

        /// Decodes the next entry of the run from `reader`: an operation, validated (SPEC.md
        /// §4.3; an invalid one throws `.malformed`), or nil for compacted seqs, which it steps
        /// over (§5.8).
        public mutating func next(from reader: inout ByteReader) throws(DecodeError) -> Op? {
            if try skipCompacted(from: &reader) { return nil }
            let (header, timestamp, record) = try start(from: &reader)
            return try rest(header: header, timestamp: timestamp, record: record, from: &reader)
        }

        /// Reads compacted seqs if they come next, and says whether they did.
        private mutating func skipCompacted(from reader: inout ByteReader) throws(DecodeError) -> Bool {
            guard reader.peek() == OperationCodec.compactedHeader else { return false }
            _ = try reader.byte()
            let count = try reader.varint()
            guard count >= 1 else { throw .malformed("compacted seqs of count 0") }
            guard count <= seqsLeft else { throw .malformed("compacted seqs past the end of their run") }
            guard nextSeq <= Op.maxSeq, count - 1 <= Op.maxSeq - nextSeq else { throw .malformed("compacted seqs past 2^63-1") }
            nextSeq += count
            seqsLeft -= count
            return true
        }

        /// Decodes the next operation as `next(from:)` does if it acts on `wanted` (nil: on no
        /// record); otherwise reads past it, building neither its action nor the operation, and
        /// returns nil. A history takes a record's operations out of log rows that may mostly
        /// hold other records'. An operation read past is checked as far as reading it needs (its
        /// header, record, field code, value type, lengths and counts), not validated (SPEC.md §4.3).
        package mutating func next(from reader: inout ByteReader, ifItActsOn wanted: RecordRef?) throws(DecodeError) -> Op? {
            if try skipCompacted(from: &reader) { return nil }
            let (header, timestamp, record) = try start(from: &reader)
            guard record == wanted else {
                try OperationCodec.skipAction(header: header, from: &reader)
                guard nextSeq < UInt64.max else { throw .malformed("sequence number overflows") }
                nextSeq += 1
                seqsLeft &-= 1
                return nil
            }
            return try rest(header: header, timestamp: timestamp, record: record, from: &reader)
        }

        /// The next operation's header, timestamp and record, which every operation has.
        @inline(__always)
        private mutating func start(from reader: inout ByteReader) throws(DecodeError) -> (UInt8, Timestamp, RecordRef) {
            let header = try reader.byte()
            try OperationCodec.checkFlags(header)
            let delta = try reader.signedVarint()
            let timestamp = Timestamp(rawValue: previousTimestamp &+ UInt64(bitPattern: delta))
            previousTimestamp = timestamp.rawValue
            let record: RecordRef
            if header & OperationCodec.sameRecordFlag != 0 {
                guard let previousRecord else { throw .malformed("first operation of a run refers to a previous record") }
                record = previousRecord
            } else {
                let kind = RecordKind(rawValue: try reader.byte())
                guard kind.rawValue != 0 else { throw .malformed("record kind 0") }
                record = RecordRef(kind: kind, id: try reader.identifier())
                previousRecord = record
            }
            return (header, timestamp, record)
        }

        /// The rest of the operation `start` began: its action and predecessors, validated.
        @inline(__always)
        private mutating func rest(
            header: UInt8, timestamp: Timestamp, record: RecordRef, from reader: inout ByteReader
        ) throws(DecodeError) -> Op {
            let (action, predecessors) = try OperationCodec.action(header: header, from: &reader)
            guard nextSeq < UInt64.max else { throw .malformed("sequence number overflows") }
            let operation = Op(
                id: OperationID(replica: author, seq: nextSeq), timestamp: timestamp, record: record, action: action,
                predecessors: predecessors)
            nextSeq += 1
            seqsLeft &-= 1
            do {
                try operation.validate()
            } catch {
                throw .malformed(error.description)
            }
            return operation
        }
    }

    /// An operation's action, after its header, timestamp and record, and the predecessors that
    /// follow an assign's value when its header says so.
    private static func action(header: UInt8, from reader: inout ByteReader) throws(DecodeError) -> (Action, Predecessors?) {
        let action: Action
        let predecessors: Predecessors?
        if header & OperationCodec.elidedFlag != 0 { return (.elided, nil) }
        switch header & OperationCodec.actionMask {
        case 0:
            let code = try reader.byte()
            let field: Field
            if code == 0 {
                let name = try reader.string()
                guard !name.isEmpty else { throw .malformed("empty field name") }
                // Kept as a name even when it is a known field's, so that validation refuses it (§8.3).
                field = .other(ExactString(name))
            } else {
                guard let known = Field(code: code) else { throw .malformed("unknown field code \(code)") }
                field = known
            }
            action = .assign(field, try OperationCodec.decodeValue(from: &reader))
            predecessors = header & OperationCodec.predecessorsFlag != 0 ? try OperationCodec.predecessors(from: &reader) : nil
        case 1:
            action = .addTag(ExactString(try reader.string()))
            predecessors = nil
        case 2:
            let tag = ExactString(try reader.string())
            let count = try reader.varint()
            guard count <= UInt64(reader.remaining / 17) else { throw .truncated }
            var observed: [OperationID] = []
            observed.reserveCapacity(Int(count))
            for _ in 0..<count {
                let replica: ReplicaID = try reader.identifier()
                observed.append(OperationID(replica: replica, seq: try reader.varint()))
            }
            action = .removeTag(tag, observed: observed)
            predecessors = nil
        default:
            action = .purge
            predecessors = nil
        }
        return (action, predecessors)
    }

    /// Reads past an action (and the predecessors after it) as `action(header:from:)` reads it,
    /// building nothing: strings are read past unchecked as UTF-8, and predecessors unchecked
    /// for order.
    private static func skipAction(header: UInt8, from reader: inout ByteReader) throws(DecodeError) {
        if header & OperationCodec.elidedFlag != 0 { return }
        switch header & OperationCodec.actionMask {
        case 0:
            let code = try reader.byte()
            if code == 0 {
                guard try reader.skipString() > 0 else { throw .malformed("empty field name") }
            } else {
                guard Field(code: code) != nil else { throw .malformed("unknown field code \(code)") }
            }
            switch try reader.byte() {
            case 0, 1, 2: break
            case 3: _ = try reader.varint()
            case 4: try reader.skipString()
            case let tag: throw .malformed("unknown value type \(tag)")
            }
            if header & OperationCodec.predecessorsFlag != 0 { try skipIDs(from: &reader) }
        case 1:
            try reader.skipString()
        case 2:
            try reader.skipString()
            try skipIDs(from: &reader)
        default:
            break  // a purge: nothing after its record
        }
    }

    /// Reads past a count of operation ids (a replica id and a seq each): a remove's observed
    /// adds, an assign's predecessors.
    private static func skipIDs(from reader: inout ByteReader) throws(DecodeError) {
        let count = try reader.varint()
        guard count <= UInt64(reader.remaining / 17) else { throw .truncated }
        for _ in 0..<count {
            _ = try reader.bytes(16)
            _ = try reader.varint()
        }
    }

    /// Predecessors as an assign carries them: a count, then each replica's id and seq, replicas
    /// strictly ascending and seqs at least 1, so that one set has one encoding (SPEC.md §8.3).
    static func predecessors(from reader: inout ByteReader) throws(DecodeError) -> Predecessors {
        let count = try reader.varint()
        // Most assigns list nothing: the first write of a field, or a replica's own edit.
        guard count > 0 else { return .empty }
        guard count <= UInt64(reader.remaining / 17) else { throw .truncated }
        var entries: [OperationID] = []
        entries.reserveCapacity(Int(count))
        for _ in 0..<count {
            let replica: ReplicaID = try reader.identifier()
            let seq = try reader.varint()
            guard seq >= 1 else { throw .malformed("a predecessor of seq 0") }
            if let last = entries.last, last.replica >= replica {
                throw .malformed("predecessors out of replica order")
            }
            entries.append(OperationID(replica: replica, seq: seq))
        }
        return Predecessors(sortedEntries: entries)
    }

    /// A value: a type byte, then its payload (SPEC.md §8.2).
    public static func decodeValue(from reader: inout ByteReader) throws(DecodeError) -> Value {
        switch try reader.byte() {
        case 0: return .null
        case 1: return .bool(false)
        case 2: return .bool(true)
        case 3: return .int(try reader.signedVarint())
        case 4: return .string(try reader.string())
        case let tag: throw .malformed("unknown value type \(tag)")
        }
    }
}
