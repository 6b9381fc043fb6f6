import ConcordCore
import Testing
@testable import ConcordPeer

/// The seq ranges a session keeps of what it received.
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
}
