import ConcordCore
import ConcordKeys
import ConcordPeer
import Foundation
import NIOCore
import Testing

@testable import ConcordNet

/// The handshake and idle timeouts (SPEC.md §15.7) to the millisecond, on a clock the tests move
/// by hand: a session is ended when the timeout has passed since its last byte, not at the next
/// tick of a periodic check (which used to end an idle session after 75 s rather than 60).
@Suite struct TimeoutTests {
    /// The live defaults, on a hand-moved clock; a short linger, so that ended sessions close soon.
    static func configuration(_ clock: ManualPeerClock) -> PeerTransportConfiguration {
        var configuration = PeerTransportConfiguration()
        configuration.clock = clock
        configuration.lingerTimeout = .milliseconds(300)
        return configuration
    }

    static let idleFailure = "the session was idle for 60 s"

    /// A raw client that completes the handshake with `server` and reads the server's versions and
    /// done (an empty store sends nothing else). Returns the server's done, not yet given to the
    /// session, and the client's own done, not yet sent.
    static func handshake(with server: TestServer, key: SyncKey) throws
        -> (raw: RawClient, session: PeerSession, serverDone: [UInt8], clientDone: [UInt8])
    {
        let raw = try RawClient(port: server.address.port)
        var session = PeerSession(role: .client, key: key, localReplica: ReplicaID(high: 1, low: 2), localVersions: VersionVector())
        for case .send(let bytes) in session.start() { raw.send(bytes) }
        for case .send(let bytes) in session.receive(raw.receiveFrames(1, timeout: 5)) { raw.send(bytes) }  // proof, versions
        #expect(session.isHandshakeComplete)
        let versions = raw.receiveFrames(1, timeout: 5)
        #expect(session.receive(versions).first == .needOperations(since: VersionVector(), lastShared: []))
        let serverDone = raw.receiveFrames(1, timeout: 5)
        #expect(!serverDone.isEmpty)
        return (raw, session, serverDone, session.finishSending().sentBytes)
    }

    /// Waits a moment and checks that the server has not ended its session.
    static func expectStillRunning(_ server: TestServer, sourceLocation: SourceLocation = #_sourceLocation) {
        Thread.sleep(forTimeInterval: 0.3)
        #expect(server.records.isEmpty && server.server.activeSessions == 1, "\(server.records.map(\.logLine))", sourceLocation: sourceLocation)
    }

    /// Moves the clock to 1 ms short of `remaining`, checks the session is still running, then
    /// the last millisecond, and checks the server ended it then, `total` seconds after it began.
    static func expectEnded(
        after remaining: Duration, server: TestServer, clock: ManualPeerClock, failure: String, total: Double,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        clock.advance(remaining - .milliseconds(1))
        expectStillRunning(server, sourceLocation: sourceLocation)
        clock.advance(.milliseconds(1))
        let record = try #require(server.waitForRecords(1).first, sourceLocation: sourceLocation)
        #expect(record.failure == ConcordError(.timedOut, failure), sourceLocation: sourceLocation)
        #expect(abs(record.duration.seconds - total) < 0.001, "\(record.duration)", sourceLocation: sourceLocation)
    }

    @Test func theServerEndsAStalledClientAtSixtySeconds() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let clock = ManualPeerClock()
        let server = try TestServer(a, configuration: Self.configuration(clock))
        defer { server.stop() }
        var (raw, session, serverDone, _) = try Self.handshake(with: server, key: key)

        try Self.expectEnded(after: .seconds(60), server: server, clock: clock, failure: Self.idleFailure, total: 60)
        // The client reads why.
        let (bytes, closed) = raw.receiveUntilClosed(timeout: 5)
        #expect(closed)
        #expect(session.receiveApplying(serverDone + bytes).last == .failed(ConcordError(.peerError, "the peer ended the session: \(Self.idleFailure)")))
    }

    /// Activity moves the deadline: bytes received and sent 30 s in give the session until 90 s.
    @Test func activityPutsTheIdleDeadlineBack() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let clock = ManualPeerClock()
        let server = try TestServer(a, configuration: Self.configuration(clock))
        defer { server.stop() }
        let (raw, _, _, clientDone) = try Self.handshake(with: server, key: key)

        // 30 s in, the client sends its done (and never its ack of the server's done, so the
        // session does not finish); the server answers with its ack, at once.
        clock.advance(.seconds(30))
        raw.send(clientDone)
        #expect(!raw.receiveFrames(1, timeout: 5).isEmpty)
        try Self.expectEnded(after: .seconds(60), server: server, clock: clock, failure: Self.idleFailure, total: 90)
    }

    @Test func aClientEndsAStalledServerAtSixtySeconds() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let b = try Node(in: directory, "b", seed: 2, key: key)
        let listener = try RawServer()
        let clock = ManualPeerClock()
        let result = RecordBox()
        let configuration = Self.configuration(clock)
        let address = PeerAddress(host: "127.0.0.1", port: listener.port)
        Thread.detachNewThread {
            if let record = try? b.sync(with: address, configuration: configuration) {
                result.append(record)
            }
        }
        // A server that answers the hello, reads the client's proof and versions, and then stalls.
        let raw = try listener.acceptConnection()
        var session = PeerSession(role: .server, key: key, localReplica: ReplicaID(high: 3, low: 4), localVersions: VersionVector())
        _ = session.start()
        for case .send(let bytes) in session.receive(raw.receiveFrames(1, timeout: 5)) { raw.send(bytes) }  // hello
        let fromClient = raw.receiveFrames(2, timeout: 5)  // proof, versions
        _ = session.receive(fromClient)  // its own versions are never sent: it stalls
        #expect(session.isHandshakeComplete)

        clock.advance(.milliseconds(59_999))
        Thread.sleep(forTimeInterval: 0.3)
        #expect(result.all.isEmpty)
        clock.advance(.milliseconds(1))
        let deadline = Date().addingTimeInterval(5)
        while result.all.isEmpty, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        let record = try #require(result.all.first)
        #expect(record.failure == ConcordError(.timedOut, Self.idleFailure))
        #expect(abs(record.duration.seconds - 60) < 0.001, "\(record.duration)")
        // The server reads why.
        let (bytes, _) = raw.receiveUntilClosed(timeout: 5)
        #expect(session.receiveApplying(bytes).last == .failed(ConcordError(.peerError, "the peer ended the session: \(Self.idleFailure)")))
    }

    @Test func aSilentConnectionIsEndedAtTenSeconds() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let clock = ManualPeerClock()
        let server = try TestServer(a, configuration: Self.configuration(clock))
        defer { server.stop() }
        let raw = try RawClient(port: server.address.port)
        let deadline = Date().addingTimeInterval(5)
        while server.server.activeSessions == 0, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }

        try Self.expectEnded(after: .seconds(10), server: server, clock: clock, failure: "the handshake took over 10 s", total: 10)
        let (bytes, closed) = raw.receiveUntilClosed(timeout: 5)
        #expect(bytes.isEmpty && closed, "nothing is sent to a peer that has not completed the handshake")
    }
}
