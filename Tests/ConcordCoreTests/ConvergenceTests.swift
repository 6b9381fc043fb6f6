import ConcordCore
import Foundation
import PropertyBased
import Testing

@Suite("Convergence of replicas")
struct ConvergenceTests {
    /// Property 1: after random scripts, once every replica has merged every other's operations,
    /// every replica holds the same records and dumps byte-identical JSON.
    @Test func replicasConvergeAfterFullSync() async {
        var withConflicts = 0
        var total = 0
        await propertyCheck(count: 300, input: ScriptGen.script) { script in
            var world = World.run(script)
            world.syncAll()
            let all = world.allOperations
            let reference = observer(merging: all)
            let referenceDump = reference.dump()
            for (index, replica) in world.replicas.enumerated() {
                #expect(replica.dump() == referenceDump, "replica \(index) dump differs")
                #expect(replica.records == reference.records, "replica \(index) records differ")
                #expect(replica.versionVector == reference.versionVector, "replica \(index) version vector differs")
                #expect(replica.operations.count == all.count, "replica \(index) lacks operations")
                #expect(replica.reminders == reference.reminders)
                #expect(replica.notes == reference.notes)
            }
            // The dump is a function of the operation set: folding the operations independently agrees.
            #expect(reference.records == fold(all), "records differ from folding the operations")
            #expect(Dump.canonical(fold(all).values.sorted { $0.ref < $1.ref }) == referenceDump)
            // Every author's version vector entry is its number of operations.
            for id in Set(all.map(\.id.replica)) {
                #expect(reference.versionVector[id] == UInt64(all.filter { $0.id.replica == id }.count))
            }
            total += 1
            if Set(all.map(\.record)).contains(where: { ref in Set(all.filter { $0.record == ref }.map(\.id.replica)).count > 1 }) {
                withConflicts += 1
            }
        }
        // The generator must actually produce records written by several replicas.
        #expect(withConflicts * 3 >= total, "only \(withConflicts) of \(total) scripts had multi-writer records")
    }

    /// A replica's view only grows: after any script, each replica's own records equal the fold
    /// of the operations it holds (merging out of order and partially is the same as folding).
    @Test func replicaStateIsTheFoldOfItsLog() async {
        await propertyCheck(count: 300, input: ScriptGen.script) { script in
            let world = World.run(script)
            for (index, replica) in world.replicas.enumerated() {
                #expect(replica.records == fold(replica.operations.values), "replica \(index)")
                // The version vector covers exactly the contiguous prefix of each author's seqs held.
                var seqs: [ReplicaID: Set<UInt64>] = [:]
                for id in replica.operations.keys { seqs[id.replica, default: []].insert(id.seq) }
                for (author, held) in seqs {
                    #expect(replica.versionVector[author] == contiguousPrefix(held), "replica \(index), author \(author)")
                }
            }
        }
    }

    /// Property 3: delivering a replica's operations shuffled, duplicated, out of seq order and in
    /// several batches gives the same state and version vector as delivering them in order; after
    /// each batch the version vector is the contiguous prefix of what has arrived.
    @Test func deliveryOrderAndDuplicatesDoNotMatter() async {
        await propertyCheck(count: 300, input: ScriptGen.script, Gen.int(in: 1...5)) { script, batchCount in
            var world = World.run(script)
            var rng = world.rng(100_000, 0xDE11)
            let source = world.replicas.max { $0.operations.count < $1.operations.count }!
            let inOrder = source.operations()
            let expected = observer(merging: inOrder)

            var scrambled = inOrder + inOrder.filter { _ in Bool.random(using: &rng) }
            scrambled.shuffle(using: &rng)
            var receiver = Replica(id: Universe.observerID)
            var arrived: [ReplicaID: Set<UInt64>] = [:]
            let batchSize = max(1, (scrambled.count + batchCount - 1) / batchCount)
            for start in stride(from: 0, to: scrambled.count, by: batchSize) {
                let batch = Array(scrambled[start..<min(start + batchSize, scrambled.count)])
                do { try receiver.merge(batch) } catch { Issue.record("\(error)") }
                for op in batch { arrived[op.id.replica, default: []].insert(op.id.seq) }
                for (author, seqs) in arrived {
                    #expect(receiver.versionVector[author] == contiguousPrefix(seqs))
                }
            }
            #expect(receiver.dump() == expected.dump())
            #expect(receiver.records == expected.records)
            #expect(receiver.versionVector == expected.versionVector)
            #expect(receiver.versionVector == source.versionVector)
            #expect(receiver.operations == expected.operations)

            // The same for a replica that already holds some of them (a real peer).
            let target = world.replicas.count - 1
            world.merge(scrambled, into: target)
            var inOrderPeer = World.run(script)
            inOrderPeer.merge(inOrder, into: target)
            #expect(world.replicas[target].dump() == inOrderPeer.replicas[target].dump())
            #expect(world.replicas[target].versionVector == inOrderPeer.replicas[target].versionVector)
        }
    }

    /// Property 5 (scripts): a record that was deleted and never restored by anyone stays deleted
    /// whatever else happened to it concurrently; a record nobody deleted is not deleted.
    @Test func deletedRecordsStayDeletedWithoutRestore() async {
        await propertyCheck(count: 300, input: ScriptGen.script) { script in
            var world = World.run(script)
            world.syncAll()
            let all = world.allOperations
            for ref in Universe.records {
                let deletes = all.filter { $0.record == ref && $0.action == .assign(.deleted, .bool(true)) }
                let restores = all.filter { $0.record == ref && $0.action == .assign(.deleted, .bool(false)) }
                for replica in world.replicas {
                    guard let state = replica.records[ref] else { continue }
                    if !deletes.isEmpty, restores.isEmpty { #expect(state.isDeleted, "\(ref) resurrected") }
                    if deletes.isEmpty { #expect(!state.isDeleted, "\(ref) deleted without a delete") }
                }
            }
        }
    }

    /// Property 5 (scenario): one replica deletes a record while the others, concurrently and
    /// with later wall clocks, edit every other field; after any merge order it is deleted everywhere.
    @Test func concurrentEditsDoNotUndelete() async {
        let edits = Gen.int(in: 0...11).array(of: 1...6)
        await propertyCheck(count: 300, input: Gen.int(in: 2...4), edits, Gen.int(in: -5_000...5_000), Gen<UInt64>.value(in: 0...UInt64.max)) {
            replicaCount, editKinds, skew, seed in
            var world = World(Script(replicaCount: replicaCount, skews: [0, 0, 0, 0], seed: seed, steps: []))
            let ref = Universe.records[0]
            world.perform(.createReminder(ReminderDraft(title: "t", due: Universe.date(Universe.dues[1]), tags: ["home"])), on: ref, by: 0)
            world.syncAll()
            world.perform(.delete, on: ref, by: 0, wallMillis: Universe.baseMillis + 1_000)
            for (index, kind) in editKinds.enumerated() {
                let r = 1 + index % (replicaCount - 1)
                let change: Change = switch kind {
                case 0: .editReminder(ReminderPatch(title: "edited \(index)"))
                case 1: .editReminder(ReminderPatch(notes: .some("n")))
                case 2: .editReminder(ReminderPatch(priority: .high))
                case 3: .editReminder(ReminderPatch(due: .some(Universe.date(Universe.dues[2]))))
                case 4: .editReminder(ReminderPatch(repeatRule: .some("daily")))
                case 5: .tag(add: ["work"], remove: ["home"])
                case 6: .complete
                case 7: .snooze(until: Date(millisecondsSince1970: Int64(Universe.baseMillis) + 7_200_000))
                case 8: .reopen
                case 9: .tag(add: ["\u{E9}"], remove: [])
                case 10: .delete
                default: .editReminder(ReminderPatch(title: "x", notes: .some(nil)))
                }
                // Concurrent writers' clocks may be far ahead of the deleter's.
                world.perform(change, on: ref, by: r, wallMillis: UInt64(Int64(Universe.baseMillis) + 1_000 + Int64(skew) * Int64(index + 1)))
            }
            var rng = world.rng(7)
            // Random pairwise merges, then a full sync.
            for _ in 0..<(replicaCount * 2) {
                let from = Int.random(in: 0..<replicaCount, using: &rng)
                let to = Int.random(in: 0..<replicaCount, using: &rng)
                if from != to { world.merge(world.replicas[from].operations().shuffled(using: &rng), into: to) }
                #expect(world.replicas[0].records[ref]!.isDeleted, "the deleting replica undeleted")
            }
            world.syncAll()
            for replica in world.replicas {
                #expect(replica.records[ref]?.isDeleted == true)
                #expect(replica.reminders.first?.isDeleted == true)
            }
            // Restoring is explicit, and then it is restored everywhere.
            world.perform(.restore, on: ref, by: replicaCount - 1, wallMillis: Universe.baseMillis + 10_000_000)
            world.syncAll()
            for replica in world.replicas { #expect(replica.records[ref]?.isDeleted == false) }
        }
    }
}
