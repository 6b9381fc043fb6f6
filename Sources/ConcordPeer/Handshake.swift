import ConcordKeys
import Crypto
import Foundation

/// The clear frames of the handshake (SPEC.md §15.3) and the keys it derives.
enum Handshake {
    enum Kind: UInt8 {
        case clientHello = 1
        case serverHello = 2
        case clientProof = 3
        case refusal = 4
    }

    enum RefusalReason: UInt8 {
        case version = 1
        case wrongKey = 2
    }

    static let nonceBytes = 32
    static let proofBytes = 32
    /// Magic, version, kind.
    static let headerBytes = 11
    static let clientHelloBytes = headerBytes + nonceBytes
    static let serverHelloBytes = headerBytes + nonceBytes + proofBytes
    static let clientProofBytes = headerBytes + proofBytes
    static let refusalBytes = headerBytes + 1

    static let serverLabel = Array("concord-peer-1 server".utf8)
    static let clientLabel = Array("concord-peer-1 client".utf8)

    static func header(_ kind: Kind, version: UInt16 = PeerProtocol.version) -> [UInt8] {
        PeerProtocol.magic + [UInt8(version >> 8), UInt8(version & 0xFF), kind.rawValue]
    }

    /// A handshake frame's fixed start, read as far as the frame allows.
    struct Parsed {
        var version: UInt16
        /// `nil` when the frame ends before the kind byte.
        var kind: UInt8?
    }

    /// `nil` when the payload does not start with the magic and a version.
    static func parse(_ payload: [UInt8]) -> Parsed? {
        guard payload.count >= 10, payload.starts(with: PeerProtocol.magic) else { return nil }
        let version = UInt16(payload[8]) << 8 | UInt16(payload[9])
        return Parsed(version: version, kind: payload.count > 10 ? payload[10] : nil)
    }

    /// The keys of one session (SPEC.md §15.3, "Keys").
    struct Keys {
        let auth: SymmetricKey
        let clientToServer: SymmetricKey
        let serverToClient: SymmetricKey

        init(key: SyncKey, clientNonce: [UInt8], serverNonce: [UInt8]) {
            let salt = clientNonce + serverNonce
            auth = key.derivedKey(info: Array("concord-peer-1 auth".utf8), salt: salt)
            clientToServer = key.derivedKey(info: Array("concord-peer-1 client-to-server".utf8), salt: salt)
            serverToClient = key.derivedKey(info: Array("concord-peer-1 server-to-client".utf8), salt: salt)
        }

        func proof(label: [UInt8], transcript: [UInt8]) -> [UInt8] {
            Array(HMAC<SHA256>.authenticationCode(for: label + transcript, using: auth))
        }

        /// Compares in constant time.
        func verify(_ proof: ArraySlice<UInt8>, label: [UInt8], transcript: [UInt8]) -> Bool {
            HMAC<SHA256>.isValidAuthenticationCode(Array(proof), authenticating: label + transcript, using: auth)
        }
    }
}

/// Seals or opens the frames of one direction (SPEC.md §15.4): ChaCha20-Poly1305 with the nonce
/// `4 zero bytes || u64 counter`, the counter counting the frames of that direction from 0.
struct FrameCipher {
    static let tagBytes = 16
    let key: SymmetricKey
    private(set) var counter: UInt64 = 0

    init(key: SymmetricKey, counter: UInt64 = 0) {
        self.key = key
        self.counter = counter
    }

    private func nonce() -> ChaChaPoly.Nonce {
        var bytes = [UInt8](repeating: 0, count: 12)
        for index in 0..<8 { bytes[4 + index] = UInt8(truncatingIfNeeded: counter >> (56 - 8 * UInt64(index))) }
        return try! ChaChaPoly.Nonce(data: bytes)  // 12 bytes, as ChaChaPoly requires
    }

    /// The ciphertext and tag of `plaintext`; `nil` when the counters are used up.
    mutating func seal(_ plaintext: [UInt8]) -> [UInt8]? {
        guard counter < UInt64.max else { return nil }
        // Sealing with a valid key and nonce does not fail.
        let box = try! ChaChaPoly.seal(plaintext, using: key, nonce: nonce())
        counter += 1
        return Array(box.ciphertext) + Array(box.tag)
    }

    enum OpenFailure: Error { case authentication, countersUsedUp }

    /// The plaintext of the next frame, if it authenticates.
    mutating func open(_ payload: [UInt8]) throws(OpenFailure) -> [UInt8] {
        guard counter < UInt64.max else { throw .countersUsedUp }
        guard payload.count >= Self.tagBytes else { throw .authentication }
        let split = payload.count - Self.tagBytes
        let plaintext: Data
        do {
            let box = try ChaChaPoly.SealedBox(nonce: nonce(), ciphertext: payload[..<split], tag: payload[split...])
            plaintext = try ChaChaPoly.open(box, using: key)
        } catch {
            throw .authentication
        }
        counter += 1
        return Array(plaintext)
    }
}
