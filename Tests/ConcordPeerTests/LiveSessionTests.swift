import ConcordCore
import Foundation
import Testing
@testable import ConcordPeer

/// Live sessions (SPEC.md §15.10) at the level of the state machine: the negotiation of the
/// version, the live phase's pushes and their acknowledgements, the bound on what is pushed and
/// not acknowledged, heartbeats, and the messages that break the protocol there.
@Suite struct LiveSessionTests {
    /// A client and a server, each holding operations of its own, run until the exchange is done.
    static func pair(clientLive: Bool = true, serverLive: Bool = true) -> (client: TestPeer, server: TestPeer) {
        var client = TestPeer(
            role: .client, replica: replicaA, operations: operations(by: replicaA, seqs: 1...20), live: clientLive, random: seeded(10))
        var server = TestPeer(
            role: .server, replica: replicaB, operations: operations(by: replicaB, seqs: 1...30), live: serverLive, random: seeded(20))
        run(&client, &server)
        return (client, server)
    }

    @Test(arguments: [(true, true, 2), (true, false, 1), (false, true, 1), (false, false, 1)])
    func theVersionIsTheLowerOfWhatEachSideSpeaks(clientLive: Bool, serverLive: Bool, expected: Int) {
        let (client, server) = Self.pair(clientLive: clientLive, serverLive: serverLive)
        #expect(client.session.version == UInt16(expected))
        #expect(server.session.version == UInt16(expected))
        // Either way the exchange is whole: each holds what the other held.
        #expect(client.store.operations.count == 50)
        #expect(server.store.operations.count == 50)
        if expected == 2 {
            #expect(client.live != nil && server.live != nil)
            #expect(client.finished == nil && server.finished == nil)
            #expect(client.session.isLive && server.session.isLive)
            #expect(!client.session.hasEnded && !server.session.hasEnded)
        } else {
            #expect(client.finished != nil && server.finished != nil)
            #expect(client.live == nil && server.live == nil)
        }
    }

    /// A server that speaks only version 1 refuses a hello of version 2, naming version 1: the
    /// client's failure says so, so that a live client can try again with version 1.
    @Test func aRefusalOfVersionTwoByAnOlderServerNamesVersionOne() {
        var client = TestPeer(role: .client, replica: replicaA, live: true, random: seeded(10))
        client.start()
        let refusal = Frame.encode(Handshake.header(.refusal, version: 1) + [Handshake.RefusalReason.version.rawValue])
        client.receive(refusal)
        #expect(client.failure?.code == .versionMismatch)
        #expect(client.failure?.message.contains("version 1") == true)
    }

    /// A server answers a hello of a version it does not speak with a refusal that names the
    /// highest it speaks.
    @Test func aServerRefusesAnUnknownVersionNamingTheHighestItSpeaks() throws {
        var server = TestPeer(role: .server, replica: replicaB, live: true, random: seeded(20))
        server.start()
        server.receive(Frame.encode(Handshake.header(.clientHello, version: 3) + [UInt8](repeating: 1, count: 32)))
        #expect(server.failure?.code == .versionMismatch)
        let sent = try frames(server.sent)
        #expect(sent == [Handshake.header(.refusal, version: 2) + [Handshake.RefusalReason.version.rawValue]])
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
