import ConcordCore
import ConcordKeys
import Crypto
import Testing
@testable import ConcordRelayProtocol

/// The credentials and signed requests of SPEC.md §16.2, against the vector the spec gives (made
/// with Python's `cryptography` from the spec's text alone).
@Suite struct RelayCredentialsTests {
    static let key = SyncKey(bytes: Array(0..<32))!
    static let space = "6206552f3d44d4a56bf58959efbeb2f0"
    static let publicKey = "32118b4eb07623cd91c22f834ce641e8af8c9d66ea3bf473700ada49d4dc540b"
    static let now: UInt64 = 1_798_794_000_000

    @Test func theSpaceAndPublicKeyMatchTheVector() {
        let credentials = RelayCredentials(key: Self.key)
        #expect(credentials.space == Self.space)
        #expect(credentials.publicKeyHex == Self.publicKey)
    }

    /// Ed25519 signatures are deterministic (RFC 8032), but CryptoKit randomizes its own: what
    /// must hold everywhere is that the relay accepts a signature made by another implementation.
    @Test func aSignatureMadeFromTheSpecAloneIsAccepted() {
        let target = "/v1/spaces/\(Self.space)/files"
        let signature = "3dea6d74573b4e63c36f1c5280fd914f98c497cde84aa6bfa9366a8f96ad1632e5609260dd9b6635f425e61b25b23e7d5c35075767d237051c252f6c4e10b306"
        let header = "v1 \(Self.publicKey) \(Self.now) \(signature)"
        #expect(RelayAuthorization.refusal(header: header, space: Self.space, method: "GET", target: target, body: [UInt8](), nowMillis: Self.now) == nil)
    }

    @Test func aSignedRequestIsAcceptedWithinFiveMinutesEitherWay() {
        let credentials = RelayCredentials(key: Self.key)
        let target = "/v1/spaces/\(Self.space)/files/00000000000000000000000000000001-0000000001.cbundle"
        let header = credentials.authorization(method: "PUT", target: target, timestampMillis: Self.now, body: [1, 2, 3])
        for skew: Int64 in [-300_000, 0, 300_000] {
            #expect(RelayAuthorization.refusal(
                header: header, space: Self.space, method: "PUT", target: target, body: [1, 2, 3],
                nowMillis: UInt64(Int64(Self.now) + skew)) == nil)
        }
    }

    @Test func everyChangeToASignedRequestIsRefused() {
        let credentials = RelayCredentials(key: Self.key)
        let target = "/v1/spaces/\(Self.space)/files/00000000000000000000000000000001-0000000001.cbundle"
        let header = credentials.authorization(method: "PUT", target: target, timestampMillis: Self.now, body: [1, 2, 3])
        func refusal(header: String? = nil, space: String = Self.space, method: String = "PUT", target: String? = nil, body: [UInt8] = [1, 2, 3], now: UInt64 = Self.now) -> String? {
            RelayAuthorization.refusal(header: header, space: space, method: method, target: target ?? "/v1/spaces/\(space)/files/00000000000000000000000000000001-0000000001.cbundle", body: body, nowMillis: now)
        }
        let mismatch = "the signature of the Concord-Auth header does not match the request"
        #expect(RelayAuthorization.refusal(header: nil, space: Self.space, method: "GET", target: target, body: [UInt8](), nowMillis: Self.now)
            == "the request carries no Concord-Auth header")
        #expect(refusal(header: header, body: [1, 2, 4]) == mismatch, "another body")
        #expect(refusal(header: header, method: "DELETE") == mismatch, "another method")
        #expect(refusal(header: header, target: target.replacingOccurrences(of: "0001.cbundle", with: "0002.cbundle")) == mismatch, "another file")
        #expect(refusal(header: header, now: Self.now + 300_001) == "the request's time is 300 s from the relay's clock (at most 300 s): is a clock wrong?")
        #expect(refusal(header: header, now: Self.now - 900_000) == "the request's time is 900 s from the relay's clock (at most 300 s): is a clock wrong?")
        let otherSpace = "00000000000000000000000000000000"
        #expect(refusal(header: header, space: otherSpace) == "the public key of the Concord-Auth header does not name space \(otherSpace)")
        // A later time written into the header breaks the signature, which covers it.
        let parts = header.split(separator: " ").map(String.init)
        #expect(refusal(header: [parts[0], parts[1], String(Self.now + 1), parts[3]].joined(separator: " ")) == mismatch)
        let malformed = "the Concord-Auth header is not 'v1 PUBLIC-KEY TIME SIGNATURE'"
        for bad in ["", "v1", "v2 " + parts[1...].joined(separator: " "), header.uppercased(), header + " ", parts[0...2].joined(separator: " "),
                    [parts[0], parts[1], "-1", parts[3]].joined(separator: " "), [parts[0], String(parts[1].dropLast(2)), parts[2], parts[3]].joined(separator: " ")] {
            #expect(refusal(header: bad) == malformed, "\(bad)")
        }
    }

    /// A stranger's key names another space: it can sign requests for that one only.
    @Test func anotherKeyNamesAnotherSpace() {
        let stranger = RelayCredentials(key: SyncKey(bytes: Array(repeating: 7, count: 32))!)
        #expect(stranger.space != Self.space)
        let target = "/v1/spaces/\(Self.space)/files"
        let header = stranger.authorization(method: "GET", target: target, timestampMillis: Self.now, body: [UInt8]())
        #expect(RelayAuthorization.refusal(header: header, space: Self.space, method: "GET", target: target, body: [UInt8](), nowMillis: Self.now)
            == "the public key of the Concord-Auth header does not name space \(Self.space)")
    }

    @Test func namesAreThoseOfAFolder() {
        #expect(RelayNames.isSpace(Self.space))
        #expect(!RelayNames.isSpace(Self.space.uppercased()))
        #expect(!RelayNames.isSpace(String(Self.space.dropLast())))
        #expect(RelayNames.isFile("0123456789abcdef0123456789abcdef-0000000001.cbundle"))
        for bad in ["0123456789ABCDEF0123456789abcdef-0000000001.cbundle", "0123456789abcdef0123456789abcdef-1.cbundle",
                    "../etc/passwd", ".0123456789abcdef0123456789abcdef-0000000001.tmp-12", "0123456789abcdef0123456789abcdef-0000000001.cbundle/x",
                    "0123456789abcdef0123456789abcdeg-0000000001.cbundle", "0123456789abcdef0123456789abcdef-000000000a.cbundle",
                    "0123456789abcdef0123456789abcdef_0000000001.cbundle", "0123456789abcdef0123456789abcdef-0000000001.cbundlf",
                    "0123456789abcdef0123456789abcdé-0000000001.cbundle", "0123456789abcdef0123456789abcdef-0000000001.cbundle\n", ""] {
            #expect(!RelayNames.isFile(bad), "\(bad)")
        }
    }
}
