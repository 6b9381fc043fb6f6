import ConcordCore
import ConcordKeys
import Crypto
import Foundation

/// What a device shows a relay to read or write its space (SPEC.md §16.2), derived from the sync
/// key: an Ed25519 signing key, whose public key names the space. The relay stores neither the
/// sync key nor anything derived from it but that public key, so a copy of its database can
/// neither read the space's bundles (sealed with the sync key, §13.1) nor sign a request.
public struct RelayCredentials: Sendable {
    /// The space: the first 16 bytes of SHA-256 of the public key, as 32 lowercase hex digits.
    public let space: String
    /// The public key, 32 bytes, as 64 lowercase hex digits (sent with every request).
    public let publicKeyHex: String
    private let signingKey: Curve25519.Signing.PrivateKey

    /// The credentials of `key`'s space.
    public init(key: SyncKey) {
        let seed = key.derivedKey(info: Array("concord relay signing key".utf8))
        signingKey = seed.withUnsafeBytes { bytes in
            // 32 bytes are always a valid Ed25519 seed.
            try! Curve25519.Signing.PrivateKey(rawRepresentation: Array(bytes))
        }
        let publicKey = Array(signingKey.publicKey.rawRepresentation)
        publicKeyHex = publicKey.hexString
        space = RelayCredentials.space(ofPublicKey: publicKey)
    }

    /// The `Concord-Auth` header's value for a request (§16.2).
    ///
    /// - Parameter target: the request's path and query, as sent (`/v1/spaces/…/files?wait=25`).
    public func authorization(method: String, target: String, timestampMillis: UInt64, body: some DataProtocol) -> String {
        let message = RelayCredentials.signedMessage(method: method, target: target, timestampMillis: timestampMillis, body: body)
        // Signing with a valid key over bytes in memory does not fail.
        let signature = try! signingKey.signature(for: message)
        return "v1 \(publicKeyHex) \(timestampMillis) \(signature.hexString)"
    }

    /// The space a public key names (§16.2).
    public static func space(ofPublicKey publicKey: [UInt8]) -> String {
        SHA256.hash(data: publicKey).prefix(16).hexString
    }

    /// The bytes a request's signature covers (§16.2).
    static func signedMessage(method: String, target: String, timestampMillis: UInt64, body: some DataProtocol) -> [UInt8] {
        let bodyHash = SHA256.hash(data: body).hexString
        return Array("concord-relay-1\n\(method)\n\(target)\n\(timestampMillis)\n\(bodyHash)".utf8)
    }
}

/// A relay's check of a request's `Concord-Auth` header (SPEC.md §16.2).
public enum RelayAuthorization {
    /// How far a request's time may be from the relay's clock, either way: 5 minutes.
    public static let allowedSkewMillis: UInt64 = 300_000

    /// Checks `header` for a request to `space`; nil when it holds, else why not (the message of
    /// the refusal, §16.3).
    public static func refusal(
        header: String?, space: String, method: String, target: String, body: some DataProtocol, nowMillis: UInt64
    ) -> String? {
        guard let header else { return "the request carries no Concord-Auth header" }
        let parts = header.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "v1", let publicKey = [UInt8](lowercaseHex: parts[1]), publicKey.count == 32,
              let timestamp = UInt64(parts[2]), let signature = [UInt8](lowercaseHex: parts[3]), signature.count == 64
        else { return "the Concord-Auth header is not 'v1 PUBLIC-KEY TIME SIGNATURE'" }
        guard RelayCredentials.space(ofPublicKey: publicKey) == space else {
            return "the public key of the Concord-Auth header does not name space \(space)"
        }
        let skew = timestamp > nowMillis ? timestamp - nowMillis : nowMillis - timestamp
        guard skew <= allowedSkewMillis else {
            return "the request's time is \(skew / 1000) s from the relay's clock (at most \(allowedSkewMillis / 1000) s): is a clock wrong?"
        }
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey),
              key.isValidSignature(signature, for: RelayCredentials.signedMessage(method: method, target: target, timestampMillis: timestamp, body: body))
        else { return "the signature of the Concord-Auth header does not match the request" }
        return nil
    }
}
