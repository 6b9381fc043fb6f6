import ConcordCore
import ConcordKeys
import Crypto
import Foundation

/// Constants of the encrypted bundle format (SPEC.md §13.1): a plain bundle (§13), byte for byte,
/// sealed in chunks with ChaCha20-Poly1305 under a key derived from the sync key and a random salt.
package enum EncryptedBundleFormat {
    /// `\x89 C N C E \r \n \x1A`: a plain bundle's magic with `E` for `D`.
    package static let magic: [UInt8] = [0x89, 0x43, 0x4E, 0x43, 0x45, 0x0D, 0x0A, 0x1A]
    /// The encrypted format version this build writes, and the newest it reads.
    package static let version: UInt8 = 1
    /// Magic, version, flags, key id (8 bytes), salt (32 bytes).
    package static let headerBytes = 8 + 1 + 1 + 8 + 32
    package static let keyIDBytes = 8
    package static let saltBytes = 32
    /// Every chunk but the last holds exactly this many bytes of the plain bundle; the last 1 to this many.
    package static let chunkBytes = 1 << 16
    /// The Poly1305 tag after each chunk's ciphertext.
    package static let tagBytes = 16
    /// HKDF info of the file key.
    static let fileKeyInfo = Array("concord-bundle-1 file key".utf8)

    /// The key id of §15.1 as the 8 bytes the header carries.
    package static func keyIDBytes(of key: SyncKey) -> [UInt8] {
        key.derivedKey(info: Array("concord key id".utf8), byteCount: keyIDBytes).withUnsafeBytes { Array($0) }
    }

    /// The key that seals one file's chunks: HKDF-SHA256 of the sync key with the file's salt.
    static func fileKey(_ key: SyncKey, salt: [UInt8]) -> SymmetricKey {
        key.derivedKey(info: fileKeyInfo, salt: salt)
    }

    /// `3 zero bytes || u64 chunk index || u8 final`.
    static func nonce(index: UInt64, final: Bool) -> ChaChaPoly.Nonce {
        var bytes = [UInt8](repeating: 0, count: 12)
        for shift in 0..<8 { bytes[3 + shift] = UInt8(truncatingIfNeeded: index >> UInt64(56 - 8 * shift)) }
        bytes[11] = final ? 1 : 0
        return try! ChaChaPoly.Nonce(data: bytes)
    }
}

/// Seals a plain bundle's bytes, as a `BundleWriter` writes them, into an encrypted bundle
/// (SPEC.md §13.1), holding at most one chunk (64 KiB) in memory.
///
/// ```swift
/// let sealer = try BundleSealer(key: key) { bytes in try file.write(bytes) }
/// var writer = try BundleWriter(manifest: manifest) { bytes in try sealer.write(bytes) }
/// … try writer.append(operation) …
/// try writer.finish()
/// try sealer.finish()
/// ```
package final class BundleSealer {
    private let sink: (ArraySlice<UInt8>) throws -> Void
    private let key: SymmetricKey
    private let header: [UInt8]
    private var pending: [UInt8] = []
    private var index: UInt64 = 0
    private var finished = false
    /// Bytes written to the sink so far: the encrypted file's size once `finish()` has returned.
    package private(set) var bytesWritten = 0

    /// Starts an encrypted bundle: writes its header.
    /// - Parameter random: where the salt comes from. Always the system's CSPRNG outside of tests:
    ///   two files sealed with the same key and salt would reuse nonces.
    package init(key: SyncKey, random: RandomBytes = .system, sink: @escaping (ArraySlice<UInt8>) throws -> Void) throws {
        self.sink = sink
        let salt = random(EncryptedBundleFormat.saltBytes)
        header = EncryptedBundleFormat.magic + [EncryptedBundleFormat.version, 0]
            + EncryptedBundleFormat.keyIDBytes(of: key) + salt
        self.key = EncryptedBundleFormat.fileKey(key, salt: salt)
        pending.reserveCapacity(EncryptedBundleFormat.chunkBytes)
        try emit(header[...])
    }

    /// Adds bytes of the plain bundle.
    package func write(_ bytes: some Collection<UInt8>) throws {
        precondition(!finished, "BundleSealer.write after finish()")
        var rest = bytes[...]
        while !rest.isEmpty {
            // A full chunk is sealed only once more bytes follow: the last chunk must carry the flag.
            if pending.count == EncryptedBundleFormat.chunkBytes { try seal(final: false) }
            let take = min(rest.count, EncryptedBundleFormat.chunkBytes - pending.count)
            let end = rest.index(rest.startIndex, offsetBy: take)
            pending.append(contentsOf: rest[..<end])
            rest = rest[end...]
        }
    }

    /// Seals the last chunk. The plain bundle must not be empty (no bundle is).
    package func finish() throws {
        precondition(!finished && !pending.isEmpty, "BundleSealer.finish() twice, or with nothing written")
        try seal(final: true)
        finished = true
    }

    private func seal(final: Bool) throws {
        let box = try ChaChaPoly.seal(
            pending, using: key, nonce: EncryptedBundleFormat.nonce(index: index, final: final), authenticating: header)
        let length = UInt32(box.ciphertext.count + EncryptedBundleFormat.tagBytes)
        try emit([UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)][...])
        try emit(Array(box.ciphertext)[...])
        try emit(Array(box.tag)[...])
        index += 1
        pending.removeAll(keepingCapacity: true)
    }

    private func emit(_ bytes: ArraySlice<UInt8>) throws {
        bytesWritten += bytes.count
        try sink(bytes)
    }
}

/// The bytes of a bundle file, plain (§13) or encrypted (§13.1), as a plain bundle: a
/// `BundleReader` reads either through it. Told apart by the file's first bytes.
///
/// An encrypted bundle is opened with `key`; every chunk is authenticated before any byte of it is
/// passed on, and the reader fails (`BundleError`) when the store has no key (`.encrypted`), holds
/// another key (`.wrongKey`), a chunk fails authentication or is out of place (`.authenticationFailed`),
/// or the file ends before its last chunk (`.truncated`). Memory is bounded by one chunk.
package struct BundleSource<Inner: ByteSource>: ByteSource {
    private var inner: Inner
    /// Whether the file is an encrypted bundle.
    package private(set) var isEncrypted = false
    /// The key id the encrypted bundle's header names (16 hex digits).
    package private(set) var keyID: String?
    private var pending: [UInt8] = []
    private var offset = 0
    private var fileKey: SymmetricKey?
    private var header: [UInt8] = []
    private var index: UInt64 = 0
    private var sawFinal = false

    /// Reads the start of the file: for an encrypted bundle, its header, checked against `key`.
    package init(_ inner: Inner, key: SyncKey?) throws(BundleError) {
        self.inner = inner
        let start = try Self.read(&self.inner, count: EncryptedBundleFormat.magic.count)
        guard start == EncryptedBundleFormat.magic else {
            // A plain bundle, or not a bundle at all: the bundle reader will tell.
            pending = start
            return
        }
        isEncrypted = true
        let rest = try Self.read(&self.inner, count: EncryptedBundleFormat.headerBytes - start.count)
        guard rest.count == EncryptedBundleFormat.headerBytes - start.count else { throw .truncated }
        header = start + rest
        let version = header[8]
        guard version <= EncryptedBundleFormat.version else {
            throw .corrupt("it is an encrypted bundle of format version \(version), newer than this build reads (\(EncryptedBundleFormat.version)); upgrade Concord")
        }
        guard version == EncryptedBundleFormat.version else { throw .corrupt("encrypted bundle format version 0") }
        guard header[9] == 0 else { throw .corrupt("encrypted bundle flags 0x\(String(header[9], radix: 16)) are reserved") }
        let id = Array(header[10..<18])
        keyID = id.hexString
        guard let key else { throw .encrypted(keyID: keyID!) }
        guard id == EncryptedBundleFormat.keyIDBytes(of: key) else { throw .wrongKey(bundle: keyID!, store: key.id) }
        fileKey = EncryptedBundleFormat.fileKey(key, salt: Array(header[18...]))
    }

    package mutating func read(maxCount: Int) throws -> [UInt8] {
        if offset == pending.count, isEncrypted, !sawFinal { try openNextChunk() }
        let count = min(maxCount, pending.count - offset)
        defer {
            offset += count
            if offset == pending.count {
                pending.removeAll(keepingCapacity: true)
                offset = 0
            }
        }
        if count == 0, !isEncrypted { return try inner.read(maxCount: maxCount) }
        return Array(pending[offset..<offset + count])
    }

    private mutating func openNextChunk() throws(BundleError) {
        let prefix = try Self.read(&inner, count: 4)
        guard prefix.count == 4 else { throw .truncated }  // the file ends before its last chunk
        let length = prefix.reduce(0) { $0 << 8 | Int($1) }
        let limit = EncryptedBundleFormat.chunkBytes + EncryptedBundleFormat.tagBytes
        guard length > EncryptedBundleFormat.tagBytes, length <= limit else {
            throw .corrupt("an encrypted chunk of \(length) bytes (from \(EncryptedBundleFormat.tagBytes + 1) to \(limit))")
        }
        let sealed = try Self.read(&inner, count: length)
        guard sealed.count == length else { throw .truncated }
        let ciphertext = sealed[..<(length - EncryptedBundleFormat.tagBytes)]
        let tag = sealed[(length - EncryptedBundleFormat.tagBytes)...]
        // The chunk's place and whether it is the last are in its nonce: try "not last", then "last".
        var opened: [UInt8]?
        var final = false
        for candidate in [false, true] {
            guard let box = try? ChaChaPoly.SealedBox(
                nonce: EncryptedBundleFormat.nonce(index: index, final: candidate), ciphertext: ciphertext, tag: tag)
            else { break }
            if let plain = try? ChaChaPoly.open(box, using: fileKey!, authenticating: header) {
                opened = Array(plain)
                final = candidate
                break
            }
        }
        guard let opened else { throw .authenticationFailed }
        if !final, opened.count != EncryptedBundleFormat.chunkBytes {
            throw .corrupt("encrypted chunk \(index) holds \(opened.count) bytes, not \(EncryptedBundleFormat.chunkBytes)")
        }
        index += 1
        if final {
            sawFinal = true
            guard try Self.read(&inner, count: 1).isEmpty else { throw .corrupt("bytes after the last encrypted chunk") }
        }
        pending = opened
        offset = 0
    }

    /// Up to `count` bytes; fewer only at the end of the file.
    private static func read(_ inner: inout Inner, count: Int) throws(BundleError) -> [UInt8] {
        var result: [UInt8] = []
        while result.count < count {
            let chunk: [UInt8]
            do {
                chunk = try inner.read(maxCount: count - result.count)
            } catch {
                throw .corrupt("cannot read: \(error)")
            }
            if chunk.isEmpty { break }
            result += chunk
        }
        return result
    }
}
