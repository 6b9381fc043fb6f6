import ConcordCore
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP proxy on 127.0.0.1 that forwards each connection to `target` and cuts the first
/// `cuts` of them at a byte drawn for each (both directions counted together): it forwards up
/// to that byte, then closes both sides. So a session is broken at any byte of its handshake,
/// exchange or live phase. The draws come from a seed, printed by the test, so a run replays.
final class CuttingProxy: @unchecked Sendable {
    // @unchecked Sendable: `random`, `cutsLeft` and `cutAt` are read and written only with `lock`
    // held; the rest is immutable.
    let port: Int
    private let listener: Int32
    private let target: Int
    private let maxBytes: UInt64
    private let lock = NSLock()
    private var random: SplitMix64
    private var cutsLeft: Int
    private var cutAt: [Int] = []

    init(target: Int, seed: UInt64, cuts: Int, maxBytes: UInt64) throws {
        self.target = target
        self.maxBytes = maxBytes
        random = SplitMix64(seed: seed)
        cutsLeft = cuts
        (listener, port) = try Self.makeListener()
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit { close(listener) }

    /// The bytes at which connections were cut, in order.
    var cuts: [Int] { lock.withLock { cutAt } }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 { return }
            let limit: UInt64? = lock.withLock {
                guard cutsLeft > 0 else { return nil }
                cutsLeft -= 1
                return 1 + random.next() % maxBytes
            }
            guard let server = Self.dial(target) else {
                close(client)
                continue
            }
            Thread.detachNewThread { [self] in forward(client, server, cuttingAt: limit) }
        }
    }

    /// Copies bytes both ways until either side closes, or `limit` bytes have gone through.
    private func forward(_ client: Int32, _ server: Int32, cuttingAt limit: UInt64?) {
        defer {
            close(client)
            close(server)
        }
        var passed: UInt64 = 0
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: server, events: Int16(POLLIN), revents: 0)]
        while true {
            guard poll(&fds, 2, 1_000) >= 0 else { return }
            for (index, entry) in fds.enumerated() where entry.revents != 0 {
                let from = entry.fd
                let to = index == 0 ? server : client
                var count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
                if count <= 0 { return }
                if let limit, passed + UInt64(count) >= limit { count = Int(limit - passed) }
                var offset = 0
                while offset < count {
                    let written = buffer[offset..<count].withUnsafeBytes { write(to, $0.baseAddress, $0.count) }
                    if written <= 0 { return }
                    offset += written
                }
                passed += UInt64(count)
                if let limit, passed >= limit {
                    lock.withLock { cutAt.append(Int(passed)) }
                    return
                }
            }
        }
    }

    private static func makeListener() throws -> (Int32, Int) {
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
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
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
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
}
