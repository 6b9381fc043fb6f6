import Foundation
import Testing

/// The C interface (Sources/ConcordC/include/concord.h) as an app in another language uses it: a
/// C program (Tests/CInterface/interface_test.c) compiled against the built libConcordC, run as a
/// process of its own, and syncctl on the store it wrote.
@Suite(.waitsForProcesses) struct CInterfaceTests {
    @Test func aCProgramWritesReadsAndObservesAStoreThatSyncctlReadsAlike() throws {
        let sandbox = try Sandbox()
        let program = try CInterfaceProgram.build(in: sandbox)
        let result = try runProcess(program, [sandbox.root.path], environment: sandbox.environment(), scratch: sandbox.scratch, timeout: 120)
        // The program checks every call's results and refusals, and prints the store's dump last.
        #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
        let store = Store(sandbox: sandbox, path: sandbox.path("store.db"))
        let dump = try store.run("dump")
        #expect(dump.succeeded, "\(dump)")
        #expect(dump.stdout == result.stdout, "syncctl dumps the C program's store otherwise:\n\(dump.stdout)\n\(result.stdout)")
        try store.expectSound("after the C program")
        // Two reminders, 25 from each of four threads writing at once, and one more.
        #expect(try store.reminders(all: true).count == 103)
    }
}

/// The C test program, compiled with the toolchain's clang against the libConcordC built beside
/// syncctl.
enum CInterfaceProgram {
    static func build(in sandbox: Sandbox, sourceLocation: SourceLocation = #_sourceLocation) throws -> URL {
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
        let output = sandbox.path("interface_test")
        let compile = try runProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "clang", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", root.appendingPathComponent("Sources/ConcordC/include").path,
                root.appendingPathComponent("Tests/CInterface/interface_test.c").path,
                "-L", products.path, "-lConcordC", "-Wl,-rpath,\(products.path)", "-lpthread", "-o", output,
            ],
            environment: sandbox.environment(), scratch: sandbox.scratch, timeout: 120)
        try #require(compile.succeeded, "\(compile)", sourceLocation: sourceLocation)
        return URL(fileURLWithPath: output)
    }
}
