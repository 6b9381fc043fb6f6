import ConcordCore
import ConcordExchange
import ConcordStore
import Foundation
import Testing

/// Damaged, foreign and newer bundles are refused whole, with the right error, and change nothing
/// (SPEC.md §13, "Reading is all or nothing").
@Suite struct BundleDamageTests {
    /// A small valid bundle of two authors, and the operations it holds.
    static func smallBundle() throws -> (bytes: [UInt8], operations: [Op]) {
        let clockA = ManualClock(baseMillis)
        let a = try ConcordStore.inMemory(environment: environment(clock: clockA, seed: 101))
        let id = try a.addReminder(ReminderDraft(title: "Pay rent", notes: "before the 5th", priority: .medium, tags: ["home"]))
        try a.completeReminder(id)
        let clockB = ManualClock(baseMillis + 9)
        let b = try ConcordStore.inMemory(environment: environment(clock: clockB, seed: 102))
        try b.addNote(NoteDraft(title: "Wi-Fi", body: "hunter2", tags: ["home"]))
        try a.merge(try b.allOperations())
        try a.tag(.reminder(id), add: ["money"], remove: ["home"])
        var bytes: [UInt8] = []
        let manifest = BundleManifest(publisher: a.replicaID, createdMillis: 123, base: VersionVector(), top: try a.versionVector())
        var writer = try BundleWriter(manifest: manifest) { bytes += $0 }
        try a.forEachOperation { try writer.append($0) }
        _ = try writer.finish()
        return (bytes, try a.allOperations())
    }

    /// A store with a state of its own that damaged bundles are merged into.
    static func targetStore(mergeBatch: MergeBatch = .standard) throws -> ConcordStore {
        let clock = ManualClock(baseMillis + 100)
        var environment = environment(clock: clock, seed: 103)
        environment.mergeBatch = mergeBatch
        let store = try ConcordStore.inMemory(environment: environment)
        let id = try store.addReminder(ReminderDraft(title: "target's own", tags: ["x"]))
        try store.editReminder(id, ReminderPatch(priority: .high))
        return store
    }

    /// Every damaged variant of the small bundle: each truncation, and each byte xor each mask.
    static func damagedVariants(of bytes: [UInt8]) -> [(label: String, bytes: [UInt8])] {
        var variants: [(String, [UInt8])] = []
        for length in 0..<bytes.count { variants.append(("truncated to \(length)", Array(bytes[..<length]))) }
        for position in bytes.indices {
            for mask: UInt8 in [0x01, 0x02, 0x10, 0x80, 0xFF] {
                var copy = bytes
                copy[position] ^= mask
                variants.append(("byte \(position) ^ 0x\(String(mask, radix: 16))", copy))
            }
        }
        return variants
    }

    @Test func theSmallBundleIsValid() throws {
        let (bytes, operations) = try Self.smallBundle()
        let (_, read, summary) = try readBundle(bytes)
        #expect(read == operations)
        #expect(summary.bytes == bytes.count)
        #expect(bytes.count > 100)
        // One block of each kind.
        #expect(blocks(of: bytes).map(\.type) == [1, 2, 3])
    }

    /// Every truncation and every single-byte change is refused by the reader, with a
    /// `BundleError`, read whole or one byte at a time.
    @Test func everyTruncationAndByteFlipIsRefusedByTheReader() throws {
        let (bytes, _) = try Self.smallBundle()
        var failures: [String] = []
        let variants = Self.damagedVariants(of: bytes)
        #expect(variants.count == bytes.count * 6)
        for (label, variant) in variants {
            for chunk in [Int.max, 1] {
                switch bundleError(variant, chunk: chunk) {
                case nil: failures.append("\(label) (chunk \(chunk)): read without error")
                case is BundleError: break
                case let error?: failures.append("\(label) (chunk \(chunk)): \(type(of: error)) \(error), not a BundleError")
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.count) damaged variants were not refused: \(failures.prefix(20))")
    }

    /// Truncations are told apart: an empty file is not a bundle; any other cut, even inside the
    /// magic (a file still arriving), is truncated (SPEC.md §13).
    @Test func truncationsAreReportedAsTruncated() throws {
        let (bytes, _) = try Self.smallBundle()
        for length in 0..<bytes.count {
            let error = bundleError(Array(bytes[..<length])) as? BundleError
            if length == 0 {
                #expect(error == .notABundle, "length \(length)")
            } else {
                #expect(error == .truncated, "length \(length): \(String(describing: error))")
            }
        }
    }

    /// Merged into a store through `merge(reading:)`, no damaged variant changes the store's
    /// dump or version vector, and the error is an invalid-input store error.
    @Test func damagedBundlesLeaveTheStoreUnchanged() throws {
        let (bytes, _) = try Self.smallBundle()
        let store = try Self.targetStore()
        let dump = try store.dump()
        let vector = try store.versionVector()
        var failures: [String] = []
        for (label, variant) in Self.damagedVariants(of: bytes) {
            do {
                try store.merge { ingest in
                    var reader = BundleReader(MemorySource(variant))
                    try reader.forEachOperation(ingest)
                }
                failures.append("\(label): merged")
            } catch {
                if error.code != .invalidInput { failures.append("\(label): \(error.code) \(error)") }
            }
            if try store.dump() != dump || store.versionVector() != vector {
                failures.append("\(label): changed the store")
                break
            }
        }
        #expect(failures.isEmpty, "\(failures.prefix(20))")
        // The intact bundle does merge into that same store.
        let report = try store.merge { ingest in
            var reader = BundleReader(MemorySource(bytes))
            try reader.forEachOperation(ingest)
        }
        #expect(report.newOperationCount == (try Self.smallBundle()).operations.count)
    }

    /// The same from files with `mergeBundle(at:)`: an `ConcordError` of code `invalidInput` that
    /// names the file, and no change. In each of the ways a merge of bundles runs (SPEC.md §5.6),
    /// all after a check of the whole bundle: one transaction; batches, as it holds more operations
    /// than a batch logs; one transaction that applies a batch of records, then batches that apply
    /// the rest, as it touches more records than a batch applies.
    @Test(arguments: [
        MergeBatch.standard, MergeBatch(operations: 3, records: 1_000), MergeBatch(operations: 1_000_000, records: 1),
    ])
    func damagedBundleFilesLeaveTheStoreUnchanged(mergeBatch: MergeBatch) throws {
        let (bytes, _) = try Self.smallBundle()
        let directory = try TemporaryDirectory()
        let store = try Self.targetStore(mergeBatch: mergeBatch)
        let dump = try store.dump()
        let vector = try store.versionVector()
        var failures: [String] = []
        let path = directory.file("damaged.cbundle")
        // Every truncation, and every flip with one mask (the reader test above covers the rest).
        var variants = (0..<bytes.count).map { ("truncated to \($0)", Array(bytes[..<$0])) }
        for position in bytes.indices {
            var copy = bytes
            copy[position] ^= 0x04
            variants.append(("byte \(position) ^ 0x04", copy))
        }
        for (label, variant) in variants {
            try writeBytes(variant, to: path)
            do {
                try store.mergeBundle(at: path)
                failures.append("\(label): merged")
            } catch let error as ConcordError {
                if error.code != .invalidInput { failures.append("\(label): code \(error.code)") }
                if !error.message.hasPrefix(path + ": ") { failures.append("\(label): message \(error.message)") }
            } catch {
                if !(error is FileInputError) { failures.append("\(label): \(type(of: error)) \(error)") }
            }
            if try store.dump() != dump || store.versionVector() != vector {
                failures.append("\(label): changed the store")
                break
            }
        }
        #expect(failures.isEmpty, "\(failures.prefix(20))")
        try writeBytes(bytes, to: path)
        let (report, _) = try store.mergeBundle(at: path)
        #expect(report.newOperationCount > 0)
    }

    /// A source that serves `prefix`, then zeros forever, and counts what it served.
    final class EndlessSource: ByteSource {
        let prefix: [UInt8]
        var served = 0
        var largestRequest = 0

        init(prefix: [UInt8]) {
            self.prefix = prefix
        }

        func read(maxCount: Int) -> [UInt8] {
            largestRequest = max(largestRequest, maxCount)
            let count = min(maxCount, 1 << 16)
            defer { served += count }
            return (served..<served + count).map { $0 < prefix.count ? prefix[$0] : 0 }
        }
    }

    /// A block header claiming 4 GB (stored or raw) is refused as corrupt before anything is read
    /// or allocated for it: followed by endless zeros, the reader asks for nothing past the header.
    @Test func aBlockClaimingFourGigabytesIsRefusedAtOnce() throws {
        let (bytes, _) = try Self.smallBundle()
        for block in blocks(of: bytes) {
            for field in [2, 6] {  // stored length, raw length
                var copy = bytes
                for index in 0..<4 { copy[block.offset + field + index] = 0xFF }
                let prefix = Array(copy[..<(block.offset + 14)])
                let source = EndlessSource(prefix: prefix)
                var reader = BundleReader(source)
                var error: BundleError?
                do {
                    try reader.forEachOperation { _ in }
                } catch let thrown as BundleError {
                    error = thrown
                }
                guard case .corrupt(let why)? = error else {
                    Issue.record("\(block), field \(field): \(String(describing: error))")
                    continue
                }
                #expect(why.contains("4294967295"), "\(why)")
                #expect(source.served == prefix.count, "\(block), field \(field): read \(source.served - prefix.count) bytes past the header")
                #expect(source.largestRequest <= BundleFormat.maxBlockBytes, "asked for \(source.largestRequest) bytes at once")
            }
        }
    }

    @Test func aNewerFormatVersionIsRefusedAsSuch() throws {
        let (bytes, _) = try Self.smallBundle()
        var newer = bytes
        newer[8] = 8
        #expect(bundleError(newer) as? BundleError == .newerVersion(8))
        // Even when the rest would not parse as version 1: the version is checked first.
        let alien = BundleFormat.magic + [8, 0x7F] + Array(repeating: 0xEE, count: 50)
        #expect(bundleError(alien) as? BundleError == .newerVersion(8))
        #expect(BundleError.newerVersion(8).description.contains("bundle format version 8 is newer than this build reads"))

        let directory = try TemporaryDirectory()
        try writeBytes(newer, to: directory.file("v8.cbundle"))
        let store = try Self.targetStore()
        let dump = try store.dump()
        do {
            try store.mergeBundle(at: directory.file("v8.cbundle"))
            Issue.record("a version 8 bundle was merged")
        } catch let error as ConcordError {
            #expect(error.code == .invalidInput)
            #expect(error.message.contains("bundle format version 8 is newer than this build reads (7)"), "\(error.message)")
        }
        #expect(try store.dump() == dump)
    }

    @Test func whatIsNotABundleIsRefusedAsNotABundle() throws {
        let sqlite = Array("SQLite format 3\0".utf8) + Array(repeating: 0, count: 84)
        let samples: [[UInt8]] = [
            [],
            Array("hello".utf8),
            Array("{\"format\":\"concord-dump\",\"records\":[],\"version\":1}".utf8),
            sqlite,
            Array(repeating: 0, count: 4096),
            [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 0, 1, 2, 3],  // a PNG header
        ]
        for sample in samples {
            #expect(bundleError(sample) as? BundleError == .notABundle, "\(sample.prefix(16))")
        }
        let directory = try TemporaryDirectory()
        try writeBytes(sqlite, to: directory.file("x"))
        #expect(FileKind.of(path: directory.file("x")) == .store)
        try writeBytes(samples[1], to: directory.file("y"))
        #expect(FileKind.of(path: directory.file("y")) == .other)
        let store = try Self.targetStore()
        do {
            try store.mergeBundle(at: directory.file("y"))
            Issue.record("text was merged as a bundle")
        } catch let error as ConcordError {
            #expect(error.code == .invalidInput)
            #expect(error.message == directory.file("y") + ": not a Concord bundle", "\(error.message)")
        }
        // A file that is not there.
        #expect(throws: ConcordError.self) { try store.mergeBundle(at: directory.file("missing.cbundle")) }
        // A store, even this very one, given as a bundle: refused before it is opened outside
        // SQLite (SPEC.md §9), and its connection still works.
        let onDisk = try ConcordStore.create(at: directory.file("a.db"))
        let refused = #expect(throws: ConcordError.self) { try onDisk.mergeBundle(at: onDisk.path) }
        #expect(refused?.message == "\(onDisk.path) is a Concord store, not a bundle")
        _ = try onDisk.addNote(NoteDraft(title: "still written"))
        #expect(try ConcordStore.open(at: onDisk.path, readOnly: true).verify().isSound)
    }

    @Test func bytesAfterTheEndBlockAreRefused() throws {
        let (bytes, _) = try Self.smallBundle()
        let store = try Self.targetStore()
        let dump = try store.dump()
        for tail in [[0], [0x89], Array(repeating: 0, count: 4096), bytes] as [[UInt8]] {
            let error = bundleError(bytes + tail)
            guard case .corrupt(let why)? = error as? BundleError else {
                Issue.record("\(tail.count) trailing bytes: \(String(describing: error))")
                continue
            }
            #expect(why.contains("after the end block"), "\(why)")
            #expect(throws: ConcordError.self) {
                try store.merge { ingest in
                    var reader = BundleReader(MemorySource(bytes + tail, chunk: 3))
                    try reader.forEachOperation(ingest)
                }
            }
            #expect(try store.dump() == dump)
        }
    }

    /// Blocks in the wrong order or of unknown kinds, with their checksums right, are refused.
    @Test func wellChecksummedButMisplacedBlocksAreRefused() throws {
        let (bytes, _) = try Self.smallBundle()
        let layout = blocks(of: bytes)
        let header = Array(bytes[..<10])
        let manifest = Array(bytes[layout[0].offset..<layout[0].end])
        let operations = Array(bytes[layout[1].offset..<layout[1].end])
        let variants: [(String, [UInt8])] = [
            ("no manifest", header + operations + Array(bytes[layout[2].offset...])),
            ("two manifests", header + manifest + manifest + operations),
            ("no end block", header + manifest + operations),
            ("operations block twice", header + manifest + operations + operations + Array(bytes[layout[2].offset...])),
            ("header flags", Array(bytes[..<9]) + [1] + Array(bytes[10...])),
        ]
        for (label, variant) in variants {
            #expect(bundleError(variant) is BundleError, "\(label)")
        }
    }

    /// SPEC §13: a block's compression flag must match its type (the CRC covers the stored bytes,
    /// not the header, so only this rule catches a flipped flag).
    @Test func aBlockWithTheWrongCompressionFlagIsRefused() throws {
        let (bytes, _) = try Self.smallBundle()
        let layout = blocks(of: bytes)
        for (index, name) in [(0, "manifest"), (1, "operations"), (layout.count - 1, "end")] {
            var flipped = bytes
            flipped[layout[index].offset + 1] ^= 0x01
            #expect(bundleError(flipped) as? BundleError == .corrupt("the \(name) block has the wrong compression flag"), "\(name)")
        }
    }

    /// SPEC §13: writers put a version vector's entries in ascending replica id order and leave
    /// out seq 0; readers take any order and seq 0, and refuse a replica named twice.
    @Test func manifestVectorsAreWrittenInIdOrderAndReadInAny() throws {
        let ids = [ReplicaID(high: 9, low: 0), ReplicaID(high: 1, low: 5), ReplicaID(high: 1, low: 2)]
        var bytes: [UInt8] = []
        let manifest = BundleManifest(publisher: ids[0], createdMillis: 1, base: VersionVector(), top: VersionVector([ids[0]: 3, ids[1]: 2, ids[2]: 1]))
        var writer = try BundleWriter(manifest: manifest) { bytes += $0 }
        _ = try writer.finish()
        let payload = Array(bytes[blocks(of: bytes)[0].payloadOffset..<blocks(of: bytes)[0].end])
        // publisher (16), created (1), base count 0, top count 3, then the entries.
        let top = Array(payload[18...])
        #expect(top[0] == 3)
        #expect([Array(top[1..<17]), Array(top[18..<34]), Array(top[35..<51])] == [ids[2].bytes, ids[1].bytes, ids[0].bytes])

        func bundle(top entries: [(ReplicaID, UInt64)]) -> [UInt8] {
            var payload = ByteWriter()
            payload.identifier(ids[0])
            payload.varint(1)
            payload.varint(0)
            payload.varint(UInt64(entries.count))
            for (replica, seq) in entries {
                payload.identifier(replica)
                payload.varint(seq)
            }
            var result = BundleFormat.magic + [1, 0]
            result += BundleFrameTests.block(1, compressed: false, raw: payload.bytes, stored: payload.bytes)
            var end = ByteWriter()
            end.varint(0)
            end.varint(0)
            end.bytes(BundleFrameTests.be32(CRC32C.checksum(result)))
            return result + BundleFrameTests.block(3, compressed: false, raw: end.bytes, stored: end.bytes)
        }
        let reversed = try readBundle(bundle(top: [(ids[0], 3), (ids[1], 0), (ids[2], 1)])).0
        #expect(reversed.top == VersionVector([ids[0]: 3, ids[2]: 1]))
        #expect(bundleError(bundle(top: [(ids[1], 1), (ids[1], 2)])) as? BundleError == .corrupt("manifest: malformed data: a version vector names a replica twice"))
    }
}

/// Bundles built by hand around hand-made zstd frames (raw blocks, no compression), to check the
/// rule "a compressed payload is one zstd frame" (SPEC.md §13).
@Suite struct BundleFrameTests {
    /// A zstd frame holding `content` in one raw block.
    static func rawFrame(_ content: [UInt8]) -> [UInt8] {
        precondition(content.count < 256 + 65_536)
        var frame: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD]
        if content.count < 256 {
            frame += [0x20, UInt8(content.count)]  // single segment, 1-byte content size
        } else {
            let size = content.count - 256
            frame += [0x60, UInt8(size & 0xFF), UInt8(size >> 8)]  // single segment, 2-byte content size
        }
        let header = content.count << 3 | 1  // last block, raw
        frame += [UInt8(header & 0xFF), UInt8(header >> 8 & 0xFF), UInt8(header >> 16 & 0xFF)]
        return frame + content
    }

    /// A skippable frame of `count` bytes.
    static func skippableFrame(_ count: Int) -> [UInt8] {
        [0x50, 0x2A, 0x4D, 0x18, UInt8(count & 0xFF), UInt8(count >> 8 & 0xFF), 0, 0] + Array(repeating: 0xAB, count: count)
    }

    static func be32(_ value: UInt32) -> [UInt8] { [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) } }

    static func block(_ type: UInt8, compressed: Bool, raw: [UInt8], stored: [UInt8]) -> [UInt8] {
        [type, compressed ? 1 : 0] + be32(UInt32(stored.count)) + be32(UInt32(raw.count)) + be32(CRC32C.checksum(stored)) + stored
    }

    /// A bundle of `operations` (one author, contiguous seqs) whose operations block stores
    /// `encode(raw payload)`.
    static func bundle(_ operations: [Op], encode: ([UInt8]) -> [UInt8]) -> [UInt8] {
        let author = operations[0].id.replica
        var manifest = ByteWriter()
        manifest.identifier(author)
        manifest.varint(1)
        manifest.varint(0)
        manifest.varint(1)
        manifest.identifier(author)
        manifest.varint(operations.last!.id.seq)
        var run = ByteWriter()
        OperationCodec.encode(operations, into: &run)
        var payload = ByteWriter()
        payload.varint(1)
        payload.identifier(author)
        payload.varint(1)
        payload.varint(0)
        payload.varint(operations[0].id.seq)
        payload.varint(UInt64(operations.count))
        payload.varint(UInt64(run.bytes.count))
        payload.bytes(run.bytes)
        var bytes = BundleFormat.magic + [1, 0]
        bytes += block(1, compressed: false, raw: manifest.bytes, stored: manifest.bytes)
        bytes += block(2, compressed: true, raw: payload.bytes, stored: encode(payload.bytes))
        var end = ByteWriter()
        end.varint(UInt64(operations.count))
        end.varint(1)
        end.bytes(be32(CRC32C.checksum(bytes)))
        bytes += block(3, compressed: false, raw: end.bytes, stored: end.bytes)
        return bytes
    }

    static func operations() throws -> [Op] {
        let store = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 111))
        try store.addReminder(ReminderDraft(title: "hand-made", notes: "frames", tags: ["z"]))
        return try store.allOperations()
    }

    @Test func aHandMadeSingleFrameBundleReads() throws {
        let operations = try Self.operations()
        let bytes = Self.bundle(operations) { Self.rawFrame($0) }
        let (_, read, summary) = try readBundle(bytes)
        #expect(read == operations)
        #expect(summary.bytes == bytes.count)
    }

    /// Two frames whose contents add up to the raw length are not one frame.
    @Test func aPayloadOfTwoFramesIsRefused() throws {
        let operations = try Self.operations()
        let bytes = Self.bundle(operations) { payload in
            Self.rawFrame(Array(payload[..<20])) + Self.rawFrame(Array(payload[20...]))
        }
        #expect(bundleError(bytes) is BundleError, "a payload of two zstd frames was accepted")
    }

    /// Nor is a frame followed by a skippable frame.
    @Test func aPayloadWithASkippableFrameIsRefused() throws {
        let operations = try Self.operations()
        let bytes = Self.bundle(operations) { Self.rawFrame($0) + Self.skippableFrame(16) }
        #expect(bundleError(bytes) is BundleError, "a payload with a trailing skippable zstd frame was accepted")
    }

    /// A frame that decompresses to more or fewer bytes than the raw length is refused.
    @Test func aFrameOfTheWrongSizeIsRefused() throws {
        let operations = try Self.operations()
        for bytes in [
            Self.bundle(operations) { Self.rawFrame($0 + [0]) },
            Self.bundle(operations) { Self.rawFrame(Array($0.dropLast())) },
        ] {
            let error = bundleError(bytes) as? BundleError
            guard case .corrupt? = error else {
                Issue.record("\(String(describing: error))")
                continue
            }
        }
    }
}
