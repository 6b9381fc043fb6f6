/// For each replica, the highest sequence number held from it with no gap below.
///
/// Merge law: the pointwise maximum, commutative, associative and idempotent.
public struct VersionVector: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The non-zero entries: replica to highest sequence number held.
    public private(set) var entries: [ReplicaID: UInt64]

    /// A vector of these entries; zero entries are dropped.
    public init(_ entries: [ReplicaID: UInt64] = [:]) {
        self.entries = entries.filter { $0.value > 0 }
    }

    /// The highest sequence number held from `replica`, 0 if none; setting 0 removes the entry.
    public subscript(replica: ReplicaID) -> UInt64 {
        get { entries[replica] ?? 0 }
        set { entries[replica] = newValue == 0 ? nil : newValue }
    }

    /// Whether the operation with this id is covered (held, by the vector's definition).
    public func covers(_ id: OperationID) -> Bool { id.seq <= self[id.replica] }

    /// Raises each entry to the other vector's where it is higher (the pointwise maximum).
    public mutating func merge(_ other: VersionVector) {
        for (replica, seq) in other.entries where seq > self[replica] { self[replica] = seq }
    }

    /// Whether every seq `other` covers is covered.
    public func covers(_ other: VersionVector) -> Bool {
        other.entries.allSatisfy { self[$0.key] >= $0.value }
    }

    /// Lowers each entry to the other vector's where it is lower (the pointwise minimum): the
    /// seqs both cover.
    public mutating func formMeet(_ other: VersionVector) {
        for (replica, seq) in entries where other[replica] < seq { self[replica] = other[replica] }
    }

    /// Replicas in id order with their sequence numbers.
    public var sorted: [(replica: ReplicaID, seq: UInt64)] {
        entries.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// `{replica:seq, …}` in replica order.
    public var description: String {
        "{" + sorted.map { "\($0.replica.hex):\($0.seq)" }.joined(separator: ", ") + "}"
    }

    /// Canonical JSON: an object from replica id (hex) to sequence number.
    package var json: JSON {
        .object(sorted.map { ($0.replica.hex, .int(Int64(clamping: $0.seq))) })
    }

    /// Decodes a JSON object from replica id (hex) to sequence number.
    public init(from decoder: any Decoder) throws {
        let raw = try [String: UInt64](from: decoder)
        var entries: [ReplicaID: UInt64] = [:]
        for (key, value) in raw {
            guard let id = ReplicaID(hex: key) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a replica id: \(key)"))
            }
            entries[id] = value
        }
        self.init(entries)
    }

    /// Encodes a JSON object from replica id (hex) to sequence number.
    public func encode(to encoder: any Encoder) throws {
        try Dictionary(uniqueKeysWithValues: entries.map { ($0.key.hex, $0.value) }).encode(to: encoder)
    }
}

/// What a merge brought in.
public struct MergeReport: Hashable, Sendable {
    /// New operations, by author.
    public var newOperations: [ReplicaID: Int] = [:]
    /// Operations that were already held and were skipped.
    public var duplicates: Int = 0
    /// The greatest remote timestamp that was more than a day ahead of the local wall clock, if any.
    public var farFutureTimestamp: Timestamp?
    /// The records whose state the merge touched: by `Replica.merge`. A store's merges leave it
    /// empty: each batch's records reach the store's observers as the batch commits.
    public var touchedRecords: Set<RecordRef> = []
    /// Seqs newly held compacted, without their operations (SPEC.md §5.8).
    public var compactedSeqs: UInt64 = 0

    /// An empty report: nothing new.
    public init() {}

    /// How many new operations, from all authors.
    public var newOperationCount: Int { newOperations.values.reduce(0, +) }

    /// Adds another report's counts to this one, as for a merge done in parts.
    public mutating func formUnion(_ other: MergeReport) {
        newOperations.merge(other.newOperations, uniquingKeysWith: +)
        duplicates += other.duplicates
        if let far = other.farFutureTimestamp, far > (farFutureTimestamp ?? .zero) { farFutureTimestamp = far }
        touchedRecords.formUnion(other.touchedRecords)
        compactedSeqs += other.compactedSeqs
    }
}
