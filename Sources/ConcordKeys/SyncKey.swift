import ConcordCore
import Crypto
import Foundation

/// The secret that pairs a user's replicas (SPEC.md §15.1): 32 random bytes. Peers that hold the
/// same key may sync with each other; anyone else learns nothing and changes nothing.
///
/// Its text form, which a person copies from one laptop to another, is `concord-key-1-`
/// followed by 56 base32 characters that carry the key and a checksum. `description` never shows
/// the secret, only the key's ``id``, so a key printed into a log by mistake leaks nothing.
///
/// ```swift
/// let key = SyncKey.generate()            // the system's CSPRNG
/// print(key.text)                         // concord-key-1-…
/// let same = try SyncKey(text: pasted)    // tolerant of spaces, dashes and case
/// print(same.id)                          // 16 hex digits, safe to show
/// ```
public struct SyncKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The key's length in bytes.
    package static let byteCount = 32
    /// What the text form starts with: the format (1) of the text form.
    package static let textPrefix = "concord-key-1-"
    /// How many base32 characters follow the prefix: 35 bytes (the key and 3 checksum bytes).
    package static let textBodyLength = 56
    static let checksumByteCount = 3
    static let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)

    /// The 32 secret bytes.
    package let bytes: [UInt8]

    /// A key of exactly 32 bytes (as stored with a store), or `nil`.
    package init?(bytes: some Collection<UInt8>) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = Array(bytes)
    }

    /// A new random key.
    ///
    /// - Parameter random: where the bytes come from; the system's CSPRNG unless a test injects a
    ///   seeded source.
    public static func generate(using random: RandomBytes = .system) -> SyncKey {
        SyncKey(bytes: random(byteCount))!
    }

    /// The key as swift-crypto's key type, for HMAC and HKDF.
    package var symmetricKey: SymmetricKey { SymmetricKey(data: bytes) }

    /// HKDF-SHA256 (RFC 5869) of the key: a subkey for one purpose, named by `info`.
    package func derivedKey(info: some DataProtocol, salt: some DataProtocol = [UInt8](), byteCount: Int = 32) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: symmetricKey, salt: salt, info: info, outputByteCount: byteCount)
    }

    /// A name for the key that can be shown and logged without revealing it: the first 8 bytes of
    /// HKDF-SHA256 of the key with an empty salt and info `concord key id`, as 16 lowercase hex
    /// digits. Two stores with the same id hold the same key.
    public var id: String {
        derivedKey(info: Array("concord key id".utf8), byteCount: 8).withUnsafeBytes { $0.hexString }
    }

    /// `sync key ID`: the key's id, never its secret.
    public var description: String { "sync key \(id)" }
    /// The same as `description`, so that a debug print never shows the secret.
    public var debugDescription: String { description }

    /// Compares in constant time.
    public static func == (lhs: SyncKey, rhs: SyncKey) -> Bool {
        var difference: UInt8 = 0
        for index in 0..<byteCount { difference |= lhs.bytes[index] ^ rhs.bytes[index] }
        return difference == 0
    }

    // MARK: The text form

    /// `concord-key-1-` and the base32 (RFC 4648 alphabet, lowercase, no padding) of the 32 key
    /// bytes followed by the first 3 bytes of their SHA-256: 56 characters, 70 in all.
    public var text: String {
        let payload = bytes + Self.checksum(bytes)
        var out: [UInt8] = []
        out.reserveCapacity(Self.textBodyLength)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in payload {
            buffer = buffer << 8 | UInt32(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                out.append(Self.alphabet[Int(buffer >> UInt32(bits) & 0x1F)])
            }
        }
        // 35 bytes are 280 bits: exactly 56 characters, nothing left over.
        assert(bits == 0 && out.count == Self.textBodyLength)
        return Self.textPrefix + String(decoding: out, as: UTF8.self)
    }

    /// Parses a key's text form. White space and dashes anywhere, and upper case, are accepted, so
    /// a key split over lines or grouped for reading still parses; every other deviation is
    /// refused with an error that says what is wrong.
    public init(text: String) throws(ConcordError) {
        // Keep everything but white space and dashes, with ASCII letters in lower case.
        var scalars: [Unicode.Scalar] = []
        for scalar in text.unicodeScalars {
            if scalar.properties.isWhitespace || Self.isDash(scalar) { continue }
            if ("A"..."Z").contains(scalar) {
                scalars.append(Unicode.Scalar(scalar.value + 32)!)
            } else {
                scalars.append(scalar)
            }
        }
        let prefix = Array("concordkey".unicodeScalars)
        guard scalars.starts(with: prefix) else {
            throw ConcordError(.wrongPrefix, "a sync key starts with '\(Self.textPrefix)'")
        }
        var body = scalars[prefix.count...]
        guard let format = body.first else {
            throw ConcordError(.wrongLength, "the sync key is cut short: nothing follows '\(Self.textPrefix)'")
        }
        guard format == "1" else {
            if ("0"..."9").contains(format) {
                throw ConcordError(.unsupportedFormat, "the sync key is of format \(format), and this build reads format 1; upgrade Concord")
            }
            throw ConcordError(.wrongPrefix, "a sync key starts with '\(Self.textPrefix)'")
        }
        body = body.dropFirst()
        var values: [UInt8] = []
        values.reserveCapacity(body.count)
        for (position, scalar) in body.enumerated() {
            guard scalar.isASCII, let value = Self.alphabet.firstIndex(of: UInt8(scalar.value)) else {
                let shown = scalar.isASCII && scalar.value >= 0x20 && scalar.value < 0x7F
                    ? "'\(Character(scalar))'" : "U+\(String(scalar.value, radix: 16, uppercase: true))"
                var hint = ""
                switch scalar {
                case "0": hint = " (the letter o?)"
                case "1": hint = " (the letter l or i?)"
                case "8": hint = " (the letter b?)"
                default: break
                }
                throw ConcordError(.badCharacter, "the sync key has \(shown) at character \(position + 1) after '\(Self.textPrefix)'\(hint); a key holds only the letters a to z and the digits 2 to 7")
            }
            values.append(UInt8(value))
        }
        guard values.count == Self.textBodyLength else {
            throw ConcordError(.wrongLength, "the sync key has \(values.count) characters after '\(Self.textPrefix)', not \(Self.textBodyLength); part of it is missing or repeated")
        }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(Self.byteCount + Self.checksumByteCount)
        var buffer: UInt32 = 0
        var bits = 0
        for value in values {
            buffer = buffer << 5 | UInt32(value)
            bits += 5
            if bits >= 8 {
                bits -= 8
                decoded.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        let key = Array(decoded[..<Self.byteCount])
        guard Array(decoded[Self.byteCount...]) == Self.checksum(key) else {
            throw ConcordError(.checksumMismatch, "the sync key has a typo: its checksum does not match")
        }
        bytes = key
    }

    static func checksum(_ key: [UInt8]) -> [UInt8] {
        Array(SHA256.hash(data: key).prefix(checksumByteCount))
    }

    /// `-` and the Unicode dashes a word processor or chat app may put in its place.
    static func isDash(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "-" || (0x2010...0x2015).contains(scalar.value) || scalar.value == 0x2212
    }
}

/// A source of random bytes: the system's CSPRNG, or a seeded source that a test injects.
public struct RandomBytes: Sendable {
    private let generate: @Sendable (Int) -> [UInt8]

    /// A source that returns `count` bytes for each call of `generate(count)`.
    public init(_ generate: @escaping @Sendable (Int) -> [UInt8]) {
        self.generate = generate
    }

    /// The operating system's cryptographically secure generator (`SystemRandomNumberGenerator`:
    /// `getrandom` on Linux, `arc4random` on Apple platforms).
    public static let system = RandomBytes { count in
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// `count` bytes from the source.
    public func callAsFunction(_ count: Int) -> [UInt8] {
        let bytes = generate(count)
        precondition(bytes.count == count, "a random source returned \(bytes.count) bytes, not \(count)")
        return bytes
    }
}
