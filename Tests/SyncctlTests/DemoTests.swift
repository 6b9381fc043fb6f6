import Foundation
import Testing

/// `syncctl demo [--dir DIR]` (SPEC.md §11).
@Suite(.waitsForProcesses) struct DemoTests {
    /// Checks what a demo run printed: both laptops, the conflicts, and that they converged.
    func expectConverged(_ result: RunResult, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.succeeded, "\(result)", sourceLocation: sourceLocation)
        #expect(result.stderr.isEmpty, "\(result)", sourceLocation: sourceLocation)
        #expect(result.stdoutLines.contains { $0.hasPrefix("Converged: both laptops hold byte-identical state (") }, "\(result)", sourceLocation: sourceLocation)
        // Both sides show the same outcome of each conflict.
        let completed = result.stdoutLines.filter { $0 == "  [x] Renew passport (bring photos) #errands" }
        #expect(completed.count == 2, "completed, with laptop-b's title, on both: \(result)", sourceLocation: sourceLocation)
        #expect(result.stdoutLines.filter { $0.hasPrefix("  [ ] Water the plants #home") }.count == 2, "\(result)", sourceLocation: sourceLocation)
        #expect(result.stdoutLines.filter { $0 == "  note \"Trip ideas\" (deleted)" }.count == 2, "\(result)", sourceLocation: sourceLocation)
    }

    @Test func demoConvergesInATemporaryDirectory() throws {
        let sandbox = try Sandbox()
        let temporary = try sandbox.makeDirectory("tmp")
        let result = try sandbox.run(["demo"], environment: ["TMPDIR": temporary])
        expectConverged(result)
        // It made its own directory (here, under TMPDIR) and says where.
        let first = try #require(result.stdoutLines.first)
        #expect(first.hasPrefix("Two laptops sharing the folder "), "\(result)")
        let made = try FileManager.default.contentsOfDirectory(atPath: temporary)
        #expect(made.count == 1, "\(made)")
        let directory = temporary + "/" + (made.first ?? "")
        #expect(first == "Two laptops sharing the folder \(directory)/shared", "\(result)")
        for name in ["laptop-a.db", "laptop-b.db", "shared/concord-v1"] {
            #expect(FileManager.default.fileExists(atPath: directory + "/" + name), "\(name)")
        }
    }

    @Test func demoInADirectoryLeavesBothStoresAndTheFolder() throws {
        let sandbox = try Sandbox()
        let directory = sandbox.path("demo")
        let result = try sandbox.run(["demo", "--dir", directory])
        expectConverged(result)
        #expect(result.stdoutLines.first == "Two laptops sharing the folder \(directory)/shared")

        let a = Store(sandbox: sandbox, path: directory + "/laptop-a.db")
        let b = Store(sandbox: sandbox, path: directory + "/laptop-b.db")
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: directory + "/shared/concord-v1", isDirectory: &isDirectory) && isDirectory.boolValue)
        let files = try bundleNames(in: directory + "/shared")
        #expect(files.count == 3, "a's two files and b's one: \(files)")
        #expect(files.allSatisfy { $0.hasSuffix(".cbundle") })

        // The stores are real stores, in step, named, and the folder needs nothing more.
        let dump = try a.dump()
        #expect(try b.dump() == dump)
        #expect(try a.status().string("name") == "laptop-a")
        #expect(try b.status().string("name") == "laptop-b")
        #expect(result.out.contains("(\(try a.operationCount()) operations)."))
        #expect(try a.ok("sync", "--folder", directory + "/shared") == "up to date")
        #expect(try b.ok("sync", "--folder", directory + "/shared") == "up to date")
        let passport = try #require(try a.reminders(all: true).first { $0.string("title") == "Renew passport (bring photos)" })
        #expect(passport.bool("completed") == true)

        // Again in the same directory: refused, and nothing there changes.
        let before = try listing(of: directory)
        let sharedBefore = try listing(of: directory + "/shared/concord-v1")
        let again = try sandbox.run(["demo", "--dir", directory])
        expectOneLineFailure(again, mentions: ["already exists"], code: 1)
        #expect(again.stderr == "syncctl: a store already exists at \(directory)/laptop-a.db\n", "\(again)")
        #expect(try listing(of: directory) == before)
        #expect(try listing(of: directory + "/shared/concord-v1") == sharedBefore)
        #expect(try a.dump() == dump)
    }

    /// SPEC.md §12: a failure changes no store and no file. When only laptop-b.db is there, the
    /// demo must not leave a new laptop-a.db behind.
    @Test func demoRefusedByAnExistingSecondStoreCreatesNothing() throws {
        let sandbox = try Sandbox()
        let directory = try sandbox.makeDirectory("demo")
        let b = try sandbox.makeStore("demo/laptop-b.db")
        let before = try listing(of: directory)

        let result = try sandbox.run(["demo", "--dir", directory])
        expectOneLineFailure(result, mentions: ["already exists", "laptop-b.db"], code: 1)
        #expect(!FileManager.default.fileExists(atPath: directory + "/laptop-a.db"), "a refused demo leaves no laptop-a.db behind")
        #expect(try listing(of: directory).keys.sorted() == before.keys.sorted())
        #expect(try b.operationCount() == 0)
    }
}
