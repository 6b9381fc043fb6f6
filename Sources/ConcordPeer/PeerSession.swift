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
    /// Where the peer knew removes were dropped as stable (SPEC.md §5.8), once its versions
    /// message has arrived: empty before protocol version 9.
    public var peerDropped = VersionVector()
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
    /// after batches were received. Once the merge is applied, take `compacted`, the seqs the
    /// peer holds compacted past this side's vector, which the session's batches carried
    /// (SPEC.md §5.8, §15.10): `ConcordStore.holdCompacted(_:ifHolding:)`.
    case finishMerge(compacted: SeqRanges)
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
    /// Where this side knows removes were dropped as stable (SPEC.md §5.8): sent in the versions
    /// message of versions 9 and 10.
    package let localDropped: VersionVector
    private let key: SyncKey
    private let random: RandomBytes
    /// How this side words a failure for its peer, when it tells the peer why it ends.
    private let describeError: @Sendable (ConcordError) -> String
    /// Whether this side asks for (a client) or accepts (a server) a live session.
    private let offersLive: Bool
    /// The highest version this side speaks: a client proposes no higher (lower once a server
    /// refused those above it, SPEC.md §15.10), and a server accepts no higher (tests make a side
    /// of an older build with it).
    private let highestVersion: UInt16
    /// How many `.apply` (or `.finishMerge`) may be out, not yet confirmed by `batchApplied()`.
    private let maxAppliesInFlight: Int
    /// How many batches received one after the other one `.apply` may carry.
    private let batchesPerApply: Int

    /// Where the session is, and what it keeps there: each phase carries its own data.
    private var phase: Phase = .notStarted
    /// The bytes received and not yet cut into frames, in every phase (its size limit grows
    /// once the handshake is done).
    private var decoder = FrameDecoder(maxPayloadBytes: PeerProtocol.maxHandshakeFrameBytes)

    /// The session's protocol version: what a client proposes until the server answers, then
    /// what the handshake settled (SPEC.md §15.10, "Negotiation").
    package private(set) var version: UInt16 = PeerProtocol.version
    /// What the session has done so far.
    package private(set) var summary: PeerSummary
    /// Whether a message of the live phase (`push`, `pushAck`, `ping`, `pong`) has arrived from the
    /// peer: it keeps the session, not only answers a handshake and an exchange, which is what a
    /// live client counts as a success before it connects again (SPEC.md §15.10, "A live client").
    /// Like `summary`, it outlasts the session's end.
    package private(set) var peerHeardWhileLive = false

    private enum Phase: Sendable {
        case notStarted
        case clientAwaitingServerHello(clientHello: [UInt8], clientNonce: [UInt8])
        case serverAwaitingClientHello
        case serverAwaitingProof(keys: Handshake.Keys, transcript: [UInt8])
        /// The handshake is done: every frame is sealed, through the exchange and, in a live
        /// session, the live phase after it.
        case sealed(Sealed)
        case finished
        case failed(ConcordError)
        /// The phase only while `sealed` or `withSealed` changes `.sealed`'s data in place (so
        /// that it is not copied): nothing else can run then, so no query ever sees it.
        case modifying
    }

    /// What the sealed phase carries.
    fileprivate struct Sealed: Sendable {
        var sealer: FrameCipher
        var opener: FrameCipher
        /// What the peer holds as far as this side knows (SPEC.md §15.10 rule 1): what its
        /// `versions` covers, every operation received from it, and every operation written to it.
        var peerHolds = SeqRanges()
        /// What the peer sent in this session: never sent back.
        var received = SeqRanges()
        /// The batch (or push) being filled, and its first operation.
        var batch = OperationsBlock.Encoder()
        var batchFirst: OperationID?
        var inbound = Inbound()
        var exchange = Exchange()
        /// The live phase, once the exchange of a live session is done (SPEC.md §15.10). It
        /// follows the exchange within the sealed phase, on the same ciphers and with the same
        /// view of what the peer holds; the exchange stays as it ended, since what may arrive
        /// then is checked against it (a second `versions`, `ack` or `done` is refused).
        var live: Live?
    }

    /// What arrived and is on its way to the store.
    fileprivate struct Inbound: Sendable {
        /// The batches received for the next `.apply`.
        var group = Group()
        /// A message opened after batches that are still to be applied: one of another kind,
        /// handled once they have committed, or a batch that would take the group past the
        /// raw-size bound, the first of the next group. Handled as if it were still in the decoder.
        var heldMessage: [UInt8]?
        /// One entry per `.apply` (or `.finishMerge`) handed out and not yet confirmed by
        /// `batchApplied()`, in order: the push operations it carries (0 for batches). While any
        /// are out, the batches that follow are collected for the next one, and anything else
        /// waits in `heldMessage`.
        var appliesOut: [Int] = []
        /// The connection has closed: once nothing is left to apply, the session ends.
        var inputEnded = false
    }

    /// The operations of the batches (or pushes) received for the next `.apply`, how many
    /// batches, and the raw bytes they declare: at most those of one batch of the largest size
    /// (4 MiB), so that no `.apply` is more work than the largest single batch may be. The
    /// summary counts them once they are handed out, and so does `lastShared`, the last shared
    /// operations among them.
    fileprivate struct Group: Sendable {
        var operations: [Op] = []
        var batches = 0
        var rawBytes = 0
        var lastShared = 0
        var pushOperations = 0

        var isEmpty: Bool { operations.isEmpty }
    }

    /// The exchange (SPEC.md §15.6): version vectors, then batches each way, `done`, and the
    /// `ack`s. A live session keeps it as it ended (everything received and acknowledged).
    fileprivate struct Exchange: Sendable {
        var receiving: Receiving = .versions
        var sending: Sending = .waitingForPeerVersions
        var ackReceived = false
        /// The peer's `done` has arrived: the `ack` goes out once the `.finishMerge` has committed.
        var ackOwed = false
        /// A `.needOperations` to return at the end of the current `receive`.
        var pendingNeed: (since: VersionVector, lastShared: [OperationID])?
        /// The last shared operations (SPEC.md §15.6): this side's not yet sent, and the peer's
        /// not yet received. Both sides compute the same set from the two version vectors.
        var lastSharedToSend: Set<OperationID> = []
        var lastSharedToReceive: Set<OperationID> = []
        /// The last shared operations in the open batch.
        var batchLastShared = 0
        /// Every operation in batches, each way, as the peer's ack counts them.
        var operationsInBatchesSent = 0
        var operationsInBatchesReceived = 0
        /// The compacted seqs the peer's batches carried, taken once its `done` has arrived.
        var compactedReceived = SeqRanges()
    }

    fileprivate enum Receiving: Sendable { case versions, batches, done }
    fileprivate enum Sending: Sendable { case waitingForPeerVersions, operations, done }

    /// The live phase (SPEC.md §15.10): the pushes each way and their acknowledgements.
    fileprivate struct Live: Sendable {
        /// Push operations written, and the `n` of the last `pushAck` received.
        var pushOperationsWritten = 0
        var pushOperationsAcknowledged = 0
        /// The pushes written and not wholly acknowledged: the count of push operations written
        /// up to the end of each, and its raw bytes; and the raw bytes of all of them.
        var pushesUnacknowledged: [(end: Int, rawBytes: Int)] = []
        var pushBytesUnacknowledged = 0
        /// Push operations received and logged so far (what this side's `pushAck` counts).
        var pushOperationsLogged = 0
        var nextPingNonce: UInt64 = 0
    }

    /// A failure met in the sealed phase's own work, which ends the session (`fail`), and what
    /// the peer is told.
    fileprivate struct Ending: Error {
        var failure: ConcordError
        var tellingPeer: String?
    }

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
        localDropped: VersionVector = VersionVector(), batchesPerApply: Int = 1, maxAppliesInFlight: Int = 1, live: Bool = false,
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
        self.localDropped = localDropped
        self.random = random
        self.describeError = describeError
        summary = PeerSummary(role: role)
    }

    // MARK: State

    /// Whether the handshake is complete (a transport's handshake timeout no longer applies then).
    package var isHandshakeComplete: Bool {
        switch phase {
        case .sealed, .finished: true
        case .failed, .notStarted, .clientAwaitingServerHello, .serverAwaitingClientHello, .serverAwaitingProof: false
        case .modifying: preconditionFailure("PeerSession: queried while its data changes")
        }
    }

    /// Whether the session is in its live phase (SPEC.md §15.10).
    package var isLive: Bool {
        guard case .sealed(let sealed) = phase else { return false }
        return sealed.live != nil
    }

    /// What the peer holds as far as this side knows (SPEC.md §15.10 rule 1): what its
    /// `versions` covers, every operation received from it, and every operation written to it.
    package var peerHolds: SeqRanges {
        guard case .sealed(let sealed) = phase else { return SeqRanges() }
        return sealed.peerHolds
    }

    /// Whether the session reads nothing more until a merge out is confirmed (`batchApplied()`):
    /// the batches of the next merge are complete, or a message waits for the merges, while as
    /// many merges as allowed are out. A transport leaves what arrives unread meanwhile, so that
    /// its inbound flow control bounds what waits.
    package var waitsForMerges: Bool {
        guard case .sealed(let sealed) = phase else { return false }
        let inbound = sealed.inbound
        return !inbound.appliesOut.isEmpty && (inbound.heldMessage != nil || inbound.group.batches >= batchesPerApply)
    }

    /// Whether, in the live phase, a push may be written: the operations pushed and not yet
    /// acknowledged are under the bounds of SPEC.md §15.10 rule 4.
    package var mayPush: Bool {
        guard case .sealed(let sealed) = phase, let live = sealed.live else { return false }
        return live.pushOperationsWritten - live.pushOperationsAcknowledged < PeerProtocol.maxUnacknowledgedPushOperations
            && live.pushBytesUnacknowledged < PeerProtocol.maxUnacknowledgedPushBytes
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
        case .clientAwaitingServerHello, .serverAwaitingClientHello, .serverAwaitingProof, .sealed: true
        case .modifying: preconditionFailure("PeerSession: queried while its data changes")
        }
    }

    private var isSealed: Bool {
        if case .sealed = phase { return true }
        return false
    }

    /// The sealed phase's data, read and changed in place: a field at a time. Work that also
    /// counts in the summary or may end the session (sealing frames, filling batches) goes
    /// through `withSealed`. Only in the sealed phase: every use is behind `isSealed`, or on a
    /// path only that phase takes (a live kind of message, a push).
    private var sealed: Sealed {
        _read {
            guard case .sealed(let sealed) = phase else { preconditionFailure("PeerSession: not in the sealed phase") }
            yield sealed
        }
        _modify {
            guard case .sealed(var sealed) = phase else { preconditionFailure("PeerSession: not in the sealed phase") }
            phase = .modifying
            defer { phase = .sealed(sealed) }
            yield &sealed
        }
    }

    /// Runs `body` on the sealed phase's data, the summary and `actions`, in place: the work done
    /// an operation at a time. A failure it throws ends the session (`fail`); false then.
    @discardableResult
    private mutating func withSealed(
        into actions: inout [PeerAction], _ body: (inout Sealed, inout PeerSummary, inout [PeerAction]) throws(Ending) -> Void
    ) -> Bool {
        guard case .sealed(var sealed) = phase else { preconditionFailure("PeerSession: not in the sealed phase") }
        phase = .modifying
        let outcome = Result { () throws(Ending) in try body(&sealed, &summary, &actions) }
        phase = .sealed(sealed)
        guard case .failure(let ending) = outcome else { return true }
        fail(ending.failure, tellingPeer: ending.tellingPeer, into: &actions)
        return false
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
        precondition(isSealed && !sealed.inbound.appliesOut.isEmpty, "PeerSession.batchApplied() without an .apply")
        let pushed = sealed.inbound.appliesOut.removeFirst()
        guard pushed > 0 else { return handleReceived() }
        // Pushes arrive only in the live phase.
        sealed.live!.pushOperationsLogged += pushed
        var actions: [PeerAction] = []
        guard sendMessage(PeerMessage.encodeCount(.pushAck, UInt64(sealed.live!.pushOperationsLogged)), into: &actions) else { return actions }
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

    /// Handles the frames waiting in the decoder: the handshake's, then the sealed ones.
    private mutating func handleReceived() -> [PeerAction] {
        var actions: [PeerAction] = []
        while isActive, !isSealed, let frame = nextFrame(into: &actions) {
            handleHandshake(frame, into: &actions)
        }
        if isSealed { handleSealed(into: &actions) }
        return actions
    }

    /// Handles the sealed frames waiting in the decoder. Batches are collected into a group that
    /// one `.apply` hands out: it ends at `batchesPerApply` batches, before a batch that would
    /// take it past the raw-size bound, at a message of another kind, or where the decoder holds
    /// no further whole frame. While `.apply` actions are out, a complete group goes out too if
    /// `maxAppliesInFlight` allows, and otherwise (or while it is still growing) waits; a message
    /// of another kind waits until every batch before it has committed. The loop stops at each
    /// `.apply`, so that a transport starts merging it at once (and calls `readAhead()`).
    private mutating func handleSealed(into actions: inout [PeerAction]) {
        // Before anything held (the peer's ack may wait there): the peer hears first that its
        // operations are held.
        if sealed.exchange.ackOwed, sealed.inbound.appliesOut.isEmpty {
            sealed.exchange.ackOwed = false
            sendAck(into: &actions)
        }
        while isSealed {
            let inbound = sealed.inbound
            if let message = inbound.heldMessage, inbound.group.isEmpty, inbound.appliesOut.isEmpty || PeerMessage.isBatch(message) {
                sealed.inbound.heldMessage = nil
                handleOpened(message, into: &actions)
                continue
            }
            // The group is complete, or a message waits for it to commit.
            if inbound.heldMessage != nil || inbound.group.batches >= batchesPerApply {
                if inbound.appliesOut.count < maxAppliesInFlight { applyCollected(into: &actions) }
                break
            }
            guard let frame = nextFrame(into: &actions) else { break }
            handleMessage(frame, into: &actions)
        }
        // A group that is not complete goes out only to a store with nothing else to merge: it
        // may still grow while one is merging.
        if isSealed, sealed.inbound.appliesOut.isEmpty { applyCollected(into: &actions) }
        if isSealed, sealed.inbound.inputEnded, sealed.inbound.appliesOut.isEmpty { endClosed(into: &actions) }
        // Last, so that a driver that streams operations while carrying out this action writes
        // their frames after every frame sealed in this call (an ack among them).
        if isSealed, let need = sealed.exchange.pendingNeed {
            sealed.exchange.pendingNeed = nil
            actions.append(.needOperations(since: need.since, lastShared: need.lastShared))
        }
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
            case .sealed:
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
        guard isSealed else {
            // In the handshake, every whole frame received has been handled already.
            var actions: [PeerAction] = []
            endClosed(into: &actions)
            return actions
        }
        sealed.inbound.inputEnded = true
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
        precondition(isSealed && sealed.exchange.sending == .operations, "PeerSession.send(operations:) before .needOperations or after finishSending()")
        var actions: [PeerAction] = []
        let version = version
        withSealed(into: &actions) { sealed, summary, actions throws(Ending) in
            for operation in operations where !sealed.received.contains(operation.id) {
                try sealed.append(operation, kind: .batch, version: version, summary: &summary, into: &actions)
            }
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
        let version = version
        withSealed(into: &actions) { sealed, summary, actions throws(Ending) in
            for operation in operations where !sealed.peerHolds.contains(operation.id) {
                try sealed.append(operation, kind: .push, version: version, summary: &summary, into: &actions)
            }
            try sealed.flushBatch(kind: .push, summary: &summary, into: &actions)
        }
        return actions
    }

    /// In the live phase: a `ping` (SPEC.md §15.10 rule 5), for a side that has written nothing
    /// for a while.
    package mutating func ping() -> [PeerAction] {
        guard isActive, isLive else { return [] }
        var actions: [PeerAction] = []
        sealed.live!.nextPingNonce += 1
        _ = sendMessage(PeerMessage.encodeCount(.ping, sealed.live!.nextPingNonce), into: &actions)
        return actions
    }

    /// Sends the seqs the store holds compacted past the peer's vector (SPEC.md §5.8, §15.10), as
    /// read before the first operation sent, after the operations and before `finishSending()`:
    /// in batches of a session of version 7 or 8; in older versions, nothing.
    package mutating func send(compacted: SeqRanges) -> [PeerAction] {
        guard isActive, PeerProtocol.carriesCompaction(version) else { return [] }
        precondition(isSealed && sealed.exchange.sending == .operations, "PeerSession.send(compacted:) before .needOperations or after finishSending()")
        var actions: [PeerAction] = []
        withSealed(into: &actions) { sealed, summary, actions throws(Ending) in
            for (author, seqs) in compacted.runs {
                try sealed.appendCompacted(seqs, of: author, summary: &summary, into: &actions)
            }
        }
        return actions
    }

    /// Sends the last batch and `done`: everything the peer lacked has been sent. The session
    /// finishes once the peer's `done`, and its `ack` of everything this side sent, have arrived.
    package mutating func finishSending() -> [PeerAction] {
        guard isActive else { return [] }
        precondition(isSealed && sealed.exchange.sending == .operations, "PeerSession.finishSending() before .needOperations, or twice")
        var actions: [PeerAction] = []
        let sent = withSealed(into: &actions) { sealed, summary, actions throws(Ending) in
            try sealed.flushBatch(kind: .batch, summary: &summary, into: &actions)
            try sealed.seal(PeerMessage.doneMessage, summary: &summary, into: &actions)
        }
        if sent { sealed.exchange.sending = .done }
        return actions
    }

    // MARK: Handshake

    private mutating func handleHandshake(_ frame: [UInt8], into actions: inout [PeerAction]) {
        switch phase {
        case .serverAwaitingClientHello:
            handleClientHello(frame, into: &actions)
        case let .clientAwaitingServerHello(clientHello, clientNonce):
            handleServerHello(frame, clientHello: clientHello, clientNonce: clientNonce, into: &actions)
        case let .serverAwaitingProof(keys, transcript):
            handleClientProof(frame, keys: keys, transcript: transcript, into: &actions)
        case .notStarted, .sealed, .finished, .failed, .modifying:
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
        // A side that knows of removes dropped as stable speaks no version older than the one
        // that says so (SPEC.md §5.8): its peer could not pass it on.
        let lowest = localDropped.entries.isEmpty ? PeerProtocol.version : PeerProtocol.lowestWithDroppedRemoves
        let accepted: ClosedRange<UInt16> =
            switch (role, first) {
            case (.server, true): lowest...max(lowest, highestVersion)
            case (.client, true): (PeerProtocol.isLive(version) ? version - 1 : version)...version
            default: version...version
            }
        guard accepted.contains(parsed.version), parsed.version >= lowest else {
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
        decoder.maxPayloadBytes = PeerProtocol.maxFrameBytes
        phase = .sealed(Sealed(sealer: FrameCipher(key: sealing), opener: FrameCipher(key: opening)))
        _ = sendMessage(
            PeerMessage.encodeVersions(
                replica: localReplica, versions: localVersions, dropped: PeerProtocol.carriesDroppedRemoves(version) ? localDropped : nil),
            into: &actions)
    }

    // MARK: The sealed phase

    private mutating func handleMessage(_ frame: [UInt8], into actions: inout [PeerAction]) {
        let message: [UInt8]
        do {
            // The counter moves only when the frame opens.
            message = try sealed.opener.open(frame)
        } catch .authentication {
            fail(ConcordError(.authenticationFailed, "a frame failed authentication"),
                 tellingPeer: "it received a frame that failed authentication", into: &actions)
            return
        } catch {
            fail(ConcordError(.counterExhausted, "the session has used all its frame counters"), into: &actions)
            return
        }
        let inbound = sealed.inbound
        let waits =
            if let rawBytes = PeerMessage.declaredRawLength(of: message) {
                // A batch that would make the group more than the largest batch starts the next.
                // (Compared so that a declared length near the largest integer cannot overflow.)
                !inbound.group.isEmpty && rawBytes > PeerProtocol.maxBatchBytes - inbound.group.rawBytes
            } else {
                // Whatever follows batches waits until they have committed (an ack among them).
                !inbound.group.isEmpty || !inbound.appliesOut.isEmpty
            }
        if waits {
            sealed.inbound.heldMessage = message
        } else {
            handleOpened(message, into: &actions)
        }
    }

    /// Hands out the batches collected as one `.apply`, if there are any.
    private mutating func applyCollected(into actions: inout [PeerAction]) {
        let group = sealed.inbound.group
        guard !group.isEmpty else { return }
        sealed.inbound.group = Group()
        sealed.inbound.appliesOut.append(group.pushOperations)
        actions.append(.apply(group.operations))
        summary.batchesReceived += isLive ? 0 : group.batches
        summary.operationsReceived += group.operations.count - group.lastShared
        summary.lastSharedReceived += group.lastShared
    }

    /// Handles an opened message of the sealed phase.
    private mutating func handleOpened(_ message: [UInt8], into actions: inout [PeerAction]) {
        // The order is checked before the body is decoded.
        let type = PeerMessage.kind(of: message).flatMap(PeerMessage.Kind.init(rawValue:))
        let exchange = sealed.exchange
        let outOfOrder: String? =
            switch (type, exchange.receiving) {
            case (.error?, _), (nil, _): nil  // an error ends the session anywhere; decode reports an unknown type
            case (let type?, _) where type.isLive: isLive ? nil : "\(type.phrase) before the live phase"
            case (.ack?, .versions): "an ack message before versions"
            case (.ack?, _) where exchange.ackReceived: "a second ack message"
            case (.ack?, _) where exchange.sending != .done: "an ack message before this side's done"
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
            decoded = try PeerMessage.decode(message, version: version)
        } catch {
            fail(.violation(error.what), tellingPeer: "it received something the protocol does not allow: \(error.what)", into: &actions)
            return
        }
        // The order check above let a live kind through only in the live phase.
        if type?.isLive == true { peerHeardWhileLive = true }
        switch decoded {
        case let .versions(replica, versions, dropped):
            guard replica != localReplica else {
                let failure = ConcordError(.sameReplica, "both stores have replica id \(replica.hex); one is a copy of the other")
                fail(failure, tellingPeer: describeError(failure), into: &actions)
                return
            }
            summary.peerReplica = replica
            summary.peerVersions = versions
            summary.peerDropped = dropped
            let lastShared = Self.lastShared(localVersions, versions)
            sealed.peerHolds = SeqRanges(upTo: versions)
            sealed.exchange.receiving = .batches
            sealed.exchange.sending = .operations
            sealed.exchange.lastSharedToSend = Set(lastShared)
            sealed.exchange.lastSharedToReceive = Set(lastShared)
            sealed.exchange.pendingNeed = (versions, lastShared)
        case let .batch(operations, compacted):
            sealed.collect(batch: operations, rawBytes: PeerMessage.declaredRawLength(of: message) ?? 0)
            sealed.exchange.compactedReceived.formUnion(compacted)
        case let .push(operations):
            sealed.collect(push: operations, rawBytes: PeerMessage.declaredRawLength(of: message) ?? 0)
        case let .pushAck(count):
            let live = sealed.live!  // a live kind: the live phase
            guard count <= UInt64(live.pushOperationsWritten), count >= UInt64(live.pushOperationsAcknowledged) else {
                let what = "a pushAck message for \(count) operations; this side pushed \(live.pushOperationsWritten), and \(live.pushOperationsAcknowledged) were acknowledged"
                fail(.violation(what), tellingPeer: "it received something the protocol does not allow: \(what)", into: &actions)
                return
            }
            sealed.live!.acknowledge(through: Int(count))
        case let .ping(nonce):
            _ = sendMessage(PeerMessage.encodeCount(.pong, nonce), into: &actions)
        case .pong:
            break  // what it answers does not matter: bytes arrived
        case .done:
            sealed.exchange.receiving = .done
            // Every batch before it has been logged (a message waits for them). The records show
            // them before the ack goes out.
            if summary.batchesReceived > 0 {
                actions.append(.finishMerge(compacted: sealed.exchange.compactedReceived))
                sealed.inbound.appliesOut.append(0)
                sealed.exchange.ackOwed = true
            } else {
                sendAck(into: &actions)
            }
        case let .ack(count):
            guard count == UInt64(exchange.operationsInBatchesSent) else {
                let what = "an ack message for \(count) operations; this side sent \(exchange.operationsInBatchesSent)"
                fail(.violation(what), tellingPeer: "it received something the protocol does not allow: \(what)", into: &actions)
                return
            }
            sealed.exchange.ackReceived = true
            checkFinished(into: &actions)
        case let .error(reason):
            fail(ConcordError(.peerError, "the peer ended the session: \(PeerMessage.sanitized(reason))"), into: &actions)
        }
    }

    /// Tells the peer that this side holds every operation of its batches (and that its records
    /// show them).
    private mutating func sendAck(into actions: inout [PeerAction]) {
        guard sendMessage(PeerMessage.encodeAck(sealed.exchange.operationsInBatchesReceived), into: &actions) else { return }
        checkFinished(into: &actions)
    }

    /// The session has finished once the peer's `done` and its `ack` of everything this side sent
    /// have arrived (the ack comes only after this side's `done`); a live session enters its live
    /// phase then.
    private mutating func checkFinished(into actions: inout [PeerAction]) {
        guard sealed.exchange.receiving == .done, sealed.exchange.ackReceived else { return }
        if PeerProtocol.isLive(version) {
            sealed.live = Live()
            actions.append(.live(summary))
            return
        }
        phase = .finished
        actions.append(.finished(summary))
    }

    /// Seals a message into a frame and sends it. `false` once the session has failed.
    private mutating func sendMessage(_ message: [UInt8], into actions: inout [PeerAction]) -> Bool {
        withSealed(into: &actions) { sealed, summary, actions throws(Ending) in
            try sealed.seal(message, summary: &summary, into: &actions)
        }
    }

    /// Ends the session. Past the handshake, and with `tellingPeer`, the peer is sent an `error`
    /// with that reason first, sealed with the next counter (nothing sealed is ever held back, so
    /// the peer can open it). The paths that tell the peer: a frame over the limit
    /// (`nextFrame`); a frame that fails authentication, a message out of order or that does
    /// not decode, a `versions` with this side's replica id, an `ack` of another count
    /// (`handleMessage`, `handleOpened`); an operation too large to send (`flushBatch`); and
    /// `abort(_:tellingPeer:)`. `ErrorDeliveryTests` has a test of each, from either side.
    private mutating func fail(_ failure: ConcordError, tellingPeer reason: String? = nil, into actions: inout [PeerAction]) {
        if let reason, isSealed, let frame = sealed.sealer.seal(PeerMessage.encodeError(reason)) {
            emit(Frame.encode(frame), into: &actions)
        }
        phase = .failed(failure)
        actions.append(.failed(failure))
    }

    /// Adds bytes to send, to the last `.send` action when it is the last action.
    private mutating func emit(_ bytes: [UInt8], into actions: inout [PeerAction]) {
        Self.emit(bytes, summary: &summary, into: &actions)
    }

    fileprivate static func emit(_ bytes: [UInt8], summary: inout PeerSummary, into actions: inout [PeerAction]) {
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

    /// An upper bound of an operation's encoded size (SPEC.md §8.3), used to start a new batch
    /// before an operation that would take the open one well past its target.
    package static func sizeBound(_ operation: Op) -> Int { OperationsBlock.sizeBound(operation) }

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
        guard isSealed else { return }
        sealed.sealer = FrameCipher(key: sealed.sealer.key, counter: counter)
    }

    /// Moves this side's opening counter (for tests of counter exhaustion).
    mutating func setReceiveCounter(_ counter: UInt64) {
        guard isSealed else { return }
        sealed.opener = FrameCipher(key: sealed.opener.key, counter: counter)
    }
}

// MARK: The sealed phase's own work

extension PeerSession.Sealed {
    /// Takes a batch's operations into the group for the next `.apply`.
    mutating func collect(batch operations: [Op], rawBytes: Int) {
        for operation in operations {
            received.insert(operation.id)
            peerHolds.insert(operation.id)
            if !exchange.lastSharedToReceive.isEmpty, exchange.lastSharedToReceive.remove(operation.id) != nil { inbound.group.lastShared += 1 }
        }
        exchange.operationsInBatchesReceived += operations.count
        inbound.group.operations += operations
        inbound.group.batches += 1
        inbound.group.rawBytes += rawBytes
    }

    /// Takes a push's operations into the group for the next `.apply`.
    mutating func collect(push operations: [Op], rawBytes: Int) {
        for operation in operations {
            received.insert(operation.id)
            peerHolds.insert(operation.id)
        }
        inbound.group.operations += operations
        inbound.group.batches += 1
        inbound.group.rawBytes += rawBytes
        inbound.group.pushOperations += operations.count
    }

    /// Adds compacted seqs to the open batch, which goes out once full.
    mutating func appendCompacted(
        _ seqs: ClosedRange<UInt64>, of author: ReplicaID, summary: inout PeerSummary, into actions: inout [PeerAction]
    ) throws(PeerSession.Ending) {
        if batch.isEmpty { batchFirst = OperationID(replica: author, seq: seqs.lowerBound) }
        batch.appendCompacted(seqs, of: author)
        if batch.estimatedBytes >= PeerProtocol.targetBatchBytes { try flushBatch(kind: .batch, summary: &summary, into: &actions) }
    }

    /// Adds an operation to the open batch (or push), which goes out once full, or before an
    /// operation that would take it well past its target size.
    mutating func append(
        _ operation: Op, kind: PeerMessage.Kind, version: UInt16, summary: inout PeerSummary, into actions: inout [PeerAction]
    ) throws(PeerSession.Ending) {
        if !batch.isEmpty, batch.estimatedBytes + PeerSession.sizeBound(operation) > PeerProtocol.targetBatchBytes {
            try flushBatch(kind: kind, summary: &summary, into: &actions)
        }
        if operation.purges, !PeerProtocol.carriesPurges(version) {
            // A peer of a build older than purges would refuse them as malformed (SPEC.md §15.10).
            throw PeerSession.Ending(
                failure: ConcordError.cannotSendPurges(peer: version),
                tellingPeer: "its store holds purges, which protocol version \(version) cannot carry; upgrade Concord on this side")
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
        if !exchange.lastSharedToSend.isEmpty, exchange.lastSharedToSend.remove(operation.id) != nil { exchange.batchLastShared += 1 }
        if batch.operationCount >= PeerProtocol.maxBatchOperations || batch.estimatedBytes >= PeerProtocol.targetBatchBytes {
            try flushBatch(kind: kind, summary: &summary, into: &actions)
        }
    }

    /// Seals and sends the open batch (or push), if there is one.
    mutating func flushBatch(kind: PeerMessage.Kind, summary: inout PeerSummary, into actions: inout [PeerAction]) throws(PeerSession.Ending) {
        guard !batch.isEmpty, let first = batchFirst else { return }
        let count = batch.operationCount
        let raw = batch.finish()
        batchFirst = nil
        let message = raw.count <= PeerProtocol.maxBatchBytes ? PeerMessage.encodeBatch(raw: raw, kind: kind) : nil
        guard let message, message.count + FrameCipher.tagBytes <= PeerProtocol.maxFrameBytes else {
            let what = count == 1
                ? "operation \(first) is too large to send to a peer (\(raw.count) bytes)"
                : "a batch of \(count) operations from \(first) is too large to send to a peer (\(raw.count) bytes)"
            throw PeerSession.Ending(failure: ConcordError(.operationTooLarge, what), tellingPeer: what)
        }
        try seal(message, summary: &summary, into: &actions)
        if kind == .push {
            summary.operationsSent += count
            live!.pushed(count, rawBytes: raw.count)
            return
        }
        summary.batchesSent += 1
        summary.operationsSent += count - exchange.batchLastShared
        summary.lastSharedSent += exchange.batchLastShared
        exchange.operationsInBatchesSent += count
        exchange.batchLastShared = 0
    }

    /// Seals a message into a frame and sends it.
    mutating func seal(_ message: [UInt8], summary: inout PeerSummary, into actions: inout [PeerAction]) throws(PeerSession.Ending) {
        guard let sealed = sealer.seal(message) else {
            throw PeerSession.Ending(failure: ConcordError(.counterExhausted, "the session has used all its frame counters"))
        }
        PeerSession.emit(Frame.encode(sealed), summary: &summary, into: &actions)
    }
}

extension PeerSession.Live {
    /// A push of `count` operations and `rawBytes` raw bytes was written.
    mutating func pushed(_ count: Int, rawBytes: Int) {
        pushOperationsWritten += count
        pushesUnacknowledged.append((pushOperationsWritten, rawBytes))
        pushBytesUnacknowledged += rawBytes
    }

    /// The peer's `pushAck` of the first `count` push operations.
    mutating func acknowledge(through count: Int) {
        pushOperationsAcknowledged = count
        while let first = pushesUnacknowledged.first, first.end <= pushOperationsAcknowledged {
            pushesUnacknowledged.removeFirst()
            pushBytesUnacknowledged -= first.rawBytes
        }
    }
}
