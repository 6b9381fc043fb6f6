import ConcordCore
import ConcordKeys
import Foundation
import Testing
@testable import ConcordRelayClient
@testable import ConcordRelayProtocol

/// The relay's credentials, signed requests, deletions body and mirror name against
/// `Fixtures/relay-v1/vectors.json`, computed from SPEC.md §16 alone by `vectors.py` (Python's
/// `cryptography`), independently of this code.
@Suite struct RelayVectorTests {
    struct Request: Decodable {
        var method: String
        var target: String
        var body: String
        var signed: String
        var header: String
    }

    struct Vectors: Decodable {
        var key: String
        var publicKey: String
        var space: String
        var time: UInt64
        var requests: [Request]
        var deletionNames: [String]
        var deletionsBody: String
        var url: String
        var mirrorSuffix: String
    }

    let vectors: Vectors
    let credentials: RelayCredentials

    init() throws {
        let path = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/relay-v1/vectors.json")
        vectors = try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: path))
        let key = try #require([UInt8](lowercaseHex: vectors.key))
        credentials = RelayCredentials(key: try #require(SyncKey(bytes: key)))
    }

    @Test func theCredentialsAreTheVectors() {
        #expect(credentials.publicKeyHex == vectors.publicKey)
        #expect(credentials.space == vectors.space)
        #expect(vectors.requests.count == 7, "every kind of request of §16.3 but the health check")
    }

    /// Every request's signed bytes are the vector's, and the relay accepts the vector's header.
    /// Ed25519 is deterministic (RFC 8032), so this code signs the very same bytes, but for
    /// CryptoKit, which randomizes its signatures: there a header is only checked to verify.
    @Test func theSignedRequestsAreTheVectors() throws {
        for request in vectors.requests {
            let body = try #require([UInt8](lowercaseHex: request.body))
            let signed = RelayCredentials.signedMessage(method: request.method, target: request.target, timestampMillis: vectors.time, body: body)
            #expect(signed == Array(request.signed.utf8), "\(request.method) \(request.target)")
            #expect(RelayAuthorization.refusal(
                header: request.header, space: vectors.space, method: request.method, target: request.target, body: body,
                nowMillis: vectors.time) == nil, "\(request.method) \(request.target)")
            let own = credentials.authorization(method: request.method, target: request.target, timestampMillis: vectors.time, body: body)
            #if canImport(CryptoKit)
            #expect(RelayAuthorization.refusal(
                header: own, space: vectors.space, method: request.method, target: request.target, body: body, nowMillis: vectors.time) == nil)
            #else
            #expect(own == request.header, "\(request.method) \(request.target)")
            #endif
        }
    }

    @Test func theDeletionsBodyAndTheMirrorAreTheVectors() throws {
        #expect(RelayClient.deletionsBody(vectors.deletionNames.sorted()) == Array(vectors.deletionsBody.utf8))
        let deletions = try #require(vectors.requests.first { $0.method == "POST" })
        #expect(deletions.body == Array(vectors.deletionsBody.utf8).hexString)
        #expect(RelaySync.mirror(of: "/data/a.db", url: vectors.url, space: vectors.space) == "/data/a.db" + vectors.mirrorSuffix)
    }
}
