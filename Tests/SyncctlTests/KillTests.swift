import ConcordCore
import ConcordStore
import Foundation
import Testing

/// Crash safety (issue 6): the built `syncctl` killed with SIGKILL at random moments of local
/// writes, of a `merge` of a large bundle and of `sync --folder` (import, publish, coalesce).
/// After each kill the store passes `syncctl verify`, holds every change whose command exited 0
/// and no half-applied one; the interrupted work is then redone and the stores converge.
///
/// `CONCORD_KILLS` sets the number of kills (default 54, split 40/30/30 between the three),
/// `CONCORD_KILL_SEED` the seed (printed; random by default) and `CONCORD_KILL_RECORDS` the size
/// of the workload behind the large bundles (default 1500 reminders, about 12,000 operations;
/// merges run in batches of 4,000 operations here, so such a merge spans three).
/// `scripts/kill-test` runs longer passes.
@Suite(.serialized, .waitsForProcesses) struct KillTests {
    static let kills = max(3, environmentNumber("CONCORD_KILLS", default: 54))
    static let seed: UInt64 = ProcessInfo.processInfo.environment["CONCORD_KILL_SEED"].flatMap { UInt64($0) }
        ?? UInt64.random(in: 1...999_999)
    static let records = max(100, environmentNumber("CONCORD_KILL_RECORDS", default: 1500))
    /// The operations of one merge batch in these tests (`SYNCCTL_MERGE_BATCH`): small, so that
    /// kills land between batches too.
    static let mergeBatch = 4_000

    /// A sandbox whose runs merge in batches of `mergeBatch` operations.
    static func makeSandbox() throws -> Sandbox {
        let sandbox = try Sandbox()
        sandbox.variables["SYNCCTL_MERGE_BATCH"] = "\(mergeBatch)"
        return sandbox
    }

    /// With `CONCORD_KILL_VERBOSE` set, each kill prints what it found.
    static func log(_ line: String) {
        if ProcessInfo.processInfo.environment["CONCORD_KILL_VERBOSE"] != nil { print(line) }
    }

    /// When to kill a command that takes about `typical` seconds uninterrupted and makes
    /// `measure` (the size of the file it writes) grow to `greatest`: at a uniformly random moment
    /// of its run (or just after it); or, every other kill, once it has written a random part of
    /// that file, and a random moment later. Times vary with the machine's load; a file's growth
    /// does not, so the second kind lands in writes, commits and checkpoints far more often.
    static func killPoint(
        _ random: inout SplitMix64, _ kill: Int, typical: TimeInterval, measure: @escaping () -> Int, greatest: Int
    ) -> KillPoint {
        let fraction = Double(random.next() % 10_000) / 10_000
        if kill % 2 == 0 { return .after(typical * fraction * 1.15) }
        let later = random.next() % 4 == 0 ? 0 : Double(random.next() % 10_000) / 10_000 * typical * 0.01
        return .progress(measure: measure, threshold: max(1, Int(Double(greatest) * fraction)), then: later)
    }

    static var writeKills: Int { kills * 4 / 10 }
    static var mergeKills: Int { (kills - writeKills) / 2 }
    static var syncKills: Int { kills - writeKills - mergeKills }

    /// What a scenario's kills found, printed at its end.
    struct Tally: CustomStringConvertible {
        var name: String
        var sent = 0
        /// The kill found the process running (it died of SIGKILL).
        var hit = 0
        /// Of those, how many had already committed what they were doing (or all of it).
        var committed = 0
        /// Of those, how many had committed part of it (merge batches, a coalesced file beside the old ones).
        var partial = 0

        var description: String {
            "KillTests \(name): \(sent) kills (seed \(KillTests.seed)), \(hit) found syncctl running; "
                + "\(committed) of those had committed their work, \(partial) part of it, \(hit - committed - partial) nothing (each kill followed by verify and a redo)"
        }
    }

    // MARK: Local writes

    /// What a reminder should hold, as `reminder list --json` prints it.
    struct Expected: Equatable, CustomStringConvertible {
        var title: String
        var notes: String
        var priority: String
        var due: String
        var tags: [String]

        init(title: String, notes: String, priority: String, due: String, tags: [String]) {
            self.title = title
            self.notes = notes
            self.priority = priority
            self.due = due
            self.tags = tags.sorted()
        }

        init(_ object: [String: Any]) {
            self.init(
                title: object.string("title") ?? "?", notes: object.string("notes") ?? "?", priority: object.string("priority") ?? "?",
                due: object.string("due") ?? "?", tags: object.strings("tags") ?? ["?"])
        }

        var description: String { "\(title) [\(notes.count) characters of notes, \(priority), \(due), \(tags)]" }
    }

    /// One command of the script: its arguments, the record it changes (nil for an add, whose id is
    /// not known until it prints it), and the record's state before and after.
    struct Step {
        var arguments: [String]
        var id: String?
        var before: Expected?
        var after: Expected
    }

    @Test func killsDuringLocalWrites() throws {
        let sandbox = try Self.makeSandbox()
        let a = try sandbox.makeStore("a.db")
        var random = SplitMix64(seed: Self.seed)
        var tally = Tally(name: "local writes")
        var model: [String: Expected] = [:]  // id -> state
        let tags = ["errands", "home", "work", "later", "x", "y"]

        func text(_ length: Int) -> String {
            String((0..<length).map { index in index % 9 == 8 ? " " : Character(UnicodeScalar(UInt8(97 + Int(random.next() % 26)))) })
        }
        func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
        func due() -> (argument: String, printed: String) {
            let day = 1 + Int(random.next() % 28)
            let hour = Int(random.next() % 24)
            let stamp = String(format: "2027-03-%02dT%02d:15:00", day, hour)
            return (stamp + "Z", stamp + ".000Z")
        }
        var counter = 0
        func nextStep() -> Step {
            counter += 1
            let known = model.keys.sorted()
            let kind = known.count < 3 ? 0 : Int(random.next() % 3)
            let priority = pick(["none", "low", "medium", "high"])
            switch kind {
            case 0:
                // Notes up to 60 KB: a write of many pages, so kills land inside it too.
                let notes = text(1 + Int(random.next() % 60_000))
                let date = due()
                let chosen = Array(Set((0..<(1 + Int(random.next() % 3))).map { _ in pick(tags) })).sorted()
                let title = "w\(counter)"
                return Step(
                    arguments: ["reminder", "add", title, "--notes", notes, "--priority", priority, "--due", date.argument]
                        + chosen.flatMap { ["--tag", $0] },
                    id: nil, before: nil, after: Expected(title: title, notes: notes, priority: priority, due: date.printed, tags: chosen))
            case 1:
                let id = pick(known)
                let before = model[id]!
                var after = before
                after.title = "w\(counter) (edited)"
                after.notes = text(1 + Int(random.next() % 20_000))
                after.priority = priority
                return Step(
                    arguments: ["reminder", "edit", id, "--title", after.title, "--notes", after.notes, "--priority", priority],
                    id: id, before: before, after: after)
            default:
                let id = pick(known)
                let before = model[id]!
                let add = pick(tags)
                let remove = pick(before.tags)
                var after = before
                after.tags = Array(Set(before.tags).subtracting([remove]).union([add])).sorted()
                return Step(arguments: ["reminder", "tag", id, "--add", add, "--remove", remove], id: id, before: before, after: after)
            }
        }

        /// Every reminder by id, from `reminder list --all --json`.
        func current() throws -> [String: Expected] {
            var result: [String: Expected] = [:]
            for object in try a.reminders(all: true) { result[object.string("id") ?? "?"] = Expected(object) }
            return result
        }

        // Three uninterrupted commands tell how long one takes and how large its write-ahead log grows.
        let wal = { sizeOfFile(a.path + "-wal") }
        var durations: [TimeInterval] = []
        var greatest = 0
        for _ in 0..<3 {
            let step = nextStep()
            let (result, seconds, walSize) = try sandbox.runSampling(step.arguments + ["--store", a.path], measure: wal)
            try #require(result.succeeded, "\(result)")
            model[result.out] = step.after
            durations.append(seconds)
            greatest = max(greatest, walSize)
        }
        let typical = durations.sorted()[1]

        for kill in 0..<Self.writeKills {
            let step = nextStep()
            let point = Self.killPoint(&random, kill, typical: typical, measure: wal, greatest: greatest)
            let result = try sandbox.runKilled(step.arguments + ["--store", a.path], at: point)
            tally.sent += 1
            let context = "kill \(kill + 1) of \(Self.writeKills) (seed \(Self.seed)) \(point) of \(step.arguments.prefix(2).joined(separator: " "))"
            try a.expectSound(context)
            var state = try current()

            Self.log("\(context): \(result.wasKilled ? "killed" : "had exited \(result.status)")")
            if result.succeeded {
                // It finished before the kill: its change must be there.
                model[step.id ?? result.out] = step.after
            } else {
                #expect(result.wasKilled, "\(context): \(result)")
                tally.hit += 1
                if let id = step.id {
                    // An edit or a tag change: all of it or none of it.
                    let found = state[id]
                    #expect(found == step.before || found == step.after, "\(context): half-applied: \(String(describing: found)), expected \(step.before!) or \(step.after)")
                    if found == step.after { tally.committed += 1 }
                    if found == step.before {
                        // Redo the interrupted change.
                        let redo = try sandbox.run(step.arguments + ["--store", a.path])
                        #expect(redo.succeeded, "\(context): redo: \(redo)")
                    }
                    model[id] = step.after
                } else {
                    // An add: the whole reminder or no reminder.
                    let added = state.filter { !model.keys.contains($0.key) }
                    #expect(added.count <= 1, "\(context): \(added)")
                    if let (id, found) = added.first {
                        #expect(found == step.after, "\(context): half-applied add: \(found), expected \(step.after)")
                        tally.committed += 1
                        model[id] = step.after
                    } else {
                        let redo = try sandbox.run(step.arguments + ["--store", a.path])
                        #expect(redo.succeeded, "\(context): redo: \(redo)")
                        model[redo.out] = step.after
                    }
                }
                state = try current()
            }
            // Every change of a command that exited 0 (and every redone one) is there, and nothing else.
            if state != model {
                Issue.record("\(context): the store differs from the commands that succeeded: \(Set(state.keys).symmetricDifference(model.keys).count) records missing or extra, \(model.filter { state[$0.key] != $0.value }.count) differ")
                model = state
            }
        }

        // Convergence: a second replica takes A's history, changes one record, and both merge both ways.
        let b = try sandbox.makeStore("b.db")
        try b.ok("merge", a.path)
        let someID = try #require(model.keys.sorted().first)
        try b.ok("reminder", "tag", someID, "--add", "from-b")
        try a.ok("reminder", "edit", someID, "--priority", "high")
        try a.ok("merge", b.path)
        try b.ok("merge", a.path)
        let dump = try a.dump()
        #expect(try b.dump() == dump, "the two replicas converge")
        var changed = try #require(model[someID])
        changed.tags = Array(Set(changed.tags).union(["from-b"])).sorted()
        changed.priority = "high"
        model[someID] = changed
        #expect(try current() == model)
        try a.expectSound("after the final merges")
        try b.expectSound("after the final merges")
        print(tally)
        #expect(tally.sent == Self.writeKills)
    }

    // MARK: Merge of a large bundle

    @Test func killsDuringAMergeOfALargeBundle() throws {
        let sandbox = try Self.makeSandbox()
        var random = SplitMix64(seed: Self.seed &+ 1)
        var tally = Tally(name: "merge of a large bundle")
        // The bundle: replica B of the workload. The target: replica A (concurrent creates of
        // some of B's reminders, so the merge meets conflicts), plus a change made through syncctl.
        try LargeStores.makeB(at: sandbox.path("b.db"), records: Self.records, seed: Self.seed)
        try LargeStores.makeA(at: sandbox.path("a0.db"), records: Self.records, seed: Self.seed)
        let b = Store(sandbox: sandbox, path: sandbox.path("b.db"))
        let pristine = Store(sandbox: sandbox, path: sandbox.path("a0.db"))
        _ = try pristine.addReminder("made on A before the merge", "--tag", "local")
        let bundle = sandbox.path("b.cbundle")
        try b.ok("export", bundle)
        let bundleOperations = try b.operationCount()
        let before = try pristine.snapshot()
        let beforeVector = try pristine.status().object("versionVector") as NSDictionary?
        let operationsBefore = try pristine.operationCount()

        // One uninterrupted merge: the reference state, and how long a merge takes.
        let reference = Store(sandbox: sandbox, path: sandbox.path("reference.db"))
        try sandbox.copy(pristine.path, to: reference.path)
        try sandbox.adoptCopy(reference.path)
        let (merged, seconds, greatest) = try sandbox.runSampling(["merge", bundle, "--store", reference.path]) {
            sizeOfFile(reference.path + "-wal")
        }
        try #require(merged.succeeded, "\(merged)")
        let after = try reference.snapshot()
        let operationsAfter = try reference.operationCount()
        #expect(operationsAfter > operationsBefore + bundleOperations * 9 / 10, "most of the bundle is new to A")

        let target = Store(sandbox: sandbox, path: sandbox.path("a.db"))
        for kill in 0..<Self.mergeKills {
            try sandbox.copy(pristine.path, to: target.path)
            try sandbox.adoptCopy(target.path)
            let point = Self.killPoint(&random, kill, typical: seconds, measure: { sizeOfFile(target.path + "-wal") }, greatest: greatest)
            let result = try sandbox.runKilled(["merge", bundle, "--store", target.path], at: point)
            tally.sent += 1
            let context = "merge kill \(kill + 1) of \(Self.mergeKills) (seed \(Self.seed)) \(point) (an uninterrupted merge takes \(String(format: "%.3f", seconds)) s and writes \(greatest) bytes of log)"
            #expect(result.succeeded || result.wasKilled, "\(context): \(result)")
            try target.expectSound(context)
            let operations = try target.operationCount()
            if result.wasKilled {
                tally.hit += 1
                // Whole batches or nothing: never part of a batch.
                let applied = operations - operationsBefore
                let full = operationsAfter - operationsBefore
                #expect(applied == full || applied % Self.mergeBatch == 0, "\(context): \(applied) of \(full) operations applied")
                if applied == full {
                    tally.committed += 1
                } else if applied > 0 {
                    tally.partial += 1
                }
                if applied == 0 {
                    #expect(try target.dump() == before.dump, "\(context): nothing merged, nothing changed")
                    #expect(try target.status().object("versionVector") as NSDictionary? == beforeVector, "\(context)")
                }
                Self.log("\(context): \(applied) of \(full) operations had been applied")
                // Redo the merge.
                let redo = try target.run("merge", bundle)
                #expect(redo.succeeded, "\(context): redo: \(redo)")
            } else {
                #expect(operations == operationsAfter, "\(context)")
            }
            // The store then holds exactly what the uninterrupted merge gave, A's own change included.
            #expect(try target.dump() == after.dump, "\(context): the redone merge converges with the uninterrupted one")
            #expect(try target.operationCount() == operationsAfter, "\(context)")
        }
        // And it converges with B both ways.
        try b.ok("merge", target.path)
        #expect(try b.dump() == target.dump())
        print(tally)
        #expect(tally.sent == Self.mergeKills)
    }

    // MARK: Folder sync

    /// What a killed folder sync was doing.
    enum SyncKind: String {
        /// Importing a large bundle of another replica (then publishing a little).
        case importing = "import"
        /// Publishing a large history of its own to an empty folder.
        case publishing = "publish"
        /// Publishing one more file, then merging its 33 files into one.
        case coalescing = "coalesce"
    }

    @Test func killsDuringFolderSyncs() throws {
        let sandbox = try Self.makeSandbox()
        var random = SplitMix64(seed: Self.seed &+ 2)
        var tally = Tally(name: "sync --folder")
        let folder = sandbox.path("Shared")
        try sandbox.makeDirectory("Shared")
        let pristineFolder = { (kind: SyncKind) in sandbox.path("Shared-\(kind.rawValue)") }

        // Import: B has published its large history to the folder; A has a little of its own.
        try LargeStores.makeB(at: sandbox.path("b0.db"), records: Self.records, seed: Self.seed)
        let b0 = Store(sandbox: sandbox, path: sandbox.path("b0.db"))
        try b0.ok("sync", "--folder", folder)
        try sandbox.copy(folder, to: pristineFolder(.importing))
        let a0 = try sandbox.makeStore("a0.db")
        _ = try a0.addReminder("from a", "--notes", "made before the sync", "--tag", "a")
        _ = try a0.addNote("a's note")
        let bOperations = try b0.operationCount()

        // Publish: P holds a large history of its own and the folder is empty; Q has a little.
        try LargeStores.makeB(at: sandbox.path("p0.db"), records: Self.records, seed: Self.seed &+ 7)
        let p0 = Store(sandbox: sandbox, path: sandbox.path("p0.db"))
        let q0 = try sandbox.makeStore("q0.db")
        _ = try q0.addReminder("from q", "--tag", "q")
        try FileManager.default.removeItem(atPath: folder)
        try sandbox.makeDirectory("Shared")
        try sandbox.copy(folder, to: pristineFolder(.publishing))

        // Coalesce: C has published 32 files, one per change; its next sync publishes a 33rd and
        // merges them all into one (SPEC.md §14). R is a new replica.
        let c0 = try sandbox.makeStore("c0.db")
        for index in 0..<32 {
            _ = try c0.addReminder("c #\(index)")
            try c0.ok("sync", "--folder", folder)
        }
        _ = try c0.addReminder("c #32")
        try sandbox.copy(folder, to: pristineFolder(.coalescing))
        let cID = try c0.replicaID()
        let r0 = try sandbox.makeStore("r0.db")

        let stores: [SyncKind: (store: Store, other: Store, pristine: Store, pristineOther: Store)] = [
            .importing: (Store(sandbox: sandbox, path: sandbox.path("a.db")), Store(sandbox: sandbox, path: sandbox.path("b.db")), a0, b0),
            .publishing: (Store(sandbox: sandbox, path: sandbox.path("p.db")), Store(sandbox: sandbox, path: sandbox.path("q.db")), p0, q0),
            .coalescing: (Store(sandbox: sandbox, path: sandbox.path("c.db")), Store(sandbox: sandbox, path: sandbox.path("r.db")), c0, r0),
        ]
        func reset(_ kind: SyncKind) throws {
            let (store, other, pristine, pristineOther) = stores[kind]!
            try FileManager.default.removeItem(atPath: folder)
            try sandbox.copy(pristineFolder(kind), to: folder)
            try sandbox.copy(pristine.path, to: store.path)
            try sandbox.copy(pristineOther.path, to: other.path)
            try sandbox.adoptCopy(store.path)
            try sandbox.adoptCopy(other.path)
        }
        /// C's bundle files in the folder (not temporary ones).
        func ownFiles() -> [String] {
            ((try? bundleNames(in: folder)) ?? []).filter { $0.hasPrefix(cID) }
        }

        // How long each kind of sync takes uninterrupted, and how far the file it writes grows:
        // the store's log when importing, the bundle file when publishing.
        var measures: [SyncKind: () -> Int] = [:]
        var typical: [SyncKind: (seconds: TimeInterval, greatest: Int)] = [:]
        for kind in [SyncKind.importing, .publishing, .coalescing] {
            let store = stores[kind]!.store
            measures[kind] = kind == .importing ? { sizeOfFile(store.path + "-wal") } : { largestFile(in: folder + "/concord-v1") }
            try reset(kind)
            let (result, seconds, greatest) = try sandbox.runSampling(["sync", "--folder", folder, "--store", store.path], measure: measures[kind]!)
            try #require(result.succeeded && result.stderr.isEmpty, "\(result)")
            switch kind {
            case .importing: try #require(result.out.hasPrefix("imported \(bOperations) operations from 1 file; published "), "\(result)")
            case .publishing: try #require(result.out.hasPrefix("published "), "\(result)")
            case .coalescing: try #require(result.out.hasSuffix("; merged 33 of this replica's files into one"), "\(result)")
            }
            typical[kind] = (seconds, greatest)
            Self.log("an uninterrupted \(kind.rawValue) takes \(String(format: "%.3f", seconds)) s and writes \(greatest) bytes")
        }

        for kill in 0..<Self.syncKills {
            let kind = [SyncKind.importing, .publishing, .coalescing][kill % 3]
            let (store, other, _, _) = stores[kind]!
            try reset(kind)
            let point = Self.killPoint(&random, kill / 3, typical: typical[kind]!.seconds, measure: measures[kind]!, greatest: typical[kind]!.greatest)
            let context = "sync kill \(kill + 1) of \(Self.syncKills) (seed \(Self.seed), \(kind.rawValue)) \(point)"
            let operationsBefore = try store.operationCount()
            let result = try sandbox.runKilled(["sync", "--folder", folder, "--store", store.path], at: point)
            tally.sent += 1
            #expect(result.succeeded || result.wasKilled, "\(context): \(result)")
            try store.expectSound(context)
            if result.wasKilled {
                tally.hit += 1
                let applied = try store.operationCount() - operationsBefore
                switch kind {
                case .importing:
                    // Whole batches, never part of one.
                    #expect(applied == bOperations || applied % Self.mergeBatch == 0, "\(context): \(applied) of \(bOperations) operations imported")
                    if applied == bOperations { tally.committed += 1 } else if applied > 0 { tally.partial += 1 }
                    Self.log("\(context): \(applied) of \(bOperations) operations had been imported")
                case .publishing:
                    #expect(applied == 0, "\(context): a publish changes no operation")
                    let published = (try? bundleNames(in: folder)) ?? []
                    if !published.isEmpty { tally.committed += 1 }
                    Self.log("\(context): \(published.count) file published")
                case .coalescing:
                    #expect(applied == 0, "\(context): coalescing changes no operation")
                    let files = ownFiles().count
                    if files < 33 { tally.committed += 1 } else if files == 34 { tally.partial += 1 }
                    Self.log("\(context): \(files) of C's files in the folder")
                }
            }
            // Redo: the sync finishes with no warning (no half-written file under a bundle's
            // name), the other side syncs, and both hold the same.
            let redo = try store.run("sync", "--folder", folder)
            #expect(redo.succeeded && redo.stderr.isEmpty, "\(context): redo: \(redo)")
            let fromOther = try other.run("sync", "--folder", folder)
            #expect(fromOther.succeeded && fromOther.stderr.isEmpty, "\(context): \(fromOther)")
            let last = try store.run("sync", "--folder", folder)
            #expect(last.succeeded && last.stderr.isEmpty, "\(context): \(last)")
            #expect(try store.dump() == other.dump(), "\(context): both sides converge")
            if kind != .importing { try other.expectSound(context) }
            // The folder does not grow: 32 of C's files at most. A file is recorded as C's own
            // before it is linked into place, so no kill leaves one that C does not coalesce
            // (SPEC.md §14, "Serials"; before, a kill between the link and the record left a 33rd,
            // seen in CI at 0.041 s).
            if kind == .coalescing { #expect(ownFiles().count <= 32, "\(context): \(ownFiles())") }
        }
        print(tally)
        #expect(tally.sent == Self.syncKills)
    }
}
