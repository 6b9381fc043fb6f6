import ConcordCore
import ConcordWire
import Testing
@testable import ConcordPeer

/// Bad input after the handshake (SPEC.md §15.4, §15.5): changed, replayed, reordered and
/// oversized frames from the wire, and messages that break the protocol from a peer that holds
/// the key. Each ends the session with a clear reason, and nothing after it is applied.
@Suite struct HostileInputTests {
    /// A client and a server past the handshake, the server holding `serverOps`; returns the
    /// server's encrypted frames (its versions, batches, done) not yet delivered to the client.
    static func established(serverOps: [Op] = operations(by: replicaB, seqs: 1...40_000)) throws
        -> (client: TestPeer, server: TestPeer, serverFrames: [[UInt8]])
    {
        var client = TestPeer(role: .client, replica: replicaA, random: seeded(10))
        var server = TestPeer(role: .server, replica: replicaB, operations: serverOps, random: seeded(20))
        client.start()
        server.start()
        server.receive(client.takeOutbox())  // hello
        client.receive(server.takeOutbox())  // server hello → proof and versions
        server.receive(client.takeOutbox())  // → versions, batches, done
        #expect(client.session.isHandshakeComplete && server.session.isHandshakeComplete)
        return (client, server, try frames(server.takeOutbox()))
    }

    /// Frames 0 (versions) and 1 (the first batch) delivered; `bytes` after them.
    static func deliverFirstBatch(to client: inout TestPeer, _ serverFrames: [[UInt8]]) {
        client.receive(Frame.encode(serverFrames[0]) + Frame.encode(serverFrames[1]))
        #expect(client.appliedBatches.count == 1)
        #expect(client.failure == nil)
    }

    static let authenticationFailure = ConcordError(.authenticationFailed, "a frame failed authentication")

    @Test func theServersFramesAreVersionsBatchesAndDone() throws {
        let (_, _, serverFrames) = try Self.established()
        #expect(serverFrames.count == 1 + 3 + 1)
    }

    /// A bit flipped anywhere in a frame's payload (ciphertext or tag) fails authentication; the
    /// receiver applies nothing from it and tells the peer why.
    @Test func aFlippedBitFailsAuthentication() throws {
        let (client0, server0, serverFrames) = try Self.established()
        let batch = serverFrames[1]
        for position in [0, 1, batch.count / 2, batch.count - 17, batch.count - 16, batch.count - 1] {
            for mask: UInt8 in [0x01, 0x80] {
                var client = client0
                var server = server0
                var damaged = batch
                damaged[position] ^= mask
                client.receive(Frame.encode(serverFrames[0]) + Frame.encode(damaged) + Frame.encode(serverFrames[2]))
                #expect(client.failure == Self.authenticationFailure)
                #expect(client.appliedBatches.isEmpty)
                // The client tells the server, which reports it.
                server.receive(client.takeOutbox())
                #expect(server.failure == ConcordError(.peerError, "the peer ended the session: it received a frame that failed authentication"))
            }
        }
    }

    /// A frame that fails while a merge is under way (read ahead, `readAhead()`) ends the session
    /// at once, without waiting for the merge; nothing after the batches under way is handed out.
    @Test func aFrameReadAheadDuringAMergeFailsAtOnce() throws {
        var (client, server, serverFrames) = try Self.established()
        client.mergesLater = true
        var damaged = serverFrames[2]
        damaged[damaged.count / 2] ^= 0x01
        client.receive(Frame.encode(serverFrames[0]) + Frame.encode(serverFrames[1]) + Frame.encode(damaged) + Frame.encode(serverFrames[3]))
        #expect(client.mergesUnderWay.map(\.count) == [PeerProtocol.maxBatchOperations])
        #expect(client.failure == Self.authenticationFailure)
        // The merge under way may still commit (what it holds arrived whole); nothing more is handed out.
        let merged = client.finishMerge()
        #expect(merged)
        #expect(client.log.filter(\.isApply).count == 1)
        server.receive(client.takeOutbox())
        #expect(server.failure == ConcordError(.peerError, "the peer ended the session: it received a frame that failed authentication"))
    }

    /// The peer's `done`, opened while the last batch is being merged, is acknowledged only once
    /// that merge has committed: until then the peer has not finished.
    @Test func theAckWaitsForTheMergeUnderWay() throws {
        var (client, server, serverFrames) = try Self.established(serverOps: operations(by: replicaB, seqs: 1...100))
        #expect(serverFrames.count == 3)
        _ = server.takeOutbox()  // the frames above, still in the copy returned
        client.mergesLater = true
        client.receive(serverFrames.flatMap { Frame.encode($0) })
        #expect(client.mergesUnderWay.map(\.count) == [100])
        server.receive(client.takeOutbox())
        #expect(server.finished == nil && server.failure == nil)
        let merged = client.finishMerge()
        #expect(merged)
        server.receive(client.takeOutbox())
        #expect(server.finished?.operationsSent == 100)
        client.receive(server.takeOutbox())
        #expect(client.failure == nil)
        #expect(client.finished?.operationsReceived == 100)
    }

    /// The connection closes while a merge is out: the session ends once that merge has
    /// committed and what arrived whole has been handled (the peer's `error`, which says why it
    /// closed); only bytes of a frame cut short make it a truncation.
    @Test(arguments: [false, true])
    func aCloseDuringAMergeIsHandledAfterIt(cutShort: Bool) throws {
        var hostile = try HostileClient()
        var encoder = OperationsBlock.Encoder()
        operations(by: replicaA, seqs: 1...3).forEach { encoder.append($0) }
        var bytes = hostile.seal(HostileClient.versions(replicaA)) + hostile.seal(PeerMessage.encodeBatch(raw: encoder.finish()))
            + hostile.seal(PeerMessage.encodeError("shutting down"))
        if cutShort { bytes.removeLast(5) }
        #expect(hostile.server.receive(bytes).filter(\.isApply).count == 1)
        #expect(hostile.server.connectionClosed() == [])
        let failure = cutShort
            ? ConcordError(.truncated, "the connection ended in the middle of a frame")
            : ConcordError(.peerError, "the peer ended the session: shutting down")
        #expect(hostile.server.batchApplied().last == .failed(failure))
    }

    /// A batch that declares a raw length near the largest integer, after a batch waiting to be
    /// merged, is refused without a trap (the size bound is compared without overflowing).
    @Test func aHugeDeclaredLengthAfterABatchIsRefused() throws {
        var hostile = try HostileClient(batchesPerApply: 8)
        var encoder = OperationsBlock.Encoder()
        operations(by: replicaA, seqs: 1...3).forEach { encoder.append($0) }
        var bogus = ByteWriter()
        bogus.byte(2)
        bogus.varint(UInt64.max - 7)
        bogus.bytes([1, 2, 3])
        let bytes = hostile.seal(HostileClient.versions(replicaA)) + hostile.seal(PeerMessage.encodeBatch(raw: encoder.finish()))
            + hostile.seal(bogus.bytes)
        var actions = hostile.server.receive(bytes)
        #expect(actions.filter(\.isApply).count == 1)
        actions = hostile.server.batchApplied()
        #expect(actions.last.map { if case .failed(let failure) = $0 { failure.code == .protocolViolation } else { false } } == true, "\(actions)")
    }

    /// While as many merges as allowed are out and the next one's batches are complete, the
    /// session reads nothing more (`waitsForMerges`): a transport leaves what arrives unread.
    @Test func aSessionWithItsMergesOutWaits() throws {
        var (client, _, serverFrames) = try Self.established()
        client.mergesLater = true
        #expect(!client.session.waitsForMerges)
        client.receive(serverFrames.flatMap { Frame.encode($0) })
        #expect(client.mergesUnderWay.count == 1)
        #expect(client.session.waitsForMerges)
        _ = client.finishMerge()
        #expect(client.mergesUnderWay.count == 1)
        _ = client.finishMerge()
        _ = client.finishMerge()
        #expect(!client.session.waitsForMerges)
    }

    @Test func aReplayedFrameFailsAuthentication() throws {
        var (client, _, serverFrames) = try Self.established()
        Self.deliverFirstBatch(to: &client, serverFrames)
        client.receive(Frame.encode(serverFrames[1]))
        #expect(client.failure == Self.authenticationFailure)
        #expect(client.appliedBatches.count == 1)
    }

    @Test func reorderedFramesFailAuthentication() throws {
        var (client, _, serverFrames) = try Self.established()
        client.receive(Frame.encode(serverFrames[0]) + Frame.encode(serverFrames[2]) + Frame.encode(serverFrames[1]))
        #expect(client.failure == Self.authenticationFailure)
        #expect(client.appliedBatches.isEmpty)
    }

    @Test func aDroppedFrameMakesTheNextFail() throws {
        var (client, _, serverFrames) = try Self.established()
        Self.deliverFirstBatch(to: &client, serverFrames)
        client.receive(Frame.encode(serverFrames[3]))
        #expect(client.failure == Self.authenticationFailure)
        #expect(client.appliedBatches.count == 1)
    }

    /// A frame of the other direction, reflected back, or of another session, fails.
    @Test func framesOfAnotherDirectionOrSessionFail() throws {
        var (client, _, serverFrames) = try Self.established()
        // The client's own versions frame, reflected.
        var reflected = client
        let clientFrames = try frames(reflected.sent)
        reflected.receive(Frame.encode(clientFrames.last!))
        #expect(reflected.failure == Self.authenticationFailure)
        // The same server frames in a session with other nonces.
        var otherClient = TestPeer(role: .client, replica: replicaA, random: seeded(99))
        var otherServer = TestPeer(role: .server, replica: replicaB, random: seeded(98))
        otherClient.start()
        otherServer.start()
        otherServer.receive(otherClient.takeOutbox())
        otherClient.receive(otherServer.takeOutbox())
        otherClient.receive(Frame.encode(serverFrames[0]))
        #expect(otherClient.failure == Self.authenticationFailure)
        client.receive(Frame.encode(serverFrames[0]))
        #expect(client.failure == nil)
    }

    /// A frame length over 4 MiB is refused from the length alone; the peer is told.
    @Test func aFrameOverTheLimitIsRefused() throws {
        var (client, server, serverFrames) = try Self.established()
        Self.deliverFirstBatch(to: &client, serverFrames)
        client.receive([0x00, 0x40, 0x00, 0x01])
        #expect(client.failure == ConcordError(.frameTooLarge, "the peer sent a frame of 4194305 bytes, over the 4194304-byte limit"))
        #expect(client.appliedBatches.count == 1)
        server.receive(client.takeOutbox())
        #expect(server.failure == ConcordError(.peerError, "the peer ended the session: it received a frame over the 4194304-byte limit"))
    }

    /// A frame of exactly 4 MiB is read (and then fails authentication, being noise).
    @Test func aFrameAtTheLimitIsRead() throws {
        var (client, _, _) = try Self.established()
        client.receive(Frame.encode([UInt8](repeating: 7, count: 4 << 20)))
        #expect(client.failure == Self.authenticationFailure)
    }

    @Test func garbageAfterTheHandshakeEndsTheSession() throws {
        let (client0, _, serverFrames) = try Self.established()
        let random = SeededBytes(seed: 5)
        for length in [1, 3, 20, 100, 5000] {
            var client = client0
            Self.deliverFirstBatch(to: &client, serverFrames)
            let noise = random.bytes(length)
            client.receive(noise)
            client.perform(client.session.connectionClosed())
            #expect(client.failure != nil)
            #expect(client.appliedBatches.count == 1)
        }
    }

    /// A frame cut short by the end of the connection: nothing of it is applied.
    @Test func aTruncatedFrameIsNotApplied() throws {
        let (client0, _, serverFrames) = try Self.established()
        let second = Frame.encode(serverFrames[2])
        for cut in [1, 3, 4, 5, second.count / 2, second.count - 1] {
            var client = client0
            Self.deliverFirstBatch(to: &client, serverFrames)
            client.receive(Array(second.prefix(cut)))
            client.perform(client.session.connectionClosed())
            #expect(client.failure == ConcordError(.truncated, "the connection ended in the middle of a frame"))
            #expect(client.appliedBatches.count == 1)
        }
    }

    @Test func aConnectionClosedBetweenFramesBeforeTheEnd() throws {
        var (client, _, serverFrames) = try Self.established()
        Self.deliverFirstBatch(to: &client, serverFrames)
        client.perform(client.session.connectionClosed())
        #expect(client.failure == ConcordError(.closed, "the connection closed before the session finished"))
    }

    /// Without the peer's ack, a side that has sent everything and received the peer's done has
    /// not finished: it cannot know its operations arrived.
    @Test func aSideWithoutThePeersAckHasNotFinished() throws {
        var (client, _, serverFrames) = try Self.established()
        client.receive(serverFrames.flatMap { Frame.encode($0) })
        #expect(client.appliedBatches.count == 3)
        #expect(client.finished == nil && client.failure == nil)
        client.perform(client.session.connectionClosed())
        #expect(client.failure?.code == .closed)
    }

    /// The sealing counter never reaches 2^64−1: the side that would need it ends the session.
    @Test func theLastCounterIsNeverUsed() throws {
        var server = PeerSession(role: .server, key: keyA, localReplica: replicaB, localVersions: VersionVector(), random: seeded(20))
        var client = PeerSession(role: .client, key: keyA, localReplica: replicaA, localVersions: VersionVector(), random: seeded(10))
        _ = server.start()
        func bytes(_ actions: [PeerAction]) -> [UInt8] { actions.flatMap { action -> [UInt8] in if case .send(let b) = action { b } else { [] } } }
        let proof = client.receive(bytes(server.receive(bytes(client.start()))))
        let serverVersions = server.receive(bytes(proof))
        #expect(client.receive(bytes(serverVersions)).count == 1)  // needOperations
        server.setSendCounter(UInt64.max - 1)
        client.setReceiveCounter(UInt64.max - 1)
        #expect(server.send(operations: operations(by: replicaB, seqs: 1...3)) == [])
        let last = server.finishSending()
        #expect(last.count == 2)
        #expect(last.last == .failed(ConcordError(.counterExhausted, "the session has used all its frame counters")))
        // The batch sealed with the last usable counter is read; nothing after it can be.
        let received = client.receive(bytes(last))
        #expect(received.count == 1 && received[0].isApply)
        #expect(client.batchApplied() == [])
        #expect(client.receive(Frame.encode([UInt8](repeating: 0, count: 40))) == [
            .failed(ConcordError(.counterExhausted, "the session has used all its frame counters")),
        ])
    }

    // MARK: A peer that holds the key and breaks the protocol

    static let violations: [(label: String, messages: [[UInt8]], reason: String)] = {
        let versions = HostileClient.versions(replicaA)
        let someOps = operations(by: replicaA, seqs: 1...3)
        var encoder = OperationsBlock.Encoder()
        someOps.forEach { encoder.append($0) }
        let raw = encoder.finish()
        let batch = PeerMessage.encodeBatch(raw: raw)
        func batchMessage(declared: UInt64, body: [UInt8]) -> [UInt8] {
            var writer = ByteWriter()
            writer.byte(2)
            writer.varint(declared)
            writer.bytes(body)
            return writer.bytes
        }
        var tooMany = OperationsBlock.Encoder()
        operations(by: replicaA, seqs: 1...16_385).forEach { tooMany.append($0) }
        var invalid = OperationsBlock.Encoder()
        invalid.append(Op(id: OperationID(replica: replicaA, seq: 1), timestamp: Timestamp(physicalMillis: baseMillis, logical: 0),
                          record: .reminder(RecordID(high: 1, low: 1)), action: .assign(.priority, .string("high"))))
        var twice = ByteWriter()
        twice.byte(1)
        twice.identifier(replicaA)
        twice.varint(2)
        for _ in 0..<2 {
            twice.identifier(replicaC)
            twice.varint(5)
        }
        return [
            ("a batch before versions", [batch], "a batch message before versions"),
            ("done before versions", [[3]], "a done message before versions"),
            ("an ack before versions", [[5, 0]], "an ack message before versions"),
            ("a second versions", [versions, versions], "a second versions message"),
            ("a batch after done", [versions, [3], batch], "a batch message after done"),
            ("a second done", [versions, [3], [3]], "a done message after done"),
            ("an ack before this side's done", [versions, [5, 0]], "an ack message before this side's done"),
            ("an unknown type", [versions, [10, 1, 2]], "a message of unknown type 10"),
            ("an empty message", [versions, []], "an empty message"),
            ("versions with bytes after", [versions + [0]], "a versions message: bytes after the version vector"),
            ("versions naming a replica twice", [twice.bytes], "a versions message: a version vector names a replica twice"),
            ("versions cut short", [Array(versions.prefix(10))], "a versions message: it ends early"),
            ("done with bytes after", [versions, [3, 0]], "a done message: bytes after done"),
            ("a batch of 0 raw bytes", [versions, batchMessage(declared: 0, body: [])],
             "a batch message: a batch declares 0 raw bytes (the limit is 4194304)"),
            ("a batch over 4 MiB raw", [versions, batchMessage(declared: 4_194_305, body: Zstd.compress(raw))],
             "a batch message: a batch declares 4194305 raw bytes (the limit is 4194304)"),
            ("a batch declaring another size", [versions, batchMessage(declared: UInt64(raw.count + 1), body: Zstd.compress(raw))],
             "a batch message: a batch decompresses to \(raw.count) bytes, not the \(raw.count + 1) it declares"),
            ("a batch not compressed", [versions, batchMessage(declared: UInt64(raw.count), body: raw)],
             "a batch message: a batch is not one zstd frame"),
            ("a batch with bytes after its zstd frame", [versions, batch + [0]],
             "a batch message: a batch is not exactly one zstd frame"),
            ("a batch of 16,385 operations", [versions, PeerMessage.encodeBatch(raw: tooMany.finish())],
             "a batch message: more than 16384 operations"),
            ("a batch holding an invalid operation", [versions, PeerMessage.encodeBatch(raw: invalid.finish())],
             "a batch message: invalid operation \(replicaA.hex):1: reminder field 'priority' cannot hold string(\"high\")"),
            ("a batch whose payload is not runs", [versions, PeerMessage.encodeBatch(raw: [1, 2, 3])],
             "a batch message: a replica table of 1 entries"),
            ("an error too long", [versions, [4] + [0x88, 0x08] + [UInt8](repeating: 0x41, count: 1032)],
             "an error message: string of 1032 bytes exceeds the limit"),
        ]
    }()

    @Test(arguments: 0..<violations.count)
    func aMessageOutOfOrderOrMalformedEndsTheSession(index: Int) throws {
        let (label, messages, reason) = Self.violations[index]
        var hostile = try HostileClient()
        #expect(try hostile.serverMessages().count == 1, "the server's versions")
        let actions = hostile.send(messages)
        #expect(actions.last == .failed(ConcordError(.protocolViolation, "the peer broke the protocol: \(reason)")), "\(label): \(actions.last.map { "\($0)" } ?? "nothing")")
        #expect(!actions.contains { $0.isApply }, "\(label)")
        // The server told the hostile peer why, and ignores anything after.
        let told = try #require(try hostile.serverMessages().last)
        guard case .error(let toldReason) = try PeerMessage.decode(told) else {
            Issue.record("\(label): the server's last message is not an error")
            return
        }
        #expect(toldReason.hasPrefix("it received something the protocol does not allow"), "\(label)")
        #expect(toldReason.hasSuffix(reason), "\(label)")
        #expect(hostile.send(messages.last ?? []) == [])
    }

    /// The peer's error ends the session; its reason is shown without control characters.
    @Test func thePeersErrorEndsTheSessionAndIsSanitized() throws {
        var hostile = try HostileClient()
        let actions = hostile.send(HostileClient.versions(replicaA), PeerMessage.encodeError("disk \u{1B}[31mfull\u{202E}\n" + String(repeating: "!", count: 300)))
        guard case .failed(let failure)? = actions.last else {
            Issue.record("no failure: \(actions)")
            return
        }
        #expect(failure.code == .peerError)
        #expect(failure.message.hasPrefix("the peer ended the session: disk \u{FFFD}[31mfull\u{FFFD}\u{FFFD}!!!"))
        #expect(failure.message.hasSuffix("!…"))
        #expect(!failure.message.unicodeScalars.contains { $0.properties.generalCategory == .control })
    }

    /// An error is accepted at any point, even before versions.
    @Test func anErrorBeforeVersionsEndsTheSession() throws {
        var hostile = try HostileClient()
        #expect(hostile.send(PeerMessage.encodeError("shutting down")) == [.failed(ConcordError(.peerError, "the peer ended the session: shutting down"))])
    }

    /// Batches before a bad message are applied; nothing in or after it is.
    @Test func nothingIsAppliedAfterAFailure() throws {
        var hostile = try HostileClient()
        let good = PeerMessage.encodeBatch(raw: {
            var encoder = OperationsBlock.Encoder()
            operations(by: replicaA, seqs: 1...10).forEach { encoder.append($0) }
            return encoder.finish()
        }())
        let later = PeerMessage.encodeBatch(raw: {
            var encoder = OperationsBlock.Encoder()
            operations(by: replicaA, seqs: 11...20).forEach { encoder.append($0) }
            return encoder.finish()
        }())
        let actions = hostile.send(HostileClient.versions(replicaA), good, [10], later, [3])
        #expect(actions.filter(\.isApply).count == 1)
        #expect(actions.last?.isApply == false)
        #expect(hostile.server.failure?.code == .protocolViolation)
        #expect(hostile.send(later) == [])
    }

    /// An ack that does not count what this side sent breaks the protocol.
    @Test func anAckForAnotherCountBreaksTheProtocol() throws {
        var hostile = try HostileClient(serverOperations: operations(by: replicaB, seqs: 1...10))
        let actions = hostile.send(HostileClient.versions(replicaA))
        guard case .needOperations(let since, let lastShared)? = actions.first else {
            Issue.record("no needOperations: \(actions)")
            return
        }
        #expect(since == VersionVector() && lastShared.isEmpty)
        _ = hostile.server.send(operations: operations(by: replicaB, seqs: 1...10))
        _ = hostile.server.finishSending()
        #expect(hostile.send([5, 9]).last == .failed(ConcordError(.protocolViolation, "the peer broke the protocol: an ack message for 9 operations; this side sent 10")))
    }

    /// A key-holding peer that claims the server's own replica id is refused as a copy.
    @Test func aPeerClaimingTheSameReplicaIsRefused() throws {
        var hostile = try HostileClient()
        let actions = hostile.send(HostileClient.versions(replicaB))
        #expect(actions.last?.isSend == false)
        #expect(hostile.server.failure?.code == .sameReplica)
    }

    /// Aborting past the handshake tells the peer; during it, sends nothing.
    @Test func abortTellsThePeerOncePastTheHandshake() throws {
        var (client, server, _) = try Self.established()
        let failure = ConcordError(.timedOut, "the session was idle for 60 s")
        client.perform(client.session.abort(failure))
        #expect(client.failure == failure)
        server.receive(client.takeOutbox())
        #expect(server.failure == ConcordError(.peerError, "the peer ended the session: the session was idle for 60 s"))

        var early = PeerSession(role: .client, key: keyA, localReplica: replicaA, localVersions: VersionVector(), random: seeded(1))
        _ = early.start()
        #expect(early.abort(failure) == [.failed(failure)])
        var notStarted = PeerSession(role: .server, key: keyA, localReplica: replicaA, localVersions: VersionVector(), random: seeded(1))
        #expect(notStarted.abort(failure) == [.failed(failure)])
    }
}

/// SPEC §15.5 (as §13): a versions message lists its entries in ascending replica id order, and
/// a reader takes them in any order.
@Suite struct VersionsMessageOrderTests {
    @Test func entriesAreWrittenInIdOrderAndReadInAny() throws {
        let vector = VersionVector([replicaC: 3, replicaA: 1, replicaB: 2])
        let bytes = PeerMessage.encodeVersions(replica: replicaA, versions: vector)
        // kind (1), sender (16), count (1), then (id, seq) entries of 17 bytes.
        let entries = stride(from: 18, to: bytes.count, by: 17).map { Array(bytes[$0..<$0 + 16]) }
        #expect(entries == [replicaA.bytes, replicaB.bytes, replicaC.bytes])
        var reversed = ByteWriter()
        reversed.byte(1)
        reversed.identifier(replicaA)
        reversed.varint(3)
        for (replica, seq) in vector.sorted.reversed() {
            reversed.identifier(replica)
            reversed.varint(seq)
        }
        #expect(try PeerMessage.decode(reversed.bytes) == .versions(replicaA, vector))
    }
}
