import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordStore
import Foundation
import Testing

/// Encrypted bundles (SPEC.md §13.1): the format against its fixture, and every way a file can be
/// cut, changed, reordered or sealed with another key.
@Suite struct EncryptedBundleTests {
    static let fixtureKey: SyncKey = {
        let text = try! String(contentsOf: fixturesDirectory.appendingPathComponent("encrypted-bundle-v1/basic.key"), encoding: .utf8)
        return try! SyncKey(text: text)
    }()

    /// A seeded salt, as the fixture's script uses: bytes 0xa0 to 0xbf.
    static let fixtureSalt = RandomBytes { count in (0..<count).map { UInt8(0xA0 + $0) } }

    /// `plain` sealed with `key` (a random salt unless given).
    static func seal(_ plain: [UInt8], key: SyncKey, salt: RandomBytes = .system) throws -> [UInt8] {
        var out: [UInt8] = []
        let sealer = try BundleSealer(key: key, random: salt) { out += $0 }
        try sealer.write(plain)
        try sealer.finish()
        #expect(sealer.bytesWritten == out.count)
        return out
    }

    /// Reads an encrypted (or plain) bundle from memory with `key`.
    static func read(_ bytes: [UInt8], key: SyncKey?, chunk: Int = .max) throws -> [Op] {
        var reader = BundleReader(try BundleSource(MemorySource(bytes, chunk: chunk), key: key))
        var operations: [Op] = []
        try reader.forEachOperation { operations.append($0) }
        return operations
    }

    static func error(_ bytes: [UInt8], key: SyncKey?, chunk: Int = .max) -> BundleError? {
        do {
            _ = try read(bytes, key: key, chunk: chunk)
            return nil
        } catch let error as BundleError {
            return error
        } catch {
            Issue.record("not a BundleError: \(error)")
            return nil
        }
    }

    /// A plain bundle of several chunks: many operations with long text.
    static func bigPlainBundle() throws -> [UInt8] {
        let store = try ConcordStore.inMemory(environment: .deterministic(seed: 3))
        var changes: [(RecordRef, Change)] = []
        var generator = SplitMix64(seed: 5)
        for index in 0..<1_200 {
            // Random hex: text that zstd cannot shrink much, so the bundle spans several chunks.
            let text = (0..<25).map { _ in String(generator.next(), radix: 16) }.joined(separator: " ")
            changes.append((.reminder(RecordID(high: 9, low: UInt64(index))), .createReminder(ReminderDraft(title: "r\(index)", notes: text))))
        }
        try store.perform(changes)
        var bytes: [UInt8] = []
        let manifest = BundleManifest(publisher: store.replicaID, createdMillis: 0, base: VersionVector(), top: try store.versionVector())
        var writer = try BundleWriter(manifest: manifest) { bytes += $0 }
        try store.forEachOperation { try writer.append($0) }
        _ = try writer.finish()
        return bytes
    }

    // MARK: The fixture

    @Test func theFixtureDecryptsToTheSameOperationsAsThePlainBundle() throws {
        let plain = try readBytes(fixturesDirectory.appendingPathComponent("bundle-v1/basic.cbundle").path)
        let sealed = try readBytes(fixturesDirectory.appendingPathComponent("encrypted-bundle-v1/basic.cbundle").path)
        #expect(sealed.starts(with: EncryptedBundleFormat.magic))
        #expect(try Self.read(sealed, key: Self.fixtureKey) == (try readBundle(plain).1))
        for chunk in [1, 3, 50] {
            #expect(try Self.read(sealed, key: Self.fixtureKey, chunk: chunk) == (try readBundle(plain).1), "read \(chunk) bytes at a time")
        }
        // The Swift sealer, given the fixture's salt, writes the fixture byte for byte.
        #expect(try Self.seal(plain, key: Self.fixtureKey, salt: Self.fixtureSalt) == sealed)
    }

    @Test func theFixtureMergesIntoAStoreWithItsKey() throws {
        let directory = try TemporaryDirectory()
        let path = fixturesDirectory.appendingPathComponent("encrypted-bundle-v1/basic.cbundle").path
        let store = try ConcordStore.create(at: directory.file("s.db"), environment: .deterministic(seed: 1))
        #expect(throws: ConcordError.self) { try store.mergeBundle(at: path) }
        #expect(try store.allOperations().isEmpty, "no key: nothing applied")
        try store.setSyncKey(Self.fixtureKey)
        try store.mergeBundle(at: path)
        let expected = try String(contentsOf: fixturesDirectory.appendingPathComponent("encrypted-bundle-v1/basic.dump.json"), encoding: .utf8)
        #expect(try store.dump() == expected.trimmingCharacters(in: .newlines))
    }

    // MARK: Round trips

    @Test func manyChunksRoundTripReadInAnyPieces() throws {
        let plain = try Self.bigPlainBundle()
        #expect(plain.count > 2 * EncryptedBundleFormat.chunkBytes, "several chunks: \(plain.count) bytes")
        let key = SyncKey.generate()
        let sealed = try Self.seal(plain, key: key)
        let chunks = (plain.count + EncryptedBundleFormat.chunkBytes - 1) / EncryptedBundleFormat.chunkBytes
        #expect(sealed.count == EncryptedBundleFormat.headerBytes + plain.count + chunks * (4 + EncryptedBundleFormat.tagBytes))
        let expected = try readBundle(plain).1
        for chunk in [Int.max, 65_536, 65_553, 4_097, 1_000] {
            #expect(try Self.read(sealed, key: key, chunk: chunk) == expected, "read \(chunk) bytes at a time")
        }
        // Two seals of the same bundle differ (fresh salt), and neither shows the plain bytes.
        let again = try Self.seal(plain, key: key)
        #expect(again != sealed)
        #expect(Array(sealed[18..<50]) != Array(again[18..<50]))
    }

    @Test func aPlainBundleOfExactlyOneChunkEndsWithAFullLastChunk() throws {
        // Writes in odd pieces, and a plain length that is a multiple of the chunk size.
        let key = SyncKey.generate()
        let plain = [UInt8](repeating: 7, count: 2 * EncryptedBundleFormat.chunkBytes)
        var out: [UInt8] = []
        let sealer = try BundleSealer(key: key) { out += $0 }
        for piece in stride(from: 0, to: plain.count, by: 9_999) { try sealer.write(plain[piece..<min(piece + 9_999, plain.count)]) }
        try sealer.finish()
        #expect(out.count == 50 + 2 * (4 + 65_536 + 16))
        var source = try BundleSource(MemorySource(out), key: key)
        var opened: [UInt8] = []
        while case let bytes = try source.read(maxCount: 5_000), !bytes.isEmpty { opened += bytes }
        #expect(opened == plain)
    }

    // MARK: Refusals

    @Test func noKeyAnotherKeyOrAPlainReaderAreRefusedClearly() throws {
        let key = SyncKey.generate()
        let other = SyncKey.generate()
        let sealed = try Self.seal(try Self.bigPlainBundle(), key: key)
        #expect(Self.error(sealed, key: nil) == .encrypted(keyID: key.id))
        #expect(Self.error(sealed, key: other) == .wrongKey(bundle: key.id, store: other.id))
        #expect(BundleError.encrypted(keyID: key.id).description.contains("this store has no sync key"))
        // A reader that knows only plain bundles says it is not one.
        #expect(bundleError(sealed) as? BundleError == .notABundle)
        #expect(FileKind.of(path: fixturesDirectory.appendingPathComponent("encrypted-bundle-v1/basic.cbundle").path) == .encryptedBundle)
    }

    @Test func everyCutIsTruncatedAndNothingIsRead() throws {
        let key = SyncKey.generate()
        let sealed = try Self.seal(try Self.bigPlainBundle(), key: key)
        let boundaries = chunkOffsets(sealed)
        var cuts = Set(boundaries + boundaries.map { $0 + 1 } + boundaries.map { $0 + 4 } + [10, 17, 49, 50, sealed.count - 1])
        for _ in 0..<40 { cuts.insert(Int.random(in: 8..<sealed.count)) }
        for cut in cuts.sorted() where cut < sealed.count {
            #expect(Self.error(Array(sealed[..<cut]), key: key) == .truncated, "cut at \(cut) of \(sealed.count)")
        }
    }

    @Test func changedReorderedDroppedOrForeignChunksFailAuthentication() throws {
        let key = SyncKey.generate()
        let sealed = try Self.seal(try Self.bigPlainBundle(), key: key)
        let offsets = chunkOffsets(sealed)
        #expect(offsets.count >= 3)
        // Any bit of a chunk's ciphertext or tag, or of the salt (which is the file key's).
        var positions = [19, 30, 49] + offsets.flatMap { [$0 + 4, $0 + 5, $0 + 1000] } + [sealed.count - 1, sealed.count - 16]
        for _ in 0..<30 { positions.append(Int.random(in: 18..<sealed.count)) }
        for position in positions where !offsets.contains(where: { (($0)..<($0 + 4)).contains(position) }) {
            var changed = sealed
            changed[position] ^= 0x01
            #expect(Self.error(changed, key: key) == .authenticationFailed, "bit flipped at \(position)")
        }
        // Header fields are authenticated too: the key id and reserved flags are refused before.
        var flags = sealed
        flags[9] = 1
        #expect(Self.error(flags, key: key).map { "\($0)" }?.contains("flags") == true)
        var keyID = sealed
        keyID[12] ^= 0xFF
        #expect(Self.error(keyID, key: key) == .wrongKey(bundle: EncryptedBundleFormat.hexID(Array(keyID[10..<18])), store: key.id))
        // Swap the first two chunks.
        let first = Array(sealed[offsets[0]..<offsets[1]])
        let second = Array(sealed[offsets[1]..<offsets[2]])
        let swapped = Array(sealed[..<offsets[0]]) + second + first + Array(sealed[offsets[2]...])
        #expect(Self.error(swapped, key: key) == .authenticationFailed)
        // Drop a middle chunk; repeat one.
        let dropped = Array(sealed[..<offsets[1]]) + Array(sealed[offsets[2]...])
        #expect(Self.error(dropped, key: key) == .authenticationFailed)
        let repeated = Array(sealed[..<offsets[1]]) + first + Array(sealed[offsets[1]...])
        #expect(Self.error(repeated, key: key) == .authenticationFailed)
        // Drop the last chunk: a full chunk that is not flagged as the last, then the end.
        let cutLast = Array(sealed[..<offsets.last!])
        #expect(Self.error(cutLast, key: key) == .truncated)
        // A chunk of another file sealed with the same key (another salt) is foreign.
        let otherFile = try Self.seal(try Self.bigPlainBundle(), key: key)
        let otherOffsets = chunkOffsets(otherFile)
        let spliced = Array(sealed[..<offsets[1]]) + Array(otherFile[otherOffsets[1]..<otherOffsets[2]]) + Array(sealed[offsets[2]...])
        #expect(Self.error(spliced, key: key) == .authenticationFailed)
        // Bytes after the last chunk.
        #expect(Self.error(sealed + [0], key: key).map { "\($0)" }?.contains("after the last") == true)
        // A newer format version.
        var newer = sealed
        newer[8] = 2
        #expect(Self.error(newer, key: key).map { "\($0)" }?.contains("newer than this build reads") == true)
        // A length prefix over the limit is refused before reading the chunk.
        var huge = sealed
        huge[offsets[0]] = 0x7F
        #expect(Self.error(huge, key: key).map { "\($0)" }?.contains("an encrypted chunk of") == true)
    }

    /// The offsets of the chunks' length prefixes.
    func chunkOffsets(_ sealed: [UInt8]) -> [Int] {
        var offsets: [Int] = []
        var offset = EncryptedBundleFormat.headerBytes
        while offset + 4 <= sealed.count {
            offsets.append(offset)
            offset += 4 + sealed[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        }
        return offsets
    }
}

extension EncryptedBundleFormat {
    static func hexID(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}
