/// A last-writer-wins register: of all writes, the one with the greatest `Stamp` holds.
///
/// It also keeps the register's *heads* (SPEC.md §5.1, "Heads and conflicts"): the writes no
/// other write held had seen. The winner is one; the others are `rivals`, and a register with
/// rivals is in conflict. To tell which writes were seen it keeps what the writes held had seen
/// (`seen`, the join of their predecessors) and the greatest stamp of a write whose predecessors
/// are unknown (`unknownThrough`), which counts as having seen every write of a smaller stamp.
/// The writes that only such a write covers are kept too (`hidden`, by stamp alone): a new write
/// lists them among its predecessors, so that a replica that holds them with their predecessors
/// sees them covered as well.
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
    /// The writes that no write held had seen by its predecessors or its author, but that are
    /// stamped before `unknownThrough`: not heads, and listed by a new write. Greatest first.
    public private(set) var hidden: [Stamp]
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
        hidden = []
        seen = predecessors ?? .empty
        unknownThrough = predecessors == nil ? stamp : nil
    }

    /// A register with all its parts, as a store keeps them.
    public init(value: Value, stamp: Stamp, rivals: [Write], hidden: [Stamp] = [], seen: Predecessors, unknownThrough: Stamp?) {
        self.value = value
        self.stamp = stamp
        self.rivals = rivals.sorted { $0.stamp > $1.stamp }
        self.hidden = hidden.sorted(by: >)
        self.seen = seen
        self.unknownThrough = unknownThrough
    }

    /// The winning write.
    public var winner: Write { Write(value: value, stamp: stamp) }

    /// The heads: the winner, then its rivals.
    public var heads: [Write] { [winner] + rivals }

    /// Whether writes met that had not seen each other (more than one head).
    public var inConflict: Bool { !rivals.isEmpty }

    /// What a new write by `author` has seen of the register: every write it holds.
    public func predecessors(ofWriteBy author: ReplicaID) -> Predecessors {
        var seenNow = seen
        let uncovered = heads.map(\.stamp) + hidden
        seenNow.formUnion(Predecessors(uncovered.map { OperationID(replica: $0.replica, seq: $0.seq) }))
        return seenNow.removing(author)
    }

    /// Joins another register of the same field: the greater stamp wins, and the heads are the
    /// writes of either that no write of either had seen.
    public mutating func merge(_ other: LWWRegister) {
        if other.stamp == stamp, other.rivals.isEmpty, other.hidden.isEmpty, other.seen == seen,
            other.unknownThrough == unknownThrough, rivals.isEmpty, hidden.isEmpty
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
        if rivals.isEmpty, hidden.isEmpty, other.rivals.isEmpty, other.hidden.isEmpty {
            // The common case, without an array: the two winners, of which one lost (or both are one).
            let loser = oldWinner.stamp == stamp ? other.winner : oldWinner
            if loser.stamp != stamp, !isSeen(loser.stamp, among: CollectionOfOne(stamp)) { keep(loser) }
            return
        }
        // Every write that may be uncovered: the heads and hidden writes of either, and both winners.
        var candidates = rivals + other.rivals + (hidden + other.hidden).map { Write(value: .null, stamp: $0) }
        candidates.append(oldWinner)
        candidates.append(other.winner)
        candidates.sort { $0.stamp > $1.stamp }
        let stamps = candidates.map(\.stamp)
        rivals = []
        hidden = []
        for (index, candidate) in candidates.enumerated() where candidate.stamp != stamp {
            // The same write twice. A hidden write's copy has no value, but it stays hidden: the
            // joined `unknownThrough` is at least the one that hid it.
            if index > 0, stamps[index - 1] == candidate.stamp { continue }
            if !isSeen(candidate.stamp, among: stamps) { keep(candidate) }
        }
    }

    /// Keeps `write`, which no write held had seen by its predecessors or its author: a rival, or
    /// hidden when a write of unknown predecessors is stamped after it.
    private mutating func keep(_ write: Write) {
        if let unknownThrough, write.stamp < unknownThrough {
            if hidden.last != write.stamp { hidden.append(write.stamp) }
        } else if rivals.last?.stamp != write.stamp {
            rivals.append(write)
        }
    }

    /// Whether a write held had seen the write stamped `stamp` by its predecessors (`seen`) or as
    /// a later write of the same author. `uncovered` holds at least the writes no write held had so
    /// seen; a later write of the same author that is not among them was seen by one, and so its
    /// earlier one is covered by `seen` or by that one's author.
    private func isSeen(_ stamp: Stamp, among uncovered: some Sequence<Stamp>) -> Bool {
        if seen.seq(of: stamp.replica) >= stamp.seq { return true }
        return uncovered.contains { $0.replica == stamp.replica && $0.seq > stamp.seq }
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
