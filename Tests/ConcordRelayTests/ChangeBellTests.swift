import Foundation
import Testing
@testable import ConcordRelayProtocol

/// `ChangeBell`, which wakes a relay's listings that wait for their space to change. A waiter that
/// read its space before a ring it did not hear must not miss it; and, so that thousands of
/// waiting listings do not read their spaces again at every upload to any space, a ring of one
/// space must not wake the waiters of the others (it did: the load benchmark's 2,500 listings
/// then kept a node's CPU busy, with latencies of seconds at 100 uploads a second). Whether a
/// wait was rung is what `wait` returns, not a time: beside other tests the shared threads can be
/// busy for a minute, and the timeouts are far longer than that.
@Suite struct ChangeBellTests {
    @Test func aRingWakesTheWaitersOfItsSpace() async {
        let bell = ChangeBell()
        let rings = bell.rings(of: "a")
        let waiter = Task { await bell.wait(for: "a", after: rings, upTo: .seconds(600)) }
        // Most likely registered by now; if not, the ring wakes it as it registers.
        try? await Task.sleep(for: .milliseconds(100))
        bell.ring("a")
        #expect(await waiter.value)
    }

    @Test func aRingMissedBeforeWaitingWakesAtOnce() async {
        let bell = ChangeBell()
        let rings = bell.rings(of: "a")
        bell.ring("a")
        #expect(await bell.wait(for: "a", after: rings, upTo: .seconds(600)))
    }

    @Test func ringingEverySpaceWakesEachWaiter() async {
        let bell = ChangeBell()
        let rings = bell.rings(of: "b")
        bell.ringAll()
        #expect(bell.rings(of: "b") != rings)
        #expect(await bell.wait(for: "b", after: rings, upTo: .seconds(600)))
    }

    /// Spaces are counted in buckets, so a ring of one space may change the count of another that
    /// shares its bucket (1 in 1,024). Of 20 other spaces, those it does not change wait on.
    @Test func aRingOfOneSpaceLeavesTheWaitersOfOthersWaiting() async {
        let bell = ChangeBell()
        let others = (0..<20).map { "space-\($0)" }
        let before = Dictionary(uniqueKeysWithValues: others.map { ($0, bell.rings(of: $0)) })
        bell.ring("rung")
        let untouched = others.filter { bell.rings(of: $0) == before[$0] }
        #expect(untouched.count >= 15, "a ring of one space changed the counts of \(20 - untouched.count) of 20 others")
        guard let other = untouched.first else { return }
        #expect(await bell.wait(for: other, after: before[other]!, upTo: .milliseconds(300)) == false, "the waiter of another space was woken")
    }
}
