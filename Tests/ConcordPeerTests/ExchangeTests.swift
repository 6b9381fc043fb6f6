import ConcordCore
import ConcordWire
import Testing
@testable import ConcordPeer

/// Whole sessions between two in-memory replicas (SPEC.md §15.6): both end holding the same
/// operations, whatever each held, however the bytes are cut.
@Suite struct ExchangeTests {
    /// Runs a session and checks that both sides finished, converged and counted the same traffic.
    @discardableResult
    static func sync(
        client clientOperations: [Op], server serverOperations: [Op], chunk: Int = .max, driverChunk: Int = 1000,
        batchesPerApply: Int = 1, mergesLater: Bool = false, appliesInFlight: Int = 1, seeds: (UInt64, UInt64) = (10, 20)
    ) -> (client: TestPeer, server: TestPeer) {
        var client = TestPeer(
            role: .client, replica: replicaA, operations: clientOperations, batchesPerApply: batchesPerApply,
            appliesInFlight: appliesInFlight, random: seeded(seeds.0))
        var server = TestPeer(
            role: .server, replica: replicaB, operations: serverOperations, batchesPerApply: batchesPerApply,
            appliesInFlight: appliesInFlight, random: seeded(seeds.1))
        client.chunk = driverChunk
        server.chunk = driverChunk
        client.mergesLater = mergesLater
        server.mergesLater = mergesLater
        run(&client, &server, chunk: chunk)
        #expect(client.failure == nil)
        #expect(server.failure == nil)
        let union = OperationSet(clientOperations + serverOperations)
        #expect(client.store.operations == union.operations)
        #expect(server.store.operations == union.operations)
        if let c = client.finished, let s = server.finished {
            #expect(c.operationsSent == s.operationsReceived)
            #expect(s.operationsSent == c.operationsReceived)
            #expect(c.batchesSent == s.batchesReceived)
            #expect(s.batchesSent == c.batchesReceived)
            #expect(c.bytesSent == s.bytesReceived)
            #expect(s.bytesSent == c.bytesReceived)
            #expect(c.peerVersions == OperationSet(serverOperations).versions)
            #expect(s.peerVersions == OperationSet(clientOperations).versions)
            #expect(c.lastSharedSent == s.lastSharedReceived)
            #expect(s.lastSharedSent == c.lastSharedReceived)
            #expect(client.appliedBatches.map(\.count).reduce(0, +) == c.operationsReceived + c.lastSharedReceived)
            #expect(server.appliedBatches.map(\.count).reduce(0, +) == s.operationsReceived + s.lastSharedReceived)
        }
        return (client, server)
    }

    @Test(arguments: [1, 2, 5, 64, 1000, Int.max])
    func bothSidesGetWhatTheyLacked(chunk: Int) {
        let onlyClient = operations(by: replicaA, seqs: 1...300)
        let shared = operations(by: replicaC, seqs: 1...20)
        let onlyServer = operations(by: replicaB, seqs: 1...200) + operations(by: replicaC, seqs: 21...40)
        let (client, server) = Self.sync(client: onlyClient + shared, server: onlyServer + shared, chunk: chunk)
        // Each side sent exactly what the other lacked: C's operations the client held were
        // covered by the server's vector; the server relayed C's newer ones.
        #expect(client.finished?.operationsSent == 300)
        #expect(server.finished?.operationsSent == 220)
        #expect(client.finished?.batchesSent == 1 && server.finished?.batchesSent == 1)
        #expect(server.needOperationsCalls == [OperationSet(onlyClient + shared).versions])
    }

    @Test(arguments: [1, 7, Int.max])
    func anEmptyClientGetsEverything(chunk: Int) {
        let (client, server) = Self.sync(client: [], server: operations(by: replicaB, seqs: 1...500), chunk: chunk)
        #expect(client.finished?.operationsReceived == 500)
        #expect(server.finished?.operationsReceived == 0)
        #expect(client.finished?.peerVersions == VersionVector([replicaB: 500]))
    }

    @Test(arguments: [1, Int.max])
    func anEmptyServerGetsEverything(chunk: Int) {
        let (client, server) = Self.sync(client: operations(by: replicaA, seqs: 1...500), server: [], chunk: chunk)
        #expect(server.finished?.operationsReceived == 500)
        #expect(client.finished?.operationsReceived == 0)
    }

    @Test func twoEmptyStoresFinishAtOnce() {
        let (client, server) = Self.sync(client: [], server: [])
        #expect(client.finished?.batchesSent == 0 && server.finished?.batchesSent == 0)
    }

    /// Stores that hold the same send nothing but the last operation both hold of each replica
    /// (SPEC.md §15.6), which each side holds already.
    @Test func storesThatHoldTheSameSendOnlyTheLastSharedOperations() {
        let everything = operations(by: replicaA, seqs: 1...100) + operations(by: replicaB, seqs: 1...100)
        let (client, server) = Self.sync(client: everything, server: everything)
        #expect(client.finished?.operationsSent == 0 && server.finished?.operationsSent == 0)
        #expect(client.finished?.operationsReceived == 0 && server.finished?.operationsReceived == 0)
        let lastShared: Set = [OperationID(replica: replicaA, seq: 100), OperationID(replica: replicaB, seq: 100)]
        // Each crossed at least one way (a side does not send back one it has received).
        let applied = (client.appliedBatches + server.appliedBatches).joined().map(\.id)
        #expect(Set(applied) == lastShared)
    }

    /// The last shared operations are those at the lesser seq of each replica both vectors name.
    @Test func theLastSharedOperationsAreAtTheLesserSeqOfEachReplicaBothKnow() {
        let local = VersionVector([replicaA: 10, replicaB: 3, replicaC: 0])
        let peer = VersionVector([replicaA: 4, replicaB: 7, replicaC: 5])
        #expect(PeerSession.lastShared(local, peer) == [OperationID(replica: replicaA, seq: 4), OperationID(replica: replicaB, seq: 3)])
        #expect(PeerSession.lastShared(local, VersionVector()) == [])
    }

    /// Two stores that wrote different operations under one replica id (a copied store) clash at
    /// the last shared operation even when their version vectors are equal, on both sides, and
    /// neither applies anything of the batch (SPEC.md §9.1).
    @Test func copiedStoresWithEqualVectorsClashOnBothSides() {
        let common = operations(by: replicaC, seqs: 1...11)
        let here = common + operations(by: replicaC, seqs: 12...12, text: "here")
        let there = common + operations(by: replicaC, seqs: 12...12, text: "there")
        var client = TestPeer(role: .client, replica: replicaA, operations: here, random: seeded(10))
        var server = TestPeer(role: .server, replica: replicaB, operations: there, random: seeded(20))
        run(&client, &server)
        let clash = "replica \(replicaC) has two different operations with seq 12"
        // The side that found it says so; its peer, unless it found it too, reads it in the error.
        for failure in [client.failure, server.failure] {
            let message = failure?.message ?? ""
            #expect(message.hasPrefix(clash) || message.hasPrefix("the peer ended the session: \(clash)"), "\(message)")
        }
        #expect(client.failure?.code == .local || server.failure?.code == .local)
        #expect(client.appliedBatches.isEmpty && server.appliedBatches.isEmpty)
        #expect(client.store.operations == OperationSet(here).operations)
        #expect(server.store.operations == OperationSet(there).operations)
    }

    /// Operations held above a gap are sent too (the peer's vector does not cover them), and
    /// operations the receiver holds above a gap come again, harmlessly.
    @Test func operationsAboveAGapTravel() {
        let client = operations(by: replicaC, seqs: 1...10) + operations(by: replicaC, seqs: 20...30)
        let server = operations(by: replicaC, seqs: 1...5) + operations(by: replicaC, seqs: 25...40)
        Self.sync(client: client, server: server)
    }

    /// 40,000 operations travel in 3 batches of at most 16,384; the other side's 5,000 in one.
    @Test(arguments: [(Int.max, 1000), (4096, 16_384), (1, 100_000)])
    func aLargeExchangeSpansSeveralBatches(chunk: Int, driverChunk: Int) {
        let (client, server) = Self.sync(
            client: operations(by: replicaA, seqs: 1...40_000), server: operations(by: replicaB, seqs: 1...5000),
            chunk: chunk, driverChunk: driverChunk)
        #expect(client.finished?.batchesSent == 3)
        #expect(server.appliedBatches.map(\.count) == [16_384, 16_384, 7232])
        #expect(client.appliedBatches.map(\.count) == [5000])
        // Each author's operations arrive in seq order, batch after batch.
        #expect(server.appliedBatches.joined().map(\.id.seq) == Array(1...40_000))
    }

    /// Batches that arrive together are applied together, up to `batchesPerApply` of them (fewer,
    /// larger transactions for a transport that receives faster than it commits); bytes that come
    /// a piece at a time still apply batch by batch. The peer's `done`, which follows the last
    /// batch, is acknowledged only once that batch has been applied.
    @Test(arguments: [
        (1, Int.max, [16_384, 16_384, 7232]), (2, Int.max, [32_768, 7232]), (8, Int.max, [40_000]), (8, 4096, [16_384, 16_384, 7232]),
    ])
    func batchesThatArriveTogetherAreAppliedTogether(batchesPerApply: Int, chunk: Int, applies: [Int]) {
        let (_, server) = Self.sync(
            client: operations(by: replicaA, seqs: 1...40_000), server: [], chunk: chunk, batchesPerApply: batchesPerApply)
        #expect(server.finished?.batchesReceived == 3)
        #expect(server.appliedBatches.map(\.count) == applies)
        #expect(server.appliedBatches.joined().map(\.id.seq) == Array(1...40_000))
        // The server's ack of the client's batches is the last frame it sends.
        let lastApply = server.log.lastIndex { if case .apply = $0 { true } else { false } }
        let lastSend = server.log.lastIndex { if case .send = $0 { true } else { false } }
        #expect(lastApply != nil && lastSend != nil && lastApply! < lastSend!)
    }

    /// A driver that merges on another thread, decoding ahead meanwhile (`readAhead()`), with one
    /// or two merges out at once, gets the same operations applied in the same order, however the
    /// bytes are cut, and the ack still comes after the last of them has committed.
    @Test(arguments: [1, 2], [(1, Int.max), (2, Int.max), (8, Int.max), (8, 4096), (3, 1)])
    func mergingWhileTheNextBatchesAreDecodedChangesNothing(appliesInFlight: Int, cut: (batchesPerApply: Int, chunk: Int)) {
        let (batchesPerApply, chunk) = cut
        let ops = operations(by: replicaA, seqs: 1...40_000)
        let (_, inTurn) = Self.sync(client: ops, server: [], chunk: chunk, batchesPerApply: batchesPerApply)
        let (_, later) = Self.sync(
            client: ops, server: [], chunk: chunk, batchesPerApply: batchesPerApply, mergesLater: true, appliesInFlight: appliesInFlight)
        // The same operations in the same order; the groups may be larger (more arrives while a
        // merge is under way), never past the bounds.
        let sameOrder = later.appliedBatches.joined().map(\.id) == inTurn.appliedBatches.joined().map(\.id)
        #expect(sameOrder)
        #expect(later.appliedBatches.count <= inTurn.appliedBatches.count)
        #expect(later.appliedBatches.allSatisfy { $0.count <= batchesPerApply * PeerProtocol.maxBatchOperations })
        #expect(later.finished?.operationsReceived == 40_000)
        let lastApply = later.log.lastIndex { if case .apply = $0 { true } else { false } }
        let lastSend = later.log.lastIndex { if case .send = $0 { true } else { false } }
        #expect(lastApply != nil && lastSend != nil && lastApply! < lastSend!)
    }

    /// With two merges allowed out, a complete group goes out while one is under way; a group that
    /// may still grow waits for the store to be free.
    @Test func aSecondMergeGoesOutOnlyWhenItsBatchesAreComplete() throws {
        var client = TestPeer(role: .client, replica: replicaA, operations: operations(by: replicaA, seqs: 1...40_000), random: seeded(10))
        var server = TestPeer(role: .server, replica: replicaB, batchesPerApply: 2, appliesInFlight: 2, random: seeded(20))
        server.mergesLater = true
        client.start()
        server.start()
        server.receive(client.takeOutbox())  // hello
        client.receive(server.takeOutbox())  // server hello → proof and versions
        server.receive(client.takeOutbox())  // → versions
        client.receive(server.takeOutbox())  // → batches and done
        // The client's ack of the server's nothing, its three batches, and its done.
        let frames = try frames(client.takeOutbox())
        #expect(frames.count == 1 + 3 + 1)
        server.receive(frames[0...1].flatMap { Frame.encode($0) })  // the ack, batch 1: the store is free
        #expect(server.mergesUnderWay.map(\.count) == [16_384])
        server.receive(Frame.encode(frames[2]))  // batch 2 may yet be joined by batch 3
        #expect(server.mergesUnderWay.map(\.count) == [16_384])
        server.receive(Frame.encode(frames[3]))  // batches 2 and 3: complete
        #expect(server.mergesUnderWay.map(\.count) == [16_384, 23_616])
        server.receive(Frame.encode(frames[4]))  // done: waits for both to commit
        #expect(server.finished == nil && server.outbox.isEmpty)
        pump(&client, &server)
        #expect(server.finished?.operationsReceived == 40_000)
        #expect(client.finished?.operationsSent == 40_000)
        #expect(server.appliedBatches.map(\.count) == [16_384, 23_616])
    }

    /// Both sides sending at once, each merging later: both converge.
    @Test(arguments: [1, 1000, Int.max])
    func bothSidesMergingLaterConverge(chunk: Int) {
        Self.sync(
            client: operations(by: replicaA, seqs: 1...20_000) + operations(by: replicaC, seqs: 1...50),
            server: operations(by: replicaB, seqs: 1...30_000) + operations(by: replicaC, seqs: 1...70),
            chunk: chunk, batchesPerApply: 2, mergesLater: true, appliesInFlight: 2)
    }

    /// No `.apply` holds more raw operations than the largest single batch may (4 MiB): batches of
    /// 2 MB operations go two by two, though eight may go together, whether they compress well
    /// or hardly at all.
    @Test(arguments: [true, false])
    func batchesAppliedTogetherStayWithinOneLargestBatch(compressible: Bool) {
        var generator = SplitMix64(seed: 5)
        let printable = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&()*+,-./:;<=>?@[]^_{|}~")
        var ops = operations(by: replicaA, seqs: 1...6)
        for index in ops.indices {
            // About 2 MB each: a batch of its own each.
            let text = compressible
                ? String(repeating: "note \(index) ", count: 250_000)
                : String((0..<2_000_000).map { _ in printable[Int(generator.next() % UInt64(printable.count))] })
            ops[index].action = .assign(.notes, .string(text))
        }
        let (_, server) = Self.sync(client: ops, server: [], batchesPerApply: 8)
        #expect(server.finished?.batchesReceived == 6)
        #expect(server.appliedBatches.map(\.count) == [2, 2, 2])
    }

    /// An `.apply` of several batches that the store refuses applies none of them, and the peer is
    /// told; nothing is acknowledged.
    @Test func aRefusedApplyOfSeveralBatchesAcknowledgesNone() {
        var client = TestPeer(role: .client, replica: replicaA, operations: operations(by: replicaA, seqs: 1...40_000), random: seeded(10))
        var server = TestPeer(role: .server, replica: replicaB, batchesPerApply: 8, random: seeded(20))
        server.refuseBatch = { batch in
            #expect(batch.count == 40_000)
            return ConcordError(.local, "the disk is full")
        }
        run(&client, &server)
        #expect(server.appliedBatches.isEmpty)
        #expect(server.failure?.message == "the disk is full")
        #expect(client.failure?.code == .peerError)
        #expect(client.finished == nil)
    }

    /// A batch closes at about 1 MiB raw: an operation that would take it past that starts a new
    /// one, so a batch is over 1 MiB only when it holds one large operation.
    @Test func aLargeOperationTravelsInABatchOfItsOwn() {
        var ops = operations(by: replicaA, seqs: 1...100)
        ops[49].action = .assign(.notes, .string(String(repeating: "long note ", count: 200_000)))
        let (_, server) = Self.sync(client: ops, server: [])
        #expect(server.appliedBatches.map(\.count) == [49, 1, 50])
    }

    @Test func batchesCloseAtAboutOneMebibyte() {
        let text = String(repeating: "x", count: 2000)
        let (client, server) = Self.sync(client: operations(by: replicaA, seqs: 1...2000, text: text), server: [])
        // 500 titles of 2 kB each: 1 MB, then the rest.
        #expect(client.finished!.batchesSent >= 2)
        for batch in server.appliedBatches {
            var encoder = OperationsBlock.Encoder()
            batch.forEach { encoder.append($0) }
            #expect(encoder.finish().count <= PeerProtocol.targetBatchBytes + 4096)
        }
    }

    /// An operation too large for any batch cannot be sent: the sender says so, and so does its
    /// peer, which applies nothing from that batch.
    @Test func anOperationTooLargeToSendEndsTheSession() {
        var ops = operations(by: replicaA, seqs: 1...3)
        ops[1].action = .assign(.notes, .string(String(repeating: "z", count: 4_200_000)))
        var client = TestPeer(role: .client, replica: replicaA, operations: ops, random: seeded(10))
        var server = TestPeer(role: .server, replica: replicaB, random: seeded(20))
        run(&client, &server)
        let message = "operation \(replicaA.hex):2 is too large to send to a peer (4200058 bytes)"
        #expect(client.failure == ConcordError(.operationTooLarge, message))
        #expect(server.failure == ConcordError(.peerError, "the peer ended the session: \(message)"))
        // The operation before it went out in its own batch and was applied.
        #expect(server.appliedBatches.map(\.count) == [1])
    }

    /// A session cut after the first batch keeps that batch; the next session sends only the rest.
    @Test func anInterruptedSessionResumesFromTheVersionVectors() throws {
        let all = operations(by: replicaA, seqs: 1...40_000)
        var client = TestPeer(role: .client, replica: replicaA, operations: all, random: seeded(10))
        var server = TestPeer(role: .server, replica: replicaB, random: seeded(20))
        server.start()
        client.start()
        // Deliver frame by frame until the server has applied one batch, then cut the connection,
        // in the middle of the next frame.
        while server.appliedBatches.isEmpty {
            if !server.outbox.isEmpty { client.receive(server.takeOutbox()) }
            let pending = try frames(client.takeOutbox())
            for (index, frame) in pending.enumerated() {
                server.receive(Frame.encode(frame))
                if !server.appliedBatches.isEmpty {
                    if index + 1 < pending.count { server.receive(Array(Frame.encode(pending[index + 1]).prefix(100))) }
                    break
                }
            }
        }
        server.perform(server.session.connectionClosed())
        client.perform(client.session.connectionClosed())
        #expect(server.failure == ConcordError(.truncated, "the connection ended in the middle of a frame"))
        #expect(client.failure == ConcordError(.closed, "the connection closed before the session finished"))
        #expect(server.store.operations.count == 16_384)
        #expect(server.store.versions == VersionVector([replicaA: 16_384]))

        var client2 = TestPeer(role: .client, replica: replicaA, operations: all, random: seeded(11))
        var server2 = TestPeer(role: .server, replica: replicaB, operations: Array(server.store.operations.values), random: seeded(21))
        run(&client2, &server2)
        #expect(client2.finished?.operationsSent == 40_000 - 16_384)
        #expect(server2.store.operations.count == 40_000)
    }

    /// The session's batches decode as a bundle's operations blocks: the same payload.
    @Test func sizeBoundsAreAboveTheEncodedSizes() {
        var ops = operations(by: replicaA, seqs: 1...200)
        ops.append(Op(id: OperationID(replica: replicaA, seq: 201), timestamp: Timestamp(physicalMillis: baseMillis, logical: 0),
                      record: .note(RecordID(high: 1, low: 1)), action: .assign(.other("unknownField"), .string("é"))))
        ops.append(Op(id: OperationID(replica: replicaA, seq: 202), timestamp: Timestamp(physicalMillis: baseMillis, logical: 1),
                      record: .note(RecordID(high: 1, low: 1)),
                      action: .removeTag("t", observed: (1...40).map { OperationID(replica: replicaB, seq: $0 * 1_000_000) })))
        for op in ops {
            var encoder = OperationsBlock.Encoder()
            encoder.append(op)
            #expect(encoder.estimatedBytes - 16 - 24 <= PeerSession.sizeBound(op), "\(op)")
        }
    }

    /// Random replicas (a few authors each, some with gaps, some shared) sync with random byte
    /// and driver chunks: both always finish holding the union, and each sends exactly what the
    /// other's vector did not cover.
    @Test(arguments: 0..<40)
    func randomExchangesConverge(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        func pick(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
        let authors = [replicaA, replicaB, replicaC, ReplicaID(high: 0xDDDD, low: 4)]
        func replicaOperations() -> [Op] {
            var result: [Op] = []
            for author in authors where pick(0...2) > 0 {
                let count = UInt64(pick(1...3000))
                let all = operations(by: author, seqs: 1...count)
                // Sometimes a gap: operations held above it.
                if pick(0...3) == 0, count > 10 {
                    let gapStart = pick(1...Int(count) - 5)
                    result += all.enumerated().filter { $0.offset < gapStart || $0.offset > gapStart + 3 }.map(\.element)
                } else {
                    result += all
                }
            }
            return result
        }
        let clientOperations = replicaOperations()
        let serverOperations = replicaOperations()
        let chunk = [1, 3, 100, 1500, 70_000, Int.max][pick(0...5)]
        let driverChunk = pick(1...20_000)
        let (client, server) = Self.sync(
            client: clientOperations, server: serverOperations, chunk: chunk == 1 && clientOperations.count + serverOperations.count > 6000 ? 7 : chunk,
            driverChunk: driverChunk, seeds: (seed &* 2 &+ 1, seed &* 2 &+ 2))
        let serverVersions = OperationSet(serverOperations).versions
        let clientVersions = OperationSet(clientOperations).versions
        #expect(client.finished?.operationsSent == clientOperations.filter { !serverVersions.covers($0.id) }.count)
        #expect(server.finished?.operationsSent == serverOperations.filter { !clientVersions.covers($0.id) }.count)
    }
}
