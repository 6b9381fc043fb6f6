/// One author's seqs, as disjoint ranges in ascending order, none adjacent to the next: the list
/// under `SeqRanges`, and what a write transaction holds of an author's log above its gap-free
/// prefix.
///
/// Operations travel in runs of ascending seqs, so the common insert extends or follows the last
/// range in O(1); any other insert finds its place by binary search. The ranges are a slice, so
/// that `removeFirst` takes O(1): a store that fills the gaps of its log in ascending order
/// absorbs the runs above them one at a time from the front.
package struct SeqRuns: Hashable, Sendable {
    private var runs: ArraySlice<ClosedRange<UInt64>> = []

    /// No seq.
    package init() {}

    /// The seqs of `ranges`, given in any order.
    package init(_ ranges: some Sequence<ClosedRange<UInt64>>) {
        let sorted = ranges.sorted { $0.lowerBound < $1.lowerBound }
        var merged: [ClosedRange<UInt64>] = []
        merged.reserveCapacity(sorted.count)
        for range in sorted {
            if let last = merged.last, Self.touches(last.upperBound, range.lowerBound) {
                merged[merged.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
        runs = merged[...]
    }

    package var isEmpty: Bool { runs.isEmpty }

    /// The ranges, ascending.
    package var ranges: [ClosedRange<UInt64>] { Array(runs) }

    package var first: ClosedRange<UInt64>? { runs.first }

    package var last: ClosedRange<UInt64>? { runs.last }

    /// How many seqs the runs hold.
    package var count: UInt64 { runs.reduce(0) { $0 + ($1.upperBound - $1.lowerBound + 1) } }

    /// - Complexity: O(1) for a seq in or after the last range, O(log *r*) otherwise.
    package func contains(_ seq: UInt64) -> Bool {
        guard let last = runs.last else { return false }
        if seq >= last.lowerBound { return seq <= last.upperBound }
        let index = firstIndex(after: seq)
        return index > runs.startIndex && runs[index - 1].contains(seq)
    }

    /// Adds every seq of `range`.
    /// - Complexity: O(1) when `range` starts after the last range; when it joins runs, O(log *r*)
    ///   plus the runs on the shorter side of it; O(*r*) when it falls between two runs.
    package mutating func insert(_ range: ClosedRange<UInt64>) {
        if let last = runs.last, last.upperBound < range.lowerBound {
            if last.upperBound == range.lowerBound - 1 {
                runs[runs.endIndex - 1] = last.lowerBound...range.upperBound
            } else {
                runs.append(range)
            }
            return
        }
        // The ranges that overlap or touch `range` are runs[first..<end]: they merge with it.
        var first = firstIndex(after: range.lowerBound)
        if first > runs.startIndex, Self.touches(runs[first - 1].upperBound, range.lowerBound) { first -= 1 }
        var end = first
        var merged = range
        while end < runs.endIndex, Self.touches(merged.upperBound, runs[end].lowerBound) {
            merged = min(merged.lowerBound, runs[end].lowerBound)...max(merged.upperBound, runs[end].upperBound)
            end += 1
        }
        let joined = end - first - 1
        if joined < 0 {
            runs.insert(merged, at: first)
        } else if joined == 0 {
            runs[first] = merged
        } else if first - runs.startIndex < runs.endIndex - end {
            // Fewer runs before than after: move those before up over the joined ones, and drop
            // the front, so that filling gaps in ascending order does not move every later run.
            runs[end - 1] = merged
            for index in stride(from: first - 1, through: runs.startIndex, by: -1) { runs[index + joined] = runs[index] }
            runs.removeFirst(joined)
        } else {
            runs[first] = merged
            runs.removeSubrange((first + 1)..<end)
        }
    }

    /// Takes the lowest range out, in O(1).
    package mutating func removeFirst() -> ClosedRange<UInt64> { runs.removeFirst() }

    /// Removes every seq of `range`.
    package mutating func remove(_ range: ClosedRange<UInt64>) {
        var kept: [ClosedRange<UInt64>] = []
        kept.reserveCapacity(runs.count + 1)
        for held in runs {
            guard held.overlaps(range) else {
                kept.append(held)
                continue
            }
            if held.lowerBound < range.lowerBound { kept.append(held.lowerBound...(range.lowerBound - 1)) }
            if held.upperBound > range.upperBound { kept.append((range.upperBound + 1)...held.upperBound) }
        }
        runs = kept[...]
    }

    /// The seqs of `range` these runs lack, in ascending ranges.
    /// - Complexity: O(log *r*) plus the number of runs inside `range`.
    package func missing(in range: ClosedRange<UInt64>) -> [ClosedRange<UInt64>] {
        var gaps: [ClosedRange<UInt64>] = []
        var next = range.lowerBound
        // The first run that may hold `next`: the one before the first that starts after it.
        var index = firstIndex(after: next)
        if index > runs.startIndex { index -= 1 }
        while index < runs.endIndex {
            let held = runs[index]
            index += 1
            guard held.upperBound >= next else { continue }
            guard held.lowerBound <= range.upperBound else { break }
            if held.lowerBound > next { gaps.append(next...(held.lowerBound - 1)) }
            guard held.upperBound < range.upperBound else { return gaps }
            next = held.upperBound + 1
        }
        gaps.append(next...range.upperBound)
        return gaps
    }

    /// Whether these runs and `other` share a seq.
    /// - Complexity: O(*r* + *s*), walking both in step.
    package func overlaps(_ other: SeqRuns) -> Bool {
        var (mine, theirs) = (runs.startIndex, other.runs.startIndex)
        while mine < runs.endIndex, theirs < other.runs.endIndex {
            if runs[mine].overlaps(other.runs[theirs]) { return true }
            if runs[mine].upperBound < other.runs[theirs].upperBound { mine += 1 } else { theirs += 1 }
        }
        return false
    }

    /// How many seqs of `range` the runs hold.
    package func count(in range: ClosedRange<UInt64>) -> UInt64 {
        var total: UInt64 = 0
        for held in runs where held.overlaps(range) {
            total += min(held.upperBound, range.upperBound) - max(held.lowerBound, range.lowerBound) + 1
        }
        return total
    }

    /// The index of the first range that starts after `seq`.
    private func firstIndex(after seq: UInt64) -> Int {
        var low = runs.startIndex
        var high = runs.endIndex
        while low < high {
            let middle = low + (high - low) / 2
            if runs[middle].lowerBound <= seq { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Whether a range that ends at `upper` touches or overlaps one that starts at `lower` above it.
    private static func touches(_ upper: UInt64, _ lower: UInt64) -> Bool { upper == .max || upper + 1 >= lower }
}
