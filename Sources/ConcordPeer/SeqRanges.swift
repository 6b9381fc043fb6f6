import ConcordCore

/// A set of operation ids kept as disjoint ranges of seqs per author: compact for operations that
/// arrive in runs, as batches carry them. A session uses it to never send back what it received.
struct SeqRanges: Sendable {
    private var ranges: [ReplicaID: [ClosedRange<UInt64>]] = [:]

    /// - Complexity: O(1) for a seq just after the author's last range, O(log *r* + *r*) otherwise.
    mutating func insert(_ id: OperationID) {
        Self.insert(id.seq, into: &ranges[id.replica, default: []])
    }

    func contains(_ id: OperationID) -> Bool {
        guard let list = ranges[id.replica] else { return false }
        let index = Self.firstIndex(after: id.seq, in: list)
        return index > 0 && list[index - 1].contains(id.seq)
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

    private static func insert(_ seq: UInt64, into list: inout [ClosedRange<UInt64>]) {
        if let last = list.last, last.upperBound < seq {
            // The common case: runs arrive in ascending seq order.
            if last.upperBound == seq &- 1 {
                list[list.count - 1] = last.lowerBound...seq
            } else {
                list.append(seq...seq)
            }
            return
        }
        let index = firstIndex(after: seq, in: list)
        if index > 0, list[index - 1].contains(seq) { return }
        let joinsPrevious = index > 0 && list[index - 1].upperBound == seq &- 1
        let joinsNext = index < list.count && list[index].lowerBound &- 1 == seq
        switch (joinsPrevious, joinsNext) {
        case (true, true):
            list[index - 1] = list[index - 1].lowerBound...list[index].upperBound
            list.remove(at: index)
        case (true, false):
            list[index - 1] = list[index - 1].lowerBound...seq
        case (false, true):
            list[index] = seq...list[index].upperBound
        case (false, false):
            list.insert(seq...seq, at: index)
        }
    }
}
