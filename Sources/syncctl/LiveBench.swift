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
struct LiveBench: ParsableCommand {
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

    func run() throws {
        var results: [(Path, Latencies)] = []
        for path in via {
            let latencies = try withBenchDirectory { directory in try measure(path, in: directory) }
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

    private func measure(_ path: Path, in directory: String) throws -> Latencies {
        let a = try ConcordStore.create(at: directory + "/a.db", name: "a")
        var followed = a.path
        var helpers: [Process] = []
        defer {
            for helper in helpers where helper.isRunning { helper.terminate() }
            for helper in helpers { helper.waitUntilExit() }
        }
        if path == .folder {
            let b = try ConcordStore.create(at: directory + "/b.db", name: "b")
            try b.close()
            followed = b.path
            let folder = directory + "/shared"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            helpers.append(try Self.spawn(["sync", "--folder", folder, "--watch", "--store", a.path], output: nil))
            helpers.append(try Self.spawn(["sync", "--folder", folder, "--watch", "--store", followed], output: nil))
        }
        if path == .peer {
            let key = SyncKey.generate()
            try a.setSyncKey(key)
            let b = try ConcordStore.create(at: directory + "/b.db", name: "b")
            try b.setSyncKey(key)
            try b.close()
            followed = b.path
            let address = "127.0.0.1:\(try Self.freePort())"
            helpers.append(try Self.spawn(["serve", "--listen", address, "--store", a.path], output: nil))
            // The client connects again until the server listens; the warm-up below waits for it.
            helpers.append(try Self.spawn(["sync", "--peer", address, "--live", "--store", followed], output: nil))
        }
        let arrivals = Arrivals()
        // From the store as it is now: nothing committed while the follower starts is missed.
        let now = followed == a.path ? try a.versionVector() : VersionVector()
        let follower = try Self.spawn(["changes", "--follow", "--json", "--since", now.json.canonical, "--store", followed], output: arrivals)
        helpers.append(follower)

        // Warm up: the follower and the watchers are running once a first change arrives.
        progressNote("\(path.rawValue): starting")
        let first = RecordRef.reminder(try a.addReminder(ReminderDraft(title: "warm-up")))
        guard arrivals.wait(for: [first], seconds: 30) else { throw ConcordError(.io, "the follower saw no change within 30 s") }

        var committed: [RecordRef: UInt64] = [:]
        let start = DispatchTime.now().uptimeNanoseconds
        let spacing = UInt64(1_000_000_000 / rate)
        // Each commit at its time: a wait for a signal that never comes, until that time.
        let pacing = DispatchSemaphore(value: 0)
        for index in 0..<changes {
            _ = pacing.wait(timeout: DispatchTime(uptimeNanoseconds: start + UInt64(index) * spacing))
            let ref = RecordRef.reminder(try a.addReminder(ReminderDraft(title: "change \(index)")))
            committed[ref] = DispatchTime.now().uptimeNanoseconds
            if index % 100 == 0 { progressNote("\(path.rawValue): \(index) of \(changes) commits") }
        }
        _ = arrivals.wait(for: Set(committed.keys), seconds: 30)
        follower.terminate()
        follower.waitUntilExit()
        let seen = arrivals.times
        let missed = committed.keys.filter { seen[$0] == nil }.count
        guard missed == 0 else { throw ConcordError(.io, "\(missed) of \(changes) changes never reached the follower (\(path.rawValue))") }
        // From when the commit returned: a follower can see it before that, while the call that
        // made it finishes, and has then seen it at once (0), not before it was made.
        let milliseconds = committed.map { ref, time in Double(max(0, Int64(seen[ref]!) - Int64(time))) / 1_000_000 }
        return Latencies(milliseconds)
    }

    /// A TCP port on 127.0.0.1 that nothing listens on now (the system picks it).
    private static func freePort() throws -> Int {
        #if canImport(Glibc)
        let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let socket = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard socket >= 0 else { throw ConcordError(.io, "cannot open a socket to find a free port") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw ConcordError(.io, "cannot find a free port on 127.0.0.1") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs this executable with `arguments`; its standard output goes to `output` line by line
    /// (or nowhere), its standard error nowhere.
    private static func spawn(_ arguments: [String], output: Arrivals?) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Bundle.main.executablePath ?? "/proc/self/exe")
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        if let output {
            let pipe = Pipe()
            process.standardOutput = pipe
            let reading = pipe.fileHandleForReading
            Thread.detachNewThread {
                var pending = Data()
                while true {
                    let chunk = reading.availableData
                    if chunk.isEmpty { return }
                    pending.append(chunk)
                    while let newline = pending.firstIndex(of: 10) {
                        output.add(line: pending[pending.startIndex..<newline], at: DispatchTime.now().uptimeNanoseconds)
                        pending.removeSubrange(pending.startIndex...newline)
                    }
                }
            }
        } else {
            process.standardOutput = FileHandle.nullDevice
        }
        try process.run()
        return process
    }
}

/// When each record first reached the follower.
private final class Arrivals: Sendable {
    private let state = LockedState<[RecordRef: UInt64]>([:])
    /// Signalled at each line that brings a record.
    private let arrived = DispatchSemaphore(value: 0)

    func add(line: Data, at time: UInt64) {
        guard let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any],
              let records = object["records"] as? [String]
        else { return }
        state.withLock { times in
            for text in records {
                let parts = text.split(separator: ":")
                guard parts.count == 2, let id = RecordID(hex: parts[1]) else { continue }
                let ref = parts[0] == "note" ? RecordRef.note(id) : RecordRef.reminder(id)
                if times[ref] == nil { times[ref] = time }
            }
        }
        arrived.signal()
    }

    var times: [RecordRef: UInt64] { state.withLock { $0 } }

    /// Waits until every one of `records` arrived, or `seconds` passed; whether they all did.
    func wait(for records: Set<RecordRef>, seconds: Double) -> Bool {
        let deadline = DispatchTime.now() + .milliseconds(Int(seconds * 1000))
        while !records.isSubset(of: times.keys) {
            guard arrived.wait(timeout: deadline) == .success else { return records.isSubset(of: times.keys) }
        }
        return true
    }
}

/// Latencies in milliseconds, summarized.
private struct Latencies {
    let sorted: [Double]

    init(_ values: [Double]) { sorted = values.sorted() }

    /// The value at or below which a fraction `p` of them lie (nearest rank).
    func percentile(_ p: Double) -> Double {
        sorted[max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1)]
    }

    var line: String {
        "p50 \(formatted(percentile(0.5), 1)) ms, p99 \(formatted(percentile(0.99), 1)) ms, max \(formatted(sorted.last!, 1)) ms"
    }

    var json: JSON {
        .object([
            ("p50Milliseconds", .decimal(percentile(0.5), fractionDigits: 1)),
            ("p99Milliseconds", .decimal(percentile(0.99), fractionDigits: 1)),
            ("maxMilliseconds", .decimal(sorted.last!, fractionDigits: 1)),
            ("changes", .int(Int64(sorted.count))),
        ])
    }
}
