import ConcordCore
import ConcordKeys
import Foundation
import Testing
@testable import ConcordPeer

/// The handshake (SPEC.md §15.3), step by step and under every bad input.
@Suite struct HandshakeTests {
    static func vector(_ name: String) -> [UInt8] { hex(SyncKeyTests.vector(name)) }

    static func vectorVersions(_ name: String) -> VersionVector {
        let entries = SyncKeyTests.vectors.versions[name]!
        return VersionVector(Dictionary(uniqueKeysWithValues: entries.map { (ReplicaID(hex: $0.key)!, UInt64($0.value)) }))
    }

    /// A whole session, byte for byte, against vectors computed from the SPEC by an independent
    /// implementation (`Fixtures/peer-v1/vectors.py`). They are a session of version 1: the client
    /// is one of a build that speaks only version 1, and the server one of such a build, or of this
    /// one (which answers a client of version 1 in version 1, byte for byte).
    @Test(arguments: [UInt16(1), PeerProtocol.highestVersion])
    func theWireBytesMatchTheVectors(serverHighestVersion: UInt16) throws {
        let key = try #require(SyncKey(bytes: Self.vector("key")))
        var client = PeerSession(
            role: .client, key: key, localReplica: ReplicaID(bytes: Self.vector("clientReplica"))!,
            localVersions: Self.vectorVersions("clientVersions"), highestVersion: 1, random: fixed(Self.vector("clientNonce")))
        var server = PeerSession(
            role: .server, key: key, localReplica: ReplicaID(bytes: Self.vector("serverReplica"))!,
            localVersions: Self.vectorVersions("serverVersions"), highestVersion: serverHighestVersion,
            random: fixed(Self.vector("serverNonce")))
        #expect(server.start() == [])
        #expect(client.start() == [.send(Self.vector("clientHelloFrame"))])
        #expect(server.receive(Self.vector("clientHelloFrame")) == [.send(Self.vector("serverHelloFrame"))])
        #expect(client.receive(Self.vector("serverHelloFrame")) == [.send(Self.vector("clientProofFrame") + Self.vector("clientVersionsFrame"))])
        #expect(client.isHandshakeComplete)
        #expect(!server.isHandshakeComplete)
        #expect(server.receive(Self.vector("clientProofFrame")) == [.send(Self.vector("serverVersionsFrame"))])
        #expect(server.isHandshakeComplete)
        #expect(server.receive(Self.vector("clientVersionsFrame")) == [.needOperations(since: Self.vectorVersions("clientVersions"), lastShared: [])])
        #expect(client.receive(Self.vector("serverVersionsFrame")) == [.needOperations(since: Self.vectorVersions("serverVersions"), lastShared: [])])
        #expect(client.finishSending() == [.send(Self.vector("clientDoneFrame"))])
        #expect(server.finishSending() == [.send(Self.vector("serverDoneFrame"))])
        // Each acknowledges the other's done; each finishes on the other's ack.
        #expect(server.receive(Self.vector("clientDoneFrame")) == [.send(Self.vector("serverAckFrame"))])
        #expect(client.receive(Self.vector("serverDoneFrame")) == [.send(Self.vector("clientAckFrame"))])
        var summary = PeerSummary(role: .server)
        summary.peerReplica = ReplicaID(bytes: Self.vector("clientReplica"))
        summary.peerVersions = Self.vectorVersions("clientVersions")
        summary.bytesSent = 79 + 38 + 21 + 22
        summary.bytesReceived = 47 + 47 + 73 + 21 + 22
        #expect(server.receive(Self.vector("clientAckFrame")) == [.finished(summary)])
        #expect(server.isFinished && server.hasEnded && server.failure == nil)
        let finished = client.receive(Self.vector("serverAckFrame"))
        guard case .finished(let clientSummary)? = finished.first, finished.count == 1 else {
            Issue.record("the client did not finish: \(finished)")
            return
        }
        #expect(clientSummary.peerReplica == ReplicaID(bytes: Self.vector("serverReplica")))
        #expect(clientSummary.bytesSent == summary.bytesReceived)
        #expect(clientSummary.bytesReceived == summary.bytesSent)
        #expect(Self.vector("clientHelloFrame").count == 47 && Self.vector("serverHelloFrame").count == 79)
        #expect(client.version == 1 && server.version == 1)
    }

    @Test func theSessionKeysMatchTheVectors() throws {
        let key = try #require(SyncKey(bytes: Self.vector("key")))
        let keys = Handshake.Keys(key: key, clientNonce: Self.vector("clientNonce"), serverNonce: Self.vector("serverNonce"))
        #expect(keys.auth.withUnsafeBytes { Array($0) } == Self.vector("authKey"))
        #expect(keys.clientToServer.withUnsafeBytes { Array($0) } == Self.vector("clientToServerKey"))
        #expect(keys.serverToClient.withUnsafeBytes { Array($0) } == Self.vector("serverToClientKey"))
    }

    @Test func theHappyPathFinishesOnBothSides() {
        var client = TestPeer(role: .client, replica: replicaA, random: seeded(10))
        var server = TestPeer(role: .server, replica: replicaB, random: seeded(20))
        run(&client, &server)
        #expect(client.failure == nil && server.failure == nil)
        #expect(client.finished?.peerReplica == replicaB)
        #expect(server.finished?.peerReplica == replicaA)
        #expect(client.finished?.bytesSent == server.finished?.bytesReceived)
        #expect(server.finished?.bytesSent == client.finished?.bytesReceived)
        #expect(client.finished?.operationsSent == 0 && client.finished?.batchesSent == 0)
        // Nothing after the end.
        #expect(client.session.receive([1, 2, 3]) == [])
        #expect(client.session.connectionClosed() == [])
        #expect(client.session.abort(ConcordError(.local, "late")) == [])
        #expect(client.session.send(operations: operations(by: replicaA, seqs: 1...3)) == [])
    }

    /// The two nonces come from the injected source, and differ between sessions.
    @Test func eachSessionDrawsAFreshNonce() throws {
        var first = PeerSession(role: .client, key: keyA, localReplica: replicaA, localVersions: VersionVector(), random: seeded(1))
        var second = PeerSession(role: .client, key: keyA, localReplica: replicaA, localVersions: VersionVector(), random: seeded(2))
        var again = PeerSession(role: .client, key: keyA, localReplica: replicaA, localVersions: VersionVector(), random: seeded(1))
        let a = first.start(), b = second.start(), c = again.start()
        #expect(a != b)
        #expect(a == c)
        var system = PeerSession(role: .client, key: keyA, localReplica: replicaA, localVersions: VersionVector())
        var system2 = PeerSession(role: .client, key: keyA, localReplica: replicaA, localVersions: VersionVector())
        #expect(system.start() != system2.start())
    }

    /// Wrong key: the client finds the server's proof wrong, refuses and never sends its own
    /// proof; the server learns why from the refusal. Nothing is applied, no operation is asked for.
    @Test func aWrongKeyEndsBothSidesWithAClearReason() throws {
        var client = TestPeer(role: .client, key: keyA, replica: replicaA, operations: operations(by: replicaA, seqs: 1...10), random: seeded(10))
        var server = TestPeer(role: .server, key: keyB, replica: replicaB, operations: operations(by: replicaB, seqs: 1...10), random: seeded(20))
        run(&client, &server)
        #expect(client.failure == ConcordError(.wrongKey, "the peer does not hold this store's sync key"))
        #expect(server.failure == ConcordError(.wrongKey, "the peer does not hold this store's sync key"))
        for peer in [client, server] {
            #expect(peer.appliedBatches.isEmpty)
            #expect(peer.needOperationsCalls.isEmpty)
            #expect(peer.store.operations.count == 10)
        }
        // The client sent its hello and a refusal, nothing keyed; the refusal carries the version
        // of the hellos: 9, a one-shot client's.
        let sent = try frames(client.sent)
        #expect(sent.count == 2)
        #expect(sent[1] == Handshake.header(.refusal, version: 9) + [2])
        #expect(try frames(server.sent).count == 1)
    }

    /// A peer that sends a wrong client proof (it does not hold the key, and does not admit it)
    /// is refused, and the server sends nothing further.
    @Test func aWrongClientProofEndsTheServerSilently() throws {
        var server = PeerSession(role: .server, key: keyA, localReplica: replicaB, localVersions: VersionVector(), random: seeded(20))
        _ = server.start()
        var impostor = PeerSession(role: .client, key: keyB, localReplica: replicaA, localVersions: VersionVector(), random: seeded(10))
        guard case .send(let hello)? = impostor.start().first else { return }
        #expect(server.receive(hello).count == 1)
        #expect(server.version == 9)
        // A proof of the version the hellos settled, so that only the proof is wrong.
        let forged = Frame.encode(Handshake.header(.clientProof, version: server.version) + [UInt8](repeating: 0x33, count: 32))
        #expect(server.receive(forged + Frame.encode([1, 2, 3])) == [.failed(ConcordError(.wrongKey, "the peer does not hold this store's sync key"))])
        #expect(server.failure?.code == .wrongKey)
        #expect(!server.isHandshakeComplete)
    }

    @Test func aClientOfANewerVersionIsToldTheServersVersion() throws {
        var server = PeerSession(role: .server, key: keyA, localReplica: replicaB, localVersions: VersionVector(), random: seeded(20))
        _ = server.start()
        var hello = Handshake.header(.clientHello) + [UInt8](repeating: 1, count: 32)
        hello[9] = 11  // version 11: this build speaks up to 10
        let actions = server.receive(Frame.encode(hello))
        #expect(actions == [
            .send(Frame.encode(Handshake.header(.refusal, version: 10) + [1])),
            .failed(ConcordError(.versionMismatch, "the peer speaks protocol version 11 and this build speaks versions 1 to 10; upgrade Concord on this side")),
        ])
    }

    @Test func aClientOfANewerVersionWithAnotherHelloIsStillToldTheVersion() throws {
        // A version 11 hello may look different after the version: only magic and version count.
        var server = PeerSession(role: .server, key: keyA, localReplica: replicaB, localVersions: VersionVector(), random: seeded(20))
        _ = server.start()
        let actions = server.receive(Frame.encode(PeerProtocol.magic + [0, 11, 9, 9, 9]))
        #expect(actions.first == .send(Frame.encode(Handshake.header(.refusal, version: 10) + [1])))
        #expect(server.failure?.code == .versionMismatch)
    }

    /// A refusal naming a version above this build's (11, 257), or below the one-shot client's 9 (a
    /// server of an older build: 8, 6, 4, 2, 1; or 0).
    @Test(arguments: [
        (UInt16(11), "upgrade Concord on this side"), (0x0101, "upgrade Concord on this side"),
        (8, "upgrade Concord on the peer"), (6, "upgrade Concord on the peer"), (4, "upgrade Concord on the peer"), (2, "upgrade Concord on the peer"), (1, "upgrade Concord on the peer"), (0, "upgrade Concord on the peer"),
    ])
    func aClientFacingAnotherVersionNamesBoth(version: UInt16, remedy: String) throws {
        var client = PeerSession(role: .client, key: keyA, localReplica: replicaA, localVersions: VersionVector(), random: seeded(10))
        _ = client.start()
        // The refusal of a server of that version.
        let refusal = PeerProtocol.magic + [UInt8(version >> 8), UInt8(version & 0xFF), 4, 1]
        #expect(client.receive(Frame.encode(refusal)) == [
            .failed(ConcordError(.versionMismatch, "the peer speaks protocol version \(version) and this build speaks versions 1 to 10; \(remedy)")),
        ])
    }

    /// A server that refuses the version a client proposed naming that very version (the vector: a
    /// client of version 1 refused with version 1) breaks the protocol.
    @Test func aRefusalForAVersionItSpeaksBreaksTheProtocol() {
        var client = PeerSession(
            role: .client, key: keyA, localReplica: replicaA, localVersions: VersionVector(), highestVersion: 1, random: seeded(10))
        _ = client.start()
        #expect(client.receive(Self.vector("versionRefusalFrame")) == [
            .failed(ConcordError(.protocolViolation, "the peer broke the protocol: a refusal of protocol version 1, which it speaks")),
        ])
        // So does a refusal of this build's one-shot (9) or live (10) version naming it.
        for (live, version) in [(false, UInt16(9)), (true, 10)] {
            var client = PeerSession(role: .client, key: keyA, localReplica: replicaA, localVersions: VersionVector(), live: live, random: seeded(10))
            _ = client.start()
            #expect(client.version == version)
            let refusal = Frame.encode(Handshake.header(.refusal, version: version) + [Handshake.RefusalReason.version.rawValue])
            #expect(client.receive(refusal) == [
                .failed(ConcordError(.protocolViolation, "the peer broke the protocol: a refusal of protocol version \(version), which it speaks")),
            ])
        }
    }

    static let garbage: [(String, [UInt8])] = [
        ("an HTTP request", Array("GET / HTTP/1.1\r\nHost: example\r\n\r\n".utf8)),
        ("a TLS client hello", [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03]),
        ("a small frame of noise", Frame.encode([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])),
        ("a frame too short for the magic", Frame.encode(Array("CNCD".utf8))),
        ("a frame of 257 bytes", Frame.encode(PeerProtocol.magic + [0, 1, 1] + [UInt8](repeating: 0, count: 246))),
        ("an SSH banner", Array("SSH-2.0-OpenSSH_9.6\r\n".utf8)),
        ("an empty frame", Frame.encode([])),
    ]

    /// The first bytes of a peer that is not a Concord peer end the session at once, on either
    /// side, with nothing sent in reply.
    @Test(arguments: 0..<garbage.count)
    func garbageFirstBytesAreNotAPeer(index: Int) {
        let (label, bytes) = Self.garbage[index]
        for role in [PeerRole.server, .client] {
            var session = PeerSession(role: role, key: keyA, localReplica: replicaA, localVersions: VersionVector(), random: seeded(1))
            _ = session.start()
            for chunk in [1, Int.max] {
                var copy = session
                var actions: [PeerAction] = []
                var start = 0
                while start < bytes.count {
                    let end = min(start + chunk, bytes.count)
                    actions += copy.receive(bytes[start..<end])
                    start = end
                }
                #expect(actions == [.failed(ConcordError(.notAPeer, "the peer does not speak the Concord peer protocol"))], "\(label), \(role), chunk \(chunk)")
            }
        }
    }

    /// Frames of the right magic and version but the wrong kind or length break the protocol.
    @Test func malformedHandshakeFramesBreakTheProtocol() {
        let cases: [(PeerRole, [UInt8], String)] = [
            (.server, Handshake.header(.clientHello) + [UInt8](repeating: 1, count: 31), "expected a client hello, got a frame of kind 1 and 42 bytes"),
            (.server, Handshake.header(.clientProof) + [UInt8](repeating: 1, count: 32), "expected a client hello, got a frame of kind 3 and 43 bytes"),
            (.server, Handshake.header(.serverHello) + [UInt8](repeating: 1, count: 64), "expected a client hello, got a frame of kind 2 and 75 bytes"),
            (.server, PeerProtocol.magic + [0, 1], "a handshake frame of 10 bytes"),
            (.client, Handshake.header(.clientHello) + [UInt8](repeating: 1, count: 32), "expected a server hello, got a frame of kind 1 and 43 bytes"),
            (.client, Handshake.header(.serverHello) + [UInt8](repeating: 1, count: 65), "expected a server hello, got a frame of kind 2 and 76 bytes"),
            (.client, Handshake.header(.refusal) + [9], "a refusal for an unknown reason (9)"),
            (.client, Handshake.header(.refusal) + [2, 0], "a refusal of 13 bytes"),
        ]
        for (role, frame, message) in cases {
            // Frames of version 1, to sides that speak only it.
            var session = PeerSession(
                role: role, key: keyA, localReplica: replicaA, localVersions: VersionVector(), highestVersion: 1, random: seeded(1))
            _ = session.start()
            #expect(session.receive(Frame.encode(frame)) == [.failed(ConcordError(.protocolViolation, "the peer broke the protocol: \(message)"))])
        }
    }

    @Test func aSecondFrameOverTheHandshakeLimitBreaksTheProtocol() {
        var server = PeerSession(role: .server, key: keyA, localReplica: replicaB, localVersions: VersionVector(), random: seeded(20))
        _ = server.start()
        var client = PeerSession(role: .client, key: keyA, localReplica: replicaA, localVersions: VersionVector(), random: seeded(10))
        guard case .send(let hello)? = client.start().first else { return }
        _ = server.receive(hello)
        #expect(server.receive([0, 0, 1, 1]) == [.failed(ConcordError(.protocolViolation, "the peer broke the protocol: a handshake frame of 257 bytes"))])
    }

    /// A stream that ends inside the first frame is truncated; one that ends between frames is a
    /// closed connection.
    @Test func aConnectionThatEndsDuringTheHandshake() {
        var server = PeerSession(role: .server, key: keyA, localReplica: replicaB, localVersions: VersionVector(), random: seeded(20))
        _ = server.start()
        var client = PeerSession(role: .client, key: keyA, localReplica: replicaA, localVersions: VersionVector(), random: seeded(10))
        guard case .send(let hello)? = client.start().first else { return }
        var truncated = server
        #expect(truncated.receive(hello.dropLast(5)) == [])
        #expect(truncated.connectionClosed() == [.failed(ConcordError(.truncated, "the connection ended in the middle of a frame"))])
        var closed = server
        #expect(closed.connectionClosed() == [.failed(ConcordError(.closed, "the connection closed during the handshake"))])
        var afterHello = server
        #expect(afterHello.receive(hello).count == 1)
        #expect(afterHello.connectionClosed() == [.failed(ConcordError(.closed, "the connection closed during the handshake"))])
    }

    /// Everything a client sent in one session, replayed to a server, is refused: the server's
    /// fresh nonce makes the recorded proof wrong. The server sends its hello, then nothing.
    @Test func aReplayedClientHandshakeIsRefused() throws {
        var client = TestPeer(role: .client, replica: replicaA, operations: operations(by: replicaA, seqs: 1...50), random: seeded(10))
        var server = TestPeer(role: .server, replica: replicaB, random: seeded(20))
        run(&client, &server)
        #expect(client.finished != nil && server.finished?.operationsReceived == 50)
        let recorded = client.sent

        for (seed, chunk) in [(UInt64(21), Int.max), (22, 1), (23, 7)] {
            var replayServer = TestPeer(role: .server, replica: replicaB, random: seeded(seed))
            replayServer.start()
            replayServer.receive(recorded, chunk: chunk)
            #expect(replayServer.failure == ConcordError(.wrongKey, "the peer does not hold this store's sync key"))
            #expect(replayServer.appliedBatches.isEmpty && replayServer.needOperationsCalls.isEmpty)
            #expect(try frames(replayServer.sent).count == 1, "the server hello only")
        }
        // The same nonce again (a broken generator) would let it through: the nonce is what
        // protects the server. (That session then fails on the recorded ack, which answers a done
        // this server has not sent yet: it decrypted it.)
        var sameNonce = TestPeer(role: .server, replica: replicaB, random: seeded(20))
        sameNonce.start()
        sameNonce.receive(recorded)
        #expect(sameNonce.failure == .violation("an ack message before this side's done"))
    }

    /// A server's recorded bytes replayed to a client are refused: the client's fresh nonce makes
    /// the recorded server proof wrong, and the client sends no proof.
    @Test func aReplayedServerHandshakeIsRefused() throws {
        var client = TestPeer(role: .client, replica: replicaA, random: seeded(10))
        var server = TestPeer(role: .server, replica: replicaB, operations: operations(by: replicaB, seqs: 1...50), random: seeded(20))
        run(&client, &server)
        #expect(client.finished?.operationsReceived == 50)
        var replayClient = TestPeer(role: .client, replica: replicaA, random: seeded(11))
        replayClient.start()
        replayClient.receive(server.sent)
        #expect(replayClient.failure == ConcordError(.wrongKey, "the peer does not hold this store's sync key"))
        #expect(replayClient.appliedBatches.isEmpty)
        #expect(try frames(replayClient.sent).map { $0[10] } == [1, 4], "a hello and a refusal")
    }

    /// The server's proof sent back to it as a client proof is refused (the labels differ).
    @Test func aReflectedProofIsRefused() throws {
        var server = PeerSession(role: .server, key: keyA, localReplica: replicaB, localVersions: VersionVector(), random: seeded(20))
        _ = server.start()
        var client = PeerSession(role: .client, key: keyA, localReplica: replicaA, localVersions: VersionVector(), random: seeded(10))
        guard case .send(let hello)? = client.start().first, case .send(let serverHelloFrame)? = server.receive(hello).first else {
            Issue.record("no hello")
            return
        }
        let serverHello = try frames(serverHelloFrame)[0]
        let reflected = Handshake.header(.clientProof, version: server.version) + serverHello[43...]
        #expect(server.receive(Frame.encode(reflected)) == [.failed(ConcordError(.wrongKey, "the peer does not hold this store's sync key"))])
    }

    /// Both stores with one replica id: both sides refuse, each with the same clear reason.
    @Test func theSameReplicaIDOnBothSidesIsRefused() {
        var client = TestPeer(role: .client, replica: replicaA, operations: operations(by: replicaA, seqs: 1...5), random: seeded(10))
        var server = TestPeer(role: .server, replica: replicaA, operations: operations(by: replicaA, seqs: 1...7), random: seeded(20))
        run(&client, &server)
        let message = "both stores have replica id \(replicaA.hex); one is a copy of the other"
        #expect(client.failure == ConcordError(.sameReplica, message))
        #expect(server.failure == ConcordError(.sameReplica, message))
        #expect(client.appliedBatches.isEmpty && server.appliedBatches.isEmpty)
        #expect(client.needOperationsCalls.isEmpty && server.needOperationsCalls.isEmpty)
    }
}
