import ConcordCore
import ConcordKeys
import ConcordPeer
import ConcordStore
import Foundation
import Logging
import NIOCore
import NIOPosix

/// Serves a store to peers over TCP (`syncctl serve`, SPEC.md §15): each connection is one peer
/// session, run at the same time as the others and bounded on its own, so that a slow, silent or
/// hostile peer holds up no one else.
///
/// Each session authenticates with the sync key the store holds when its connection opens, read
/// from the store then: a key replaced meanwhile (by this process or another) stops the old one
/// at once, for new sessions and for those under way (SPEC.md §15.1).
///
/// ```swift
/// let server = PeerServer(store: store, onSession: { record in print(record.logLine) })
/// let address = try await server.start(host: "127.0.0.1", port: 7420)
/// …
/// await server.stop()        // ends the sessions under way, then closes
/// ```
public final class PeerServer: Sendable {
    /// The store it serves.
    public let store: ConcordStore
    /// Its timeouts and limits.
    public let configuration: PeerTransportConfiguration
    private let group: any EventLoopGroup
    private let ownsGroup: Bool
    private let onSession: @Sendable (PeerSessionRecord) -> Void
    private let onProgress: (@Sendable (PeerProgress) -> Void)?
    private let logger: Logger

    private let state = LockedState(State())

    private struct State {
        var listener: (any Channel)?
        /// The task that accepts connections, and runs each one's session as a child task.
        var accepting: Task<Void, Never>?
        var sessions: [ObjectIdentifier: PeerConnection] = [:]
        /// The sessions in their live phase, which leave their place among `maxSessions` to others.
        var live: Set<ObjectIdentifier> = []
        /// The sessions that were offered a live session when they connected, and may be live.
        var mayBeLive = 0
        var stopping = false
    }

    /// - Parameters:
    ///   - logger: where the server logs (SPEC.md §15.9): each session's end at `info` (`notice`
    ///     when it failed, the failure worded by the configuration's `describeError`), each
    ///     connection accepted at `debug`. By default it logs nothing.
    ///   - onSession: called once per session when it ends (finished or failed), on the session's
    ///     event loop, which other sessions share: it must return quickly.
    ///   - onProgress: called as sessions move operations, on their event loops, likewise.
    public convenience init(
        store: ConcordStore, configuration: PeerTransportConfiguration = PeerTransportConfiguration(),
        logger: Logger = .silent, onProgress: (@Sendable (PeerProgress) -> Void)? = nil,
        onSession: @escaping @Sendable (PeerSessionRecord) -> Void = { _ in }
    ) {
        self.init(store: store, configuration: configuration, group: nil, logger: logger, onProgress: onProgress, onSession: onSession)
    }

    /// The same on the event loops `group` (by default a group of its own, one loop per core up
    /// to four).
    package init(
        store: ConcordStore, configuration: PeerTransportConfiguration, group: (any EventLoopGroup)?, logger: Logger,
        onProgress: (@Sendable (PeerProgress) -> Void)?, onSession: @escaping @Sendable (PeerSessionRecord) -> Void
    ) {
        self.store = store
        self.logger = logger
        self.configuration = configuration
        self.group = group ?? MultiThreadedEventLoopGroup(numberOfThreads: max(1, min(4, System.coreCount)))
        ownsGroup = group == nil
        self.onSession = onSession
        self.onProgress = onProgress
    }

    /// Sessions under way.
    public var activeSessions: Int { state.withLock { $0.sessions.count } }

    /// Starts listening. Port 0 picks a free port; the address returned says which.
    @discardableResult
    public func start(host: String, port: Int) async throws(ConcordError) -> PeerAddress {
        let listener: NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>
        do {
            listener = try await ServerBootstrap(group: group)
                .serverChannelOption(ChannelOptions.backlog, value: 256)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                .bind(host: host, port: port) { channel in PeerConnection.wrap(channel) }
        } catch {
            throw Self.listenError(error, host: host, port: port)
        }
        // On the listener's event loop, as each session runs on its connection's: it accepts
        // whatever the process's shared threads are doing.
        let accepting = Task(executorPreference: EventLoopTaskExecutor(listener.channel.eventLoop)) { await self.accept(from: listener) }
        state.withLock { state in
            state.listener = listener.channel
            state.accepting = accepting
        }
        let bound = listener.channel.localAddress
        return PeerAddress(host: bound?.ipAddress ?? host, port: bound?.port ?? port)
    }

    /// Why the server cannot listen on HOST:PORT: a `ConcordError` of code `local`.
    private static func listenError(_ error: any Error, host: String, port: Int) -> ConcordError {
        if let error = error as? ConcordError { return error }
        let reason = (error as? IOError).map { String(cString: strerror($0.errnoCode)).lowercased() } ?? "\(error)"
        return ConcordError(.local, "cannot listen on \(PeerAddress(host: host, port: port)): \(reason)")
    }

    /// Accepts connections until the listener closes, each one's session a child task on its
    /// connection's event loop; returns once every session has ended.
    private func accept(from listener: NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>) async {
        try? await listener.executeThenClose { connections in
            await withDiscardingTaskGroup { group in
                do {
                    for try await channel in connections {
                        let peer = channel.channel.remoteAddress?.shown ?? "?"
                        group.addTask(executorPreference: EventLoopTaskExecutor(channel.channel.eventLoop)) {
                            await self.serve(channel, peer: peer)
                        }
                    }
                } catch {
                    // The listener failed: no more connections come.
                }
            }
        }
    }

    /// Runs a new connection's session, or closes it at once when the server is full or stopping.
    private func serve(_ channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, peer: String) async {
        let started = configuration.clock.now()
        // A client that asks for a live session gets one while fewer than `maxLiveSessions` may
        // be live; beyond them it gets the one-shot version below the one it asked for (SPEC.md §15.10).
        let offersLive = state.withLock { state in
            guard state.mayBeLive < configuration.maxLiveSessions else { return false }
            state.mayBeLive += 1
            return true
        }
        let connection = PeerConnection()
        let id = ObjectIdentifier(connection)
        let admitted = state.withLock { state in
            guard !state.stopping, state.sessions.count - state.live.count < configuration.maxSessions else { return false }
            state.sessions[id] = connection
            return true
        }
        // Once a session has ended (and a peer that failed may still be drained for a moment),
        // it is logged and its place is free.
        let ended: @Sendable (PeerSessionRecord) -> Void = { [self] record in
            log(record)
            onSession(record)
            state.withLock { state in
                state.sessions[id] = nil
                state.live.remove(id)
                if offersLive { state.mayBeLive -= 1 }
            }
        }
        guard admitted else {
            // Too many at once (or shutting down): this one is closed before its handshake.
            try? await channel.executeThenClose { _, _ in }
            return ended(PeerSessionRecord(
                peer: peer, summary: PeerSummary(role: .server),
                failure: ConcordError(.local, "refused: \(configuration.maxSessions) sessions are under way"),
                duration: Duration(configuration.clock.now() - started)))
        }
        logger.debug("peer \(peer): connected", metadata: ["peer": "\(peer)"])
        let logger = logger
        _ = await connection.run(
            over: channel,
            PeerConnection.Settings(
                role: .server, store: store, configuration: configuration, started: started, offersLive: offersLive,
                onLive: { [state] summary in
                    // Live: its place among the sessions in their exchange is free for another.
                    state.withLock { _ = $0.live.insert(id) }
                    logger.info(
                        "peer \(peer): live, after receiving \(summary.operationsReceived) operations and sending \(summary.operationsSent)",
                        metadata: ["peer": "\(peer)"])
                },
                progress: onProgress, onEnd: ended))
    }

    /// One line per session, with what it moved as metadata for log collectors.
    private func log(_ record: PeerSessionRecord) {
        var metadata: Logger.Metadata = [
            "peer": "\(record.peer)",
            "operations_received": "\(record.summary.operationsReceived)", "operations_sent": "\(record.summary.operationsSent)",
            "bytes_received": "\(record.summary.bytesReceived)", "bytes_sent": "\(record.summary.bytesSent)",
            "seconds": "\(String(format: "%.3f", record.duration.seconds))",
        ]
        let describe = configuration.describeError
        if let failure = record.failure {
            metadata["failure"] = "\(describe(failure))"
            // `notice`, not `warning`: a peer's session failed, the server did not.
            logger.notice("\(record.logLine(describingFailure: describe))", metadata: metadata)
        } else {
            logger.info("\(record.logLine)", metadata: metadata)
        }
    }

    /// Stops listening, ends the sessions under way (each peer is told why), waits up to `grace`
    /// for them to close, closes those still open, and releases the event loops. A second call
    /// returns at once.
    public func stop(grace: Duration = .seconds(5)) async {
        let begun = state.withLock { state -> ((any Channel)?, Task<Void, Never>?, [PeerConnection])? in
            guard !state.stopping else { return nil }
            // Published under the lock: a session that connects from now on is refused.
            state.stopping = true
            defer { state.listener = nil }
            return (state.listener, state.accepting, Array(state.sessions.values))
        }
        guard let (listener, accepting, running) = begun else { return }
        try? await listener?.close()
        for connection in running { connection.abort(ConcordError(.local, "the server is shutting down")) }
        // `Task.sleep`, not the loops' timers that sessions' timeouts use: this wait only bounds
        // a stop, and one that rings late (the tasks' shared threads held up) ends the stop later,
        // cutting off no session early.
        let graceOver = Task { [state] in
            try? await Task.sleep(for: grace)
            guard !Task.isCancelled else { return }
            for connection in state.withLock({ Array($0.sessions.values) }) { connection.closeNow() }
        }
        // Returns once the last session has ended.
        await accepting?.value
        graceOver.cancel()
        if ownsGroup { try? await group.shutdownGracefully() }
    }
}

/// Runs one two-way session with a peer over TCP (`syncctl sync --peer`, SPEC.md §15).
public enum PeerClient {
    /// Connects to `address`, syncs with the sync key the store holds, and returns how it went. A
    /// session that fails is returned with its `failure` set (nothing after the failure was
    /// merged; what was logged before it is held, and applied to its records); a connection that cannot be made throws
    /// a `ConcordError` of code `closed`, a store without a sync key one of code `noSyncKey`.
    public static func sync(
        store: ConcordStore, address: PeerAddress,
        configuration: PeerTransportConfiguration = PeerTransportConfiguration(),
        progress: (@Sendable (PeerProgress) -> Void)? = nil
    ) async throws(ConcordError) -> PeerSessionRecord {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            var record = try await session(store: store, address: address, configuration: configuration, group: group, progress: progress)
            if let older = olderVersion(after: record.failure, configuration) {
                record = try await session(store: store, address: address, configuration: older, group: group, progress: progress)
            }
            try? await group.shutdownGracefully()
            return record
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// When a server refused this side's version naming an older one it speaks (a build older
    /// than this one), the configuration that proposes at most that one, for one more attempt: the
    /// refusal is in clear and may be forged, so the next sync proposes the highest again
    /// (SPEC.md §15.10, "Negotiation").
    static func olderVersion(after failure: ConcordError?, _ configuration: PeerTransportConfiguration) -> PeerTransportConfiguration? {
        guard let named = (failure?.cause as? ConcordError.PeerVersionMismatch)?.peerVersion,
              named >= PeerProtocol.version, named < configuration.highestVersion
        else { return nil }
        var older = configuration
        older.highestVersion = named
        return older
    }

    /// Connects, and runs the session on `group`: its record once it has ended. A live session
    /// (`offersLive`) calls `onLive` once it is live; cancelling the calling task ends it as the
    /// user's stop (SPEC.md §15.10 rule 6).
    static func session(
        store: ConcordStore, address: PeerAddress, configuration: PeerTransportConfiguration,
        group: any EventLoopGroup, progress: (@Sendable (PeerProgress) -> Void)?,
        offersLive: Bool = false, onLive: (@Sendable (PeerSummary) -> Void)? = nil
    ) async throws(ConcordError) -> PeerSessionRecord {
        let (versions, key) = try await store.offloadRead { () throws(ConcordError) in (try store.versionVector(), try store.syncKey()) }
        guard let key else {
            throw ConcordError.noSyncKey(at: store.path)
        }
        // Connected and run in a task of its own, on the connection's event loop, as a server runs
        // each session: from the moment the connection is made, the session runs whatever the
        // caller's threads are doing (a peer's handshake timeout runs from then). Not in the
        // calling task: a session that is stopped still has events to handle (`PeerConnection.run`).
        let connection = PeerConnection()
        let loop = group.next()
        let running = Task(executorPreference: EventLoopTaskExecutor(loop)) {
            () async -> Result<PeerSessionRecord, ConcordError> in
            let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
            do {
                channel = try await ClientBootstrap(group: loop)
                    .connectTimeout(TimeAmount(configuration.connectTimeout))
                    .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                    .connect(host: address.host, port: address.port) { channel in PeerConnection.wrap(channel) }
            } catch {
                return .failure(ConcordError(.closed, describeConnectError(error, to: address)))
            }
            let settings = PeerConnection.Settings(
                role: .client, store: store, configuration: configuration, started: configuration.clock.now(), key: key,
                versions: versions, offersLive: offersLive, onLive: onLive, progress: progress)
            return .success(await connection.run(over: channel, settings))
        }
        return try await withTaskCancellationHandler {
            await running.value
        } onCancel: {
            connection.stop()
        }.get()
    }
}
