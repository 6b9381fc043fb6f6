import ConcordCore
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP proxy on 127.0.0.1 that forwards each connection to `target`, delaying each chunk by up
/// to 20 ms, and meets `faults` faults in all, each at a byte drawn for it (both directions
/// counted together, from the connection's start or its last fault): it forwards up to that
/// byte, then either cuts the connection (closes both sides) or stalls it (forwards nothing for 1
/// to 18 s, then goes on). So a session meets a fault
/// at any byte of its handshake, exchange or live phase. The draws come from a seed, printed by
/// the test, so a run replays. A test may also cut every connection at a moment of its choosing
/// (`cutConnections()`), as a dropped network would.
final class FaultyProxy: @unchecked Sendable {
    // @unchecked Sendable: `random`, `faultsLeft`, `met`, `forwarded` and `nextID` are read and
    // written only with `lock` held; the rest is immutable.
    let port: Int
    private let listener: Int32
    private let target: Int
    private let maxBytes: UInt64
    private let lock = NSLock()
    private var random: SplitMix64
    private var faultsLeft: Int
    private var met: [String] = []
    /// The connections being forwarded, each as its two descriptors: they are closed only once
    /// taken out of here, so that `cutConnections()` never touches a descriptor reused meanwhile.
    private var forwarded: [Int: (client: Int32, server: Int32)] = [:]
    private var nextID = 0

    private enum Fault {
        case cut
        case stall(seconds: Int)
    }

    init(target: Int, seed: UInt64, faults: Int, maxBytes: UInt64) throws {
        self.target = target
        self.maxBytes = maxBytes
        random = SplitMix64(seed: seed)
        faultsLeft = faults
        (listener, port) = try Self.makeListener()
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit { close(listener) }

    /// The faults met so far, in order (`cut at 125`, `stalled 7 s at 1464`).
    var faults: [String] { lock.withLock { met } }

    /// Cuts every connection being forwarded (both sides); returns how many there were.
    @discardableResult
    func cutConnections() -> Int {
        lock.withLock {
            for (client, server) in forwarded.values {
                shutdown(client, Int32(SHUT_RDWR))
                shutdown(server, Int32(SHUT_RDWR))
            }
            return forwarded.count
        }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 { return }
            let fault = nextFault(after: 0)
            let delays = lock.withLock { (0..<64).map { _ in random.next() % 21 } }
            guard let server = Self.dial(target) else {
                close(client)
                continue
            }
            let id = lock.withLock {
                nextID += 1
                forwarded[nextID] = (client, server)
                return nextID
            }
            Thread.detachNewThread { [self] in forward(id, client, server, fault: fault, delays: delays) }
        }
    }

    /// The next fault of a connection that has passed `passed` bytes, while faults are left.
    private func nextFault(after passed: UInt64) -> (at: UInt64, Fault)? {
        lock.withLock {
            guard faultsLeft > 0 else { return nil }
            faultsLeft -= 1
            let at = passed + 1 + random.next() % maxBytes
            return random.next() % 2 == 0 ? (at, .cut) : (at, .stall(seconds: 1 + Int(random.next() % 18)))
        }
    }

    /// Copies bytes both ways until either side closes, each chunk after a delay of `delays`
    /// milliseconds (in turn), and meets `fault` once its bytes have gone through.
    private func forward(_ id: Int, _ client: Int32, _ server: Int32, fault: (at: UInt64, Fault)?, delays: [UInt64]) {
        defer {
            lock.withLock { _ = forwarded.removeValue(forKey: id) }
            close(client)
            close(server)
        }
        var fault = fault
        var chunks = 0
        var passed: UInt64 = 0
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: server, events: Int16(POLLIN), revents: 0)]
        func send(_ bytes: ArraySlice<UInt8>, to descriptor: Int32) -> Bool {
            var offset = bytes.startIndex
            while offset < bytes.endIndex {
                let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                if written <= 0 { return false }
                offset += written
            }
            return true
        }
        while true {
            guard poll(&fds, 2, 1_000) >= 0 else { return }
            for (index, entry) in fds.enumerated() where entry.revents != 0 {
                let to = index == 0 ? server : client
                let count = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                if count <= 0 { return }
                Thread.sleep(forTimeInterval: Double(delays[chunks % delays.count]) / 1000)
                chunks += 1
                guard let (limit, kind) = fault, passed + UInt64(count) >= limit else {
                    guard send(buffer[..<count], to: to) else { return }
                    passed += UInt64(count)
                    continue
                }
                let before = Int(limit - passed)
                guard send(buffer[..<before], to: to) else { return }
                passed = limit
                fault = nil
                switch kind {
                case .cut:
                    lock.withLock { met.append("cut at \(passed)") }
                    return
                case .stall(let seconds):
                    lock.withLock { met.append("stalled \(seconds) s at \(passed)") }
                    Thread.sleep(forTimeInterval: Double(seconds))
                    guard send(buffer[before..<count], to: to) else { return }
                    passed += UInt64(count - before)
                    // The same connection may meet another fault further on.
                    fault = nextFault(after: passed)
                }
            }
        }
    }

    private static func makeListener() throws -> (Int32, Int) {
        let descriptor = tcpSocket()
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && listen(descriptor, 16) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard descriptor >= 0, bound else { throw POSIXError(.EADDRINUSE) }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }

    private static func dial(_ port: Int) -> Int32? {
        let descriptor = tcpSocket()
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    private static func tcpSocket() -> Int32 {
        #if canImport(Glibc)
        socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        socket(AF_INET, SOCK_STREAM, 0)
        #endif
    }

    /// 127.0.0.1:`port` (0: any free port, for a listener).
    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}
