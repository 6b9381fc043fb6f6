import ConcordCore
import Foundation
import Testing
@testable import ConcordPeer

/// Live sessions (SPEC.md §15.10) at the level of the state machine: the negotiation of the
/// version, the live phase's pushes and their acknowledgements, the bound on what is pushed and
/// not acknowledged, heartbeats, and the messages that break the protocol there.
@Suite struct LiveSessionTests {
    /// A client and a server, each holding operations of its own, run until the exchange is done.
    /// A side whose highest version is below this build's is one of an older build (2: the build
    /// before predecessors; 1: the build before live sessions).
    static func pair(
        clientLive: Bool = true, serverLive: Bool = true,
        clientHighest: UInt16 = PeerProtocol.highestVersion, serverHighest: UInt16 = PeerProtocol.highestVersion,
        clientOperations: [Op] = operations(by: replicaA, seqs: 1...20), serverOperations: [Op] = operations(by: replicaB, seqs: 1...30)
    ) -> (client: TestPeer, server: TestPeer) {
        var client = TestPeer(
            role: .client, replica: replicaA, operations: clientOperations, live: clientLive, highestVersion: clientHighest, random: seeded(10))
        var server = TestPeer(
            role: .server, replica: replicaB, operations: serverOperations, live: serverLive, highestVersion: serverHighest, random: seeded(20))
        run(&client, &server)
        return (client, server)
    }

    /// The version each pair of sides settles (SPEC.md §15.10, "Negotiation"): the client's
    /// proposal (the highest it speaks of the kind it wants: 7 one-shot, 8 live; 5 or 6, 3 or 4, or 1
    /// or 2, from an older build) when the server speaks it, lowered to the one-shot version below it by a server
    /// that may keep no more live sessions (`serverLive: false`).
    @Test(arguments: [
        // This build on both sides.
        (false, UInt16(8), true, UInt16(8), UInt16(7)), (false, 8, false, 8, 7), (true, 8, true, 8, 8), (true, 8, false, 8, 7),
        // A client of the build before compaction (6), before purges (4), before predecessors (2),
        // or before live sessions (1), and a server of this one.
        (true, 6, true, 8, 6), (false, 6, true, 8, 5), (true, 6, false, 8, 5),
        (true, 4, true, 8, 4), (false, 4, true, 8, 3), (true, 4, false, 8, 3),
        (true, 2, true, 8, 2), (true, 2, false, 8, 1), (false, 2, true, 8, 1), (false, 1, true, 8, 1), (true, 1, true, 8, 1),
        // A server of an older build, and a client of this one once refused (it proposes up to
        // the version the refusal named), or of that build.
        (true, 6, true, 6, 6), (false, 6, true, 6, 5), (true, 6, false, 6, 5),
        (true, 4, true, 4, 4), (false, 4, true, 4, 3), (true, 4, false, 4, 3),
        (true, 2, true, 2, 2), (true, 2, false, 2, 1), (false, 2, true, 2, 1), (true, 1, true, 2, 1),
        (true, 1, true, 1, 1), (false, 1, true, 1, 1),
    ])
    func theVersionIsTheLowerOfWhatEachSideSpeaks(clientLive: Bool, clientHighest: UInt16, serverLive: Bool, serverHighest: UInt16, expected: UInt16) {
        let (client, server) = Self.pair(clientLive: clientLive, serverLive: serverLive, clientHighest: clientHighest, serverHighest: serverHighest)
        #expect(client.failure == nil && server.failure == nil)
        #expect(client.session.version == expected)
        #expect(server.session.version == expected)
        // Either way the exchange is whole: each holds what the other held.
        #expect(client.store.operations.count == 50)
        #expect(server.store.operations.count == 50)
        if PeerProtocol.isLive(expected) {
            #expect(client.live != nil && server.live != nil)
            #expect(client.finished == nil && server.finished == nil)
            #expect(client.session.isLive && server.session.isLive)
            #expect(!client.session.hasEnded && !server.session.hasEnded)
        } else {
            #expect(client.finished != nil && server.finished != nil)
            #expect(client.live == nil && server.live == nil)
        }
    }

    /// A server of an older build refuses the version a client of this one proposes, naming the
    /// highest it speaks (8, 6, 4, 2, or 1): the client's failure says so, so that the transport can
    /// try again once with it (SPEC.md §15.10).
    @Test(arguments: [(false, UInt16(8)), (true, 8), (false, UInt16(6)), (true, 6), (false, 4), (true, 4), (false, 2), (true, 2), (false, 1), (true, 1)])
    func aClientOfThisBuildIsRefusedByAnOlderServerNamingItsVersion(clientLive: Bool, serverHighest: UInt16) throws {
        let (client, server) = Self.pair(clientLive: clientLive, serverHighest: serverHighest)
        #expect(client.failure?.code == .versionMismatch)
        #expect((client.failure?.cause as? ConcordError.PeerVersionMismatch)?.peerVersion == serverHighest)
        #expect(client.failure?.message.contains("the peer speaks protocol version \(serverHighest) ") == true)
        #expect(server.failure?.code == .versionMismatch)
        #expect((server.failure?.cause as? ConcordError.PeerVersionMismatch)?.peerVersion == (clientLive ? 10 : 9))
        let hellos = try frames(client.sent)
        #expect(hellos.count == 1 && hellos.first?.starts(with: Handshake.header(.clientHello, version: clientLive ? 10 : 9)) == true)
        #expect(try frames(server.sent) == [Handshake.header(.refusal, version: serverHighest) + [Handshake.RefusalReason.version.rawValue]])
        #expect(client.appliedBatches.isEmpty && server.appliedBatches.isEmpty)
        #expect(client.needOperationsCalls.isEmpty && server.needOperationsCalls.isEmpty)
    }

    /// A server answers a hello of a version it does not speak with a refusal that names the
    /// highest it speaks: this build 10, the builds before it 8, 6, 4, 2 and 1.
    @Test(arguments: [(UInt16(10), UInt16(11)), (10, 0x0100), (8, 9), (8, 10), (6, 7), (6, 8), (4, 5), (4, 6), (2, 3), (2, 4), (1, 2), (1, 3), (1, 4)])
    func aServerRefusesAnUnknownVersionNamingTheHighestItSpeaks(serverHighest: UInt16, proposed: UInt16) throws {
        var server = TestPeer(role: .server, replica: replicaB, live: true, highestVersion: serverHighest, random: seeded(20))
        server.start()
        server.receive(Frame.encode(Handshake.header(.clientHello, version: proposed) + [UInt8](repeating: 1, count: 32)))
        #expect(server.failure?.code == .versionMismatch)
        #expect((server.failure?.cause as? ConcordError.PeerVersionMismatch)?.peerVersion == proposed)
        let sent = try frames(server.sent)
        #expect(sent == [Handshake.header(.refusal, version: serverHighest) + [Handshake.RefusalReason.version.rawValue]])
    }

    /// A client accepts a server hello of the version it proposed, or (from a server at its live
    /// limit) of the one-shot version below a live one; it speaks none above its proposal.
    @Test func aServerHelloAboveTheProposalIsRefused() {
        for (live, proposed) in [(false, UInt16(9)), (true, 10)] {
            var client = TestPeer(role: .client, replica: replicaA, live: live, random: seeded(10))
            client.start()
            #expect(client.session.version == proposed)
            client.receive(Frame.encode(Handshake.header(.serverHello, version: proposed + 1) + [UInt8](repeating: 1, count: 64)))
            #expect(client.failure?.code == .protocolViolation)
            #expect(client.failure?.message == "the peer broke the protocol: a server hello of version \(proposed + 1), above the \(proposed) this side proposed")
        }
    }

    /// Purges and elided operations travel in sessions of version 5 and 6; a side of a session of
    /// version 4 or lower that would send one ends it rather than send what the peer's build
    /// would refuse as malformed, or send the record's content without its purge (SPEC.md §15.10).
    @Test(arguments: [(false, UInt16(8), true), (true, 8, true), (false, 6, true), (true, 6, true), (false, 4, false), (true, 4, false), (true, 2, false)])
    func purgesTravelFromVersionFiveOn(live: Bool, clientHighest: UInt16, travels: Bool) throws {
        var fromClient = operations(by: replicaA, seqs: 1...20)
        let purged = fromClient[4].record
        for index in fromClient.indices where fromClient[index].record == purged { fromClient[index] = fromClient[index].elided }
        fromClient.append(Op(
            id: OperationID(replica: replicaA, seq: 21), timestamp: Timestamp(physicalMillis: baseMillis + 21, logical: 0), record: purged,
            action: .purge))
        let (client, server) = Self.pair(clientLive: live, clientHighest: clientHighest, clientOperations: fromClient)
        if travels {
            #expect(client.failure == nil && server.failure == nil)
            #expect(server.appliedBatches.flatMap { $0 } == fromClient)
        } else {
            let message = "the peer speaks protocol version \(client.session.version), which cannot carry the purges this store holds; upgrade Concord on the peer"
            #expect(client.failure == ConcordError(.versionMismatch, message))
            #expect(server.failure?.code == .peerError)
            #expect(server.failure?.message.hasSuffix(
                "its store holds purges, which protocol version \(client.session.version) cannot carry; upgrade Concord on this side") == true,
                "\(String(describing: server.failure))")
            #expect(!server.appliedBatches.flatMap { $0 }.contains { $0.purges })
        }
    }

    /// Assigns keep their predecessors in sessions of version 3 and 4, in the exchange and in the
    /// live phase's pushes, both ways; in sessions of version 1 and 2 each side receives them
    /// stripped (predecessors unknown), while what it sent stays as it was in its own store.
    @Test(arguments: [
        (false, UInt16(6), UInt16(5)), (true, 6, 6),  // this build on both sides
        (false, 4, 3), (true, 4, 4), (false, 1, 1), (true, 2, 2),  // a client of an older build
    ])
    func predecessorsTravelInVersionsThreeAndFourOnly(live: Bool, clientHighest: UInt16, expected: UInt16) throws {
        let fromClient = withPredecessors(operations(by: replicaA, seqs: 1...40))
        let fromServer = withPredecessors(operations(by: replicaB, seqs: 1...40))
        #expect(fromClient.filter { $0.predecessors == Predecessors.empty }.count == 5)
        #expect(fromClient.filter { $0.predecessors.map { !$0.entries.isEmpty } ?? false }.count == 15)
        var (client, server) = Self.pair(
            clientLive: live, serverLive: true, clientHighest: clientHighest, clientOperations: fromClient, serverOperations: fromServer)
        try #require(client.failure == nil && server.failure == nil)
        #expect(client.session.version == expected && server.session.version == expected)
        let keeps = PeerProtocol.carriesPredecessors(expected)

        /// What a side should hold of `sent` once it has received it.
        func received(_ sent: [Op]) -> [Op] {
            keeps ? sent : sent.map { var stripped = $0; stripped.predecessors = nil; return stripped }
        }
        #expect(server.appliedBatches.flatMap { $0 } == received(fromClient))
        #expect(client.appliedBatches.flatMap { $0 } == received(fromServer))
        #expect(server.store.operations == OperationSet(fromServer + received(fromClient)).operations)
        #expect(client.store.operations == OperationSet(fromClient + received(fromServer)).operations)

        guard PeerProtocol.isLive(expected) else { return }
        let pushedByClient = withPredecessors(operations(by: replicaA, seqs: 41...60))
        client.store.apply(pushedByClient)
        client.perform(client.session.push(operations: pushedByClient))
        let pushedByServer = withPredecessors(operations(by: replicaB, seqs: 41...60))
        server.store.apply(pushedByServer)
        server.perform(server.session.push(operations: pushedByServer))
        pump(&client, &server)
        #expect(client.failure == nil && server.failure == nil)
        #expect(server.appliedBatches.last == received(pushedByClient))
        #expect(client.appliedBatches.last == received(pushedByServer))
    }

    @Test func pushesAreMergedAndAcknowledged() {
        var (client, server) = Self.pair()
        let new = operations(by: replicaA, seqs: 21...40)
        client.store.apply(new)
        client.perform(client.session.push(operations: new))
        pump(&client, &server)
        #expect(server.store.operations.count == 70)
        #expect(server.appliedBatches.last == new)
        #expect(client.session.mayPush)
        #expect(server.session.peerHolds.contains(OperationID(replica: replicaA, seq: 40)))
        #expect(client.session.peerHolds.contains(OperationID(replica: replicaA, seq: 40)))
        // The server pushes back too.
        let fromServer = operations(by: replicaB, seqs: 31...35)
        server.store.apply(fromServer)
        server.perform(server.session.push(operations: fromServer))
        pump(&client, &server)
        #expect(client.store.operations.count == 75)
    }

    /// What the peer holds is never pushed: its own operations, what it received earlier, and what
    /// its versions covered.
    @Test func whatThePeerHoldsIsNotPushed() {
        var (client, server) = Self.pair()
        let sentBefore = client.sent.count
        client.perform(client.session.push(operations: operations(by: replicaB, seqs: 1...30) + operations(by: replicaA, seqs: 1...20)))
        #expect(client.sent.count == sentBefore)
        pump(&client, &server)
        #expect(server.appliedBatches.count == 1)  // the exchange's only
    }

    /// Past 131,072 operations pushed and not acknowledged, a side may push no more; the peer's
    /// `pushAck` opens the window again.
    @Test func unacknowledgedPushesAreBounded() {
        var (client, server) = Self.pair()
        let many = operations(by: replicaA, seqs: 21...(20 + UInt64(PeerProtocol.maxUnacknowledgedPushOperations)))
        client.perform(client.session.push(operations: many))
        #expect(!client.session.mayPush)
        pump(&client, &server)
        #expect(client.session.mayPush)
        #expect(server.store.operations.count == 50 + many.count)
    }

    @Test func aPingIsAnsweredWithAPong() throws {
        var (client, server) = Self.pair()
        let before = server.sent.count
        client.perform(client.session.ping())
        server.receive(client.takeOutbox())
        #expect(server.sent.count > before)  // the pong
        client.receive(server.takeOutbox())
        #expect(client.failure == nil && server.failure == nil)
    }

    /// A side hears its peer in the live phase by each of the live phase's messages (push,
    /// pushAck, ping, pong), and by nothing before or besides: the exchange's messages, and an
    /// `error` right after going live, do not count. A live client starts its waits again only
    /// after a session whose peer it heard so (SPEC.md §15.10, "A live client").
    @Test func thePeerIsHeardInTheLivePhaseByTheLiveMessagesOnly() {
        var (client, server) = Self.pair()
        #expect(client.session.isLive && server.session.isLive)
        #expect(!client.session.peerHeardWhileLive && !server.session.peerHeardWhileLive, "the exchange is not the live phase")
        client.perform(client.session.ping())
        server.receive(client.takeOutbox())
        #expect(server.session.peerHeardWhileLive, "by the ping")
        #expect(!client.session.peerHeardWhileLive)
        client.receive(server.takeOutbox())
        #expect(client.session.peerHeardWhileLive, "by the pong")

        var pushing = Self.pair()
        let new = operations(by: replicaA, seqs: 21...25)
        pushing.client.store.apply(new)
        pushing.client.perform(pushing.client.session.push(operations: new))
        pushing.server.receive(pushing.client.takeOutbox())
        #expect(pushing.server.session.peerHeardWhileLive, "by the push")
        #expect(!pushing.client.session.peerHeardWhileLive)
        pump(&pushing.client, &pushing.server)
        #expect(pushing.server.appliedBatches.last == new)
        #expect(pushing.client.session.peerHeardWhileLive, "by the pushAck")

        var dropping = Self.pair()
        dropping.server.perform(dropping.server.session.abort(ConcordError(.local, "no descriptor left"), tellingPeer: "it cannot follow its store's commits"))
        dropping.client.receive(dropping.server.takeOutbox())
        #expect(dropping.client.failure?.message == "the peer ended the session: it cannot follow its store's commits")
        #expect(!dropping.client.session.peerHeardWhileLive, "an error is no message of the live phase")
    }

    /// In the live phase a close is the session's normal end.
    @Test func aCloseInTheLivePhaseIsANormalEnd() {
        var (client, server) = Self.pair()
        server.perform(server.session.connectionClosed())
        #expect(server.finished != nil)
        #expect(server.failure == nil)
        #expect(client.failure == nil)
    }

    /// The live phase's messages before it, or in a session of version 1, break the protocol;
    /// so does a `pushAck` of more than was pushed.
    @Test func liveMessagesOutOfPlaceBreakTheProtocol() throws {
        var hostile = try HostileClient()
        _ = hostile.send(PeerMessage.encodeVersions(replica: replicaA, versions: VersionVector()))
        let actions = hostile.send(PeerMessage.encodeCount(.ping, 1))
        #expect(actions.last == .failed(.violation("a ping message before the live phase")))

        var live = Self.pair()
        live.server.perform(live.server.session.sendUncheckedMessage(PeerMessage.encodeCount(.pushAck, 5)))
        pump(&live.client, &live.server)
        #expect(live.client.failure == .violation("a pushAck message for 5 operations; this side pushed 0, and 0 were acknowledged"))
    }
}
