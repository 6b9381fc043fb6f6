import ConcordCore
import ConcordTestSupport
import Foundation
import Testing

extension LiveSyncTests {
    /// Three stores that hold one sync key, kept in step by long-lived processes: `serve` on a and
    /// a `--live` client on b (a → b live), and `sync --folder --watch` on b and c (b ↔ c through
    /// a folder); each process can be SIGKILLed and started again. The kill tests of purges and of
    /// compaction run their writers beside it.
    struct Topology {
        let sandbox: Sandbox
        let a: Store
        let b: Store
        let c: Store
        let folder: String
        let keyText: String
        /// Given to every process it starts (compaction's options, say).
        let options: [String]
        let port: Int
        private(set) var server: BackgroundRun
        private(set) var client: BackgroundRun
        private(set) var watchers: [BackgroundRun]
        /// Which process each kill stopped, in order.
        private(set) var kills: [String] = []

        var stores: [(name: String, store: Store)] { [("a", a), ("b", b), ("c", c)] }

        init(_ tests: LiveSyncTests, options: [String] = []) throws {
            sandbox = try Sandbox()
            (a, b) = try sandbox.makePairedStores()
            keyText = String(try a.ok("key", "show").split(separator: "\n")[0])
            c = try sandbox.makeStore("c.db")
            try c.ok("key", "import", keyText)
            folder = try sandbox.makeDirectory("Shared")
            self.options = options
            (server, port) = try tests.serve(sandbox, a, options: options)
            client = try tests.live(sandbox, b, port: port, options: options)
            watchers = []
            watchers = [try watch(b), try watch(c)]
        }

        private func watch(_ store: Store) throws -> BackgroundRun {
            try sandbox.start(["sync", "--folder", folder, "--watch", "--interval", "0.2", "--store", store.path] + options)
        }

        /// SIGKILLs one of the processes, drawn from `random` (the server a quarter of the
        /// time, the client a quarter, a watcher half), and starts it again.
        mutating func killOne(_ tests: LiveSyncTests, _ random: inout SplitMix64) throws {
            switch random.next() % 4 {
            case 0:
                server.send(SIGKILL)
                _ = server.wait(timeout: 20)
                (server, _) = try tests.serve(sandbox, a, port: port, options: options)
                kills.append("server")
            case 1:
                client.send(SIGKILL)
                _ = client.wait(timeout: 20)
                client = try tests.live(sandbox, b, port: port, waiting: false, options: options)
                kills.append("live client")
            default:
                let index = Int(random.next() % 2)
                watchers[index].send(SIGKILL)
                _ = watchers[index].wait(timeout: 20)
                watchers[index] = try watch(index == 0 ? b : c)
                kills.append("watcher of \(index == 0 ? "b" : "c")")
            }
        }

        /// Stops every process with SIGTERM; each must exit 0.
        func stop(_ context: String) {
            for process in [server, client] + watchers {
                process.send(SIGTERM)
                #expect(process.wait(timeout: 20).succeeded, "\(context)")
            }
        }
    }
}
