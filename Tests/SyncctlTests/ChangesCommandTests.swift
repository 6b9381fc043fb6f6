import Foundation
import Testing

/// `syncctl changes` (SPEC.md §7.1, §11): the changes since a version vector, and `--follow` while
/// other processes write, until SIGTERM.
@Suite(.waitsForProcesses) struct ChangesCommandTests {
    /// The JSON objects of `changes --json` output, a line each.
    static func lines(_ output: String) throws -> [[String: Any]] {
        try output.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        }
    }

    @Test func sinceAVectorPrintsTheRecordsBeyondIt() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let first = try store.addReminder("first")
        let seen = try store.statusJSON()
        let second = try store.addReminder("second")
        let note = try store.addNote("third")
        // Everything, as one change: its records in order (kind, then id).
        let everything = try store.ok("changes", "--since", "{}")
        #expect(everything.hasPrefix("local ") && !everything.contains("\n"), "\(everything)")
        #expect(Set(everything.split(separator: " ").dropFirst().map(String.init)) == ["reminder:\(first)", "reminder:\(second)", "note:\(note)"])
        let beyond = try Self.lines(try store.ok("changes", "--since", seen, "--json"))
        #expect(beyond.count == 1)
        #expect(Set(beyond[0]["records"] as? [String] ?? []) == ["reminder:\(second)", "note:\(note)"])
        #expect(beyond[0]["origin"] as? String == "local")
        let status = try #require(try JSONSerialization.jsonObject(with: Data(try store.statusJSON().utf8)) as? [String: Any])
        #expect(beyond[0]["versions"] as? [String: Int] == status["versionVector"] as? [String: Int])
        // Nothing beyond what the store holds.
        let all = try store.statusJSON()
        #expect(try store.ok("changes", "--since", all) == "")
    }

    /// A follower started from the beginning hears every reminder that three writer processes add
    /// at once, each once, and stops cleanly on SIGTERM; from the last vector it printed, nothing
    /// is left to print.
    @Test func followHearsWritersInOtherProcessesUntilSIGTERM() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let follower = try sandbox.start(["changes", "--follow", "--json", "--since", "{}", "--store", store.path])
        let run = try sandbox.runner()
        let ids = ResultBox<[String]>(3)
        let path = store.path
        DispatchQueue.concurrentPerform(iterations: 3) { writer in
            ids.set(writer, Result {
                try (0..<10).map { index in try run(["reminder", "add", "writer \(writer), \(index)", "--store", path]).out }
            })
        }
        let byWriter = try ids.values.map { try #require($0).get().map { "reminder:\($0)" } }
        let added = byWriter.flatMap { $0 }
        #expect(Set(added).count == 30)
        #expect(eventually(timeout: 20) {
            let printed = (try? Self.lines(follower.stdout)) ?? []
            return Set(printed.flatMap { $0["records"] as? [String] ?? [] }) == Set(added)
        }, "\(follower.stdout)")
        follower.send(SIGTERM)
        let result = follower.wait(timeout: 20)
        #expect(result.succeeded, "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        let printed = try Self.lines(result.stdout)
        let records = printed.flatMap { $0["records"] as? [String] ?? [] }
        #expect(records.count == 30, "each record once")
        // In commit order: each writer's reminders, committed one after the other, in that order.
        for written in byWriter {
            let positions = written.compactMap { records.firstIndex(of: $0) }
            #expect(positions == positions.sorted(), "in commit order: \(written) at \(positions)")
        }
        let last = try #require(printed.last?["versions"] as? [String: Int])
        let data = try JSONSerialization.data(withJSONObject: last)
        #expect(try store.ok("changes", "--since", String(decoding: data, as: UTF8.self)) == "")
    }

    /// A follower goes on through another process's `init --fork` (SPEC.md §7.1, §9.1): it says
    /// so on a line of stderr at once, and from then on `local` means written by the replica the
    /// store now is. What the store writes afterwards is `local`, not merged; what the former id
    /// writes elsewhere (here a copy of the store declared moved, which goes on as that replica)
    /// arrives by a merge, and is `merge`, not local.
    @Test func followGoesOnThroughAForkWithTheNewReplicaAsLocal() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let oldID = try store.replicaID()
        let before = try store.addReminder("before the fork")
        // The copy is made while no process has the store open: its file holds everything.
        let copy = Store(sandbox: sandbox, path: sandbox.path("copy.db"))
        try FileManager.default.copyItem(atPath: store.path, toPath: copy.path)
        #expect(try copy.run("init", "--moved").succeeded)
        let follower = try sandbox.start(["changes", "--follow", "--json", "--since", "{}", "--store", store.path])
        #expect(eventually(timeout: 20) { follower.stdout.contains(before) }, "\(follower.stdout) \(follower.stderr)")

        #expect(try store.run("init", "--fork").succeeded)
        let newID = try store.replicaID()
        #expect(newID != oldID)
        let forkLine = "syncctl: the store is now replica \(newID) ('syncctl init --fork'); following on as that replica"
        #expect(eventually(timeout: 20) { follower.stderr.contains(forkLine) }, "said at once, with no change to print: \(follower.stderr)")

        let fromFormerID = try copy.addReminder("by the former id, elsewhere")
        let bundle = sandbox.path("former.cbundle")
        try copy.ok("export", bundle)
        try store.ok("merge", bundle)
        #expect(eventually(timeout: 20) { follower.stdout.contains(fromFormerID) }, "\(follower.stdout)")
        let after = try store.addReminder("after the fork")
        #expect(eventually(timeout: 20) { follower.stdout.contains(after) }, "\(follower.stdout)")

        follower.send(SIGTERM)
        let result = follower.wait(timeout: 20)
        #expect(result.succeeded, "\(result)")
        #expect(result.stderrLines == [forkLine], "\(result)")
        let printed = try Self.lines(result.stdout)
        #expect(printed.map { $0["records"] as? [String] ?? [] } == [["reminder:\(before)"], ["reminder:\(fromFormerID)"], ["reminder:\(after)"]], "\(result)")
        #expect(printed.map { $0["origin"] as? String ?? "" } == ["local", "merge", "local"], "\(result)")
        #expect(printed.last?["versions"] as? [String: Int] == [oldID: 10, newID: 5], "\(result)")
    }

    /// A follower whose store is wiped and created again at its path ends with one line and exit 1
    /// (SPEC.md §7.1, §9.1): it neither follows the old file on silently, which no one writes any
    /// more, nor prints the new store's history as if it went on from the old one.
    @Test func followEndsOnceTheStoreIsWipedAndCreatedAgain() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        // From nothing: a follower that opens the store only after the reminder is added (a
        // loaded machine) still prints it.
        let follower = try sandbox.start(["changes", "--follow", "--json", "--since", "{}", "--store", store.path])
        let before = try store.addReminder("before the wipe")
        #expect(eventually(timeout: 20) { follower.stdout.contains(before) }, "\(follower.stdout) \(follower.stderr)")
        #expect(try store.run("wipe", "--yes").succeeded)
        #expect(try store.run("init").succeeded)
        let after = try store.addReminder("in the new store")
        let result = follower.wait(timeout: 20)
        #expect(!result.timedOut, "the follower ends by itself: \(result)")
        #expect(result.status == 1 && !result.crashed, "\(result)")
        #expect(result.stderrLines == [
            "syncctl: the store at \(store.path) was replaced by another file (wiped, restored or moved) since this process opened it; open it again"
        ], "\(result)")
        let printed = try Self.lines(result.stdout)
        #expect(printed.map { $0["records"] as? [String] ?? [] } == [["reminder:\(before)"]], "only the old store's change: \(result)")
        #expect(!result.stdout.contains(after))
    }

    @Test func badInputIsRefusedWithOneLine() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let neither = try store.run("changes")
        #expect(neither.status == 64 && neither.stderr.split(separator: "\n").count == 1, "\(neither)")
        let garbage = try store.run("changes", "--since", "not a vector")
        #expect(!garbage.succeeded && garbage.stderr.split(separator: "\n").count == 1, "\(garbage)")
        #expect(garbage.stderr.contains("version vector"), "\(garbage)")
    }
}
