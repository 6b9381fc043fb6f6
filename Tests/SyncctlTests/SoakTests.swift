import ConcordCore
import Foundation
import Testing

/// Processes that share a store (issue 15): `serve` and a `sync --watch` on store A for the whole
/// run, a watcher on store D through the same folder, peer clients B and C syncing with the server
/// again and again, and on every store at once writers, merges of bundles exported from other
/// stores, and `dump`, `status`, `verify`, `log`, `export`, while every live process's open files
/// are sampled. Meanwhile (issue 30) the folder's `concord-v1` is moved away or a restored copy
/// of it put in its place under the running watchers every few seconds, and a `changes --follow`
/// of store C goes on through another process's `init --fork` of C at a seeded moment: it must say
/// so once, and print what C writes afterwards as `local`. Then everything stops (cleanly, or by SIGKILL at a seeded moment), the stores are
/// synced until they converge, and the soak checks that every change whose command exited 0 and
/// every batch a server acknowledged is in every replica, that the stores are sound and identical,
/// that no process ever held a deleted `-wal` or `-shm` file, and that no stderr said the store was
/// locked, malformed or failing I/O.
///
/// `CONCORD_SOAK_SECONDS` sets each phase's concurrent run (default 60), `CONCORD_SOAK_SEED` the
/// seed (printed; random by default). `scripts/soak` runs longer passes.
@Suite(.serialized, .waitsForProcesses) struct SoakTests {
    @Test func sharedStoresThenACleanStop() throws {
        try Soak(phase: "clean stop", seed: SoakSettings.seed).run(killing: false)
    }

    @Test func sharedStoresThenSIGKILLAtARandomMoment() throws {
        try Soak(phase: "SIGKILL", seed: SoakSettings.seed &+ 1).run(killing: true)
    }

    /// The soak's fd check is only worth something if it sees the failure it looks for: a store's
    /// WAL deleted under a live process (here by the test itself, under `serve`).
    @Test func theSamplerSeesAWALDeletedUnderALiveProcess() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        try a.ok("key", "generate")
        let fleet = try ProcessFleet(sandbox: sandbox)
        fleet.startSampling()
        let server = try fleet.startDaemon("serve", label: "serve a", ["serve", "--listen", "127.0.0.1:0", "--store", a.path])
        let holdsWAL = eventually(timeout: 30) {
            (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.pid)/fd"))?.contains { descriptor in
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(server.pid)/fd/\(descriptor)")) == a.path + "-wal"
            } ?? false
        }
        try #require(holdsWAL, "serve opens its store's WAL")
        #expect(fleet.deletedFiles.isEmpty, "nothing is deleted yet")
        try FileManager.default.removeItem(atPath: a.path + "-wal")
        let seen = eventually(timeout: 10) { fleet.deletedFiles.contains { $0.target == a.path + "-wal (deleted)" && $0.label == "serve a" } }
        #expect(seen, "the sampler reports serve's deleted WAL: \(fleet.deletedFiles)")
        _ = server.stop(SIGKILL)
        fleet.stopSampling()
    }
}

/// The changes one store's writer made to its own reminders, as their commands' exits told. Only
/// this writer changes these reminders, always on its own store, one command after another: the
/// hybrid clock orders its edits, so their last one wins everywhere (LWW) and the final state of
/// each reminder is known.
final class WriterJournal: @unchecked Sendable {
    struct Reminder {
        var id: String
        var title: String
        /// When its `reminder add` started, and when it exited 0, in seconds into the run.
        var startedAt: TimeInterval
        var addedAt: TimeInterval
        /// The number of the latest edit that exited 0 (0: the add) and its notes.
        var acked: Int
        var notes: String
        /// A later edit that did not exit 0 (killed, say): it may or may not have landed.
        var pending: (number: Int, notes: String)?
        var completed = false
        var completePending = false
        var edits = 0
    }

    let store: String
    private let lock = NSLock()
    private var reminders: [Reminder] = []
    private var adds = 0

    init(store: String) { self.store = store }

    var snapshot: [Reminder] { lock.withLock { reminders } }

    /// The title and notes of the next add.
    func nextAdd() -> (title: String, notes: String) {
        lock.withLock {
            adds += 1
            return ("soak \(store) #\(adds)", Self.notes(store: store, add: adds, edit: 0))
        }
    }

    static func notes(store: String, add: Int, edit: Int) -> String { "\(store)\(add) v\(edit)" }

    /// The edit number in notes this journal wrote.
    static func editNumber(_ notes: String) -> Int? {
        notes.range(of: " v", options: .backwards).flatMap { Int(notes[$0.upperBound...]) }
    }

    func added(id: String, title: String, notes: String, startedAt: TimeInterval, at seconds: TimeInterval) {
        lock.withLock { reminders.append(Reminder(id: id, title: title, startedAt: startedAt, addedAt: seconds, acked: 0, notes: notes)) }
    }

    /// The next edit of reminder `index`: its number and notes.
    func nextEdit(_ index: Int) -> (number: Int, notes: String) {
        lock.withLock {
            reminders[index].edits += 1
            let add = Int(reminders[index].title.split(separator: "#").last ?? "") ?? 0
            return (reminders[index].edits, Self.notes(store: store, add: add, edit: reminders[index].edits))
        }
    }

    func edited(_ index: Int, number: Int, notes: String, exitedZero: Bool) {
        lock.withLock {
            if exitedZero {
                reminders[index].acked = number
                reminders[index].notes = notes
                reminders[index].pending = nil
            } else {
                reminders[index].pending = (number, notes)
            }
        }
    }

    func completed(_ index: Int, exitedZero: Bool) {
        lock.withLock {
            if exitedZero { reminders[index].completed = true } else { reminders[index].completePending = true }
        }
    }
}

/// A batch a server acknowledged: the client's `sync --peer` exited 0, so the server holds every
/// change the client's writer had made (exited 0) before the sync started.
struct AckedBatch {
    var client: String
    var sync: Int
    var at: TimeInterval
    var held: [WriterJournal.Reminder]
}

/// A reminder as `reminder list --all --json` shows it.
struct SeenReminder {
    var title: String
    var notes: String
    var completed: Bool
}

/// One soak: four stores, the fleet's processes on them, the stop, the full exchange, the checks.
final class Soak: @unchecked Sendable {
    let phase: String
    let seed: UInt64
    let seconds = SoakSettings.seconds
    let sandbox: Sandbox
    let fleet: ProcessFleet
    let folder: String
    /// Store label -> path. A is served and watched; B and C are peer clients; D watches the folder.
    let stores: [String: String]
    let names = ["a", "b", "c", "d"]
    let journals: [String: WriterJournal]
    private let lock = NSLock()
    private var acked: [AckedBatch] = []
    private var syncCounts: [String: Int] = [:]
    private var port = 0
    /// The store another process forks during the run, under a follower of its changes; when
    /// the fork returned (seconds into the run), and the replica id it made.
    let forkedStore = "c"
    private var fork: (at: TimeInterval, id: String)?
    /// When the loops started, in seconds into the run.
    private var loopsStarted: TimeInterval = 0
    /// The `concord-v1` directories moved away from the folder, which a restored copy is made of.
    private var movedAway: [String] = []
    /// The names of the bundle files in the restored copies put in place: a replica's own files
    /// among them came back after it coalesced them and forgot them, so they are anyone's (SPEC.md
    /// §14, "Serials") and stay; the folder's bound leaves them out.
    private var restoredNames: Set<String> = []

    init(phase: String, seed: UInt64) throws {
        self.phase = phase
        self.seed = seed
        sandbox = try Sandbox()
        fleet = try ProcessFleet(sandbox: sandbox)
        folder = try sandbox.makeDirectory("Shared")
        var stores: [String: String] = [:]
        var journals: [String: WriterJournal] = [:]
        for name in names {
            stores[name] = sandbox.path("\(name).db")
            journals[name] = WriterJournal(store: name)
        }
        self.stores = stores
        self.journals = journals
    }

    /// What a failure message says first: enough to replay the run.
    var header: String { "soak \(phase) (seed \(seed); replay with CONCORD_SOAK_SEED=\(SoakSettings.seed) CONCORD_SOAK_SECONDS=\(seconds))" }

    func store(_ name: String) -> [String] { ["--store", stores[name]!] }

    /// Runs a setup or checking command that must succeed; its output.
    @discardableResult
    func must(_ kind: String, _ name: String, _ arguments: [String]) throws -> String {
        let outcome = try #require(try fleet.run(kind, label: "\(kind) \(name)", arguments + store(name)))
        try #require(outcome.succeeded, "\(header): \(outcome.result)")
        return outcome.result.out
    }

    func run(killing: Bool) throws {
        print("\(header): starting")
        // Every store holds the same sync key: peers need it, and the folder's bundles are sealed
        // with it.
        for name in names { try must("init", name, ["init", "--name", name]) }
        let key = String(try must("key generate", "a", ["key", "generate"]).split(separator: "\n")[0])
        for name in names.dropFirst() { try must("key import", name, ["key", "import", key]) }

        fleet.startSampling()
        var server = try startServer()
        var watchers = [
            try fleet.startDaemon("sync --watch", label: "watcher a", ["sync", "--folder", folder, "--watch", "--interval", "0.2"] + store("a")),
            try fleet.startDaemon("sync --watch", label: "watcher d", ["sync", "--folder", folder, "--watch", "--interval", "0.2"] + store("d")),
        ]
        // From the start (`--since {}`): what the writers commit before it subscribes is printed too.
        let follower = try fleet.startDaemon(
            "changes --follow", label: "follower \(forkedStore)", ["changes", "--follow", "--json", "--since", "{}"] + store(forkedStore))
        startLoops()

        var random = SplitMix64(seed: seed)
        var followed: [String] = []
        let began = Date()
        if killing {
            // A seeded moment after the whole run (CI's bound is a floor) and within a quarter more
            // of it: whatever each process is doing then, with the stores grown.
            let moment = Double(seconds) * (1 + 0.25 * Double(random.next() % 10_000) / 10_000)
            print(String(format: "\(header): SIGKILL of everything at %.2f s of the run", moment))
            Thread.sleep(until: began.addingTimeInterval(moment))
            fleet.killEverything()
            print("\(header): killed \(fleet.killed.joined(separator: ", "))")
            _ = server.stop(SIGKILL)
            for watcher in watchers { countWatcherSyncs(watcher.stop(SIGKILL)) }
            let stopped = follower.stop(SIGKILL)
            fleet.resume()
            followed = checkFollower(stopped, stopped: false, in: try reminders(in: forkedStore))
            server = try startServer()
        } else {
            Thread.sleep(until: began.addingTimeInterval(Double(seconds)))
            fleet.stopLoops()
            // One watcher by each signal: both must finish the sync under way and say `stopped`.
            countWatcherSyncs(watchers[0].stopCleanly(SIGINT, expected: failedAsTheFolderWasReplaced))
            countWatcherSyncs(watchers[1].stopCleanly(SIGTERM, expected: failedAsTheFolderWasReplaced))
            // The follower has printed every reminder its store's writer added, then stops.
            let own = Set(journals[forkedStore]!.snapshot.map(\.id))
            _ = eventually(timeout: 30) { own.isSubset(of: Self.printedReminders(follower.stdout)) }
            followed = checkFollower(follower.stop(SIGTERM), stopped: true, in: try reminders(in: forkedStore))
            server.stopCleanly(SIGTERM)
            server = try startServer()
        }
        watchers = []
        let ran = Date().timeIntervalSince(began)

        // Before any exchange: the server's store holds every batch it acknowledged, and each
        // store its own writer's changes.
        var missing: [String] = []
        missing += checkAcknowledged(in: try reminders(in: "a"))
        for name in names {
            missing += checkJournal(journals[name]!, in: try reminders(in: name), store: name, when: "before the exchange")
        }

        let rounds = try exchangeUntilConverged()
        server.stopCleanly(SIGTERM)

        // After it: every replica holds every writer's changes, is sound, and all are identical.
        for name in names {
            let seen = try reminders(in: name)
            for writer in names {
                missing += checkJournal(journals[writer]!, in: seen, store: name, when: "after the exchange")
            }
        }
        var unsound: [String] = []
        for name in names {
            let outcome = try fleet.run("verify", label: "final verify \(name)", ["verify"] + store(name))
            if outcome?.succeeded != true || outcome?.result.out.hasPrefix("sound: ") != true {
                unsound.append("\(name): \(outcome.map { "\($0.result)" } ?? "not run")")
            }
        }
        let dumps = try names.map { try must("dump", $0, ["dump"]) }
        // However many of its processes synced at once, a replica that syncs alone again keeps at
        // most 33 files of its own in the folder (SPEC.md §14, step 3); but for a file whose sync
        // was killed before it recorded it, and those a restored copy of the folder brought back,
        // which are anyone's.
        let killedFolderSyncs = fleet.killed.filter { $0 == "sync --folder a" || $0 == "watcher a" || $0 == "watcher d" }.count
        var unbounded: [String] = []
        for name in ["a", "d"] {
            let id = try #require(try jsonObject(try must("status", name, ["status", "--json"])).string("replica"))
            let restored = lock.withLock { restoredNames }
            let files = try bundleNames(in: folder).filter { $0.hasPrefix(id) && !restored.contains($0) }.count
            if files > 33 + killedFolderSyncs { unbounded.append("\(name) has \(files) files in the folder") }
        }
        let operations = try jsonObject(try must("status", "a", ["status", "--json"])).int("operations") ?? -1
        fleet.stopSampling()

        let totals = summary(ran: ran, rounds: rounds, operations: operations)
        print("\(header): \(totals)")
        // Issue.record rather than #expect: the lists are long, and #expect would print each twice.
        let deleted = fleet.deletedFiles
        if !deleted.isEmpty {
            Issue.record("\(header): processes held deleted -wal/-shm files (\(deleted.count)):\n\(list(deleted.map(\.description)))")
        }
        if !missing.isEmpty {
            Issue.record("\(header): acknowledged changes missing (\(missing.count)):\n\(list(missing))")
        }
        if !unbounded.isEmpty {
            Issue.record("\(header): the folder is not bounded (SPEC.md §14 keeps a replica at 33 files, \(killedFolderSyncs) folder syncs were killed): \(unbounded)")
        }
        if !unsound.isEmpty {
            Issue.record("\(header): verify failed:\n\(list(unsound))")
        }
        #expect(rounds > 0, "\(header): the stores did not converge after the exchange: dumps differ")
        for (name, dump) in zip(names, dumps).dropFirst() where dump != dumps[0] {
            Issue.record("\(header): dump of \(name) differs from a's after the full exchange: \(firstDifference(dump, dumps[0]))")
        }
        if !followed.isEmpty {
            Issue.record("\(header): the follower of store \(forkedStore) through its fork (\(followed.count)):\n\(list(followed))")
        }
        if lock.withLock({ fork }) == nil {
            Issue.record("\(header): store \(forkedStore) was not forked during the run")
        }
        let problems = fleet.problems
        if !problems.isEmpty {
            Issue.record("\(header): commands failed or reported store errors (\(problems.count)):\n\(list(problems))")
        }
    }

    /// Where two dumps (one line of JSON each) first differ, with a little of each around it.
    func firstDifference(_ one: String, _ other: String) -> String {
        let (a, b) = (Array(one.utf8), Array(other.utf8))
        let offset = (0..<min(a.count, b.count)).first { a[$0] != b[$0] } ?? min(a.count, b.count)
        func around(_ bytes: [UInt8]) -> String {
            String(decoding: bytes[max(0, offset - 120)..<min(bytes.count, offset + 120)], as: UTF8.self)
        }
        return "at byte \(offset) of \(a.count) and \(b.count):\n  …\(around(a))…\n  …\(around(b))…"
    }

    /// The first 25 items, one per line, and how many more there were.
    func list(_ items: [String]) -> String {
        items.prefix(25).joined(separator: "\n") + (items.count > 25 ? "\n… and \(items.count - 25) more" : "")
    }

    // MARK: The fleet's processes

    /// Starts `serve` on store A and learns its port.
    func startServer() throws -> ProcessFleet.Daemon {
        let server = try fleet.startDaemon("serve", label: "serve a", ["serve", "--listen", "127.0.0.1:0"] + store("a"))
        #expect(eventually(timeout: 30) { server.stdout.contains("\n") || !server.isRunning })
        let first = String(server.stdout.split(separator: "\n").first ?? "")
        let match = try #require(first.firstMatch(of: /on 127\.0\.0\.1:(\d+) \(sync key/), "\(header): serve did not start: \(server.stdout)")
        lock.withLock { port = Int(match.1)! }
        return server
    }

    var address: String { lock.withLock { "127.0.0.1:\(port)" } }

    func count(_ kind: String, _ number: Int = 1) { lock.withLock { syncCounts[kind, default: 0] += number } }

    /// A watcher prints one line per sync that moved something (SPEC.md §11): imported, published.
    func countWatcherSyncs(_ result: RunResult) {
        count("watcher syncs", result.stdoutLines.filter { $0.hasPrefix("imported") || $0.hasPrefix("published") }.count)
    }

    /// About eleven processes at once on two cores: four writers, two peer clients, a folder
    /// syncer of A, a merger and a reader, beside serve and the two watchers.
    func startLoops() {
        lock.withLock { loopsStarted = fleet.elapsed }
        for (index, name) in names.enumerated() {
            let journal = journals[name]!
            fleet.loop("writer \(name)") { [self] iteration in
                var random = random(stream: 100 + index, iteration)
                try write(journal, on: name, &random)
            }
        }
        for (index, name) in ["b", "c"].enumerated() {
            fleet.loop("client \(name)") { [self] iteration in
                var random = random(stream: 200 + index, iteration)
                try syncWithServer(name, iteration: iteration)
                // Again and again, but leaving the writers some of the two cores.
                Thread.sleep(forTimeInterval: Double(random.next() % 300) / 1000)
            }
        }
        // A second process of replica A syncing through the folder beside its watcher: each may
        // import a file the other published before it sees it recorded (issue 30).
        fleet.loop("folder syncs of a") { [self] iteration in
            var random = random(stream: 500, iteration)
            let arguments = ["sync", "--folder", folder] + store("a")
            if try fleet.run("sync --folder", label: "sync --folder a", arguments, expected: syncFailedAsTheFolderWasReplaced)?.succeeded == true {
                count("folder syncs of a")
            }
            Thread.sleep(forTimeInterval: Double(random.next() % 300) / 1000)
        }
        fleet.loop("merger") { [self] iteration in
            var random = random(stream: 300, iteration)
            try exportAndMerge(iteration, &random)
        }
        fleet.loop("reader") { [self] iteration in
            var random = random(stream: 400, iteration)
            try read(iteration, &random)
        }
        fleet.loop("folder replacer") { [self] iteration in
            var random = random(stream: 500, iteration)
            // Every 2 to 5 s, leaving the watchers time to publish into each new directory.
            guard pause(2 + Double(random.next() % 3000) / 1000) else { return }
            try replaceFolder(iteration, &random)
        }
        fleet.loop("forker") { [self] iteration in
            guard iteration == 0 else {
                _ = pause(0.2)
                return
            }
            // At a seeded moment from 30% to 60% into the run, so that the follower goes on long
            // after it.
            var random = random(stream: 600, 0)
            let moment = Double(seconds) * (0.3 + 0.3 * Double(random.next() % 1000) / 1000)
            guard pause(lock.withLock { loopsStarted } + moment - fleet.elapsed) else { return }
            try forkStore()
        }
    }

    /// Sleeps `seconds`, or less once the fleet stops: whether it slept them all.
    func pause(_ seconds: TimeInterval) -> Bool {
        let until = Date().addingTimeInterval(seconds)
        while Date() < until {
            if fleet.isStopping { return false }
            Thread.sleep(forTimeInterval: min(0.05, max(0, until.timeIntervalSinceNow)))
        }
        return !fleet.isStopping
    }

    /// Moves the folder's `concord-v1` away under the running watchers (their next sync makes it
    /// again), or puts in its place a restored copy of one moved away before (SPEC.md §14,
    /// "Watching"): either way each watcher must watch the new directory, and publish what it
    /// lacks.
    func replaceFolder(_ iteration: Int, _ random: inout SplitMix64) throws {
        let layout = folder + "/concord-v1"
        let aside = sandbox.path("moved-away-\(iteration)")
        let earlier = lock.withLock { movedAway }
        if earlier.isEmpty || random.next() % 2 == 0 {
            guard rename(layout, aside) == 0 else { return }  // not made again yet
            lock.withLock { movedAway.append(aside) }
            count("folder directories moved away")
            return
        }
        // The copy is made of a directory no watcher writes into any more (but for a file it
        // was writing as the directory moved, which may be left half-copied: a temporary file,
        // which syncs pass over, or a whole one).
        let restored = sandbox.path("restored-\(iteration)")
        do {
            try FileManager.default.copyItem(atPath: earlier[Int(random.next() % UInt64(earlier.count))], toPath: restored)
        } catch {
            return
        }
        // A watcher may make the directory again between the two renames: move that aside too.
        for attempt in 0..<20 {
            if rename(layout, aside + "-\(attempt)") == 0 { lock.withLock { movedAway.append(aside + "-\(attempt)") } }
            // The copy is a `concord-v1` directory itself.
            let names = Set((try? FileManager.default.contentsOfDirectory(atPath: restored)) ?? [])
            if rename(restored, layout) == 0 {
                lock.withLock { restoredNames.formUnion(names) }
                count("restored copies put in place")
                return
            }
        }
    }

    /// Another process's `init --fork` of the followed store.
    func forkStore() throws {
        let name = forkedStore
        guard let outcome = try fleet.run("init --fork", label: "fork of \(name)", ["init", "--fork"] + store(name)), outcome.succeeded else { return }
        let id = String(outcome.result.out.prefix(32))
        lock.withLock { fork = (fleet.elapsed, id) }
        print(String(format: "\(header): store \(name) forked into replica \(id) at %.1f s", fleet.elapsed))
    }

    /// A command on the forked store that opened it as the old replica and wrote once it was
    /// forked is refused, as it must be (SPEC.md §9.1): not a problem of the run.
    func refusedAfterTheFork(of name: String) -> ((RunResult) -> Bool)? {
        guard name == forkedStore else { return nil }
        return { result in result.stderr.contains("(another process ran 'syncctl init --fork' on it); this process opened it as replica") }
    }

    /// A line a watcher writes when a sync failed because the folder's directory was moved away
    /// under it (its files made in a directory gone by the time it links them, say): the next
    /// look syncs into the new one.
    func failedAsTheFolderWasReplaced(_ line: String) -> Bool {
        line.hasPrefix("syncctl: warning: ") && line.hasSuffix("; retrying") && line.contains("/concord-v1")
            && line.contains("No such file or directory")
    }

    /// A `sync --folder` that failed because the folder's directory was moved away under it (the
    /// bundle it wrote had no directory left to be linked into, or its temporary file none to be
    /// made in: `cannot write in FOLDER/concord-v1 (...)`): one line, exit 1, and the next sync
    /// publishes into the new directory.
    func syncFailedAsTheFolderWasReplaced(_ result: RunResult) -> Bool {
        result.status == 1 && !result.crashed && result.stderrLines.count == 1
            && result.stderr.contains("/concord-v1") && result.stderr.contains("No such file or directory")
    }

    /// The ids of the reminders in the changes a follower printed.
    static func printedReminders(_ output: String) -> Set<String> {
        var ids: Set<String> = []
        for line in output.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
            for record in object["records"] as? [String] ?? [] where record.hasPrefix("reminder:") { ids.insert(String(record.dropFirst(9))) }
        }
        return ids
    }

    /// What the follower of the forked store did wrong: a line on stderr but the fork's, once; a
    /// change that is not one JSON object; another writer's reminder in a `local` change; a
    /// reminder its store's writer began to add after the fork in a `merge` change (the old
    /// build's error: it took the new id's writes for merged); and, when it was stopped
    /// (`stopped`), a reminder the writer added that it never printed. `seen` is what the store
    /// holds once the follower stopped: an add that did not exit 0 (killed after its commit, say)
    /// is not in the journal, but its title is one of the writer's.
    func checkFollower(_ result: RunResult, stopped: Bool, in seen: [String: SeenReminder]) -> [String] {
        var wrong: [String] = []
        let fork = lock.withLock { self.fork }
        let own = Dictionary(journals[forkedStore]!.snapshot.map { ($0.id, $0) }) { first, _ in first }
        func added(byItsWriter id: String) -> Bool { own[id] != nil || seen[id]?.title.hasPrefix("soak \(forkedStore) #") == true }
        let forkLine = fork.map { "syncctl: the store is now replica \($0.id) ('syncctl init --fork'); following on as that replica" }
        if result.stderrLines != (forkLine.map { [$0] } ?? []) {
            wrong.append("its stderr is not the fork's line, once: \(result.stderrLines.prefix(5))")
        }
        if stopped, !result.succeeded { wrong.append("it did not stop cleanly: \(result)") }
        for line in result.stdoutLines {
            guard let object = try? jsonObject(line), let origin = object.string("origin"), let records = object.strings("records") else {
                wrong.append("not a change: \(line.prefix(200))")
                continue
            }
            let reminders = records.filter { $0.hasPrefix("reminder:") }.map { String($0.dropFirst(9)) }
            if origin == "local", let other = reminders.first(where: { !added(byItsWriter: $0) }) {
                wrong.append("another writer's reminder \(other) in a local change")
            }
            if origin == "merge", let fork, let late = reminders.first(where: { (own[$0]?.startedAt ?? 0) > fork.at }) {
                wrong.append(String(format: "reminder %@, which %@'s writer began to add %.1f s after the fork, printed as merged", late, forkedStore, own[late]!.startedAt - fork.at))
            }
        }
        if stopped {
            let missing = Set(own.keys).subtracting(Self.printedReminders(result.stdout))
            if !missing.isEmpty { wrong.append("\(missing.count) reminders its store's writer added were never printed: \(missing.sorted().prefix(5))") }
        }
        return wrong
    }

    /// The generator of one iteration of one loop: each loop's choices depend on the seed and the
    /// iteration alone, not on how the threads interleave.
    func random(stream: Int, _ iteration: Int) -> SplitMix64 {
        var mixer = SplitMix64(seed: seed ^ UInt64(stream) << 40 ^ UInt64(iteration))
        return SplitMix64(seed: mixer.next())
    }

    /// One change by `name`'s writer to its own reminders: an add (about half), an edit of the
    /// notes, or a completion.
    func write(_ journal: WriterJournal, on name: String, _ random: inout SplitMix64) throws {
        let own = journal.snapshot
        let roll = random.next() % 100
        let refused = refusedAfterTheFork(of: name)
        if own.isEmpty || roll < 45 {
            let (title, notes) = journal.nextAdd()
            let started = fleet.elapsed
            guard let outcome = try fleet.run(
                "reminder add", label: "add on \(name)", ["reminder", "add", title, "--notes", notes, "--tag", name] + store(name), expected: refused)
            else { return }
            if outcome.succeeded {
                guard isRecordID(outcome.result.out) else {
                    fleet.problem("add on \(name) printed \(String(reflecting: outcome.result.out))")
                    return
                }
                journal.added(id: outcome.result.out, title: title, notes: notes, startedAt: started, at: fleet.elapsed)
            }
        } else if roll < 85 || own.allSatisfy(\.completed) {
            let index = Int(random.next() % UInt64(own.count))
            let (number, notes) = journal.nextEdit(index)
            guard let outcome = try fleet.run(
                "reminder edit", label: "edit on \(name)", ["reminder", "edit", own[index].id, "--notes", notes] + store(name), expected: refused)
            else { return }
            journal.edited(index, number: number, notes: notes, exitedZero: outcome.succeeded)
        } else {
            let open = own.indices.filter { !own[$0].completed }
            let index = open[Int(random.next() % UInt64(open.count))]
            guard let outcome = try fleet.run(
                "reminder complete", label: "complete on \(name)", ["reminder", "complete", own[index].id] + store(name), expected: refused)
            else { return }
            journal.completed(index, exitedZero: outcome.succeeded)
        }
    }

    /// One `sync --peer` of client `name` with the server; if it exits 0, what the client's writer
    /// had made before it started is acknowledged.
    func syncWithServer(_ name: String, iteration: Int) throws {
        let held = journals[name]!.snapshot
        let started = fleet.elapsed
        guard let outcome = try fleet.run(
            "sync --peer", label: "sync --peer from \(name)", ["sync", "--peer", address] + store(name), expected: refusedAfterTheFork(of: name))
        else { return }
        count("peer syncs")
        if outcome.succeeded {
            count("acknowledged batches")
            lock.withLock { acked.append(AckedBatch(client: name, sync: iteration, at: started, held: held)) }
        }
    }

    /// Exports a bundle of one store (plain or sealed with the key) and merges it into another.
    func exportAndMerge(_ iteration: Int, _ random: inout SplitMix64) throws {
        let source = names[Int(random.next() % 4)]
        let target = names.filter { $0 != source }[Int(random.next() % 3)]
        let bundle = sandbox.path("bundle-\(iteration).cbundle")
        defer { try? FileManager.default.removeItem(atPath: bundle) }
        let encrypt = random.next() % 2 == 0 ? ["--encrypt"] : []
        guard let exported = try fleet.run("export", label: "export of \(source) for a merge", ["export", bundle] + encrypt + store(source)),
              exported.succeeded else { return }
        guard let merged = try fleet.run(
            "merge", label: "merge of \(source)'s bundle into \(target)", ["merge", bundle] + store(target), expected: refusedAfterTheFork(of: target))
        else { return }
        if merged.succeeded { count("merges") }
    }

    /// One read of a random store: dump, status, verify, log or export.
    func read(_ iteration: Int, _ random: inout SplitMix64) throws {
        let name = names[Int(random.next() % 4)]
        switch random.next() % 5 {
        case 0: _ = try fleet.run("dump", label: "dump \(name)", ["dump"] + store(name))
        case 1: _ = try fleet.run("status", label: "status \(name)", ["status", "--json"] + store(name))
        case 2:
            guard let outcome = try fleet.run("verify", label: "verify \(name)", ["verify"] + store(name)) else { return }
            // A verify that exits 0 says `sound: …` (a failing one is already a fleet problem).
            if outcome.succeeded, !outcome.result.out.hasPrefix("sound: ") {
                fleet.problem("verify \(name) exited 0 without saying sound: \(outcome.result)")
            }
        case 3: _ = try fleet.run("log", label: "log \(name)", ["log", "--limit", "5"] + store(name))
        default:
            let bundle = sandbox.path("read-\(iteration).cbundle")
            _ = try fleet.run("export", label: "export \(name)", ["export", bundle] + store(name))
            try? FileManager.default.removeItem(atPath: bundle)
        }
    }

    // MARK: The exchange and the checks

    /// Syncs every store with the server (B, C) and the folder (A, D) until all dumps are equal;
    /// returns the number of rounds it took, or 0 if they never converged.
    func exchangeUntilConverged() throws -> Int {
        for round in 1...5 {
            for name in ["a", "d"] { attempt("sync --folder", name, ["sync", "--folder", folder]) }
            for name in ["b", "c"] { attempt("sync --peer", name, ["sync", "--peer", address]) }
            for name in ["a", "d"] { attempt("sync --folder", name, ["sync", "--folder", folder]) }
            for name in ["b", "c"] { attempt("sync --peer", name, ["sync", "--peer", address]) }
            let dumps = Set(names.map { attempt("dump", $0, ["dump"]) ?? "(no dump)" })
            if dumps.count == 1 { return round }
        }
        return 0
    }

    /// Runs a command of the exchange; a failure is a problem of the report, not the end of the
    /// checks (the fleet tolerates failures after a kill, the exchange does not).
    @discardableResult
    func attempt(_ kind: String, _ name: String, _ arguments: [String]) -> String? {
        do {
            guard let outcome = try fleet.run(kind, label: "exchange: \(kind) \(name)", arguments + store(name)) else { return nil }
            if outcome.succeeded { return outcome.result.out }
            if outcome.endedAfterKill { fleet.problem("exchange: \(kind) \(name) failed: \(outcome.result)") }
        } catch {
            fleet.problem("exchange: \(kind) \(name) could not run: \(error)")
        }
        return nil
    }

    /// Every reminder of `name`'s store, by id.
    func reminders(in name: String) throws -> [String: SeenReminder] {
        let output = try must("reminder list", name, ["reminder", "list", "--all", "--json"])
        var seen: [String: SeenReminder] = [:]
        for object in try jsonArray(output) {
            guard let id = object.string("id") else { continue }
            seen[id] = SeenReminder(
                title: object.string("title") ?? "", notes: object.string("notes") ?? "", completed: object.bool("completed") ?? false)
        }
        return seen
    }

    /// What of `journal` (every change that exited 0) `seen` lacks, one line per reminder.
    func checkJournal(_ journal: WriterJournal, in seen: [String: SeenReminder], store name: String, when: String) -> [String] {
        var missing: [String] = []
        for reminder in journal.snapshot {
            let place = "\(when): store \(name), writer \(journal.store)'s \(reminder.title) (\(reminder.id))"
            guard let found = seen[reminder.id] else {
                missing.append(String(format: "%@: missing (its `reminder add` exited 0 at %.1f s)", place, reminder.addedAt))
                continue
            }
            // The last edit that exited 0 sets the notes, unless a later one that did not exit 0
            // landed anyway.
            if found.notes != reminder.notes, found.notes != reminder.pending?.notes {
                missing.append("\(place): notes \(String(reflecting: found.notes)), expected \(String(reflecting: reminder.notes))"
                    + (reminder.pending.map { " or \(String(reflecting: $0.notes))" } ?? ""))
            }
            if reminder.completed, !found.completed {
                missing.append("\(place): not completed (its complete exited 0)")
            }
            if !reminder.completed, !reminder.completePending, found.completed {
                missing.append("\(place): completed, but no complete of it was run")
            }
        }
        return missing
    }

    /// What of the acknowledged batches the server's store (`seen`) lacks: each reminder the client
    /// held, with its notes at least as new as then.
    func checkAcknowledged(in seen: [String: SeenReminder]) -> [String] {
        let batches = lock.withLock { acked }
        var missing: [String] = []
        var reported: Set<String> = []
        for batch in batches {
            for reminder in batch.held {
                let place = String(format: "server store a lacks what it acknowledged to %@ in sync %d (started %.1f s into the run): %@ (%@)",
                                   batch.client, batch.sync, batch.at, reminder.title, reminder.id)
                let problem: String?
                if let found = seen[reminder.id] {
                    let number = WriterJournal.editNumber(found.notes) ?? -1
                    if number < reminder.acked {
                        problem = "\(place): notes \(String(reflecting: found.notes)), older than the acknowledged \(String(reflecting: reminder.notes))"
                    } else if reminder.completed, !found.completed {
                        problem = "\(place): not completed"
                    } else {
                        problem = nil
                    }
                } else {
                    problem = "\(place): missing"
                }
                // One line per reminder: its first acknowledgement that was lost.
                if let problem, reported.insert(reminder.id).inserted { missing.append(problem) }
            }
        }
        return missing
    }

    func summary(ran: TimeInterval, rounds: Int, operations: Int) -> String {
        let counts = lock.withLock { syncCounts }
        let adds = names.map { "\($0) \(journals[$0]!.snapshot.count)" }.joined(separator: ", ")
        return String(format: "ran %.1f s; ", ran) + fleet.totals
            + "; peer syncs \(counts["peer syncs"] ?? 0) (acknowledged \(counts["acknowledged batches"] ?? 0)), merges \(counts["merges"] ?? 0), "
            + "folder syncs by the watchers that moved operations \(counts["watcher syncs"] ?? 0); "
            + "folder directories moved away under the watchers \(counts["folder directories moved away"] ?? 0), "
            + "restored copies put in place \(counts["restored copies put in place"] ?? 0); "
            + "reminders added (exit 0) by store: \(adds); "
            + "\(operations) operations in each store after \(rounds) exchange round(s)"
    }
}
