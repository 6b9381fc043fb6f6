import ConcordCore
import ConcordKeys
import ConcordNet
import ConcordPeer
import ConcordStore
import ConcordTestSupport
import Foundation
import Testing

/// A compacted store over TCP (SPEC.md §5.8, §15.10): sessions of version 7 and 8 carry its
/// compacted seqs, once every operation is sent, so that a peer holds every seq it holds; an older
/// peer receives the operations alone, and converges all the same.
@Suite struct CompactionPeerTests {
    /// A node with reminders edited several times, then compacted.
    static func compactedNode(_ directory: TemporaryDirectory, key: SyncKey) throws -> Node {
        let node = try Node(in: directory, "a", seed: 1, key: key)
        // No remove is stable, so none is dropped, and a server of an older build can serve it.
        try node.hearOnceFromASilentReplica()
        for index in 0..<30 {
            let id = try node.store.addReminder(ReminderDraft(title: "r\(index)", tags: ["home"]))
            for edit in 1...4 {
                node.clock.advance(1)
                try node.store.editReminder(id, ReminderPatch(title: "r\(index) v\(edit)"))
            }
            try node.store.perform(.tag(add: [], remove: ["home"]), on: .reminder(id))
        }
        #expect(try node.store.compact(keeping: .none).droppedOperations == 30 * 5)
        return node
    }

    @Test(arguments: [PeerProtocol.highestVersion, 6])
    func aPeerTakesTheCompactedSeqsOfAWholeSession(serverHighest: UInt16) throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Self.compactedNode(directory, key: key)
        let b = try Node(in: directory, "b", seed: 2, key: key)
        try b.store.addNote(NoteDraft(title: "from b"))
        var configuration = quickConfiguration(idle: .seconds(10))
        configuration.highestVersion = serverHighest
        let server = try TestServer(a, configuration: configuration)
        defer { server.stop() }
        let record = try b.sync(with: server.address)
        #expect(record.finished, "\(record.logLine)")
        #expect(try b.dump() == a.dump())
        if serverHighest >= 7 {
            #expect(try b.store.versionVector() == a.store.versionVector())
            #expect(try b.store.allOperations() == a.store.allOperations())
            #expect(try b.store.compactedSeqCount() == 150)
        } else {
            // Version 6 carries no compacted seqs: B holds the operations kept, above gaps.
            #expect(try b.store.versionVector()[a.store.replicaID] < a.store.versionVector()[a.store.replicaID])
            #expect(try b.store.compactedSeqCount() == 0)
        }
        #expect(try b.store.verify().problems == [])
        // The server's side: it took B's note, and stays as it was otherwise.
        #expect(try a.store.verify().problems == [])
    }

    /// A live session: the initial exchange carries the compacted seqs as a one-shot session does.
    @Test(.timeLimit(.minutes(1)))
    func aLivePeerTakesThemInItsInitialExchange() async throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Self.compactedNode(directory, key: key)
        let b = try Node(in: directory, "b", seed: 2, key: key)
        let server = try TestServer(a, configuration: quickConfiguration(idle: .seconds(10)))
        defer { server.stop() }
        let wentLive = LockedState(false)
        let follower = Task {
            for try await event in PeerClient.live(store: b.store, address: server.address, configuration: quickConfiguration(idle: .seconds(10))) {
                if case .live = event { wentLive.withLock { $0 = true } }
            }
        }
        defer { follower.cancel() }
        let deadline = Date().addingTimeInterval(20)
        while !wentLive.withLock({ $0 }), Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(wentLive.withLock { $0 })
        #expect(try await b.store.versionVector() == a.store.versionVector())
        #expect(try b.dump() == a.dump())
    }
}
