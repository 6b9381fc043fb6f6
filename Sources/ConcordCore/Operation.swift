/// What one operation does to its record.
public enum Action: Hashable, Sendable {
    /// Writes `value` into the LWW register `field`.
    case assign(Field, Value)
    /// Adds `tag` to the record's tag OR-set; the operation's own id is the add's dot.
    case addTag(ExactString)
    /// Removes the adds of `tag` that the author had observed (their dots), and no others.
    case removeTag(ExactString, observed: [OperationID])
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

    /// An operation with these parts, as the store and the formats make them.
    public init(id: OperationID, timestamp: Timestamp, record: RecordRef, action: Action) {
        self.id = id
        self.timestamp = timestamp
        self.record = record
        self.action = action
    }

    /// The largest valid sequence number, 2^63−1: stores keep seqs in SQLite's signed 64-bit
    /// integers, and no replica comes near it.
    package static let maxSeq = UInt64(Int64.max)

    /// The key that orders concurrent writes of one register: (timestamp, replica, seq).
    package var stamp: Stamp { Stamp(timestamp: timestamp, replica: id.replica, seq: id.seq) }

    /// A one-line summary for logs: id, timestamp, record and action.
    public var description: String {
        let what: String
        switch action {
        case let .assign(field, value): what = "\(field.name) = \(value)"
        case let .addTag(tag): what = "tag + \(tag)"
        case let .removeTag(tag, observed): what = "tag - \(tag) (\(observed.count) observed)"
        }
        return "\(id) @\(timestamp) \(record): \(what)"
    }

    /// Checks the rules SPEC.md gives every operation ("Valid operations").
    package func validate() throws(InvalidOperation) {
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
        case .addTag, .removeTag:
            break
        }
    }
}

package struct InvalidOperation: Error, Equatable, CustomStringConvertible {
    package var operation: OperationID
    package var reason: String

    package var description: String { "invalid operation \(operation): \(reason)" }
}

/// The total order of writes to one LWW register: timestamp first, then replica id, then sequence
/// number (which only matters for a replica that broke its clock's rules).
package struct Stamp: Hashable, Comparable, Sendable {
    package var timestamp: Timestamp
    package var replica: ReplicaID
    package var seq: UInt64

    package init(timestamp: Timestamp, replica: ReplicaID, seq: UInt64) {
        self.timestamp = timestamp
        self.replica = replica
        self.seq = seq
    }

    package static func < (lhs: Self, rhs: Self) -> Bool {
        if lhs.timestamp != rhs.timestamp { return lhs.timestamp < rhs.timestamp }
        if lhs.replica != rhs.replica { return lhs.replica < rhs.replica }
        return lhs.seq < rhs.seq
    }
}
