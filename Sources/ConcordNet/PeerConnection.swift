import ConcordCore
import ConcordKeys
import ConcordPeer
import ConcordStore
import Foundation
import NIOCore
import NIOPosix

/// Carries one `PeerSession` over one NIO channel (SPEC.md §15), as its doc comment asks:
///
/// - **No store work on the event loop.** The session (its crypto, batch decoding) and every store
///   call run on the connection's own serial queue (`worker`); the event loop only moves bytes.
///   What arrives is handed to the worker in order; what the session returns is written in order.
/// - **Decoding and sorting overlap logging.** The session's batches are one merge in parts
///   (`MergeInParts`, SPEC.md §5.6). The worker reads and sorts each `.apply`'s operations
///   (`prepareMerge`, through the store's read pool, which never waits for a writer) and hands
///   them to the store's queue for writes (`enqueueWrite`, in order), which logs them as the next
///   part. Meanwhile the worker decodes the batches that follow (`readAhead()`) and prepares the
///   next `.apply` (two may be out), and goes on sending. The session answers nothing after the
///   batches until they have committed (`batchApplied()`). Its end waits for the parts under way,
///   then applies what they logged to the records, each record once, before it reports.
/// - **Operations stream with backpressure.** A reader thread walks the log
///   (`forEachOperation(since:)`, through the store's read pool, so applying the peer's batches
///   meanwhile is never blocked by it) and hands over chunks of a few thousand operations,
///   at most two waiting; the worker seals them while less than `outboundBufferBytes` wait to be
///   written. Memory stays bounded whatever the size of the log.
/// - **Inbound flow control.** What arrives waits in the inbox while the session waits for its
///   parts (`waitsForMerges`), and the channel stops reading while more than
///   `inboundBufferBytes` wait; reading and sending never wait for each other, so two peers that
///   stream at once cannot deadlock.
/// - **Bounds.** The handshake timeout and the idle timeout end the session; after a failure the
///   side flushes its last words (an `error`), closes its output, drops what still arrives for a
///   moment, and closes.
final class PeerConnection: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is confined as marked below, to the connection's
    // serial `worker` queue, to its jobs on the store's serial queue for writes, or to the
    // channel's event loop, or kept in `shared`; code on one side reaches the other's fields only
    // by hopping to it (`worker.async`, `store.enqueueWrite`, `eventLoop.execute`). The rest is
    // immutable.
    let channel: any Channel
    let store: ConcordStore
    let configuration: PeerTransportConfiguration
    let peer: String
    private let worker: DispatchQueue
    /// How many `.apply` may be out at once: one being logged, the next one prepared and waiting.
    private static let maxAppliesInFlight = 2
    private let clock: any PeerClock
    private let started: NIODeadline
    private let outcome: EventLoopPromise<PeerSessionRecord>
    private let progress: (@Sendable (PeerProgress) -> Void)?

    private let role: PeerRole
    /// The key and version vector the session starts with; a server reads them from the store
    /// on the worker when the connection opens (never on the event loop), so that each session
    /// uses the key the store holds then (SPEC.md §15.1).
    private let initialKey: SyncKey?
    private let initialVersions: VersionVector?
    /// Whether this side asks for (a client) or accepts (a server) a live session (SPEC.md §15.10).
    private let offersLive: Bool
    /// Called once a live session has entered its live phase, with what its exchange moved.
    private let onLive: (@Sendable (PeerSummary) -> Void)?

    // Confined to `worker`.
    /// The session, from the moment the connection is active and its key and versions are known.
    private var session: PeerSession?
    /// The key the session authenticated with: a batch is applied, and operations are sent, only
    /// while the store still holds it.
    private var key: SyncKey?
    private var feed: OperationFeed?
    private var streaming = false
    private var ended = false
    /// The channel has closed: the session hears of it once the inbox is empty (`takeInbox`).
    private var inputClosed = false
    /// Parts handed to the store's write queue and not yet logged, and the final apply while it runs.
    private var mergesUnderWay = 0
    /// The final apply of what the session logged has been handed to the store's write queue
    /// (`finishEnding`).
    private var appliedAtEnd = false
    /// How the session ended, kept until the merges under way have finished (`finishEnding()`).
    private var ending: (failure: ConcordError?, summary: PeerSummary?, flush: Bool)?
    private var applies = 0
    private var newOperations = 0
    private var farFuture: Timestamp?
    private var lastWrite: EventLoopFuture<Void>?
    /// In the live phase: the task that follows the store's commits (`changes()`), each of which
    /// may bring something to push.
    private var following: Task<Void, Never>?

    // Confined to this connection's jobs on the store's write queue (`store.enqueueWrite`), which
    // runs one job at a time.
    /// The peer's batches, one merge logged part by part and applied at the session's end
    /// (SPEC.md §15.6): created with the first part, once the session's key is known.
    private var merge: MergeInParts?
    /// A part has failed: those queued after it are not logged (a clash must stop every batch
    /// after it, and the session has failed in any case).
    private var aMergeFailed = false

    /// Touched by the event loop and the worker.
    private let shared = LockedState(Shared())

    private struct Shared {
        var outboundPending = 0
        var inboundPending = 0
        /// Bytes received and not yet handed to the session, and whether the worker will take
        /// them. The worker takes all that came at once, so that the session may merge the
        /// batches among them together (`batchesPerApply`), and leaves them here while the
        /// session waits for its merges (`waitsForMerges`), so that they count in `inboundPending`.
        var inbox: [UInt8] = []
        var inboxTaken = true
        var pumpWaitsForWrites = false
        /// Whether the channel has stopped reading (set on the event loop, read by the worker).
        var readingPaused = false
        /// Whether the channel has closed: nothing more is sent to its event loop.
        var channelGone = false
    }

    // Confined to the channel's event loop.
    private var readingPaused = false
    private var lastActivity: NIODeadline
    private var handshakeTimer: PeerTimer?
    private var idleTimer: PeerTimer?
    private var closing = false
    /// In the live phase: the heartbeat's timer, when bytes last arrived, and when a write last
    /// completed (SPEC.md §15.10 rule 5).
    private var heartbeatTimer: PeerTimer?
    private var lastReceived: NIODeadline
    private var lastWritten: NIODeadline

    /// The record of the session, once it has ended (finished or failed).
    var result: EventLoopFuture<PeerSessionRecord> { outcome.futureResult }

    init(
        channel: any Channel, role: PeerRole, store: ConcordStore, key: SyncKey?, localVersions: VersionVector?,
        configuration: PeerTransportConfiguration, progress: (@Sendable (PeerProgress) -> Void)?,
        offersLive: Bool = false, onLive: (@Sendable (PeerSummary) -> Void)? = nil
    ) {
        self.offersLive = offersLive
        self.onLive = onLive
        self.channel = channel
        self.store = store
        self.configuration = configuration
        self.progress = progress
        clock = configuration.clock
        started = clock.now()
        lastActivity = started
        lastReceived = started
        lastWritten = started
        peer = channel.remoteAddress?.shown ?? "?"
        worker = DispatchQueue(label: "concord.peer \(peer)")
        outcome = channel.eventLoop.makePromise(of: PeerSessionRecord.self)
        self.role = role
        initialKey = key
        initialVersions = localVersions
    }

    // MARK: Event loop side

    /// The channel is active: start the session and its timers. On the event loop.
    func activate() {
        lastActivity = clock.now()
        handshakeTimer = clock.schedule(at: started + TimeAmount(configuration.handshakeTimeout), on: channel.eventLoop) { [self] in
            timeOut(ConcordError(.timedOut, "the handshake took over \(configuration.handshakeTimeout.shown)"), handshakeOnly: true)
        }
        armIdleTimer()
        // A connection refused at once (a full server) has ended before it started.
        worker.async { [self] in
            guard !ended else { return }
            let key: SyncKey
            let versions: VersionVector
            do {
                guard let held = try initialKey ?? store.syncKey() else {
                    end(ConcordError.noSyncKey(at: store.path))
                    return
                }
                key = held
                versions = try initialVersions ?? store.versionVector()
            } catch {
                end(ConcordError(.local, "this side cannot read its store: \(error)", cause: error))
                return
            }
            self.key = key
            session = PeerSession(
                role: role, key: key, localReplica: store.replicaID, localVersions: versions,
                batchesPerApply: configuration.batchesPerApply, maxAppliesInFlight: Self.maxAppliesInFlight, live: offersLive,
                highestVersion: configuration.highestVersion, describeError: configuration.describeError)
            perform(session!.start())
        }
    }

    /// Wakes up exactly when the session will have been idle for the idle timeout, as far as is
    /// known now; a wake-up that finds activity since then sleeps again until the new deadline.
    /// (Activity does not move the timer itself: bytes come and go far more often than it fires.)
    /// On the event loop.
    private func armIdleTimer() {
        let idle = TimeAmount(configuration.idleTimeout)
        idleTimer = clock.schedule(at: lastActivity + idle, on: channel.eventLoop) { [self] in
            guard !closing, idleTimer != nil else { return }
            if clock.now() - lastActivity >= idle {
                timeOut(ConcordError(.timedOut, "the session was idle for \(configuration.idleTimeout.shown)"), handshakeOnly: false)
            } else {
                armIdleTimer()
            }
        }
    }

    /// Bytes arrived. On the event loop.
    func received(_ buffer: ByteBuffer) {
        lastActivity = clock.now()
        lastReceived = lastActivity
        let wakeWorker = shared.withLock { shared in
            shared.inbox.append(contentsOf: buffer.readableBytesView)
            shared.inboundPending += buffer.readableBytes
            let wake = shared.inboxTaken
            shared.inboxTaken = false
            return wake
        }
        if wakeWorker { worker.async { self.takeInbox() } }
    }

    /// Hands the session everything received so far, unless it waits for its merges (a merge
    /// that finishes takes the inbox then, `applied`). On the worker.
    private func takeInbox() {
        if !ended, session?.waitsForMerges == true {
            shared.withLock { $0.inboxTaken = true }
            return
        }
        let bytes = shared.withLock { shared in
            shared.inboxTaken = true
            let bytes = shared.inbox
            shared.inbox = []
            return bytes
        }
        if !ended, !bytes.isEmpty {
            perform(session?.receive(bytes) ?? [])
            // A pushAck may have opened the window for what waits to be pushed.
            if session?.isLive == true { pushWhatIsNew() }
        }
        let (resume, drained) = shared.withLock { shared in
            shared.inboundPending -= bytes.count
            return (
                shared.readingPaused && !shared.channelGone && shared.inboundPending <= configuration.inboundBufferBytes / 2,
                shared.inbox.isEmpty
            )
        }
        if resume { channel.eventLoop.execute { self.updateReading() } }
        if inputClosed, drained, !ended { perform(session?.connectionClosed() ?? []) }
    }

    /// Stops reading while too much waits for the worker; reads again once it has caught up.
    /// On the event loop.
    func updateReading() {
        let pending = shared.withLock { $0.inboundPending }
        if !readingPaused, pending > configuration.inboundBufferBytes {
            readingPaused = true
            shared.withLock { $0.readingPaused = true }
            channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
        } else if readingPaused, pending <= configuration.inboundBufferBytes / 2 {
            readingPaused = false
            shared.withLock { $0.readingPaused = false }
            channel.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in }
        }
    }

    /// The connection has closed. On the event loop.
    func inactive() {
        shared.withLock { $0.channelGone = true }
        handshakeTimer?.cancel()
        idleTimer?.cancel()
        idleTimer = nil
        heartbeatTimer?.cancel()
        heartbeatTimer = nil
        worker.async { [self] in
            // Nothing more can be sent; the session may still wait for its merges to end, and
            // hears of the close once it has had every byte that arrived (the peer's last words).
            streaming = false
            feed?.cancel()
            feed = nil
            inputClosed = true
            takeInbox()
        }
    }

    private func timeOut(_ failure: ConcordError, handshakeOnly: Bool) {
        worker.async { [self] in
            guard !ended, !handshakeOnly || session?.isHandshakeComplete != true else { return }
            abortOnWorker(failure)
        }
    }

    /// Ends the session from this side (a server shutting down). From any thread.
    func abort(_ failure: ConcordError) {
        worker.async { [self] in abortOnWorker(failure) }
    }

    /// Ends a live session from this side, as its normal end (SPEC.md §15.10 rule 6: the user
    /// stops the client): closes once what was written is flushed. Before the live phase, the
    /// session fails as stopped. From any thread.
    func stop() {
        worker.async { [self] in
            guard !ended else { return }
            if session?.isLive == true {
                end(nil)
            } else {
                abortOnWorker(ConcordError(.local, "stopped"))
            }
        }
    }

    /// Ends the session, telling the peer why once past the handshake (`tellingPeer`, or the
    /// failure's own message). A connection ended before its session started just closes.
    private func abortOnWorker(_ failure: ConcordError, tellingPeer reason: String? = nil) {
        guard !ended else { return }
        guard session != nil else {
            end(failure)
            return
        }
        perform(session!.abort(failure, tellingPeer: reason))
    }

    /// Whether the store still holds the key this session authenticated with. Once it does not
    /// (`syncctl key generate --force` or `key import --force` by any process), the session ends:
    /// the peer holds a replaced key, and must not be served (SPEC.md §15.1).
    private func keyStillHeld() -> Bool {
        let held: Bool
        do {
            held = try store.syncKeyBytes() == key?.bytes
        } catch {
            abortOnWorker(ConcordError(.local, "this side cannot read its store: \(error)", cause: error))
            return false
        }
        if !held { abortOnWorker(Self.keyReplaced, tellingPeer: Self.keyReplacedForPeer) }
        return held
    }

    static let keyReplaced = ConcordError(.keyReplaced, "this store's sync key was replaced during the session; peers need the new key")
    static let keyReplacedForPeer = "its sync key was replaced during the session; this side needs the new key"

    // MARK: Worker side

    private func perform(_ actions: [PeerAction]) {
        for action in actions {
            // A failure may have ended the session: the rest of its list (a `.needOperations`)
            // is moot.
            if ended { return }
            switch action {
            case .send(let bytes):
                write(bytes)
            case .apply(let operations):
                startApplying(operations)
            case .finishMerge:
                finishMerge()
            case .needOperations(let since, let lastShared):
                startStreaming(since: since, lastShared: lastShared)
            case .finished(let summary):
                end(nil, summary: summary)
            case .live(let summary):
                enterLivePhase(summary)
            case .failed(let failure):
                end(failure)
            }
        }
    }

    /// Prepares an `.apply` here and hands it to the store's write queue, which logs it as the next part of
    /// the session's merge, then decodes what follows while it is logged (and may prepare the next
    /// `.apply`).
    private func startApplying(_ operations: [Op]) {
        mergesUnderWay += 1
        let prepared = Result { () throws(ConcordError) in try store.prepareMerge(operations) }
        // The key is checked inside each part's own transaction: a key replaced by another
        // process at any moment before it stops this batch.
        let keyBytes = key?.bytes ?? []
        // A push shows in the records as soon as it is held (SPEC.md §15.10 rule 3).
        let applyNow = session?.isLive == true
        store.enqueueWrite { [self] in
            let result =
                aMergeFailed
                ? .failure(ConcordError(.local, "not merged: a merge before it failed"))
                : prepared.flatMap { prepared in
                    Result { () throws(ConcordError) in
                        if merge == nil { merge = MergeInParts(into: store, ifSyncKeyIs: keyBytes) }
                        let report = try merge!.log(prepared)
                        // Records never lag more than a merge's logging bound behind the log. The
                        // part is held either way: an apply that fails here is tried again at the
                        // end of the input, which reports it then.
                        if applyNow || merge!.isFull { try? merge!.apply() }
                        return report
                    }
                }
            if case .failure = result { aMergeFailed = true }
            worker.async { self.applied(result) }
        }
        perform(session?.readAhead() ?? [])
    }

    /// Applies what the parts logged to their records, once the peer's batches have all arrived
    /// and committed; the `ack` follows.
    private func finishMerge() {
        mergesUnderWay += 1
        store.enqueueWrite { [self] in
            let result = Result { () throws(ConcordError) in try merge?.apply() }
            worker.async { [self] in
                mergesUnderWay -= 1
                if case .failure(let error) = result {
                    abortOnWorker(ConcordError(.local, "this side cannot apply the peer's operations to their records: \(error)", cause: error))
                }
                guard !ended else { return finishEnding() }
                perform(session?.batchApplied() ?? [])
                if !ended { takeInbox() }
            }
        }
    }

    /// Applies what the session logged to its records, whether the session finished or failed
    /// (what was logged is held, and was received under the session's key), then finishes ending.
    private func applyAtEnd() {
        appliedAtEnd = true
        mergesUnderWay += 1
        store.enqueueWrite { [self] in
            let result = Result { () throws(ConcordError) in try merge?.apply() }
            worker.async { [self] in
                mergesUnderWay -= 1
                if case .failure(let error) = result, let (failure, summary, flush) = ending, failure == nil {
                    ending = (
                        ConcordError(
                            .local, "this side holds the peer's operations but cannot apply them to their records yet: \(error)",
                            cause: error),
                        summary, flush)
                }
                finishEnding()
            }
        }
    }

    /// The merge of an `.apply` has finished. On the worker.
    private func applied(_ result: Result<MergeReport, ConcordError>) {
        mergesUnderWay -= 1
        switch result {
        case .success(let report):
            newOperations += report.newOperationCount
            if let far = report.farFutureTimestamp { farFuture = max(farFuture ?? far, far) }
        case .failure(let error) where error.code == .keyReplaced:
            abortOnWorker(Self.keyReplaced, tellingPeer: Self.keyReplacedForPeer)
        case .failure(let error) where error.code == .clash:
            // Two stores that share a replica id (SPEC.md §9.1): the line of §9.1 itself, on
            // this side and, in the error, on the peer's.
            abortOnWorker(error)
        case .failure(let error):
            abortOnWorker(ConcordError(.local, "this side cannot apply a batch: \(error)", cause: error))
        }
        // The session may have ended meanwhile (a frame read ahead failed, the peer closed).
        guard !ended else {
            finishEnding()
            return
        }
        applies += 1
        reportProgress()
        if let drop = configuration.dropConnectionAfterApplies, applies >= drop {
            // As if the process were killed: no error, no ack, the connection just goes.
            end(ConcordError(.local, "dropped the connection after \(applies) applies (test)"), flush: false)
            return
        }
        // The batches have committed: the session reads on (an ack may follow), and takes what
        // waited in the inbox meanwhile.
        perform(session?.batchApplied() ?? [])
        if !ended { takeInbox() }
        // A pushAck held behind the part may have opened the window for what waits to be pushed.
        if !ended, session?.isLive == true { pushWhatIsNew() }
    }

    // MARK: The live phase

    /// The exchange of a live session is done: follow the store's commits and push what the peer
    /// lacks as they land, and keep the connection's heartbeat (SPEC.md §15.10). On the worker.
    private func enterLivePhase(_ summary: PeerSummary) {
        onLive?(summary)
        // Subscribed before the log is read below: a commit between the two is heard of, never
        // missed (the observer starts from what the store holds as it is made).
        let changes = store.changes()
        let worker = worker
        following = Task { [weak self] in
            let reason: String
            do {
                for try await _ in changes {
                    guard let self else { return }
                    worker.async { self.pushWhatIsNew() }
                }
                // Cancelled: the session ended.
                return
            } catch {
                reason = (error as? ConcordError)?.message ?? String(describing: error)
            }
            // The store cannot be followed (no file descriptor left, say, or its file replaced
            // by another): the session cannot push what lands, and ends, for the client to
            // connect again (or, its store replaced, to end: `PeerClient.live`).
            guard !Task.isCancelled, let self else { return }
            worker.async {
                self.abortOnWorker(ConcordError(.local, "this side cannot follow its store's commits: \(reason)"), tellingPeer: "it cannot follow its store's commits")
            }
        }
        channel.eventLoop.execute { [self] in
            // The idle timeout does not apply in the live phase; the heartbeat does.
            idleTimer?.cancel()
            idleTimer = nil
            guard !closing, channel.isActive else { return }
            lastReceived = clock.now()
            lastWritten = lastReceived
            armHeartbeat()
        }
        // What was committed since the exchange read the log.
        pushWhatIsNew()
    }

    /// Pushes what the store holds and the peer does not (`PeerSession.peerHolds`), read from the
    /// log a push at a time, while the session may push and the connection takes what is
    /// written (at most `outboundBufferBytes` wait: a peer that reads slowly is caught up from
    /// the log once it has taken them, SPEC.md §15.10 "A server's live peers"). On the worker.
    private func pushWhatIsNew() {
        while !ended, let session, session.isLive, session.mayPush {
            let full = shared.withLock { shared in
                guard shared.outboundPending >= configuration.outboundBufferBytes else { return false }
                shared.pumpWaitsForWrites = true
                return true
            }
            if full { return }  // a write's completion pushes again
            guard !inputClosed, keyStillHeld() else { return }
            // One push's worth at a time, so that the bounds are checked before each push.
            var operations: [Op] = []
            var bytes = 0
            do {
                try store.forEachOperation(notIn: session.peerHolds) { operation in
                    operations.append(operation)
                    bytes += PeerSession.sizeBound(operation)
                    return operations.count < PeerProtocol.maxBatchOperations && bytes < PeerProtocol.targetBatchBytes
                }
            } catch {
                abortOnWorker(ConcordError(.local, "this side cannot read its store: \(error)", cause: error))
                return
            }
            if operations.isEmpty { return }
            perform(self.session?.push(operations: operations) ?? [])
            reportProgress()
        }
    }

    /// Wakes every second in the live phase: pings a peer that this side has written nothing to
    /// for 5 s, and ends a session whose peer has sent nothing for 15 s while this side reads, or
    /// has taken none of what waits to be written for 15 s (SPEC.md §15.10 rule 5). On the
    /// event loop.
    private func armHeartbeat() {
        heartbeatTimer = clock.schedule(at: clock.now() + .seconds(1), on: channel.eventLoop) { [self] in
            guard !closing, heartbeatTimer != nil else { return }
            let now = clock.now()
            // The silence clock stops while this side does not read.
            if readingPaused { lastReceived = now }
            let waiting = shared.withLock { $0.outboundPending }
            let silence = TimeAmount(PeerProtocol.liveSilenceTimeout)
            if now - lastReceived >= silence {
                timeOut(ConcordError(.timedOut, "the peer went silent for \(PeerProtocol.liveSilenceTimeout.shown)"), handshakeOnly: false)
                return
            }
            if waiting > 0, now - lastWritten >= silence {
                timeOut(ConcordError(.timedOut, "the peer stopped reading for \(PeerProtocol.liveSilenceTimeout.shown)"), handshakeOnly: false)
                return
            }
            if waiting == 0, now - lastWritten >= TimeAmount(PeerProtocol.heartbeatInterval) {
                lastWritten = now  // one ping per interval, whatever the write's completion says
                worker.async { [self] in
                    guard !ended else { return }
                    perform(session?.ping() ?? [])
                }
            }
            armHeartbeat()
        }
    }

    private func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        let count = bytes.count
        shared.withLock { $0.outboundPending += count }
        // The callback is attached before the write is handed over, so that it runs as the write
        // completes, in the same turn of the event loop: the idle timer sees the activity at its
        // time, not whenever this thread would have got round to attaching it.
        let promise = channel.eventLoop.makePromise(of: Void.self)
        lastWrite = promise.futureResult
        promise.futureResult.whenComplete { [self] _ in
            // On the event loop.
            lastActivity = clock.now()
            lastWritten = lastActivity
            let resume = shared.withLock { shared in
                shared.outboundPending -= count
                guard shared.pumpWaitsForWrites, shared.outboundPending <= configuration.outboundBufferBytes / 2 else { return false }
                shared.pumpWaitsForWrites = false
                return true
            }
            if resume { worker.async { self.pump() } }
        }
        channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: promise)
    }

    private func startStreaming(since: VersionVector, lastShared: [OperationID]) {
        streaming = true
        feed = OperationFeed(
            store: store, lastShared: lastShared, since: since, chunk: configuration.readChunkOperations,
            available: { [self] in worker.async { self.pump() } })
    }

    /// Seals what the feed has ready while the connection takes it (or, in the live phase, what
    /// there is to push).
    private func pump() {
        if session?.isLive == true { return pushWhatIsNew() }
        guard streaming, !ended, let feed else { return }
        while true {
            let full = shared.withLock { shared in
                guard shared.outboundPending >= configuration.outboundBufferBytes else { return false }
                shared.pumpWaitsForWrites = true
                return true
            }
            if full { return }  // a write's completion pumps again
            guard let item = feed.take() else { return }  // the feed pumps again when it has more
            switch item {
            case .operations(let operations):
                guard keyStillHeld() else { return }
                perform(session?.send(operations: operations) ?? [])
                reportProgress()
            case .end:
                streaming = false
                self.feed = nil
                perform(session?.finishSending() ?? [])
                return
            case .failed(let error):
                streaming = false
                self.feed = nil
                abortOnWorker(ConcordError(.local, "this side cannot read its store: \(error)", cause: error))
                return
            }
            if ended { return }
        }
    }

    private func reportProgress() {
        guard let progress else { return }
        guard let summary = session?.summary else { return }
        progress(PeerProgress(
            peer: peer, operationsReceived: summary.operationsReceived, operationsSent: summary.operationsSent,
            bytesReceived: summary.bytesReceived, bytesSent: summary.bytesSent))
    }

    /// The session has ended: report it, and close once what was written is flushed (after a merge
    /// under way, if there is one, has finished).
    private func end(_ failure: ConcordError?, summary: PeerSummary? = nil, flush: Bool = true) {
        guard !ended else { return }
        ended = true
        streaming = false
        feed?.cancel()
        feed = nil
        following?.cancel()
        following = nil
        ending = (failure, summary, flush)
        finishEnding()
    }

    /// Reports the session's end and closes, once no merge is under way. On the worker.
    private func finishEnding() {
        guard mergesUnderWay == 0, ending != nil else { return }
        guard appliedAtEnd else { return applyAtEnd() }
        let (failure, summary, flush) = ending!
        ending = nil
        var made = PeerSessionRecord(
            peer: peer, summary: summary ?? session?.summary ?? PeerSummary(role: role), failure: failure, duration: Duration(clock.now() - started))
        made.newOperations = newOperations
        made.farFutureTimestamp = farFuture
        made.peerHeardWhileLive = session?.peerHeardWhileLive ?? false
        let record = made
        let written = flush ? lastWrite : nil
        let linger = failure != nil && flush
        channel.eventLoop.execute { [self] in
            guard let written else {
                closeChannel(linger: false)
                outcome.succeed(record)
                return
            }
            // A peer that takes nothing more (its window is full, it stopped reading) gets no
            // longer than the linger timeout for what was written to go out.
            let deadline = channel.eventLoop.scheduleTask(in: TimeAmount(configuration.lingerTimeout)) { [self] in
                guard !closing else { return }
                closeChannel(linger: false)
                outcome.succeed(record)
            }
            written.whenComplete { [self] _ in
                deadline.cancel()
                guard !closing else { return }
                closeChannel(linger: linger)
                outcome.succeed(record)
            }
        }
    }

    /// On the event loop. After a failure the output is closed first and the input drained for a
    /// moment (the peer's last bytes would otherwise turn the close into a reset, which may destroy
    /// the `error` just sent before the peer reads it).
    private func closeChannel(linger: Bool) {
        guard !closing else { return }
        closing = true
        handshakeTimer?.cancel()
        idleTimer?.cancel()
        idleTimer = nil
        heartbeatTimer?.cancel()
        heartbeatTimer = nil
        guard linger, channel.isActive else {
            channel.close(promise: nil)
            return
        }
        // Keep reading (what arrives is dropped: the session has ended) until the peer closes.
        readingPaused = false
        shared.withLock { $0.readingPaused = false }
        channel.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in }
        channel.close(mode: .output).whenFailure { [self] _ in channel.close(promise: nil) }
        channel.eventLoop.scheduleTask(in: TimeAmount(configuration.lingerTimeout)) { [self] in
            channel.close(promise: nil)
        }
    }
}

/// The channel handler of a peer connection: hands what happens on the channel to the connection.
final class PeerChannelHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let makeConnection: (any Channel) -> PeerConnection
    private(set) var connection: PeerConnection?

    init(makeConnection: @escaping (any Channel) -> PeerConnection) {
        self.makeConnection = makeConnection
    }

    func channelActive(context: ChannelHandlerContext) {
        let connection = makeConnection(context.channel)
        self.connection = connection
        connection.activate()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection?.received(Self.unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        connection?.updateReading()
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection?.inactive()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset or another socket error: the connection is gone; `channelInactive` follows.
        context.close(promise: nil)
    }
}

/// Reads the operations a peer lacks from the store on a thread of its own and hands them over in
/// chunks (`Handoff`), at most two waiting: the reader waits while the sender is behind, so memory
/// stays bounded by a few chunks however long the log.
final class OperationFeed: Sendable {
    enum Item {
        case operations([Op])
        case end
        case failed(any Error)
    }

    private let handoff: Handoff<Op>

    /// Reads the operations `lastShared` names (the last shared operations, SPEC.md §15.6), then
    /// those `since` does not cover, calling `available` whenever a chunk is ready.
    init(store: ConcordStore, lastShared: [OperationID], since: VersionVector, chunk: Int, available: @escaping @Sendable () -> Void) {
        let chunk = max(1, chunk)
        handoff = Handoff(depth: 2, onReady: available)
        handoff.startProducer(named: "concord.peer.feed") { handoff in
            func give(_ operations: [Op]) throws {
                // Cancelled: the session has ended, and nobody takes what follows.
                guard handoff.give(operations) else { throw CancellationError() }
            }
            // Read through the store's read pool, so that a long read never holds up the writes
            // of this or any other session (SQLite's WAL mode lets it read while they write). A
            // store in memory has one connection, which reads what writes: its operations are
            // read at once.
            let streams = store.path != ":memory:"
            // The store holds each (its version vector covers it), and never drops operations.
            let shared = try lastShared.compactMap { try store.operation($0) }
            for start in stride(from: 0, to: shared.count, by: chunk) {
                try give(Array(shared[start..<min(start + chunk, shared.count)]))
            }
            if streams {
                var pending: [Op] = []
                pending.reserveCapacity(chunk)
                try store.forEachOperation(since: since) { operation in
                    pending.append(operation)
                    if pending.count >= chunk {
                        try give(pending)
                        pending.removeAll(keepingCapacity: true)
                    }
                }
                if !pending.isEmpty { try give(pending) }
            } else {
                var all: [Op] = []
                try store.forEachOperation(since: since) { all.append($0) }
                for start in stride(from: 0, to: all.count, by: chunk) {
                    try give(Array(all[start..<min(start + chunk, all.count)]))
                }
            }
        }
    }

    /// The next item, or `nil` when none is ready yet (`available` is called when one is).
    func take() -> Item? {
        do {
            switch try handoff.poll() {
            case .chunk(let operations): return .operations(operations)
            case .end: return .end
            case .notYet: return nil
            }
        } catch {
            return .failed(error)
        }
    }

    /// Stops the reader; what it had read is dropped.
    func cancel() {
        handoff.cancel()
    }
}
