import ConcordCore
import ConcordWire
import ConcordKeys
import Testing
@testable import ConcordPeer

/// Every way a session sends an `error` (SPEC.md §15.8), from either side: the error is sealed
/// with the next counter of its direction, so the peer opens it and reports its reason, rather than
/// "a frame failed authentication". The paths, as `PeerSession` has them:
///
/// - `handleReceived`: a frame over the limit;
/// - `handleMessage`: a frame that fails authentication; a message out of order; a message that
///   does not decode; a `versions` naming this side's replica id; an `ack` of another count;
/// - `flushBatch`: an operation too large to send;
/// - `abort(_:)`: whatever the transport ends the session for (a timeout, a shutdown, a replaced
///   sync key), and a batch whose merge fails, before or after the peer's `done` has arrived.
@Suite struct ErrorDeliveryTests {
    enum Path: String, CaseIterable, CustomTestStringConvertible {
        case frameTooLarge, authenticationFailure, outOfOrder, malformed, sameReplica, wrongAck,
             operationTooLarge, abort, applyFailsBeforeDone, applyFailsAfterDone
        var testDescription: String { rawValue }
    }

    static let clash = "replica \(replicaC.hex) has two different operations with seq 3, here and in what is being merged"

    @Test(arguments: Path.allCases, [PeerRole.client, .server])
    func theErrorReachesThePeerReadable(path: Path, failing role: PeerRole) throws {
        let other: PeerRole = role == .client ? .server : .client
        var ops: [PeerRole: [Op]] = [.client: operations(by: replicaA, seqs: 1...30), .server: operations(by: replicaB, seqs: 1...20)]
        var replicas: [PeerRole: ReplicaID] = [.client: replicaA, .server: replicaB]
        if path == .operationTooLarge {
            ops[role]![4].action = .assign(.notes, .string(String(repeating: "z", count: 4_200_000)))
        }
        if path == .sameReplica { replicas[other] = replicas[role] }
        var peers: [PeerRole: TestPeer] = [:]
        for side in [PeerRole.client, .server] {
            peers[side] = TestPeer(role: side, replica: replicas[side]!, operations: ops[side]!, random: seeded(side == .client ? 10 : 20))
        }
        if path == .applyFailsBeforeDone || path == .applyFailsAfterDone {
            peers[role]!.refuseBatch = { _ in ConcordError(.local, Self.clash) }
        }

        // The handshake and the first messages, one delivery at a time.
        func deliver(from sender: PeerRole, chunk: Int = .max) {
            let bytes = peers[sender]!.takeOutbox()
            peers[sender == .client ? .server : .client]!.receive(bytes, chunk: chunk)
        }
        peers[.server]!.start()
        peers[.client]!.start()
        deliver(from: .client)  // hello
        deliver(from: .server)  // server hello; the client sends its proof, versions, batches, done
        deliver(from: .client)  // the server's versions, batches, done
        // Past the handshake (a server that holds the client's replica id, or an operation too large
        // to send, has ended already).
        #expect(peers.values.allSatisfy { $0.session.isHandshakeComplete || $0.failure != nil })

        // What the other side sends wrongly, or what this side does, to end the session.
        let expected: String
        switch path {
        case .frameTooLarge:
            peers[other]!.outbox += [0x00, 0x40, 0x00, 0x01]
            expected = "it received a frame over the 4194304-byte limit"
        case .authenticationFailure:
            var frame = peers[other]!.session.sendUncheckedMessage(PeerMessage.doneMessage).sentBytes
            frame[frame.count - 1] ^= 1
            peers[other]!.outbox += frame
            expected = "it received a frame that failed authentication"
        case .outOfOrder:
            peers[other]!.outbox += peers[other]!.session.sendUncheckedMessage(HostileClient.versions(replicaC)).sentBytes
            expected = "it received something the protocol does not allow there: a second versions message"
        case .malformed:
            peers[other]!.outbox += peers[other]!.session.sendUncheckedMessage([10]).sentBytes
            expected = "it received something the protocol does not allow: a message of unknown type 10"
        case .sameReplica:
            expected = "both stores have replica id \(replicas[role]!.hex); one is a copy of the other"
        case .wrongAck:
            // Once this side has sent its done, an ack may come: one of another count.
            if role == .client { deliver(from: .server) }
            peers[other]!.outbox += peers[other]!.session.sendUncheckedMessage(PeerMessage.encodeAck(99)).sentBytes
            expected = "it received something the protocol does not allow: an ack message for 99 operations; this side sent \(ops[role]!.count)"
        case .operationTooLarge:
            expected = "operation \(replicas[role]!.hex):5 is too large to send to a peer (4200058 bytes)"
        case .abort:
            var side = peers[role]!
            side.perform(side.session.abort(ConcordError(.timedOut, "the session was idle for 60 s")))
            peers[role] = side
            expected = "the session was idle for 60 s"
        case .applyFailsBeforeDone, .applyFailsAfterDone:
            expected = Self.clash
        }
        if path == .applyFailsBeforeDone {
            // The client sends its batches once the server's versions have arrived; byte by byte,
            // so that the first batch is applied before the peer's done arrives.
            if role == .server { deliver(from: .server) }
            deliver(from: other, chunk: 1)
        }
        var client = peers[.client]!
        var server = peers[.server]!
        pump(&client, &server)
        peers = [.client: client, .server: server]

        // The side that ended said why, in a frame its peer opens with the next counter.
        let failing = peers[role]!
        #expect(failing.failure?.code != .peerError, "\(String(describing: failing.failure))")
        let messages = try Wire.messages(client: peers[.client]!.sent, server: peers[.server]!.sent, sentBy: role)
        #expect(messages.last == .error(expected))
        #expect(messages.filter { if case .error = $0 { true } else { false } }.count == 1)
        // A peer still under way when it arrives reports it; one that found the same fault itself
        // (both hold one replica id) reports that, in the same words.
        let peer = peers[other]!
        if path == .sameReplica {
            #expect(peer.failure == ConcordError(.sameReplica, expected))
        } else if path != .wrongAck || role == .server {
            #expect(peer.failure == ConcordError(.peerError, "the peer ended the session: \(expected)"))
        }
        if path == .applyFailsBeforeDone || path == .applyFailsAfterDone {
            #expect(failing.appliedBatches.isEmpty)
            #expect(failing.failure == ConcordError(.local, Self.clash))
        }
    }

    /// What a side tells its peer when it ends the session itself is the failure as the app words
    /// it (`describeError`), so that an app's advice travels too (syncctl names its commands): a
    /// store of the peer's replica id, and an abort.
    @Test(arguments: [Path.sameReplica, .abort])
    func theReasonIsWordedAsTheAppWordsIt(path: Path) throws {
        let describe: @Sendable (ConcordError) -> String = { "\($0.message) [\($0.code)]" }
        var client = TestPeer(role: .client, replica: replicaA, operations: operations(by: replicaA, seqs: 1...10), random: seeded(10))
        let serverReplica = path == .sameReplica ? replicaA : replicaB
        var server = TestPeer(role: .server, replica: serverReplica, random: seeded(20))
        server.session = PeerSession(
            role: .server, key: keyA, localReplica: serverReplica, localVersions: server.store.versions, random: seeded(20), describeError: describe)
        server.start()
        client.start()
        server.receive(client.takeOutbox())  // hello
        client.receive(server.takeOutbox())  // proof, versions
        server.receive(client.takeOutbox())  // the server's versions and done, or its error
        let expected: String
        if path == .sameReplica {
            expected = "both stores have replica id \(replicaA.hex); one is a copy of the other [sameReplica]"
            #expect(server.failure == ConcordError(.sameReplica, "both stores have replica id \(replicaA.hex); one is a copy of the other"))
        } else {
            server.perform(server.session.abort(ConcordError(.timedOut, "the session was idle for 60 s")))
            expected = "the session was idle for 60 s [timedOut]"
        }
        let messages = try Wire.messages(client: client.sent, server: server.sent, sentBy: .server)
        #expect(messages.last == .error(expected))
    }

    /// The bug this suite was written for: a batch refused after the peer's `done` had arrived used
    /// to be answered with an `error` sealed past a counter spent on an ack that was never sent.
    @Test func noAckIsSealedBeforeTheBatchCommits() {
        var client = TestPeer(role: .client, replica: replicaA, operations: operations(by: replicaA, seqs: 1...10), random: seeded(10))
        var server = TestPeer(role: .server, replica: replicaB, random: seeded(20))
        server.start()
        client.start()
        server.receive(client.takeOutbox())  // hello
        client.receive(server.takeOutbox())  // proof, versions
        server.receive(client.takeOutbox())  // the server's versions and done
        client.receive(server.takeOutbox())  // the client's batch and done (and its ack)
        let actions = server.session.receive(client.takeOutbox())
        #expect(actions.count == 1 && actions[0].isApply, "\(actions)")
        let logged = server.session.batchApplied()
        #expect(logged == [.finishMerge(compacted: SeqRanges())], "no ack before the records show the batch")
        let after = server.session.batchApplied()
        #expect(after.contains { $0.isSend }, "the ack, once the merge has finished")
        // The client's ack waited behind the merge; the server's own ack went out before the
        // session finished on it.
        guard case .finished? = after.last else {
            Issue.record("the session did not finish: \(after)")
            return
        }
        #expect(after.firstIndex { $0.isSend }! < after.count - 1)
    }
}

extension [PeerAction] {
    /// The bytes of the `.send` actions.
    var sentBytes: [UInt8] {
        var bytes: [UInt8] = []
        for case .send(let sent) in self { bytes += sent }
        return bytes
    }
}

/// Reads a session's encrypted messages off the wire as its peer would, from both sides' bytes:
/// the nonces travel in clear in the hellos, and the tests hold the key.
enum Wire {
    static func messages(client: [UInt8], server: [UInt8], sentBy role: PeerRole, key: SyncKey = keyA) throws -> [PeerMessage] {
        let clientFrames = try frames(client)
        let serverFrames = try frames(server)
        let nonce = Handshake.headerBytes..<Handshake.headerBytes + Handshake.nonceBytes
        let keys = Handshake.Keys(key: key, clientNonce: Array(clientFrames[0][nonce]), serverNonce: Array(serverFrames[0][nonce]))
        var opener = FrameCipher(key: role == .client ? keys.clientToServer : keys.serverToClient)
        // The client's hello and proof, or the server's hello, are in clear.
        let sealed = role == .client ? clientFrames.dropFirst(2) : serverFrames.dropFirst(1)
        return try sealed.map { try PeerMessage.decode(try opener.open($0), version: PeerProtocol.highestVersion) }
    }
}
