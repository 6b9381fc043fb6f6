import ConcordCore
import ConcordExchange
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
/// let server = PeerServer(store: store) { record in print(record.logLine) }
/// let address = try server.start(host: "127.0.0.1", port: 7420)
/// …
/// server.stop()        // ends the sessions under way, then closes
/// ```
public final class PeerServer: @unchecked Sendable {
    public let store: ConcordStore
    public let configuration: PeerTransportConfiguration
    private let group: any EventLoopGroup
    private let ownsGroup: Bool
    private let onSession: @Sendable (PeerSessionRecord) -> Void
    private let onProgress: (@Sendable (PeerProgress) -> Void)?
    private let logger: Logger

    private let lock = NSLock()
    private var listener: (any Channel)?
    private var sessions: [ObjectIdentifier: PeerConnection] = [:]
    private var stopping = false
    private var drained: [CheckedContinuation<Void, Never>] = []

    /// - Parameters:
    ///   - group: the event loops to run on; by default a group of its own with one loop per core.
    ///   - logger: where the server logs (SPEC.md §15.9): each session's end at `info` (`notice`
    ///     when it failed), each connection accepted at `debug`. By default it logs nothing.
    ///   - onSession: called once per session when it ends (finished or failed), from any thread.
    ///   - onProgress: called as sessions move operations, from any thread.
    public init(
        store: ConcordStore, configuration: PeerTransportConfiguration = PeerTransportConfiguration(),
        group: (any EventLoopGroup)? = nil, logger: Logger = .silent, onProgress: (@Sendable (PeerProgress) -> Void)? = nil,
        onSession: @escaping @Sendable (PeerSessionRecord) -> Void = { _ in }
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
    public var activeSessions: Int { lock.withLock { sessions.count } }

    /// Starts listening. Port 0 picks a free port; the address returned says which.
    @discardableResult
    public func start(host: String, port: Int) throws -> SocketAddress {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(PeerChannelHandler { [self] channel in accept(channel) })
                }
            }
        let channel: any Channel
        do {
            channel = try bootstrap.bind(host: host, port: port).wait()
        } catch let error as IOError {
            throw PeerFailure(.local, "cannot listen on \(PeerAddress(host: host, port: port)): \(String(cString: strerror(error.errnoCode)).lowercased())")
        } catch {
            throw PeerFailure(.local, "cannot listen on \(PeerAddress(host: host, port: port)): \(error)")
        }
        lock.withLock { listener = channel }
        return channel.localAddress!
    }

    /// A new connection: a session of its own, or closed at once when the server is full or stopping.
    private func accept(_ channel: any Channel) -> PeerConnection {
        let connection = PeerConnection(
            channel: channel, role: .server, store: store, key: nil, localVersions: nil,
            configuration: configuration, progress: onProgress)
        let admitted = lock.withLock {
            guard !stopping, sessions.count < configuration.maxSessions else { return false }
            sessions[ObjectIdentifier(connection)] = connection
            return true
        }
        guard admitted else {
            // Too many at once (or shutting down): this one is refused before its handshake.
            connection.abort(PeerFailure(.local, "the server is busy with \(configuration.maxSessions) sessions"))
            connection.result.whenComplete { [self] result in
                if case .success(var record) = result {
                    record.failure = PeerFailure(.local, "refused: \(configuration.maxSessions) sessions are under way")
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
            let waiters = lock.withLock {
                sessions[ObjectIdentifier(connection)] = nil
                guard sessions.isEmpty, stopping else { return [CheckedContinuation<Void, Never>]() }
                defer { drained.removeAll() }
                return drained
            }
            for waiter in waiters { waiter.resume() }
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
        if let failure = record.failure {
            metadata["failure"] = "\(failure.message)"
            // `notice`, not `warning`: a peer's session failed, the server did not.
            logger.notice("\(record.logLine)", metadata: metadata)
        } else {
            logger.info("\(record.logLine)", metadata: metadata)
        }
    }

    /// Stops listening, ends the sessions under way (each peer is told why), waits up to `grace`
    /// for them to close, and releases the event loops. Blocks; call it off the event loops.
    public func stop(grace: Duration = .seconds(5)) {
        let (listener, running) = lock.withLock { () -> ((any Channel)?, [PeerConnection]) in
            stopping = true
            defer { self.listener = nil }
            return (self.listener, Array(sessions.values))
        }
        try? listener?.close().wait()
        for connection in running { connection.abort(PeerFailure(.local, "the server is shutting down")) }
        let deadline = ContinuousClock.now + grace
        while activeSessions > 0, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.01) }
        for connection in lock.withLock({ Array(sessions.values) }) { connection.channel.close(promise: nil) }
        if ownsGroup { try? group.syncShutdownGracefully() }
    }
}

/// Runs one two-way session with a peer over TCP (`syncctl sync --peer`, SPEC.md §15).
public enum PeerClient {
    /// Connects to `address`, syncs with the sync key the store holds, and returns how it went. A
    /// session that fails is returned with its `failure` set (nothing after the failure was
    /// applied; batches applied before it stay); a connection that cannot be made throws
    /// `PeerFailure` (`.closed`), a store without a sync key `PeerFailure` (`.local`).
    ///
    /// Blocks until the session has ended; call it off any event loop.
    public static func sync(
        store: ConcordStore, address: PeerAddress,
        configuration: PeerTransportConfiguration = PeerTransportConfiguration(),
        group: (any EventLoopGroup)? = nil, progress: (@Sendable (PeerProgress) -> Void)? = nil
    ) throws -> PeerSessionRecord {
        let ownGroup = group == nil ? MultiThreadedEventLoopGroup(numberOfThreads: 1) : nil
        defer { try? ownGroup?.syncShutdownGracefully() }
        let versions = try store.versionVector()
        guard let key = try store.syncKey() else {
            throw PeerFailure(.local, "the store at \(store.path) has no sync key; run 'syncctl key generate', or 'syncctl key import KEY' with the key of another store")
        }
        let box = ConnectionBox()
        let bootstrap = ClientBootstrap(group: group ?? ownGroup!)
            .connectTimeout(TimeAmount(configuration.connectTimeout))
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(PeerChannelHandler { channel in
                        let connection = PeerConnection(
                            channel: channel, role: .client, store: store, key: key, localVersions: versions,
                            configuration: configuration, progress: progress)
                        box.set(connection)
                        return connection
                    })
                }
            }
        let channel: any Channel
        do {
            channel = try bootstrap.connect(host: address.host, port: address.port).wait()
        } catch {
            throw PeerFailure(.closed, describeConnectError(error, to: address))
        }
        // `channelActive` has run on the loop before `connect` succeeded.
        let connection = try channel.eventLoop.submit { box.get() }.wait()
        guard let connection else { throw PeerFailure(.closed, "cannot connect to \(address): the connection closed at once") }
        return try connection.result.wait()
    }
}

/// The client's connection, made on the event loop and read by the caller.
private final class ConnectionBox: @unchecked Sendable {
    private let lock = NSLock()
    private var connection: PeerConnection?

    func set(_ connection: PeerConnection) { lock.withLock { self.connection = connection } }
    func get() -> PeerConnection? { lock.withLock { connection } }
}
