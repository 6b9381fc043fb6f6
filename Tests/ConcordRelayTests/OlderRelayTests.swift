import ConcordKeys
import ConcordRelayProtocol
import ConcordTestSupport
import Foundation
import Hummingbird
import NIOConcurrencyHelpers
import Testing
@testable import ConcordRelayClient

/// A device against a relay older than requests of deletions (SPEC.md §16.5, step 3): the relay
/// answers `POST …/deletions` 404, as a router that knows no such path does, and the device
/// deletes one file a request instead. Played by a server that knows only `DELETE` of one file.
@Suite struct OlderRelayTests {
    static let replica = "0123456789abcdef0123456789abcdef"
    static func name(_ serial: Int) -> String { replica + "-" + String(format: "%010d", serial) + ".cbundle" }

    @Test func deletionsFallBackToOneRequestAFile() throws {
        let held = NIOLockedValueBox<Set<String>>([Self.name(1), Self.name(2), Self.name(3)])
        let asked = NIOLockedValueBox<[String]>([])
        let deleted = try runOffThePool {
            let router = Router()
            router.delete("v1/spaces/:space/files/:name") { _, context -> Response in
                let name = context.parameters.get("name") ?? ""
                asked.withLockedValue { $0.append("DELETE " + name) }
                return Response(status: held.withLockedValue { $0.remove(name) } != nil ? .noContent : .notFound)
            }
            let port = AsyncStream<Int>.makeStream()
            let application = Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { channel in port.continuation.yield(channel.localAddress?.port ?? 0) })
            // The server in a child task, which runs where its parent does (`runOffThePool`):
            // never on the shared pool, which this test's wait blocks a thread of.
            return try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await application.runService() }
                defer { group.cancelAll() }
                var ports = port.stream.makeAsyncIterator()
                let listening = try #require(await ports.next())
                let client = try RelayClient(url: "http://127.0.0.1:\(listening)", key: SyncKey(bytes: Array(0..<32))!)
                return try await client.delete([Self.name(3), Self.name(1), Self.name(9), Self.name(1)])
            }
        }
        #expect(deleted == [Self.name(1), Self.name(3)], "those it held, in name order")
        #expect(held.withLockedValue { $0 } == [Self.name(2)])
        #expect(asked.withLockedValue { $0 } == [Self.name(1), Self.name(3), Self.name(9)].map { "DELETE " + $0 }, "each name once, in order")
    }
}
