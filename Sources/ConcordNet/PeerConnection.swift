import ConcordCore
import ConcordKeys
import ConcordPeer
import ConcordStore
import Foundation
import NIOCore

/// One peer session over one TCP connection (SPEC.md §15): one task, which owns the session and
/// everything about the connection, and handles one event at a time.
///
/// The task's helpers are child tasks that each do one thing and tell it what happened, as
/// events: the reader (bytes received), the writer (bytes written), the log reader (the next page
/// of operations the peer lacks), an alarm per timeout, and, in the live phase, the follower of
/// the store's commits. Store work runs off the task, as all async code runs it (`offloadRead`,
/// and `enqueueWrite` for the peer's batches, in order), and comes back as an event too. All of
/// them run on the connection's event loop (`EventLoopTaskExecutor`), as NIO runs a channel's
/// handlers, and the alarms ring by the loop's timers: a process whose shared threads are all
/// busy (an app's, or a test's that block) never stalls a session.
///
/// - **Decoding and sorting overlap logging.** The peer's batches are one merge in parts
///   (`MergeInParts`, SPEC.md §5.6). Each `.apply` is sorted through the store's read pool
///   (`prepareMerge`) and handed to the store's queue for writes, which logs it as the next part;
///   meanwhile the session decodes the batches that follow (`readAhead()`), and two parts may be
///   out. The session answers nothing after the batches until they have committed
///   (`batchApplied()`). Its end waits for the parts under way, then applies what they logged to
///   the records, each record once, before it reports.
/// - **Flow control.** The reader stops reading while more than `inboundBufferBytes` received
///   wait to be handled (`ReadCredit`); the session is handed nothing while it waits for its parts
///   (`waitsForMerges`). The log is read a page at a time, at most two ahead, and sealed while
///   less than `outboundBufferBytes` wait to be written. Reading and sending never wait for each
///   other, so two peers that stream at once cannot deadlock, and memory stays bounded whatever
///   the size of the log.
/// - **Ending.** The handshake and idle timeouts (the heartbeat in the live phase) end the
///   session. After a failure the side flushes its last words (an `error`), closes its output,
///   drops what still arrives for a moment, and closes.
final class PeerConnection: Sendable {
    private let control: AsyncStream<Event>.Continuation
    private let events: AsyncStream<Event>

    init() {
        (events, control) = AsyncStream<Event>.makeStream()
    }

    /// Runs the session over `channel` until it has ended, and returns its record. Called once, in
    /// a task that is never cancelled (a cancelled task's `AsyncStream`s end, and a stopped session
    /// still has events to handle: its last writes, the merges under way); `stop()` ends it.
    func run(over channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, _ settings: Settings) async -> PeerSessionRecord {
        let peer = channel.channel.remoteAddress?.shown ?? "?"
        let driver = SessionDriver(peer: peer, settings: settings, events: control)
        // `executeThenClose` fails only as the body's own error would, and the body never throws.
        try? await channel.executeThenClose { inbound, outbound in
            await driver.run(inbound: inbound, outbound: outbound, channel: channel.channel, events: events)
        }
        return driver.finalRecord()
    }

    /// Wraps a new connection's channel, on its event loop, for a connection to run over.
    static func wrap(_ channel: any Channel) -> EventLoopFuture<NIOAsyncChannel<ByteBuffer, ByteBuffer>> {
        channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel(wrappingChannelSynchronously: channel) }
    }

    /// Ends the session from this side, telling the peer why once past the handshake (a server
    /// shutting down). From any task.
    func abort(_ failure: ConcordError) { control.yield(.abort(failure)) }

    /// Ends a live session from this side, as its normal end (SPEC.md §15.10 rule 6: the user stops
    /// the client): it closes once what was written is flushed. Before the live phase, the session
    /// fails as stopped. From any task.
    func stop() { control.yield(.stop) }

    /// Closes the connection at once (a server whose grace to stop is over). From any task.
    func closeNow() { control.yield(.closeNow) }

    /// What a connection is run with.
    struct Settings: Sendable {
        var role: PeerRole
        var store: ConcordStore
        var configuration: PeerTransportConfiguration
        /// When the connection opened: the handshake timeout counts from it.
        var started: NIODeadline
        /// The key and version vector the session starts with; a server reads them from the store
        /// as the connection opens (nil here), so that each session uses the key the store holds
        /// then (SPEC.md §15.1).
        var key: SyncKey? = nil
        var versions: VersionVector? = nil
        /// Whether this side asks for (a client) or accepts (a server) a live session (SPEC.md §15.10).
        var offersLive = false
        /// Called once a live session has entered its live phase, with what its exchange moved.
        /// Like `progress` and `onEnd`, on the connection's event loop, which the loop's other
        /// sessions share: it must return quickly.
        var onLive: (@Sendable (PeerSummary) -> Void)? = nil
        var progress: (@Sendable (PeerProgress) -> Void)? = nil
        /// Called once with the session's record, as soon as it has ended and what it wrote is
        /// flushed: a side that failed may go on draining what still arrives (for up to the
        /// linger timeout) before `run` returns.
        var onEnd: (@Sendable (PeerSessionRecord) -> Void)? = nil
    }

    /// What the connection's task hears of, from its helpers and from outside.
    enum Event: Sendable {
        case received(ByteBuffer)
        /// The connection closed, or failed: nothing more arrives.
        case inputClosed
        /// The connection took bytes handed to the writer, at that time.
        case written(Int, at: NIODeadline)
        /// The output is closed, after everything written was flushed (or the connection is gone).
        case outputClosed
        /// A part of the merge was logged, or failed.
        case logged(Result<MergeReport, ConcordError>)
        /// What the parts logged was applied to the records (`atEnd`: the session's last apply).
        case mergeApplied(Result<Void, ConcordError>, atEnd: Bool)
        /// The log reader's next page: operations, or `[]` at the end of the log.
        case page(Result<[Op], ConcordError>)
        case alarm(Alarm.Kind)
        /// The store committed (in the live phase).
        case committed
        /// The store's commits can no longer be followed, for this reason.
        case cannotFollow(String)
        case stop
        case abort(ConcordError)
        case closeNow
    }
}

/// The state of one connection's session, owned by the connection's task: see `PeerConnection`.
private final class SessionDriver {
    private let peer: String
    private let settings: PeerConnection.Settings
    private var store: ConcordStore { settings.store }
    private var configuration: PeerTransportConfiguration { settings.configuration }
    private let clock: any PeerClock
    /// The linger timeout's: the system's, whatever clock a test moves by hand for the timeouts
    /// of SPEC.md §15.7.
    private let lingerClock = LivePeerClock()
    private var channel: (any Channel)?
    private let events: AsyncStream<PeerConnection.Event>.Continuation
    /// How many `.apply` may be out at once: one being logged, the next one prepared and waiting.
    private static let maxAppliesInFlight = 2

    // The helpers, started by `run`.
    private let credit: ReadCredit
    private let outgoing: AsyncStream<Outgoing>.Continuation
    private let outgoingStream: AsyncStream<Outgoing>
    private var alarms: [Alarm.Kind: Alarm] = [:]
    private var logReader: LogReader?
    private var follower: Follower?
    /// The peer's batches as one merge, logged part by part on the store's queue for writes.
    private var merge: SessionMerge?

    /// The session, from the moment its key and versions are known.
    private var session: PeerSession?
    /// The key the session authenticated with: a batch is applied, and operations are sent, only
    /// while the store still holds it.
    private var key: SyncKey?
    /// Where the store knew removes were dropped as stable as the session started (SPEC.md §5.8).
    private var dropped = VersionVector()

    /// Bytes received and not yet handed to the session (it waits for its merges, or has not
    /// started yet).
    private var inbox: [UInt8] = []
    private var inputClosed = false
    /// Bytes handed to the writer and not yet taken by the connection.
    private var outboundPending = 0
    private var lastActivity: NIODeadline
    /// In the live phase: when bytes last arrived, and when the connection last took a write
    /// (SPEC.md §15.10 rule 5).
    private var lastReceived: NIODeadline
    private var lastWritten: NIODeadline

    /// Sending what the peer lacks: the pages read and waiting to be sealed.
    private var sending = false
    private var pages: [[Op]] = []
    /// The seqs the store held compacted past the peer's vector before the first page was read:
    /// sent after the pages (SPEC.md §15.10).
    private var compactedToSend = SeqRanges()
    /// Sending (or pushing) stopped because as much waits to be written as the connection may
    /// hold: it goes on once the connection has taken half of it.
    private var waitsForRoom = false

    /// Parts handed to the store's queue for writes and not yet logged, and the applies under way.
    private var mergesUnderWay = 0
    private var appliedAtEnd = false
    private var applies = 0
    private var newOperations = 0
    private var farFuture: Timestamp?

    /// How the session ended, kept until the merges under way have finished (`finishEnding()`).
    private var ending: (failure: ConcordError?, summary: PeerSummary?, flush: Bool)?
    private var ended = false
    private(set) var record: PeerSessionRecord?
    private var closing: Closing?
    /// Until when the connection may flush, or drain, before it is closed.
    private var closingDeadline: NIODeadline?

    private enum Closing {
        /// Waiting for what was written to be flushed and the output closed, to report `record`;
        /// then, after a failure, draining.
        case flushing(thenDrain: Bool, record: PeerSessionRecord)
        /// Reading and dropping what arrives until the peer closes.
        case draining
        case closed
    }

    /// What the writer is handed.
    enum Outgoing: Sendable {
        case bytes(ByteBuffer)
        /// Close the output once what was handed before is flushed.
        case closeOutput
    }

    init(peer: String, settings: PeerConnection.Settings, events: AsyncStream<PeerConnection.Event>.Continuation) {
        self.peer = peer
        self.settings = settings
        self.events = events
        clock = settings.configuration.clock
        lastActivity = settings.started
        lastReceived = settings.started
        lastWritten = settings.started
        credit = ReadCredit(limit: settings.configuration.inboundBufferBytes)
        (outgoingStream, outgoing) = AsyncStream<Outgoing>.makeStream()
    }

    // MARK: The loop

    /// Runs the session until it has ended and the connection is closed (`finalRecord()` then says
    /// how it went): handles the events of `stream` one at a time.
    func run(
        inbound: NIOAsyncChannelInboundStream<ByteBuffer>, outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
        channel: any Channel, events stream: AsyncStream<PeerConnection.Event>
    ) async {
        self.channel = channel
        await withTaskGroup(of: Void.self) { group in
            startHelpers(&group, inbound: inbound, outbound: outbound, channel: channel)
            alarms[.handshake]!.set(settings.started + TimeAmount(configuration.handshakeTimeout))
            alarms[.idle]!.set(lastActivity + TimeAmount(configuration.idleTimeout))
            await start()
            for await event in stream {
                await handle(event)
                if case .closed = closing { break }
            }
            // Whatever is still under way on the connection is cut off.
            channel.close(promise: nil)
            group.cancelAll()
        }
    }

    private func startHelpers(
        _ group: inout TaskGroup<Void>, inbound: NIOAsyncChannelInboundStream<ByteBuffer>,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>, channel: any Channel
    ) {
        let (events, credit, clock, outgoing) = (events, credit, clock, outgoingStream)
        group.addTask {
            do {
                for try await buffer in inbound {
                    events.yield(.received(buffer))
                    await credit.spend(buffer.readableBytes)
                }
            } catch {
                // A reset, or the task cancelled: the connection is gone either way.
            }
            events.yield(.inputClosed)
        }
        group.addTask {
            for await item in outgoing {
                switch item {
                case .bytes(let buffer):
                    // When the connection takes the bytes: as they are handed over if it can take
                    // them now, else once it has room. (Read before the write, so that the time
                    // is known before the peer can have the bytes.)
                    let takesThemNow = channel.isWritable
                    let handedOver = clock.now()
                    do {
                        try await outbound.write(buffer)
                    } catch {
                        // The connection is gone: the reader hears of it.
                        continue
                    }
                    events.yield(.written(buffer.readableBytes, at: takesThemNow ? handedOver : clock.now()))
                case .closeOutput:
                    // Handed to the channel after every write before it, and done once they are flushed.
                    try? await channel.close(mode: .output).get()
                    events.yield(.outputClosed)
                }
            }
        }
        for kind in Alarm.Kind.allCases {
            alarms[kind] = Alarm(kind, clock: kind == .linger ? lingerClock : clock, loop: channel.eventLoop, events: events, in: &group)
        }
        logReader = LogReader(store: store, chunk: max(1, configuration.readChunkOperations), events: events, in: &group)
        follower = Follower(events: events, in: &group)
    }

    /// Starts the session with the key and versions it was given, or (a server) those the store
    /// holds now.
    private func start() async {
        let (store, key, versions) = (store, settings.key, settings.versions)
        let known = await Result.of { () async throws(ConcordError) in
            try await store.offloadRead { () throws(ConcordError) in
                try store.ensureNotRetired()
                let held = if let key { key } else { try store.syncKey() }
                let known = if let versions { versions } else { try store.versionVector() }
                return (held, known, try store.droppedStableThrough())
            }
        }
        switch known {
        case .success((let key?, let versions, let dropped)):
            self.key = key
            self.dropped = dropped
            merge = SessionMerge(store: store, keyBytes: key.bytes)
            session = PeerSession(
                role: settings.role, key: key, localReplica: store.replicaID, localVersions: versions, localDropped: dropped,
                batchesPerApply: configuration.batchesPerApply, maxAppliesInFlight: Self.maxAppliesInFlight, live: settings.offersLive,
                highestVersion: configuration.highestVersion, describeError: configuration.describeError)
            await perform(session!.start())
            await takeInbox()
        case .success((nil, _, _)):
            end(ConcordError.noSyncKey(at: store.path))
        case .failure(let error) where error.code == .retired:
            end(error)
        case .failure(let error):
            end(ConcordError(.local, "this side cannot read its store: \(error)", cause: error))
        }
    }

    private func handle(_ event: PeerConnection.Event) async {
        switch event {
        case .received(let buffer):
            lastActivity = clock.now()
            lastReceived = lastActivity
            guard !ended else { return credit.release(buffer.readableBytes) }
            inbox.append(contentsOf: buffer.readableBytesView)
            await takeInbox()
        case .inputClosed:
            inputClosed = true
            if case .draining = closing { return closing = .closed }
            // Nothing more arrives; the session may still wait for its merges to end, and hears
            // of the close once it has had every byte that arrived (the peer's last words).
            sending = false
            await takeInbox()
        case .written(let count, let time):
            outboundPending -= count
            lastActivity = max(lastActivity, time)
            lastWritten = time
            if waitsForRoom, outboundPending <= configuration.outboundBufferBytes / 2 {
                waitsForRoom = false
                await sendWhatWaits()
            }
        case .outputClosed:
            guard case .flushing(let thenDrain, let record) = closing else { return }
            report(record)
            if thenDrain {
                // Keep reading (what arrives is dropped) until the peer closes: the peer's last
                // bytes would otherwise turn the close into a reset, which may destroy the `error`
                // just sent before the peer reads it.
                closing = inputClosed ? .closed : .draining
                closingDeadline = lingerClock.now() + TimeAmount(configuration.lingerTimeout)
                alarms[.linger]!.set(closingDeadline!)
                credit.lift()
            } else {
                closing = .closed
            }
        case .logged(let result):
            await logged(result)
        case .mergeApplied(let result, let atEnd):
            await mergeApplied(result, atEnd: atEnd)
        case .page(let page):
            guard sending else { return }
            switch page {
            case .success(let operations): pages.append(operations)
            case .failure(let error):
                sending = false
                return abort(ConcordError(.local, "this side cannot read its store: \(error)", cause: error))
            }
            await sendWhatWaits()
        case .alarm(let kind):
            await alarmRang(kind)
        case .committed:
            if !ended, session?.isLive == true { await pushWhatIsNew() }
        case .cannotFollow(let reason):
            // The store cannot be followed (no file descriptor left, say, or its file replaced by
            // another): the session cannot push what lands, and ends, for the client to connect
            // again (or, its store replaced, to end: `PeerClient.live`).
            abort(ConcordError(.local, "this side cannot follow its store's commits: \(reason)"), tellingPeer: "it cannot follow its store's commits")
        case .stop:
            guard !ended else { return }
            if session?.isLive == true {
                end(nil)
            } else {
                abort(ConcordError(.local, "stopped"))
            }
        case .abort(let failure):
            abort(failure)
        case .closeNow:
            // The session hears of it as of any close, and ends once its merges have.
            channel?.close(promise: nil)
        }
    }

    // MARK: Receiving

    /// Hands the session everything received so far, unless it waits for its merges (a merge that
    /// finishes takes the inbox then); tells it of the close once it has had every byte.
    private func takeInbox() async {
        guard !ended, session?.waitsForMerges == false else { return }
        let bytes = inbox
        inbox = []
        credit.release(bytes.count)
        if !bytes.isEmpty {
            await perform(session!.receive(bytes))
            // A pushAck may have opened the window for what waits to be pushed.
            if !ended, session?.isLive == true { await pushWhatIsNew() }
        }
        if inputClosed, inbox.isEmpty, !ended { await perform(session!.connectionClosed()) }
    }

    private func perform(_ actions: [PeerAction]) async {
        for action in actions {
            // A failure may have ended the session: the rest of its list (a `.needOperations`)
            // is moot.
            if ended { return }
            switch action {
            case .send(let bytes):
                write(bytes)
            case .apply(let operations):
                await startApplying(operations)
            case .finishMerge(let compacted):
                mergesUnderWay += 1
                let summary = session!.summary
                let heard = summary.peerReplica.flatMap { replica in summary.peerVersions.map { (replica, $0) } }
                merge!.apply(then: events, atEnd: false, taking: compacted, heard: heard, dropped: summary.peerDropped)
            case .needOperations(let since, let lastShared):
                sending = true
                // Read before the first page, so that every operation that made them redundant
                // is sent, or held by the peer (SPEC.md §15.10).
                if PeerProtocol.carriesCompaction(session!.version) {
                    let store = store
                    // A peer that does not hold where removes were dropped as stable gets every
                    // compacted seq (SPEC.md §5.8). A compaction records where it drops them
                    // before it does: read after the seqs, the vector tells whether the versions
                    // message still said so.
                    let (claimsFrom, told) = (since.covers(dropped) ? since : VersionVector(), dropped)
                    switch await Result.of({ () async throws(ConcordError) in
                        try await store.offloadRead { () throws(ConcordError) in
                            (try store.compactedSeqs(since: claimsFrom), try store.droppedStableThrough())
                        }
                    }) {
                    case .success((_, let now)) where now != told:
                        return end(ConcordError(.local, "a compaction dropped removes while the session began; sync again"))
                    case .success((let compacted, _)): compactedToSend = compacted
                    case .failure(let error): return end(ConcordError(.local, "this side cannot read its log: \(error)", cause: error))
                    }
                }
                // Two pages read ahead: the next is read while one is sealed.
                logReader!.start(since: since, lastShared: lastShared)
                logReader!.next()
            case .finished(let summary):
                end(nil, summary: summary)
            case .live(let summary):
                await enterLivePhase(summary)
            case .failed(let failure):
                end(failure)
            }
        }
    }

    /// Sorts an `.apply` and hands it to the store's queue for writes, which logs it as the next
    /// part of the session's merge, then decodes what follows while it is logged (and may prepare
    /// the next `.apply`).
    private func startApplying(_ operations: [Op]) async {
        mergesUnderWay += 1
        let store = store
        let prepared = await Result.of { () async throws(ConcordError) in
            try await store.offloadRead { () throws(ConcordError) in try store.prepareMerge(operations) }
        }
        // A push shows in the records as soon as it is held (SPEC.md §15.10 rule 3).
        merge!.log(prepared, applyNow: session?.isLive == true, then: events)
        await perform(session!.readAhead())
    }

    /// A part has been logged, or has failed.
    private func logged(_ result: Result<MergeReport, ConcordError>) async {
        mergesUnderWay -= 1
        switch result {
        case .success(let report):
            newOperations += report.newOperationCount
            if let far = report.farFutureTimestamp { farFuture = max(farFuture ?? far, far) }
        case .failure(let error) where error.code == .keyReplaced:
            abort(Self.keyReplaced, tellingPeer: Self.keyReplacedForPeer)
        case .failure(let error) where error.code == .clash:
            // Two stores that share a replica id (SPEC.md §9.1): the line of §9.1 itself, on this
            // side and, in the error, on the peer's.
            abort(error)
        case .failure(let error):
            abort(ConcordError(.local, "this side cannot apply a batch: \(error)", cause: error))
        }
        // The session may have ended meanwhile (a frame read ahead failed, the peer closed).
        guard !ended else { return finishEnding() }
        applies += 1
        reportProgress()
        if let drop = configuration.dropConnectionAfterApplies, applies >= drop {
            // As if the process were killed: no error, no ack, the connection just goes.
            return end(ConcordError(.local, "dropped the connection after \(applies) applies (test)"), flush: false)
        }
        // The batches have committed: the session reads on (an ack may follow), and takes what
        // waited in the inbox meanwhile.
        await perform(session!.batchApplied())
        await takeInbox()
        // A pushAck held behind the part may have opened the window for what waits to be pushed.
        if !ended, session?.isLive == true { await pushWhatIsNew() }
    }

    /// What the parts logged was applied to the records: once the peer's batches have all arrived
    /// (the `ack` follows), or at the session's end.
    private func mergeApplied(_ result: Result<Void, ConcordError>, atEnd: Bool) async {
        mergesUnderWay -= 1
        if atEnd {
            if case .failure(let error) = result, let (failure, summary, flush) = ending, failure == nil {
                ending = (
                    ConcordError(.local, "this side holds the peer's operations but cannot apply them to their records yet: \(error)", cause: error),
                    summary, flush)
            }
            return finishEnding()
        }
        if case .failure(let error) = result {
            abort(ConcordError(.local, "this side cannot apply the peer's operations to their records: \(error)", cause: error))
        }
        guard !ended else { return finishEnding() }
        await perform(session!.batchApplied())
        await takeInbox()
    }

    // MARK: Sending

    private func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        outboundPending += bytes.count
        outgoing.yield(.bytes(ByteBuffer(bytes: bytes)))
    }

    /// Whether as much waits to be written as the connection may hold; if so, sending waits for
    /// room.
    private func outboundFull() -> Bool {
        waitsForRoom = outboundPending >= configuration.outboundBufferBytes
        return waitsForRoom
    }

    /// Seals what the log reader has read while the connection takes it (or, in the live phase,
    /// what there is to push).
    private func sendWhatWaits() async {
        if session?.isLive == true { return await pushWhatIsNew() }
        while sending, !ended, !pages.isEmpty, !outboundFull() {
            let page = pages.removeFirst()
            guard !page.isEmpty else {
                sending = false
                await perform(session!.send(compacted: compactedToSend))
                compactedToSend = SeqRanges()
                if !ended { await perform(session!.finishSending()) }
                return
            }
            // The next page is read while this one is sealed.
            logReader!.next()
            guard await keyStillHeld() else { return }
            await perform(session!.send(operations: page))
            reportProgress()
        }
    }

    /// Whether the store still holds the key this session authenticated with. Once it does not
    /// (`syncctl key generate --force` or `key import --force` by any process), the session ends:
    /// the peer holds a replaced key, and must not be served (SPEC.md §15.1).
    private func keyStillHeld() async -> Bool {
        let store = store
        switch await Result.of({ () async throws(ConcordError) in try await store.offloadRead { () throws(ConcordError) in try store.syncKeyBytes() } }) {
        case .success(let bytes) where bytes == key?.bytes:
            return true
        case .success:
            abort(Self.keyReplaced, tellingPeer: Self.keyReplacedForPeer)
        case .failure(let error):
            abort(ConcordError(.local, "this side cannot read its store: \(error)", cause: error))
        }
        return false
    }

    static let keyReplaced = ConcordError(.keyReplaced, "this store's sync key was replaced during the session; peers need the new key")
    static let keyReplacedForPeer = "its sync key was replaced during the session; this side needs the new key"

    // MARK: The live phase

    /// The exchange of a live session is done: follow the store's commits and push what the peer
    /// lacks as they land, and keep the connection's heartbeat (SPEC.md §15.10).
    private func enterLivePhase(_ summary: PeerSummary) async {
        settings.onLive?(summary)
        // Subscribed before the log is read below: a commit between the two is heard of, never
        // missed (the observer starts from what the store holds as it is made).
        let store = store
        follower!.follow(await store.offloadRead { store.changes() })
        // The idle timeout does not apply in the live phase; the heartbeat does.
        lastReceived = clock.now()
        lastWritten = lastReceived
        alarms[.heartbeat]!.set(lastReceived + .seconds(1))
        // What was committed since the exchange read the log.
        await pushWhatIsNew()
    }

    /// Pushes what the store holds and the peer does not (`PeerSession.peerHolds`), read from the
    /// log a push at a time, while the session may push and the connection takes what is written
    /// (at most `outboundBufferBytes` wait: a peer that reads slowly is caught up from the log once
    /// it has taken them, SPEC.md §15.10 "A server's live peers").
    private func pushWhatIsNew() async {
        while !ended, !inputClosed, let session, session.isLive, session.mayPush, !outboundFull() {
            let (store, held, keyBytes) = (store, session.peerHolds, key?.bytes)
            let read = await Result.of { () async throws(ConcordError) in
                try await store.offloadRead { () throws(ConcordError) -> [Op]? in
                    // The key first, in the same hop: one push's worth at a time, so that the
                    // bounds are checked before each push.
                    guard try store.syncKeyBytes() == keyBytes else { return nil }
                    var operations: [Op] = []
                    var bytes = 0
                    try store.forEachOperation(notIn: held) { operation in
                        operations.append(operation)
                        bytes += PeerSession.sizeBound(operation)
                        return operations.count < PeerProtocol.maxBatchOperations && bytes < PeerProtocol.targetBatchBytes
                    }
                    return operations
                }
            }
            switch read {
            case .success(nil):
                return abort(Self.keyReplaced, tellingPeer: Self.keyReplacedForPeer)
            case .success(let operations?):
                guard !ended, !operations.isEmpty else { return }
                await perform(self.session!.push(operations: operations))
                reportProgress()
            case .failure(let error):
                return abort(ConcordError(.local, "this side cannot read its store: \(error)", cause: error))
            }
        }
    }

    // MARK: Timeouts

    private func alarmRang(_ kind: Alarm.Kind) async {
        let now = clock.now()
        switch kind {
        case .handshake:
            guard !ended, session?.isHandshakeComplete != true else { return }
            abort(ConcordError(.timedOut, "the handshake took over \(configuration.handshakeTimeout.shown)"))
        case .idle:
            // Rings at the last activity plus the timeout as far as was known when it was set;
            // one that finds activity since then is set again for the new deadline. (Activity
            // does not move it: bytes come and go far more often than it rings.)
            guard !ended, session?.isLive != true else { return }
            let idle = TimeAmount(configuration.idleTimeout)
            if now - lastActivity >= idle {
                abort(ConcordError(.timedOut, "the session was idle for \(configuration.idleTimeout.shown)"))
            } else {
                alarms[.idle]!.set(lastActivity + idle)
            }
        case .heartbeat:
            // Every second in the live phase: pings a peer that this side has written nothing to
            // for 5 s, and ends a session whose peer has sent nothing for 15 s while this side
            // reads, or has taken none of what waits to be written for 15 s (SPEC.md §15.10 rule 5).
            guard !ended else { return }
            // The silence clock stops while this side does not read.
            if credit.isPaused { lastReceived = now }
            let silence = TimeAmount(PeerProtocol.liveSilenceTimeout)
            if now - lastReceived >= silence {
                return abort(ConcordError(.timedOut, "the peer went silent for \(PeerProtocol.liveSilenceTimeout.shown)"))
            }
            if outboundPending > 0, now - lastWritten >= silence {
                return abort(ConcordError(.timedOut, "the peer stopped reading for \(PeerProtocol.liveSilenceTimeout.shown)"))
            }
            if outboundPending == 0, now - lastWritten >= TimeAmount(PeerProtocol.heartbeatInterval) {
                lastWritten = now  // one ping per interval, whatever the write's completion says
                await perform(session!.ping())
            }
            alarms[.heartbeat]!.set(now + .seconds(1))
        case .linger:
            guard let closingDeadline, lingerClock.now() >= closingDeadline else { return }
            // A peer that takes nothing more gets no longer for what was written to go out.
            if case .flushing(_, let record) = closing { report(record) }
            closing = .closed
        }
    }

    // MARK: Ending

    /// Ends the session, telling the peer why once past the handshake (`tellingPeer`, or the
    /// failure's own message). A connection ended before its session started just closes.
    private func abort(_ failure: ConcordError, tellingPeer reason: String? = nil) {
        guard !ended else { return }
        guard session != nil else { return end(failure) }
        // What an abort returns is its `error` and `.failed`: nothing that awaits.
        for action in session!.abort(failure, tellingPeer: reason) {
            switch action {
            case .send(let bytes): write(bytes)
            case .failed(let failure): end(failure)
            default: assertionFailure("an abort returned \(action)")
            }
        }
    }

    /// The session has ended: it reports, and closes once what was written is flushed, after the
    /// merges under way have finished and what they logged is applied.
    private func end(_ failure: ConcordError?, summary: PeerSummary? = nil, flush: Bool = true) {
        guard !ended else { return }
        ended = true
        sending = false
        pages = []
        // What waited for the session is moot: the reader reads on.
        credit.release(inbox.count)
        inbox = []
        ending = (failure, summary, flush)
        finishEnding()
    }

    /// Reports the session's end and closes, once no merge is under way.
    private func finishEnding() {
        guard mergesUnderWay == 0, let (failure, summary, flush) = ending else { return }
        guard appliedAtEnd else {
            // What the session logged is held, and was received under its key: it is applied to
            // its records whether the session finished or failed.
            appliedAtEnd = true
            mergesUnderWay += 1
            if let merge {
                merge.apply(then: events, atEnd: true)
            } else {
                events.yield(.mergeApplied(.success(()), atEnd: true))
            }
            return
        }
        ending = nil
        let record = makeRecord(failure: failure, summary: summary)
        guard flush else {
            report(record)
            return closing = .closed
        }
        // A peer that takes nothing more (its window is full, it stopped reading) gets no longer
        // than the linger timeout for what was written to go out.
        closing = .flushing(thenDrain: failure != nil, record: record)
        closingDeadline = lingerClock.now() + TimeAmount(configuration.lingerTimeout)
        alarms[.linger]!.set(closingDeadline!)
        outgoing.yield(.closeOutput)
    }

    /// The session's record, once `run` has returned (a session cut off before it ended reports
    /// the connection closed).
    func finalRecord() -> PeerSessionRecord {
        if record == nil { report(makeRecord(failure: ConcordError(.closed, "the connection closed"), summary: nil)) }
        return record!
    }

    /// Keeps the session's record, and hands it to `onEnd`.
    private func report(_ made: PeerSessionRecord) {
        guard record == nil else { return }
        record = made
        settings.onEnd?(made)
    }

    func makeRecord(failure: ConcordError?, summary: PeerSummary?) -> PeerSessionRecord {
        var made = PeerSessionRecord(
            peer: peer, summary: summary ?? session?.summary ?? PeerSummary(role: settings.role), failure: failure,
            duration: Duration(clock.now() - settings.started))
        made.newOperations = newOperations
        made.farFutureTimestamp = farFuture
        made.peerHeardWhileLive = session?.peerHeardWhileLive ?? false
        return made
    }

    private func reportProgress() {
        guard let progress = settings.progress, let summary = session?.summary else { return }
        progress(PeerProgress(
            peer: peer, operationsReceived: summary.operationsReceived, operationsSent: summary.operationsSent,
            bytesReceived: summary.bytesReceived, bytesSent: summary.bytesSent))
    }
}
