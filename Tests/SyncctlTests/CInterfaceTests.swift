import Foundation
import Testing

/// The C interface (Sources/ConcordC/include/concord.h) as an app in another language uses it: a
/// C program (Tests/CInterface/interface_test.c) compiled against the built libConcordC, run as a
/// process of its own, and syncctl on the store it wrote.
@Suite(.waitsForProcesses) struct CInterfaceTests {
    @Test func aCProgramWritesReadsAndObservesAStoreThatSyncctlReadsAlike() throws {
        let sandbox = try Sandbox()
        let program = try CInterfaceProgram.build("interface_test", in: sandbox)
        let result = try runProcess(program, [sandbox.root.path], environment: sandbox.environment(), scratch: sandbox.scratch, timeout: 120)
        // The program checks every call's results and refusals, and prints the store's dump last.
        #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
        let store = Store(sandbox: sandbox, path: sandbox.path("store.db"))
        let dump = try store.run("dump")
        #expect(dump.succeeded, "\(dump)")
        #expect(dump.stdout == result.stdout, "syncctl dumps the C program's store otherwise:\n\(dump.stdout)\n\(result.stdout)")
        try store.expectSound("after the C program")
        // Two reminders, 25 from each of four threads writing at once, and two more.
        #expect(try store.reminders(all: true).count == 104)
    }

    /// The exchanges: a bundle syncctl exported, a peer that syncctl serves, a shared folder that
    /// another syncctl store syncs from. All three stores end with the C program's state.
    @Test func aCProgramMergesSyncsWithAPeerAndAFolderAndExports() throws {
        let sandbox = try Sandbox()
        let program = try CInterfaceProgram.build("exchange_test", in: sandbox)
        let served = try sandbox.makeStore("a.db")
        let key = String(try served.ok("key", "generate").split(separator: "\n")[0])
        _ = try served.addReminder("from a", "--tag", "served")
        _ = try served.addNote("note from a")
        let other = try sandbox.makeStore("d.db")
        _ = try other.addReminder("from d")
        try other.ok("export", sandbox.path("d.cbundle"))
        let folder = sandbox.path("shared")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        let (server, port) = try PeerCommandTests().serve(sandbox, served)

        let result = try runProcess(
            program, [sandbox.root.path, "127.0.0.1:\(port)", key, folder, sandbox.path("d.cbundle")],
            environment: sandbox.environment(), scratch: sandbox.scratch, timeout: 120)
        #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
        server.send(SIGTERM)
        #expect(server.wait(timeout: 20).succeeded)

        // The served store got everything over TCP, and a new store everything from the folder.
        #expect(try served.dump() + "\n" == result.stdout)
        let reader = try sandbox.makeStore("e.db")
        try reader.ok("key", "import", key)
        try reader.ok("sync", "--folder", folder)
        #expect(try reader.dump() + "\n" == result.stdout)
        // Its own bundle, encrypted with the key, merges into a store that holds the key.
        let merged = try sandbox.makeStore("f.db")
        try merged.ok("key", "import", key)
        try merged.ok("merge", sandbox.path("c.cbundle"))
        #expect(try merged.dump() + "\n" == result.stdout)
        try Store(sandbox: sandbox, path: sandbox.path("c.db")).expectSound("after the C program")
    }

    /// Live syncs: a live session with `syncctl serve` whose writes the C program sees reach the
    /// served store (which it reads beside serve), then a relay once and live; a new store that
    /// syncs through the relay ends with the C program's state.
    @Test func aCProgramSyncsLiveWithAPeerAndThroughARelay() throws {
        let sandbox = try Sandbox()
        let program = try CInterfaceProgram.build("live_test", in: sandbox)
        let served = try sandbox.makeStore("a.db")
        let key = String(try served.ok("key", "generate").split(separator: "\n")[0])
        _ = try served.addReminder("from a")
        let (server, port) = try PeerCommandTests().serve(sandbox, served)
        let relay = try RelayProcess(sandbox, data: sandbox.path("relay"))

        let result = try runProcess(
            program, [sandbox.root.path, "127.0.0.1:\(port)", key, served.path, relay.url],
            environment: sandbox.environment(), scratch: sandbox.scratch, timeout: 120)
        #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
        server.send(SIGTERM)
        #expect(server.wait(timeout: 20).succeeded)

        let titles = try served.reminders().compactMap { $0["title"] as? String }
        #expect(titles.contains("live from l"), "\(titles)")
        let reader = try sandbox.makeStore("g.db")
        try reader.ok("key", "import", key)
        try reader.ok("sync", "--relay", relay.url)
        #expect(try reader.dump() + "\n" == result.stdout)
        try Store(sandbox: sandbox, path: sandbox.path("l.db")).expectSound("after the C program")
    }
}

/// A C test program, compiled with the toolchain's clang against the libConcordC built beside
/// syncctl.
enum CInterfaceProgram {
    /// Compiles Tests/CInterface/NAME.c into the sandbox.
    static func build(_ name: String, in sandbox: Sandbox, sourceLocation: SourceLocation = #_sourceLocation) throws -> URL {
        let products = try SyncctlBinary.require(sourceLocation: sourceLocation).deletingLastPathComponent()
        #if canImport(Darwin)
        let library = "libConcordC.dylib"
        #else
        let library = "libConcordC.so"
        #endif
        try #require(
            FileManager.default.fileExists(atPath: products.appendingPathComponent(library).path),
            "\(library) is not beside syncctl in \(products.path); swift build builds it", sourceLocation: sourceLocation)
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let output = sandbox.path(name)
        let compile = try runProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "clang", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", root.appendingPathComponent("Sources/ConcordC/include").path,
                root.appendingPathComponent("Tests/CInterface/\(name).c").path,
                "-L", products.path, "-lConcordC", "-Wl,-rpath,\(products.path)", "-lpthread", "-o", output,
            ],
            environment: sandbox.environment(), scratch: sandbox.scratch, timeout: 120)
        try #require(compile.succeeded, "\(compile)", sourceLocation: sourceLocation)
        return URL(fileURLWithPath: output)
    }
}
