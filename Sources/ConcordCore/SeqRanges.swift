/// A set of operation ids kept as disjoint ranges of seqs per author: compact for operations that
/// travel in runs, as batches and bundles carry them. A peer session uses it to never send back
/// what it received; a shared folder, to know which operations its files hold (SPEC.md §14).
package struct SeqRanges: Hashable, Sendable {
    /// Per author with at least one seq, its runs.
    private var runsByReplica: [ReplicaID: SeqRuns] = [:]

    /// The empty set.
    package init() {}

    /// Every seq of each replica up to its entry in `vector`.
    package init(upTo vector: VersionVector) {
        for (replica, seq) in vector.entries where seq > 0 { runsByReplica[replica] = SeqRuns([1...seq]) }
    }

    /// The ranges of `runs`, given in any order: sorted and merged once, in O(*n* log *n*) (where
    /// inserting them one by one in descending order would take O(*n*²)).
    package init(_ runs: some Sequence<(replica: ReplicaID, seqs: ClosedRange<UInt64>)>) {
        var byReplica: [ReplicaID: [ClosedRange<UInt64>]] = [:]
        for run in runs { byReplica[run.replica, default: []].append(run.seqs) }
        runsByReplica = byReplica.mapValues { SeqRuns($0) }
    }

    /// Every range, replica by replica in id order, ascending.
    package var runs: [(replica: ReplicaID, seqs: ClosedRange<UInt64>)] {
        replicas.flatMap { replica in runsByReplica[replica]!.ranges.map { (replica, $0) } }
    }

    /// Whether the set holds no operation.
    package var isEmpty: Bool { runsByReplica.isEmpty }

    /// The authors with at least one seq, in id order.
    package var replicas: [ReplicaID] { runsByReplica.keys.sorted() }

    /// The ranges of `replica`, ascending.
    package func ranges(of replica: ReplicaID) -> [ClosedRange<UInt64>] { runsByReplica[replica]?.ranges ?? [] }

    /// - Complexity: O(1) for a seq just after the author's last range, O(log *r* + *r*) otherwise.
    package mutating func insert(_ id: OperationID) {
        runsByReplica[id.replica, default: SeqRuns()].insert(id.seq...id.seq)
    }

    /// Adds every seq of `range` for `replica`.
    package mutating func insert(_ range: ClosedRange<UInt64>, of replica: ReplicaID) {
        runsByReplica[replica, default: SeqRuns()].insert(range)
    }

    /// Adds every operation of `other`.
    package mutating func formUnion(_ other: SeqRanges) {
        guard !other.isEmpty else { return }
        self = SeqRanges(runs + other.runs)
    }

    /// Removes every seq of `replica` from `seq` up.
    package mutating func remove(of replica: ReplicaID, from seq: UInt64) {
        remove(seq...UInt64.max, of: replica)
    }

    /// Removes every seq of `range` for `replica`.
    package mutating func remove(_ range: ClosedRange<UInt64>, of replica: ReplicaID) {
        guard var list = runsByReplica[replica] else { return }
        list.remove(range)
        runsByReplica[replica] = list.isEmpty ? nil : list
    }

    /// Whether this set and `other` share an operation.
    package func overlaps(_ other: SeqRanges) -> Bool {
        runsByReplica.contains { replica, runs in other.runsByReplica[replica].map(runs.overlaps) ?? false }
    }

    /// The seqs of this set that `vector` covers.
    package func clipped(to vector: VersionVector) -> SeqRanges {
        SeqRanges(runs.compactMap { run in
            run.seqs.lowerBound <= vector[run.replica] ? (run.replica, run.seqs.lowerBound...min(run.seqs.upperBound, vector[run.replica])) : nil
        })
    }

    /// These seqs but those `vector` covers.
    package func subtracting(_ vector: VersionVector) -> SeqRanges {
        var rest = self
        for (replica, seq) in vector.entries where seq > 0 { rest.remove(1...seq, of: replica) }
        return rest
    }

    /// Whether the set holds `id`.
    package func contains(_ id: OperationID) -> Bool {
        runsByReplica[id.replica]?.contains(id.seq) ?? false
    }

    /// The seqs of `replica` in 1...`last` that this set lacks, in ascending ranges.
    package func missing(of replica: ReplicaID, through last: UInt64) -> [ClosedRange<UInt64>] {
        guard last > 0 else { return [] }
        return runsByReplica[replica]?.missing(in: 1...last) ?? [1...last]
    }

    /// How many seqs the set holds.
    package var count: UInt64 { runsByReplica.values.reduce(0) { $0 + $1.count } }

    /// How many seqs of `replica` in `range` this set holds.
    package func count(of replica: ReplicaID, in range: ClosedRange<UInt64>) -> UInt64 {
        runsByReplica[replica]?.count(in: range) ?? 0
    }
}

extension SeqRanges: CustomStringConvertible {
    /// `<replica>:<first>-<last>,<first>-<last> <replica>:…`, replicas in id order (SPEC.md §9).
    package var description: String {
        replicas.map { replica in
            replica.hex + ":" + runsByReplica[replica]!.ranges.map { "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ",")
        }.joined(separator: " ")
    }

    /// Reads `description`'s form back; nil if `text` is not in it.
    package init?(_ text: String) {
        self.init()
        for entry in text.split(separator: " ") {
            let parts = entry.split(separator: ":")
            guard parts.count == 2, let replica = ReplicaID(hex: String(parts[0])) else { return nil }
            for range in parts[1].split(separator: ",") {
                let bounds = range.split(separator: "-")
                guard bounds.count == 2, let low = UInt64(bounds[0]), let high = UInt64(bounds[1]), 1 <= low, low <= high else { return nil }
                insert(low...high, of: replica)
            }
        }
    }
}
