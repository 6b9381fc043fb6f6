import ConcordCore
import Foundation
import Testing

/// The JVM binding (bindings/jvm) over the C interface, built with the JDK that CI installs and
/// run as JVM processes beside syncctl: the binding's own test, README's example, a Java "widget"
/// that follows a store syncctl writes, a Java writer killed mid-write, and JVM replicas syncing
/// with syncctl's through a folder and over TCP.
@Suite(.waitsForProcesses) struct JVMBindingTests {
    @Test func theBindingsOwnTestPassesAndItsStoreDumpsAsSyncctlDumpsIt() throws {
        let sandbox = try Sandbox()
        let jvm = try JVMPrograms(in: sandbox)
        let directory = try sandbox.makeDirectory("binding-test")
        let result = try jvm.run("BindingTest", [directory], timeout: 300)
        #expect(result.succeeded, "\(result)")
        let store = Store(sandbox: sandbox, path: directory + "/store.db")
        #expect(try store.dump() == result.stdoutLines.last, "\(result)")
        try store.expectSound("after the binding's test")
    }

    /// README's example, as it is.
    @Test func readmesExampleRuns() throws {
        let sandbox = try Sandbox()
        let jvm = try JVMPrograms(in: sandbox)
        let result = try jvm.run("Hello", [sandbox.path("phone.db")])
        #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
        #expect(result.stdoutLines.contains("Call the dentist (done)"), "\(result)")
        #expect(result.stdoutLines.contains { $0.hasPrefix("changed: [reminder:") }, "\(result)")
        try Store(sandbox: sandbox, path: sandbox.path("phone.db")).expectSound("after README's example")
    }

    /// A widget reads what another process writes: a JVM follows the store's changes while syncctl
    /// processes add reminders one by one, and ends with syncctl's dump.
    @Test func aJavaWidgetFollowsAStoreThatSyncctlWrites() throws {
        let sandbox = try Sandbox()
        let jvm = try JVMPrograms(in: sandbox)
        let store = try sandbox.makeStore()
        let count = 30
        let widget = try jvm.start("Widget", [store.path, "\(count)", "120"])
        // Writes begin once the widget shows the empty store, so that it sees them come.
        #expect(eventually(timeout: 60) { widget.stdout.contains("open 0") || !widget.isRunning }, "\(widget.stderr)")
        for index in 1...count { _ = try store.addReminder("written by syncctl \(index)") }
        let result = widget.wait(timeout: 120)
        #expect(result.succeeded, "\(result)")
        let shown = result.stdoutLines.compactMap { line in line.hasPrefix("open ") ? Int(line.dropFirst(5)) : nil }
        #expect(shown.last == count && shown == shown.sorted(), "the widget showed \(shown)")
        #expect(try store.dump() == result.stdoutLines.last)
    }

    /// A JVM killed with SIGKILL while it writes leaves a sound store holding every reminder whose
    /// add returned (the writer prints each id once its add returned).
    @Test func aJavaWriterKilledMidWriteLeavesASoundStoreWithEveryWriteThatReturned() throws {
        let sandbox = try Sandbox()
        let jvm = try JVMPrograms(in: sandbox)
        // The kill tests' seed, printed, so that a failure can be replayed (CONCORD_KILL_SEED).
        var random = SplitMix64(seed: KillTests.seed &+ 5)
        print("JVMBindingTests: the writer's kills (seed \(KillTests.seed))")
        let store = try sandbox.makeStore()
        var written: [String] = []
        for round in 1...3 {
            let writer = try jvm.start("Writer", [store.path, "100000"])
            let wanted = written.count + Int.random(in: 5...60, using: &random)
            #expect(eventually(timeout: 60) { idLines(writer.stdout).count + written.count >= wanted || !writer.isRunning }, "round \(round): \(writer.stderr)")
            writer.send(SIGKILL)
            let result = writer.wait(timeout: 20)
            #expect(result.crashed, "round \(round): the writer was to be killed: \(result)")
            // Only whole lines: the last may have been cut by the kill.
            written += idLines(result.stdout)
            try store.expectSound("after the JVM was killed in round \(round)")
            let held = Set(try store.reminders(all: true).compactMap { $0["id"] as? String })
            let lost = written.filter { !held.contains($0) }
            #expect(lost.isEmpty, "round \(round): \(lost.count) reminders whose add returned are missing")
        }
    }

    /// A JVM replica and syncctl's converge through a shared folder and over TCP (the Java
    /// program `Sync` adds a reminder, syncs once, and prints its dump last).
    @Test func javaAndSwiftReplicasConvergeThroughAFolderAndOverTCP() throws {
        let sandbox = try Sandbox()
        let jvm = try JVMPrograms(in: sandbox)
        let swift = try sandbox.makeStore("swift.db")
        let key = String(try swift.ok("key", "generate").split(separator: "\n")[0])
        _ = try swift.addReminder("from syncctl", "--tag", "swift")
        _ = try swift.addNote("a note from syncctl")
        let folder = try sandbox.makeDirectory("shared")
        try swift.ok("sync", "--folder", folder)

        let throughFolder = try jvm.run("Sync", [sandbox.path("jvm-folder.db"), key, "folder", folder])
        #expect(throughFolder.succeeded, "\(throughFolder)")
        try swift.ok("sync", "--folder", folder)
        #expect(try swift.dump() == throughFolder.stdoutLines.last, "through the folder")

        let (server, port) = try PeerCommandTests().serve(sandbox, swift)
        let overTCP = try jvm.run("Sync", [sandbox.path("jvm-peer.db"), key, "peer", "127.0.0.1:\(port)"])
        #expect(overTCP.succeeded, "\(overTCP)")
        server.send(SIGTERM)
        #expect(server.wait(timeout: 20).succeeded)
        #expect(try swift.dump() == overTCP.stdoutLines.last, "over TCP")
        let titles = try swift.reminders().compactMap { $0["title"] as? String }
        #expect(titles.filter { $0 == "from the JVM" }.count == 2, "\(titles)")
        try swift.expectSound("after syncing with the JVM replicas")
    }

    /// The complete lines of `output` that are ids.
    private func idLines(_ output: String) -> [String] {
        output.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init).filter { $0.count == 32 }
    }
}

/// The JVM binding's programs, built into a sandbox by bindings/jvm/build.sh against the
/// libConcordC beside syncctl, and run with `java`.
struct JVMPrograms {
    let sandbox: Sandbox
    let output: String

    init(in sandbox: Sandbox, sourceLocation: SourceLocation = #_sourceLocation) throws {
        self.sandbox = sandbox
        output = sandbox.path("jvm")
        let products = try SyncctlBinary.require(sourceLocation: sourceLocation).deletingLastPathComponent()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let build = try runProcess(
            URL(fileURLWithPath: "/bin/sh"), [root.appendingPathComponent("bindings/jvm/build.sh").path, output, products.path],
            environment: sandbox.environment(), scratch: sandbox.scratch, timeout: 300)
        try #require(build.succeeded, "bindings/jvm/build.sh: \(build)", sourceLocation: sourceLocation)
    }

    /// `java`'s arguments to run `program` with `arguments`.
    private func javaArguments(_ program: String, _ arguments: [String]) -> [String] {
        ["java", "-Djava.library.path=\(output)", "-cp", "\(output)/classes:\(output)/test-classes", "dev.concord.\(program)"] + arguments
    }

    func run(_ program: String, _ arguments: [String], timeout: TimeInterval = 120) throws -> RunResult {
        try runProcess(
            URL(fileURLWithPath: "/usr/bin/env"), javaArguments(program, arguments), environment: sandbox.environment(),
            scratch: sandbox.scratch, timeout: timeout)
    }

    func start(_ program: String, _ arguments: [String]) throws -> BackgroundRun {
        try BackgroundRun(
            executable: URL(fileURLWithPath: "/usr/bin/env"), arguments: javaArguments(program, arguments),
            environment: sandbox.environment(), directory: sandbox.root)
    }
}
