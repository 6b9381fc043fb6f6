/// A last-writer-wins register: of all writes, the one with the greatest `Stamp` holds.
///
/// It also keeps the register's *heads* (SPEC.md §5.1, "Heads and conflicts"): the writes no
/// other write held had seen. The winner is one; the others are `rivals`, and a register with
/// rivals is in conflict. To tell which writes were seen it keeps what the writes held had seen
/// (`seen`, the join of their predecessors) and the greatest stamp of a write whose predecessors
/// are unknown (`unknownThrough`), which counts as having seen every write of a smaller stamp.
///
/// Merge laws (each has a property test in `CRDTLawTests`):
/// - Commutative: `a.merging(b) == b.merging(a)`
/// - Associative: `a.merging(b).merging(c) == a.merging(b.merging(c))`
/// - Idempotent: `a.merging(a) == a`
public struct LWWRegister: Hashable, Sendable {
    /// One write's value and stamp.
    public struct Write: Hashable, Sendable {
        /// What was written.
        public var value: Value
        /// Who wrote it, when.
        public var stamp: Stamp

        /// The write of `value` stamped `stamp`.
        public init(value: Value, stamp: Stamp) {
            self.value = value
            self.stamp = stamp
        }
    }

    /// The value of the winning write.
    public var value: Value
    /// The stamp of the winning write, which orders it against any other.
    public var stamp: Stamp
    /// The heads other than the winner, greatest stamp first; empty unless the register is in conflict.
    public private(set) var rivals: [Write]
    /// Per other replica, the greatest seq of its writes to the register that a write held had
    /// seen (the join of the writes' predecessors).
    public private(set) var seen: Predecessors
    /// The greatest stamp of a write held whose predecessors are unknown; nil when there is none.
    public private(set) var unknownThrough: Stamp?

    /// A register holding one write whose predecessors are unknown, as every write of a build
    /// older than predecessors is.
    public init(value: Value, stamp: Stamp) {
        self.init(value: value, stamp: stamp, predecessors: nil)
    }

    /// A register holding one write, with what its writer had seen of the register (nil: unknown).
    public init(value: Value, stamp: Stamp, predecessors: Predecessors?) {
        self.value = value
        self.stamp = stamp
        rivals = []
        seen = predecessors ?? .none
        unknownThrough = predecessors == nil ? stamp : nil
    }

    /// A register with all its parts, as a store keeps them.
    public init(value: Value, stamp: Stamp, rivals: [Write], seen: Predecessors, unknownThrough: Stamp?) {
        self.value = value
        self.stamp = stamp
        self.rivals = rivals.sorted { $0.stamp > $1.stamp }
        self.seen = seen
        self.unknownThrough = unknownThrough
    }

    /// The winning write.
    public var winner: Write { Write(value: value, stamp: stamp) }

    /// The heads: the winner, then its rivals.
    public var heads: [Write] { [winner] + rivals }

    /// Whether writes met that had not seen each other (more than one head).
    public var inConflict: Bool { !rivals.isEmpty }

    /// What a new write by `author` has seen of the register: everything the register holds.
    public func predecessors(ofWriteBy author: ReplicaID) -> Predecessors {
        var seenNow = seen
        seenNow.formUnion(Predecessors(heads.map { OperationID(replica: $0.stamp.replica, seq: $0.stamp.seq) }))
        return seenNow.removing(author)
    }

    /// Joins another register of the same field: the greater stamp wins, and the heads are the
    /// writes of either that no write of either had seen.
    public mutating func merge(_ other: LWWRegister) {
        if other.stamp == stamp, other.rivals.isEmpty, other.seen == seen, other.unknownThrough == unknownThrough,
            rivals.isEmpty
        {
            return
        }
        seen.formUnion(other.seen)
        if let through = other.unknownThrough, unknownThrough.map({ through > $0 }) ?? true { unknownThrough = through }
        let oldWinner = winner
        if other.stamp > stamp {
            value = other.value
            stamp = other.stamp
        }
        if rivals.isEmpty, other.rivals.isEmpty {
            // The common case, without an array: the two winners, of which one lost (or both are one).
            let loser = oldWinner.stamp == stamp ? other.winner : oldWinner
            if loser.stamp != stamp, !isCovered(loser.stamp, among: CollectionOfOne(winner)) { rivals = [loser] }
            return
        }
        var candidates = rivals + other.rivals
        candidates.append(oldWinner)
        candidates.append(other.winner)
        candidates.sort { $0.stamp > $1.stamp }
        var heads: [Write] = []
        for (index, candidate) in candidates.enumerated() where candidate.stamp != stamp {
            if index > 0, candidates[index - 1].stamp == candidate.stamp { continue }
            if !isCovered(candidate.stamp, among: candidates) { heads.append(candidate) }
        }
        rivals = heads
    }

    /// Whether some write held had seen the write stamped `stamp`: one whose predecessors were
    /// unknown and whose stamp is greater, one whose predecessors list it, or a later write by its
    /// own author. `heads` holds at least the heads; a later write by the same author that is not
    /// a head was seen by a head, and so its earlier one is covered by `seen` or by that head's author.
    private func isCovered(_ stamp: Stamp, among heads: some Sequence<Write>) -> Bool {
        if let unknownThrough, stamp < unknownThrough { return true }
        if seen.seq(of: stamp.replica) >= stamp.seq { return true }
        return heads.contains { $0.stamp.replica == stamp.replica && $0.stamp.seq > stamp.seq }
    }

    /// A copy with `other` merged in, by `merge(_:)`.
    public func merging(_ other: LWWRegister) -> LWWRegister {
        var copy = self
        copy.merge(other)
        return copy
    }
}

extension Optional where Wrapped == LWWRegister {
    @inline(__always)
    mutating func merge(_ write: LWWRegister) {
        if self == nil {
            self = write
        } else {
            self!.merge(write)
        }
    }
}
