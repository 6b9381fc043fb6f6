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
        var sessions: [ObjectIdentifier: PeerConnection] = [:]
        /// The sessions in their live phase, which leave their place among `maxSessions` to others.
        var live: Set<ObjectIdentifier> = []
        /// The sessions that were offered a live session when they connected, and may be live.
        var mayBeLive = 0
        var stopping = false
        /// Completed once the server is stopping and its last session has ended (or its grace is over).
        var drained: EventLoopPromise<Void>?
    }

    /// - Parameters:
    ///   - logger: where the server logs (SPEC.md §15.9): each session's end at `info` (`notice`
    ///     when it failed, the failure worded by the configuration's `describeError`), each
    ///     connection accepted at `debug`. By default it logs nothing.
    ///   - onSession: called once per session when it ends (finished or failed), from any thread.
    ///   - onProgress: called as sessions move operations, from any thread.
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
        do {
            return try await bind(host: host, port: port).get()
        } catch {
            throw Self.listenError(error, host: host, port: port)
        }
    }

    /// Why the server cannot listen on HOST:PORT: a `ConcordError` of code `local`.
    private static func listenError(_ error: any Error, host: String, port: Int) -> ConcordError {
        if let error = error as? ConcordError { return error }
        let reason = (error as? IOError).map { String(cString: strerror($0.errnoCode)).lowercased() } ?? "\(error)"
        return ConcordError(.local, "cannot listen on \(PeerAddress(host: host, port: port)): \(reason)")
    }

    private func bind(host: String, port: Int) -> EventLoopFuture<PeerAddress> {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(PeerChannelHandler { [self] channel in accept(channel) })
                }
            }
        return bootstrap.bind(host: host, port: port)
            .map { [self] channel in
                state.withLock { $0.listener = channel }
                return PeerAddress(host: channel.localAddress?.ipAddress ?? host, port: channel.localAddress?.port ?? port)
            }
    }

    /// A new connection: a session of its own, or closed at once when the server is full or stopping.
    private func accept(_ channel: any Channel) -> PeerConnection {
        // A client that asks for a live session gets one while fewer than `maxLiveSessions` may
        // be live; beyond them it gets the one-shot version below the one it asked for (SPEC.md §15.10).
        let offersLive = state.withLock { state in
            guard state.mayBeLive < configuration.maxLiveSessions else { return false }
            state.mayBeLive += 1
            return true
        }
        let logger = logger
        let box = ConnectionBox()
        let connection = PeerConnection(
            channel: channel, role: .server, store: store, key: nil, localVersions: nil,
            configuration: configuration, progress: onProgress, offersLive: offersLive,
            onLive: { [self] summary in
                // Live: its place among the sessions in their exchange is free for another.
                if let connection = box.get() { state.withLock { _ = $0.live.insert(ObjectIdentifier(connection)) } }
                logger.info(
                    "peer \(channel.remoteAddress?.shown ?? "?"): live, after receiving \(summary.operationsReceived) operations and sending \(summary.operationsSent)",
                    metadata: ["peer": "\(channel.remoteAddress?.shown ?? "?")"])
            })
        box.set(connection)
        if offersLive {
            connection.result.whenComplete { [self] _ in state.withLock { $0.mayBeLive -= 1 } }
        }
        let admitted = state.withLock { state in
            guard !state.stopping, state.sessions.count - state.live.count < configuration.maxSessions else { return false }
            state.sessions[ObjectIdentifier(connection)] = connection
            return true
        }
        guard admitted else {
            // Too many at once (or shutting down): this one is refused before its handshake.
            connection.abort(ConcordError(.local, "the server is busy with \(configuration.maxSessions) sessions"))
            connection.result.whenComplete { [self] result in
                if case .success(var record) = result {
                    record.failure = ConcordError(.local, "refused: \(configuration.maxSessions) sessions are under way")
                    log(record)
                    onSession(record)
                }
            }
            return connection
        }
        logger.debug("peer \(connection.peer): connected", metadata: ["peer": "\(connection.peer)"])
        connection.result.whenComplete { [self] result in
            if case .success(let record) = result {
                log(record)
                onSession(record)
            }
            let drained = state.withLock { state in
                state.sessions[ObjectIdentifier(connection)] = nil
                state.live.remove(ObjectIdentifier(connection))
                return state.sessions.isEmpty ? state.drained : nil
            }
            drained?.succeed()
        }
        return connection
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
    /// for them to close, and releases the event loops.
    public func stop(grace: Duration = .seconds(5)) async {
        guard let ended = endSessions(grace: grace) else { return }
        try? await ended.get()
        if ownsGroup { try? await group.shutdownGracefully() }
    }

    /// A stop up to releasing the event loops: it stops listening, aborts the sessions under way,
    /// and, once they have ended or `grace` is over, closes the connections still open. `nil`
    /// when a stop began already: the first does it all (and a second caller returns at once).
    private func endSessions(grace: Duration) -> EventLoopFuture<Void>? {
        let loop = group.next()
        let begun = state.withLock { state -> ((any Channel)?, [PeerConnection], EventLoopPromise<Void>)? in
            guard !state.stopping else { return nil }
            state.stopping = true
            // Published with `stopping`, under the lock: a session that ends from now on sees it.
            let drained = loop.makePromise(of: Void.self)
            state.drained = drained
            defer { state.listener = nil }
            return (state.listener, Array(state.sessions.values), drained)
        }
        guard let (listener, running, drained) = begun else { return nil }
        let closed = listener?.close() ?? loop.makeSucceededVoidFuture()
        return closed.recover { _ in }.hop(to: loop).flatMap { [self] in
            for connection in running { connection.abort(ConcordError(.local, "the server is shutting down")) }
            // Drained when the last session ends, or at once if there is none; at the latest
            // when the grace is over (a promise completed twice keeps its first result).
            if state.withLock({ $0.sessions.isEmpty }) { drained.succeed() }
            let graceOver = loop.scheduleTask(in: TimeAmount(grace)) { drained.succeed() }
            return drained.futureResult.map { [self] in
                graceOver.cancel()
                // Sessions that end after this (their connections closed below) leave it alone:
                // the loops may be shut down by then.
                let open = state.withLock { state in
                    state.drained = nil
                    return Array(state.sessions.values)
                }
                for connection in open { connection.channel.close(promise: nil) }
            }
        }
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
    /// (`offersLive`) calls `onLive` once it is live, and is reachable through `connection` to be
    /// stopped.
    static func session(
        store: ConcordStore, address: PeerAddress, configuration: PeerTransportConfiguration,
        group: any EventLoopGroup, progress: (@Sendable (PeerProgress) -> Void)?,
        offersLive: Bool = false, onLive: (@Sendable (PeerSummary) -> Void)? = nil, connection box: ConnectionBox = ConnectionBox()
    ) async throws(ConcordError) -> PeerSessionRecord {
        let (versions, key) = try await store.offloadRead { () throws(ConcordError) in (try store.versionVector(), try store.syncKey()) }
        guard let key else {
            throw ConcordError.noSyncKey(at: store.path)
        }
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(TimeAmount(configuration.connectTimeout))
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(PeerChannelHandler { channel in
                        let connection = PeerConnection(
                            channel: channel, role: .client, store: store, key: key, localVersions: versions,
                            configuration: configuration, progress: progress, offersLive: offersLive, onLive: onLive)
                        box.set(connection)
                        return connection
                    })
                }
            }
        let ended = bootstrap.connect(host: address.host, port: address.port)
            .flatMapErrorThrowing { error in throw ConcordError(.closed, describeConnectError(error, to: address)) }
            .flatMap { channel in
                // `channelActive` runs on the loop right after `connect` succeeds: a task
                // submitted now runs after it.
                channel.eventLoop.submit { box.get() }
            }
            .flatMap { (connection: PeerConnection?) -> EventLoopFuture<PeerSessionRecord> in
                guard let connection else {
                    return group.next().makeFailedFuture(ConcordError(.closed, "cannot connect to \(address): the connection closed at once"))
                }
                return connection.result
            }
        do {
            return try await ended.get()
        } catch {
            throw error as? ConcordError ?? ConcordError(.closed, "cannot connect to \(address): \(error)", cause: error)
        }
    }
}

/// The client's connection, made on the event loop and read by the caller; and whether the
/// caller has stopped it, so that a connection made after the stop is stopped as it is made.
final class ConnectionBox: Sendable {
    private let state = LockedState<(connection: PeerConnection?, stopped: Bool)>((nil, false))

    func set(_ connection: PeerConnection) {
        let stopNow = state.withLock { state in
            state.connection = connection
            return state.stopped
        }
        if stopNow { connection.stop() }
    }

    func get() -> PeerConnection? { state.withLock { $0.connection } }

    /// Stops the connection there is, and any made from now on.
    func stop() {
        state.withLock { state in
            state.stopped = true
            return state.connection
        }?.stop()
    }
}
