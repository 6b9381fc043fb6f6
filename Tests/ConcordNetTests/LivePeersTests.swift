import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordStore
import ConcordTestSupport
import Foundation
import Testing
@testable import ConcordNet
@testable import ConcordPeer

/// A server's live peers over loopback TCP (SPEC.md §15.10, "A server's live peers"): it pushes
/// each change to every one, keeps room for a new peer however many are live, and ends the
/// session of a peer that stops reading without holding up the others.
@Suite(.serialized) struct LivePeersTests {
    static func configuration() -> PeerTransportConfiguration {
        quickConfiguration(handshake: .seconds(10), idle: .seconds(30))
    }

    /// Waits until `condition` holds, at most `seconds`.
    static func eventually(_ seconds: Double, _ condition: () async throws -> Bool) async rethrows -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return try await condition()
    }

    @Test(.timeLimit(.minutes(3)))
    func sixtyFourLivePeersGetEveryChangeAndANewPeerIsServedMeanwhile() async throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let server = try TestServer(a, configuration: Self.configuration())
        defer { server.stop() }
        let peers = try (0..<64).map { try Node(in: directory, "peer\($0)", seed: UInt64($0) + 10, key: key) }
        let live = LockedState(0)
        let tasks = peers.map { node in
            Task {
                for try await event in PeerClient.live(store: node.store, address: server.address, configuration: Self.configuration()) {
                    if case .live = event { live.withLock { $0 += 1 } }
                }
            }
        }
        #expect(await Self.eventually(60) { live.withLock { $0 } >= 64 }, "\(live.withLock { $0 }) of 64 live")

        // 64 live peers take none of the places of sessions in their exchange.
        let newcomer = try Node(in: directory, "newcomer", seed: 99, key: key)
        try await newcomer.store.addReminder(ReminderDraft(title: "from the newcomer"))
        let started = ContinuousClock.now
        let record = try await PeerClient.sync(store: newcomer.store, address: server.address, configuration: Self.configuration())
        #expect(record.finished, "\(record.logLine)")
        print("LivePeersTests: a one-shot session beside 64 live peers took \(ContinuousClock.now - started)")

        // The newcomer's reminder, and one written on the server, reach every live peer.
        let id = try await a.store.addReminder(ReminderDraft(title: "to everyone"))
        for node in peers {
            let arrived = try await Self.eventually(30) {
                try await node.store.reminders().map(\.title).sorted() == ["from the newcomer", "to everyone"]
            }
            let titles = try await node.store.reminders().map(\.title)
            #expect(arrived, "\(node.name): \(titles)")
        }
        #expect(try await a.store.reminder(id)?.title == "to everyone")

        // Cancelled: each ends its session normally.
        for task in tasks { task.cancel() }
        for task in tasks { _ = await task.result }
        let records = server.waitForRecords(65, timeout: 30)
        #expect(records.count == 65)
        #expect(records.allSatisfy { $0.finished }, "\(records.filter { !$0.finished }.map(\.logLine))")
    }

    /// A peer that completes its exchange, goes live, and then neither reads nor writes: the
    /// server writes to it until 4 MiB wait, then nothing more, and ends its session after 15 s;
    /// a live peer beside it gets every change meanwhile.
    @Test(.timeLimit(.minutes(2)))
    func aLivePeerThatStopsReadingIsEndedAndHoldsUpNoOne() async throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let server = try TestServer(a, configuration: Self.configuration())
        defer { server.stop() }

        // The stalled peer: the handshake and the exchange by hand, then no more reading.
        let raw = try RawClient(port: server.address.port, receiveBuffer: 4_096)
        var session = PeerSession(
            role: .client, key: key, localReplica: ReplicaID(high: 1, low: 2), localVersions: VersionVector(), live: true)
        func carryOut(_ actions: [PeerAction]) -> Bool {
            var live = false
            for action in actions {
                switch action {
                case .send(let bytes): raw.send(bytes)
                case .needOperations: carryOutLater.append(contentsOf: session.finishSending())
                case .live: live = true
                default: break
                }
            }
            return live
        }
        var carryOutLater: [PeerAction] = []
        var isLive = carryOut(session.start())
        let deadline = Date().addingTimeInterval(20)
        while !isLive, Date() < deadline {
            let bytes = raw.receive(count: 1, timeout: 1)
            guard !bytes.isEmpty else { continue }
            isLive = carryOut(session.receive(bytes))
            while !carryOutLater.isEmpty {
                let later = carryOutLater
                carryOutLater = []
                if carryOut(later) { isLive = true }
            }
        }
        #expect(isLive, "the stalled peer's session went live")

        // A live peer beside it.
        let good = try Node(in: directory, "good", seed: 2, key: key)
        let wentLive = LockedState(false)
        let follower = Task {
            for try await event in PeerClient.live(store: good.store, address: server.address, configuration: Self.configuration()) {
                if case .live = event { wentLive.withLock { $0 = true } }
            }
        }
        #expect(await Self.eventually(20) { wentLive.withLock { $0 } })

        // 20 MB that compress little: far more than 4 MiB and the socket buffers hold, and more
        // than one read of 16,384 operations would take at once.
        try a.addReminders(10_000, label: "A", textLength: 2_000, random: true)
        #expect(try await Self.eventually(90) { try await good.store.reminders().count == 10_000 })

        let records = server.waitForRecords(1, timeout: 40)
        let stalled = try #require(records.first, "the stalled session was not ended")
        // It answers no ping either: silent, and not reading; whichever the server saw first.
        #expect(["the peer went silent for 15 s", "the peer stopped reading for 15 s"].contains(stalled.failure?.message ?? ""), "\(stalled.logLine)")
        // 4 MiB waiting, a push of about 1 MiB sealed as the last write completed, and what the
        // socket buffers took.
        #expect(stalled.summary.bytesSent < 12 << 20, "it was written only what the buffers took (\(stalled.summary.bytesSent) bytes)")
        follower.cancel()
        _ = await follower.result
    }

    /// The waits between attempts: 0.5 s doubling up to 30 s, each varied by at most 20%.
    @Test func theWaitsDoubleUpToThirtySecondsWithTheirJitter() {
        var backoff = ReconnectBackoff(jitter: { 0 })
        let waits = (0..<9).map { _ in backoff.next() }
        #expect(waits == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(30), .seconds(30), .seconds(30)])
        backoff.reset()
        #expect(backoff.next() == .milliseconds(500))
        var low = ReconnectBackoff(jitter: { -0.9 })  // at most 20% either way
        #expect(low.next() == .milliseconds(400))
    }

    /// A server that speaks only version 1 refuses a live client's hello of version 2: the client
    /// tries again at once with version 1, for a one-shot session.
    @Test(.timeLimit(.minutes(1)))
    func aLiveClientFallsBackToVersionOneForAnOlderServer() async throws {
        let directory = try TemporaryDirectory()
        let node = try Node(in: directory, "b", seed: 2, key: SyncKey.generate())
        nonisolated(unsafe) let raw = try RawServer()  // used by the thread below only, then released
        let port = raw.port
        let versions = LockedState<[[UInt8]]>([])
        Thread.detachNewThread {
            for _ in 0..<2 {
                guard let connection = try? raw.acceptConnection() else { return }
                let hello = connection.receiveFrames(1, timeout: 10)
                versions.withLock { $0.append(hello.count >= 14 ? Array(hello[12..<14]) : []) }
                // The refusal of a server of version 1.
                connection.send(Frame.encode(Handshake.header(.refusal, version: 1) + [Handshake.RefusalReason.version.rawValue]))
                _ = connection.receiveUntilClosed(timeout: 5)
            }
        }
        let client = Task {
            for try await _ in PeerClient.live(store: node.store, address: PeerAddress(host: "127.0.0.1", port: port), configuration: Self.configuration()) {}
        }
        #expect(await Self.eventually(20) { versions.withLock { $0.count } >= 2 })
        #expect(versions.withLock { $0 }.prefix(2) == [[0, 2], [0, 1]], "a hello of version 2, then one of version 1")
        client.cancel()
        _ = await client.result
    }

    /// Two stores with one replica id: the live client reports it and stops, rather than trying
    /// again forever.
    @Test(.timeLimit(.minutes(1)))
    func aLiveClientStopsOnAFailureThatWouldRecur() async throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let original = try await ConcordStore.create(at: directory.file("original.db"))
        try original.setSyncKey(key)
        try await original.close()
        try FileManager.default.copyItem(atPath: directory.file("original.db"), toPath: directory.file("copy.db"))
        let served = try await ConcordStore.open(at: directory.file("original.db"))
        let server = PeerServer(store: served, configuration: Self.configuration())
        let address = try await server.start(host: "127.0.0.1", port: 0)
        let copy = try await ConcordStore.open(at: directory.file("copy.db"))
        do {
            for try await _ in PeerClient.live(store: copy, address: address, configuration: Self.configuration()) {}
            Issue.record("the stream ended without the failure")
        } catch let error as ConcordError {
            #expect(error.code == .sameReplica, "\(error)")
        }
        await server.stop()
    }
}

