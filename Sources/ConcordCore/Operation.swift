/// What one operation does to its record.
public enum Action: Hashable, Sendable {
    /// Writes `value` into the LWW register `field`.
    case assign(Field, Value)
    /// Adds `tag` to the record's tag OR-set; the operation's own id is the add's dot.
    case addTag(ExactString)
    /// Removes the adds of `tag` that the author had observed (their dots), and no others.
    case removeTag(ExactString, observed: [OperationID])
    /// Erases the record for good: every value and tag, on every replica (SPEC.md §5.7). Terminal:
    /// no later operation brings content back.
    case purge
    /// An operation of a purged record whose content was erased: it keeps its id, timestamp and
    /// record, so that the log stays a log, and stands for a purge of its record (SPEC.md §5.7).
    case elided
}

/// One entry of a replica's append-only operation log.
public struct Op: Hashable, Sendable, CustomStringConvertible {
    /// Who wrote it and its sequence number there.
    public var id: OperationID
    /// When it was written, by its author's hybrid logical clock.
    public var timestamp: Timestamp
    /// The record it acts on.
    public var record: RecordRef
    /// What it does to the record.
    public var action: Action
    /// For an assign, what its writer had seen of the register (SPEC.md §5.1, "Predecessors");
    /// nil when that is unknown (an assign written by a build older than bundle format 2) and for
    /// tag operations, which carry what they observed in their action.
    @inlinable public var predecessors: Predecessors? {
        get { storedPredecessors }
        set { storedPredecessors = newValue }
    }
    // Stored under another name, so that the public initializer (below) can call the memberwise
    // one: an initializer that sets a struct's fields one by one leaves a retain and a release
    // behind once it has two reference-counted fields (Swift 6.3's optimizer), a cost on every
    // operation decoded. Inlinable, so that other modules read it as directly as a stored property.
    @usableFromInline var storedPredecessors: Predecessors?

    /// The largest valid sequence number, 2^63−1: stores keep seqs in SQLite's signed 64-bit
    /// integers, and no replica comes near it.
    public static let maxSeq = UInt64(Int64.max)

    /// The key that orders concurrent writes of one register: (timestamp, replica, seq).
    public var stamp: Stamp { Stamp(timestamp: timestamp, replica: id.replica, seq: id.seq) }

    /// A one-line summary for logs: id, timestamp, record and action.
    public var description: String {
        let what: String
        switch action {
        case let .assign(field, value): what = "\(field.name) = \(value)"
        case let .addTag(tag): what = "tag + \(tag)"
        case let .removeTag(tag, observed): what = "tag - \(tag) (\(observed.count) observed)"
        case .purge: what = "purge"
        case .elided: what = "elided"
        }
        return "\(id) @\(timestamp) \(record): \(what)"
    }

    /// Checks the rules SPEC.md gives every operation ("Valid operations").
    public func validate() throws(InvalidOperation) {
        guard id.seq >= 1 else { throw InvalidOperation(operation: id, reason: "sequence number 0") }
        guard id.seq <= Op.maxSeq else {
            throw InvalidOperation(operation: id, reason: "sequence number \(id.seq) is past 2^63-1")
        }
        guard timestamp.isValid else {
            throw InvalidOperation(operation: id, reason: "timestamp \(timestamp.physicalMillis) ms is past year 9999")
        }
        switch action {
        case let .assign(field, value):
            if case .other(let name) = field {
                guard !name.string.isEmpty else { throw InvalidOperation(operation: id, reason: "empty field name") }
                guard case .other = Field(name: name.string) else {
                    throw InvalidOperation(operation: id, reason: "field '\(name)' must be sent as the known field, not by name")
                }
            }
            if record.kind.knows(field), !field.accepts(value) {
                throw InvalidOperation(operation: id, reason: "\(record.kind.name) field '\(field.name)' cannot hold \(value)")
            }
            if let predecessors {
                for entry in predecessors.entries {
                    guard entry.replica != id.replica else {
                        throw InvalidOperation(operation: id, reason: "its predecessors name its own replica")
                    }
                    guard entry.seq <= Op.maxSeq else {
                        throw InvalidOperation(operation: id, reason: "a predecessor's sequence number \(entry.seq) is past 2^63-1")
                    }
                }
            }
        case .addTag, .removeTag:
            guard case .none = predecessors else {
                throw InvalidOperation(operation: id, reason: "a tag operation with predecessors")
            }
        case .purge, .elided:
            guard case .none = predecessors else {
                throw InvalidOperation(operation: id, reason: "a purge or elided operation with predecessors")
            }
        }
    }
}

extension Op {
    /// This operation with its content erased, as a replica keeps it once its record is purged:
    /// its id, timestamp and record, and no action (SPEC.md §5.7). A purge stays a purge.
    public var elided: Op {
        if case .purge = action { return self }
        return Op(id: id, timestamp: timestamp, record: record, action: .elided, predecessors: nil)
    }

    /// Whether the operation erases its record's content: a purge, or an elided operation, which
    /// stands for one.
    public var purges: Bool {
        switch action {
        case .purge, .elided: true
        default: false
        }
    }

    /// An operation with these parts, as the store and the formats make them.
    public init(id: OperationID, timestamp: Timestamp, record: RecordRef, action: Action, predecessors: Predecessors? = nil) {
        self.init(id: id, timestamp: timestamp, record: record, action: action, storedPredecessors: predecessors)
    }
}

/// Why an operation breaks the rules of SPEC.md §4.3; thrown by `Op.validate()`.
public struct InvalidOperation: Error, Equatable, CustomStringConvertible {
    /// The operation refused.
    public var operation: OperationID
    /// The rule it breaks.
    public var reason: String

    /// The message, with the operation's id.
    public var description: String { "invalid operation \(operation): \(reason)" }
}

/// The total order of writes to one LWW register: timestamp first, then replica id, then sequence
/// number (which only matters for a replica that broke its clock's rules).
public struct Stamp: Hashable, Comparable, Sendable {
    /// When the write was made; compared first.
    public var timestamp: Timestamp
    /// Who made it; compared when the timestamps are equal.
    public var replica: ReplicaID
    /// Its author's sequence number; compared last.
    public var seq: UInt64

    /// The stamp of a write with these parts.
    public init(timestamp: Timestamp, replica: ReplicaID, seq: UInt64) {
        self.timestamp = timestamp
        self.replica = replica
        self.seq = seq
    }

    /// Timestamp, then replica, then seq.
    public static func < (lhs: Self, rhs: Self) -> Bool {
        if lhs.timestamp != rhs.timestamp { return lhs.timestamp < rhs.timestamp }
        if lhs.replica != rhs.replica { return lhs.replica < rhs.replica }
        return lhs.seq < rhs.seq
    }
}
