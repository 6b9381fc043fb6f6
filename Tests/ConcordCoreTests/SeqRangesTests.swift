import ConcordCore
import Testing

private let replicaA = ReplicaID(high: 0xAAAA_0000_0000_0001, low: 1)
private let replicaB = ReplicaID(high: 0xBBBB_0000_0000_0002, low: 2)
private let replicaC = ReplicaID(high: 0xCCCC_0000_0000_0003, low: 3)

/// The seq ranges a peer session keeps of what it received, and a shared folder of what its files hold.
@Suite struct SeqRangesTests {
    @Test func itHoldsExactlyWhatWasInserted() {
        var random = SplitMix64(seed: 12)
        for _ in 0..<50 {
            var ranges = SeqRanges()
            var model: Set<UInt64> = []
            for _ in 0..<300 {
                let seq = UInt64.random(in: 1...120, using: &random)
                ranges.insert(OperationID(replica: replicaA, seq: seq))
                model.insert(seq)
            }
            for seq in UInt64(0)...130 {
                #expect(ranges.contains(OperationID(replica: replicaA, seq: seq)) == model.contains(seq))
                #expect(!ranges.contains(OperationID(replica: replicaB, seq: seq)))
            }
        }
        var ascending = SeqRanges()
        for seq in UInt64(1)...100_000 { ascending.insert(OperationID(replica: replicaC, seq: seq)) }
        #expect(ascending.contains(OperationID(replica: replicaC, seq: 77_777)))
        #expect(!ascending.contains(OperationID(replica: replicaC, seq: 100_001)))
        #expect(!ascending.contains(OperationID(replica: replicaC, seq: 0)))
    }

    /// Ranges inserted in any order, against a set of seqs: contents, missing seqs, text form.
    @Test func rangesMergeAndTellWhatIsMissing() {
        var random = SplitMix64(seed: 13)
        for _ in 0..<200 {
            var ranges = SeqRanges()
            var model: Set<UInt64> = []
            for _ in 0..<Int.random(in: 0...12, using: &random) {
                let low = UInt64.random(in: 1...60, using: &random)
                let high = low + UInt64.random(in: 0...8, using: &random)
                ranges.insert(low...high, of: replicaA)
                model.formUnion(low...high)
            }
            let list = ranges.ranges(of: replicaA)
            // Disjoint, ascending, none touching the next.
            for (left, right) in zip(list, list.dropFirst()) { #expect(left.upperBound + 1 < right.lowerBound, "\(list)") }
            #expect(Set(list.flatMap { Array($0) }) == model)
            let through = UInt64.random(in: 0...80, using: &random)
            let missing = Set(ranges.missing(of: replicaA, through: through).flatMap { Array($0) })
            #expect(missing == Set((UInt64(1)...max(1, through)).filter { through > 0 && !model.contains($0) }), "\(list) through \(through)")
            #expect(SeqRanges(ranges.description) == ranges, "\(ranges)")
            let low = UInt64.random(in: 1...70, using: &random)
            let window = low...(low + UInt64.random(in: 0...20, using: &random))
            #expect(ranges.count(of: replicaA, in: window) == UInt64(model.filter { window.contains($0) }.count), "\(list) in \(window)")
            let clipped = ranges.clipped(to: VersionVector([replicaA: through]))
            #expect(Set(clipped.ranges(of: replicaA).flatMap { Array($0) }) == model.filter { $0 <= through }, "\(list) through \(through)")
        }
        var two = SeqRanges(upTo: VersionVector([replicaB: 5, replicaC: 0]))
        two.insert(OperationID(replica: replicaA, seq: 3))
        #expect(two.description == "\(replicaA.hex):3-3 \(replicaB.hex):1-5")
        #expect(two.missing(of: replicaA, through: 4) == [1...2, 4...4])
        #expect(two.missing(of: replicaC, through: 2) == [1...2])
        var other = SeqRanges()
        other.insert(1...2, of: replicaA)
        two.formUnion(other)
        #expect(two.ranges(of: replicaA) == [1...3])
        for bad in ["x", "\(replicaA.hex):", "\(replicaA.hex):0-3", "\(replicaA.hex):5-3", "\(replicaA.hex):1-2:3"] {
            #expect(SeqRanges(bad) == nil, "\(bad)")
        }
        #expect(SeqRanges("") == SeqRanges())
    }

    /// One author's runs, against a set of seqs, through inserts, removals and lookups in any order.
    @Test func runsHoldExactlyTheirSeqs() {
        var random = SplitMix64(seed: 14)
        for _ in 0..<300 {
            var runs = SeqRuns()
            var model: Set<UInt64> = []
            for _ in 0..<Int.random(in: 0...20, using: &random) {
                let low = UInt64.random(in: 1...80, using: &random)
                let range = low...(low + UInt64.random(in: 0...6, using: &random))
                switch UInt64.random(in: 0..<10, using: &random) {
                case 0:
                    runs.remove(range)
                    model.subtract(range)
                case 1 where !runs.isEmpty:
                    let first = runs.removeFirst()
                    #expect(first.lowerBound == model.min() && !model.contains(first.upperBound + 1), "\(first) of \(model.sorted())")
                    model.subtract(first)
                default:
                    runs.insert(range)
                    model.formUnion(range)
                }
                let list = runs.ranges
                for (left, right) in zip(list, list.dropFirst()) { #expect(left.upperBound + 1 < right.lowerBound, "\(list)") }
                #expect(runs.count == UInt64(model.count))
            }
            for seq in UInt64(0)...100 { #expect(runs.contains(seq) == model.contains(seq), "\(seq) in \(runs.ranges)") }
            let low = UInt64.random(in: 1...90, using: &random)
            let window = low...(low + UInt64.random(in: 0...30, using: &random))
            let missing = runs.missing(in: window)
            #expect(Set(missing.flatMap { Array($0) }) == Set(window.filter { !model.contains($0) }), "\(runs.ranges) in \(window)")
            for (left, right) in zip(missing, missing.dropFirst()) { #expect(left.upperBound + 1 < right.lowerBound) }
            #expect(!runs.overlaps(SeqRuns(missing)) && !SeqRuns(missing).overlaps(runs))
            #expect(runs.overlaps(SeqRuns([window])) == model.contains { window.contains($0) }, "\(runs.ranges) and \(window)")
            #expect(SeqRuns(runs.ranges.reversed()) == runs)
        }
    }

    /// A store that held every other seq above a gap, and fills the gaps in ascending order: each
    /// fill joins two runs, and the lookups before it stay logarithmic (they sorted every run once).
    @Test func fillingManyGapsInOrderStaysFast() {
        let count: UInt64 = 200_000
        var runs = SeqRuns((1...count).map { 2 * $0 ... 2 * $0 })
        for gap in stride(from: UInt64(3), through: 2 * count - 1, by: 2) {
            #expect(runs.missing(in: gap...gap) == [gap...gap])
            runs.insert(gap...gap)
        }
        #expect(runs.ranges == [2...(2 * count)])
        #expect(runs.missing(in: 1...(2 * count + 1)) == [1...1, (2 * count + 1)...(2 * count + 1)])
    }
}
