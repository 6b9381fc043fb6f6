import ConcordCore
import ConcordWire
import ConcordKeys
import Crypto

/// Which end of the connection a session is: the client opened it.
public enum PeerRole: String, Hashable, Sendable {
    /// The side that connected.
    case client
    /// The side that accepted the connection.
    case server
}

/// What a session did, each way. Complete when the session has finished; while it runs or after
/// a failure, it counts what happened so far (for a log line).
public struct PeerSummary: Hashable, Sendable {
    /// Which end this side was.
    public var role: PeerRole
    /// The peer's replica id, once its `versions` message has arrived.
    public var peerReplica: ReplicaID?
    /// The peer's version vector as of the session's start, once it has arrived.
    public var peerVersions: VersionVector?
    /// Operations sent to the peer that it lacked, and the batches sent. Once the session has
    /// finished, the peer has acknowledged receiving and applying all of them.
    public var operationsSent = 0
    /// Batches sent.
    public var batchesSent = 0
    /// Operations received from the peer that this side lacked, as far as the peer's version
    /// vector tells (and handed out to be applied), and the batches received.
    public var operationsReceived = 0
    /// Batches received (and handed out to be applied).
    public var batchesReceived = 0
    /// The last shared operations (SPEC.md §15.6) sent and received besides: one of each replica
    /// both sides know, held by both, sent so that two stores that wrote different operations
    /// under one replica id clash (§9.1). They are not counted in `operationsSent` and
    /// `operationsReceived`.
    public var lastSharedSent = 0
    /// Last shared operations received (see `lastSharedSent`).
    public var lastSharedReceived = 0
    /// Bytes on the wire, frame headers and the handshake included.
    public var bytesSent = 0
    /// Bytes received, frame headers and the handshake included.
    public var bytesReceived = 0

    package init(role: PeerRole) {
        self.role = role
    }
}

/// What the transport that drives a `PeerSession` must do, in the order given.
package enum PeerAction: Hashable, Sendable {
    /// Write these bytes to the connection.
    case send([UInt8])
    /// Merge these operations, authenticated and valid (SPEC.md §4.3), into the store as the next
    /// part of the session's merge (`MergeInParts`: logged in a transaction of its own, SPEC.md
    /// §5.6), then call `batchApplied()` and carry out what it returns. They are one batch, or several received one after the other (`batchesPerApply`).
    /// Merges are committed in the order handed out, each confirmed in turn. If one fails, call
    /// `abort(_:)` instead and carry out what that returns. Until it is confirmed the session
    /// hands out at most `maxAppliesInFlight` `.apply` in all and answers nothing that arrived after
    /// the batches: it goes on opening and decoding the batches that follow (`receive`,
    /// `readAhead()`), up to the next `.apply`'s worth, and keeps the first message of another
    /// kind for later. No frame (an `ack`) is sealed in answer to the peer before the batches have
    /// committed, so the `error` that a failed merge sends is sealed with the next counter and
    /// the peer can read it. A frame that fails (it does not authenticate, or its batch is
    /// malformed) while batches wait to be handed out ends the session without handing them out:
    /// they were never acknowledged, and the next session sends them again. (An `.apply` already
    /// handed out may still commit: what it holds arrived whole and valid, and merging it again
    /// later changes nothing.)
    case apply([Op])
    /// The peer's `done` has arrived and every `.apply` has committed: apply what the session's
    /// merge logged to the records (`MergeInParts.apply()`), then call `batchApplied()` and carry
    /// out what it returns (the `ack` among it), or `abort(_:)` if it fails. So once the peer
    /// hears that this side holds what it sent, this side's records show it too. Handed out only
    /// after batches were received.
    case finishMerge
    /// The peer's version vector has arrived: stream, through `send(operations:)`, first the
    /// operations `lastShared` names (the store holds each: `ConcordStore.operation(_:)`), then
    /// every operation the store holds that `since` does not cover (each author's in seq order,
    /// as `ConcordStore.forEachOperation(since:)` gives them); then call `finishSending()`. It is
    /// always the last action of the list it is in.
    case needOperations(since: VersionVector, lastShared: [OperationID])
    /// The session is complete: both sides have sent everything the other lacked, and each has
    /// acknowledged receiving it. Flush what was sent, then close the connection. (A live
    /// session's end, after its live phase, is reported so too.)
    case finished(PeerSummary)
    /// The exchange of a live session (SPEC.md §15.10) is complete, as for `.finished`, and the
    /// session stays open in its live phase: from now on, push what the store holds and the peer
    /// may lack (`push(operations:)`, from `peerHolds`), whenever the store commits and while
    /// `mayPush` allows, and send `ping()` when nothing was written for a while. It ends when the
    /// connection closes (`connectionClosed()`, a normal end) or either side fails.
    case live(PeerSummary)
    /// The session has ended in failure: flush what was sent (an `error` for the peer may be
    /// among it), then close the connection. Nothing more is handed out to be applied (merges
    /// already handed out may still commit, `apply`; a transport stops those queued after one
    /// that failed).
    case failed(ConcordError)
}

/// One peer-to-peer sync session (SPEC.md §15) as a state machine with no I/O: its methods take
/// what arrived and what the store supplies, and return the actions a transport carries out.
/// The same value type drives a TCP connection, an in-memory pipe in a test, or anything that
/// carries an ordered stream of bytes both ways.
///
/// A transport drives it like this:
///
/// ```swift
/// var session = PeerSession(role: .client, key: key, localReplica: store.replicaID,
///                           localVersions: try store.versionVector())
/// perform(session.start())                        // the client's hello; nothing for a server
/// // whenever bytes arrive:   perform(session.receive(bytes))
/// // when the peer closes:    perform(session.connectionClosed())
/// // on a timeout (§15.7):    perform(session.abort(ConcordError(.timedOut, "the session was idle for 60 s")))
///
/// func perform(_ actions: [PeerAction]) {
///     for action in actions {
///         switch action {
///         case .send(let bytes): write(bytes)
///         case .apply(let operations):        // the next part of the session's merge
///             do { try merge.log(try store.prepareMerge(operations)) }
///             catch { perform(session.abort(ConcordError(.local, "cannot apply a batch: \(error)"))); return }
///             perform(session.batchApplied())
///         case .finishMerge:                     // the peer's done: its operations reach the records
///             do { try merge.apply() }
///             catch { perform(session.abort(ConcordError(.local, "cannot apply the batches: \(error)"))); return }
///             perform(session.batchApplied())
///         case .needOperations(let since, let lastShared):
///             perform(session.send(operations: try lastShared.compactMap(store.operation)))
///             // In chunks, so memory stays bounded; batches are cut by the session.
///             var chunk: [Op] = []
///             try store.forEachOperation(since: since) { op in
///                 chunk.append(op)
///                 if chunk.count == 4096 { perform(session.send(operations: chunk)); chunk.removeAll() }
///             }
///             perform(session.send(operations: chunk))
///             perform(session.finishSending())
///         case .live: startPushing()             // a live session (SPEC.md §15.10)
///         case .finished(let summary): close(); log(summary)
///         case .failed(let failure): close(); log(failure)
///         }
///     }
/// }
/// ```
///
/// **Order.** Every frame is sealed with the next counter of its direction, so bytes MUST be
/// written in the order the session returns them, across calls, and none dropped: a frame sealed
/// and never written makes every later one fail authentication at the peer. After an `.apply`
/// (only a `.needOperations` may follow it in its list) the session answers nothing more of what
/// arrived until the transport calls `batchApplied()` (the batch has committed) or ends the
/// session with `abort(_:)`; meanwhile it decodes the next `.apply`'s batches.
/// Carrying out each list in order, one call at a time, does all this. A driver that merges on
/// another thread hands the merge over, calls `readAhead()` (the next batches are decoded while
/// the merge runs, and the next `.apply` may come out if `maxAppliesInFlight` allows), and goes on
/// calling `receive` and sending meanwhile, one call at a time.
/// Sending and receiving are independent: a transport keeps feeding received bytes while it
/// streams operations (the session being a value it guards: one call at a time). It must not
/// stop reading while it waits to write: both peers send at once, and two peers that each wait
/// for the other to read would deadlock. The session
/// checks everything it receives: framing and size limits, the handshake, each frame's
/// authentication, the order of messages, and each batch's count and operations (decoded and
/// validated as a bundle's operations block is). Hostile input never traps: it ends the session
/// with a `.failed` action, after which every method returns no actions, so nothing more is
/// applied. Calling `send(operations:)` or `finishSending()` before `.needOperations`, or
/// `receive` before `start()`, is a programming error and traps.
package struct PeerSession: Sendable {
    package let role: PeerRole
    package let localReplica: ReplicaID
    /// The version vector sent to the peer: what the peer need not send.
    package let localVersions: VersionVector
    private let key: SyncKey
    private let random: RandomBytes
    /// How this side words a failure for its peer, when it tells the peer why it ends.
    private let describeError: @Sendable (ConcordError) -> String

    private var phase: Phase = .notStarted
    private var decoder = FrameDecoder(maxPayloadBytes: PeerProtocol.maxHandshakeFrameBytes)
    private var sealer: FrameCipher?
    private var opener: FrameCipher?
    private var receiving: Receiving = .versions
    private var sending: Sending = .waitingForPeerVersions
    private var ackReceived = false
    /// Whether this side asks for (a client) or accepts (a server) a live session.
    private let offersLive: Bool
    /// The highest version this side speaks: a client proposes no higher (lower once a server
    /// refused those above it, SPEC.md §15.10), and a server accepts no higher (tests make a side
    /// of an older build with it).
    private let highestVersion: UInt16
    /// The session's protocol version: what a client proposes until the server answers, then
    /// what the handshake settled (SPEC.md §15.10, "Negotiation").
    package private(set) var version: UInt16 = PeerProtocol.version
    /// Whether the session is in its live phase (SPEC.md §15.10).
    package private(set) var isLive = false
    /// Whether a message of the live phase (`push`, `pushAck`, `ping`, `pong`) has arrived from the
    /// peer: it keeps the session, not only answers a handshake and an exchange, which is what a
    /// live client counts as a success before it connects again (SPEC.md §15.10, "A live client").
    package private(set) var peerHeardWhileLive = false
    /// What the peer holds as far as this side knows (SPEC.md §15.10 rule 1): what its `versions`
    /// covers, every operation received from it, and every operation written to it.
    package private(set) var peerHolds = SeqRanges()
    /// Push operations written, and the `n` of the last `pushAck` received.
    private var pushOperationsWritten = 0
    private var pushOperationsAcknowledged = 0
    /// The pushes written and not wholly acknowledged: the count of push operations written up to
    /// the end of each, and its raw bytes; and the raw bytes of all of them.
    private var pushesUnacknowledged: [(end: Int, rawBytes: Int)] = []
    private var pushBytesUnacknowledged = 0
    /// Push operations received in the parts handed out (`.apply`, in order; 0 for a part of
    /// batches or a `.finishMerge`), and those logged so far (what `pushAck` counts).
    private var pushesInFlight: [Int] = []
    private var pushOperationsLogged = 0
    /// Push operations in the part being collected.
    private var collectedPushOperations = 0
    private var nextPingNonce: UInt64 = 0
    /// The peer's `done` has arrived: the `ack` goes out once the `.finishMerge` has committed.
    private var ackOwed = false
    /// The connection has closed: once nothing is left to apply, the session ends.
    private var inputEnded = false
    /// How many `.apply` (or `.finishMerge`) have been handed out and not yet confirmed by
    /// `batchApplied()`, and how many may be. While any are, the batches that follow are collected for the next one, and
    /// anything else waits in `heldMessage`.
    private var appliesInFlight = 0
    private let maxAppliesInFlight: Int
    /// How many batches received one after the other one `.apply` may carry.
    private let batchesPerApply: Int
    /// The operations of the batches received for the next `.apply`, how many batches, and the
    /// raw bytes they declare: at most those of one batch of the largest size (4 MiB), so that no
    /// `.apply` is more work than the largest single batch may be. The summary counts them once
    /// they are handed out, and so does `collectedLastShared`, the last shared operations among
    /// them.
    private var collected: [Op] = []
    private var collectedBatches = 0
    private var collectedRawBytes = 0
    private var collectedLastShared = 0
    /// A message opened after batches that are still to be applied: one of another kind, handled
    /// once they have committed, or a batch that would take the collected ones past the raw-size
    /// bound, the first of the next group. Handled as if it were still in the decoder.
    private var heldMessage: [UInt8]?
    /// A `.needOperations` to return at the end of the current `receive`.
    private var pendingNeed: (since: VersionVector, lastShared: [OperationID])?
    /// The last shared operations (SPEC.md §15.6): this side's not yet sent, and the peer's not yet
    /// received. Both sides compute the same set from the two version vectors.
    private var lastSharedToSend: Set<OperationID> = []
    private var lastSharedToReceive: Set<OperationID> = []
    /// The last shared operations in the open batch.
    private var batchLastShared = 0
    /// Every operation in batches, each way, as the peer's ack counts them.
    private var operationsInBatchesSent = 0
    private var operationsInBatchesReceived = 0
    /// What the peer sent in this session: never sent back.
    private var received = SeqRanges()
    private var batch = OperationsBlock.Encoder()
    private var batchFirst: OperationID?

    /// What the session has done so far.
    package private(set) var summary: PeerSummary

    private enum Phase: Sendable {
        case notStarted
        case clientAwaitingServerHello(clientHello: [UInt8], clientNonce: [UInt8])
        case serverAwaitingClientHello
        case serverAwaitingProof(keys: Handshake.Keys, transcript: [UInt8])
        case established
        case finished
        case failed(ConcordError)
    }

    private enum Receiving: Sendable { case versions, batches, done }
    private enum Sending: Sendable { case waitingForPeerVersions, operations, done }

    /// - Parameters:
    ///   - role: `.client` on the side that opened the connection.
    ///   - key: the store's sync key; the peer must hold the same.
    ///   - localReplica: the store's replica id (a peer with the same one is refused).
    ///   - localVersions: the store's version vector now; the peer sends what it does not cover.
    ///   - batchesPerApply: how many batches one `.apply` may carry, when they have arrived one
    ///     after the other (before the store got to them), and while their raw operations total
    ///     at most 4 MiB (what the largest single batch may hold). A value below one counts as
    ///     one. Each `.apply` is a transaction and a sync to disk: a transport that receives
    ///     faster than its store commits applies fewer, larger ones. One by default.
    ///   - maxAppliesInFlight: how many `.apply` may be out, not yet confirmed by `batchApplied()`:
    ///     a transport that prepares a merge (reads and sorts its operations) while the one
    ///     before it writes takes two. A value below one counts as one. One by default.
    ///   - live: a client asks for a live session (protocol version 4 or 2, SPEC.md §15.10), and a
    ///     server accepts one when a client asks; otherwise the session is one-shot (version 3 or 1).
    ///   - highestVersion: the highest version this side speaks: a client proposes no higher, and
    ///     a server accepts no higher.
    ///   - random: where the handshake's nonce comes from: the system CSPRNG, unless a test
    ///     injects a seeded source.
    ///   - describeError: how this side words the reason it sends in its `error` when it ends
    ///     the session itself (same replica id, a failed batch; SPEC.md §15.6, §15.8): by default
    ///     the failure's `message`; an app may add its own advice (`syncctl` names its commands).
    package init(
        role: PeerRole, key: SyncKey, localReplica: ReplicaID, localVersions: VersionVector,
        batchesPerApply: Int = 1, maxAppliesInFlight: Int = 1, live: Bool = false,
        highestVersion: UInt16 = PeerProtocol.highestVersion, random: RandomBytes = .system,
        describeError: @escaping @Sendable (ConcordError) -> String = { $0.message }
    ) {
        offersLive = live
        self.highestVersion = highestVersion
        self.batchesPerApply = max(1, batchesPerApply)
        self.maxAppliesInFlight = max(1, maxAppliesInFlight)
        self.role = role
        self.key = key
        self.localReplica = localReplica
        self.localVersions = localVersions
        self.random = random
        self.describeError = describeError
        summary = PeerSummary(role: role)
    }

    // MARK: State

    /// Whether the handshake is complete (a transport stops its handshake timer then).
    package var isHandshakeComplete: Bool {
        switch phase {
        case .established, .finished: true
        case .failed, .notStarted, .clientAwaitingServerHello, .serverAwaitingClientHello, .serverAwaitingProof: false
        }
    }

    /// Whether the session reads nothing more until a merge out is confirmed (`batchApplied()`):
    /// the batches of the next merge are complete, or a message waits for the merges, while as
    /// many merges as allowed are out. A transport leaves what arrives unread meanwhile, so that
    /// its inbound flow control bounds what waits.
    package var waitsForMerges: Bool {
        appliesInFlight > 0 && (heldMessage != nil || collectedBatches >= batchesPerApply)
    }

    /// Whether, in the live phase, a push may be written: the operations pushed and not yet
    /// acknowledged are under the bounds of SPEC.md §15.10 rule 4.
    package var mayPush: Bool {
        isLive && isActive && pushOperationsWritten - pushOperationsAcknowledged < PeerProtocol.maxUnacknowledgedPushOperations
            && pushBytesUnacknowledged < PeerProtocol.maxUnacknowledgedPushBytes
    }

    /// Whether the session has ended, finished or failed.
    package var hasEnded: Bool {
        switch phase {
        case .finished, .failed: true
        default: false
        }
    }

    /// Whether the session has finished: the peer's `done` and its `ack` of everything this side
    /// sent have arrived.
    package var isFinished: Bool {
        if case .finished = phase { return true }
        return false
    }

    /// Why the session failed, if it did.
    package var failure: ConcordError? {
        if case .failed(let failure) = phase { return failure }
        return nil
    }

    private var isActive: Bool {
        switch phase {
        case .notStarted, .finished, .failed: false
        default: true
        }
    }

    // MARK: Driving the session

    /// Starts the session once the connection is open: the client's hello for a client, nothing
    /// for a server (it waits for the hello). Call it once, before anything else.
    package mutating func start() -> [PeerAction] {
        guard case .notStarted = phase else { preconditionFailure("PeerSession.start() is called once") }
        var actions: [PeerAction] = []
        switch role {
        case .client:
            let nonce = random(Handshake.nonceBytes)
            version = PeerProtocol.proposal(live: offersLive, upTo: highestVersion)
            let hello = Handshake.header(.clientHello, version: version) + nonce
            phase = .clientAwaitingServerHello(clientHello: hello, clientNonce: nonce)
            emit(Frame.encode(hello), into: &actions)
        case .server:
            phase = .serverAwaitingClientHello
        }
        return actions
    }

    /// Takes bytes received from the peer, in any pieces: a byte, a frame, many frames.
    package mutating func receive(_ bytes: some Collection<UInt8>) -> [PeerAction] {
        if case .notStarted = phase { preconditionFailure("PeerSession.receive(_:) before start()") }
        guard isActive else { return [] }
        summary.bytesReceived += bytes.count
        decoder.append(bytes)
        return handleReceived()
    }

    /// The batches of the first `.apply` not yet confirmed, or the `.finishMerge`, have committed:
    /// the session reads on (and, once none is left after the peer's `done`, sends the `ack` that
    /// tells the peer it holds what it sent).
    package mutating func batchApplied() -> [PeerAction] {
        guard isActive else { return [] }
        precondition(appliesInFlight > 0, "PeerSession.batchApplied() without an .apply")
        appliesInFlight -= 1
        let pushed = pushesInFlight.removeFirst()
        guard pushed > 0 else { return handleReceived() }
        pushOperationsLogged += pushed
        var actions: [PeerAction] = []
        guard sendMessage(PeerMessage.encodeCount(.pushAck, UInt64(pushOperationsLogged)), into: &actions) else { return actions }
        return actions + handleReceived()
    }

    /// While `.apply` actions are being merged: opens and decodes the batches that follow them,
    /// and hands out the next `.apply` as soon as its batches are complete if `maxAppliesInFlight`
    /// allows one more, or else keeps it for `batchApplied()` to hand out at once. A transport
    /// that merges on another thread calls it right after handing each merge over. What it opens
    /// that is not a batch waits until every batch before it has committed. A driver that merges
    /// on the thread that drives the session need not call it.
    package mutating func readAhead() -> [PeerAction] {
        guard isActive else { return [] }
        return handleReceived()
    }

    /// Handles the frames waiting in the decoder. Batches are collected into a group that one
    /// `.apply` hands out: it ends at `batchesPerApply` batches, before a batch that would take it
    /// past the raw-size bound, at a message of another kind, or where the decoder holds no
    /// further whole frame. While `.apply` actions are out, a complete group goes out too if
    /// `maxAppliesInFlight` allows, and otherwise (or while it is still growing) waits; a message of
    /// another kind waits until every batch before it has committed. The loop stops at each
    /// `.apply`, so that a transport starts merging it at once (and calls `readAhead()`).
    private mutating func handleReceived() -> [PeerAction] {
        var actions: [PeerAction] = []
        // Before anything held (the peer's ack may wait there): the peer hears first that its
        // operations are held.
        if isActive, ackOwed, appliesInFlight == 0 {
            ackOwed = false
            sendAck(into: &actions)
        }
        while isActive {
            if let message = heldMessage, collected.isEmpty, appliesInFlight == 0 || PeerMessage.isBatch(message) {
                heldMessage = nil
                handleOpened(message, into: &actions)
                continue
            }
            // The group is complete, or a message waits for it to commit.
            if heldMessage != nil || collectedBatches >= batchesPerApply {
                if appliesInFlight < maxAppliesInFlight { applyCollected(into: &actions) }
                break
            }
            guard let frame = nextFrame(into: &actions) else { break }
            handle(frame, into: &actions)
        }
        // A group that is not complete goes out only to a store with nothing else to merge: it
        // may still grow while one is merging.
        if isActive, appliesInFlight == 0 { applyCollected(into: &actions) }
        if isActive, inputEnded, appliesInFlight == 0 { endClosed(into: &actions) }
        // Last, so that a driver that streams operations while carrying out this action writes
        // their frames after every frame sealed in this call (an ack among them).
        if let need = pendingNeed {
            pendingNeed = nil
            if isActive { actions.append(.needOperations(since: need.since, lastShared: need.lastShared)) }
        }
        return actions
    }

    /// The next whole frame in the decoder, if there is one. A frame over the size limit ends the
    /// session.
    private mutating func nextFrame(into actions: inout [PeerAction]) -> [UInt8]? {
        do {
            return try decoder.next()
        } catch {
            guard case let .tooLarge(length, _) = error else { return nil }
            switch phase {
            case .serverAwaitingClientHello, .clientAwaitingServerHello:
                fail(ConcordError(.notAPeer, "the peer does not speak the Concord peer protocol"), into: &actions)
            case .established:
                fail(ConcordError(.frameTooLarge, "the peer sent a frame of \(length) bytes, over the \(PeerProtocol.maxFrameBytes)-byte limit"),
                     tellingPeer: "it received a frame over the \(PeerProtocol.maxFrameBytes)-byte limit", into: &actions)
            default:
                fail(.violation("a handshake frame of \(length) bytes"), into: &actions)
            }
            return nil
        }
    }

    /// The connection has closed (the peer closed it, or it broke). Ends the session unless it
    /// has already ended. While `.apply` actions are out, it ends once they have committed
    /// (`batchApplied()`) and every whole frame received has been handled: the batches among them
    /// are applied, and the peer's `error`, if it sent one, says why it closed.
    package mutating func connectionClosed() -> [PeerAction] {
        guard isActive else { return [] }
        inputEnded = true
        return handleReceived()
    }

    /// Ends the session once the connection has closed, and what arrived whole has been handled.
    private mutating func endClosed(into actions: inout [PeerAction]) {
        if isLive {
            // The live phase ends by a close (SPEC.md §15.10 rule 6): what was not acknowledged
            // is sent again by the next session.
            phase = .finished
            actions.append(.finished(summary))
        } else if decoder.isInsideFrame {
            fail(ConcordError(.truncated, "the connection ended in the middle of a frame"), into: &actions)
        } else if isHandshakeComplete {
            fail(ConcordError(.closed, "the connection closed before the session finished"), into: &actions)
        } else {
            fail(ConcordError(.closed, "the connection closed during the handshake"), into: &actions)
        }
    }

    /// Ends the session from this side: a timeout, a store that failed to apply a batch, a
    /// shutdown. Past the handshake the peer is sent an `error` whose reason is `reason`, or else
    /// the failure as `describeError` words it (the peer shows it after "the peer ended the
    /// session: "): give `reason` when the failure's words are this side's and would mislead the
    /// peer. Does nothing once the session has ended.
    package mutating func abort(_ failure: ConcordError, tellingPeer reason: String? = nil) -> [PeerAction] {
        guard !hasEnded else { return [] }
        var actions: [PeerAction] = []
        fail(failure, tellingPeer: reason ?? describeError(failure), into: &actions)
        return actions
    }

    /// Sends operations the peer lacks, after `.needOperations`. They are gathered into batches
    /// (SPEC.md §15.6: at most 16,384 operations, about 1 MiB raw each); a batch goes out once it
    /// is full, so this may return no bytes yet. Call it as many times as needed, with chunks of
    /// any size, then `finishSending()`. Operations the peer sent in this session are left out,
    /// so a store that applied them meanwhile may pass them too.
    package mutating func send(operations: some Sequence<Op>) -> [PeerAction] {
        guard isActive else { return [] }
        precondition(sending == .operations, "PeerSession.send(operations:) before .needOperations or after finishSending()")
        var actions: [PeerAction] = []
        for operation in operations where !received.contains(operation.id) {
            guard append(operation, kind: .batch, into: &actions) else { break }
        }
        return actions
    }

    /// In the live phase: writes the operations the store holds that the peer may lack, in
    /// pushes cut as batches are (SPEC.md §15.10 rule 2), leaving out those it holds
    /// (`peerHolds`), which come to include these. Call it with each author's operations in seq
    /// order, while `mayPush`; it writes every push at once, the last one short.
    package mutating func push(operations: some Sequence<Op>) -> [PeerAction] {
        guard isActive else { return [] }
        precondition(isLive, "PeerSession.push(operations:) before the live phase")
        var actions: [PeerAction] = []
        for operation in operations where !peerHolds.contains(operation.id) {
            guard append(operation, kind: .push, into: &actions) else { return actions }
        }
        _ = flushBatch(kind: .push, into: &actions)
        return actions
    }

    /// In the live phase: a `ping` (SPEC.md §15.10 rule 5), for a side that has written nothing
    /// for a while.
    package mutating func ping() -> [PeerAction] {
        guard isActive, isLive else { return [] }
        var actions: [PeerAction] = []
        nextPingNonce += 1
        _ = sendMessage(PeerMessage.encodeCount(.ping, nextPingNonce), into: &actions)
        return actions
    }

    /// Adds an operation to the open batch (or push), which goes out once full, or before an
    /// operation that would take it well past its target size. `false` once the session has failed.
    private mutating func append(_ operation: Op, kind: PeerMessage.Kind, into actions: inout [PeerAction]) -> Bool {
        if !batch.isEmpty, batch.estimatedBytes + Self.sizeBound(operation) > PeerProtocol.targetBatchBytes {
            guard flushBatch(kind: kind, into: &actions) else { return false }
        }
        if batch.isEmpty { batchFirst = operation.id }
        if PeerProtocol.carriesPredecessors(version) {
            batch.append(operation)
        } else {
            // Versions 1 and 2 of the protocol carry no predecessors (SPEC.md §15.5): a peer of a
            // build older than them would refuse the bit that flags them.
            var sent = operation
            sent.predecessors = nil
            batch.append(sent)
        }
        peerHolds.insert(operation.id)
        if !lastSharedToSend.isEmpty, lastSharedToSend.remove(operation.id) != nil { batchLastShared += 1 }
        if batch.operationCount >= PeerProtocol.maxBatchOperations || batch.estimatedBytes >= PeerProtocol.targetBatchBytes {
            guard flushBatch(kind: kind, into: &actions) else { return false }
        }
        return true
    }

    /// Sends the last batch and `done`: everything the peer lacked has been sent. The session
    /// finishes once the peer's `done`, and its `ack` of everything this side sent, have arrived.
    package mutating func finishSending() -> [PeerAction] {
        guard isActive else { return [] }
        precondition(sending == .operations, "PeerSession.finishSending() before .needOperations, or twice")
        var actions: [PeerAction] = []
        guard flushBatch(kind: .batch, into: &actions), sendMessage(PeerMessage.doneMessage, into: &actions) else { return actions }
        sending = .done
        return actions
    }

    // MARK: Handshake

    private mutating func handle(_ frame: [UInt8], into actions: inout [PeerAction]) {
        switch phase {
        case .serverAwaitingClientHello:
            handleClientHello(frame, into: &actions)
        case let .clientAwaitingServerHello(clientHello, clientNonce):
            handleServerHello(frame, clientHello: clientHello, clientNonce: clientNonce, into: &actions)
        case let .serverAwaitingProof(keys, transcript):
            handleClientProof(frame, keys: keys, transcript: transcript, into: &actions)
        case .established:
            handleMessage(frame, into: &actions)
        case .notStarted, .finished, .failed:
            break
        }
    }

    /// Checks a handshake frame's magic and version, and handles a refusal. Returns the kind of a
    /// frame to go on with, or `nil` once the session has failed.
    private mutating func handshakeKind(_ frame: [UInt8], first: Bool, into actions: inout [PeerAction]) -> UInt8? {
        guard let parsed = Handshake.parse(frame) else {
            fail(first ? ConcordError(.notAPeer, "the peer does not speak the Concord peer protocol") : .violation("a handshake frame without the magic"),
                 into: &actions)
            return nil
        }
        if role == .client, first, parsed.kind == Handshake.Kind.refusal.rawValue, frame.count == Handshake.refusalBytes,
           frame[Handshake.headerBytes] == Handshake.RefusalReason.version.rawValue, parsed.version < version {
            // A server that does not speak the version this side proposed, naming the highest it
            // speaks (the client tries again with it once, SPEC.md §15.10).
            fail(.versionMismatch(peer: parsed.version), into: &actions)
            return nil
        }
        if role == .client, first, parsed.version > version, parsed.kind != Handshake.Kind.refusal.rawValue {
            fail(.violation("a server hello of version \(parsed.version), above the \(version) this side proposed"), into: &actions)
            return nil
        }
        // A server settles the version with the client's hello; a client accepts a server hello of
        // the version it proposed or, from a server that keeps no more live sessions, of the one-shot
        // version below a live one; every later frame carries the version settled.
        let accepted: ClosedRange<UInt16> =
            switch (role, first) {
            case (.server, true): PeerProtocol.version...highestVersion
            case (.client, true): (PeerProtocol.isLive(version) ? version - 1 : version)...version
            default: version...version
            }
        guard accepted.contains(parsed.version) else {
            // A server tells a client of another version the highest version it speaks, in clear.
            if role == .server, first {
                emit(Frame.encode(Handshake.header(.refusal, version: highestVersion) + [Handshake.RefusalReason.version.rawValue]),
                     into: &actions)
            }
            fail(.versionMismatch(peer: parsed.version), into: &actions)
            return nil
        }
        if first {
            // A server that may keep no more live sessions answers a live version with the one-shot
            // version below it (SPEC.md §15.10).
            let refusesLive = role == .server && !offersLive && PeerProtocol.isLive(parsed.version)
            version = refusesLive ? parsed.version - 1 : parsed.version
        }
        guard let kind = parsed.kind else {
            fail(.violation("a handshake frame of \(frame.count) bytes"), into: &actions)
            return nil
        }
        if kind == Handshake.Kind.refusal.rawValue {
            guard frame.count == Handshake.refusalBytes else {
                fail(.violation("a refusal of \(frame.count) bytes"), into: &actions)
                return nil
            }
            switch Handshake.RefusalReason(rawValue: frame[Handshake.headerBytes]) {
            case .wrongKey?: fail(ConcordError(.wrongKey, ConcordError.wrongKeyMessage), into: &actions)
            case .version?: fail(.violation("a refusal of protocol version \(version), which it speaks"), into: &actions)
            case nil: fail(.violation("a refusal for an unknown reason (\(frame[Handshake.headerBytes]))"), into: &actions)
            }
            return nil
        }
        return kind
    }

    private mutating func handleClientHello(_ frame: [UInt8], into actions: inout [PeerAction]) {
        guard let kind = handshakeKind(frame, first: true, into: &actions) else { return }
        guard kind == Handshake.Kind.clientHello.rawValue, frame.count == Handshake.clientHelloBytes else {
            fail(.violation("expected a client hello, got a frame of kind \(kind) and \(frame.count) bytes"), into: &actions)
            return
        }
        let clientNonce = Array(frame[Handshake.headerBytes...])
        let serverNonce = random(Handshake.nonceBytes)
        let keys = Handshake.Keys(key: key, clientNonce: clientNonce, serverNonce: serverNonce)
        let helloStart = Handshake.header(.serverHello, version: version) + serverNonce
        let transcript = frame + helloStart
        let proof = keys.proof(label: Handshake.serverLabel, transcript: transcript)
        emit(Frame.encode(helloStart + proof), into: &actions)
        phase = .serverAwaitingProof(keys: keys, transcript: transcript)
    }

    private mutating func handleServerHello(
        _ frame: [UInt8], clientHello: [UInt8], clientNonce: [UInt8], into actions: inout [PeerAction]
    ) {
        guard let kind = handshakeKind(frame, first: true, into: &actions) else { return }
        guard kind == Handshake.Kind.serverHello.rawValue, frame.count == Handshake.serverHelloBytes else {
            fail(.violation("expected a server hello, got a frame of kind \(kind) and \(frame.count) bytes"), into: &actions)
            return
        }
        let proofStart = Handshake.headerBytes + Handshake.nonceBytes
        let serverNonce = Array(frame[Handshake.headerBytes..<proofStart])
        let keys = Handshake.Keys(key: key, clientNonce: clientNonce, serverNonce: serverNonce)
        let transcript = clientHello + frame[..<proofStart]
        guard keys.verify(frame[proofStart...], label: Handshake.serverLabel, transcript: transcript) else {
            // The server does not hold the key: refuse, and never send a proof of our own.
            emit(Frame.encode(Handshake.header(.refusal, version: version) + [Handshake.RefusalReason.wrongKey.rawValue]), into: &actions)
            fail(ConcordError(.wrongKey, ConcordError.wrongKeyMessage), into: &actions)
            return
        }
        let proof = keys.proof(label: Handshake.clientLabel, transcript: transcript)
        emit(Frame.encode(Handshake.header(.clientProof, version: version) + proof), into: &actions)
        establish(sealing: keys.clientToServer, opening: keys.serverToClient, into: &actions)
    }

    private mutating func handleClientProof(
        _ frame: [UInt8], keys: Handshake.Keys, transcript: [UInt8], into actions: inout [PeerAction]
    ) {
        guard let kind = handshakeKind(frame, first: false, into: &actions) else { return }
        guard kind == Handshake.Kind.clientProof.rawValue, frame.count == Handshake.clientProofBytes else {
            fail(.violation("expected a client proof, got a frame of kind \(kind) and \(frame.count) bytes"), into: &actions)
            return
        }
        guard keys.verify(frame[Handshake.headerBytes...], label: Handshake.clientLabel, transcript: transcript) else {
            // Send nothing further.
            fail(ConcordError(.wrongKey, ConcordError.wrongKeyMessage), into: &actions)
            return
        }
        establish(sealing: keys.serverToClient, opening: keys.clientToServer, into: &actions)
    }

    private mutating func establish(
        sealing: SymmetricKey, opening: SymmetricKey, into actions: inout [PeerAction]
    ) {
        sealer = FrameCipher(key: sealing)
        opener = FrameCipher(key: opening)
        decoder.maxPayloadBytes = PeerProtocol.maxFrameBytes
        phase = .established
        _ = sendMessage(PeerMessage.encodeVersions(replica: localReplica, versions: localVersions), into: &actions)
    }

    // MARK: The encrypted phase

    private mutating func handleMessage(_ frame: [UInt8], into actions: inout [PeerAction]) {
        guard var opener else { return }
        let message: [UInt8]
        do {
            message = try opener.open(frame)
        } catch .authentication {
            fail(ConcordError(.authenticationFailed, "a frame failed authentication"),
                 tellingPeer: "it received a frame that failed authentication", into: &actions)
            return
        } catch {
            fail(ConcordError(.counterExhausted, "the session has used all its frame counters"), into: &actions)
            return
        }
        self.opener = opener
        let waits =
            if let rawBytes = PeerMessage.declaredRawLength(of: message) {
                // A batch that would make the group more than the largest batch starts the next.
                // (Compared so that a declared length near the largest integer cannot overflow.)
                !collected.isEmpty && rawBytes > PeerProtocol.maxBatchBytes - collectedRawBytes
            } else {
                // Whatever follows batches waits until they have committed (an ack among them).
                !collected.isEmpty || appliesInFlight > 0
            }
        if waits {
            heldMessage = message
        } else {
            handleOpened(message, into: &actions)
        }
    }

    /// Hands out the batches collected as one `.apply`, if there are any.
    private mutating func applyCollected(into actions: inout [PeerAction]) {
        guard !collected.isEmpty else { return }
        actions.append(.apply(collected))
        pushesInFlight.append(collectedPushOperations)
        collectedPushOperations = 0
        summary.batchesReceived += isLive ? 0 : collectedBatches
        summary.operationsReceived += collected.count - collectedLastShared
        summary.lastSharedReceived += collectedLastShared
        collected = []
        collectedBatches = 0
        collectedRawBytes = 0
        collectedLastShared = 0
        appliesInFlight += 1
    }

    /// Handles an opened message of the encrypted phase.
    private mutating func handleOpened(_ message: [UInt8], into actions: inout [PeerAction]) {
        // The order is checked before the body is decoded.
        let type = PeerMessage.kind(of: message).flatMap(PeerMessage.Kind.init(rawValue:))
        let outOfOrder: String? =
            switch (type, receiving) {
            case (.error?, _), (nil, _): nil  // an error ends the session anywhere; decode reports an unknown type
            case (let type?, _) where type.isLive: isLive ? nil : "\(type.phrase) before the live phase"
            case (.ack?, .versions): "an ack message before versions"
            case (.ack?, _) where ackReceived: "a second ack message"
            case (.ack?, _) where sending != .done: "an ack message before this side's done"
            case (.ack?, _): nil
            case (.versions?, .versions), (.batch?, .batches), (.done?, .batches): nil
            case (.versions?, _): "a second versions message"
            case (let type?, .versions): "\(type.phrase) before versions"
            case (let type?, .done): "\(type.phrase) after done"
            case (let type?, .batches): "\(type.phrase) before the live phase"  // the live kinds, above
            }
        if let outOfOrder {
            fail(.violation(outOfOrder), tellingPeer: "it received something the protocol does not allow there: \(outOfOrder)", into: &actions)
            return
        }
        let decoded: PeerMessage
        do {
            decoded = try PeerMessage.decode(message)
        } catch {
            fail(.violation(error.what), tellingPeer: "it received something the protocol does not allow: \(error.what)", into: &actions)
            return
        }
        // The order check above let a live kind through only in the live phase.
        if type?.isLive == true { peerHeardWhileLive = true }
        switch decoded {
        case let .versions(replica, versions):
            guard replica != localReplica else {
                let failure = ConcordError(.sameReplica, "both stores have replica id \(replica.hex); one is a copy of the other")
                fail(failure, tellingPeer: describeError(failure), into: &actions)
                return
            }
            summary.peerReplica = replica
            summary.peerVersions = versions
            peerHolds = SeqRanges(upTo: versions)
            receiving = .batches
            sending = .operations
            let lastShared = Self.lastShared(localVersions, versions)
            lastSharedToSend = Set(lastShared)
            lastSharedToReceive = lastSharedToSend
            pendingNeed = (versions, lastShared)
        case let .batch(operations):
            for operation in operations {
                received.insert(operation.id)
                if !lastSharedToReceive.isEmpty, lastSharedToReceive.remove(operation.id) != nil { collectedLastShared += 1 }
            }
            operationsInBatchesReceived += operations.count
            collected += operations
            collectedBatches += 1
            collectedRawBytes += PeerMessage.declaredRawLength(of: message) ?? 0
            for operation in operations { peerHolds.insert(operation.id) }
        case let .push(operations):
            for operation in operations {
                received.insert(operation.id)
                peerHolds.insert(operation.id)
            }
            collected += operations
            collectedBatches += 1
            collectedRawBytes += PeerMessage.declaredRawLength(of: message) ?? 0
            collectedPushOperations += operations.count
        case let .pushAck(count):
            guard count <= UInt64(pushOperationsWritten), count >= UInt64(pushOperationsAcknowledged) else {
                let what = "a pushAck message for \(count) operations; this side pushed \(pushOperationsWritten), and \(pushOperationsAcknowledged) were acknowledged"
                fail(.violation(what), tellingPeer: "it received something the protocol does not allow: \(what)", into: &actions)
                return
            }
            pushOperationsAcknowledged = Int(count)
            while let first = pushesUnacknowledged.first, first.end <= pushOperationsAcknowledged {
                pushesUnacknowledged.removeFirst()
                pushBytesUnacknowledged -= first.rawBytes
            }
        case let .ping(nonce):
            _ = sendMessage(PeerMessage.encodeCount(.pong, nonce), into: &actions)
        case .pong:
            break  // what it answers does not matter: bytes arrived
        case .done:
            receiving = .done
            // Every batch before it has been logged (a message waits for them). The records show
            // them before the ack goes out.
            if summary.batchesReceived > 0 {
                actions.append(.finishMerge)
                appliesInFlight += 1
                pushesInFlight.append(0)
                ackOwed = true
            } else {
                sendAck(into: &actions)
            }
        case let .ack(count):
            guard count == UInt64(operationsInBatchesSent) else {
                let what = "an ack message for \(count) operations; this side sent \(operationsInBatchesSent)"
                fail(.violation(what), tellingPeer: "it received something the protocol does not allow: \(what)", into: &actions)
                return
            }
            ackReceived = true
            checkFinished(into: &actions)
        case let .error(reason):
            fail(ConcordError(.peerError, "the peer ended the session: \(PeerMessage.sanitized(reason))"), into: &actions)
        }
    }

    /// Tells the peer that this side holds every operation of its batches (and that its records
    /// show them).
    private mutating func sendAck(into actions: inout [PeerAction]) {
        guard sendMessage(PeerMessage.encodeAck(operationsInBatchesReceived), into: &actions) else { return }
        checkFinished(into: &actions)
    }

    /// The session has finished once the peer's `done` and its `ack` of everything this side sent
    /// have arrived (the ack comes only after this side's `done`); a live session enters its live
    /// phase then.
    private mutating func checkFinished(into actions: inout [PeerAction]) {
        guard receiving == .done, ackReceived else { return }
        if PeerProtocol.isLive(version) {
            isLive = true
            actions.append(.live(summary))
            return
        }
        phase = .finished
        actions.append(.finished(summary))
    }

    /// Seals and sends the open batch (or push), if there is one. `false` once the session has
    /// failed.
    private mutating func flushBatch(kind: PeerMessage.Kind, into actions: inout [PeerAction]) -> Bool {
        guard !batch.isEmpty, let first = batchFirst else { return true }
        let count = batch.operationCount
        let raw = batch.finish()
        batchFirst = nil
        let message = raw.count <= PeerProtocol.maxBatchBytes ? PeerMessage.encodeBatch(raw: raw, kind: kind) : nil
        guard let message, message.count + FrameCipher.tagBytes <= PeerProtocol.maxFrameBytes else {
            let what = count == 1
                ? "operation \(first) is too large to send to a peer (\(raw.count) bytes)"
                : "a batch of \(count) operations from \(first) is too large to send to a peer (\(raw.count) bytes)"
            fail(ConcordError(.operationTooLarge, what), tellingPeer: what, into: &actions)
            return false
        }
        guard sendMessage(message, into: &actions) else { return false }
        if kind == .push {
            summary.operationsSent += count
            pushOperationsWritten += count
            pushesUnacknowledged.append((pushOperationsWritten, raw.count))
            pushBytesUnacknowledged += raw.count
            return true
        }
        summary.batchesSent += 1
        summary.operationsSent += count - batchLastShared
        summary.lastSharedSent += batchLastShared
        operationsInBatchesSent += count
        batchLastShared = 0
        return true
    }

    /// Seals a message into a frame and sends it. `false` once the session has failed.
    private mutating func sendMessage(_ message: [UInt8], into actions: inout [PeerAction]) -> Bool {
        guard var sealer, let sealed = sealer.seal(message) else {
            fail(ConcordError(.counterExhausted, "the session has used all its frame counters"), into: &actions)
            return false
        }
        self.sealer = sealer
        emit(Frame.encode(sealed), into: &actions)
        return true
    }

    /// Ends the session. Past the handshake, and with `tellingPeer`, the peer is sent an `error`
    /// with that reason first, sealed with the next counter (nothing sealed is ever held back, so
    /// the peer can open it). The paths that tell the peer: a frame over the limit
    /// (`handleReceived`); a frame that fails authentication, a message out of order or that does
    /// not decode, a `versions` with this side's replica id, an `ack` of another count
    /// (`handleMessage`); an operation too large to send (`flushBatch`); and `abort(_:tellingPeer:)`.
    /// `ErrorDeliveryTests` has a test of each, from either side.
    private mutating func fail(_ failure: ConcordError, tellingPeer reason: String? = nil, into actions: inout [PeerAction]) {
        if let reason, case .established = phase, var sealer, let sealed = sealer.seal(PeerMessage.encodeError(reason)) {
            self.sealer = sealer
            emit(Frame.encode(sealed), into: &actions)
        }
        phase = .failed(failure)
        actions.append(.failed(failure))
    }

    /// Adds bytes to send, to the last `.send` action when it is the last action.
    private mutating func emit(_ bytes: [UInt8], into actions: inout [PeerAction]) {
        summary.bytesSent += bytes.count
        if case .send(var pending)? = actions.last {
            actions.removeLast()
            pending += bytes
            actions.append(.send(pending))
        } else {
            actions.append(.send(bytes))
        }
    }

    /// The last shared operations of two version vectors (SPEC.md §15.6, §9.1): for each replica
    /// both name with a seq of at least 1, the one at the lesser seq, which both sides hold; in
    /// byte order of replica id.
    static func lastShared(_ local: VersionVector, _ peer: VersionVector) -> [OperationID] {
        peer.sorted.compactMap { replica, seq in
            let shared = min(seq, local[replica])
            return shared > 0 ? OperationID(replica: replica, seq: shared) : nil
        }
    }

    /// An upper bound, give or take, of an operation's encoded size (SPEC.md §8.3), used to start a
    /// new batch before an operation that would take the open one well past its target.
    package static func sizeBound(_ operation: Op) -> Int {
        var size = 1 + 10 + 17
        switch operation.action {
        case let .assign(field, value):
            size += 1
            if case .other(let name) = field { size += 10 + name.string.utf8.count }
            if case .string(let text) = value { size += 11 + text.utf8.count } else { size += 11 }
        case let .addTag(tag):
            size += 10 + tag.string.utf8.count
        case let .removeTag(tag, observed):
            size += 20 + tag.string.utf8.count + observed.count * 26
        }
        return size
    }

    // MARK: Test hooks

    /// Seals and sends any message, valid or not, as if this side had composed it (for tests of
    /// what a hostile peer holding the key could send).
    mutating func sendUncheckedMessage(_ message: [UInt8]) -> [PeerAction] {
        var actions: [PeerAction] = []
        _ = sendMessage(message, into: &actions)
        return actions
    }

    /// Moves this side's sealing counter (for tests of counter exhaustion).
    mutating func setSendCounter(_ counter: UInt64) {
        guard let sealer else { return }
        self.sealer = FrameCipher(key: sealer.key, counter: counter)
    }

    /// Moves this side's opening counter (for tests of counter exhaustion).
    mutating func setReceiveCounter(_ counter: UInt64) {
        guard let opener else { return }
        self.opener = FrameCipher(key: opener.key, counter: counter)
    }
}
