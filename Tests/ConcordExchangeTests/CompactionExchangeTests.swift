import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordStore
import ConcordWire
import Foundation
import GRDB
import Testing

/// Compacted stores exchange through bundles and shared folders (SPEC.md §5.8, §13, §14): the
/// kept operations and the compacted seqs travel, a receiver holds what the sender holds, and a
/// receiver that lacks an export's base leaves its compacted seqs for a later exchange.
@Suite struct CompactionExchangeTests {
    /// A node with `count` reminders edited `edits` times each, and a tag added and removed.
    static func editedNode(_ directory: TemporaryDirectory, _ name: String, seed: UInt64, count: Int = 20, edits: Int = 5) throws -> Node {
        let node = try Node(in: directory, name, seed: seed)
        // Removes stay: these tests are of what the kept operations make redundant.
        try node.hearOnceFromASilentReplica()
        for index in 0..<count {
            let id = try node.store.addReminder(ReminderDraft(title: "\(name) \(index)", tags: ["home"]))
            for edit in 1...edits {
                node.clock.advance(1)
                try node.store.editReminder(id, ReminderPatch(title: "\(name) \(index) v\(edit)", notes: .some("n\(edit)")))
            }
            try node.store.perform(.tag(add: [], remove: ["home"]), on: .reminder(id))
        }
        return node
    }

    @Test func aCompactedStoreExportsWhatItHoldsAndAFreshOneTakesIt() throws {
        let directory = try TemporaryDirectory()
        let a = try Self.editedNode(directory, "a", seed: 1)
        let dump = try a.dump()
        let before = try a.store.allOperations().count
        let report = try a.store.compact(keeping: .none, recordsPerTransaction: 7)
        #expect(report.records == 21 && !report.deferred, "20 reminders and the silent replica's note")
        // Per reminder: 2 edits × 5 of title and notes dropped, but the last; the tag's add.
        #expect(report.droppedOperations == 20 * (2 * 5 + 1))
        #expect(try a.store.allOperations().count == before - report.droppedOperations)
        #expect(try a.dump() == dump)
        #expect(try a.store.verify().problems == [])
        // Every record says where its history was trimmed: at its last dropped write.
        for reminder in try a.store.reminders() {
            let ref = RecordRef.reminder(reminder.id)
            let kept = try #require(try a.store.history(of: ref)).map(\.operation.timestamp)
            let through = try a.store.compactedThrough(of: ref)
            #expect(through != nil && through! < kept.max()!, "\(reminder.title)")
        }
        #expect(try a.store.compact(keeping: .none).droppedOperations == 0)

        let path = directory.file("a.cbundle")
        let exported = try a.store.exportBundle(to: path)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path))[8] == 7, "a compacted store writes format 7")
        #expect(exported.compacted.runs.map(\.seqs).reduce(0) { $0 + $1.count } == report.droppedOperations)

        let b = try Node(in: directory, "b", seed: 2)
        let (merged, _) = try b.store.mergeBundle(at: path)
        #expect(merged.compactedSeqs == UInt64(report.droppedOperations))
        #expect(try b.dump() == dump)
        #expect(try b.store.versionVector() == a.store.versionVector())
        #expect(try b.store.allOperations() == a.store.allOperations())
        #expect(try b.store.verify().problems == [])
        // Again: nothing new.
        #expect(try b.store.mergeBundle(at: path).0.compactedSeqs == 0)
        // B exports what it holds as A does: the same operations payloads.
        let again = directory.file("b.cbundle")
        try b.store.exportBundle(to: again)
        let c = try Node(in: directory, "c", seed: 3)
        try c.store.mergeBundle(at: again)
        #expect(try c.store.allOperations() == a.store.allOperations())
        #expect(try c.store.versionVector() == a.store.versionVector())
    }

    /// A delta export since a vector the receiver does not hold: its operations are merged, its
    /// compacted seqs are not (the operations that made them redundant may be among those the
    /// receiver lacks); the whole export later brings them.
    /// A compaction stopped after it compacted the log rows and before it forgot the dropped
    /// seqs in the records (SPEC.md §9, "Compaction") leaves a sound store with the same state,
    /// whose records list seqs the log holds compacted; the next compaction forgets them. The
    /// stopped state is made by giving a second store, identical before the compaction, the
    /// first one's log once compacted.
    @Test func aCompactionStoppedBetweenItsStepsIsFinishedByTheNext() throws {
        let directory = try TemporaryDirectory()
        let a = try Self.editedNode(directory, "a", seed: 1)
        let other = try TemporaryDirectory()
        let b = try Self.editedNode(other, "a", seed: 1)
        #expect(try a.dump() == (try b.dump()))
        let ref = RecordRef.reminder(try #require(try a.store.reminders().first?.id))
        let history = try b.store.history(of: ref)

        let report = try a.store.compact(keeping: .none)
        #expect(report.droppedOperations > 0)
        let queue = try DatabaseQueue(path: b.store.path)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "ATTACH DATABASE ? AS compacted", arguments: [a.store.path])
            try db.inTransaction {
                try db.execute(sql: """
                    DELETE FROM main.log;
                    INSERT INTO main.log SELECT * FROM compacted.log;
                    INSERT INTO main.compacted_records SELECT * FROM compacted.compacted_records;
                    UPDATE main.meta SET value = (SELECT value FROM compacted.meta WHERE key = 'compacted') WHERE key = 'compacted';
                    """)
                return .commit
            }
            try db.execute(sql: "DETACH DATABASE compacted")
        }
        try queue.close()
        #expect(try b.store.verify().problems == [])
        #expect(try b.dump() == (try a.dump()))
        #expect(try b.store.history(of: ref)?.count == (try a.store.history(of: ref))?.count)
        #expect(try b.store.history(of: ref)?.count ?? 0 < history?.count ?? 0)

        let finish = try b.store.compact(keeping: .none)
        #expect(finish.droppedOperations == 0 && finish.records == report.records)
        #expect(try b.store.verify().problems == [])
        let rows = { (store: ConcordStore) throws -> [[UInt8]] in
            try DatabaseQueue(path: store.path).read { db in try Data.fetchAll(db, sql: "SELECT crdt FROM reminders ORDER BY id").map { [UInt8]($0) } }
        }
        #expect(try rows(b.store) == (try rows(a.store)), "each record lists what the log holds in full")
    }

    /// A compaction is due when the log grew by the schedule's threshold (or a quarter of what
    /// it held) since the last one, or a day after it if anything was logged (SPEC.md §5.8,
    /// "Compacting by itself"); `compact` itself counts as the last one.
    @Test func aCompactionIsDueOnItsSchedule() throws {
        let directory = try TemporaryDirectory()
        let node = try Node(in: directory, "a", seed: 1)
        let schedule = CompactionSchedule(keeping: .none, afterOperations: 100, atLeastEvery: .seconds(86_400))
        let id = try node.store.addReminder(ReminderDraft(title: "t"))
        func edit(_ count: Int) throws {
            for index in 0..<count {
                node.clock.advance(1)
                try node.store.editReminder(id, ReminderPatch(title: "t\(index)"))
            }
        }
        try edit(10)
        // Never compacted: due at once.
        #expect(try node.store.compactIfDue(schedule)?.droppedOperations == 10)
        #expect(try node.store.compactIfDue(schedule) == nil, "nothing logged since")
        try edit(60)
        #expect(try node.store.compactIfDue(schedule) == nil, "60 logged, fewer than 100")
        try edit(40)
        #expect(try node.store.compactIfDue(schedule)?.droppedOperations == 100)
        try edit(5)
        #expect(try node.store.compactIfDue(schedule) == nil)
        node.clock.advance(86_400_000)
        #expect(try node.store.compactIfDue(schedule)?.droppedOperations == 5, "a day later")
        node.clock.advance(2 * 86_400_000)
        #expect(try node.store.compactIfDue(schedule) == nil, "nothing logged in those two days")
        try edit(30)
        try node.store.compact(keeping: .none)
        node.clock.advance(86_400_000 - 10)
        try edit(1)
        #expect(try node.store.compactIfDue(schedule) == nil, "compact counts as the last compaction")
        #expect(try node.store.verify().problems == [])
    }

    /// A store this object may not write (a copy, here) refuses a compaction before it reads the
    /// log: a server or a watch that holds a copy open asks for one every second, and each used to
    /// read and sort the whole log before its first write failed. The copy's log is damaged, so a
    /// compaction that read it would fail otherwise.
    @Test func aCopyRefusesACompactionBeforeReadingTheLog() throws {
        let directory = try TemporaryDirectory()
        let (path, copy) = (directory.file("store.db"), directory.file("copy.db"))
        let store = try ConcordStore.create(at: path)
        let id = try store.addReminder(ReminderDraft(title: "t"))
        for index in 0..<20 { try store.editReminder(id, ReminderPatch(title: "t\(index)")) }
        try store.close()
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        try DatabaseQueue(path: copy).write { db in try db.execute(sql: "UPDATE log SET ops = x'FF'") }

        let copied = try ConcordStore.open(at: copy)
        defer { try? copied.close() }
        for compaction in [
            { _ = try copied.compact(keeping: .none) },
            { _ = try copied.compactIfDue(CompactionSchedule(keeping: .none, afterOperations: 1)) },
        ] {
            #expect { try compaction() } throws: { error in (error as? ConcordError)?.code == .copied }
        }
    }

    /// A replica's folder files are rewritten at its next sync once its store has compacted a
    /// quarter as many seqs as they hold (SPEC.md §14, "Compaction"): a new device that syncs
    /// through the folder then starts from the compacted log, not from every operation written.
    @Test func aFolderHoldsTheCompactedLogAfterItsReplicaSyncs() throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let a = try Self.editedNode(directory, "a", seed: 1)
        try a.sync(folder)
        let written = try a.store.allOperations().count
        let report = try a.store.compact(keeping: .none)
        #expect(report.droppedOperations > written / 2)

        let rewrite = try a.sync(folder)
        #expect(rewrite.coalescedFiles == 1, "\(rewrite)")
        #expect(try a.sync(folder).coalescedFiles == 0, "rewritten once")
        let fresh = try Node(in: directory, "fresh", seed: 9)
        #expect(try fresh.sync(folder).importedOperations == written - report.droppedOperations)
        #expect(try fresh.dump() == (try a.dump()))
        #expect(try fresh.store.versionVector() == (try a.store.versionVector()))

        // A few more compacted seqs than a quarter of what the file holds wait for more.
        let id = try #require(try a.store.reminders().first?.id)
        for edit in 1...3 {
            a.clock.advance(1)
            try a.store.editReminder(id, ReminderPatch(title: "again \(edit)"))
        }
        try a.sync(folder)
        #expect(try a.store.compact(keeping: .none).droppedOperations == 3)
        #expect(try a.sync(folder).coalescedFiles == 0, "3 compacted seqs, of a folder holding far more")
    }

    /// Each replica's coalesced file has for base what the folder's other files hold of the other
    /// replicas, so a new device reads one publisher's file before it holds that file's base; it
    /// takes those compacted seqs once every file is read, in the same sync (SPEC.md §14,
    /// "Compaction"), and its version vector has no gap.
    @Test func aNewDeviceTakesEveryPublishersCompactedSeqsInOneSync() throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let x = try Self.editedNode(directory, "x", seed: 1)
        let y = try Self.editedNode(directory, "y", seed: 2)
        for node in [x, y, x] { try node.sync(folder) }
        for node in [x, y] {
            try node.store.compact(keeping: .none)
            #expect(try node.sync(folder).coalescedFiles > 0)
        }
        let fresh = try Node(in: directory, "fresh", seed: 9)
        try fresh.sync(folder)
        let (vectors, counts) = (try [fresh, x, y].map { try $0.store.versionVector() }, try [fresh, x, y].map { try $0.store.compactedSeqCount() })
        let files = try listing(folder).keys.sorted()
        #expect(vectors[0] == vectors[1], "\(vectors) \(files)")
        #expect(counts[0] == counts[1], "\(counts)")
        #expect(try fresh.dump() == (try x.dump()))
        #expect(try fresh.store.verify().problems == [])
    }

    /// A replica that holds a write above a gap does not drop the writes it has seen (SPEC.md
    /// §5.8): its folder files hold its gap-free prefix, and would carry their compacted seqs
    /// without the write, so that a receiver held the seqs without their effect. (A review found
    /// it: the receiver's title stayed empty, against "v1" on a replica of the same vector.)
    @Test func noWriteIsDroppedOnTheStrengthOfOneHeldAboveAGap() throws {
        let directory = try TemporaryDirectory()
        let z = try Node(in: directory, "z", seed: 1)
        let id = try z.store.addReminder(ReminderDraft(title: "v0"))
        z.clock.advance(1)
        try z.store.editReminder(id, ReminderPatch(title: "v1"))
        let early = directory.file("early.cbundle")
        try z.store.exportBundle(to: early)
        z.clock.advance(1)
        _ = try z.store.addReminder(ReminderDraft(title: "other"))
        let gap = try z.store.versionVector()
        z.clock.advance(1)
        try z.store.editReminder(id, ReminderPatch(title: "v3"))
        let late = directory.file("late.cbundle")
        try z.store.exportBundle(to: late, since: gap)

        // E holds v3 above a gap (it lacks "other"); Q holds only the early writes.
        let e = try Node(in: directory, "e", seed: 2)
        try e.store.mergeBundle(at: early)
        try e.store.mergeBundle(at: late)
        let q = try Node(in: directory, "q", seed: 3)
        try q.store.mergeBundle(at: early)
        #expect(try e.store.compact(keeping: .none).droppedOperations == 0)
        let fromE = directory.file("fromE.cbundle")
        try e.store.exportBundle(to: fromE, contiguousOnly: true)
        let r = try Node(in: directory, "r", seed: 4)
        try r.store.mergeBundle(at: fromE)
        #expect(try r.store.versionVector() == (try q.store.versionVector()))
        #expect(try r.dump() == (try q.dump()))
    }

    @Test func compactedSeqsWaitForTheExportsBase() throws {
        let directory = try TemporaryDirectory()
        let a = try Self.editedNode(directory, "a", seed: 1, count: 4)
        let half = try a.store.versionVector()
        for index in 0..<4 {
            let id = try a.store.addReminder(ReminderDraft(title: "later \(index)"))
            a.clock.advance(1)
            try a.store.editReminder(id, ReminderPatch(title: "later \(index) v2"))
        }
        try a.store.compact(keeping: .none)
        let delta = directory.file("delta.cbundle")
        try a.store.exportBundle(to: delta, since: half)
        let b = try Node(in: directory, "b", seed: 2)
        let (merged, _) = try b.store.mergeBundle(at: delta)
        #expect(merged.compactedSeqs == 0)
        #expect(try b.store.versionVector()[a.store.replicaID] == 0)
        let whole = directory.file("whole.cbundle")
        try a.store.exportBundle(to: whole)
        try b.store.mergeBundle(at: whole)
        #expect(try b.store.versionVector() == a.store.versionVector())
        #expect(try b.dump() == a.dump())
    }

    /// Three replicas through a folder, one compacting between syncs, one stale: all converge on
    /// the same dump, vector and held operations, and a newcomer starts from the folder.
    @Test(arguments: [false, true])
    func replicasConvergeThroughAFolderWhileOneCompacts(encrypted: Bool) throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = encrypted ? SyncKey.generate() : nil
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let b = try Node(in: directory, "b", seed: 2, key: key)
        let stale = try Node(in: directory, "stale", seed: 3, key: key)
        let id = try a.store.addReminder(ReminderDraft(title: "shared", tags: ["home"]))
        try a.sync(folder)
        try stale.sync(folder)
        try b.sync(folder)
        for round in 0..<6 {
            a.clock.advance(10)
            try a.store.editReminder(id, ReminderPatch(title: "a \(round)"))
            b.clock.advance(10)
            try b.store.editReminder(id, ReminderPatch(notes: .some("b \(round)")))
            if round == 2 { try b.store.perform(.tag(add: [], remove: ["home"]), on: .reminder(id)) }
            try a.sync(folder)
            try b.sync(folder)
            try a.store.compact(keeping: .none)
            try a.sync(folder)
        }
        for node in [a, b, stale, a, b, stale] { try node.sync(folder) }
        let newcomer = try Node(in: directory, "new", seed: 4, key: key)
        try newcomer.sync(folder)
        for node in [b, stale, newcomer] {
            #expect(try node.dump() == a.dump(), "\(node.name)")
            #expect(try node.store.versionVector() == a.store.versionVector(), "\(node.name)")
            let problems = try node.store.verify().problems
            #expect(problems == [], "\(node.name): \(problems)")
        }
        #expect(try a.store.compactedSeqCount() > 0)
        #expect(try newcomer.store.allOperations().count < b.store.allOperations().count + 1)
    }

    /// A claim of compacted seqs is taken only where it is vouched for (SPEC.md §13): a store with
    /// a sync key takes none from a plain bundle, which anyone could have forged to make it skip
    /// operations it lacks; it takes them from a bundle sealed with its key. A store without a key
    /// trusts plain bundles, as it does their operations.
    @Test func aForgedClaimOfCompactedSeqsMakesNoKeyedStoreSkipOperations() throws {
        let directory = try TemporaryDirectory()
        let author = ReplicaID(high: 0xF0_46E, low: 1)
        var bytes: [UInt8] = []
        let manifest = BundleManifest(publisher: author, createdMillis: baseMillis, base: VersionVector(), top: VersionVector([author: 1000]))
        var writer = try BundleWriter(manifest: manifest, format: BundleFormat.withoutDroppedRemoves) { bytes += $0 }
        try writer.appendCompacted(1...1000, of: author)
        _ = try writer.finish()
        let forged = directory.file("forged.cbundle")
        try Data(bytes).write(to: URL(fileURLWithPath: forged))

        let key = SyncKey.generate()
        let keyed = try Node(in: directory, "keyed", seed: 1, key: key)
        #expect(try keyed.store.mergeBundle(at: forged).0.compactedSeqs == 0)
        #expect(try keyed.store.versionVector()[author] == 0)
        // The same claim sealed with its key is taken.
        let sealed = directory.file("sealed.cbundle")
        let sealer = try Node(in: directory, "sealer", seed: 2)
        try sealer.store.mergeBundle(at: forged)
        try sealer.store.exportBundle(to: sealed, encryptingWith: key)
        #expect(try keyed.store.mergeBundle(at: sealed).0.compactedSeqs == 1000)
        #expect(try keyed.store.versionVector()[author] == 1000)

        let keyless = try Node(in: directory, "keyless", seed: 3)
        #expect(try keyless.store.mergeBundle(at: forged).0.compactedSeqs == 1000)
    }
}
