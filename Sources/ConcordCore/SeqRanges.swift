/// A set of operation ids kept as disjoint ranges of seqs per author: compact for operations that
/// travel in runs, as batches and bundles carry them. A peer session uses it to never send back
/// what it received; a shared folder, to know which operations its files hold (SPEC.md §14).
package struct SeqRanges: Hashable, Sendable {
    /// Per author, disjoint ranges in ascending order, none adjacent to the next.
    private var ranges: [ReplicaID: [ClosedRange<UInt64>]] = [:]

    /// The empty set.
    package init() {}

    /// Every seq of each replica up to its entry in `vector`.
    package init(upTo vector: VersionVector) {
        for (replica, seq) in vector.entries where seq > 0 { ranges[replica] = [1...seq] }
    }

    /// The ranges of `runs`, given in any order: sorted and merged once, in O(*n* log *n*) (where
    /// inserting them one by one in descending order would take O(*n*²)).
    package init(_ runs: some Sequence<(replica: ReplicaID, seqs: ClosedRange<UInt64>)>) {
        var byReplica: [ReplicaID: [ClosedRange<UInt64>]] = [:]
        for run in runs { byReplica[run.replica, default: []].append(run.seqs) }
        for (replica, var list) in byReplica {
            list.sort { $0.lowerBound < $1.lowerBound }
            var merged: [ClosedRange<UInt64>] = []
            merged.reserveCapacity(list.count)
            for range in list {
                if let last = merged.last, last.upperBound == .max || range.lowerBound <= last.upperBound + 1 {
                    merged[merged.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
                } else {
                    merged.append(range)
                }
            }
            ranges[replica] = merged
        }
    }

    /// Every range, replica by replica in id order, ascending.
    package var runs: [(replica: ReplicaID, seqs: ClosedRange<UInt64>)] {
        replicas.flatMap { replica in ranges[replica]!.map { (replica, $0) } }
    }

    /// Whether the set holds no operation.
    package var isEmpty: Bool { ranges.isEmpty }

    /// The authors with at least one seq, in id order.
    package var replicas: [ReplicaID] { ranges.keys.sorted() }

    /// The ranges of `replica`, ascending.
    package func ranges(of replica: ReplicaID) -> [ClosedRange<UInt64>] { ranges[replica] ?? [] }

    /// - Complexity: O(1) for a seq just after the author's last range, O(log *r* + *r*) otherwise.
    package mutating func insert(_ id: OperationID) {
        Self.insert(id.seq...id.seq, into: &ranges[id.replica, default: []])
    }

    /// Adds every seq of `range` for `replica`.
    package mutating func insert(_ range: ClosedRange<UInt64>, of replica: ReplicaID) {
        Self.insert(range, into: &ranges[replica, default: []])
    }

    /// Adds every operation of `other`.
    package mutating func formUnion(_ other: SeqRanges) {
        guard !other.isEmpty else { return }
        self = SeqRanges(runs + other.runs)
    }

    /// Removes every seq of `replica` from `seq` up.
    package mutating func remove(of replica: ReplicaID, from seq: UInt64) {
        guard var list = ranges[replica] else { return }
        list = list.compactMap { range in
            range.lowerBound >= seq ? nil : range.lowerBound...min(range.upperBound, seq - 1)
        }
        ranges[replica] = list.isEmpty ? nil : list
    }

    /// Removes every seq of `range` for `replica`.
    package mutating func remove(_ range: ClosedRange<UInt64>, of replica: ReplicaID) {
        guard let list = ranges[replica] else { return }
        var kept: [ClosedRange<UInt64>] = []
        for held in list {
            if held.upperBound < range.lowerBound || held.lowerBound > range.upperBound {
                kept.append(held)
                continue
            }
            if held.lowerBound < range.lowerBound { kept.append(held.lowerBound...(range.lowerBound - 1)) }
            if held.upperBound > range.upperBound { kept.append((range.upperBound + 1)...held.upperBound) }
        }
        ranges[replica] = kept.isEmpty ? nil : kept
    }

    /// These seqs but those `vector` covers.
    package func subtracting(_ vector: VersionVector) -> SeqRanges {
        var rest = self
        for (replica, seq) in vector.entries { rest.remove(1...seq, of: replica) }
        return rest
    }

    /// Whether the set holds `id`, by binary search of its author's ranges.
    package func contains(_ id: OperationID) -> Bool {
        guard let list = ranges[id.replica] else { return false }
        let index = Self.firstIndex(after: id.seq, in: list)
        return index > 0 && list[index - 1].contains(id.seq)
    }

    /// The seqs of `replica` in 1...`last` that this set lacks, in ascending ranges.
    package func missing(of replica: ReplicaID, through last: UInt64) -> [ClosedRange<UInt64>] {
        guard last > 0 else { return [] }
        var gaps: [ClosedRange<UInt64>] = []
        var next: UInt64 = 1
        for range in ranges[replica] ?? [] {
            guard next <= last else { break }
            if range.lowerBound > next { gaps.append(next...min(range.lowerBound - 1, last)) }
            next = max(next, range.upperBound == .max ? .max : range.upperBound + 1)
        }
        if next <= last { gaps.append(next...last) }
        return gaps
    }

    /// How many seqs the set holds.
    package var count: UInt64 {
        ranges.values.reduce(0) { total, list in list.reduce(total) { $0 + ($1.upperBound - $1.lowerBound + 1) } }
    }

    /// How many seqs of `replica` in `range` this set holds.
    package func count(of replica: ReplicaID, in range: ClosedRange<UInt64>) -> UInt64 {
        var total: UInt64 = 0
        for held in ranges[replica] ?? [] where held.overlaps(range) {
            total += min(held.upperBound, range.upperBound) - max(held.lowerBound, range.lowerBound) + 1
        }
        return total
    }

    /// The index of the first range that starts after `seq`.
    private static func firstIndex(after seq: UInt64, in list: [ClosedRange<UInt64>]) -> Int {
        var low = 0
        var high = list.count
        while low < high {
            let middle = (low + high) / 2
            if list[middle].lowerBound <= seq { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private static func insert(_ range: ClosedRange<UInt64>, into list: inout [ClosedRange<UInt64>]) {
        if let last = list.last, last.upperBound < range.lowerBound {
            // The common case: runs arrive in ascending seq order.
            if last.upperBound == range.lowerBound &- 1 {
                list[list.count - 1] = last.lowerBound...range.upperBound
            } else {
                list.append(range)
            }
            return
        }
        // The ranges that overlap or touch `range` are list[first..<end]: they merge with it.
        func touches(_ upper: UInt64, _ lower: UInt64) -> Bool { lower == 0 || upper >= lower - 1 }
        var first = firstIndex(after: range.lowerBound, in: list)
        if first > 0, touches(list[first - 1].upperBound, range.lowerBound) { first -= 1 }
        var end = first
        var merged = range
        while end < list.count, touches(merged.upperBound, list[end].lowerBound) {
            merged = min(merged.lowerBound, list[end].lowerBound)...max(merged.upperBound, list[end].upperBound)
            end += 1
        }
        list.replaceSubrange(first..<end, with: [merged])
    }
}

extension SeqRanges: CustomStringConvertible {
    /// `<replica>:<first>-<last>,<first>-<last> <replica>:…`, replicas in id order (SPEC.md §9).
    package var description: String {
        replicas.map { replica in
            replica.hex + ":" + ranges[replica]!.map { "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ",")
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
