import ConcordCore
import ConcordKeys
import Foundation
import Testing
@testable import ConcordPeer

// Helpers of the peer tests: seeded randomness, in-memory operation sets, and a driver that wires
// two sessions to each other with no sockets.

let fixturesDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures")

/// A seeded source of "random" bytes, for deterministic keys and nonces.
final class SeededBytes: @unchecked Sendable {
    private let lock = NSLock()
    private var generator: SplitMix64

    init(seed: UInt64) {
        generator = SplitMix64(seed: seed)
    }

    func bytes(_ count: Int) -> [UInt8] {
        lock.withLock { (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) } }
    }
}

func seeded(_ seed: UInt64) -> RandomBytes {
    let source = SeededBytes(seed: seed)
    return RandomBytes { source.bytes($0) }
}

/// Always the same bytes (a test vector's nonce).
func fixed(_ bytes: [UInt8]) -> RandomBytes {
    RandomBytes { count in
        precondition(count == bytes.count)
        return bytes
    }
}

func hex(_ text: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        bytes.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

let keyA = SyncKey.generate(using: seeded(1))
let keyB = SyncKey.generate(using: seeded(2))
let replicaA = ReplicaID(high: 0xAAAA_0000_0000_0001, low: 1)
let replicaB = ReplicaID(high: 0xBBBB_0000_0000_0002, low: 2)
let replicaC = ReplicaID(high: 0xCCCC_0000_0000_0003, low: 3)

/// 2024-01-31T00:00:00Z.
let baseMillis: UInt64 = 1_706_659_200_000

/// Operations by `author` with seqs `seqs`: assigns, tag adds and removes on a few records.
func operations(by author: ReplicaID, seqs: ClosedRange<UInt64>, text: String = "") -> [Op] {
    seqs.map { seq in
        let record = RecordRef.reminder(RecordID(high: author.high, low: seq % 97))
        let action: Action
        switch seq % 4 {
        case 0: action = .assign(.title, .string("title \(seq) \(text)"))
        case 1: action = .assign(.priority, .int(Int64(seq % 4)))
        case 2: action = .addTag(ExactString("tag\(seq % 5)"))
        default: action = .removeTag(ExactString("tag\(seq % 5)"), observed: [OperationID(replica: author, seq: seq - 1)])
        }
        return Op(id: OperationID(replica: author, seq: seq), timestamp: Timestamp(physicalMillis: baseMillis + seq, logical: 0),
                  record: record, action: action)
    }
}

/// `operations` with predecessors on their assigns, as a build that records them writes them
/// (SPEC.md §5.1): alternately *none* (an empty list) and a list naming another replica.
func withPredecessors(_ operations: [Op]) -> [Op] {
    operations.map { operation in
        guard case .assign = operation.action else { return operation }
        var copy = operation
        let other = operation.id.replica == replicaC ? replicaA : replicaC
        copy.predecessors = operation.id.seq % 8 == 1 ? Predecessors.empty : Predecessors([OperationID(replica: other, seq: operation.id.seq)])
        return copy
    }
}

/// A replica's operations in memory: what a store holds, as far as sync is concerned.
struct OperationSet {
    var operations: [OperationID: Op] = [:]

    init(_ operations: [Op] = []) {
        for operation in operations { self.operations[operation.id] = operation }
    }

    /// For each author, the highest seq held with no gap below (SPEC.md §4.2).
    var versions: VersionVector {
        var vector = VersionVector()
        for author in Set(operations.keys.map(\.replica)) {
            var seq: UInt64 = 0
            while operations[OperationID(replica: author, seq: seq + 1)] != nil { seq += 1 }
            vector[author] = seq
        }
        return vector
    }

    /// What a peer with `since` lacks, author by author in seq order.
    func missing(since: VersionVector) -> [Op] {
        operations.values.filter { !since.covers($0.id) }.sorted { $0.id < $1.id }
    }

    /// The refusal a store's merge gives a batch with an operation that differs from the one held
    /// under its id (SPEC.md §9.1).
    func clash(_ batch: [Op]) -> ConcordError? {
        guard let different = batch.first(where: { received in operations[received.id].map { $0 != received } ?? false }) else { return nil }
        return ConcordError(.local, "replica \(different.id.replica) has two different operations with seq \(different.id.seq), here and in what is being merged")
    }

    mutating func apply(_ batch: [Op]) {
        for operation in batch { operations[operation.id] = operation }
    }
}

/// One end of an in-memory connection: a session, the operations it syncs, and what it has done.
struct TestPeer {
    var session: PeerSession
    var store: OperationSet
    /// Bytes sent and not yet delivered to the other end.
    var outbox: [UInt8] = []
    /// Every byte this end has sent.
    var sent: [UInt8] = []
    /// The operations of each `.apply`, in order: one batch each, or several (`batchesPerApply`).
    var appliedBatches: [[Op]] = []
    /// How many times the session asked to finish its merge (`.finishMerge`).
    var finishMerges = 0
    var needOperationsCalls: [VersionVector] = []
    var finished: PeerSummary?
    /// The summary of the exchange, once a live session entered its live phase.
    var live: PeerSummary?
    var failure: ConcordError?
    /// How many operations the driver passes to `send(operations:)` at a time.
    var chunk = 1000
    /// Every action, in order.
    var log: [PeerAction] = []
    /// Makes applying a batch fail with this failure, as a store's merge may.
    var refuseBatch: (([Op]) -> ConcordError?)?
    /// Whether an `.apply` is merged later, as a transport that merges on another thread does:
    /// the driver calls `readAhead()` and goes on receiving, and `finishMerge()` commits the first
    /// under way.
    var mergesLater = false
    /// The `.apply` handed out and not yet merged, in order, when `mergesLater`.
    var mergesUnderWay: [[Op]] = []

    /// - Parameter highestVersion: below `PeerProtocol.highestVersion`, a side of an older build.
    init(
        role: PeerRole, key: SyncKey = keyA, replica: ReplicaID, operations: [Op] = [], batchesPerApply: Int = 1,
        appliesInFlight: Int = 1, live: Bool = false, highestVersion: UInt16 = PeerProtocol.highestVersion, random: RandomBytes
    ) {
        let store = OperationSet(operations)
        self.store = store
        session = PeerSession(
            role: role, key: key, localReplica: replica, localVersions: store.versions, batchesPerApply: batchesPerApply,
            maxAppliesInFlight: appliesInFlight, live: live, highestVersion: highestVersion, random: random)
    }

    var hasEnded: Bool { finished != nil || failure != nil }

    mutating func perform(_ actions: [PeerAction]) {
        log += actions
        for action in actions {
            switch action {
            case .send(let bytes):
                outbox += bytes
                sent += bytes
            case .apply(let batch):
                if mergesLater {
                    mergesUnderWay.append(batch)
                    perform(session.readAhead())
                } else if !merge(batch) {
                    return
                }
            case .finishMerge:
                // The operation set has nothing to apply later: what it holds shows at once.
                finishMerges += 1
                perform(session.batchApplied())
            case .needOperations(let since, let lastShared):
                needOperationsCalls.append(since)
                let missing = lastShared.map { store.operations[$0]! } + store.missing(since: since)
                var start = 0
                while start < missing.count {
                    let end = min(start + chunk, missing.count)
                    perform(session.send(operations: missing[start..<end]))
                    start = end
                }
                perform(session.finishSending())
            case .finished(let summary):
                #expect(finished == nil && failure == nil, "two ends")
                finished = summary
            case .live(let summary):
                #expect(live == nil && finished == nil && failure == nil, "the live phase entered twice, or after the end")
                live = summary
            case .failed(let failure):
                #expect(finished == nil && self.failure == nil, "two ends")
                self.failure = failure
            }
        }
    }

    /// Merges a batch as a store would, and tells the session. `false` if the store refused it.
    private mutating func merge(_ batch: [Op]) -> Bool {
        if let refusal = refuseBatch?(batch) ?? store.clash(batch) {
            // As a store whose merge fails (a clash, a full disk): nothing of it is applied.
            perform(session.abort(refusal))
            return false
        }
        store.apply(batch)
        appliedBatches.append(batch)
        perform(session.batchApplied())
        return true
    }

    /// Merges the first `.apply` under way, if there is one (`mergesLater`); `false` if there is
    /// none.
    mutating func finishMerge() -> Bool {
        guard !mergesUnderWay.isEmpty else { return false }
        _ = merge(mergesUnderWay.removeFirst())
        return true
    }

    mutating func start() { perform(session.start()) }

    mutating func receive(_ bytes: [UInt8], chunk: Int = .max) {
        var start = 0
        while start < bytes.count {
            let end = start + min(chunk, bytes.count - start)
            perform(session.receive(bytes[start..<end]))
            start = end
        }
    }

    /// Takes what is waiting in the outbox.
    mutating func takeOutbox() -> [UInt8] {
        defer { outbox = [] }
        return outbox
    }
}

/// Runs two ends until neither has anything more to deliver. An end that has ended closes the
/// connection after its last bytes: the other then sees `connectionClosed()`.
func run(_ client: inout TestPeer, _ server: inout TestPeer, chunk: Int = .max) {
    server.start()
    client.start()
    pump(&client, &server, chunk: chunk)
}

func pump(_ client: inout TestPeer, _ server: inout TestPeer, chunk: Int = .max) {
    while true {
        var progressed = false
        if !client.outbox.isEmpty {
            server.receive(client.takeOutbox(), chunk: chunk)
            progressed = true
        }
        if !server.outbox.isEmpty {
            client.receive(server.takeOutbox(), chunk: chunk)
            progressed = true
        }
        if progressed { continue }
        // Merges under way finish once what was on its way has arrived.
        if client.finishMerge() || server.finishMerge() { continue }
        if client.hasEnded, !server.hasEnded {
            server.perform(server.session.connectionClosed())
        } else if server.hasEnded, !client.hasEnded {
            client.perform(client.session.connectionClosed())
        } else {
            return
        }
    }
}

/// The payloads of the frames in `bytes`.
func frames(_ bytes: [UInt8]) throws -> [[UInt8]] {
    var decoder = FrameDecoder()
    decoder.append(bytes)
    var result: [[UInt8]] = []
    while let frame = try decoder.next() { result.append(frame) }
    #expect(!decoder.isInsideFrame)
    return result
}

extension PeerAction {
    var isSend: Bool {
        if case .send = self { return true }
        return false
    }

    var isApply: Bool {
        if case .apply = self { return true }
        return false
    }

    /// Whether the session waits for `batchApplied()` after it: an `.apply` or a `.finishMerge`.
    var awaitsCommit: Bool {
        switch self {
        case .apply, .finishMerge: true
        default: false
        }
    }
}

/// A client that plays the handshake by hand, then seals whatever messages a test gives it: a
/// peer that holds the key and breaks the protocol on purpose.
struct HostileClient {
    let keys: Handshake.Keys
    var sealer: FrameCipher
    var opener: FrameCipher
    /// The server's bytes after its hello (its encrypted frames).
    var serverBytes: [UInt8]
    var server: PeerSession

    /// Connects to a fresh server session holding `keyA` and completes the handshake.
    init(serverReplica: ReplicaID = replicaB, serverOperations: [Op] = [], batchesPerApply: Int = 1) throws {
        server = PeerSession(role: .server, key: keyA, localReplica: serverReplica,
                             localVersions: OperationSet(serverOperations).versions, batchesPerApply: batchesPerApply, random: seeded(77))
        #expect(server.start().isEmpty)
        let clientNonce = [UInt8](repeating: 0x5A, count: 32)
        let hello = Handshake.header(.clientHello) + clientNonce
        let reply = server.receive(Frame.encode(hello))
        guard case .send(let helloFrame)? = reply.first else { throw HostileError.noServerHello }
        let serverHello = try frames(helloFrame)[0]
        keys = Handshake.Keys(key: keyA, clientNonce: clientNonce, serverNonce: Array(serverHello[11..<43]))
        let transcript = hello + serverHello[..<43]
        let proof = keys.proof(label: Handshake.clientLabel, transcript: transcript)
        sealer = FrameCipher(key: keys.clientToServer)
        opener = FrameCipher(key: keys.serverToClient)
        serverBytes = []
        let actions = server.receive(Frame.encode(Handshake.header(.clientProof) + proof))
        for case .send(let bytes) in actions { serverBytes += bytes }
        #expect(server.isHandshakeComplete)
    }

    /// The frame that carries `message`, sealed with the next counter.
    mutating func seal(_ message: [UInt8]) -> [UInt8] {
        Frame.encode(sealer.seal(message)!)
    }

    /// Sends `messages` and returns the server's actions.
    mutating func send(_ messages: [UInt8]...) -> [PeerAction] {
        send(messages)
    }

    mutating func send(_ messages: [[UInt8]]) -> [PeerAction] {
        var bytes: [UInt8] = []
        for message in messages { bytes += seal(message) }
        var actions = server.receive(bytes)
        // Each batch is applied at once, as a store would, and the server reads on.
        var index = 0
        while index < actions.count {
            if actions[index].awaitsCommit { actions += server.batchApplied() }
            index += 1
        }
        for case .send(let bytes) in actions { serverBytes += bytes }
        return actions
    }

    /// The messages the server has sent, opened.
    mutating func serverMessages() throws -> [[UInt8]] {
        let result = try frames(serverBytes).map { try opener.open($0) }
        serverBytes = []
        return result
    }

    static func versions(_ replica: ReplicaID, _ vector: VersionVector = VersionVector()) -> [UInt8] {
        PeerMessage.encodeVersions(replica: replica, versions: vector)
    }
}

enum HostileError: Error { case noServerHello }
