/// What the writer of an assign had seen of its register, when it wrote (SPEC.md §5.1,
/// "Predecessors"): for each *other* replica that had written the register, the greatest seq of
/// its writes to it that the writer held, or that a write it held had seen in turn.
///
/// A replica has always seen its own earlier writes, so the author is never listed. An assign
/// whose writer had seen nothing of the register (the first write of a field) has predecessors
/// `.empty`; one written by a build older than predecessors has none known (`Op.predecessors` is nil).
public struct Predecessors: Hashable, Sendable {
    /// One entry per replica, ascending by replica id, each with a seq of at least 1.
    public private(set) var entries: [OperationID]

    /// Nothing seen.
    public static let empty = Predecessors(sortedEntries: [])

    /// The predecessors of `entries`, in any order: a replica listed twice keeps its greatest seq,
    /// and entries of seq 0 are left out.
    public init(_ entries: some Sequence<OperationID>) {
        var sorted = entries.filter { $0.seq > 0 }.sorted()
        var kept = 0
        for entry in sorted {
            if kept > 0, sorted[kept - 1].replica == entry.replica {
                sorted[kept - 1] = entry
            } else {
                sorted[kept] = entry
                kept += 1
            }
        }
        sorted.removeLast(sorted.count - kept)
        self.entries = sorted
    }

    /// Entries already ascending by replica, each once, each of seq ≥ 1 (as decoded and checked).
    package init(sortedEntries: [OperationID]) {
        entries = sortedEntries
    }

    /// The greatest seq of `replica`'s writes seen; 0 when none.
    @inline(__always)
    public func seq(of replica: ReplicaID) -> UInt64 {
        for entry in entries where entry.replica == replica { return entry.seq }
        return 0
    }

    /// Whether the write `id` was seen: its author's entry reaches its seq.
    @inline(__always)
    public func covers(_ id: OperationID) -> Bool { seq(of: id.replica) >= id.seq }

    /// Joins `other` in: per replica, the greater seq.
    public mutating func formUnion(_ other: Predecessors) {
        guard !other.entries.isEmpty else { return }
        guard !entries.isEmpty else {
            self = other
            return
        }
        var joined: [OperationID] = []
        joined.reserveCapacity(entries.count + other.entries.count)
        var left = entries[...]
        var right = other.entries[...]
        while let l = left.first, let r = right.first {
            if l.replica == r.replica {
                joined.append(l.seq >= r.seq ? l : r)
                left.removeFirst()
                right.removeFirst()
            } else if l.replica < r.replica {
                joined.append(l)
                left.removeFirst()
            } else {
                joined.append(r)
                right.removeFirst()
            }
        }
        joined.append(contentsOf: left)
        joined.append(contentsOf: right)
        entries = joined
    }

    /// `self` without `replica`'s entry.
    public func removing(_ replica: ReplicaID) -> Predecessors {
        guard entries.contains(where: { $0.replica == replica }) else { return self }
        return Predecessors(sortedEntries: entries.filter { $0.replica != replica })
    }
}
