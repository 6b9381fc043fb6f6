import ConcordCore
import ConcordKeys
@testable import ConcordPeer
import Foundation
import Testing

/// A one-shot session of protocol version 3 against `Fixtures/peer-v3/vectors.json`, computed from
/// the SPEC by `vectors.py` there (with the key, nonces and replicas of `peer-v1`): the handshake's
/// frames carry version 3, and the operations of a batch arrive with their predecessors
/// (SPEC.md §8.3, §15.10).
@Suite struct Version3VectorTests {
    /// The frames by name (hex), and the operations of the batch as JSON.
    static let vectors: (frames: [String: String], operations: Data) = {
        let data = try! Data(contentsOf: fixturesDirectory.appendingPathComponent("peer-v3/vectors.json"))
        let object = try! JSONSerialization.jsonObject(with: data) as! [String: Any]
        return (object.compactMapValues { $0 as? String }, try! JSONSerialization.data(withJSONObject: object["operations"]!))
    }()

    static func frame(_ name: String) -> [UInt8] { hex(vectors.frames[name]!) }
    static func v1(_ name: String) -> [UInt8] { HandshakeTests.vector(name) }

    @Test func theServerOfAVersion3SessionMatchesTheVectors() throws {
        let key = try #require(SyncKey(bytes: Self.v1("key")))
        let clientReplica = try #require(ReplicaID(bytes: Self.v1("clientReplica")))
        let serverReplica = try #require(ReplicaID(bytes: Self.v1("serverReplica")))
        // Sides of the build before purges, whose highest version is 4: a one-shot client proposes
        // 3, and the server answers it.
        var client = PeerSession(
            role: .client, key: key, localReplica: clientReplica, localVersions: HandshakeTests.vectorVersions("clientVersions"),
            highestVersion: 4, random: fixed(Self.v1("clientNonce")))
        var server = PeerSession(
            role: .server, key: key, localReplica: serverReplica, localVersions: VersionVector(),
            highestVersion: 4, random: fixed(Self.v1("serverNonce")))

        #expect(server.start() == [])
        #expect(client.start() == [.send(Self.frame("clientHelloFrame"))])
        #expect(server.receive(Self.frame("clientHelloFrame")) == [.send(Self.frame("serverHelloFrame"))])
        #expect(client.receive(Self.frame("serverHelloFrame")) == [.send(Self.frame("clientProofFrame") + Self.frame("clientVersionsFrame"))])
        #expect(client.version == 3 && server.version == 3)
        #expect(server.receive(Self.frame("clientProofFrame")) == [.send(Self.frame("serverVersionsFrame"))])
        #expect(server.receive(Self.frame("clientVersionsFrame")) == [.needOperations(since: HandshakeTests.vectorVersions("clientVersions"), lastShared: [])])
        #expect(server.finishSending() == [.send(Self.frame("serverDoneFrame"))])

        // The batch's two assigns, with their predecessors: none, and one of the server's.
        let applied = server.receive(Self.frame("clientBatchFrame"))
        guard case .apply(let operations)? = applied.first, applied.count == 1 else {
            Issue.record("expected one apply, got \(applied)")
            return
        }
        let decoded = try JSONSerialization.jsonObject(with: Data(JSON.array(operations.map(\.json)).canonical.utf8))
        let expected = try JSONSerialization.jsonObject(with: Self.vectors.operations)
        #expect(NSArray(array: decoded as! [Any]) == NSArray(array: expected as! [Any]))
        #expect(operations.map(\.predecessors) == [.empty, Predecessors([OperationID(replica: serverReplica, seq: 7)])])
        #expect(server.batchApplied() == [])

        // The client's done: the merge is finished, then the ack of its two operations.
        #expect(server.receive(Self.frame("clientDoneFrame")) == [.finishMerge(compacted: SeqRanges())])
        #expect(server.batchApplied() == [.send(Self.frame("serverAckFrame"))])
        let finished = server.receive(Self.frame("clientAckFrame"))
        guard case .finished(let summary)? = finished.first else {
            Issue.record("expected the session to finish, got \(finished)")
            return
        }
        #expect(summary.operationsReceived == 2)
    }
}
