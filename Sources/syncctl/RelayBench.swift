import ArgumentParser
import AsyncHTTPClient
import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordRelay
import ConcordRelayClient
import ConcordRelayProtocol
import ConcordStore
import ConcordWorkload
import Foundation

/// `syncctl bench relay`: the relay measured through relay nodes (`syncctl relay` processes) that
/// it starts on loopback, on an embedded database or on a PostgreSQL database the user names.
struct RelayBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract: "Live latency, a first sync and load through relay nodes started here.",
        discussion: """
            Starts relay nodes on 127.0.0.1: one on an embedded database in a temporary directory, \
            or, with --postgres, nodes on that database (two where a part can use two). \
            `latency`: devices A and B run `sync --relay --live`, on different nodes where two run; \
            this process commits single reminders to A, and a follower of B notes when each \
            arrives (as `bench live`). `first-sync`: replica B of the merge workload (U=1) syncs \
            to the relay; then, --runs times, a new device syncs it down (`sync --relay`, one \
            process), and `merge` takes the same sealed files into another new store: medians, \
            and their ratio. `load`: --spaces spaces of 2 and 3 devices in turn, each device \
            holding a listing that waits for a change, as a live device does, spread over the \
            nodes; one small sealed bundle is uploaded at each rate in turn, each to a drawn \
            device, and every other device of its space downloads it. For each rate: uploads \
            acknowledged a second, the latency from an upload's start to each download's end, \
            and the CPU that the nodes, PostgreSQL's processes and this process took; and each \
            node's memory once every device waits. A rate whose uploads fall behind ends the \
            load. With --postgres the load runs with one node, then with two. Every space made \
            is deleted afterwards.
            """)
    @Option(help: "The parts to run: latency, first-sync, load.") var part: [Part] = Part.allCases
    @Option(help: ArgumentHelp("A PostgreSQL database for the nodes, instead of an embedded one.", valueName: "postgres://user@host:port/database"))
    var postgres: String?
    @Option(help: "latency: single-reminder commits.") var changes = 1000
    @Option(help: "latency: commits a second.") var rate = 100
    @Option(help: "first-sync: the reminders of replica B (127000 make about 1M operations).") var records = 127_000
    @Option(help: "first-sync: timed runs; the medians are reported.") var runs = 3
    @Option(help: "load: spaces.") var spaces = 1000
    @Option(parsing: .upToNextOption, help: "load: uploads a second, over all spaces, run in turn.") var rates: [Int] = [100, 200, 400, 800, 1600]
    @Option(help: "load: seconds at each rate.") var seconds = 10
    @Option(help: "load: the seed of the draws of spaces and devices.") var seed: UInt64 = 1
    @Flag(help: "Print one JSON object.") var json = false

    enum Part: String, ExpressibleByArgument, CaseIterable {
        case latency
        case firstSync = "first-sync"
        case load
    }

    func validate() throws {
        guard (10...100_000).contains(changes) else { throw ValidationError("--changes must be from 10 to 100000") }
        guard (1...10_000).contains(rate) else { throw ValidationError("--rate must be from 1 to 10000") }
        guard (10...10_000_000).contains(records) else { throw ValidationError("--records must be from 10 to 10000000") }
        guard (1...100).contains(runs) else { throw ValidationError("--runs must be from 1 to 100") }
        guard (1...10_000).contains(spaces) else { throw ValidationError("--spaces must be from 1 to 10000") }
        guard !rates.isEmpty, rates.allSatisfy({ (1...100_000).contains($0) }) else { throw ValidationError("--rates must each be from 1 to 100000") }
        guard (1...3600).contains(seconds) else { throw ValidationError("--seconds must be from 1 to 3600") }
        if let postgres {
            do throws(ConcordError) {
                _ = try PostgresRelayStorage.redacted(postgres)
            } catch {
                throw ValidationError(error.message)
            }
        }
    }

    private var backEnd: String { postgres == nil ? "an embedded database" : "PostgreSQL" }

    func run() async throws {
        var fields: [(String, JSON)] = [("benchmark", .string("relay")), ("backEnd", .string(postgres == nil ? "embedded" : "postgres"))]
        var lines: [String] = []
        if part.contains(.latency) {
            let nodes = postgres == nil ? 1 : 2
            let latencies = try await withBenchDirectory { directory in try await measureLatency(nodes: nodes, in: directory) }
            fields.append(("latency", .object([("nodes", .int(Int64(nodes))), ("rate", .int(Int64(rate)))] + latencies.fields)))
            lines.append("latency     \(latencies.line) (\(changes) commits at \(rate)/s to device A, seen by a follower of device B; \(nodes == 1 ? "one node" : "A and B on two nodes") on \(backEnd))")
        }
        if part.contains(.firstSync) {
            let result = try await withBenchDirectory { directory in try await measureFirstSync(in: directory) }
            fields.append(("firstSync", result.json))
            lines.append(result.line)
        }
        if part.contains(.load) {
            var loads: [JSON] = []
            for nodes in postgres == nil ? [1] : [1, 2] {
                let result = try await withBenchDirectory { directory in try await measureLoad(nodes: nodes, in: directory) }
                loads.append(result.json)
                lines += result.lines(backEnd: backEnd)
            }
            fields.append(("load", .array(loads)))
        }
        ProgressLine.shared.clear()
        if json {
            say(JSON.object(fields).canonical)
        } else {
            for line in lines { say(line) }
        }
    }

    // MARK: Latency

    private func measureLatency(nodes count: Int, in directory: String) async throws -> Latencies {
        let key = SyncKey.generate()
        let nodes = try RelayNodes(count: count, postgres: postgres, directory: directory)
        defer { nodes.stop() }
        let a = try await ConcordStore.create(at: directory + "/a.db", name: "a")
        try a.setSyncKey(key)
        let b = try await ConcordStore.create(at: directory + "/b.db", name: "b")
        try b.setSyncKey(key)
        try await b.close()
        var devices: [Process] = []
        defer { BenchProcess.stop(devices) }
        devices.append(try BenchProcess.spawn(["sync", "--relay", nodes.urls[0], "--live", "--store", a.path], output: nil))
        devices.append(try BenchProcess.spawn(["sync", "--relay", nodes.urls[count - 1], "--live", "--store", b.path], output: nil))
        let latencies = try await LiveLatency.measure(committingTo: a, following: b.path, changes: changes, rate: rate, label: "latency")
        BenchProcess.stop(devices)
        _ = try await RelayClient(url: nodes.urls[0], key: key).deleteSpace()
        return latencies
    }

    // MARK: First sync

    private struct FirstSync {
        var operations: Int
        var files: Int
        var bytes: Int
        var uploadSeconds: Double
        var syncSeconds: [Double]
        var mergeSeconds: [Double]

        var ratio: Double { Measure.median(mergeSeconds) / Measure.median(syncSeconds) }

        var json: JSON {
            .object([
                ("operations", .int(Int64(operations))), ("files", .int(Int64(files))), ("bytes", .int(Int64(bytes))),
                ("uploadSeconds", .decimal(uploadSeconds, fractionDigits: 3)),
                ("syncMedianSeconds", .decimal(Measure.median(syncSeconds), fractionDigits: 3)),
                ("mergeMedianSeconds", .decimal(Measure.median(mergeSeconds), fractionDigits: 3)),
                ("mergeOverSync", .decimal(ratio, fractionDigits: 2)),
            ])
        }

        var line: String {
            let runs = syncSeconds.count
            return "first sync  \(operations) operations (\(bytes) bytes in \(files) sealed file\(files == 1 ? "" : "s")) to a new device: "
                + "sync --relay median \(formatted(Measure.median(syncSeconds), 3)) s, merge of the same files median "
                + "\(formatted(Measure.median(mergeSeconds), 3)) s over \(runs) run\(runs == 1 ? "" : "s"); merge/sync = \(formatted(ratio, 2)) "
                + "(the upload by B took \(formatted(uploadSeconds, 3)) s)"
        }
    }

    private func measureFirstSync(in directory: String) async throws -> FirstSync {
        let key = SyncKey.generate()
        let nodes = try RelayNodes(count: 1, postgres: postgres, directory: directory)
        defer { nodes.stop() }
        let url = nodes.urls[0]
        let (b, operations) = try buildReplicaB(ReminderWorkload(records: records, seed: seed), in: directory)
        try b.setSyncKey(key)
        try await b.close()
        progressNote("first sync: B uploads \(operations) operations")
        let uploadSeconds = try BenchProcess.time(["sync", "--relay", url, "--store", b.path])
        let client = try RelayClient(url: url, key: key)
        let mirror = RelaySync.mirror(of: b.path, url: url, space: client.space) + "/concord-v1"
        let files = try FileManager.default.contentsOfDirectory(atPath: mirror).filter { $0.hasSuffix(".cbundle") && !$0.hasPrefix(".") }
            .sorted().map { mirror + "/" + $0 }
        let bytes = try files.reduce(0) { $0 + ((try FileManager.default.attributesOfItem(atPath: $1)[.size] as? Int) ?? 0) }

        var result = FirstSync(operations: operations, files: files.count, bytes: bytes, uploadSeconds: uploadSeconds, syncSeconds: [], mergeSeconds: [])
        for run in 1...runs {
            for (kind, arguments) in [("sync", ["sync", "--relay", url]), ("merge", ["merge"] + files)] {
                progressNote("first sync: run \(run) of \(runs), \(kind)")
                let path = directory + "/\(kind)-\(run).db"
                let store = try await ConcordStore.create(at: path, name: kind)
                try store.setSyncKey(key)
                try await store.close()
                let seconds = try BenchProcess.time(arguments + ["--store", path])
                let received = try await ConcordStore.open(at: path, readOnly: true)
                let count = try await received.status().operations
                try await received.close()
                guard count == operations else { throw ValidationError("\(kind) brought \(count) operations, not \(operations)") }
                if kind == "sync" { result.syncSeconds.append(seconds) } else { result.mergeSeconds.append(seconds) }
                try? FileManager.default.removeItem(atPath: path)
            }
        }
        _ = try await client.deleteSpace()
        return result
    }

    // MARK: Load

    private func measureLoad(nodes count: Int, in directory: String) async throws -> LoadResult {
        let nodes = try RelayNodes(count: count, postgres: postgres, directory: directory)
        defer { nodes.stop() }
        let sealed = try Self.smallSealedBundle(in: directory)
        let spaces = (0..<spaces).map { index in LoadSpace(index: index, devices: 2 + index % 2) }
        let deviceCount = spaces.reduce(0) { $0 + $1.devices }
        var configuration = HTTPClient.Configuration()
        configuration.timeout.connect = .seconds(30)
        // One connection for each device's waiting listing, and as many again for uploads.
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = deviceCount * 2 + 64
        let http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        var random = SplitMix64(seed: seed)
        var made: [[LoadDevice]] = []
        for space in spaces {
            let key = SyncKey.generate()
            made.append(try (0..<space.devices).map { index in
                // A device's files are named by a replica id of its own, as a device's are.
                let replica = (0..<2).map { _ in String(format: "%016llx", random.next()) }.joined()
                let url = nodes.urls[(space.index + index) % count]
                return LoadDevice(client: try RelayClient(url: url, key: key, http: http), replica: replica)
            })
        }

        let devices = made
        var result = LoadResult(nodes: count, spaces: spaces.count, devices: deviceCount)
        result.idleResidentBytes = nodes.residentBytes()
        let tally = LoadTally()
        let followers = Task {
            await withTaskGroup(of: Void.self) { group in
                for (index, device) in devices.joined().enumerated() {
                    // Not all at once: a node accepts a burst of connections a backlog at a time.
                    if index % 100 == 99 { try? await Task.sleep(for: .milliseconds(50)) }
                    group.addTask { await Self.follow(device, tally: tally) }
                }
            }
        }
        do {
            progressNote("load, \(count) node\(count == 1 ? "" : "s"): \(deviceCount) devices connecting")
            let deadline = ContinuousClock.now + .seconds(120)
            while tally.waitingDevices < deviceCount {
                guard ContinuousClock.now < deadline else {
                    throw ValidationError("only \(tally.waitingDevices) of \(deviceCount) devices could list their space within 120 s")
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            // Every device's listing now waits (its next request, sent at once).
            try await Task.sleep(for: .seconds(2))
            result.waitingResidentBytes = nodes.residentBytes()

            var serials = devices.map { $0.map { _ in 0 } }
            for rate in rates {
                progressNote("load, \(count) node\(count == 1 ? "" : "s"): \(rate) uploads a second for \(seconds) s")
                let step = try await Self.upload(
                    rate: rate, seconds: seconds, devices: devices, serials: &serials, bytes: sealed, random: &random, tally: tally, nodes: nodes)
                result.steps.append(step)
                if step.isBehind { break }
            }
        } catch {
            followers.cancel()
            await followers.value
            try? await http.shutdown()
            throw error
        }
        followers.cancel()
        await followers.value
        progressNote("load: deleting \(spaces.count) spaces")
        await withTaskGroup(of: Void.self) { group in
            for space in devices { group.addTask { _ = try? await space[0].client.deleteSpace() } }
        }
        try await http.shutdown()
        return result
    }

    /// Follows a space as a live device does: a listing that waits for a change, asked again as
    /// it ends, and each new file of another device downloaded, until cancelled.
    private static func follow(_ device: LoadDevice, tally: LoadTally) async {
        var cursor: Int64?
        var known = Set<String>()
        while !Task.isCancelled {
            do throws(ConcordError) {
                let listing: RelayListing
                if let cursor {
                    listing = try await device.client.listing(waitingFrom: cursor, wait: .seconds(20))
                } else {
                    listing = try await device.client.listing()
                    tally.deviceWaits()
                }
                cursor = listing.cursor
                for file in listing.files where known.insert(file.name).inserted && !file.name.hasPrefix(device.replica) {
                    if try await device.client.download(file) != nil { tally.arrived(file.name, at: ContinuousClock.now) }
                }
            } catch {
                if Task.isCancelled { return }
                tally.failedListing()
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    /// Uploads at `rate` a second for `seconds`, each upload to a drawn device of a drawn space,
    /// on time whether or not the ones before it were answered; then waits (at most 30 s) for
    /// every other device of each space to download it.
    private static func upload(
        rate: Int, seconds: Int, devices: [[LoadDevice]], serials: inout [[Int]], bytes: [UInt8],
        random: inout SplitMix64, tally: LoadTally, nodes: RelayNodes
    ) async throws -> LoadStep {
        let usage = MachineUsage(nodes: nodes)
        tally.startStep()
        let clock = ContinuousClock()
        let start = clock.now
        let total = rate * seconds
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<total {
                try? await clock.sleep(until: start + .seconds(Double(index) / Double(rate)))
                let space = Int(random.next() % UInt64(devices.count))
                let writer = Int(random.next() % UInt64(devices[space].count))
                serials[space][writer] += 1
                let device = devices[space][writer]
                let name = device.replica + "-" + String(format: "%010d", serials[space][writer]) + ".cbundle"
                group.addTask {
                    tally.uploading(name, receivers: devices[space].count - 1, at: clock.now)
                    do {
                        try await device.client.upload(bytes, as: name)
                        tally.acknowledged(at: clock.now)
                    } catch {
                        tally.failedUpload()
                    }
                }
            }
        }
        let deadline = clock.now + .seconds(30)
        while !tally.allArrived, clock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        return tally.step(rate: rate, seconds: seconds, started: start, usage: usage.since())
    }

    /// The bytes of a small sealed bundle, as a device uploads after one commit: one reminder,
    /// encrypted with a key of its own (the relay cannot read any of them, nor tell them apart).
    private static func smallSealedBundle(in directory: String) throws -> [UInt8] {
        let store = try ConcordStore.create(at: directory + "/small.db", name: "small")
        _ = try store.addReminder(ReminderDraft(title: "Call the dentist", tags: ["errands"]))
        let path = directory + "/small.cbundle"
        _ = try store.exportBundle(to: path, encryptingWith: SyncKey.generate())
        try store.close()
        guard let bytes = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read \(path)") }
        return Array(bytes)
    }
}

private struct LoadSpace {
    let index: Int
    let devices: Int
}

private struct LoadDevice: Sendable {
    let client: RelayClient
    /// The replica id its files are named by.
    let replica: String
}

/// What one load run measured.
private struct LoadResult {
    let nodes: Int
    let spaces: Int
    let devices: Int
    var idleResidentBytes: [Int?] = []
    var waitingResidentBytes: [Int?] = []
    var steps: [LoadStep] = []

    var json: JSON {
        .object([
            ("nodes", .int(Int64(nodes))), ("spaces", .int(Int64(spaces))), ("devices", .int(Int64(devices))),
            ("idleResidentBytes", .array(idleResidentBytes.map { $0.map { .int(Int64($0)) } ?? .null })),
            ("waitingResidentBytes", .array(waitingResidentBytes.map { $0.map { .int(Int64($0)) } ?? .null })),
            ("rates", .array(steps.map(\.json))),
        ])
    }

    func lines(backEnd: String) -> [String] {
        var lines = ["load        \(spaces) spaces, \(devices) devices waiting on \(nodes) node\(nodes == 1 ? "" : "s") on \(backEnd)"]
        for (index, idle) in idleResidentBytes.enumerated() {
            guard let idle, let waiting = waitingResidentBytes[index] else { continue }
            let connections = devices / nodes
            lines.append("  memory    node \(index + 1): \(idle / 1_000_000) MB resident idle, \(waiting / 1_000_000) MB with about \(connections) waiting connections (\(formatted(Double(waiting - idle) / Double(connections) / 1000, 1)) kB each)")
        }
        for step in steps { lines.append("  " + step.line) }
        return lines
    }
}

/// What one rate of a load run measured.
private struct LoadStep {
    var rate: Int
    var uploads: Int
    var acknowledged: Int
    var failedUploads: Int
    var failedListings: Int
    var acknowledgedPerSecond: Double
    var expectedArrivals: Int
    var latencies: Latencies?
    var usage: MachineUsage.Share

    var late: Int { expectedArrivals - (latencies?.sorted.count ?? 0) }

    /// Whether the relay fell behind: uploads refused or late, or fewer than 95% acknowledged
    /// at the rate, or a download not made within 30 s.
    var isBehind: Bool { failedUploads > 0 || acknowledgedPerSecond < 0.95 * Double(rate) || late > 0 }

    var json: JSON {
        var members: [(String, JSON)] = [
            ("rate", .int(Int64(rate))), ("uploads", .int(Int64(uploads))), ("acknowledged", .int(Int64(acknowledged))),
            ("acknowledgedPerSecond", .decimal(acknowledgedPerSecond, fractionDigits: 1)),
            ("failedUploads", .int(Int64(failedUploads))), ("failedListings", .int(Int64(failedListings))),
            ("downloads", .int(Int64(expectedArrivals - late))), ("late", .int(Int64(late))),
        ]
        if let latencies { members += latencies.fields.filter { $0.0 != "changes" } }
        members += usage.json
        return .object(members)
    }

    var line: String {
        var line = "\(rate)/s".padding(toLength: 8, withPad: " ", startingAt: 0)
            + "  \(formatted(acknowledgedPerSecond, 1)) acknowledged/s, "
        line += latencies.map { "upload to download \($0.line)" } ?? "no download"
        if late > 0 { line += ", \(late) of \(expectedArrivals) downloads late (over 30 s)" }
        if failedUploads > 0 { line += ", \(failedUploads) uploads failed" }
        if failedListings > 0 { line += ", \(failedListings) listings failed" }
        return line + "; CPU " + usage.line
    }
}

/// The shared record of a load run: which uploads started when, and when each reached a device.
private final class LoadTally: Sendable {
    private struct State {
        var waitingDevices = 0
        var failedListings = 0
        var started: [String: ContinuousClock.Instant] = [:]
        var uploads = 0
        var acknowledged = 0
        var lastAcknowledged: ContinuousClock.Instant?
        var failedUploads = 0
        var expected = 0
        var milliseconds: [Double] = []
    }

    private let state = LockedState(State())

    var waitingDevices: Int { state.withLock { $0.waitingDevices } }
    var allArrived: Bool { state.withLock { $0.milliseconds.count >= $0.expected } }

    func deviceWaits() { state.withLock { $0.waitingDevices += 1 } }
    func failedListing() { state.withLock { $0.failedListings += 1 } }
    func failedUpload() { state.withLock { $0.failedUploads += 1 } }

    func startStep() {
        state.withLock { state in
            let waiting = state.waitingDevices
            state = State()
            state.waitingDevices = waiting
        }
    }

    func uploading(_ name: String, receivers: Int, at time: ContinuousClock.Instant) {
        state.withLock { state in
            state.started[name] = time
            state.uploads += 1
            state.expected += receivers
        }
    }

    func acknowledged(at time: ContinuousClock.Instant) {
        state.withLock { state in
            state.acknowledged += 1
            state.lastAcknowledged = max(state.lastAcknowledged ?? time, time)
        }
    }

    /// A device downloaded `name`: counted if this step uploaded it.
    func arrived(_ name: String, at time: ContinuousClock.Instant) {
        state.withLock { state in
            guard let started = state.started[name] else { return }
            let elapsed = time - started
            state.milliseconds.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        }
    }

    func step(rate: Int, seconds: Int, started: ContinuousClock.Instant, usage: MachineUsage.Share) -> LoadStep {
        state.withLock { state in
            let span = (state.lastAcknowledged ?? started) - started
            let spanSeconds = max(Double(seconds), Double(span.components.seconds) + Double(span.components.attoseconds) / 1e18)
            return LoadStep(
                rate: rate, uploads: state.uploads, acknowledged: state.acknowledged, failedUploads: state.failedUploads,
                failedListings: state.failedListings, acknowledgedPerSecond: Double(state.acknowledged) / spanSeconds,
                expectedArrivals: state.expected, latencies: state.milliseconds.isEmpty ? nil : Latencies(state.milliseconds),
                usage: usage)
        }
    }
}

/// Relay nodes on 127.0.0.1, `syncctl relay` processes: on one embedded database in the
/// benchmark's directory, or on a PostgreSQL database.
final class RelayNodes: Sendable {
    let processes: [Process]
    let urls: [String]

    init(count: Int, postgres: String?, directory: String) throws {
        var processes: [Process] = []
        var urls: [String] = []
        do {
            for _ in 0..<count {
                let port = try BenchProcess.freePort()
                let storage = postgres.map { ["--postgres", $0] } ?? ["--data", directory + "/relay"]
                // Its log goes to a file, whose last line says why, should it stop before it listens.
                let log = directory + "/relay-node-\(processes.count + 1).log"
                let process = try BenchProcess.spawn(["relay", "--listen", "127.0.0.1:\(port)"] + storage, output: nil, errors: log)
                processes.append(process)
                try BenchProcess.waitUntilListening(on: port, process: process, what: "the relay node", log: log)
                urls.append("http://127.0.0.1:\(port)")
            }
        } catch {
            BenchProcess.stop(processes)
            throw error
        }
        self.processes = processes
        self.urls = urls
    }

    /// Each node's resident memory now (nil where the system does not tell).
    func residentBytes() -> [Int?] { processes.map { ProcessUsage.residentBytes(of: $0.processIdentifier) } }

    func stop() { BenchProcess.stop(processes) }
}

/// The CPU that the nodes, PostgreSQL's processes, this process and the whole machine took
/// from when it was made.
private struct MachineUsage {
    struct Share {
        /// Of one core, each node, in percent; nil where the system does not tell.
        var nodes: [Double?]
        var postgres: Double?
        var generator: Double
        /// Of all the cores, in percent.
        var machine: Double?

        var json: [(String, JSON)] {
            [
                ("nodesCPUPercent", .array(nodes.map { $0.map { .decimal($0, fractionDigits: 0) } ?? .null })),
                ("postgresCPUPercent", postgres.map { .decimal($0, fractionDigits: 0) } ?? .null),
                ("loadGeneratorCPUPercent", .decimal(generator, fractionDigits: 0)),
                ("machineBusyPercent", machine.map { .decimal($0, fractionDigits: 0) } ?? .null),
            ]
        }

        var line: String {
            let percent = { (value: Double?) in value.map { formatted($0) + "%" } ?? "n/a" }
            return "(of one core) node\(nodes.count == 1 ? "" : "s") \(nodes.map(percent).joined(separator: " + ")), "
                + "PostgreSQL \(percent(postgres)), load generator \(percent(generator)); machine \(percent(machine)) busy"
        }
    }

    private let nodes: RelayNodes
    private let start = ContinuousClock.now
    private let nodeSeconds: [Double?]
    private let postgresSeconds: Double?
    private let generatorSeconds: Double
    private let machine: ProcessUsage.MachineTimes?

    init(nodes: RelayNodes) {
        self.nodes = nodes
        nodeSeconds = nodes.processes.map { ProcessUsage.cpuSeconds(of: $0.processIdentifier) }
        postgresSeconds = ProcessUsage.cpuSeconds(ofProcessesNamed: "postgres")
        generatorSeconds = ProcessUsage.ownCPUSeconds()
        machine = ProcessUsage.machineTimes()
    }

    func since() -> Share {
        let elapsed = ContinuousClock.now - start
        let wall = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let share = { (before: Double?, after: Double?) -> Double? in
            guard let before, let after else { return nil }
            return (after - before) / wall * 100
        }
        var busy: Double?
        if let machine, let now = ProcessUsage.machineTimes(), now.total > machine.total {
            busy = (now.busy - machine.busy) / (now.total - machine.total) * 100
        }
        return Share(
            nodes: zip(nodeSeconds, nodes.processes).map { share($0, ProcessUsage.cpuSeconds(of: $1.processIdentifier)) },
            postgres: share(postgresSeconds, ProcessUsage.cpuSeconds(ofProcessesNamed: "postgres")),
            generator: share(generatorSeconds, ProcessUsage.ownCPUSeconds()) ?? 0,
            machine: busy)
    }
}
