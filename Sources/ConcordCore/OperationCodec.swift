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
            appendCompacted(count, toParts: &writer)
        }

        /// `appendCompacted(_:into:)`, writing each part into its column of a block of bundle
        /// formats 6 and 7 (SPEC.md §13).
        package mutating func appendCompacted(_ count: UInt64, into columns: inout OperationColumns.Writer) {
            appendCompacted(count, toParts: &columns)
        }

        /// `appendCompacted(_:into:)`, writing each part where `parts` keeps it.
        private mutating func appendCompacted(_ count: UInt64, toParts parts: inout some OperationPartsWriter) {
            precondition(count >= 1, "no compacted seqs")
            parts.header(OperationCodec.compactedHeader)
            parts.compactedCount(count)
        }

        /// Appends `operation`, the next of the run, to `writer` (SPEC.md §8.3).
        public mutating func append(_ operation: Op, into writer: inout ByteWriter) {
            append(operation, toParts: &writer)
        }

        /// `append(_:into:)`, writing each part of the operation into its column of a block of
        /// bundle formats 6 and 7 (SPEC.md §13).
        package mutating func append(_ operation: Op, into columns: inout OperationColumns.Writer) {
            append(operation, toParts: &columns)
        }

        /// `append(_:into:)`, writing each part of the operation where `parts` keeps it: after one
        /// another in a run's bytes, or in a block's columns.
        @inline(__always)
        private mutating func append(_ operation: Op, toParts parts: inout some OperationPartsWriter) {
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
            parts.header(header)
            parts.timestampDelta(Int64(bitPattern: operation.timestamp.rawValue &- previousTimestamp))
            previousTimestamp = operation.timestamp.rawValue
            if !sameRecord {
                parts.record(operation.record)
                previousRecord = operation.record
            }
            switch operation.action {
            case let .assign(field, value):
                parts.field(field)
                parts.value(value, code: field.code)
                if let predecessors = operation.predecessors { parts.ids(predecessors.entries) }
            case let .addTag(tag):
                parts.tag(tag.string)
            case let .removeTag(tag, observed):
                parts.tag(tag.string)
                parts.ids(observed)
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
            try next(fromParts: &reader)
        }

        /// `next(from:)`, reading each part of the entry from its column of a block of bundle
        /// formats 6 and 7 (SPEC.md §13).
        package mutating func next(from columns: inout OperationColumns.Reader) throws(DecodeError) -> Op? {
            try next(fromParts: &columns)
        }

        /// `next(from:)`, reading each part of the entry where `parts` keeps it.
        @inline(__always)
        private mutating func next(fromParts parts: inout some OperationParts) throws(DecodeError) -> Op? {
            if try skipCompacted(from: &parts) { return nil }
            let (header, timestamp, record) = try start(from: &parts)
            return try rest(header: header, timestamp: timestamp, record: record, from: &parts)
        }

        /// Reads compacted seqs if they come next, and says whether they did.
        @inline(__always)
        private mutating func skipCompacted(from reader: inout some OperationParts) throws(DecodeError) -> Bool {
            guard reader.peekHeader() == OperationCodec.compactedHeader else { return false }
            _ = try reader.header()
            let count = try reader.compactedCount()
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
        private mutating func start(from reader: inout some OperationParts) throws(DecodeError) -> (UInt8, Timestamp, RecordRef) {
            let header = try reader.header()
            try OperationCodec.checkFlags(header)
            let delta = try reader.timestampDelta()
            let timestamp = Timestamp(rawValue: previousTimestamp &+ UInt64(bitPattern: delta))
            previousTimestamp = timestamp.rawValue
            let record: RecordRef
            if header & OperationCodec.sameRecordFlag != 0 {
                guard let previousRecord else { throw .malformed("first operation of a run refers to a previous record") }
                record = previousRecord
            } else {
                record = try reader.record()
                previousRecord = record
            }
            return (header, timestamp, record)
        }

        /// The rest of the operation `start` began: its action and predecessors, validated.
        @inline(__always)
        private mutating func rest(
            header: UInt8, timestamp: Timestamp, record: RecordRef, from reader: inout some OperationParts
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
    @inline(__always)
    private static func action(header: UInt8, from reader: inout some OperationParts) throws(DecodeError) -> (Action, Predecessors?) {
        if header & OperationCodec.elidedFlag != 0 { return (.elided, nil) }
        switch header & OperationCodec.actionMask {
        case 0:
            let code = try reader.fieldCode()
            let field: Field
            if code == 0 {
                let name = try reader.fieldName()
                guard !name.isEmpty else { throw .malformed("empty field name") }
                // Kept as a name even when it is a known field's, so that validation refuses it (§8.3).
                field = .other(ExactString(name))
            } else {
                guard let known = Field(code: code) else { throw .malformed("unknown field code \(code)") }
                field = known
            }
            let value = try reader.value(code: code)
            guard header & OperationCodec.predecessorsFlag != 0 else { return (.assign(field, value), nil) }
            return (.assign(field, value), try reader.ids { reader throws(DecodeError) in try OperationCodec.predecessors(from: &reader) })
        case 1:
            return (.addTag(ExactString(try reader.tag())), nil)
        case 2:
            let tag = ExactString(try reader.tag())
            let observed = try reader.ids { reader throws(DecodeError) in try OperationCodec.observed(from: &reader) }
            return (.removeTag(tag, observed: observed), nil)
        default:
            return (.purge, nil)
        }
    }

    /// A remove's observed adds: a count, then each add's replica id and seq (SPEC.md §8.3).
    static func observed(from reader: inout ByteReader) throws(DecodeError) -> [OperationID] {
        let count = try reader.varint()
        guard count <= UInt64(reader.remaining / 17) else { throw .truncated }
        var observed: [OperationID] = []
        observed.reserveCapacity(Int(count))
        for _ in 0..<count {
            let replica: ReplicaID = try reader.identifier()
            observed.append(OperationID(replica: replica, seq: try reader.varint()))
        }
        return observed
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

/// Where a run decoder reads the parts of an entry (SPEC.md §8.3) from: a run's own bytes, where
/// they follow one another, or the columns of a block of bundle formats 6 and 7 (§13), where each kind
/// of part has a column of its own. Each method reads one part, as §8.3 encodes it.
protocol OperationParts {
    /// The next entry's header byte, left unread; nil at the end.
    func peekHeader() -> UInt8?
    /// The next entry's header byte.
    mutating func header() throws(DecodeError) -> UInt8
    /// How many seqs an entry of compacted seqs covers.
    mutating func compactedCount() throws(DecodeError) -> UInt64
    /// An operation's timestamp, as the difference from the previous one's in its run.
    mutating func timestampDelta() throws(DecodeError) -> Int64
    /// The record of an operation whose header does not say "same record": its kind is not 0.
    mutating func record() throws(DecodeError) -> RecordRef
    /// An assign's field code; 0 when its name follows.
    mutating func fieldCode() throws(DecodeError) -> UInt8
    /// The name of an assign's field of code 0.
    mutating func fieldName() throws(DecodeError) -> String
    /// An assign's value (§8.2), of a field of code `code`.
    mutating func value(code: UInt8) throws(DecodeError) -> Value
    /// A tag operation's tag.
    mutating func tag() throws(DecodeError) -> String
    /// Reads, with `body`, a list of operation ids: an assign's predecessors or a remove's
    /// observed adds.
    mutating func ids<T>(_ body: (inout ByteReader) throws(DecodeError) -> T) throws(DecodeError) -> T
}

/// A run's own bytes hold every part of its entries, one after the other (SPEC.md §8.3).
extension ByteReader: OperationParts {
    func peekHeader() -> UInt8? { peek() }
    mutating func header() throws(DecodeError) -> UInt8 { try byte() }
    mutating func compactedCount() throws(DecodeError) -> UInt64 { try varint() }
    mutating func timestampDelta() throws(DecodeError) -> Int64 { try signedVarint() }

    mutating func record() throws(DecodeError) -> RecordRef {
        let kind = RecordKind(rawValue: try byte())
        guard kind.rawValue != 0 else { throw .malformed("record kind 0") }
        return RecordRef(kind: kind, id: try identifier())
    }

    mutating func fieldCode() throws(DecodeError) -> UInt8 { try byte() }
    mutating func fieldName() throws(DecodeError) -> String { try string() }
    mutating func value(code: UInt8) throws(DecodeError) -> Value { try OperationCodec.decodeValue(from: &self) }
    mutating func tag() throws(DecodeError) -> String { try string() }

    mutating func ids<T>(_ body: (inout ByteReader) throws(DecodeError) -> T) throws(DecodeError) -> T {
        try body(&self)
    }
}

/// Where a run encoder writes the parts of an entry (SPEC.md §8.3): after one another in a run's
/// bytes, or each in its column of a block of bundle formats 6 and 7 (§13). The counterpart of
/// `OperationParts`.
protocol OperationPartsWriter {
    mutating func header(_ header: UInt8)
    mutating func compactedCount(_ count: UInt64)
    mutating func timestampDelta(_ delta: Int64)
    /// The record of an operation whose header does not say "same record".
    mutating func record(_ record: RecordRef)
    /// An assign's field: its code, and its name after code 0.
    mutating func field(_ field: Field)
    /// An assign's value (§8.2), of a field of code `code`.
    mutating func value(_ value: Value, code: UInt8)
    mutating func tag(_ tag: String)
    /// A list of operation ids: an assign's predecessors or a remove's observed adds.
    mutating func ids(_ ids: [OperationID])
}

/// A run's own bytes hold every part of its entries, one after the other (SPEC.md §8.3).
extension ByteWriter: OperationPartsWriter {
    mutating func header(_ header: UInt8) { byte(header) }
    mutating func compactedCount(_ count: UInt64) { varint(count) }
    mutating func timestampDelta(_ delta: Int64) { signedVarint(delta) }

    mutating func record(_ record: RecordRef) {
        byte(record.kind.rawValue)
        identifier(record.id)
    }

    mutating func field(_ field: Field) {
        byte(field.code)
        if case .other(let name) = field { string(name.string) }
    }

    mutating func value(_ value: Value, code: UInt8) { OperationCodec.encode(value, into: &self) }
    mutating func tag(_ tag: String) { string(tag) }

    mutating func ids(_ ids: [OperationID]) {
        varint(UInt64(ids.count))
        for id in ids {
            identifier(id.replica)
            varint(id.seq)
        }
    }
}
