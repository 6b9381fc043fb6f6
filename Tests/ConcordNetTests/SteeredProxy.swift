import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP proxy on 127.0.0.1 in front of a server at `target`, which a test steers: while
/// `dropping`, it closes each connection as soon as it has accepted it, as a server that accepts
/// and drops does; otherwise it forwards each one as it is, until `cutAll()` cuts every connection
/// it forwards, as a dropped network does. So a test chooses how far each attempt of a client gets.
final class SteeredProxy: @unchecked Sendable {
    // @unchecked Sendable: `isDropping`, `forwarded` and `nextID` are read and written only with
    // `lock` held; the rest is immutable.
    let port: Int
    private let listener: RawServer
    private let target: Int
    private let lock = NSLock()
    private var isDropping = false
    /// The connections being forwarded, each as its two sides: a side is closed only once it has
    /// been taken out of here, so that `cutAll()` never touches a descriptor reused meanwhile.
    private var forwarded: [Int: (client: RawClient, server: RawClient)] = [:]
    private var nextID = 0

    init(target: Int) throws {
        self.target = target
        listener = try RawServer()
        port = listener.port
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Whether each new connection is closed at once, rather than forwarded.
    var dropping: Bool {
        get { lock.withLock { isDropping } }
        set { lock.withLock { isDropping = newValue } }
    }

    /// Cuts every connection being forwarded (both sides, as a dropped network would leave them);
    /// returns how many there were.
    @discardableResult
    func cutAll() -> Int {
        lock.withLock {
            for (client, server) in forwarded.values {
                shutdown(client.descriptor, Int32(SHUT_RDWR))
                shutdown(server.descriptor, Int32(SHUT_RDWR))
            }
            return forwarded.count
        }
    }

    /// Stops accepting and cuts what is forwarded.
    func stop() {
        shutdown(listener.descriptor, Int32(SHUT_RDWR))
        cutAll()
    }

    private func acceptLoop() {
        while let client = try? listener.acceptConnection() {
            guard !dropping, let server = try? RawClient(port: target) else { continue }
            let id = lock.withLock {
                nextID += 1
                forwarded[nextID] = (client, server)
                return nextID
            }
            // The thread finds its connection by its id: the sides stay in `forwarded` until
            // it has done with them.
            Thread.detachNewThread { [self] in
                if let (client, server) = lock.withLock({ forwarded[id] }) { forward(client, server) }
                lock.withLock { _ = forwarded.removeValue(forKey: id) }
            }
        }
    }

    /// Copies bytes both ways until either side closes.
    private func forward(_ client: RawClient, _ server: RawClient) {
        var fds = [pollfd(fd: client.descriptor, events: Int16(POLLIN), revents: 0), pollfd(fd: server.descriptor, events: Int16(POLLIN), revents: 0)]
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while poll(&fds, 2, 1_000) >= 0 {
            for (index, entry) in fds.enumerated() where entry.revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                if count <= 0 { return }
                (index == 0 ? server : client).send(Array(buffer[..<count]))
            }
        }
    }
}
