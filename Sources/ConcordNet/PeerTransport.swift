import ConcordCore
import ConcordPeer
import Foundation
import NIOCore
import NIOPosix

/// The bounds of a peer session carried over TCP (SPEC.md §15.7), and how much it buffers.
/// The defaults are the SPEC's; tests make the timeouts short.
public struct PeerTransportConfiguration: Sendable {
    /// From the connection's start to the end of the handshake.
    public var handshakeTimeout: Duration = PeerProtocol.handshakeTimeout
    /// A session that neither receives nor sends a byte for this long is ended.
    public var idleTimeout: Duration = PeerProtocol.idleTimeout
    /// How long a connection may take to open (client).
    public var connectTimeout: Duration = .seconds(10)
    /// The most sessions a server runs at once in their exchange (one-shot sessions, and live ones
    /// until they are live); a connection beyond them is closed at once.
    public var maxSessions = 64
    /// The most live sessions a server keeps in their live phase (SPEC.md §15.10); a client that
    /// asks for one beyond them gets a one-shot session.
    public var maxLiveSessions = 100
    /// Operations read from the store at a time when streaming what the peer lacks.
    public var readChunkOperations = 4096
    /// Bytes handed to the connection and not yet written before the sender waits (outbound
    /// flow control). One sealed batch may go past it.
    public var outboundBufferBytes = 4 << 20
    /// Bytes received and not yet handled before the connection stops reading (inbound flow
    /// control): a peer that sends faster than batches are applied waits.
    public var inboundBufferBytes = 4 << 20
    /// How many batches that have arrived together are logged as one part of the session's merge
    /// (one transaction, one sync to disk, SPEC.md §15.9): while a part is logged the next batches
    /// arrive, and logging them together spares a commit each. Eight batches are at most 131,072
    /// operations in memory at once, and a part never takes more than 4 MiB of raw operations
    /// (what one batch may hold at most).
    public var batchesPerApply = 8
    /// Once a session has ended, how long a side waits for what it wrote to be taken before it
    /// closes anyway (a peer that stopped reading gets no longer); and after a failure, how long it
    /// keeps reading (and dropping) what the peer still sends, so that its last words (an `error`)
    /// reach the peer rather than a reset.
    public var lingerTimeout: Duration = .seconds(2)
    /// Where the timeouts take the time from and how they wait: the system's monotonic clock,
    /// unless a test passes a clock it moves by hand.
    package var clock: any PeerClock = LivePeerClock()
    /// How this side words a failure: in what it tells its peer when it ends a session itself
    /// (SPEC.md §15.8) and in a server's log. By default the failure's `message`; an app may add
    /// its own advice from the failure's code, as `syncctl` names its commands.
    public var describeError: @Sendable (ConcordError) -> String = { $0.message }

    /// Each wait of a live client before it connects again is varied by this much, a number in
    /// -0.2...0.2 (random, unless a test fixes it; SPEC.md §15.10).
    package var reconnectJitter: @Sendable () -> Double = { Double.random(in: -0.2...0.2) }

    /// The highest protocol version this side speaks (SPEC.md §15.10): lower for one attempt after
    /// a server refused those above it, and in tests, to be a side of an older build.
    package var highestVersion = PeerProtocol.highestVersion

    /// Test hook: the side closes its connection, as if killed, once it has merged this many
    /// `.apply`s (sending nothing more: no `error`, no `ack`).
    var dropConnectionAfterApplies: Int?

    /// The defaults: 10 s to connect and to finish the handshake, 60 s idle, at most 64 sessions.
    public init() {}

    /// The defaults with other timeouts (tests make them short).
    public init(handshakeTimeout: Duration, idleTimeout: Duration) {
        self.handshakeTimeout = handshakeTimeout
        self.idleTimeout = idleTimeout
    }
}

/// The time source of a transport's timeouts (SPEC.md §15.7): the time now, and a wait until a
/// given time. `LivePeerClock` is the system's; a test injects one that it moves by hand, so that
/// a 60-second timeout is tested to the millisecond without waiting 60 seconds.
package protocol PeerClock: Sendable {
    /// The time now.
    func now() -> NIODeadline
    /// Returns once `now()` has reached `deadline` (at once if it has already), woken by a timer
    /// of `loop`; throws `CancellationError` if the calling task is cancelled first.
    func sleep(until deadline: NIODeadline, on loop: any EventLoop) async throws
}

/// The system's monotonic clock, and the event loop's timers.
package struct LivePeerClock: PeerClock {
    package init() {}

    package func now() -> NIODeadline { .now() }

    /// Not `Task.sleep`, whose wake-up waits for one of the threads that the process's tasks
    /// share: an app or a test may block them all, and a session's timeouts must ring whatever
    /// they do. The event loop's thread is NIO's own.
    package func sleep(until deadline: NIODeadline, on loop: any EventLoop) async throws {
        guard deadline > .now() else { return }
        let (wakes, wake) = AsyncStream<Void>.makeStream()
        let timer = loop.scheduleTask(deadline: deadline) { wake.finish() }
        // Cancelling the task ends the stream without the timer.
        for await _ in wakes {}
        timer.cancel()
        try Task.checkCancellation()
    }
}

/// How a session went, for a log line or a command's report.
public struct PeerSessionRecord: Sendable {
    /// The peer's address, `HOST:PORT` (`[v6]:PORT` for IPv6).
    public var peer: String
    /// What the session did each way (counts, bytes on the wire); complete when it finished.
    public var summary: PeerSummary
    /// Why it failed, or `nil` when it finished.
    public var failure: ConcordError?
    /// From the connection's start to its end.
    public var duration: Duration
    /// Operations the store did not hold before, of those received (some may have arrived
    /// meanwhile from elsewhere).
    public var newOperations = 0
    /// The greatest timestamp merged that is more than a day ahead of the wall clock (SPEC.md §3).
    public var farFutureTimestamp: Timestamp?
    /// Whether the session went live and then received a message of the live phase from the
    /// peer (`PeerSession.peerHeardWhileLive`): a live client's success (SPEC.md §15.10).
    package var peerHeardWhileLive = false

    /// Whether the session finished (both sides hold all that the other had), rather than failed.
    public var finished: Bool { failure == nil }

    /// One line: the peer, operations and bytes each way, the duration, or why it failed.
    public var logLine: String { logLine(describingFailure: { $0.message }) }

    /// `logLine`, with the failure worded by `describe`.
    package func logLine(describingFailure describe: (ConcordError) -> String) -> String {
        let seconds = String(format: "%.2f", duration.seconds)
        let counts = "received \(summary.operationsReceived) operation\(summary.operationsReceived == 1 ? "" : "s") (\(summary.bytesReceived) bytes), "
            + "sent \(summary.operationsSent) (\(summary.bytesSent) bytes)"
        if let failure {
            return "peer \(peer): failed after \(seconds) s: \(describe(failure)) [\(counts)]"
        }
        return "peer \(peer): \(counts) in \(seconds) s"
    }
}

/// Progress of a running session, for a progress line.
public struct PeerProgress: Sendable, Hashable {
    /// The peer's address.
    public var peer: String
    /// Operations received so far.
    public var operationsReceived = 0
    /// Operations sent so far.
    public var operationsSent = 0
    /// Bytes received so far.
    public var bytesReceived = 0
    /// Bytes sent so far.
    public var bytesSent = 0
}

/// A peer's network address, written `HOST:PORT`: `127.0.0.1:7420`, `laptop.local:7420`, `[::1]:7420`; the port
/// may be left out (7420).
public struct PeerAddress: Sendable, Hashable, CustomStringConvertible {
    /// The port a server listens on unless told otherwise: 7420.
    public static let defaultPort = 7420
    /// A host name or an IP address (IPv6 without brackets).
    public var host: String
    /// The TCP port.
    public var port: Int

    /// The address `host:port`.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`, `HOST`, `[IPv6]:PORT` or a bare IPv6 address; `nil` if it is none of these.
    public init?(_ text: String, defaultPort: Int = PeerAddress.defaultPort) {
        var host = Substring(text)
        var port = defaultPort
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let number = Int(rest.dropFirst()) else { return nil }
                port = number
            }
        } else if let colon = host.lastIndex(of: ":") {
            // One colon: HOST:PORT. Several: a bare IPv6 address, without a port.
            if host.firstIndex(of: ":") == colon {
                guard let number = Int(host[host.index(after: colon)...]) else { return nil }
                port = number
                host = host[..<colon]
            }
        }
        guard !host.isEmpty, (0...65_535).contains(port), !host.contains(where: { $0.isWhitespace }) else { return nil }
        self.host = String(host)
        self.port = port
    }

    /// `host:port`, with an IPv6 host in brackets.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Why a connection could not be made, in a few words.
func describeConnectError(_ error: any Error, to address: PeerAddress) -> String {
    switch error {
    case let error as IOError:
        return "cannot connect to \(address): \(String(cString: strerror(error.errnoCode)).lowercased())"
    case let error as NIOConnectionError:
        if let dns = error.dnsAError ?? error.dnsAAAAError, error.connectionErrors.isEmpty {
            return "cannot connect to \(address): cannot resolve \(address.host) (\(dns))"
        }
        if let first = error.connectionErrors.first {
            return describeConnectError(first.error, to: address)
        }
        return "cannot connect to \(address): no address for \(address.host)"
    case ChannelError.connectTimeout:
        return "cannot connect to \(address): no answer (timed out)"
    default:
        return "cannot connect to \(address): \(error)"
    }
}

extension SocketAddress {
    /// `HOST:PORT`, or `[v6]:PORT`.
    var shown: String {
        guard let ip = ipAddress, let port else { return description }
        return ip.contains(":") ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }
}

extension Duration {
    /// `10 s`, `0.2 s`, `150 ms`: for a timeout's message.
    var shown: String {
        let value = seconds
        if value >= 1 { return value == value.rounded() ? "\(Int(value)) s" : String(format: "%.1f s", value) }
        return "\(Int((value * 1000).rounded())) ms"
    }
}
