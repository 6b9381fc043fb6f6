import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordPeer
import ConcordStore
import Foundation
import Testing

@testable import ConcordNet

/// Peer sessions over real TCP sockets on loopback (SPEC.md §15, §15.9).
@Suite struct LoopbackTests {
    @Test func twoStoresConverge() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let b = try Node(in: directory, "b", seed: 2, key: key)
        try populate(a.store, clock: a.clock, label: "A")
        try populate(b.store, clock: b.clock, label: "B")
        let opsA = a.operationCount
        let opsB = b.operationCount
        let server = try TestServer(a)
        defer { server.stop() }

        let record = try b.sync(with: server.address)
        #expect(record.finished, "\(record.logLine)")
        #expect(record.summary.operationsReceived == opsA)
        #expect(record.summary.operationsSent == opsB)
        #expect(record.newOperations == opsA)
        #expect(record.summary.peerReplica == a.store.replicaID)
        #expect(try a.dump() == (try b.dump()))
        #expect(try a.store.versionVector() == (try b.store.versionVector()))

        let logged = server.waitForRecords(1)
        #expect(logged.count == 1)
        #expect(logged.first?.finished == true)
        #expect(logged.first?.summary.operationsReceived == opsB)
        #expect(logged.first?.summary.operationsSent == opsA)
        #expect(logged.first?.summary.bytesReceived == record.summary.bytesSent)
        #expect(logged.first?.summary.bytesSent == record.summary.bytesReceived)
        #expect(logged.first?.logLine.hasPrefix("peer 127.0.0.1:") == true)

        // Nothing new: a second session moves nothing.
        let again = try b.sync(with: server.address)
        #expect(again.finished)
        #expect(again.summary.operationsReceived == 0 && again.summary.operationsSent == 0)
    }

    private func populate(_ store: ConcordStore, clock: ManualClock, label: String) throws {
        let id = try store.addReminder(ReminderDraft(title: "Call \(label)", notes: "about \(label)", tags: ["work"]))
        clock.advance(1_000)
        try store.completeReminder(id)
        try store.addNote(NoteDraft(title: "Ideas \(label)", body: "body", tags: ["misc"], isPinned: true))
        let shared = RecordID(high: 7, low: 7)
        clock.advance(1_000)
        _ = try? store.perform(.createReminder(ReminderDraft(title: "shared by \(label)")), on: .reminder(shared))
        try store.tag(.reminder(shared), add: [label])
    }

    @Test func threeStoresConvergeBySocketAndFolder() throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("shared")
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let b = try Node(in: directory, "b", seed: 2, key: key)
        let c = try Node(in: directory, "c", seed: 3, key: key)
        for (node, label) in [(a, "A"), (b, "B"), (c, "C")] { try populate(node.store, clock: node.clock, label: label) }
        let server = try TestServer(a)
        defer { server.stop() }

        // A–B by socket, B–C by folder, both ways, until nothing moves.
        #expect(try b.sync(with: server.address).finished)
        try b.store.sync(folder: folder)
        try c.store.sync(folder: folder)
        try b.store.sync(folder: folder)
        #expect(try b.sync(with: server.address).finished)
        #expect(try a.dump() == (try b.dump()))
        #expect(try b.dump() == (try c.dump()))

        // A change on C reaches A through B; one on A reaches C.
        c.clock.advance(60_000)
        try c.store.addNote(NoteDraft(title: "from C"))
        a.clock.advance(60_000)
        try a.store.addNote(NoteDraft(title: "from A"))
        try c.store.sync(folder: folder)
        try b.store.sync(folder: folder)
        #expect(try b.sync(with: server.address).finished)
        try b.store.sync(folder: folder)
        try c.store.sync(folder: folder)
        #expect(try a.dump() == (try c.dump()))
        #expect(try a.store.notes().contains { $0.title == "from C" })
        #expect(try c.store.notes().contains { $0.title == "from A" })
    }

    /// Killed after its first applies, whether each applies one batch or two that arrived together.
    @Test(arguments: [(batchesPerApply: 1, dropAfter: 2), (batchesPerApply: 2, dropAfter: 1)])
    func aSessionKilledMidTransferResumesWithoutResending(batchesPerApply: Int, dropAfter: Int) throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let b = try Node(in: directory, "b", seed: 2, key: key)
        // Enough for several batches (16,384 operations at most each).
        try a.addReminders(9_000, label: "A")
        let total = a.operationCount
        #expect(total > 3 * PeerProtocol.maxBatchOperations)
        let server = try TestServer(a)
        defer { server.stop() }

        var dropping = quickConfiguration(idle: .seconds(10))
        dropping.batchesPerApply = batchesPerApply
        dropping.dropConnectionAfterApplies = dropAfter
        let cut = try b.sync(with: server.address, configuration: dropping)
        #expect(!cut.finished)
        let kept = b.operationCount
        #expect(kept == cut.summary.operationsReceived, "every batch fully received is kept")
        #expect(kept > 0 && kept < total)
        #expect(try b.store.verify().isSound)
        // The server sees the connection go and keeps serving.
        let logged = server.waitForRecords(1)
        #expect(logged.first?.failure?.code == .closed, "\(logged.map(\.logLine))")

        let resumed = try b.sync(with: server.address)
        #expect(resumed.finished, "\(resumed.logLine)")
        #expect(resumed.summary.operationsReceived == total - kept, "nothing that arrived is sent again")
        #expect(server.waitForRecords(2).last?.summary.operationsSent == total - kept)
        #expect(try a.dump() == (try b.dump()))
    }

    /// Two stores that hold different operations under one replica id (from two copies of a
    /// store, SPEC.md §9.1) clash where one meets the other's operation: that side applies
    /// nothing of that merge nor of any after it, though the next may already be prepared and
    /// waiting when the clash is found. Neither store takes the other copy's operations; what the
    /// other side merged meanwhile is the detecting side's own, valid operations.
    @Test func aClashLetsNeitherSideTakeTheOtherCopysOperations() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let original = try Node(in: directory, "original", seed: 9)
        let copy = try Node(in: directory, "copy", seed: 9)  // the same replica id
        try original.addReminders(1, label: "original")
        try copy.addReminders(1, label: "copy")
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let b = try Node(in: directory, "b", seed: 2, key: key)
        try a.store.merge(try original.store.allOperations())
        try b.store.merge(try copy.store.allOperations())
        try b.addReminders(12_000, label: "B")  // three batches or more after the clashing one
        var configuration = quickConfiguration(idle: .seconds(10))
        configuration.batchesPerApply = 1
        let server = try TestServer(a, configuration: configuration)
        defer { server.stop() }

        // Each side finds the clash in what the other sent, or hears of it from the other first.
        let record = try b.sync(with: server.address)
        #expect([.clash, .peerError].contains(record.failure?.code), "\(record.logLine)")
        let logged = try #require(server.waitForRecords(1).first)
        #expect([.clash, .peerError].contains(logged.failure?.code), "\(logged.logLine)")
        let shared = original.store.replicaID
        #expect(try a.store.allOperations().filter { $0.id.replica == shared } == (try original.store.allOperations()))
        #expect(try b.store.allOperations().filter { $0.id.replica == shared } == (try copy.store.allOperations()))
        #expect(try a.store.allOperations().allSatisfy { $0.id.replica == shared || $0.id.replica == b.store.replicaID || $0.id.replica == a.store.replicaID })
        #expect(try a.store.verify().isSound)
        #expect(try b.store.verify().isSound)
    }

    @Test func manyClientsAgainstOneServerAtOnce() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let hub = try Node(in: directory, "hub", seed: 100, key: key)
        try hub.addReminders(300, label: "hub")
        let clients = try (0..<10).map { index in try Node(in: directory, "c\(index)", seed: UInt64(index + 1), key: key) }
        for (index, client) in clients.enumerated() { try client.addReminders(50 + index * 10, label: "c\(index)") }
        let server = try TestServer(hub)
        defer { server.stop() }

        let results = RecordBox()
        let failures = FailureBox()
        DispatchQueue.concurrentPerform(iterations: clients.count) { index in
            do { results.append(try clients[index].sync(with: server.address)) } catch { failures.add("\(error)") }
        }
        #expect(failures.all.isEmpty)
        #expect(results.all.count == clients.count)
        #expect(results.all.allSatisfy { $0.finished }, "\(results.all.map(\.logLine))")
        #expect(server.waitForRecords(clients.count).allSatisfy { $0.finished })
        // A second round at once brings every client everything.
        DispatchQueue.concurrentPerform(iterations: clients.count) { index in
            do { results.append(try clients[index].sync(with: server.address)) } catch { failures.add("\(error)") }
        }
        #expect(failures.all.isEmpty)
        let expected = try hub.dump()
        for client in clients { #expect(try client.dump() == expected, "\(client.name)") }
    }

    @Test func aWrongKeyClientIsRejectedWhileAGoodOneIsServed() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        try a.addReminders(2_000, label: "A")
        let good = try Node(in: directory, "good", seed: 2, key: key)
        let wrongKey = SyncKey.generate()
        let bad = try Node(in: directory, "bad", seed: 3, key: wrongKey)
        try bad.addReminders(10, label: "bad")
        let badOperations = bad.operationCount
        let server = try TestServer(a)
        defer { server.stop() }

        let results = RecordBox()
        DispatchQueue.concurrentPerform(iterations: 2) { index in
            if let record = try? (index == 0 ? good : bad).sync(with: server.address) {
                results.append(record)
            }
        }
        let badRecord = try #require(results.all.first { $0.failure != nil })
        #expect(badRecord.failure?.code == .wrongKey)
        #expect(badRecord.failure?.message == "the peer does not hold this store's sync key")
        #expect(results.all.contains { $0.finished })
        #expect(try good.dump() == (try a.dump()))
        #expect(bad.operationCount == badOperations, "the wrong-key client received nothing")
        let logged = server.waitForRecords(2)
        #expect(logged.contains { $0.failure?.message == "the peer does not hold this store's sync key" }, "\(logged.map(\.logLine))")
        #expect(!(try a.store.allOperations()).contains { $0.id.replica == bad.store.replicaID })
    }

    @Test func garbageSilenceAndOversizedFramesEndOnlyTheirOwnSessions() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        try a.addReminders(100, label: "A")
        let server = try TestServer(a, configuration: quickConfiguration(handshake: .milliseconds(300), idle: .seconds(1)))
        defer { server.stop() }

        // A silent client: the handshake timeout ends it.
        let silent = try RawClient(port: server.address.port)
        // Garbage: an HTTP request. Its first four bytes read as a length far over 256.
        let http = try RawClient(port: server.address.port)
        http.send(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        // A frame of 257 bytes during the handshake; and half a frame, then silence.
        let oversized = try RawClient(port: server.address.port)
        oversized.send([0, 0, 1, 1] + [UInt8](repeating: 0x43, count: 257))
        let half = try RawClient(port: server.address.port)
        half.send([0, 0, 0, 43] + PeerProtocol.magic)

        // Meanwhile a good client is served.
        let good = try Node(in: directory, "good", seed: 2, key: key)
        #expect(try good.sync(with: server.address).finished)

        for (client, name) in [(silent, "silent"), (http, "http"), (oversized, "oversized"), (half, "half")] {
            let (bytes, closed) = client.receiveUntilClosed(timeout: 5)
            #expect(closed, "\(name): the server closes the connection")
            #expect(bytes.isEmpty, "\(name): and sends nothing, in clear or not")
        }
        let logged = server.waitForRecords(5)
        let reasons = logged.compactMap(\.failure?.message)
        #expect(reasons.filter { $0 == "the handshake took over 300 ms" }.count == 2, "\(reasons)")
        #expect(reasons.filter { $0 == "the peer does not speak the Concord peer protocol" }.count == 2, "\(reasons)")
        #expect(logged.filter(\.finished).count == 1)
        // And the server still serves.
        let later = try Node(in: directory, "later", seed: 3, key: key)
        #expect(try later.sync(with: server.address).finished)
    }

    @Test func aPeerThatGoesSilentAfterTheHandshakeHitsTheIdleTimeout() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        try a.addReminders(20, label: "A")
        let server = try TestServer(a, configuration: quickConfiguration(handshake: .seconds(5), idle: .milliseconds(500)))
        defer { server.stop() }

        // A client that holds the key, completes the handshake, then neither reads nor writes.
        let raw = try RawClient(port: server.address.port)
        var session = PeerSession(role: .client, key: key, localReplica: ReplicaID(high: 1, low: 2), localVersions: VersionVector())
        for case .send(let bytes) in session.start() { raw.send(bytes) }
        let hello = raw.receive(count: 4 + 75, timeout: 5)
        for case .send(let bytes) in session.receive(hello) { raw.send(bytes) }  // proof and versions
        #expect(session.isHandshakeComplete)

        let started = Date()
        let (bytes, closed) = raw.receiveUntilClosed(timeout: 5)
        #expect(closed)
        #expect(Date().timeIntervalSince(started) < 4)
        // What the server sent: its versions, maybe batches, then an error naming the timeout.
        let actions = session.receiveApplying(bytes)
        let failure = actions.compactMap { action -> ConcordError? in if case .failed(let failure) = action { failure } else { nil } }.first
        #expect(failure?.message == "the peer ended the session: the session was idle for 500 ms", "\(actions)")
        #expect(server.waitForRecords(1).first?.failure?.message == "the session was idle for 500 ms")
    }

    @Test func aFullServerClosesNewConnectionsAtOnceAndServesAgainLater() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        var configuration = quickConfiguration(handshake: .seconds(1), idle: .seconds(5))
        configuration.maxSessions = 2
        let server = try TestServer(a, configuration: configuration)
        defer { server.stop() }
        // Two silent clients take both places until the handshake timeout frees them.
        let first = try RawClient(port: server.address.port)
        let second = try RawClient(port: server.address.port)
        Thread.sleep(forTimeInterval: 0.2)
        let b = try Node(in: directory, "b", seed: 2, key: key)
        let refused = try b.sync(with: server.address)
        #expect(!refused.finished)
        #expect(server.waitForRecords(1).first?.failure?.message == "refused: 2 sessions are under way")
        for client in [first, second] { #expect(client.receiveUntilClosed(timeout: 5).closed) }
        #expect(try b.sync(with: server.address).finished, "served once the places are free")
    }

    @Test func aPeerThatStopsReadingHoldsUpNoOneAndIsCutOff() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        // Several MB of batches that compress little: more than the socket buffers and the
        // server's outbound allowance hold, so the stalled session's writes stop completing.
        try a.addReminders(10_000, label: "A", textLength: 2_000, random: true)
        // An idle timeout longer than the good client's final apply of 20 MB of notes takes in a
        // debug build beside the whole test suite (over 10 s seen): it sends nothing meanwhile,
        // and its ack follows the apply (SPEC.md §15.6 step 5).
        var configuration = quickConfiguration(handshake: .seconds(5), idle: .seconds(30))
        configuration.lingerTimeout = .milliseconds(300)
        // Well under the stream, with the largest socket buffers Linux gives (4 MiB) on top.
        configuration.outboundBufferBytes = 1 << 20
        let server = try TestServer(a, configuration: configuration)
        defer { server.stop() }

        // A client that holds the key, completes the handshake, then reads nothing.
        let raw = try RawClient(port: server.address.port, receiveBuffer: 4_096)
        var session = PeerSession(role: .client, key: key, localReplica: ReplicaID(high: 1, low: 2), localVersions: VersionVector())
        for case .send(let bytes) in session.start() { raw.send(bytes) }
        for case .send(let bytes) in session.receive(raw.receive(count: 79, timeout: 5)) { raw.send(bytes) }

        // A good client is served meanwhile, in full.
        let good = try Node(in: directory, "good", seed: 2, key: key)
        let served = try good.sync(with: server.address, configuration: quickConfiguration(idle: .seconds(60)))
        #expect(served.finished, "\(served.logLine)")
        #expect(try good.dump() == (try a.dump()))

        // The stalled one is ended by the idle timeout and cut off, though it never read.
        let logged = server.waitForRecords(2, timeout: 60)
        #expect(logged.filter(\.finished).count == 1, "the good session finished on the server too: \(logged.map(\.logLine))")
        let stalled = try #require(logged.first { !$0.finished }, "\(logged.map(\.logLine))")
        #expect(stalled.failure?.message == "the session was idle for 30 s")
        #expect(stalled.summary.bytesSent < served.summary.bytesReceived, "it was sent only what the buffers took, not the whole stream (\(stalled.summary.bytesSent) of \(served.summary.bytesReceived) bytes)")
        #expect(raw.receiveUntilClosed(timeout: 20).closed)
    }

    /// A hello of a version the server does not speak gets a refusal naming the highest it speaks:
    /// 4 from this build, 2 from a server configured as one of the build before it.
    @Test(arguments: [(UInt16(4), UInt16(5)), (2, 3), (2, 4)])
    func aClientOfAnotherVersionIsToldWhichVersionTheServerSpeaks(serverHighest: UInt16, proposed: UInt16) throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        var configuration = quickConfiguration(idle: .seconds(10))
        configuration.highestVersion = serverHighest
        let server = try TestServer(a, configuration: configuration)
        defer { server.stop() }
        let raw = try RawClient(port: server.address.port)
        raw.send([0, 0, 0, 43] + PeerProtocol.magic + [0, UInt8(proposed), 1] + [UInt8](repeating: 9, count: 32))
        let (bytes, closed) = raw.receiveUntilClosed(timeout: 5)
        #expect(closed)
        #expect(bytes == [0, 0, 0, 12] + PeerProtocol.magic + [0, UInt8(serverHighest), 4, 1], "a refusal of reason 1 with the highest version the server speaks")
        let failure = server.waitForRecords(1).first?.failure
        #expect(failure?.code == .versionMismatch)
        if serverHighest == PeerProtocol.highestVersion {
            #expect(failure?.message == "the peer speaks protocol version \(proposed) and this build speaks versions 1 to 4; upgrade Concord on this side")
        }
    }

    /// A client of this build and a server of an older one (configured to speak up to 2, the build
    /// before predecessors, or 1, the build before live sessions): the server refuses the client's
    /// version 3, naming its own; the client tries again at once with it and the sync succeeds, in
    /// a session of version 1, whose assigns travel without their predecessors.
    @Test(arguments: [UInt16(2), 1])
    func aClientSyncsWithAServerOfAnOlderBuildThroughOneRetry(serverHighest: UInt16) async throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let b = try Node(in: directory, "b", seed: 2, key: key)
        try populate(a.store, clock: a.clock, label: "A")
        try populate(b.store, clock: b.clock, label: "B")
        let opsA = a.operationCount
        let opsB = b.operationCount
        var old = quickConfiguration(idle: .seconds(10))
        old.highestVersion = serverHighest
        let server = try TestServer(a, configuration: old)
        defer { server.stop() }

        let configuration = quickConfiguration(idle: .seconds(10))
        #expect(configuration.highestVersion == PeerProtocol.highestVersion)
        let record = try await PeerClient.sync(store: b.store, address: server.address, configuration: configuration)
        #expect(record.finished, "\(record.logLine)")
        #expect(record.summary.operationsReceived == opsA && record.summary.operationsSent == opsB)
        #expect(try a.dump() == (try b.dump()))
        // The server logged the refused attempt, then the session.
        let logged = server.waitForRecords(2)
        #expect(logged.count == 2)
        #expect(logged.first?.failure?.code == .versionMismatch)
        #expect((logged.first?.failure?.cause as? ConcordError.PeerVersionMismatch)?.peerVersion == 9)
        #expect(logged.last?.finished == true)
        try Self.expectPredecessors(of: a.store, in: b.store, kept: false)
        try Self.expectPredecessors(of: b.store, in: a.store, kept: false)

        // The fallback lasted that sync: the next proposes 9 again, and is refused again first
        // (here through the blocking `sync`).
        let again = try b.sync(with: server.address, configuration: configuration)
        #expect(again.finished, "\(again.logLine)")
        let relogged = server.waitForRecords(4)
        #expect(relogged.count == 4)
        #expect((relogged.dropLast().last?.failure?.cause as? ConcordError.PeerVersionMismatch)?.peerVersion == 9)
    }

    /// Between two sides of this build, a one-shot session is of version 5: assigns arrive with
    /// their predecessors.
    @Test func predecessorsTravelBetweenTwoSidesOfThisBuild() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let b = try Node(in: directory, "b", seed: 2, key: key)
        try populate(a.store, clock: a.clock, label: "A")
        try populate(b.store, clock: b.clock, label: "B")
        let server = try TestServer(a)
        defer { server.stop() }
        let record = try b.sync(with: server.address)
        #expect(record.finished, "\(record.logLine)")
        #expect(server.waitForRecords(1).count == 1, "no refused attempt")
        try Self.expectPredecessors(of: a.store, in: b.store, kept: true)
        try Self.expectPredecessors(of: b.store, in: a.store, kept: true)
    }

    /// Checks that `receiver` holds every operation `author` wrote, with its predecessors when
    /// `kept`, and with none (unknown) otherwise; and that `author` wrote assigns that carry them.
    static func expectPredecessors(of author: ConcordStore, in receiver: ConcordStore, kept: Bool) throws {
        var written: [Op] = []
        try author.forEachOperation { if $0.id.replica == author.replicaID { written.append($0) } }
        #expect(written.contains { $0.predecessors != nil }, "the author's assigns carry predecessors")
        for operation in written {
            let held = try #require(try receiver.operation(operation.id))
            var expected = operation
            if !kept { expected.predecessors = nil }
            #expect(held == expected, "\(operation.id)")
        }
    }

    @Test func aRefusedConnectionIsAOneLineError() throws {
        // A port nothing listens on: bind one, note it, close it.
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let server = try TestServer(a)
        let port = server.address.port
        server.stop()
        do {
            _ = try a.sync(with: PeerAddress(host: "127.0.0.1", port: port))
            Issue.record("connected to a closed port")
        } catch let failure as ConcordError {
            #expect(failure.message == "cannot connect to 127.0.0.1:\(port): connection refused")
        }
    }

    @Test func aServerThatStopsTellsItsPeers() throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let server = try TestServer(a, configuration: quickConfiguration(handshake: .seconds(5), idle: .seconds(30)))
        let raw = try RawClient(port: server.address.port)
        var session = PeerSession(role: .client, key: key, localReplica: ReplicaID(high: 1, low: 2), localVersions: VersionVector())
        for case .send(let bytes) in session.start() { raw.send(bytes) }
        for case .send(let bytes) in session.receive(raw.receive(count: 79, timeout: 5)) { raw.send(bytes) }
        Thread.sleep(forTimeInterval: 0.2)
        server.stop()
        let (bytes, closed) = raw.receiveUntilClosed(timeout: 5)
        #expect(closed)
        let failure = session.receiveApplying(bytes).compactMap { action -> ConcordError? in if case .failed(let failure) = action { failure } else { nil } }.first
        #expect(failure?.message == "the peer ended the session: the server is shutting down")
    }
}

final class FailureBox: @unchecked Sendable {
    private let lock = NSLock()
    private var failures: [String] = []
    func add(_ failure: String) { lock.withLock { failures.append(failure) } }
    var all: [String] { lock.withLock { failures } }
}
