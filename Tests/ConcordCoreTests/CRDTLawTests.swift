import ConcordCore
import Foundation
import PropertyBased
import Testing

// MARK: - Small generators for the state-level laws

enum LawGen {
    static let replicas = Array(Universe.replicaIDs.prefix(3))

    /// A write to one register. The value is a function of the stamp: two writes with equal stamps
    /// are the same operation, so they cannot carry different values.
    static let register = zip(Gen.int(in: 0...3), Gen.int(in: 0...2), Gen.int(in: 1...2)).map { t, r, seq in
        let stamp = Stamp(timestamp: ts(1_000 + UInt64(t / 2), UInt16(t % 2)), replica: replicas[r], seq: UInt64(seq))
        let value: Value = switch (t + r + seq) % 4 {
        case 0: .int(Int64(t * 100 + r * 10 + seq))
        case 1: .string("v\(t)\(r)\(seq)")
        case 2: .bool(seq == 1)
        default: .null
        }
        return LWWRegister(value: value, stamp: stamp)
    }

    /// Dots of a tiny universe: 2 replicas × 3 seqs.
    static let dots: [OperationID] = (0..<2).flatMap { r in (1...3).map { OperationID(replica: replicas[r], seq: UInt64($0)) } }

    static func dots(_ bits: Int) -> Set<OperationID> {
        Set(dots.enumerated().filter { bits & (1 << $0.offset) != 0 }.map(\.element))
    }

    static let tagState = zip(Gen.int(in: 0...63), Gen.int(in: 0...63)).map { live, removed in
        TagState(live: dots(live), removed: dots(removed))
    }

    static let versionVector = Gen.int(in: 0...4).array(of: 3).map { seqs in
        VersionVector(Dictionary(uniqueKeysWithValues: zip(replicas, seqs.map(UInt64.init))))
    }
}

@Suite("CRDT merge laws")
struct CRDTLawTests {
    // MARK: Operation-set level (Replica.merge)

    /// Property 2 (operation sets): merging sets A, B, C of operations into a replica gives the
    /// same state in either order, under either grouping, and merging a set twice changes nothing.
    @Test func operationSetMergeIsCommutativeAssociativeIdempotent() async {
        await propertyCheck(count: 300, input: ScriptGen.script) { script in
            var world = World.run(script)
            world.syncAll()
            let all = world.allOperations
            var rng = world.rng(200_000)
            let a = subset(all, using: &rng).shuffled(using: &rng)
            let b = subset(all, using: &rng).shuffled(using: &rng)
            let c = subset(all, using: &rng).shuffled(using: &rng)

            // Commutative.
            let ab = observer(merging: a, b)
            let ba = observer(merging: b, a)
            #expect(ab.dump() == ba.dump())
            #expect(ab.records == ba.records)
            #expect(ab.versionVector == ba.versionVector)
            #expect(ab.operations == ba.operations)

            // Associative: (A ⊔ B) ⊔ C == A ⊔ (B ⊔ C), where X ⊔ Y merges Y's log into X.
            let left = observer(merging: ab.operations(), c)
            let bc = observer(merging: b, c)
            let right = observer(merging: a, bc.operations())
            #expect(left.dump() == right.dump())
            #expect(left.records == right.records)
            #expect(left.versionVector == right.versionVector)

            // Idempotent: merging A again is a no-op, and every operation counts as a duplicate.
            var again = observer(merging: a)
            let before = again
            do {
                let report = try again.merge(a)
                #expect(report.newOperationCount == 0)
                #expect(report.duplicates == a.count)
            } catch { Issue.record("\(error)") }
            #expect(again.dump() == before.dump())
            #expect(again.records == before.records)
            #expect(again.versionVector == before.versionVector)

            // A and its merge with itself inside one batch are the same too.
            #expect(observer(merging: a + a).records == before.records)
        }
    }

    // MARK: State level

    /// Property 2 (RecordState): merge is commutative, associative and idempotent, and merging the
    /// states of two operation sets equals the state of their union (a join homomorphism).
    @Test func recordStateMergeLaws() async {
        await propertyCheck(count: 300, input: ScriptGen.script, Gen.int(in: 0...2)) { script, recordIndex in
            var world = World.run(script)
            world.syncAll()
            let ref = Universe.records[recordIndex]
            let ops = world.allOperations.filter { $0.record == ref }
            var rng = world.rng(300_000)
            let (opsA, opsB, opsC) = (subset(ops, using: &rng), subset(ops, using: &rng), subset(ops, using: &rng))
            func state(_ ops: [Op]) -> RecordState { fold(ops)[ref] ?? RecordState(ref: ref) }
            let (a, b, c) = (state(opsA), state(opsB), state(opsC))

            func merged(_ x: RecordState, _ y: RecordState) -> RecordState {
                var copy = x
                copy.merge(y)
                return copy
            }
            #expect(merged(a, b) == merged(b, a))
            #expect(merged(merged(a, b), c) == merged(a, merged(b, c)))
            #expect(merged(a, a) == a)
            #expect(merged(a, b) == state(opsA + opsB.filter { !opsA.contains($0) }))
            #expect(merged(merged(a, b), c) == state(ops.filter { opsA.contains($0) || opsB.contains($0) || opsC.contains($0) }))
            // Applying operations in any order and any number of times gives the same state.
            #expect(state(opsA.reversed() + opsA) == a)
            #expect(Dump.json(of: merged(a, b)) == Dump.json(of: merged(b, a)))
        }
    }

    @Test func lwwRegisterMergeLaws() async {
        let g = LawGen.register
        await propertyCheck(count: 300, input: g, g, g) { a, b, c in
            #expect(a.merging(b) == b.merging(a))
            #expect(a.merging(b).merging(c) == a.merging(b.merging(c)))
            #expect(a.merging(a) == a)
            // The winner is the write with the greatest stamp.
            let winner = [a, b, c].max { $0.stamp < $1.stamp }!
            #expect(a.merging(b).merging(c).winner == winner.winner)
            #expect(a.merging(b).stamp == max(a.stamp, b.stamp))
        }
    }

    /// `Dots`, the sorted array a tag keeps its dots in, behaves as a set: every operation agrees
    /// with `Set` on random subsets of a tiny universe, and equal sets are equal (and hash alike)
    /// whatever the order and repeats they were built from.
    @Test func dotsBehaveAsASet() async {
        let subset = Gen.int(in: 0...63)
        await propertyCheck(count: 300, input: subset, subset, Gen.int(in: 0...5)) { a, b, pick in
            let setA = LawGen.dots(a)
            let setB = LawGen.dots(b)
            let dot = LawGen.dots[pick]
            // Built from repeats, in reverse order.
            let dotsA = Dots(Array(setA).sorted().reversed() + Array(setA))
            let dotsB = Dots(setB)
            #expect(Set(dotsA) == setA && dotsA.count == setA.count && dotsA.sorted == setA.sorted())
            #expect(dotsA == Dots(setA.sorted()) && dotsA.hashValue == Dots(setA.sorted()).hashValue)
            #expect(dotsA.isEmpty == setA.isEmpty)
            #expect(dotsA.contains(dot) == setA.contains(dot))
            #expect(Set(dotsA.union(dotsB)) == setA.union(setB))
            #expect(Set(dotsA.subtracting(dotsB)) == setA.subtracting(setB))
            #expect(dotsA.isDisjoint(with: dotsB) == setA.isDisjoint(with: setB))
            var inserted = dotsA
            inserted.insert(dot)
            #expect(Set(inserted) == setA.union([dot]) && inserted.sorted == setA.union([dot]).sorted())
            var removed = dotsA
            removed.remove(dot)
            #expect(Set(removed) == setA.subtracting([dot]) && removed.sorted == setA.subtracting([dot]).sorted())
            #expect((dotsA == dotsB) == (setA == setB))
        }
    }

    @Test func tagStateMergeLaws() async {
        let g = LawGen.tagState
        await propertyCheck(count: 300, input: g, g, g) { a, b, c in
            func merged(_ x: TagState, _ y: TagState) -> TagState {
                var copy = x
                copy.merge(y)
                return copy
            }
            #expect(merged(a, b) == merged(b, a))
            #expect(merged(merged(a, b), c) == merged(a, merged(b, c)))
            #expect(merged(a, a) == a)
            // live = (all adds) - (all removes); removed = union of removes.
            let ab = merged(a, b)
            #expect(ab.removed == a.removed.union(b.removed))
            #expect(ab.live == a.live.union(b.live).subtracting(a.removed).subtracting(b.removed))
            #expect(ab.live.isDisjoint(with: ab.removed))
            #expect(ab.isPresent == !ab.live.isEmpty)
        }
    }

    @Test func tagSetMergeLaws() async {
        let entry = zip(Gen.int(in: 0...3), LawGen.tagState)
        let g = entry.array(of: 0...4).map { entries in
            var set = TagSet()
            for (tag, state) in entries { set.merge(TagSet(tags: [ExactString(Universe.tags[tag]): state])) }
            return set
        }
        await propertyCheck(count: 300, input: g, g, g) { a, b, c in
            func merged(_ x: TagSet, _ y: TagSet) -> TagSet {
                var copy = x
                copy.merge(y)
                return copy
            }
            #expect(merged(a, b) == merged(b, a))
            #expect(merged(merged(a, b), c) == merged(a, merged(b, c)))
            #expect(merged(a, a) == a)
            #expect(merged(a, b).present == Array(Set(merged(b, a).present)).sorted())
        }
    }

    /// `TagSet` keeps its tags in a sorted array. It must agree with the plain dictionary of tag
    /// states it replaced, under any mix of adds, removes and merges, and stay sorted without
    /// repeats; a set built from entries in any order, with repeats, is the same set.
    @Test func tagSetAgreesWithADictionaryOfTagStates() async {
        // (what, tag, dots): 0 add, 1 remove, 2 merge a set holding one tag state.
        let step = zip(Gen.int(in: 0...2), Gen.int(in: 0...4), Gen.int(in: 0...63))
        await propertyCheck(count: 300, input: step.array(of: 0...12)) { steps in
            var set = TagSet()
            var model: [ExactString: TagState] = [:]
            for (what, tagIndex, bits) in steps {
                let tag = ExactString(Universe.tags[tagIndex % Universe.tags.count])
                let dots = LawGen.dots(bits)
                switch what {
                case 0:
                    let dot = dots.min() ?? LawGen.dots[0]
                    set.add(tag, dot: dot)
                    model[tag, default: TagState()].add(dot)
                case 1:
                    set.remove(tag, observed: dots.sorted())
                    model[tag, default: TagState()].remove(dots.sorted())
                default:
                    let state = TagState(live: dots.prefix(2), removed: dots.dropFirst(2))
                    set.merge(TagSet(tags: [tag: state]))
                    model[tag, default: TagState()].merge(state)
                }
            }
            #expect(set.tags == model)
            #expect(set.entries.map(\.tag) == model.keys.sorted())
            #expect(set.present == model.filter { $0.value.isPresent }.keys.sorted())
            for tag in Universe.tags.map({ ExactString($0) }) {
                #expect(set.contains(tag) == (model[tag]?.isPresent ?? false))
                #expect(set.liveDots(of: tag) == (model[tag]?.live.sorted ?? []))
            }
            let shuffled = set.entries.reversed() + set.entries
            #expect(TagSet(entries: shuffled) == set && TagSet(tags: model) == set)
        }
    }

    @Test func versionVectorMergeLaws() async {
        let g = LawGen.versionVector
        await propertyCheck(count: 300, input: g, g, g) { a, b, c in
            func merged(_ x: VersionVector, _ y: VersionVector) -> VersionVector {
                var copy = x
                copy.merge(y)
                return copy
            }
            #expect(merged(a, b) == merged(b, a))
            #expect(merged(merged(a, b), c) == merged(a, merged(b, c)))
            #expect(merged(a, a) == a)
            for replica in LawGen.replicas {
                #expect(merged(a, b)[replica] == max(a[replica], b[replica]))
            }
            // Zero entries are not stored, so equal vectors are equal values.
            #expect(merged(a, b).entries.values.allSatisfy { $0 > 0 })
        }
    }

    @Test func versionVectorCoversItsPrefix() {
        let r = Universe.replicaIDs[0]
        var vv = VersionVector()
        #expect(!vv.covers(OperationID(replica: r, seq: 1)))
        vv[r] = 3
        #expect(vv.covers(OperationID(replica: r, seq: 3)))
        #expect(!vv.covers(OperationID(replica: r, seq: 4)))
        #expect(!vv.covers(OperationID(replica: Universe.replicaIDs[1], seq: 1)))
        vv[r] = 0
        #expect(vv.entries.isEmpty)
        #expect(vv == VersionVector([r: 0]))
    }
}

// MARK: - Add-wins OR-set

@Suite("Tags: add-wins observed-remove set")
struct TagSetTests {
    /// A replica that has seen the record and its tag removes the tag while another concurrently
    /// adds it again (after removing it itself, or while still seeing it): the add wins, whatever
    /// the clocks say.
    @Test func concurrentAddAndRemoveLeaveTagPresent() async {
        await propertyCheck(
            count: 300, input: Gen.int(in: 0...3), Gen.int(in: 2...4), Gen.int(in: -3_600_000...3_600_000), Gen.bool,
            Gen<UInt64>.value(in: 0...UInt64.max)
        ) { tagIndex, replicaCount, skew, removeFirst, seed in
            let tag = Universe.tags[tagIndex]
            let ref = Universe.records[0]
            var world = World(Script(replicaCount: replicaCount, skews: [0, 0, 0, 0], seed: seed, steps: []))
            world.perform(.createReminder(ReminderDraft(title: "t", tags: [tag])), on: ref, by: 0)
            world.syncAll()
            let originalDots = world.replicas[0].records[ref]!.tags.liveDots(of: ExactString(tag))
            #expect(originalDots.count == 1)

            // Replica 1 removes the tag; replica 0 concurrently removes it and adds it back.
            let now = Universe.baseMillis + 10_000
            let removal = world.perform(.tag(add: [], remove: [tag]), on: ref, by: 1, wallMillis: UInt64(Int64(now) + Int64(skew)))
            #expect(removal.count == 1)
            #expect(world.replicas[1].records[ref]!.tags.contains(ExactString(tag)) == false)
            if removeFirst {
                // Remove, then re-add.
                world.perform(.tag(add: [], remove: [tag]), on: ref, by: 0, wallMillis: now)
                #expect(world.replicas[0].records[ref]!.tags.contains(ExactString(tag)) == false)
            }
            // Otherwise an explicit add of the tag replica 0 still sees (SPEC §5.2).
            let readd = world.perform(.tag(add: [tag], remove: []), on: ref, by: 0, wallMillis: now + 1)
            #expect(readd.count == 1, "an explicit add must issue an addTag")
            #expect(world.replicas[0].records[ref]!.tags.contains(ExactString(tag)))

            var rng = world.rng(1)
            for _ in 0..<3 {
                let from = Int.random(in: 0..<replicaCount, using: &rng)
                let to = Int.random(in: 0..<replicaCount, using: &rng)
                if from != to { world.merge(world.replicas[from].operations().shuffled(using: &rng), into: to) }
            }
            world.syncAll()
            for replica in world.replicas {
                let tags = replica.records[ref]!.tags
                #expect(tags.present == [ExactString(tag)])
                // Only the re-add's dot is live: both removes took the original add.
                #expect(tags.liveDots(of: ExactString(tag)) == readd.map(\.id))
                #expect(replica.reminders[0].tags == [tag])
            }
        }
    }

    /// A remove takes away only the adds its author had observed: replica 2 sees only replica 0's
    /// add and removes the tag; replica 1's concurrent add survives.
    @Test func removeOnlyRemovesObservedAdds() async {
        await propertyCheck(
            count: 300, input: Gen.int(in: 0...3), Gen.int(in: -3_600_000...3_600_000), Gen.int(in: -3_600_000...3_600_000), Gen.bool
        ) { tagIndex, skew1, skew2, redundantAdd in
            let tag = ExactString(Universe.tags[tagIndex])
            let ref = Universe.records[2]
            var world = World(Script(replicaCount: 3, skews: [0, 0, 0, 0], seed: 0, steps: []))
            world.perform(.createNote(NoteDraft(title: "n")), on: ref, by: 0)
            world.syncAll()
            let t0 = Int64(Universe.baseMillis) + 100_000
            let add0 = world.perform(.tag(add: [tag.string], remove: []), on: ref, by: 0, wallMillis: UInt64(t0))
            let add1 = world.perform(.tag(add: [tag.string], remove: []), on: ref, by: 1, wallMillis: UInt64(t0 + Int64(skew1)))
            #expect(add0.count == 1 && add1.count == 1)
            world.merge(world.replicas[0].operations(), into: 2)
            var observed = add0.map(\.id)
            if redundantAdd {
                // Replica 2 also adds the tag it already sees: an explicit add is always issued.
                let own = world.perform(.tag(add: [tag.string], remove: []), on: ref, by: 2)
                #expect(own.map(\.action) == [.addTag(tag)])
                observed = (observed + own.map(\.id)).sorted()
            }
            let removal = world.perform(.tag(add: [], remove: [tag.string]), on: ref, by: 2, wallMillis: UInt64(t0 + Int64(skew2)))
            #expect(removal.map(\.action) == [.removeTag(tag, observed: observed)])
            world.syncAll()
            for replica in world.replicas {
                #expect(replica.records[ref]!.tags.present == [tag])
                #expect(replica.records[ref]!.tags.liveDots(of: tag) == add1.map(\.id))
            }
            // Now every add is observed: one more remove anywhere removes the tag everywhere.
            world.perform(.tag(add: [], remove: [tag.string]), on: ref, by: 1)
            world.syncAll()
            for replica in world.replicas { #expect(replica.records[ref]!.tags.present.isEmpty) }
        }
    }

    /// An add delivered after the remove that observed it does not come back.
    @Test func removeBeforeItsAddKeepsTagAbsent() {
        let r = Universe.replicaIDs
        let ref = Universe.records[0]
        let add = op(r[0], 1, at: ts(10), ref, .addTag("x"))
        let remove = op(r[1], 1, at: ts(5), ref, .removeTag("x", observed: [add.id]))
        var state = RecordState(ref: ref)
        state.apply(remove)
        state.apply(add)
        #expect(!state.tags.contains("x"))
        #expect(state.tags.present.isEmpty)
        var inOrder = RecordState(ref: ref)
        inOrder.apply(add)
        #expect(inOrder.tags.contains("x"))
        inOrder.apply(remove)
        #expect(inOrder == state)
    }

    /// Precomposed and decomposed "é" are equal Swift strings but different tags.
    @Test func nfcAndNfdAreDifferentTags() throws {
        let nfc = "\u{E9}"
        let nfd = "e\u{301}"
        #expect(nfc == nfd, "Swift String equality is canonical equivalence")
        #expect(ExactString(nfc) != ExactString(nfd))
        #expect(Set([ExactString(nfc), ExactString(nfd)]).count == 2)
        #expect(Value.string(nfc) != Value.string(nfd))
        // NFC "é" is C3 A9; NFD is 65 CC 81, which sorts first by bytes.
        #expect(ExactString(nfd) < ExactString(nfc))

        let ref = Universe.records[0]
        var a = Replica(id: Universe.replicaIDs[0])
        var b = Replica(id: Universe.replicaIDs[1])
        try a.perform(.createReminder(ReminderDraft(title: "t")), on: ref, wallMillis: 1_000)
        try b.merge(a.operations())
        try a.perform(.tag(add: [nfc], remove: []), on: ref, wallMillis: 2_000)
        try b.perform(.tag(add: [nfd], remove: []), on: ref, wallMillis: 2_000)
        try a.merge(b.operations())
        try b.merge(a.operations())
        #expect(a.dump() == b.dump())
        let tags = a.records[ref]!.tags.present
        #expect(tags == [ExactString(nfd), ExactString(nfc)])
        #expect(a.reminders[0].tags.map { Array($0.utf8) } == [[0x65, 0xCC, 0x81], [0xC3, 0xA9]])
        #expect(a.dump().contains("\"tags\":[\"e\u{301}\",\"\u{E9}\"]"))

        // Removing one form leaves the other.
        try a.perform(.tag(add: [], remove: [nfc]), on: ref, wallMillis: 3_000)
        try b.merge(a.operations())
        #expect(b.records[ref]!.tags.present == [ExactString(nfd)])
        // A draft with both forms creates two tags.
        let ref2 = Universe.records[1]
        try a.perform(.createReminder(ReminderDraft(title: "t", tags: [nfc, nfd, nfc])), on: ref2, wallMillis: 4_000)
        #expect(a.records[ref2]!.tags.present.count == 2)
    }
}
