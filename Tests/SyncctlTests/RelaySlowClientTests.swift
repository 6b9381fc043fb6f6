import ConcordKeys
import ConcordRelayProtocol
import Foundation
import Testing

/// Clients that send their requests too slowly (SPEC.md §16.3, the request timeout): a slowloris
/// that trickles a request's head or body a byte at a time is answered 408 `timeout` and cut off
/// after the timeout, whatever it sends meanwhile; while the relay answers (a listing that waits
/// for longer than the timeout), nothing is cut; devices sync as before. A relay with a request
/// timeout of 2 s, over real connections.
@Suite(.waitsForProcesses) struct RelaySlowClientTests {
    static let refusal = #"{"error":"timeout","message":"a request must arrive within 2 s (its body at 64 KiB a second after that)"}"#

    @Test func aClientThatTricklesItsRequestIsRefusedAndCutOff() throws {
        let sandbox = try Sandbox()
        let relay = try RelayProcess(sandbox, data: sandbox.path("relay"), options: ["--request-timeout", "2"])
        let space = String(repeating: "a", count: 32)
        let name = String(repeating: "b", count: 32) + "-0000000001.cbundle"
        let trickles = [
            // A head that never ends.
            "GET /v1/health HTTP/1.1\r\nHost: relay\r\nX-Slow: ",
            // A head whole, then a body of 1,000 bytes that comes a byte at a time: its share of
            // time at 64 KiB/s is below a second, so it has 2 s in all.
            "PUT /v1/spaces/\(space)/files/\(name) HTTP/1.1\r\nHost: relay\r\nContent-Length: 1000\r\n\r\n0123456789",
        ]
        for start in trickles {
            let connection = try RawConnection(port: relay.port)
            let begun = ContinuousClock.now
            try connection.send(Array(start.utf8))
            // A byte every 200 ms, until the relay answers and closes the connection.
            let answer = connection.readUntilClosed(upTo: .seconds(20)) { try? connection.send(Array("x".utf8)) }
            let elapsed = ContinuousClock.now - begun
            #expect(answer.closed, "the relay closed the connection: \(answer.text)")
            #expect(elapsed >= .milliseconds(1900) && elapsed < .seconds(10), "cut off after the timeout: \(elapsed)")
            #expect(answer.text.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"), "\(answer.text)")
            #expect(answer.text.contains("\r\nConnection: close\r\n"), "\(answer.text)")
            #expect(answer.text.hasSuffix("\r\n\r\n" + Self.refusal + "\n"), "\(answer.text)")
        }

        // The relay is unharmed, and logged nothing of those clients: they are not its faults.
        #expect(try RawRelayRequests(url: relay.url).send(.GET, "/v1/health").status == 200)
        let stopped = relay.stop()
        #expect(stopped.succeeded, "\(stopped)")
        #expect(stopped.stderrLines.isEmpty, "\(stopped)")
    }

    /// A connection that sends nothing, from its opening or after an answer, is closed after the
    /// timeout with the same 408.
    @Test func anIdleConnectionIsClosedAfterTheTimeout() throws {
        let sandbox = try Sandbox()
        let relay = try RelayProcess(sandbox, data: sandbox.path("relay"), options: ["--request-timeout", "2"])
        for first in ["", "GET /v1/health HTTP/1.1\r\nHost: relay\r\n\r\n"] {
            // Before connecting: the relay's deadline runs from the connection's opening.
            let begun = ContinuousClock.now
            let connection = try RawConnection(port: relay.port)
            if !first.isEmpty { try connection.send(Array(first.utf8)) }
            let answer = connection.readUntilClosed(upTo: .seconds(20)) {}
            let elapsed = ContinuousClock.now - begun
            #expect(answer.closed, "the relay closed the connection: \(answer.text)")
            #expect(elapsed >= .milliseconds(1900) && elapsed < .seconds(10), "closed after the timeout: \(elapsed)")
            let refusal = try #require(answer.text.range(of: "HTTP/1.1 408 Request Timeout\r\n"), "\(answer.text)")
            #expect(answer.text[..<refusal.lowerBound].isEmpty == first.isEmpty, "an answer first, if a request came: \(answer.text)")
            if !first.isEmpty { #expect(answer.text.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(answer.text)") }
            #expect(answer.text.hasSuffix("\r\n\r\n" + Self.refusal + "\n"), "\(answer.text)")
        }
    }

    @Test func aListingThatWaitsLongerThanTheTimeoutIsAnsweredAndDevicesSync() throws {
        let sandbox = try Sandbox()
        let relay = try RelayProcess(sandbox, data: sandbox.path("relay"), options: ["--request-timeout", "2"])
        let key = SyncKey.generate()
        let space = RelayCredentials(key: key).space
        let begun = ContinuousClock.now
        let answer = try RawRelayRequests(url: relay.url).send(.GET, "/v1/spaces/\(space)/files?cursor=0&wait=4", signedWith: key)
        #expect(answer.status == 200, "\(answer.body)")
        #expect(ContinuousClock.now - begun >= .milliseconds(3900), "the listing waited its 4 s, past the request timeout")

        let (a, b) = try sandbox.makePairedStores()
        let written = try a.addReminder("through a relay that cuts off slow clients")
        try a.ok("sync", "--relay", relay.url)
        try b.ok("sync", "--relay", relay.url)
        #expect(try b.show(written).string("title") == "through a relay that cuts off slow clients")
    }
}

/// A TCP connection to 127.0.0.1 that sends and reads raw bytes, for requests no HTTP client
/// would send.
private final class RawConnection {
    private let socket: Int32

    init(port: Int) throws {
        #if canImport(Glibc)
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        socket = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard socket >= 0, connected else { throw ConnectionFailure(reason: String(cString: strerror(errno))) }
        // A write to a connection the relay closed fails with EPIPE, not SIGPIPE.
        #if canImport(Darwin)
        var on: Int32 = 1
        setsockopt(socket, SOL_SOCKET, SO_NOSIGPIPE, &on, socklen_t(MemoryLayout<Int32>.size))
        #endif
    }

    deinit { close(socket) }

    func send(_ bytes: [UInt8]) throws {
        #if canImport(Glibc)
        let sent = Glibc.send(socket, bytes, bytes.count, Int32(MSG_NOSIGNAL))
        #else
        let sent = Darwin.send(socket, bytes, bytes.count, 0)
        #endif
        guard sent == bytes.count else { throw ConnectionFailure(reason: String(cString: strerror(errno))) }
    }

    /// Reads until the other side closes the connection or `limit` passes, calling `idle` after
    /// each 200 ms without a byte: what was read, and whether the connection was closed.
    func readUntilClosed(upTo limit: Duration, idle: () -> Void) -> (text: String, closed: Bool) {
        let deadline = ContinuousClock.now + limit
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline {
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 200) > 0 else {
                idle()
                continue
            }
            let count = recv(socket, &buffer, buffer.count, 0)
            if count <= 0 { return (String(decoding: received, as: UTF8.self), true) }
            received += buffer[..<count]
        }
        return (String(decoding: received, as: UTF8.self), false)
    }

    struct ConnectionFailure: Error {
        var reason: String
    }
}
