import ConcordCore
import ConcordExchange
import ConcordStore
import ConcordWire
import Crypto
import Foundation
import PropertyBased
import Testing

/// Bundles (SPEC.md §13): export and merge, deltas, manifests, golden fixtures, streaming.
@Suite struct BundleTests {
    // MARK: Round trips

    /// While a bundle is written, its directory holds nothing but it and its own temporary file
    /// (`.NAME.tmp-…`): another replica lists a shared folder at any moment. (Foundation's
    /// `createFile` used to add a `.dat.nosync…` file of its own for an instant.)
    @Test func writingABundleShowsNoOtherFile() throws {
        let directory = try TemporaryDirectory()
        let clock = ManualClock(baseMillis)
        let source = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 1))
        try populate(source, clock: clock)
        let seen = LockedNames()
        let done = LockedNames()
        let watcher = Thread {
            while done.names.isEmpty {
                for name in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [] { seen.insert(name) }
            }
        }
        watcher.start()
        for index in 0..<200 { try source.exportBundle(to: directory.file("b\(index).cbundle")) }
        done.insert("done")
        while !watcher.isFinished { usleep(1_000) }
        let unexpected = seen.names.filter { !($0.hasSuffix(".cbundle") || ($0.hasPrefix(".b") && $0.contains(".cbundle.tmp-"))) }
        #expect(unexpected.isEmpty, "\(unexpected.sorted())")
    }

    @Test func exportThenMergeIntoAFreshStoreGivesAnEqualDump() throws {
        let directory = try TemporaryDirectory()
        let clock = ManualClock(baseMillis)
        let source = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 1))
        try populate(source, clock: clock)
        let total = try source.allOperations().count

        let path = directory.file("all.cbundle")
        let summary = try source.exportBundle(to: path)
        #expect(summary.operations == total)
        #expect(summary.bytes == (try readBytes(path)).count)
        #expect(summary.manifest.publisher == source.replicaID)
        #expect(summary.manifest.base == VersionVector())
        #expect(summary.manifest.top == (try source.versionVector()))
        #expect(summary.manifest.createdMillis == clock.now)
        // Written whole: no temporary file is left beside it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["all.cbundle"])

        let target = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 2))
        let (report, read) = try target.mergeBundle(at: path)
        #expect(report.newOperationCount == total)
        #expect(report.newOperations == [source.replicaID: total])
        #expect(report.duplicates == 0)
        #expect(read.operations == total)
        #expect(read.manifest == summary.manifest)
        #expect(try target.dump() == (try source.dump()))
        #expect(try target.versionVector() == (try source.versionVector()))
        #expect(try target.allOperations() == (try source.allOperations()))

        // Merging it again changes nothing.
        let before = try target.dump()
        let (again, _) = try target.mergeBundle(at: path)
        #expect(again.newOperationCount == 0)
        #expect(again.duplicates == total)
        #expect(try target.dump() == before)
    }

    @Test func bundlesRelayOperationsOfEveryAuthor() throws {
        let directory = try TemporaryDirectory()
        let clockA = ManualClock(baseMillis)
        let clockB = ManualClock(baseMillis + 5)
        let a = try ConcordStore.inMemory(environment: environment(clock: clockA, seed: 11))
        let b = try ConcordStore.inMemory(environment: environment(clock: clockB, seed: 12))
        let refs = try populate(a, clock: clockA, label: "A")
        try populate(b, clock: clockB, label: "B")
        try b.exportBundle(to: directory.file("b.cbundle"))
        try a.mergeBundle(at: directory.file("b.cbundle"))
        // A edits a record after seeing B's: both authors' operations travel in A's bundle.
        try a.editReminder(refs[0].id, ReminderPatch(title: "after the merge"))
        let summary = try a.exportBundle(to: directory.file("a.cbundle"))
        #expect(summary.manifest.top == (try a.versionVector()))
        #expect(summary.manifest.top.entries.count == 2)

        let c = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 13))
        let (report, _) = try c.mergeBundle(at: directory.file("a.cbundle"))
        #expect(Set(report.newOperations.keys) == [a.replicaID, b.replicaID])
        #expect(try c.dump() == (try a.dump()))
        #expect(try c.versionVector() == (try a.versionVector()))
    }

    /// The canonical order (SPEC.md §13): two stores that received the same operations of three
    /// replicas in opposite orders, so that their local numbering of the replicas differs, export
    /// the same operations payloads byte for byte, in ascending order of replica id then seq,
    /// cut into the same blocks. Before the rule, each wrote the authors in the order it had met them.
    @Test func storesHoldingTheSameOperationsExportTheSamePayloads() throws {
        let directory = try TemporaryDirectory()
        var authors: [ConcordStore] = []
        for seed in 31...33 {
            let clock = ManualClock(baseMillis + UInt64(seed))
            let author = try ConcordStore.inMemory(environment: environment(clock: clock, seed: UInt64(seed)))
            try populate(author, clock: clock, label: "\(seed)")
            // About 6 MiB of notes each, so that the bundle holds several blocks.
            for index in 0..<300 {
                try author.addReminder(ReminderDraft(title: "r\(index)", notes: String(repeating: "\(seed) \(index) ", count: 2_800)))
            }
            authors.append(author)
        }
        let forward = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 41))
        let backward = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 42))
        for author in authors { try forward.merge(try author.allOperations()) }
        for author in authors.reversed() { try backward.merge(try author.allOperations()) }

        func payloads(_ store: ConcordStore, _ name: String) throws -> [[UInt8]] {
            try store.exportBundle(to: directory.file(name))
            let bytes = try readBytes(directory.file(name))
            let (_, operations, _) = try readBundle(bytes)
            #expect(operations.map(\.id) == operations.map(\.id).sorted(), "in ascending order of replica id, then seq")
            return try blocks(of: bytes).filter { $0.type == 2 }.map { block in
                try Zstd.decompress(bytes[block.payloadOffset..<block.end], size: block.rawLength)
            }
        }
        let forwardPayloads = try payloads(forward, "forward.cbundle")
        let backwardPayloads = try payloads(backward, "backward.cbundle")
        #expect(forwardPayloads.count >= 3)
        #expect(forwardPayloads == backwardPayloads)
    }

    @Test func sinceDeltaHoldsExactlyTheOperationsNotCovered() throws {
        let directory = try TemporaryDirectory()
        let clockA = ManualClock(baseMillis)
        let a = try ConcordStore.inMemory(environment: environment(clock: clockA, seed: 21))
        let refs = try populate(a, clock: clockA)
        let base = try a.versionVector()
        try a.exportBundle(to: directory.file("base.cbundle"))
        let b = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 22))
        try b.mergeBundle(at: directory.file("base.cbundle"))

        // More of A's own edits, and operations of a third replica A learns of.
        clockA.advance(10_000)
        try a.editReminder(refs[0].id, ReminderPatch(title: "changed", priority: .medium))
        try a.tag(refs[1], add: ["later"])
        let clockC = ManualClock(baseMillis + 20_000)
        let c = try ConcordStore.inMemory(environment: environment(clock: clockC, seed: 23))
        try populate(c, clock: clockC, label: "C")
        try a.merge(try c.allOperations())

        let expected = try a.allOperations().filter { !base.covers($0.id) }
        #expect(expected.count == 3 + (try c.allOperations()).count)
        let summary = try a.exportBundle(to: directory.file("delta.cbundle"), since: base)
        #expect(summary.operations == expected.count)
        #expect(summary.manifest.base == base)
        #expect(summary.manifest.top == (try a.versionVector()))
        #expect(summary.manifest.publisher == a.replicaID)

        let (manifest, operations, _) = try readBundle(try readBytes(directory.file("delta.cbundle")))
        #expect(manifest == summary.manifest)
        #expect(Set(operations) == Set(expected))
        #expect(operations.count == expected.count)

        let (report, _) = try b.mergeBundle(at: directory.file("delta.cbundle"))
        #expect(report.newOperationCount == expected.count)
        #expect(report.duplicates == 0)
        #expect(try b.dump() == (try a.dump()))
        #expect(try b.versionVector() == (try a.versionVector()))

        // Without the base, the delta's operations of A sit above a gap: held, but the version
        // vector does not advance for A until the base arrives.
        let fresh = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 24))
        try fresh.mergeBundle(at: directory.file("delta.cbundle"))
        #expect(try fresh.versionVector()[a.replicaID] == 0)
        #expect(try fresh.versionVector()[c.replicaID] == (try c.versionVector())[c.replicaID])
        // Merged again, those are held though the version vector does not cover them: they are
        // duplicates, and nothing changes or is left pending.
        let aboveTheGap = try fresh.dump()
        let (again, _) = try fresh.mergeBundle(at: directory.file("delta.cbundle"))
        #expect(again.newOperationCount == 0 && again.duplicates == expected.count)
        #expect(try fresh.dump() == aboveTheGap)
        #expect(try fresh.pendingOperationCount() == 0)
        #expect(try fresh.verify().isSound)
        try fresh.mergeBundle(at: directory.file("base.cbundle"))
        #expect(try fresh.dump() == (try a.dump()))
        #expect(try fresh.versionVector() == (try a.versionVector()))
    }

    /// For any `since` vector (below, at or above what the store holds, naming replicas it does not
    /// know), the bundle holds exactly the operations `since` does not cover, and merging it into a
    /// store that holds exactly the covered ones converges.
    @Test func sinceDeltasForArbitraryVectors() async throws {
        let clockA = ManualClock(baseMillis)
        let a = try ConcordStore.inMemory(environment: environment(clock: clockA, seed: 31))
        try populate(a, clock: clockA, label: "A")
        let clockB = ManualClock(baseMillis + 3)
        let b = try ConcordStore.inMemory(environment: environment(clock: clockB, seed: 32))
        try populate(b, clock: clockB, label: "B")
        try await a.merge(try b.allOperations())
        let all = try a.allOperations()
        let top = try await a.versionVector()
        let dump = try a.dump()
        let stranger = ReplicaID(high: 1, low: 2)
        let directory = try TemporaryDirectory()

        let seqGen = Gen.int(in: 0...40)
        await propertyCheck(count: 100, input: seqGen, seqGen, seqGen) { seqA, seqB, seqStranger in
            let since = VersionVector([a.replicaID: UInt64(seqA), b.replicaID: UInt64(seqB), stranger: UInt64(seqStranger)])
            let expected = all.filter { !since.covers($0.id) }
            let path = directory.file("delta-\(seqA)-\(seqB)-\(seqStranger).cbundle")
            let summary = try a.exportBundle(to: path, since: since)
            #expect(summary.operations == expected.count, "since \(since)")
            #expect(summary.manifest.base == since)
            #expect(summary.manifest.top == top)
            let (_, operations, _) = try readBundle(try readBytes(path))
            #expect(operations == expected, "since \(since)")

            let peer = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 33))
            try peer.merge(all.filter { since.covers($0.id) })
            let (report, _) = try peer.mergeBundle(at: path)
            #expect(report.newOperationCount == expected.count)
            #expect(try peer.dump() == dump, "since \(since)")
            #expect(try peer.versionVector() == top)
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    @Test func emptyBundlesAreValidAndMergeNothing() throws {
        let directory = try TemporaryDirectory()
        let clock = ManualClock(baseMillis)
        let a = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 41))
        try populate(a, clock: clock)

        // Nothing to export: the peer has everything.
        let upToDate = try a.exportBundle(to: directory.file("none.cbundle"), since: try a.versionVector())
        #expect(upToDate.operations == 0)
        // And an empty store exports an empty bundle.
        let empty = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 42))
        let nothing = try empty.exportBundle(to: directory.file("empty.cbundle"))
        #expect(nothing.operations == 0)
        #expect(nothing.manifest.top == VersionVector())

        for name in ["none.cbundle", "empty.cbundle"] {
            let bytes = try readBytes(directory.file(name))
            // A manifest block and an end block, nothing else.
            #expect(blocks(of: bytes).map(\.type) == [1, 3], "\(name)")
            #expect(blocks(of: bytes).last?.end == bytes.count)
            let (_, operations, summary) = try readBundle(bytes)
            #expect(operations.isEmpty)
            #expect(summary.operations == 0)

            let target = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 43))
            try target.addNote(NoteDraft(title: "mine"))
            let before = try target.dump()
            let vector = try target.versionVector()
            let (report, read) = try target.mergeBundle(at: directory.file(name))
            #expect(report.newOperationCount == 0)
            #expect(report.duplicates == 0)
            #expect(read.operations == 0)
            #expect(try target.dump() == before)
            #expect(try target.versionVector() == vector)
        }
    }

    /// `BundleWriter` takes operations in any order and of any author; a reader gives them back
    /// and a merge of them equals a merge of the originals.
    @Test func writerAcceptsOperationsInAnyOrder() async throws {
        let clockA = ManualClock(baseMillis)
        let a = try ConcordStore.inMemory(environment: environment(clock: clockA, seed: 51))
        try populate(a, clock: clockA, label: "A")
        let clockB = ManualClock(baseMillis + 1)
        let b = try ConcordStore.inMemory(environment: environment(clock: clockB, seed: 52))
        try populate(b, clock: clockB, label: "B")
        try await a.merge(try b.allOperations())
        let all = try a.allOperations()
        let dump = try a.dump()

        await propertyCheck(count: 30, input: Gen<[Op]>.shuffled(all)) { shuffled in
            var bytes: [UInt8] = []
            let manifest = BundleManifest(publisher: a.replicaID, createdMillis: 7, base: VersionVector(), top: try a.versionVector())
            var writer = try BundleWriter(manifest: manifest) { bytes += $0 }
            for operation in shuffled { try writer.append(operation) }
            let summary = try writer.finish()
            #expect(summary.operations == all.count)
            #expect(summary.bytes == bytes.count)
            let (readManifest, operations, _) = try readBundle(bytes)
            #expect(readManifest == manifest)
            #expect(operations == shuffled)
            let target = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 53))
            try target.merge { ingest in
                var reader = BundleReader(MemorySource(bytes))
                try reader.forEachOperation(ingest)
            }
            #expect(try target.dump() == dump)
        }
    }

    // MARK: Golden fixtures

    static func bundleFixtures() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: fixturesDirectory.appendingPathComponent("bundle-v1").path)
            .filter { $0.hasSuffix(".cbundle") }.sorted()
    }

    @Test func everyBundleFixtureHasItsDump() throws {
        let names = try Self.bundleFixtures()
        #expect(names.count >= 2)
        for name in names {
            let dump = fixturesDirectory.appendingPathComponent("bundle-v1")
                .appendingPathComponent(name.replacingOccurrences(of: ".cbundle", with: ".dump.json"))
            #expect(FileManager.default.fileExists(atPath: dump.path), "\(name) has no .dump.json")
        }
    }

    @Test(arguments: try bundleFixtures())
    func bundleFixtureMergesToItsDump(_ name: String) throws {
        let directory = fixturesDirectory.appendingPathComponent("bundle-v1")
        let path = directory.appendingPathComponent(name).path
        let expected = try readBytes(directory.appendingPathComponent(name.replacingOccurrences(of: ".cbundle", with: ".dump.json")).path)
        #expect(FileKind.of(path: path) == .bundle)

        // From the file.
        let store = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 61))
        let (report, summary) = try store.mergeBundle(at: path)
        #expect(report.newOperationCount == summary.operations)
        #expect(summary.operations > 0)
        // The dump file is `syncctl dump`'s output: the dump and a newline.
        #expect(Array((try store.dump() + "\n").utf8) == expected, "\(name): the dump differs from the fixture's")

        // From memory, one byte per read: the same state.
        let bytes = try readBytes(path)
        let streamed = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 62))
        try streamed.merge { ingest in
            var reader = BundleReader(MemorySource(bytes, chunk: 1))
            var read = try reader.forEachOperation(ingest)
            #expect(read.sha256 == nil)
            read.sha256 = Array(SHA256.hash(data: bytes))  // the merge of the file hashed what it read
            #expect(read == summary)
        }
        #expect(try streamed.dump() == (try store.dump()))
        // The manifest's top is what the bundle's operations make of a fresh replica.
        #expect(summary.manifest.top == (try store.versionVector()))
        #expect(summary.manifest.base == VersionVector())
    }

    // MARK: Streaming and size

    @Test func readingOneByteAtATimeGivesTheSameOperations() throws {
        let clock = ManualClock(baseMillis)
        let a = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 71))
        try populate(a, clock: clock)
        var bytes: [UInt8] = []
        let manifest = BundleManifest(publisher: a.replicaID, createdMillis: 1, base: VersionVector(), top: try a.versionVector())
        var writer = try BundleWriter(manifest: manifest) { bytes += $0 }
        try a.forEachOperation { try writer.append($0) }
        let written = try writer.finish()

        let whole = try readBundle(bytes)
        #expect(whole.1 == (try a.allOperations()))
        #expect(whole.2 == written)
        for chunk in [1, 2, 3, 7, 14, 15, 64, 1000] {
            let streamed = try readBundle(bytes, chunk: chunk)
            #expect(streamed.0 == whole.0, "chunk \(chunk)")
            #expect(streamed.1 == whole.1, "chunk \(chunk)")
            #expect(streamed.2 == whole.2, "chunk \(chunk)")
        }
        // And through a file.
        let directory = try TemporaryDirectory()
        try writeBytes(bytes, to: directory.file("x.cbundle"))
        var reader = BundleReader(try FileSource(path: directory.file("x.cbundle")))
        var fromFile: [Op] = []
        try reader.forEachOperation { fromFile.append($0) }
        #expect(fromFile == whole.1)
    }

    /// The bundles of formats 6 and 7 in `Fixtures/bundle-v6/` and `bundle-v7/` (SPEC.md §13,
    /// columns): each merges to the dump `syncctl` printed, and writing its operations again in
    /// its format gives its raw payloads byte for byte, so the writer's columns are the ones the
    /// SPEC describes (`bundle-v7/decode.py` reads both from the SPEC alone).
    @Test(arguments: [(UInt8(6), "bundle-v6/mixed", 24, 2), (7, "bundle-v7/long", 20, 0)])
    func theColumnsFixturesDecodeAndEncodeByteForByte(format: UInt8, fixture: String, operationCount: Int, compactedCount: Int) throws {
        let path = fixturesDirectory.appendingPathComponent("\(fixture).cbundle").path
        let bytes = try readBytes(path)
        #expect(bytes[8] == format)
        let store = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 63))
        let (report, summary) = try store.mergeBundle(at: path)
        #expect(report.newOperationCount == operationCount)
        #expect(summary.compacted.count == compactedCount, "\(summary.compacted)")
        #expect(Array((try store.dump() + "\n").utf8) == (try readBytes(fixturesDirectory.appendingPathComponent("\(fixture).dump.json").path)))

        // Its entries, written again in the canonical order, make the same raw payloads.
        var reader = BundleReader(MemorySource(bytes))
        let manifest = try reader.readManifest()
        var operations: [Op] = []
        try reader.forEachOperation { operations.append($0) }
        var written: [UInt8] = []
        var writer = try BundleWriter(manifest: manifest, format: format) { written += $0 }
        for author in Set(operations.map(\.id.replica)).sorted() {
            for range in summary.holds.ranges(of: author) {
                for seq in range {
                    if let operation = operations.first(where: { $0.id == OperationID(replica: author, seq: seq) }) {
                        try writer.append(operation)
                    } else {
                        try writer.appendCompacted(seq...seq, of: author)
                    }
                }
            }
        }
        _ = try writer.finish()
        #expect(try Self.rawPayloads(written) == (try Self.rawPayloads(bytes)))
    }

    /// The raw payloads of a bundle's operations blocks.
    static func rawPayloads(_ bundle: [UInt8]) throws -> [[UInt8]] {
        try blocks(of: bundle).filter { $0.type == 2 }.map { block in
            var raw: [UInt8] = []
            try Zstd.decompress(bundle[block.payloadOffset..<block.payloadOffset + block.storedLength], size: block.rawLength, into: &raw)
            return raw
        }
    }

    /// The fixture of format 7 holds a note's body of 1 MiB, a block of its own (SPEC.md §13,
    /// "Canonical order"): the block after it names by number the records the first one named,
    /// and cannot be read without it.
    @Test func theFormat7FixtureNamesRecordsOfEarlierBlocks() throws {
        let payloads = try Self.rawPayloads(try readBytes(fixturesDirectory.appendingPathComponent("bundle-v7/long.cbundle").path))
        #expect(payloads.count == 3)
        #expect(try RecordReachTests.decode(payloads, reach: .bundle).count == 20)
        #expect(RecordReachTests.refusal([payloads[2]], reach: .bundle)?.contains("record #2 of a bundle that named 0 so far") == true)
        #expect(RecordReachTests.refusal(payloads, reach: .block)?.contains("of a block that named 0 so far") == true)
    }

    /// An operation of 1 MiB or more is a block of its own (SPEC.md §13, "Canonical order"): the
    /// blocks around it end before and after it, so no block passes 8 MiB but by one such
    /// operation, and a 2 MiB note amid others reads back.
    @Test func anOperationOfAMegabyteOrMoreIsABlockOfItsOwn() throws {
        let directory = try TemporaryDirectory()
        let store = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 84))
        try store.addReminder(ReminderDraft(title: "before"))
        try store.addNote(NoteDraft(title: "large", body: String(repeating: "abcdefgh", count: 256 * 1024)))
        try store.addReminder(ReminderDraft(title: "after"))
        let path = directory.file("large-op.cbundle")
        let summary = try store.exportBundle(to: path)
        let bytes = try readBytes(path)
        let operationBlocks = blocks(of: bytes).filter { $0.type == 2 }
        #expect(operationBlocks.count == 3, "\(operationBlocks)")
        #expect(operationBlocks.map(\.rawLength)[1] > 2 << 20)
        #expect(operationBlocks.map(\.rawLength)[0] < 1024 && operationBlocks.map(\.rawLength)[2] < 1024)
        let (_, operations, _) = try readBundle(bytes)
        #expect(operations.count == summary.operations)
        #expect(operations == (try store.allOperations()))
    }

    /// A bundle of more than a block of operations spans several operations blocks, each
    /// bounded, and round-trips; a damaged later block refuses the whole bundle.
    @Test func largeBundlesSpanSeveralBlocks() throws {
        let directory = try TemporaryDirectory()
        let clock = ManualClock(baseMillis)
        let a = try ConcordStore.inMemory(environment: environment(clock: clock, seed: 81))
        var random = SplitMix64(seed: 99)
        let letters = Array("abcdefghijklmnopqrstuvwxyz  ".utf8)
        var changes: [(RecordRef, Change)] = []
        for index in 0..<2_000 {
            let notes = String(decoding: (0..<4_000).map { _ in letters[Int(random.next() % UInt64(letters.count))] }, as: UTF8.self)
            changes.append((.reminder(RecordID(high: 7, low: UInt64(index))), .createReminder(ReminderDraft(title: "task \(index)", notes: notes, tags: ["t\(index % 5)"]))))
        }
        try a.perform(changes)
        let operations = try a.allOperations()
        #expect(operations.count == 2_000 * 6)

        let path = directory.file("large.cbundle")
        let summary = try a.exportBundle(to: path)
        #expect(summary.operations == operations.count)
        let bytes = try readBytes(path)
        let layout = blocks(of: bytes)
        #expect(layout.last?.end == bytes.count)
        let operationBlocks = layout.filter { $0.type == 2 }
        #expect(layout.first?.type == 1)
        #expect(layout.last?.type == 3)
        #expect(operationBlocks.count >= 2, "\(layout)")
        let rawTotal = operationBlocks.map(\.rawLength).reduce(0, +)
        let targetBytes = BundleFormat.targetBlockBytes(BundleFormat.version)
        #expect(rawTotal > targetBytes)
        for (index, block) in operationBlocks.enumerated() {
            #expect(block.flags == 1, "operations blocks are compressed")
            // Closed once its bytes (SPEC.md §13, "Canonical order": the columns, 30 a run, 16 a
            // replica) reach 7 MiB: one operation (about 4 KiB here) over at most.
            let raw = try Zstd.decompress(bytes[block.payloadOffset..<block.end], size: block.rawLength)
            var reader = ByteReader(raw)
            let replicas = try reader.varint()
            _ = try reader.bytes(16 * Int(replicas))
            let runs = try reader.varint()
            for _ in 0..<(3 * runs) { _ = try reader.varint() }
            var columnBytes = 0
            for _ in 0..<32 {
                let length = Int(try reader.varint())
                _ = try reader.bytes(length)
                columnBytes += length
            }
            #expect(reader.isAtEnd)
            let cutBytes = columnBytes + 30 * Int(runs) + 16 * Int(replicas)
            if index < operationBlocks.count - 1 { #expect(cutBytes >= targetBytes, "block \(index): \(cutBytes) bytes") }
            #expect(cutBytes < targetBytes + 8192, "block \(index): \(cutBytes) bytes")
        }

        let target = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 82))
        try target.addNote(NoteDraft(title: "target's own"))
        let before = (try target.dump(), try target.versionVector())

        // All or nothing across blocks: damage after the first operations block.
        let second = operationBlocks[1]
        var damaged: [[UInt8]] = [
            Array(bytes[..<second.offset]),  // ends after a whole first block
            Array(bytes[..<(second.payloadOffset + second.storedLength / 2)]),  // ends inside the second
            Array(bytes.dropLast()),  // ends inside the end block
        ]
        var flipped = bytes
        flipped[operationBlocks.last!.payloadOffset + 5] ^= 0x40
        damaged.append(flipped)
        flipped = bytes
        flipped[bytes.count - 1] ^= 0x01  // the file checksum in the end block
        damaged.append(flipped)
        for (index, variant) in damaged.enumerated() {
            #expect(throws: BundleError.self, "variant \(index)") { try readBundle(variant) }
            var applied = 0
            #expect(throws: ConcordError.self, "variant \(index)") {
                try target.merge { ingest in
                    var reader = BundleReader(MemorySource(variant))
                    try reader.forEachOperation { operation in
                        applied += 1
                        try ingest(operation)
                    }
                }
            }
            if index != 0 { #expect(applied > 0, "variant \(index) was refused before its first block") }
            #expect(try target.dump() == before.0, "variant \(index) changed the store")
            #expect(try target.versionVector() == before.1, "variant \(index) changed the version vector")
        }

        // Streamed in small reads, the whole bundle merges.
        let streamed = try target.merge { ingest in
            var reader = BundleReader(MemorySource(bytes, chunk: 997))
            let read = try reader.forEachOperation(ingest)
            #expect(read.operations == operations.count)
        }
        #expect(streamed.newOperationCount == operations.count)
        let (again, _) = try target.mergeBundle(at: path)
        #expect(again.newOperationCount == 0)
        #expect(again.duplicates == operations.count)
        let fresh = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 83))
        try fresh.mergeBundle(at: path)
        #expect(try fresh.dump() == (try a.dump()))
        #expect(try fresh.versionVector() == (try a.versionVector()))
    }
}

/// `VersionVector(json:)`: the `--since` argument of `export` (SPEC.md §11, §12).
@Suite struct VersionVectorJSONTests {
    static let a = ReplicaID(high: 0x0123_4567_89AB_CDEF, low: 1)
    static let b = ReplicaID(high: 0xFEDC_BA98_7654_3210, low: 2)

    @Test func acceptsAnObjectOrTheWholeStatusOutput() throws {
        let object = "{\"\(Self.a.hex)\":5,\"\(Self.b.hex.uppercased())\":12}"
        #expect(try VersionVector(json: object) == VersionVector([Self.a: 5, Self.b: 12]))
        #expect(try VersionVector(json: "{}") == VersionVector())
        #expect(try VersionVector(json: " { \"\(Self.a.hex)\" : 0 } ") == VersionVector())
        let status = """
            {"name":"laptop","notes":{"deleted":0,"live":1},"operations":17,"otherRecords":0,\
            "replica":"\(Self.a.hex)","reminders":{"completed":0,"deleted":0,"open":2},"schemaVersion":2,\
            "store":"/tmp/x.db","versionVector":{"\(Self.a.hex)":17,"\(Self.b.hex)":3}}
            """
        #expect(try VersionVector(json: status) == VersionVector([Self.a: 17, Self.b: 3]))
        // What a store prints round-trips.
        let vector = VersionVector([Self.a: 1, Self.b: UInt64(Int64.max)])
        #expect(try VersionVector(json: vector.json.canonical) == vector)
    }

    @Test func refusesAnythingElse() {
        let message = "a version vector is a JSON object from replica id to sequence number"
        for text in ["", "[]", "5", "null", "{\"\(Self.a.hex)\":-1}", "{\"\(Self.a.hex)\":1.5}", "{\"\(Self.a.hex)\":\"3\"}",
                     "{\"versionVector\":[]}", "{\"\(Self.a.hex)\":18446744073709551616}", "not json"] {
            do {
                _ = try VersionVector(json: text)
                Issue.record("accepted \(text)")
            } catch {
                #expect(error.code == .notAVersionVector, "\(text)")
                #expect(error.message == message, "\(text): \(error.message)")
            }
        }
        for key in ["abc", String(repeating: "g", count: 32), Self.a.hex + "0"] {
            do {
                _ = try VersionVector(json: "{\"\(key)\":1}")
                Issue.record("accepted the key \(key)")
            } catch {
                #expect(error.code == .invalidInput)
                #expect(error.message == "'\(key)' in the version vector is not a replica id", "\(error.message)")
            }
        }
    }
}

/// Names collected from several threads.
final class LockedNames: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: Set<String> = []

    func insert(_ name: String) {
        lock.withLock { _ = storage.insert(name) }
    }

    var names: Set<String> { lock.withLock { storage } }
}
