import ArgumentParser
import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordStore
import ConcordWorkload
import Foundation

/// `syncctl bench live`: how soon a commit made in one process is seen by a program that follows
/// a store in another (`syncctl changes --follow`): on the same store, through a shared folder
/// watched on both sides, and through `serve` and a live peer client.
struct LiveBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "live",
        abstract: "Latency from a commit in one process to a follower of a store in another.",
        discussion: """
            This process commits single reminders to store A at a steady rate, noting the time each \
            commit returned. A follower process (`syncctl changes --follow --json`) prints each \
            change as it sees it; this process notes when each line arrives (one clock for both). \
            `observe`: the follower follows A itself. `folder`: `sync --folder --watch` runs on A \
            and on B (default interval), and the follower follows B. `peer`: `serve` runs on A and \
            `sync --peer --live` on B, and the follower follows B. Prints p50, p99 and max over \
            every change, and how many never arrived (none, or the run fails).
            """)
    @Option(help: "Single-reminder commits per path measured.") var changes = 1000
    @Option(help: "Commits a second.") var rate = 100
    @Option(help: "The paths to measure: observe, folder, peer.") var via: [Path] = [.observe, .folder, .peer]
    @Flag(help: "Print one JSON object.") var json = false

    enum Path: String, ExpressibleByArgument, CaseIterable {
        case observe, folder, peer

        /// What it measures, for the report.
        var what: String {
            switch self {
            case .observe: "a follower process on the same store"
            case .folder: "sync --folder --watch on both sides, a follower of the other store"
            case .peer: "serve and sync --peer --live over loopback, a follower of the client's store"
            }
        }
    }

    func validate() throws {
        guard (10...100_000).contains(changes) else { throw ValidationError("--changes must be from 10 to 100000") }
        guard (1...10_000).contains(rate) else { throw ValidationError("--rate must be from 1 to 10000") }
    }

    func run() async throws {
        var results: [(Path, Latencies)] = []
        for path in via {
            let latencies = try await withBenchDirectory { directory in try await measure(path, in: directory) }
            results.append((path, latencies))
        }
        ProgressLine.shared.clear()
        if json {
            say(JSON.object([("benchmark", .string("live")), ("changes", .int(Int64(changes))), ("rate", .int(Int64(rate)))]
                + results.map { path, latencies in (path.rawValue, latencies.json) }).canonical)
        } else {
            say("live        \(changes) single-reminder commits at \(rate)/s per path")
            for (path, latencies) in results {
                say("\(path.rawValue.padding(toLength: 12, withPad: " ", startingAt: 0))\(latencies.line) (\(path.what))")
            }
        }
    }

    private func measure(_ path: Path, in directory: String) async throws -> Latencies {
        let a = try await ConcordStore.create(at: directory + "/a.db", name: "a")
        var followed = a.path
        var helpers: [Process] = []
        defer {
            for helper in helpers where helper.isRunning { helper.terminate() }
            for helper in helpers { helper.waitUntilExit() }
        }
        if path == .folder {
            let b = try await ConcordStore.create(at: directory + "/b.db", name: "b")
            try await b.close()
            followed = b.path
            let folder = directory + "/shared"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            helpers.append(try BenchProcess.spawn(["sync", "--folder", folder, "--watch", "--store", a.path], output: nil))
            helpers.append(try BenchProcess.spawn(["sync", "--folder", folder, "--watch", "--store", followed], output: nil))
        }
        if path == .peer {
            let key = SyncKey.generate()
            try a.setSyncKey(key)
            let b = try await ConcordStore.create(at: directory + "/b.db", name: "b")
            try b.setSyncKey(key)
            try await b.close()
            followed = b.path
            let address = "127.0.0.1:\(try BenchProcess.freePort())"
            helpers.append(try BenchProcess.spawn(["serve", "--listen", address, "--store", a.path], output: nil))
            // The client connects again until the server listens; the warm-up below waits for it.
            helpers.append(try BenchProcess.spawn(["sync", "--peer", address, "--live", "--store", followed], output: nil))
        }
        return try await LiveLatency.measure(committingTo: a, following: followed, changes: changes, rate: rate, label: path.rawValue)
    }
}

/// The timed part of `bench live` and `bench relay`: commits to one store, followed in another.
enum LiveLatency {
    /// Commits `changes` single reminders to `a` at `rate` a second, while a follower process
    /// (`syncctl changes --follow --json`) follows the store at `followed`, and returns how long
    /// each commit took to reach it. Whatever carries changes from `a` to `followed` runs already.
    static func measure(committingTo a: ConcordStore, following followed: String, changes: Int, rate: Int, label: String) async throws -> Latencies {
        let arrivals = Arrivals()
        // From the store as it is now: nothing committed while the follower starts is missed.
        let now = followed == a.path ? try await a.versionVector() : VersionVector()
        let follower = try BenchProcess.spawn(["changes", "--follow", "--json", "--since", now.json.canonical, "--store", followed], output: arrivals)
        defer {
            follower.terminate()
            follower.waitUntilExit()
        }

        // Warm up: the follower and what carries the changes are running once a first change arrives.
        progressNote("\(label): starting")
        let first = try commit("warm-up", to: a)
        guard await arrivals.wait(for: [first], seconds: 30) else { throw ConcordError(.io, "the follower saw no change within 30 s (\(label))") }

        var committed: [RecordRef: UInt64] = [:]
        let start = ContinuousClock.now
        let spacing = Duration.seconds(1) / rate
        for index in 0..<changes {
            // Each commit at its time.
            try await Task.sleep(until: start + spacing * index, clock: .continuous)
            let ref = try commit("change \(index)", to: a)
            committed[ref] = DispatchTime.now().uptimeNanoseconds
            if index % 100 == 0 { progressNote("\(label): \(index) of \(changes) commits") }
        }
        _ = await arrivals.wait(for: Set(committed.keys), seconds: 30)
        let seen = arrivals.times
        let missed = committed.keys.filter { seen[$0] == nil }.count
        guard missed == 0 else { throw ConcordError(.io, "\(missed) of \(changes) changes never reached the follower (\(label))") }
        // From when the commit returned: a follower can see it before that, while the call that
        // made it finishes, and has then seen it at once (0), not before it was made.
        let milliseconds = committed.map { ref, time in Double(max(0, Int64(seen[ref]!) - Int64(time))) / 1_000_000 }
        return Latencies(milliseconds)
    }

    /// One reminder added to `store`, in the call that apps make on their own thread: the time
    /// from its return is what is measured, with no hop back to a task.
    private static func commit(_ title: String, to store: ConcordStore) throws -> RecordRef {
        .reminder(try store.addReminder(ReminderDraft(title: title)))
    }
}

/// When each record first reached the follower.
final class Arrivals: Sendable {
    private struct State {
        var times: [RecordRef: UInt64] = [:]
        /// Rung at each line that brings a record, while a `wait` listens.
        var ring: AsyncStream<Void>.Continuation?
    }

    private let state = LockedState(State())

    func add(line: Data, at time: UInt64) {
        guard let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any],
              let records = object["records"] as? [String]
        else { return }
        let ring = state.withLock { state in
            for text in records {
                let parts = text.split(separator: ":")
                guard parts.count == 2, let id = RecordID(hex: parts[1]) else { continue }
                let ref = parts[0] == "note" ? RecordRef.note(id) : RecordRef.reminder(id)
                if state.times[ref] == nil { state.times[ref] = time }
            }
            return state.ring
        }
        ring?.yield()
    }

    var times: [RecordRef: UInt64] { state.withLock { $0.times } }

    /// Waits until every one of `records` arrived, or `seconds` passed; whether they all did.
    /// One waiter at a time.
    func wait(for records: Set<RecordRef>, seconds: Double) async -> Bool {
        // Listening before looking: an arrival after the look rings (rings not yet heard count as one).
        let (rings, ring) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        state.withLock { $0.ring = ring }
        defer { state.withLock { $0.ring = nil } }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                guard !records.isSubset(of: times.keys) else { return }
                for await _ in rings where records.isSubset(of: times.keys) { return }
            }
            group.addTask { try? await Task.sleep(for: .milliseconds(Int(seconds * 1000))) }
            await group.next()
            group.cancelAll()
        }
        return records.isSubset(of: times.keys)
    }
}

/// Latencies in milliseconds, summarized.
struct Latencies {
    let sorted: [Double]

    init(_ values: [Double]) { sorted = values.sorted() }

    /// The value at or below which a fraction `p` of them lie (nearest rank).
    func percentile(_ p: Double) -> Double {
        sorted[max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1)]
    }

    var line: String {
        "p50 \(formatted(percentile(0.5), 1)) ms, p99 \(formatted(percentile(0.99), 1)) ms, max \(formatted(sorted.last!, 1)) ms"
    }

    var json: JSON { .object(fields) }

    /// The percentiles, the greatest and the count, as members of a JSON object.
    var fields: [(String, JSON)] {
        [
            ("p50Milliseconds", .decimal(percentile(0.5), fractionDigits: 1)),
            ("p99Milliseconds", .decimal(percentile(0.99), fractionDigits: 1)),
            ("maxMilliseconds", .decimal(sorted.last!, fractionDigits: 1)),
            ("changes", .int(Int64(sorted.count))),
        ]
    }
}
