import ConcordNet
import Foundation

// A peer pair on loopback TCP: a `TestServer` serving a node, and `Node.sync(with:)`.

/// Short timeouts, so that tests of them are quick.
public func quickConfiguration(handshake: Duration = .milliseconds(300), idle: Duration = .seconds(1)) -> PeerTransportConfiguration {
    var configuration = PeerTransportConfiguration(handshakeTimeout: handshake, idleTimeout: idle)
    configuration.lingerTimeout = .milliseconds(300)
    return configuration
}

/// A server on a free loopback port, and the sessions it has logged.
public final class TestServer: @unchecked Sendable {
    public let server: PeerServer
    public let address: PeerAddress

    public init(
        _ node: Node, configuration: PeerTransportConfiguration = quickConfiguration(idle: .seconds(10)),
        onProgress: (@Sendable (PeerProgress) -> Void)? = nil
    ) throws {
        let box = RecordBox()
        server = PeerServer(store: node.store, configuration: configuration, onProgress: onProgress, onSession: { record in box.append(record) })
        let bound = try runOffThePool { [server] in try await server.start(host: "127.0.0.1", port: 0) }
        address = bound
        recordsBox = box
    }

    private let recordsBox: RecordBox

    public var records: [PeerSessionRecord] { recordsBox.all }

    /// Waits until the server has logged `count` sessions.
    public func waitForRecords(_ count: Int, timeout: TimeInterval = 10) -> [PeerSessionRecord] {
        let deadline = Date().addingTimeInterval(timeout)
        while recordsBox.all.count < count, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        return recordsBox.all
    }

    public func stop() { try? runOffThePool { [server] in await server.stop() } }
}

/// The sessions a server has logged, from its event loops.
public final class RecordBox: @unchecked Sendable {
    // @unchecked Sendable: `records` is touched only with `lock` held.
    private let lock = NSLock()
    private var records: [PeerSessionRecord] = []
    public init() {}
    public func append(_ record: PeerSessionRecord) { lock.withLock { records.append(record) } }
    public var all: [PeerSessionRecord] { lock.withLock { records } }
}
