import ConcordCore
import ConcordExchange
import ConcordStore
import ConcordWire
import Foundation
import Testing

/// Strings at the edges of what text can be: empty, NUL, controls, emoji sequences, combining
/// marks (NFC and NFD spellings of one text), right-to-left scripts and bidi controls,
/// noncharacters, the largest scalar, a byte-order mark.
enum EdgeStrings {
    static let nfc = "caf\u{E9}"  // é precomposed
    static let nfd = "cafe\u{301}"  // e + combining acute
    static let samples: [String] = [
        "", " ", "\u{0}", "a\u{0}b", "\u{0}\u{0}", "\t\n\r", "\u{1}\u{1F}\u{7F}", "\u{85}",
        nfc, nfd, "\u{212B}", "\u{C5}", "A\u{30A}",  // Ångström sign, Å, A + ring: three spellings
        "👩‍👩‍👧‍👦", "🏳️‍🌈", "👍🏽", "🇫🇷", "\u{1F600}",
        "שלום עולם", "مرحبا بالعالم", "abc \u{202E}fed\u{202C} ghi", "\u{200F}\u{200E}\u{2067}x\u{2069}",
        "\u{200B}", "\u{200D}", "\u{FEFF}bom", "\u{FFFD}", "\u{FFFF}", "\u{FFFE}", "\u{10FFFF}", "\u{E000}",
        "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇", "日本語テキスト", "\"quoted\" \\ back\\slash", "title", "deleted",
    ]

    /// A random edge string, sometimes two glued together, sometimes long.
    static func random(_ random: inout FuzzRandom) -> String {
        switch random.below(10) {
        case 0: return random.pick(samples) + random.pick(samples)
        case 1: return String(repeating: random.pick(samples.filter { !$0.isEmpty }), count: random.int(in: 1...2000))
        case 2: return String(decoding: random.bytes(random.smallCount(max: 40)).map { $0 & 0x7F }, as: UTF8.self)
        default: return random.pick(samples)
        }
    }
}

/// The seed corpus of the bundle fuzz tests: small valid bundles of format 1, each showing the
/// decoder something different. The files in `Fixtures/fuzz/bundle/` were written by
/// `CONCORD_FUZZ_WRITE_CORPUS=1 swift test --filter BundleFuzzCorpusTests` from `build()`; the
/// fuzz tests read the files (and `Fixtures/bundle-v1/`), so the corpus stays fixed.
enum FuzzCorpus {
    static let directory = fixturesDirectory.appendingPathComponent("fuzz/bundle")

    static let alice = ReplicaID(high: 0xA11C_E000_0000_0001, low: 0x0000_0000_0000_00A1)
    static let bob = ReplicaID(high: 0xB0B0_0000_0000_0002, low: 0x0000_0000_0000_00B2)
    static let carol = ReplicaID(high: 0xCA20_1000_0000_0003, low: 0x0000_0000_0000_00C3)
    static let reminder = RecordRef.reminder(RecordID(high: 0x1111, low: 1))
    static let note = RecordRef.note(RecordID(high: 0x2222, low: 2))
    static let alien = RecordRef(kind: RecordKind(rawValue: 7), id: RecordID(high: 0x7777, low: 7))
    static let millis: UInt64 = 1_795_000_000_000

    /// Operations of one author with contiguous seqs from `first`, one millisecond apart.
    static func ops(_ author: ReplicaID, from first: UInt64 = 1, at start: UInt64 = millis, _ items: [(RecordRef, Action)]) -> [Op] {
        items.enumerated().map { index, item in
            Op(id: OperationID(replica: author, seq: first + UInt64(index)),
               timestamp: Timestamp(physicalMillis: start + UInt64(index), logical: UInt16(index % 3)),
               record: item.0, action: item.1)
        }
    }

    static func bundle(_ operations: [Op], publisher: ReplicaID = alice, base: VersionVector = VersionVector(), top: VersionVector? = nil) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var latest: [ReplicaID: UInt64] = [:]
        for operation in operations { latest[operation.id.replica] = max(latest[operation.id.replica] ?? 0, operation.id.seq) }
        let manifest = BundleManifest(publisher: publisher, createdMillis: millis, base: base, top: top ?? VersionVector(latest))
        var writer = try BundleWriter(manifest: manifest) { bytes += $0 }
        for operation in operations { try writer.append(operation) }
        _ = try writer.finish()
        return bytes
    }

    /// Every seed, by file name.
    static func build() throws -> [(name: String, bytes: [UInt8])] {
        var seeds: [(String, [UInt8])] = []
        seeds.append(("empty.cbundle", try bundle([])))
        seeds.append(("one-op.cbundle", try bundle(ops(alice, [(note, .assign(.title, .string("Lisbon")))]))))

        let aliceOps = ops(alice, [
            (reminder, .assign(.title, .string("Renew passport"))),
            (reminder, .assign(.notes, .null)),
            (reminder, .assign(.due, .int(1_796_000_000_000))),
            (reminder, .assign(.priority, .int(3))),
            (reminder, .addTag("errands")),
        ])
        let bobOps = ops(bob, at: millis + 50, [
            (reminder, .assign(.completed, .int(1_795_000_100_000))),
            (note, .assign(.title, .string("Trip"))),
            (note, .assign(.pinned, .bool(true))),
        ])
        let carolOps = ops(carol, from: 3, at: millis + 90, [
            (reminder, .assign(.deleted, .bool(true))),
            (reminder, .assign(.deleted, .bool(false))),
        ])
        seeds.append(("several-replicas.cbundle", try bundle(
            aliceOps + bobOps + carolOps, publisher: bob, base: VersionVector([carol: 2]),
            top: VersionVector([alice: 5, bob: 3, carol: 4]))))

        seeds.append(("unknown-fields-and-kinds.cbundle", try bundle(ops(alice, [
            (alien, .assign(.other("color"), .string("teal"))),
            (alien, .assign(.title, .int(-1))),  // a known field name on an unknown kind: any type
            (alien, .addTag("alien-tag")),
            (reminder, .assign(.other("x-ünïcødé"), .int(Int64.min))),
            (reminder, .assign(.other("flag"), .bool(false))),
            (reminder, .assign(.other("nothing"), .null)),
            (reminder, .assign(.priority, .int(9))),
            (reminder, .assign(.repeatRule, .string("fortnightly"))),
            (note, .assign(.due, .string("a note has no due field"))),
            (RecordRef(kind: RecordKind(rawValue: 255), id: RecordID(high: 0, low: 0)), .assign(.other("z"), .int(Int64.max))),
        ]))))

        let a1 = OperationID(replica: alice, seq: 1)
        let a2 = OperationID(replica: alice, seq: 2)
        let b1 = OperationID(replica: bob, seq: 1)
        seeds.append(("tags.cbundle", try bundle(
            ops(alice, [
                (note, .addTag("home")),
                (note, .addTag("home")),
                (note, .addTag(ExactString(EdgeStrings.nfc))),
                (note, .addTag(ExactString(EdgeStrings.nfd))),
                (note, .removeTag("home", observed: [a1, b1])),
                (note, .removeTag("never-added", observed: [])),
                (note, .addTag("🏷️ \u{0} שלום")),
            ]) + ops(bob, at: millis + 3, [
                (note, .addTag("home")),
                (note, .removeTag("home", observed: [a2, OperationID(replica: carol, seq: 99)])),
            ]))))

        seeds.append(("strings.cbundle", try bundle(ops(carol, [
            (note, .assign(.title, .string(""))),
            (note, .assign(.body, .string("👩‍👩‍👧‍👦 \(EdgeStrings.nfc) \(EdgeStrings.nfd) שלום \u{202E}abc\u{202C} \u{10FFFF}\u{FEFF}"))),
            (reminder, .assign(.notes, .string(String(repeating: "Ω≈ç√", count: 300)))),
            (reminder, .assign(.other("nul\u{0}name"), .string("nul\u{0}value"))),
        ]))))

        // Operations held above a gap: seqs 7–8 of Alice without 1–6, and a far-future timestamp.
        var gapped = ops(alice, from: 7, [
            (note, .assign(.pinned, .bool(false))),
            (reminder, .assign(.snoozedUntil, .int(253_402_300_799_999))),
        ])
        gapped.append(Op(
            id: OperationID(replica: bob, seq: 1), timestamp: Timestamp(physicalMillis: Timestamp.maxPhysicalMillis, logical: 0xFFFF),
            record: note, action: .assign(.body, .string("from the year 9999"))))
        seeds.append(("gaps-and-limits.cbundle", try bundle(gapped, base: VersionVector([alice: 2]))))

        seeds.append(("blocks.cbundle", try severalBlocks()))
        return seeds
    }

    /// Three operations blocks (one in a hand-made frame of raw blocks), runs out of seq order
    /// and a replica's run split across blocks: what a writer that closes blocks at ~1 MiB makes
    /// of a large bundle, at a size that fuzzes quickly.
    static func severalBlocks() throws -> [UInt8] {
        let aliceOps = ops(alice, [
            (reminder, .assign(.title, .string("one"))), (reminder, .assign(.title, .string("two"))),
            (note, .assign(.title, .string("three"))), (note, .addTag("x")), (note, .assign(.body, .string("five"))),
        ])
        let bobOps = ops(bob, [(note, .addTag("y")), (note, .removeTag("x", observed: [OperationID(replica: alice, seq: 4)]))])
        func payload(_ runs: [(ReplicaID, [Op])]) -> [UInt8] {
            var table: [ReplicaID] = []
            for (author, _) in runs where !table.contains(author) { table.append(author) }
            return OperationsPayload(replicas: table.map(\.bytes), runs: runs.map { author, operations in
                var writer = ByteWriter()
                OperationCodec.encode(operations, into: &writer)
                return .init(author: UInt64(table.firstIndex(of: author)!), firstSeq: operations[0].id.seq, count: UInt64(operations.count), bytes: writer.bytes)
            }).serialized()
        }
        var manifest = ByteWriter()
        manifest.identifier(alice)
        manifest.varint(millis)
        manifest.varint(0)
        manifest.varint(2)
        manifest.identifier(alice)
        manifest.varint(5)
        manifest.identifier(bob)
        manifest.varint(2)
        return BundleImage(blocks: [
            .init(type: 1, flags: 0, raw: manifest.bytes),
            .init(type: 2, flags: 1, raw: payload([(alice, Array(aliceOps[3...])), (bob, bobOps)])),
            .init(type: 2, flags: 1, raw: payload([(alice, Array(aliceOps[..<2]))])),
            .init(type: 2, flags: 1, raw: payload([(alice, [aliceOps[2]])]), compression: .rawFrame),
            .init(type: 3, flags: 0, raw: []),
        ]).assemble(compression: .zstd(3), end: .rebuild)
    }

    /// The seeds the fuzz tests start from: this corpus and the format-1 fixtures.
    /// The files, and each of them written again in the newest format (named `NAME-vN.cbundle`),
    /// whose blocks hold columns (SPEC.md §13): the fuzzers mutate both layouts.
    static func load() throws -> [(name: String, bytes: [UInt8])] {
        var seeds: [(String, [UInt8])] = []
        for folder in [directory, fixturesDirectory.appendingPathComponent("bundle-v1"), fixturesDirectory.appendingPathComponent("bundle-v6")] {
            for name in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() where name.hasSuffix(".cbundle") {
                seeds.append((name, try readBytes(folder.appendingPathComponent(name).path)))
            }
        }
        for (name, bytes) in seeds where bytes[8] < BundleFormat.version {
            let (manifest, operations, _) = try readBundle(bytes)
            var rewritten: [UInt8] = []
            var writer = try BundleWriter(manifest: manifest) { rewritten += $0 }
            for operation in operations { try writer.append(operation) }
            _ = try writer.finish()
            seeds.append((name.replacingOccurrences(of: ".cbundle", with: "-v\(BundleFormat.version).cbundle"), rewritten))
        }
        seeds.append(("blocks-cut-v\(BundleFormat.version).cbundle", try blocksCutAsTheyWere()))
        return seeds
    }

    /// `blocks.cbundle` in the newest format with its blocks cut where they were: its third block
    /// names by number a record that its first named (SPEC.md §13, "The record table").
    static func blocksCutAsTheyWere() throws -> [UInt8] {
        let image = try #require(BundleImage(parsing: try severalBlocks()))
        var encoder = OperationsBlock.Encoder(layout: .columns, reach: BundleFormat.reach(BundleFormat.version))
        var blocks: [BundleImage.Block] = []
        for block in image.blocks {
            switch block.type {
            case 1: blocks.append(.init(type: 1, flags: 0, raw: block.raw + [0]))  // no removes dropped
            case 2:
                try OperationsBlock.decode(block.raw, layout: .rows) { encoder.append($0) }
                blocks.append(.init(type: 2, flags: 1, raw: encoder.finish()))
            default: blocks.append(block)
            }
        }
        return BundleImage(header: BundleFormat.magic + [BundleFormat.version, 0], blocks: blocks).assemble(compression: .zstd(3), end: .rebuild)
    }
}

/// The seed corpus is valid: every seed reads whole, one byte at a time too, and merges into a
/// store that then verifies sound.
@Suite struct BundleFuzzCorpusTests {
    @Test func theCorpusIsWhatItsBuilderWrites() throws {
        let built = try FuzzCorpus.build()
        if ProcessInfo.processInfo.environment["CONCORD_FUZZ_WRITE_CORPUS"] == "1" {
            try FileManager.default.createDirectory(at: FuzzCorpus.directory, withIntermediateDirectories: true)
            for (name, bytes) in built { try writeBytes(bytes, to: FuzzCorpus.directory.appendingPathComponent(name).path) }
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: FuzzCorpus.directory.path).filter { $0.hasSuffix(".cbundle") }
        #expect(Set(files) == Set(built.map(\.name)))
        // zstd output may change between zstd versions: compare what the bundles hold.
        for (name, bytes) in built {
            let file = try readBytes(FuzzCorpus.directory.appendingPathComponent(name).path)
            let (fileManifest, fileOperations, _) = try readBundle(file)
            let (manifest, operations, _) = try readBundle(bytes)
            #expect(fileManifest == manifest, "\(name)")
            #expect(fileOperations == operations, "\(name)")
        }
    }

    @Test(arguments: try FuzzCorpus.load().map(\.name))
    func everySeedReadsAndMerges(name: String) throws {
        let bytes = try #require(FuzzCorpus.load().first { $0.name == name }).bytes
        let (manifest, operations, summary) = try readBundle(bytes)
        #expect(summary.bytes == bytes.count)
        let (_, byteByByte, _) = try readBundle(bytes, chunk: 1)
        #expect(byteByByte == operations)
        #expect(BundleImage(parsing: bytes) != nil, "the test-side parser reads \(name)")

        let directory = try TemporaryDirectory()
        try writeBytes(bytes, to: directory.file(name))
        let store = try ConcordStore.create(at: directory.file("store.db"), environment: environment(clock: ManualClock(baseMillis), seed: 1))
        let (report, read) = try store.mergeBundle(at: directory.file(name))
        #expect(read.manifest == manifest)
        #expect(report.newOperationCount == Set(operations.map(\.id)).count)
        let verified = try store.verify()
        #expect(verified.isSound, "\(name): \(verified.problems)")
        #expect(Set(try store.allOperations()) == Set(operations))
    }
}
