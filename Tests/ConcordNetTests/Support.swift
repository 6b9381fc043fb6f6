import ConcordCore
import ConcordPeer
import Foundation
import NIOCore
import Testing

@_exported import ConcordTestSupport
@testable import ConcordNet

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension PeerSession {
    /// Takes bytes as `receive` does, and confirms each batch (and the merge's finish) at once, as
    /// a store that applies it would: every action, up to the session's end or what the bytes hold.
    mutating func receiveApplying(_ bytes: [UInt8]) -> [PeerAction] {
        var actions = receive(bytes)
        var index = 0
        while index < actions.count {
            switch actions[index] {
            case .apply, .finishMerge: actions += batchApplied()
            default: break
            }
            index += 1
        }
        return actions
    }
}

/// A `PeerClock` that a test moves by hand: timers fire when `advance` passes their deadline, on
/// their event loops, and never otherwise.
final class ManualPeerClock: PeerClock, @unchecked Sendable {
    private struct Timer {
        var deadline: NIODeadline
        var loop: any EventLoop
        var task: @Sendable () -> Void
    }

    private let lock = NSLock()
    private var current = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
    private var timers: [Int: Timer] = [:]
    private var nextID = 0

    func now() -> NIODeadline { lock.withLock { current } }

    func schedule(at deadline: NIODeadline, on loop: any EventLoop, _ task: @escaping @Sendable () -> Void) -> PeerTimer {
        let id: Int? = lock.withLock {
            guard deadline > current else { return nil }
            nextID += 1
            timers[nextID] = Timer(deadline: deadline, loop: loop, task: task)
            return nextID
        }
        guard let id else {
            loop.execute(task)
            return PeerTimer {}
        }
        return PeerTimer { [self] in lock.withLock { _ = timers.removeValue(forKey: id) } }
    }

    /// Moves the time on by `amount`, and runs the timers due by then in the order of their
    /// deadlines; waits until their event loops have run them (and what they scheduled at once).
    /// First it lets those loops finish what they are doing, so that activity that has happened
    /// (a write the peer has read, whose completion the loop is still handling) is stamped with
    /// the time before the move.
    func advance(_ amount: Duration) {
        for loop in lock.withLock({ timers.values.map(\.loop) }) { Self.settle(loop) }
        let due: [Timer] = lock.withLock {
            current = current + TimeAmount(amount)
            let due = timers.filter { $0.value.deadline <= current }.sorted { $0.value.deadline < $1.value.deadline }
            for (id, _) in due { timers[id] = nil }
            return due.map(\.value)
        }
        for timer in due {
            timer.loop.execute(timer.task)
            Self.settle(timer.loop)
        }
    }

    /// Waits until `loop` has run what it was given before now. Not on a future: a timer can end
    /// the session whose group then shuts its loop down, and a loop shut down drops what it is
    /// given, leaving a future never completed (a hang in CI); here the wait ends after 5 s.
    private static func settle(_ loop: any EventLoop) {
        let ran = DispatchSemaphore(value: 0)
        loop.execute { ran.signal() }
        _ = ran.wait(timeout: .now() + 5)
    }
}

/// A listening socket on a free loopback port, for a server that does not follow the protocol.
final class RawServer {
    let descriptor: Int32
    let port: Int

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 4) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard bound else {
            close(listener)
            throw POSIXError(.EADDRINUSE)
        }
        descriptor = listener
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(descriptor) }

    /// The next connection (blocks).
    func acceptConnection() throws -> RawClient {
        let connection = accept(descriptor, nil, nil)
        guard connection >= 0 else { throw POSIXError(.EIO) }
        return RawClient(descriptor: connection)
    }
}

/// A plain TCP client on POSIX sockets, for peers that do not follow the protocol.
final class RawClient {
    let descriptor: Int32

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// - Parameter receiveBuffer: a small socket receive buffer (SO_RCVBUF), for a client that
    ///   holds up its peer's writes early.
    init(port: Int, receiveBuffer: Int32? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EIO) }
        if var size = receiveBuffer {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { throw POSIXError(.ECONNREFUSED) }
    }

    deinit { close(descriptor) }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written <= 0 { return }
            offset += written
        }
    }

    /// Reads what arrives until the peer closes or `timeout` passes: the bytes, and whether it closed.
    func receiveUntilClosed(timeout: TimeInterval) -> (bytes: [UInt8], closed: Bool) {
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000)))
            if ready <= 0 { continue }
            var buffer = [UInt8](repeating: 0, count: 65_536)
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count <= 0 { return (received, true) }
            received += buffer[..<count]
        }
        return (received, false)
    }

    /// Reads `count` whole frames (length and payload), or less if the peer closes first or
    /// `timeout` passes.
    func receiveFrames(_ count: Int, timeout: TimeInterval) -> [UInt8] {
        var received: [UInt8] = []
        for _ in 0..<count {
            let header = receive(count: 4, timeout: timeout)
            received += header
            guard header.count == 4 else { break }
            received += receive(count: header.reduce(0) { $0 << 8 | Int($1) }, timeout: timeout)
        }
        return received
    }

    /// Reads exactly `count` bytes, or fewer if the peer closes first or `timeout` passes.
    func receive(count: Int, timeout: TimeInterval) -> [UInt8] {
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while received.count < count, Date() < deadline {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000))) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: count - received.count)
            let got = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if got <= 0 { break }
            received += buffer[..<got]
        }
        return received
    }
}

extension [PeerAction] {
    /// The bytes of the `.send` actions.
    var sentBytes: [UInt8] {
        var bytes: [UInt8] = []
        for case .send(let sent) in self { bytes += sent }
        return bytes
    }
}
