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

/// A `PeerClock` that a test moves by hand: a task waiting on it (a timeout) wakes when `advance`
/// passes its deadline, and never otherwise (whatever loop it names).
final class ManualPeerClock: PeerClock, Sendable {
    private struct Sleeper {
        var deadline: NIODeadline
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var current = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
        var sleepers: [Int: Sleeper] = [:]
        /// Sleepers cancelled before they began to wait.
        var cancelled: Set<Int> = []
        var nextID = 0
    }

    private let state = LockedState(State())

    func now() -> NIODeadline { state.withLock { $0.current } }

    func sleep(until deadline: NIODeadline, on loop: any EventLoop) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let now: Result<Void, any Error>? = state.withLock { state in
                    if state.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    if deadline <= state.current { return .success(()) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let now { continuation.resume(with: now) }
            }
        } onCancel: {
            state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let sleeper = state.sleepers.removeValue(forKey: id) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return sleeper.continuation
            }?.resume(throwing: CancellationError())
        }
    }

    /// Moves the time on by `amount`, and wakes the tasks whose deadlines that passes, in the
    /// order of their deadlines.
    func advance(_ amount: Duration) {
        let due = state.withLock { state in
            state.current = state.current + TimeAmount(amount)
            let due = state.sleepers.filter { $0.value.deadline <= state.current }.sorted { $0.value.deadline < $1.value.deadline }
            for (id, _) in due { state.sleepers[id] = nil }
            return due.map(\.value.continuation)
        }
        for continuation in due { continuation.resume() }
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
