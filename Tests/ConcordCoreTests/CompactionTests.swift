import ConcordCore
import Foundation
import PropertyBased
import Testing

@Suite("Compaction")
struct CompactionTests {
    /// Something that happens to a replica between two steps of a script.
    struct Event: Hashable, Sendable, CustomStringConvertible {
        /// After which step.
        var step: Int
        /// To which replica (mod the replica count).
        var replica: Int
        /// 0–2: it compacts (keeping no history, two writes per field, the last 2 s); 3: it is backed up; 4: it is lost, and its last backup is restored
        /// and forked (nothing happens without a backup); 5: it retires the replicas lost so far
        /// and the newer-version writer; 6: the next replica retires it, which writes on until it
        /// merges its retirement (a retired replica that returns);
        /// 7: it publishes what it holds past what it published last, as a folder file; 8: it
        /// reads the files the others published that it has not read, oldest first (SPEC.md §14).
        var kind: Int

        var description: String { "(\(step),\(replica),\(kind))" }
    }

    static let step = zip(
        Gen.int(in: Step.kinds), Gen.int(in: 0...4), Gen.int(in: 0...4), Gen.int(in: 0...11), Gen.int(in: -4...8)
    ).map { Step(kind: $0, replica: $1, target: $2, arg: $3, clock: $4) }

    /// Scripts on 3–5 replicas of up to 48 steps.
    static let script = zip(Gen.int(in: 3...5), Gen.int(in: -8...8).array(of: 5), Gen<UInt64>.value(in: 0...UInt64.max), step.array(of: 0...48))
        .map { Script(replicaCount: $0, skews: $1, seed: $2, steps: $3) }

    static let events = zip(Gen.int(in: 0...48), Gen.int(in: 0...4), Gen.int(in: 0...8)).map { Event(step: $0, replica: $1, kind: $2) }
        .array(of: 0...16)

    /// Runs `script` with `events` between its steps, then syncs every replica with every other,
    /// each merging the others' exports.
    static func run(_ script: Script, _ events: [Event]) -> (world: World, dropped: Int) {
        var world = World(script)
        // A purge lost with its replica after some of its record's elided copies reached another
        // replica, and a backup of the record's content restored, diverge (SPEC.md §5.7, "What a
        // purge does not reach"): scripts with purges restore no backup.
        let restores = !script.steps.contains { $0.kind == 22 && $0.arg % 4 == 0 }
        var backups: [Int: Replica] = [:]
        var forks = 0
        var lost: [ReplicaID] = []
        var published: [Export] = []
        var read: Set<[Int]> = []
        var dropped = 0
        // Twice through the script: between the two passes the first replica retires the replicas
        // lost and the newer-version writer, every replica hears from every other and compacts, so
        // that removes are stable and dropped while backups from the first pass wait to be restored.
        for pass in 0..<2 {
          if pass == 1 {
            for id in lost + [Universe.newerID] { world.perform(.retire, on: .replica(id), by: 0) }
            syncPairwise(&world)
            for r in world.replicas.indices { dropped += world.replicas[r].compact() }
          }
          for (index, step) in script.steps.enumerated() {
            world.apply(step, index: index + pass * script.steps.count)
            for event in events where event.step == index {
                let r = event.replica % world.count
                switch event.kind {
                // Keeping nothing, the last two writes of each field, or the last 2 s of writes.
                case 0: dropped += world.replicas[r].compact()
                case 1: dropped += world.replicas[r].compact(keeping: KeptHistory(writesPerField: 2))
                case 2: dropped += world.replicas[r].compact(keeping: KeptHistory(newerThan: .seconds(2)), nowMillis: world.wall[r])
                case 3: backups[r] = world.replicas[r]
                case 4:
                    guard restores, let backup = backups[r], forks < Universe.forkIDs.count else { continue }
                    lost.append(world.replicas[r].id)
                    world.replicas[r] = backup.forked(as: Universe.forkIDs[forks])
                    forks += 1
                case 5:
                    for id in lost + [Universe.newerID] { world.perform(.retire, on: .replica(id), by: r) }
                case 6:
                    world.perform(.retire, on: .replica(world.replicas[r].id), by: (r + 1) % world.count)
                case 7:
                    let id = world.replicas[r].id
                    let file = world.replicas[r].export(since: published.last { $0.sender == id }?.senderVector ?? VersionVector())
                    published.append(file)
                default:
                    let id = world.replicas[r].id
                    for (index, file) in published.enumerated() where file.sender != id && !read.contains([r, index]) {
                        world.merge(file, into: r)
                        read.insert([r, index])
                    }
                }
            }
          }
        }
        syncPairwise(&world)
        return (world, dropped)
    }

    /// Three rounds in which each replica merges what each other one exports to it.
    static func syncPairwise(_ world: inout World) {
        for _ in 0..<3 {
            for r in world.replicas.indices {
                for from in world.replicas.indices where from != r {
                    world.merge(world.replicas[from].export(since: world.replicas[r].versionVector), into: r)
                }
            }
        }
    }

    /// Replicas that compact at random points, are lost and restored from old backups, and
    /// receive operations in random orders and subsets, reach the state of a replica that never
    /// compacted and merged every operation they still hold, in full or compacted: the same
    /// records, conflicts and dump. No operation is lost but those only a lost replica held.
    @Test func compactedReplicasConvergeWithANeverCompactedModel() async {
        var dropped = 0
        var stableRemoves = 0
        await propertyCheck(count: 2000, input: Self.script, Self.events) { script, events in
            let (world, droppedHere) = Self.run(script, events)
            dropped += droppedHere
            var claimed = SeqRanges()
            for replica in world.replicas {
                claimed.formUnion(replica.compacted)
                for id in replica.operations.keys { claimed.insert(id) }
            }
            let model = observer(merging: world.written.filter { claimed.contains($0.id) })
            var forgettable = VersionVector()
            for replica in world.replicas { forgettable.merge(replica.droppedStableThrough) }
            for replica in world.replicas {
                stableRemoves += world.written.filter { if case .removeTag = $0.action { replica.compacted.contains($0.id) } else { false } }.count
            }
            for (index, replica) in world.replicas.enumerated() {
                #expect(replica.dump() == model.dump(), "replica \(index) dumps otherwise")
                #expect(Set(replica.records.keys) == Set(model.records.keys), "replica \(index) holds other records")
                for (ref, state) in model.records {
                    #expect(
                        replica.records[ref].map { $0.hasSameContent(as: state, forgettingDotsThrough: forgettable) } ?? false,
                        "replica \(index) holds another \(ref)")
                    #expect(replica.records[ref]?.inConflict == state.inConflict, "replica \(index) sees other conflicts in \(ref)")
                }
                #expect(replica.versionVector == model.versionVector, "replica \(index) holds other seqs")
                #expect(replica.compacted.isEmpty || !replica.operations.keys.contains { replica.compacted.contains($0) })
            }
        }
        #expect(dropped > 1000, "compaction dropped only \(dropped) operations in 2,000 scripts")
        #expect(stableRemoves > 100, "replicas held only \(stableRemoves) removes compacted in 2,000 scripts")
    }

    /// An assign that a later one has seen, and a tag add that a remove has named, are dropped;
    /// the winner, the remove and a write of unknown predecessors stay.
    @Test func dropsWhatKeptOperationsSubsume() throws {
        let ref = Universe.records[0]
        var replica = Replica(id: Universe.replicaIDs[0])
        let now = Universe.baseMillis
        let created = try replica.perform(.createReminder(ReminderDraft(title: "first", tags: ["home"])), on: ref, wallMillis: now)
        let retitled = try replica.perform(.editReminder(ReminderPatch(title: "second")), on: ref, wallMillis: now + 1)
        let untagged = try replica.perform(.tag(add: [], remove: ["home"]), on: ref, wallMillis: now + 2)
        let old = op(Universe.newerID, 1, at: ts(now - 10), ref, .assign(.notes, .string("unknown predecessors")))
        try replica.merge([old])
        let before = replica.records[ref]!

        let firstTitle = created.first { if case .assign(.title, _) = $0.action { true } else { false } }!
        let tagAdd = created.first { if case .addTag = $0.action { true } else { false } }!
        #expect(replica.compact() == 2)
        #expect(replica.operations[firstTitle.id] == nil && replica.compacted.contains(firstTitle.id))
        #expect(replica.operations[tagAdd.id] == nil && replica.compacted.contains(tagAdd.id))
        #expect(replica.operations[retitled[0].id] != nil && replica.operations[untagged[0].id] != nil)
        #expect(replica.operations[old.id] != nil)
        #expect(replica.records[ref]!.hasSameContent(as: before))
        #expect(replica.compact() == 0, "a second compaction finds nothing more")

        // A replica that still holds the add but not the remove converges once it merges.
        var stale = Replica(id: Universe.replicaIDs[1])
        try stale.merge(created)
        #expect(stale.records[ref]!.tags.contains("home"))
        try stale.merge(replica.operations(since: stale.versionVector), covering: replica.compacted, since: stale.versionVector)
        #expect(stale.dump() == replica.dump())
        #expect(!stale.records[ref]!.tags.contains("home"))
    }

    /// The history kept: the last writes of each field, or those newer than an age, stay.
    @Test func keptHistoryKeepsTheLastWritesOrTheNewest() throws {
        let ref = Universe.records[0]
        let now = Universe.baseMillis
        func edited() throws -> Replica {
            var replica = Replica(id: Universe.replicaIDs[0])
            try replica.perform(.createReminder(ReminderDraft(title: "v0")), on: ref, wallMillis: now)
            for edit in 1...5 {
                try replica.perform(.editReminder(ReminderPatch(title: "v\(edit)")), on: ref, wallMillis: now + UInt64(edit) * 60_000)
            }
            return replica
        }
        func titles(_ replica: Replica) -> [String] {
            replica.operations.values.sorted { $0.id < $1.id }.compactMap {
                if case .assign(.title, .string(let title)) = $0.action { title } else { nil }
            }
        }
        var all = try edited()
        #expect(all.compact() == 5)
        #expect(titles(all) == ["v5"])
        var lastThree = try edited()
        #expect(lastThree.compact(keeping: KeptHistory(writesPerField: 3)) == 3)
        #expect(titles(lastThree) == ["v3", "v4", "v5"])
        // At minute 5, the writes of the last 150 s (minutes 3, 4 and 5) stay.
        var recent = try edited()
        #expect(recent.compact(keeping: KeptHistory(newerThan: .seconds(150)), nowMillis: now + 5 * 60_000) == 3)
        #expect(titles(recent) == ["v3", "v4", "v5"])
        #expect(recent.dump() == all.dump() && lastThree.dump() == all.dump())
        #expect(KeptHistory.thirtyDays.newerThan == .seconds(2_592_000))
    }

    /// A remove, and the add it named, go only once every replica known holds the remove: a
    /// replica last heard of before it holds it back until it says it holds it, or is retired.
    /// A backup restored from before the remove, which holds the add and not the remove, drops the
    /// add once it merges (its vector does not hold where removes were dropped, so the export
    /// claims every compacted seq).
    @Test func aRemoveIsDroppedOnceEveryReplicaKnownHoldsIt() throws {
        let ref = Universe.records[0]
        let now = Universe.baseMillis
        for retiring in [false, true] {
            var a = Replica(id: Universe.replicaIDs[0])
            var b = Replica(id: Universe.replicaIDs[1])
            var c = Replica(id: Universe.replicaIDs[2])
            try a.perform(.createReminder(ReminderDraft(title: "t", tags: ["home"])), on: ref, wallMillis: now)
            try b.merge(a.export())
            try c.merge(a.export())
            try a.merge(c.export(since: a.versionVector))
            let backup = c
            let remove = try a.perform(.tag(add: [], remove: ["home"]), on: ref, wallMillis: now + 1)[0].id
            try b.merge(a.export(since: b.versionVector))
            try a.merge(b.export(since: a.versionVector))
            func removesHeld(_ replica: Replica) -> Int {
                replica.operations.values.filter { if case .removeTag = $0.action { true } else { false } }.count
            }
            // The add goes (the remove named it); the remove stays: c was last heard of before it.
            #expect(a.compact() == 1)
            #expect(removesHeld(a) == 1 && a.droppedStableThrough == VersionVector())
            if retiring {
                try a.perform(.retire, on: .replica(c.id), wallMillis: now + 2)
            } else {
                try c.merge(a.export(since: c.versionVector))
                try a.merge(c.export(since: a.versionVector))
            }
            #expect(a.compact() == 1)
            #expect(removesHeld(a) == 0 && a.droppedStableThrough.covers(remove))
            #expect(a.records[ref]!.tags.entries.isEmpty, "the removed dot is forgotten")

            var restored = backup.forked(as: Universe.forkIDs[0])
            #expect(restored.reminders.first?.tags == ["home"])
            try restored.merge(a.export(since: restored.versionVector))
            #expect(restored.reminders.first?.tags == [])
            #expect(restored.dump() == a.dump() && restored.versionVector[a.id] == a.versionVector[a.id])
        }
    }

    /// A purged record's operations are kept: their elided copies keep no content already.
    @Test func aPurgedRecordsOperationsAreKept() throws {
        let ref = Universe.records[0]
        var author = Replica(id: Universe.replicaIDs[0])
        let now = Universe.baseMillis
        try author.perform(.createReminder(ReminderDraft(title: "secret", tags: ["home"])), on: ref, wallMillis: now)
        try author.perform(.editReminder(ReminderPatch(title: "secret too")), on: ref, wallMillis: now + 1)
        try author.perform(.purge, on: ref, wallMillis: now + 2)
        let held = author.operations
        #expect(author.compact() == 0)
        #expect(author.operations == held)
    }

    /// Compacted seqs that come from an export since a vector the receiver does not hold are
    /// left: the operations that made them redundant may be among those it lacks.
    @Test func compactedSeqsNeedTheExportsBase() throws {
        let ref = Universe.records[0]
        var author = Replica(id: Universe.replicaIDs[0])
        let now = Universe.baseMillis
        let created = try author.perform(.createReminder(ReminderDraft(title: "first")), on: ref, wallMillis: now)
        try author.perform(.editReminder(ReminderPatch(title: "second")), on: ref, wallMillis: now + 1)
        author.compact()
        #expect(!author.compacted.isEmpty)

        var receiver = Replica(id: Universe.replicaIDs[1])
        // An export since the author's whole vector, as if the receiver held it: nothing comes.
        try receiver.merge([], covering: author.compacted, since: author.versionVector)
        #expect(receiver.compacted.isEmpty && receiver.versionVector == VersionVector())
        try receiver.merge(author.operations(), covering: author.compacted)
        #expect(receiver.compacted == author.compacted)
        #expect(receiver.dump() == author.dump())
        #expect(created.count > 0)
    }
}
