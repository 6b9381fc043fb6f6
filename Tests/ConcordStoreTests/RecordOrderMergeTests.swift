import ConcordCore
@testable import ConcordStore
import Foundation
import GRDB
import PropertyBased
import Testing

/// A batched merge logs its operations first, then applies them to their records in record order
/// (SPEC.md §5.6): the sort that puts them in that order, and merges interrupted anywhere.
@Suite struct RecordOrderMergeTests {
    /// The operations of `JoinedRowTests.operations`, moved onto `records` records.
    static func operations(seed: UInt64, records: Int) -> [Op] {
        var rng = SplitMix64(seed: seed ^ 0x5EED)
        return JoinedRowTests.operations(seed: seed).map { operation in
            var moved = operation
            let kind = operation.record.kind
            moved.record = RecordRef(kind: kind, id: RecordID(high: UInt64.random(in: 0..<3, using: &rng), low: UInt64.random(in: 0..<UInt64(records), using: &rng)))
            // A record keeps one kind: a field a kind does not accept stays valid for it.
            moved.record.id = RecordID(high: moved.record.id.high, low: moved.record.id.low << 8 | UInt64(kind.rawValue))
            return moved
        }
    }

    /// The sorter gives back what was added, in the order added, and what was to be sorted, sorted
    /// by record, each record's operations in the order they were added; each as often as asked:
    /// with one run in memory, and with many through the temporary file.
    @Test func theSorterOrdersByRecordAndKeepsEachRecordsOrder() async throws {
        let directory = try TemporaryDirectory()
        await propertyCheck(count: 100, input: Gen.uint64(), Gen.int(in: 1...70)) { seed, run in
            do {
                let operations = Self.operations(seed: seed, records: 6)
                var sorter = OperationSorter(spillPath: directory.file("sort-\(seed)"), runOperations: run, runBytes: run * 40)
                // Some are only kept, not sorted.
                let sorting = operations.map { $0.id.seq % 3 != 0 }
                for (operation, sorting) in zip(operations, sorting) { try sorter.add(operation, sorting: sorting) }
                #expect(sorter.count == operations.count)
                let finished = try sorter.finish()
                for _ in 0..<2 { try Self.expectBothOrders(of: finished, operations, sorting: sorting, "seed \(seed), runs of \(run)") }
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
        // The temporary file is unlinked as soon as it is opened.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    /// Checks that `finished` gives back `operations` in the order added, and those that
    /// `sorting` marks in record order, each record's in the order added.
    static func expectBothOrders(
        of finished: OperationSorter.Finished, _ operations: [Op], sorting: [Bool], _ comment: Comment,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        var added = finished.addedOrder()
        var sorted = finished.recordOrder()
        var addedOutput: [Op] = []
        var sortedOutput: [Op] = []
        while let operation = try added.next() { addedOutput.append(operation) }
        while let operation = try sorted.next() { sortedOutput.append(operation) }
        let expected = zip(operations, sorting).filter(\.1).map(\.0).enumerated().sorted { a, b in
            (a.element.record, a.offset) < (b.element.record, b.offset)
        }.map(\.element)
        #expect(addedOutput == operations, comment, sourceLocation: sourceLocation)
        #expect(sortedOutput == expected, comment, sourceLocation: sourceLocation)
    }

    /// Sorts finished to their files and concatenated read as one sort of all their operations
    /// (a merge in parts applies its parts so): in the order added, one part after the other; in
    /// record order, each record's operations in the order of the parts, then of adding. A part
    /// of one operation, one of none, and parts of many runs all take part.
    @Test func concatenatedSortsReadAsOne() async throws {
        let directory = try TemporaryDirectory()
        await propertyCheck(count: 100, input: Gen.uint64(), Gen.int(in: 1...30)) { seed, run in
            do {
                var rng = SplitMix64(seed: seed)
                let operations = Self.operations(seed: seed, records: 5)
                let sorting = operations.map { $0.id.seq % 4 != 0 }
                // Cuts at random places, some of them twice (an empty part).
                let cuts = ((0..<Int.random(in: 0...5, using: &rng)).map { _ in Int.random(in: 0...operations.count, using: &rng) } + [0, operations.count]).sorted()
                var parts: [OperationSorter.Finished] = []
                for (start, end) in zip(cuts, cuts.dropFirst()) {
                    var sorter = OperationSorter(spillPath: directory.file("sort-\(seed)-\(start)-\(parts.count)"), runOperations: run)
                    for index in start..<end { try sorter.add(operations[index], sorting: sorting[index]) }
                    parts.append(try sorter.finish(toFile: true))
                }
                let whole = OperationSorter.Finished.concatenating(parts)
                #expect(whole.count == operations.count)
                #expect(whole.sortedCount == sorting.filter { $0 }.count)
                try Self.expectBothOrders(of: whole, operations, sorting: sorting, "seed \(seed), runs of \(run), cuts \(cuts)")
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    /// A run's reader reads the file through a window (`OperationSorter.windowBytes`): operations
    /// larger than it, and operations that straddle two windows, come back whole, in both orders.
    @Test func operationsLargerThanTheReadWindowComeBackWhole() throws {
        let directory = try TemporaryDirectory()
        let author = ReplicaID(high: 7, low: 7)
        let window = OperationSorter.windowBytes
        // Texts from a byte to three windows, in an order that leaves every offset within a window.
        let sizes = [1, window - 10, 3 * window, 17, window + 1, 2 * window - 3, 100, window / 2, 5]
        let operations = sizes.enumerated().map { index, size in
            Op(
                id: OperationID(replica: author, seq: UInt64(index + 1)), timestamp: Timestamp(rawValue: UInt64(index + 1) << 16),
                record: .reminder(RecordID(high: 1, low: UInt64(sizes.count - index % 3))),
                action: .assign(.notes, .string(String(repeating: Character(UnicodeScalar(UInt8(97 + index))), count: size))))
        }
        for run in [1, 2, 4] {
            var sorter = OperationSorter(spillPath: directory.file("sort-\(run)"), runOperations: run)
            for operation in operations { try sorter.add(operation) }
            try Self.expectBothOrders(of: try sorter.finish(), operations, sorting: operations.map { _ in true }, "runs of \(run)")
        }
    }

    /// A batched merge stopped anywhere (after any batch that logs, or that applies) leaves a sound
    /// store, which local writes may change, and which the next merge brings to the state of the
    /// whole merge in one transaction (with the local writes).
    @Test func aMergeStoppedAnywhereFinishesAsIfWhole() async throws {
        await propertyCheck(count: 60, input: Gen.uint64()) { seed in
            do {
                var rng = SplitMix64(seed: seed)
                let operations = Self.operations(seed: seed, records: 8)
                let clock = ManualClock(baseMillis + 60_000)
                let whole = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 1))
                var settings = environment(clock: clock, seed: 2)
                settings.mergeBatch = MergeBatch(
                    operations: Int.random(in: 1...12, using: &rng), records: Int.random(in: 1...4, using: &rng),
                    sortRun: Int.random(in: 1...20, using: &rng))
                // Rows written a few at a time within a batch; records folded on a thread of their own, or not.
                settings.mergeBatch.flushRecords = Int.random(in: 1...3, using: &rng)
                settings.mergeBatch.foldThreadFrom = Bool.random(using: &rng) ? 0 : 20_000
                let directory = try TemporaryDirectory()
                let stopped = try ConcordStore.create(at: directory.file("stopped.db"), environment: settings)
                struct Stop: Error {}

                // The merge stops after any batch (one that logs, or one that applies): the
                // batches committed before stay.
                let batches = Int.random(in: 1...12, using: &rng)
                var done = 0
                _ = try? stopped.merge(bounds: settings.mergeBatch, afterEachBatch: {
                    done += 1
                    if done == batches { throw Stop() }
                }) { each in try operations.prefix(Int.random(in: 0...operations.count, using: &rng)).forEach(each) }
                #expect(try stopped.verify().problems == [], "seed \(seed)")
                // Finishing what it left stops after some batches too.
                let finished = Int.random(in: 0...3, using: &rng)
                done = 0
                _ = try? stopped.finishPendingMerge(afterEachBatch: {
                    done += 1
                    if done > finished { throw Stop() }
                })
                let report = try stopped.verify()
                #expect(report.problems == [], "seed \(seed)")
                #expect(report.pendingOperations == (try stopped.pendingOperationCount()))

                // A local write in between, made in both stores.
                let note = try stopped.addNote(NoteDraft(title: "local"))
                try whole.merge(try stopped.allOperations().filter { $0.record == .note(note) })

                // The next merge finishes the one stopped, then merges the rest: in batches, or (as
                // every merge of operations in memory) in one transaction.
                if Bool.random(using: &rng) {
                    try stopped.merge { each in try operations.forEach(each) }
                } else {
                    try stopped.merge(operations)
                }
                try whole.merge(operations)
                #expect(try stopped.pendingOperationCount() == 0)
                #expect(try stopped.dump() == whole.dump(), "seed \(seed)")
                #expect(try stopped.verify().problems == [], "seed \(seed)")
            } catch {
                Issue.record("seed \(seed): unexpected error: \(error)")
            }
        }
    }

    /// A merge that finds operations it did not count as held (by the version vector it read
    /// first) held after all, because another process logged them meanwhile and has not applied
    /// them yet, leaves them to that process: it does not apply them to their records, small (one
    /// transaction) or large (batches), so `verify` stays sound meanwhile. It applies those it
    /// logged itself: the other process logged all of the operations, or the first half (the
    /// first three notes).
    @Test(arguments: [1_000, 5], [0, 20_000])
    func operationsAnotherProcessLoggedMeanwhileAreLeftToIt(mergeBatch: Int, foldThreadFrom: Int) throws {
        let clock = ManualClock(baseMillis)
        let (source, operations) = try Self.sixNotes(clock)
        for otherLogs in [operations.count, operations.count / 2] {
            let directory = try TemporaryDirectory()
            var settings = environment(clock: clock, seed: 2)
            settings.mergeBatch = MergeBatch(operations: mergeBatch, records: 2)
            settings.mergeBatch.foldThreadFrom = foldThreadFrom
            let target = try ConcordStore.create(at: directory.file("target.db"), environment: settings)
            let other = try ConcordStore.open(at: target.path, environment: environment(clock: clock, seed: 3))

            struct Stop: Error {}
            var pendingMeanwhile = 0
            let report = try target.merge { each in
                for operation in operations { try each(operation) }
                // After this merge read what the store holds, another process merges the same
                // operations (or the first half) and stops after its first batch, which logged
                // them all and applied the first record.
                #expect(throws: Stop.self) {
                    try other.merge(bounds: MergeBatch(operations: 1_000, records: 1), afterEachBatch: { throw Stop() }) { each in
                        try operations.prefix(otherLogs).forEach(each)
                    }
                }
                pendingMeanwhile = try other.pendingOperationCount()
            }
            let context = "batch \(mergeBatch), the other logging \(otherLogs)"
            #expect(pendingMeanwhile == otherLogs - 3, "\(context)")
            #expect(report.newOperationCount == operations.count - otherLogs && report.duplicates == otherLogs, "\(context)")
            let meanwhile = try target.verify()
            #expect(meanwhile.problems == [] && meanwhile.pendingOperations == pendingMeanwhile, "\(context)")
            // The other's first note, and the notes this merge logged.
            #expect(try target.notes().count == 1 + (operations.count - otherLogs) / 3, "\(context)")

            // The other process applies them.
            try other.finishPendingMerge()
            #expect(try target.dump() == source.dump(), "\(context)")
            #expect(try target.verify().problems == [], "\(context)")
        }
    }
}

extension RecordOrderMergeTests {
    /// A store in memory with six notes, and its operations (three a note).
    static func sixNotes(_ clock: ManualClock) throws -> (ConcordStore, [Op]) {
        let source = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 1))
        for index in 0..<6 { try source.addNote(NoteDraft(title: "n\(index)")) }
        return (source, try source.allOperations())
    }

    /// A store opened for writing applies what a merge left pending when no running process is
    /// applying it (a merge killed, or one that failed), and leaves it to a process that runs
    /// (SPEC.md §5.6, §9).
    @Test func openingAStoreFinishesAMergeNoRunningProcessApplies() throws {
        let clock = ManualClock(baseMillis)
        let (source, operations) = try Self.sixNotes(clock)
        let directory = try TemporaryDirectory()
        var settings = environment(clock: clock, seed: 2)
        settings.mergeBatch = MergeBatch(operations: 4, records: 2)
        let path = directory.file("store.db")
        let store = try ConcordStore.create(at: path, environment: settings)
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try store.merge(bounds: settings.mergeBatch, afterEachBatch: { throw Stop() }) { each in try operations.forEach(each) }
        }
        #expect(try store.pendingOperationCount() == 4)
        func record(_ process: ProcessIdentity) throws {
            try DatabaseQueue(path: path).write { db in
                try db.execute(sql: "INSERT INTO meta (key, value) VALUES (?, ?)", arguments: [process.key, process.start])
            }
        }
        func mergingProcesses() throws -> [String] {
            try DatabaseQueue(path: path).read { db in try String.fetchAll(db, sql: "SELECT key FROM meta WHERE key LIKE 'merging %'") }
        }
        // The merge that failed forgot itself: nobody applies its rows.
        #expect(try mergingProcesses() == [])

        // A running process (the one that started this test) applies them: they are left to it.
        let running = ProcessIdentity(running: getppid())
        try record(running)
        _ = try ConcordStore.open(at: path, environment: settings)
        #expect(try store.pendingOperationCount() == 4)
        #expect(try mergingProcesses() == [running.key])

        // The same process id, started at another time: another process, which has ended.
        try DatabaseQueue(path: path).write { db in try db.execute(sql: "DELETE FROM meta WHERE key = ?", arguments: [running.key]) }
        try record(ProcessIdentity(pid: running.pid, start: "another start"))
        let opened = try ConcordStore.open(at: path, environment: settings)
        #expect(try opened.pendingOperationCount() == 0)
        #expect(try mergingProcesses() == [])
        #expect(try opened.verify().problems == [])
        try opened.merge(operations)
        #expect(try opened.dump() == source.dump())
    }
}

extension RecordOrderMergeTests {
    /// The folding thread encodes the rows of new records with a copy of the store's replicas: a
    /// record that names a replica the copy lacks (here only in its writes' predecessors) gets no
    /// row from it and is left to the writing thread, which registers the replica; the others get
    /// their rows. Either way a merge writes the rows a merge without the thread writes.
    @Test func rowsEncodedAheadNameOnlyReplicasTheStoreKnows() throws {
        let clock = ManualClock(baseMillis)
        let (author, unseen) = (ReplicaID(high: 0xA, low: 1), ReplicaID(high: 0xC, low: 3))
        var operations: [Op] = []
        for index in 0..<60 {
            let ref = RecordRef.note(RecordID(high: 7, low: UInt64(index)))
            // Every third note's title was written over a write of the unseen replica.
            let predecessors = index % 3 == 0 ? Predecessors([OperationID(replica: unseen, seq: UInt64(index + 1))]) : .empty
            operations.append(Op(
                id: OperationID(replica: author, seq: UInt64(operations.count + 1)),
                timestamp: Timestamp(physicalMillis: baseMillis + UInt64(index), logical: 0),
                record: ref, action: .assign(.title, .string("note \(index)")), predecessors: predecessors))
        }

        // The thread's rows, over a directory that knows the author and not the unseen replica.
        let known = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 3))
        try known.merge([operations[1]])
        let directory = try known.connection.read { db in try ReplicaDirectory(db) }
        var sorter = OperationSorter(spillPath: "unused", runOperations: operations.count)
        for operation in operations { try sorter.add(operation) }
        var bounds = MergeBatch.standard
        bounds.foldThreadFrom = 0
        let folded = FoldedRecords(try sorter.finish(), bounds, encodingWith: directory)
        defer { folded.stop() }
        var encoded: [Bool] = []
        while let record = try folded.next() { encoded.append(record.row != nil) }
        #expect(encoded == (0..<60).map { $0 % 3 != 0 })

        var dumps: [String] = []
        for foldThreadFrom in [0, .max] {
            var settings = environment(clock: clock, seed: 2)
            settings.mergeBatch.foldThreadFrom = foldThreadFrom
            let store = try ConcordStore.inMemory(environment: settings)
            try store.merge(operations)
            #expect(try store.verify().problems == [])
            #expect(try store.notes().count == 60)
            dumps.append(try store.dump())
            let rows = try store.connection.read { db in try String.fetchAll(db, sql: "SELECT hex(crdt) FROM notes ORDER BY id") }
            dumps.append(rows.joined(separator: "\n"))
        }
        #expect(dumps[0] == dumps[2] && dumps[1] == dumps[3])
    }

    /// Operations the store holds above a gap of its version vector (delivered out of order) are
    /// held, not new: a merge that brings them again with those that fill the gap logs and applies
    /// in one transaction, and applies only the new ones (SPEC.md §5.6, step 1).
    @Test func operationsHeldAboveAGapAreNotTakenForNew() throws {
        let clock = ManualClock(baseMillis)
        let (source, operations) = try Self.sixNotes(clock)
        let directory = try TemporaryDirectory()
        let store = try ConcordStore.create(at: directory.file("store.db"), environment: environment(clock: clock, seed: 2))
        // Seqs 1–6 and 13–18 held; 7–12 missing.
        try store.merge(operations.prefix(6) + operations.suffix(6))
        #expect(try store.versionVector()[source.replicaID] == 6)
        var transactions = 0
        let report = try store.merge(bounds: store.environment.mergeBatch, afterEachBatch: { transactions += 1 }) { each in
            try operations.forEach(each)
        }
        #expect(transactions == 1, "held operations taken for new make the merge apply in a transaction of its own")
        #expect(report.newOperationCount == 6 && report.duplicates == 12)
        #expect(try store.dump() == source.dump())
        #expect(try store.verify().problems == [])
    }
}
