import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordPeer
import ConcordStore
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

/// Short timeouts, so that tests of them are quick.
func quickConfiguration(handshake: Duration = .milliseconds(300), idle: Duration = .seconds(1)) -> PeerTransportConfiguration {
    var configuration = PeerTransportConfiguration(handshakeTimeout: handshake, idleTimeout: idle)
    configuration.lingerTimeout = .milliseconds(300)
    return configuration
}

/// A file-backed store with a hand-set clock.
final class Node: @unchecked Sendable {
    let store: ConcordStore
    let clock: ManualClock
    let name: String

    init(in directory: TemporaryDirectory, _ name: String, seed: UInt64, key: SyncKey?) throws {
        self.name = name
        clock = ManualClock(baseMillis + seed * 13)
        store = try ConcordStore.create(at: directory.file("\(name).db"), name: name, environment: environment(clock: clock, seed: seed))
        if let key { try store.setSyncKey(key) }
    }

    /// Adds `count` reminders in transactions of 1000, each with notes of about `textLength`
    /// characters (random hex digits, which compress little, when `random`).
    func addReminders(_ count: Int, label: String, textLength: Int = 20, random: Bool = false) throws {
        var changes: [(RecordRef, Change)] = []
        var generator = SplitMix64(seed: UInt64(count))
        for index in 0..<count {
            clock.advance(1)
            let notes = random
                ? (0..<max(1, textLength / 16)).map { _ in String(generator.next(), radix: 16) }.joined()
                : String(repeating: "\(label)\(index) ", count: max(1, textLength / 8))
            changes.append((.reminder(RecordID(high: UInt64(label.hashValue & 0xFFFF), low: UInt64(index))),
                            .createReminder(ReminderDraft(title: "\(label) \(index)", notes: notes, tags: ["t\(index % 5)"]))))
            if changes.count == 1000 {
                try store.perform(changes)
                changes.removeAll()
            }
        }
        if !changes.isEmpty { try store.perform(changes) }
    }

    func dump() throws -> String { try store.dump() }
    var operationCount: Int { (try? store.status().operations) ?? -1 }
}

/// A server on a free loopback port, and the sessions it has logged.
final class TestServer: @unchecked Sendable {
    let server: PeerServer
    let address: PeerAddress

    init(_ node: Node, key: SyncKey, configuration: PeerTransportConfiguration = quickConfiguration(idle: .seconds(10))) throws {
        let box = RecordBox()
        server = PeerServer(store: node.store, key: key, configuration: configuration, onSession: { record in box.append(record) })
        let bound = try server.start(host: "127.0.0.1", port: 0)
        address = PeerAddress(host: "127.0.0.1", port: bound.port!)
        recordsBox = box
    }

    private let recordsBox: RecordBox

    var records: [PeerSessionRecord] { recordsBox.all }

    /// Waits until the server has logged `count` sessions.
    func waitForRecords(_ count: Int, timeout: TimeInterval = 10) -> [PeerSessionRecord] {
        let deadline = Date().addingTimeInterval(timeout)
        while recordsBox.all.count < count, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        return recordsBox.all
    }

    func stop() { server.stop() }
}

final class RecordBox: @unchecked Sendable {
    private let lock = NSLock()
    private var records: [PeerSessionRecord] = []
    func append(_ record: PeerSessionRecord) { lock.withLock { records.append(record) } }
    var all: [PeerSessionRecord] { lock.withLock { records } }
}

/// One `sync --peer` session of `node` with `address`.
func sync(_ node: Node, key: SyncKey, with address: PeerAddress, configuration: PeerTransportConfiguration = quickConfiguration(idle: .seconds(10))) throws -> PeerSessionRecord {
    try PeerClient.sync(store: node.store, key: key, address: address, configuration: configuration)
}

extension PeerSession {
    /// Takes bytes as `receive` does, and confirms each batch at once, as a store that applies it
    /// would: every action, up to the session's end or what the bytes hold.
    mutating func receiveApplying(_ bytes: [UInt8]) -> [PeerAction] {
        var actions = receive(bytes)
        var index = 0
        while index < actions.count {
            if case .apply = actions[index] { actions += batchApplied() }
            index += 1
        }
        return actions
    }
}

/// A plain TCP client on POSIX sockets, for peers that do not follow the protocol.
final class RawClient {
    let descriptor: Int32

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
