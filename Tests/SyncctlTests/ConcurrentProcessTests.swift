import ConcordStore
import Foundation
import Testing

/// Several `syncctl` processes on one store at once (issue 6, "Concurrent processes"): each
/// succeeds, none fails with "database is locked", and no change is lost.
@Suite(.waitsForProcesses) struct ConcurrentProcessTests {
    /// Runs `body(index)` on `count` threads at once and returns what each returned, in order.
    func concurrently<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) throws -> T) throws -> [T] {
        let results = ResultBox<T>(count)
        DispatchQueue.concurrentPerform(iterations: count) { index in
            results.set(index, Result { try body(index) })
        }
        return try results.values.map { try #require($0).get() }
    }

    /// A result that must succeed with nothing on stderr; `locked` failures are named as such.
    func expectClean(_ result: RunResult, _ context: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let text = result.stderr.lowercased()
        #expect(!text.contains("locked") && !text.contains("busy"), "\(context): the store was locked: \(result)", sourceLocation: sourceLocation)
        #expect(result.succeeded && result.stderr.isEmpty, "\(context): \(result)", sourceLocation: sourceLocation)
    }

    @Test func addsFromFourProcessesAtOnce() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let perProcess = 25
        let run = try sandbox.runner()
        let path = store.path
        let results = try concurrently(4) { writer in
            try (0..<perProcess).map { index in
                try run(["reminder", "add", "writer \(writer) #\(index)", "--notes", "from process \(writer)", "--tag", "w\(writer)", "--store", path])
            }
        }
        for (writer, runs) in results.enumerated() {
            for (index, result) in runs.enumerated() { expectClean(result, "writer \(writer), add \(index)") }
        }
        let reminders = try store.reminders()
        #expect(reminders.count == 4 * perProcess, "no add is lost")
        let titles = Set(reminders.compactMap { $0.string("title") })
        for writer in 0..<4 {
            for index in 0..<perProcess { #expect(titles.contains("writer \(writer) #\(index)")) }
        }
        #expect(try store.operationCount() == 4 * perProcess * 6)
        try store.expectSound("after the concurrent adds")
    }

    /// A watcher syncs the store through a folder (importing what another replica publishes
    /// there meanwhile) while another process adds reminders in a loop.
    @Test func addsInALoopWhileAWatcherSyncs() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let watcher = try sandbox.start(["sync", "--folder", folder, "--watch", "--interval", "0.1", "--store", a.path])
        var added: [String] = []
        var fromB: [String] = []
        for index in 0..<40 {
            let result = try a.run("reminder", "add", "added while watching #\(index)", "--tag", "loop")
            expectClean(result, "add \(index)")
            added.append(result.out)
            if index % 8 == 0 {
                // B publishes now and then, so the watcher imports while the adds go on.
                fromB.append(try b.addNote("from b #\(index)"))
                expectClean(try b.run("sync", "--folder", folder), "b's sync")
            }
        }
        // The watcher publishes every add; B takes them all.
        let operations = 40 * 6 + fromB.count * 3
        let caughtUp = eventually(timeout: 30) {
            _ = try? b.run("sync", "--folder", folder)
            return (try? b.operationCount()) == operations && (try? a.operationCount()) == operations
        }
        #expect(caughtUp, "the watcher imported b's notes and published every add")
        watcher.send(SIGTERM)
        let result = watcher.wait(timeout: 30)
        #expect(result.succeeded, "\(result)")
        #expect(!result.stderr.lowercased().contains("locked"), "\(result)")
        #expect(result.stderr.isEmpty, "the watcher never failed a sync: \(result)")
        let reminders = try a.reminders()
        #expect(Set(reminders.compactMap { $0.string("id") }) == Set(added), "no add is lost")
        #expect(try Set(a.notes().compactMap { $0.string("id") }) == Set(fromB))
        #expect(try a.dump() == b.dump())
        try a.expectSound("after the watch")
    }

    /// Two merges of large bundles into one store at once, and a third of the same bundle as the
    /// first: all succeed, and the store ends as if they had run one after another.
    @Test func mergesOfLargeBundlesAtOnce() throws {
        let sandbox = try Sandbox()
        try LargeStores.makeB(at: sandbox.path("x.db"), records: 1500, seed: 21)
        try LargeStores.makeB(at: sandbox.path("y.db"), records: 1500, seed: 22)
        let x = Store(sandbox: sandbox, path: sandbox.path("x.db"))
        let y = Store(sandbox: sandbox, path: sandbox.path("y.db"))
        try x.ok("export", sandbox.path("x.cbundle"))
        try y.ok("export", sandbox.path("y.cbundle"))
        let target = try sandbox.makeStore("target.db")
        _ = try target.addReminder("the target's own")
        let bundles = [sandbox.path("x.cbundle"), sandbox.path("y.cbundle"), sandbox.path("x.cbundle")]
        let run = try sandbox.runner()
        let path = target.path
        let results = try concurrently(3) { index in
            try run(["merge", bundles[index], "--store", path])
        }
        for (index, result) in results.enumerated() { expectClean(result, "merge \(index)") }
        let merged = try results.map { result in
            try #require(Int(result.out.split(separator: " ").dropFirst().first ?? ""), "\(result)")
        }
        let (xOperations, yOperations) = (try x.operationCount(), try y.operationCount())
        #expect(merged.reduce(0, +) == xOperations + yOperations, "every operation merged once: \(merged)")
        #expect(try target.operationCount() == 5 + xOperations + yOperations)

        try x.ok("merge", y.path, target.path)
        #expect(try x.dump() == target.dump(), "the same state as merges one after another")
        try target.expectSound("after the concurrent merges")
    }

    /// A local write issued while a long merge runs waits at most for the batch under way, not
    /// for the whole merge: it finishes before the merge does. (Loose on purpose: no timing.)
    @Test func aLocalWriteIsNotBlockedByALongFolderImport() throws {
        let sandbox = try Sandbox()
        sandbox.variables["SYNCCTL_MERGE_BATCH"] = "\(Self.mergeBatch),\(Self.recordBatch)"
        let (big, bigOperations) = try Self.makeBig(sandbox)
        let folder = try sandbox.makeDirectory("Shared")
        try big.ok("sync", "--folder", folder)
        try expectWriteNotBlocked(sandbox, by: ["sync", "--folder", folder], operations: bigOperations)
    }

    /// The same for `syncctl merge` of a bundle, which applies it in batches too (it used to
    /// hold the store for the whole merge, and the add waited until the merge was over).
    @Test func aLocalWriteIsNotBlockedByALongMergeOfABundle() throws {
        let sandbox = try Sandbox()
        sandbox.variables["SYNCCTL_MERGE_BATCH"] = "\(Self.mergeBatch),\(Self.recordBatch)"
        let (big, bigOperations) = try Self.makeBig(sandbox)
        let bundle = sandbox.path("big.cbundle")
        try big.ok("export", bundle)
        try expectWriteNotBlocked(sandbox, by: ["merge", bundle], operations: bigOperations)
    }

    /// Merges run in batches of this many operations here, and apply them to this many records at
    /// a time, so that one of these takes several batches of each kind (with the default record
    /// bound, all 10,000 records are one batch, and a write that comes then waits for the end).
    static let mergeBatch = 20_000
    static let recordBatch = 1_000

    /// About 80,000 operations: several batches of a merge.
    static func makeBig(_ sandbox: Sandbox) throws -> (Store, Int) {
        try LargeStores.makeB(at: sandbox.path("big.db"), records: 10_000, seed: 31)
        let big = Store(sandbox: sandbox, path: sandbox.path("big.db"))
        let operations = try big.operationCount()
        #expect(operations > 2 * Self.mergeBatch)
        return (big, operations)
    }

    /// Starts `arguments` (a merge of `operations` new operations) on a new store, adds a
    /// reminder once the merge writes, and checks the add ended first.
    func expectWriteNotBlocked(_ sandbox: Sandbox, by arguments: [String], operations: Int, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let target = try sandbox.makeStore("target-\(arguments[0]).db")
        let start = Date()
        let merge = try sandbox.start(arguments + ["--store", target.path])
        // Wait until the merge writes its first batch to the store's write-ahead log.
        let writing = eventually(timeout: 60) { sizeOfFile(target.path + "-wal") > 0 || !merge.isRunning }
        #expect(writing && merge.isRunning, "the \(arguments[0]) is under way", sourceLocation: sourceLocation)
        let added = try target.run("reminder", "add", "written during the merge")
        let addedAt = Date().timeIntervalSince(start)
        let mergeStillRunning = merge.isRunning
        let result = merge.wait(timeout: 120)
        let mergedAt = Date().timeIntervalSince(start)
        expectClean(added, "the add during the \(arguments[0])", sourceLocation: sourceLocation)
        expectClean(result, arguments[0], sourceLocation: sourceLocation)
        #expect(
            mergeStillRunning,
            "the add (done at \(String(format: "%.2f", addedAt)) s) finished before the \(arguments[0]) (done at \(String(format: "%.2f", mergedAt)) s)",
            sourceLocation: sourceLocation)
        #expect(try target.operationCount() == operations + 5, sourceLocation: sourceLocation)
        #expect(try target.reminders().contains { $0.string("id") == added.out }, sourceLocation: sourceLocation)
        try target.expectSound("after the \(arguments[0])", sourceLocation: sourceLocation)
    }
}

extension Sandbox {
    /// A function that runs syncctl in this sandbox, to call from other threads.
    func runner() throws -> @Sendable ([String]) throws -> RunResult {
        let binary = try SyncctlBinary.require()
        let environment = environment()
        let directory = root
        return { arguments in try runProcess(binary, arguments, environment: environment, scratch: directory, timeout: 120) }
    }
}

/// One result per index, filled from several threads.
final class ResultBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [Result<T, any Error>?]

    init(_ count: Int) {
        storage = Array(repeating: nil, count: count)
    }

    func set(_ index: Int, _ result: Result<T, any Error>) {
        lock.withLock { storage[index] = result }
    }

    var values: [Result<T, any Error>?] { lock.withLock { storage } }
}
