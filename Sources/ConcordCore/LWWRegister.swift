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
    package var value: Value
    /// The stamp of the winning write, which orders it against any other.
    package var stamp: Stamp
    /// Whether `unknownThrough` is the winner's stamp: the common case of a write of unknown
    /// predecessors that wins, kept without the box.
    private var unknownThroughWinner: Bool
    /// `rivals`, `hidden`, `seen`, and an `unknownThrough` that is not the winner's stamp: most
    /// registers have none of them, and a merge copies registers often, so they cost a register
    /// one reference, and none when absent.
    private var box: Box?

    private final class Box: Sendable {
        let rivals: [Write]
        let hidden: [Stamp]
        let seen: Predecessors
        let unknownThrough: Stamp?

        init(rivals: [Write], hidden: [Stamp], seen: Predecessors, unknownThrough: Stamp?) {
            self.rivals = rivals
            self.hidden = hidden
            self.seen = seen
            self.unknownThrough = unknownThrough
        }
    }

    /// The heads other than the winner, greatest stamp first; empty unless the register is in conflict.
    package var rivals: [Write] { box?.rivals ?? [] }
    /// The writes that no write held had seen by its predecessors or its author, but that are
    /// stamped before `unknownThrough`: not heads, and listed by a new write. Greatest first.
    package var hidden: [Stamp] { box?.hidden ?? [] }
    /// Per other replica, the greatest seq of its writes to the register that a write held had
    /// seen (the join of the writes' predecessors).
    package var seen: Predecessors { box?.seen ?? .empty }
    /// The greatest stamp of a write held whose predecessors are unknown; nil when there is none.
    package var unknownThrough: Stamp? { unknownThroughWinner ? stamp : box?.unknownThrough }

    /// A register holding one write whose predecessors are unknown, as every write of a build
    /// older than predecessors is.
    package init(value: Value, stamp: Stamp) {
        self.init(value: value, stamp: stamp, predecessors: nil)
    }

    /// A register holding one write, with what its writer had seen of the register (nil: unknown).
    package init(value: Value, stamp: Stamp, predecessors: Predecessors?) {
        self.value = value
        self.stamp = stamp
        box = nil
        // Pattern matches rather than `== nil`, which would copy the value through a generic witness.
        guard case .some(let predecessors) = predecessors else {
            unknownThroughWinner = true
            return
        }
        unknownThroughWinner = false
        if !predecessors.entries.isEmpty {
            box = Box(rivals: [], hidden: [], seen: predecessors, unknownThrough: nil)
        }
    }

    /// A register with all its parts, as a store keeps them.
    package init(value: Value, stamp: Stamp, rivals: [Write], hidden: [Stamp] = [], seen: Predecessors, unknownThrough: Stamp?) {
        self.value = value
        self.stamp = stamp
        unknownThroughWinner = false
        box = nil
        set(rivals: rivals.sorted { $0.stamp > $1.stamp }, hidden: hidden.sorted(by: >), seen: seen, unknownThrough: unknownThrough)
    }

    /// Sets the parts kept beside the winner, with the winner already set.
    private mutating func set(rivals: [Write], hidden: [Stamp], seen: Predecessors, unknownThrough: Stamp?) {
        unknownThroughWinner = unknownThrough == stamp
        let boxed = unknownThroughWinner ? nil : unknownThrough
        if rivals.isEmpty, hidden.isEmpty, seen.entries.isEmpty, boxed == nil {
            box = nil
        } else {
            box = Box(rivals: rivals, hidden: hidden, seen: seen, unknownThrough: boxed)
        }
    }

    /// Whether the register keeps nothing but its winner: no rivals, no hidden writes, nothing
    /// seen, and no `unknownThrough` other than the winner's stamp (the store writes such a
    /// register's heads in one byte).
    package var keepsOnlyItsWinner: Bool { box == nil }

    /// Whether the register keeps nothing but its winner, which had known predecessors: no
    /// `unknownThrough` either (the store writes no heads for such a register).
    package var isPlain: Bool { box == nil && !unknownThroughWinner }

    /// The winning write.
    package var winner: Write { Write(value: value, stamp: stamp) }

    /// The heads: the winner, then its rivals.
    package var heads: [Write] { [winner] + rivals }

    /// Whether writes met that had not seen each other (more than one head).
    package var inConflict: Bool { box.map { !$0.rivals.isEmpty } ?? false }

    /// What a new write by `author` has seen of the register: every write it holds.
    package func predecessors(ofWriteBy author: ReplicaID) -> Predecessors {
        var seenNow = seen
        let uncovered = heads.map(\.stamp) + hidden
        seenNow.formUnion(Predecessors(uncovered.map { OperationID(replica: $0.replica, seq: $0.seq) }))
        return seenNow.removing(author)
    }

    /// Joins another register of the same field: the greater stamp wins, and the heads are the
    /// writes of either that no write of either had seen.
    package mutating func merge(_ other: LWWRegister) {
        let through = Self.later(unknownThrough, other.unknownThrough)
        if box == nil, other.box == nil {
            // The common case, without an array: the two winners, of which one lost (or both are
            // one), and no write that either had seen by its predecessors. A later write of the
            // loser's own author is the winner, which covers it.
            var loser: Write?
            if other.stamp > stamp {
                // A later write of the loser's own author covers it (rule 3).
                if stamp.replica != other.stamp.replica || stamp.seq >= other.stamp.seq { loser = winner }
                value = other.value
                stamp = other.stamp
            } else if other.stamp != stamp, other.stamp.replica != stamp.replica || other.stamp.seq >= stamp.seq {
                loser = other.winner
            }
            if let loser {
                keep([loser], seen: .empty, unknownThrough: through)
            } else if through == nil || through == stamp {
                unknownThroughWinner = through != nil
            } else {
                set(rivals: [], hidden: [], seen: .empty, unknownThrough: through)
            }
            return
        }
        var joinedSeen = seen
        joinedSeen.formUnion(other.seen)
        // Every write that may be uncovered: the heads and hidden writes of either, and both winners.
        var candidates = rivals + other.rivals + (hidden + other.hidden).map { Write(value: .null, stamp: $0) }
        candidates.append(winner)
        candidates.append(other.winner)
        if other.stamp > stamp {
            value = other.value
            stamp = other.stamp
        }
        candidates.sort { $0.stamp > $1.stamp }
        let stamps = candidates.map(\.stamp)
        var kept: [Write] = []
        for (index, candidate) in candidates.enumerated() where candidate.stamp != stamp {
            // The same write twice. A hidden write's copy has no value, but it stays hidden: the
            // joined `unknownThrough` is at least the one that hid it.
            if index > 0, stamps[index - 1] == candidate.stamp { continue }
            if !Self.isSeen(candidate.stamp, by: joinedSeen, among: stamps) { kept.append(candidate) }
        }
        keep(kept, seen: joinedSeen, unknownThrough: through)
    }

    private static func later(_ a: Stamp?, _ b: Stamp?) -> Stamp? {
        guard let a else { return b }
        guard let b else { return a }
        return max(a, b)
    }

    /// Keeps `seen`, `unknownThrough` and `kept`, the writes other than the winner that no write
    /// held had seen by its predecessors or its author (greatest first): rivals, or hidden when a
    /// write of unknown predecessors is stamped after them.
    private mutating func keep(_ kept: [Write], seen: Predecessors, unknownThrough: Stamp?) {
        var rivals: [Write] = []
        var hidden: [Stamp] = []
        for write in kept {
            if let unknownThrough, write.stamp < unknownThrough { hidden.append(write.stamp) } else { rivals.append(write) }
        }
        set(rivals: rivals, hidden: hidden, seen: seen, unknownThrough: unknownThrough)
    }

    /// Whether a write held had seen the write stamped `stamp` by its predecessors (`seen`) or as
    /// a later write of the same author. `uncovered` holds at least the writes no write held had so
    /// seen; a later write of the same author that is not among them was seen by one, and so its
    /// earlier one is covered by `seen` or by that one's author.
    private static func isSeen(_ stamp: Stamp, by seen: Predecessors, among uncovered: [Stamp]) -> Bool {
        if seen.seq(of: stamp.replica) >= stamp.seq { return true }
        return uncovered.contains { $0.replica == stamp.replica && $0.seq > stamp.seq }
    }

    /// Equal registers hold the same winner, heads, hidden writes, `seen` and `unknownThrough`.
    public static func == (lhs: LWWRegister, rhs: LWWRegister) -> Bool {
        lhs.value == rhs.value && lhs.stamp == rhs.stamp && lhs.unknownThrough == rhs.unknownThrough
            && lhs.rivals == rhs.rivals && lhs.hidden == rhs.hidden && lhs.seen == rhs.seen
    }

    /// Hashes what `==` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(value)
        hasher.combine(stamp)
        hasher.combine(unknownThrough)
        hasher.combine(rivals)
        hasher.combine(hidden)
        hasher.combine(seen)
    }

    /// A copy with `other` merged in, by `merge(_:)`.
    package func merging(_ other: LWWRegister) -> LWWRegister {
        var copy = self
        copy.merge(other)
        return copy
    }
}

extension Optional where Wrapped == LWWRegister {
    @inline(__always)
    mutating func merge(_ write: LWWRegister) {
        // A pattern match rather than `== nil`, which copies the register through a generic witness.
        if case .some = self {
            self!.merge(write)
        } else {
            self = write
        }
    }
}
