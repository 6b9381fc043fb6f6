import ConcordCore
import Foundation
import PropertyBased
import Testing

@Suite("Hybrid logical clock")
struct ClockTests {
    static let maxRaw = Timestamp(physicalMillis: Timestamp.maxPhysicalMillis, logical: .max).rawValue

    /// Property 8: the timestamps one clock issues strictly increase whatever the wall clock does
    /// (backwards, stuck, jumping), and follow the wall clock whenever it is ahead.
    @Test func ticksStrictlyIncrease() async {
        let start = zip(Gen<UInt64>.value(in: 0...2_000_000), Gen<UInt16>.value(in: 0...UInt16.max))
        let readings = zip(Gen.int(in: 0...5), Gen<UInt64>.value(in: 0...3_000_000)).array(of: 1...60)
        await propertyCheck(count: 300, input: start, readings) { start, readings in
            var clock = HybridLogicalClock(latest: ts(start.0, start.1))
            var previous = clock.latest
            var wall: UInt64 = 1_000_000
            for (mode, amount) in readings {
                switch mode {
                case 0: wall = amount  // anywhere, often backwards
                case 1: break  // stuck
                case 2: wall &+= 1
                case 3: wall = wall > 1_000 ? wall - 1_000 : 0
                default: wall &+= amount % 5_000
                }
                do {
                    let stamp = try clock.tick(wallMillis: wall)
                    #expect(stamp > previous, "wall \(wall): \(stamp) after \(previous)")
                    #expect(stamp == clock.latest)
                    #expect(stamp.isValid)
                    // The clock takes the wall clock when it is ahead, otherwise latest + 1.
                    let expected = Timestamp(physicalMillis: wall, logical: 0) > previous
                        ? Timestamp(physicalMillis: wall, logical: 0) : Timestamp(rawValue: previous.rawValue + 1)
                    #expect(stamp == expected)
                    previous = stamp
                } catch {
                    Issue.record("tick failed far from the end of time: \(error)")
                }
            }
        }
    }

    @Test func observeMovesTheClockPastRemoteTimestamps() async {
        let stamp = Gen<UInt64>.value(in: 0...(1 << 40)).map { Timestamp(rawValue: $0) }
        await propertyCheck(count: 300, input: stamp, stamp.array(of: 0...10), Gen<UInt64>.value(in: 0...(1 << 24))) { local, remotes, wall in
            var clock = HybridLogicalClock(latest: local)
            for remote in remotes { clock.observe(remote) }
            #expect(clock.latest == ([local] + remotes).max()!)
            let next = try clock.tick(wallMillis: wall)
            for remote in remotes { #expect(next > remote) }
            #expect(next > local)
        }
    }

    /// Property 8 on replicas: over random scripts, each replica's operations have strictly
    /// increasing timestamps and contiguous seqs, and each is later than every timestamp the
    /// replica had issued or merged before it.
    @Test func replicaTimestampsFollowEverythingSeen() async {
        await propertyCheck(count: 300, input: ScriptGen.script) { script in
            let world = World.run(script)
            #expect(world.clockViolations.isEmpty, "\(world.clockViolations)")
            for replica in world.replicas {
                let own = replica.operations.values.filter { $0.id.replica == replica.id }.sorted { $0.id < $1.id }
                #expect(own.map(\.id.seq) == (0..<own.count).map { UInt64($0 + 1) })
                #expect(zip(own, own.dropFirst()).allSatisfy { $0.timestamp < $1.timestamp })
                #expect(replica.clock.latest == replica.operations.values.map(\.timestamp).max() ?? .zero)
            }
        }
    }

    /// A replica whose wall clock is far behind still issues timestamps after those it merged.
    @Test func lateReplicaStampsAfterMergedOperations() throws {
        let ref = Universe.records[0]
        var ahead = Replica(id: Universe.replicaIDs[0])
        var behind = Replica(id: Universe.replicaIDs[1])
        try ahead.perform(.createReminder(ReminderDraft(title: "from the future")), on: ref, wallMillis: 5_000_000)
        try behind.merge(ahead.operations(), wallMillis: 1_000)
        let edit = try behind.perform(.editReminder(ReminderPatch(title: "later")), on: ref, wallMillis: 1_000)
        #expect(edit.count == 1)
        #expect(edit[0].timestamp > ahead.operations().map(\.timestamp).max()!)
        try ahead.merge(behind.operations())
        // The later edit wins although its wall clock was behind.
        #expect(ahead.reminders[0].title == "later")
    }

    @Test func logicalCounterCarriesIntoMilliseconds() throws {
        var clock = HybridLogicalClock(latest: ts(1_000, .max))
        #expect(try clock.tick(wallMillis: 5) == ts(1_001, 0))
        #expect(try clock.tick(wallMillis: 1_001) == ts(1_001, 1))
        #expect(try clock.tick(wallMillis: 2_000) == ts(2_000, 0))
    }

    @Test func wallClockBeyondYear9999IsClamped() throws {
        var clock = HybridLogicalClock()
        let stamp = try clock.tick(wallMillis: .max)
        #expect(stamp == ts(Timestamp.maxPhysicalMillis, 0))
        #expect(stamp.isValid)
        #expect(try clock.tick(wallMillis: .max) == ts(Timestamp.maxPhysicalMillis, 1))
    }

    @Test func tickAtTheMaximumThrowsExhausted() throws {
        var clock = HybridLogicalClock(latest: ts(Timestamp.maxPhysicalMillis, .max - 1))
        #expect(try clock.tick(wallMillis: 0) == ts(Timestamp.maxPhysicalMillis, .max))
        #expect(throws: ClockError.exhausted) { try clock.tick(wallMillis: 0) }
        #expect(throws: ClockError.exhausted) { try clock.tick(wallMillis: .max) }
        #expect(throws: ClockError.exhausted) { try clock.tick(wallMillis: Timestamp.maxPhysicalMillis) }
        // A refused tick leaves the clock where it was.
        #expect(clock.latest == ts(Timestamp.maxPhysicalMillis, .max))
        #expect(clock.latest.rawValue == ClockTests.maxRaw)

        var broken = HybridLogicalClock(latest: Timestamp(rawValue: .max))
        #expect(throws: ClockError.exhausted) { try broken.tick(wallMillis: .max) }
        #expect(!Timestamp(physicalMillis: Timestamp.maxPhysicalMillis + 1, logical: 0).isValid)
        #expect(Timestamp(physicalMillis: Timestamp.maxPhysicalMillis, logical: .max).isValid)
    }

    @Test func replicaAtTheEndOfTimeRefusesChanges() throws {
        let ref = Universe.records[0]
        var replica = Replica(id: Universe.replicaIDs[0], clock: HybridLogicalClock(latest: ts(Timestamp.maxPhysicalMillis, .max)))
        #expect(throws: ClockError.exhausted) {
            try replica.perform(.createReminder(ReminderDraft(title: "t")), on: ref, wallMillis: 1_000)
        }
        #expect(replica.operations.isEmpty)
        #expect(replica.records.isEmpty)
    }

    /// BUG (Sources/ConcordCore/Replica.swift:22-33): `perform` inserts each operation as soon as
    /// its timestamp is ticked, so when the clock runs out in the middle of a multi-operation change
    /// it throws but keeps the operations already made: a half-created reminder (title and notes,
    /// no due/completed/priority) and a consumed seq range. The SQLite store plans the same change
    /// in a transaction and rolls it all back, so the model and the store disagree.
    /// Fix: tick every timestamp first (on a copy of the clock), then insert the operations and
    /// commit the clock only when all ticks succeeded.
    @Test func performIsAtomicWhenTheClockRunsOutMidChange() throws {
        let ref = Universe.records[0]
        let start = HybridLogicalClock(latest: ts(Timestamp.maxPhysicalMillis, .max - 2))
        var replica = Replica(id: Universe.replicaIDs[0], clock: start)
        #expect(throws: ClockError.exhausted) {
            // Five operations (title, notes, due, completed, priority) but only two timestamps left.
            try replica.perform(.createReminder(ReminderDraft(title: "t")), on: ref, wallMillis: 1_000)
        }
        #expect(replica.operations.isEmpty, "a refused change left \(replica.operations.count) operations behind")
        #expect(replica.records[ref] == nil)
        #expect(replica.versionVector == VersionVector())
        #expect(replica.clock == start)
    }

    @Test func mergeRefusesTimestampsPastYear9999() throws {
        let ref = Universe.records[0]
        var replica = Replica(id: Universe.replicaIDs[0])
        let good = op(Universe.replicaIDs[1], 1, at: ts(Timestamp.maxPhysicalMillis, .max), ref, .assign(.title, .string("last")))
        let bad = op(Universe.replicaIDs[1], 2, at: ts(Timestamp.maxPhysicalMillis + 1, 0), ref, .assign(.title, .string("too late")))
        #expect(throws: InvalidOperation.self) { try replica.merge([good, bad]) }
        // Nothing of a refused batch is applied, and the clock does not move.
        #expect(replica.operations.isEmpty)
        #expect(replica.clock.latest == .zero)
        try replica.merge([good])
        #expect(replica.clock.latest == good.timestamp)
        #expect(throws: ClockError.exhausted) { try replica.perform(.editReminder(ReminderPatch(title: "x")), on: ref, wallMillis: 0) }
    }

    @Test func mergeReportsFarFutureTimestamps() throws {
        let ref = Universe.records[0]
        let day = HybridLogicalClock.farFutureThresholdMillis
        let wall: UInt64 = 1_000_000_000
        let near = op(Universe.replicaIDs[1], 1, at: ts(wall + day), ref, .assign(.title, .string("a")))
        let far = op(Universe.replicaIDs[1], 2, at: ts(wall + day + 1), ref, .assign(.title, .string("b")))
        let farther = op(Universe.replicaIDs[2], 1, at: ts(wall + 2 * day), ref, .assign(.notes, .null))
        var replica = Replica(id: Universe.replicaIDs[0])
        let report = try replica.merge([near, farther, far], wallMillis: wall)
        #expect(report.farFutureTimestamp == farther.timestamp)
        #expect(report.newOperationCount == 3)
        #expect(report.newOperations == [Universe.replicaIDs[1]: 2, Universe.replicaIDs[2]: 1])
        #expect(report.touchedRecords == [ref])
        var quiet = Replica(id: Universe.replicaIDs[0])
        #expect(try quiet.merge([near], wallMillis: wall).farFutureTimestamp == nil)
        // Without a wall-clock reading nothing is reported.
        var unknownTime = Replica(id: Universe.replicaIDs[0])
        #expect(try unknownTime.merge([far]).farFutureTimestamp == nil)
    }

    /// BUG (Sources/ConcordCore/Replica.swift:42-56): SPEC §3 says "when a merge leaves `latest`
    /// more than 24 hours ahead of the local wall clock, the merge reports it" (the store reports
    /// `clock.latest` whenever a merge with new operations leaves it that far ahead). The model only
    /// reports a far-future timestamp carried by an operation of *this* merge, so once a far-future
    /// operation has been merged, later merges report nothing although the clock is still days
    /// ahead (and stamps every local change there). Fix: after the loop, if new operations arrived
    /// and `clock.latest.physicalMillis > wallMillis + threshold`, set
    /// `report.farFutureTimestamp = clock.latest`.
    @Test func mergeReportsWhileTheClockStaysFarAhead() throws {
        let ref = Universe.records[0]
        let day = HybridLogicalClock.farFutureThresholdMillis
        let wall: UInt64 = 1_000_000_000
        let far = op(Universe.replicaIDs[1], 1, at: ts(wall + 2 * day), ref, .assign(.title, .string("a")))
        let ordinary = op(Universe.replicaIDs[2], 1, at: ts(wall), ref, .assign(.notes, .null))
        var replica = Replica(id: Universe.replicaIDs[0])
        #expect(try replica.merge([far], wallMillis: wall).farFutureTimestamp == far.timestamp)
        let report = try replica.merge([ordinary], wallMillis: wall + 1)
        #expect(replica.clock.latest == far.timestamp)
        #expect(report.farFutureTimestamp == replica.clock.latest, "the clock is still two days ahead after this merge")
    }

    /// BUG (Sources/ConcordCore/Replica.swift:42): `merge` computes `wallMillis + farFutureThresholdMillis`
    /// with a trapping `+`, so a wall-clock reading within a day of `UInt64.max` crashes the process,
    /// where `HybridLogicalClock.tick` clamps the same reading. Fix: `wallMillis.addingReportingOverflow`
    /// / a saturating add (or clamp `wallMillis` to `Timestamp.maxPhysicalMillis` first).
    @Test func mergeWithAHugeWallClockDoesNotCrash() async {
        await #expect(processExitsWith: .success) {
            var replica = Replica(id: ReplicaID(high: 1, low: 1))
            let incoming = Op(
                id: OperationID(replica: ReplicaID(high: 2, low: 2), seq: 1), timestamp: Timestamp(physicalMillis: 1_000, logical: 0),
                record: .reminder(RecordID(high: 3, low: 3)), action: .assign(.title, .string("t")))
            _ = try? replica.merge([incoming], wallMillis: .max)
        }
    }

    @Test func timestampLayout() {
        let stamp = Timestamp(physicalMillis: 0x1234_5678_9ABC, logical: 0xDEF0)
        #expect(stamp.rawValue == 0x1234_5678_9ABC_DEF0)
        #expect(stamp.physicalMillis == 0x1234_5678_9ABC)
        #expect(stamp.logical == 0xDEF0)
        #expect(stamp.description == "\(0x1234_5678_9ABC).\(0xDEF0)")
        #expect(ts(5, .max) < ts(6, 0))
    }

    @Test func stampOrderIsTimestampThenReplicaThenSeq() {
        let (a, b) = (Universe.replicaIDs[1], Universe.replicaIDs[0])  // a < b
        #expect(a < b)
        #expect(Stamp(timestamp: ts(1), replica: b, seq: 9) < Stamp(timestamp: ts(2), replica: a, seq: 1))
        #expect(Stamp(timestamp: ts(1), replica: a, seq: 9) < Stamp(timestamp: ts(1), replica: b, seq: 1))
        #expect(Stamp(timestamp: ts(1), replica: a, seq: 1) < Stamp(timestamp: ts(1), replica: a, seq: 2))
        // Equal timestamps: the greater replica id wins the register, on every replica.
        let ref = Universe.records[0]
        let fromA = op(a, 1, at: ts(7), ref, .assign(.title, .string("A")))
        let fromB = op(b, 1, at: ts(7), ref, .assign(.title, .string("B")))
        #expect(fold([fromA, fromB])[ref]!.value(.title) == .string("B"))
        #expect(fold([fromB, fromA])[ref]!.value(.title) == .string("B"))
    }
}
