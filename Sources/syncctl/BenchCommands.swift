import ArgumentParser
import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordNet
import ConcordStore
import ConcordWorkload
import Foundation

struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure merge throughput, local writes, export, folder sync, peer sync, live latency, the relay, history reads and import.",
        discussion: "Each benchmark builds its seeded workload in a temporary directory (not timed) and prints medians.",
        subcommands: [
            MergeBench.self, MergeRun.self, WritesBench.self, CallsBench.self, ExportBench.self, FolderSyncBench.self, PeerBench.self, LiveBench.self,
            RelayBench.self, HistoryBench.self, ImportBench.self, ImportRun.self, CompactBench.self,
        ])
}

struct WorkloadOptions: ParsableArguments {
    @Option(help: "Reminders replica B creates (N).") var records = 100_000
    @Option(help: "Field updates per reminder (U).") var updatesPerRecord = 1
    @Option(help: "Multiplies the length of titles and notes (S).") var textScale = 1
    @Option(help: "The workload's seed.") var seed: UInt64 = 1
    @Option(help: "Timed runs; the median is reported.") var runs = 5
    @Flag(help: "Print one JSON object.") var json = false
    @Flag(name: .customLong("random-ids"), help: "Give the reminders uniformly random ids instead of the time-ordered ones Concord makes.")
    var randomIDs = false

    func validate() throws {
        guard records >= 10, records <= 50_000_000 else { throw ValidationError("--records must be from 10 to 50000000") }
        guard (0...100).contains(updatesPerRecord) else { throw ValidationError("--updates-per-record must be from 0 to 100") }
        guard (1...100).contains(textScale) else { throw ValidationError("--text-scale must be from 1 to 100") }
        guard (1...100).contains(runs) else { throw ValidationError("--runs must be from 1 to 100") }
    }

    var workload: ReminderWorkload {
        ReminderWorkload(records: records, updatesPerRecord: updatesPerRecord, textScale: textScale, seed: seed, randomIDs: randomIDs)
    }

    var description: String {
        "reminders N=\(records) U=\(updatesPerRecord) S=\(textScale) seed=\(seed)\(randomIDs ? " random-ids" : "")"
    }
}

/// A temporary directory for one benchmark, removed afterwards.
func withBenchDirectory<T>(_ body: (String) throws -> T) throws -> T {
    let directory = try makeBenchDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    return try body(directory)
}

/// A temporary directory for one benchmark, removed afterwards: the async form.
func withBenchDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
    let directory = try makeBenchDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    return try await body(directory)
}

private func makeBenchDirectory() throws -> String {
    var template = Array((NSTemporaryDirectory() + "concord-bench-XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else { throw ValidationError("cannot create a temporary directory") }
    return String(cString: made)
}

/// Replica B of the workload, built in `directory` (not timed), and how many operations it holds.
func buildReplicaB(_ workload: ReminderWorkload, in directory: String) throws -> (ConcordStore, Int) {
    progressNote("building replica B")
    let b = try ConcordStore.create(at: directory + "/b.db", environment: workload.environmentB)
    try workload.buildB(into: b)
    return (b, try b.status().operations)
}

func formatted(_ value: Double, _ digits: Int = 0) -> String {
    String(format: "%.\(digits)f", value)
}

func progressNote(_ text: String) {
    ProgressLine.shared.show(text)
}

struct MergeBench: OneShotCommand {
    static let configuration = CommandConfiguration(
        commandName: "merge",
        abstract: "Merge replica B's operations into A from a bundle file, through a durable commit.",
        discussion: """
            Builds the workload (B's history, A's concurrent creates), exports B as a bundle, merges it \
            into fresh copies of A --runs times, checks that A then holds what B and A together hold, \
            and prints the operations, the median merge time, operations per second, the bundle's size, \
            and the peak resident memory during the merges; then the time to read one record's history \
            in the merged A, for 200 of its records. Each merge runs in a process of its own, \
            as 'syncctl merge' would, so that its memory is its own and not what building the \
            workload left. With --busy-cores N, N threads of this process spin while the merges \
            run, as other programs on a user's machine would.
            """)
    @OptionGroup var options: WorkloadOptions
    @Option(help: ArgumentHelp(
        "Also leave B's bundle (b.cbundle) and A before the merge (a.db) in this directory, to profile 'syncctl merge b.cbundle --store COPY-OF-a.db' (a.db records no location, so its copies are not refused as copies).",
        valueName: "directory"))
    var keep: String?
    @Option(name: .customLong("busy-cores"), help: ArgumentHelp(
        "Keep this many cores busy while the merges run, each with a thread of this process that spins, as other programs on a machine do.",
        valueName: "n"))
    var busyCores = 0

    func validate() throws {
        guard (0...64).contains(busyCores) else { throw ValidationError("--busy-cores must be from 0 to 64") }
    }

    func work() throws {
        let workload = options.workload
        try withBenchDirectory { directory in
            let (b, operations) = try buildReplicaB(workload, in: directory)
            progressNote("exporting B")
            let bundle = directory + "/b.cbundle"
            let summary = try b.exportBundle(to: bundle)
            progressNote("building replica A")
            let template = directory + "/a-template.db"
            let a = try ConcordStore.create(at: template, environment: workload.environmentA)
            try workload.buildA(into: a)
            let aOperations = try a.status().operations
            try a.close()
            if let keep {
                try FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
                for (from, to) in [(bundle, "b.cbundle"), (template, "a.db")] {
                    let target = (keep as NSString).appendingPathComponent(to)
                    try? FileManager.default.removeItem(atPath: target)
                    try FileManager.default.copyItem(atPath: from, toPath: target)
                }
                // Handed out to be copied: no copy of it should be refused as one (SPEC.md §9.1).
                // Its writers' lock file (§9) goes too, as no writer has it open.
                let kept = (keep as NSString).appendingPathComponent("a.db")
                try ConcordStore.forgetLocation(at: kept)
                try? FileManager.default.removeItem(atPath: kept + "-lock")
            }

            var times: [Double] = []
            var peak = 0
            var merged: String?
            let spinners = BusyCores(busyCores)
            defer { spinners.stop() }
            for run in 1...options.runs {
                progressNote("merge run \(run) of \(options.runs)")
                let copy = directory + "/a-\(run).db"
                try FileManager.default.copyItem(atPath: template, toPath: copy)
                let result = try MergeRun.inChildProcess(store: copy, bundle: bundle, options: options)
                times.append(result.seconds)
                peak = max(peak, result.peakResidentBytes)
                guard result.newOperations == operations else {
                    throw ValidationError("the merge brought \(result.newOperations) operations, not \(operations)")
                }
                if let previous = merged { try? FileManager.default.removeItem(atPath: previous) }
                merged = copy
            }
            spinners.stop()
            progressNote("verifying")
            // A after the merge must hold exactly what B and A's own history together hold.
            try b.merge(storeAt: template)
            let mergedA = try ConcordStore.open(at: merged!, readOnly: true)
            defer { try? mergedA.close() }
            guard try Measure.dumpDigest(mergedA) == (try Measure.dumpDigest(b)) else {
                throw ValidationError("after the merge, A does not hold B's state where B won")
            }
            progressNote("reading histories")
            let history = try Self.timeHistories(in: mergedA, of: workload)
            ProgressLine.shared.clear()
            let median = Measure.median(times)
            let result = JSON.object([
                ("benchmark", .string("merge")), ("workload", .string(options.description)),
                ("operations", .int(Int64(operations))), ("targetOperationsBefore", .int(Int64(aOperations))),
                ("runs", .int(Int64(times.count))), ("busyCores", .int(Int64(busyCores))),
                ("medianSeconds", .decimal(median, fractionDigits: 3)),
                ("operationsPerSecond", .int(Int64(Double(operations) / median))),
                ("bundleBytes", .int(Int64(summary.bytes))),
                ("bytesPerOperation", .decimal(Double(summary.bytes) / Double(operations), fractionDigits: 2)),
                ("peakResidentBytes", .int(Int64(peak))), ("verified", .bool(true)),
                ("historyMedianMilliseconds", .decimal(history.median * 1000, fractionDigits: 2)),
                ("historyMaxMilliseconds", .decimal(history.max * 1000, fractionDigits: 2)),
                ("historyOperations", .decimal(history.operations, fractionDigits: 1)),
            ])
            if options.json {
                say(result.canonical)
            } else {
                say("workload    \(options.description)")
                say("operations  \(operations) from B, merged into A holding \(aOperations)")
                say("merge       median \(formatted(median, 3)) s over \(times.count) runs (\(times.map { formatted($0, 3) }.joined(separator: ", ")))\(busyCores == 0 ? "" : ", \(busyCores) \(busyCores == 1 ? "core" : "cores") kept busy")")
                say("throughput  \(Int(Double(operations) / median)) operations/s")
                say("bundle      \(summary.bytes) bytes, \(formatted(Double(summary.bytes) / Double(operations), 2)) bytes/operation")
                say("memory      \(peak / 1_000_000) MB peak resident during the merges")
                say("verified    A holds B's state where B won")
                say("history     median \(formatted(history.median * 1000, 2)) ms, max \(formatted(history.max * 1000, 2)) ms to read one record's history (\(formatted(history.operations, 1)) operations on average) in the merged A, 200 records")
            }
        }
    }

    /// The median and greatest time to read one record's history, over 200 of the workload's
    /// records spread across it, and their operations on average.
    static func timeHistories(in store: ConcordStore, of workload: ReminderWorkload) throws -> (median: Double, max: Double, operations: Double) {
        let ids = workload.recordIDs()
        let sample = (0..<200).map { ids[$0 * ids.count / 200] }
        var times: [Double] = []
        var operations = 0
        for id in sample {
            var entries: [HistoryEntry]?
            times.append(try Measure.seconds { entries = try store.history(of: .reminder(id)) })
            operations += entries?.count ?? 0
        }
        return (Measure.median(times), times.max() ?? 0, Double(operations) / Double(sample.count))
    }
}

/// One timed merge of `bench merge`, in a process of its own: merges the bundle into a copy of A
/// and prints one JSON object with the time, the new operations and the process's peak memory.
struct MergeRun: OneShotCommand {
    static let configuration = CommandConfiguration(
        commandName: "merge-run", abstract: "One timed merge of 'bench merge' (run by it).", shouldDisplay: false)
    @OptionGroup var options: WorkloadOptions
    @Option(help: "The copy of A to merge into.") var store: String
    @Option(help: "B's bundle.") var bundle: String

    /// What a run prints.
    struct Result: Decodable {
        var seconds: Double
        var newOperations: Int
        var peakResidentBytes: Int
    }

    func work() throws {
        var environment = options.workload.environmentA
        if let batch = try StoreOptions.mergeBatch() { environment.mergeBatch = batch }
        // The template is never used again: the copy takes its place (SPEC.md §9.1).
        let target = try ConcordStore.adoptLocation(at: store, environment: environment)
        defer { try? target.close() }
        Measure.resetPeakMemory()
        var report = MergeReport()
        let seconds = try Measure.seconds { report = try target.mergeBundle(at: bundle).0 }
        say(JSON.object([
            ("seconds", .decimal(seconds, fractionDigits: 6)), ("newOperations", .int(Int64(report.newOperationCount))),
            ("peakResidentBytes", .int(Int64(Measure.peakMemoryBytes()))),
        ]).canonical)
    }

    /// Runs `syncctl bench merge-run` (this executable) and reads its result.
    static func inChildProcess(store: String, bundle: String, options: WorkloadOptions) throws -> Result {
        guard let executable = Bundle.main.executableURL else { throw ValidationError("cannot find the syncctl executable") }
        let process = Process()
        process.executableURL = executable
        process.arguments = [
            "bench", "merge-run", "--store", store, "--bundle", bundle, "--records", String(options.records),
            "--updates-per-record", String(options.updatesPerRecord), "--text-scale", String(options.textScale),
            "--seed", String(options.seed),
        ] + (options.randomIDs ? ["--random-ids"] : [])
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let bytes = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ValidationError("the merge process failed (exit \(process.terminationStatus))")
        }
        guard let result = try? JSONDecoder().decode(Result.self, from: bytes), result.seconds.isFinite else {
            throw ValidationError("the merge process printed no result: \(String(decoding: bytes, as: UTF8.self))")
        }
        return result
    }
}

struct WritesBench: OneShotCommand {
    static let configuration = CommandConfiguration(
        commandName: "writes", abstract: "Add N reminders through the library, 1000 per transaction, into a fresh store.")
    @OptionGroup var options: WorkloadOptions

    func work() throws {
        var workload = options.workload
        workload.updatesPerRecord = 0
        var rates: [Double] = []
        var operations = 0
        try withBenchDirectory { directory in
            for run in 1...options.runs {
                progressNote("run \(run) of \(options.runs)")
                let store = try ConcordStore.create(at: directory + "/w-\(run).db", environment: workload.environmentB)
                let (seconds, _) = try workload.buildB(into: store)
                operations = try store.status().operations
                rates.append(Double(operations) / seconds)
                try store.close()
                try FileManager.default.removeItem(atPath: directory + "/w-\(run).db")
            }
        }
        ProgressLine.shared.clear()
        let median = Measure.median(rates)
        if options.json {
            say(JSON.object([
                ("benchmark", .string("writes")), ("workload", .string(options.description)), ("operations", .int(Int64(operations))),
                ("runs", .int(Int64(rates.count))), ("operationsPerSecond", .int(Int64(median))),
            ]).canonical)
        } else {
            say("workload    \(options.description), creates only")
            say("writes      \(operations) operations; median \(Int(median)) operations/s over \(rates.count) runs")
        }
    }
}

struct ExportBench: OneShotCommand {
    static let configuration = CommandConfiguration(commandName: "export", abstract: "Export replica B's history as a bundle.")
    @OptionGroup var options: WorkloadOptions

    func work() throws {
        let workload = options.workload
        try withBenchDirectory { directory in
            let (store, _) = try buildReplicaB(workload, in: directory)
            var times: [Double] = []
            var summary: BundleSummary?
            for run in 1...options.runs {
                progressNote("run \(run) of \(options.runs)")
                times.append(try Measure.seconds { summary = try store.exportBundle(to: directory + "/b.cbundle") })
            }
            ProgressLine.shared.clear()
            let median = Measure.median(times)
            let operations = summary!.operations
            if options.json {
                say(JSON.object([
                    ("benchmark", .string("export")), ("workload", .string(options.description)), ("operations", .int(Int64(operations))),
                    ("runs", .int(Int64(times.count))), ("medianSeconds", .decimal(median, fractionDigits: 3)),
                    ("operationsPerSecond", .int(Int64(Double(operations) / median))), ("bundleBytes", .int(Int64(summary!.bytes))),
                ]).canonical)
            } else {
                say("workload    \(options.description)")
                say("export      \(operations) operations, \(summary!.bytes) bytes; median \(formatted(median, 3)) s = \(Int(Double(operations) / median)) operations/s")
            }
        }
    }
}

struct FolderSyncBench: OneShotCommand {
    static let configuration = CommandConfiguration(
        commandName: "folder-sync", abstract: "A sync with nothing new, against a shared folder holding many bundle files.")
    @Option(help: "Bundle files in the folder.") var files = 1000
    @Option(help: "Timed runs; the median is reported.") var runs = 5
    @Flag(help: "Print one JSON object.") var json = false

    func validate() throws {
        guard (1...100_000).contains(files) else { throw ValidationError("--files must be from 1 to 100000") }
        guard (1...100).contains(runs) else { throw ValidationError("--runs must be from 1 to 100") }
    }

    func work() throws {
        try withBenchDirectory { directory in
            progressNote("writing \(files) bundle files")
            let folder = directory + "/shared"
            try FileManager.default.createDirectory(atPath: folder + "/concord-v1", withIntermediateDirectories: true)
            // A source replica's history cut into `files` bundles, as many syncs would have published it.
            let source = try ConcordStore.create(at: directory + "/source.db", environment: .deterministic(seed: 7))
            let workload = ReminderWorkload(records: files, updatesPerRecord: 0, seed: 7)
            try workload.buildB(into: source)
            var operations: [Op] = []
            try source.forEachOperation { operations.append($0) }
            let perFile = (operations.count + files - 1) / files
            for (index, start) in stride(from: 0, to: operations.count, by: perFile).enumerated() {
                let slice = operations[start..<min(start + perFile, operations.count)]
                let manifest = BundleManifest(
                    publisher: source.replicaID, createdMillis: 0,
                    base: VersionVector([source.replicaID: slice.first!.id.seq - 1]),
                    top: VersionVector([source.replicaID: slice.last!.id.seq]))
                let serial = String(index + 1)
                let name = "\(source.replicaID.hex)-\(String(repeating: "0", count: 10 - serial.count))\(serial).cbundle"
                var bytes: [UInt8] = []
                var writer = try BundleWriter(manifest: manifest) { bytes += $0 }
                for operation in slice { try writer.append(operation) }
                _ = try writer.finish()
                try Data(bytes).write(to: URL(fileURLWithPath: folder + "/concord-v1/" + name))
            }
            let store = try ConcordStore.create(at: directory + "/target.db", environment: .deterministic(seed: 8))
            // Measured as if the files had settled, as a folder's files mostly have: a file
            // changed in the last seconds is hashed at every sync until then (SPEC.md §14).
            let settled = TimeInterval(FolderSync.settlingSeconds + 1)
            let sync = FolderSync(store: store, folder: folder, now: { Date().addingTimeInterval(settled) })
            progressNote("first sync (imports every file)")
            try sync.sync()
            try sync.sync()
            var times: [Double] = []
            for run in 1...runs {
                progressNote("run \(run) of \(runs)")
                var report = FolderSyncReport()
                times.append(try Measure.seconds { report = try sync.sync() })
                guard !report.movedSomething, report.warnings.isEmpty else { throw ValidationError("a no-op sync moved something: \(report)") }
            }
            ProgressLine.shared.clear()
            let median = Measure.median(times)
            if json {
                say(JSON.object([
                    ("benchmark", .string("folder-sync")), ("files", .int(Int64(files))), ("runs", .int(Int64(times.count))),
                    ("medianMilliseconds", .decimal(median * 1000, fractionDigits: 1)),
                ]).canonical)
            } else {
                say("folder      \(files) bundle files, nothing new")
                say("no-op sync  median \(formatted(median * 1000, 1)) ms over \(times.count) runs (\(times.map { formatted($0 * 1000, 1) }.joined(separator: ", ")))")
            }
        }
    }
}

struct PeerBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peer",
        abstract: "Sync an empty store from replica B, served over TCP on loopback.",
        discussion: """
            Builds replica B, gives it a sync key and serves it on 127.0.0.1 (a free port); then, --runs \
            times, syncs a new empty store holding the same key from it (one 'sync --peer' session: \
            handshake, both version vectors, B's whole history in encrypted batches, each applied in a \
            transaction of its own). Checks that the store then holds B's state, and prints the median \
            session time, operations per second, the bytes on the wire each way (frames, handshake \
            included; not TCP/IP headers), and the peak resident memory of this process, which holds \
            both sides.
            """)
    @OptionGroup var options: WorkloadOptions

    func run() async throws {
        let workload = options.workload
        try await withBenchDirectory { directory in
            let (b, operations) = try buildReplicaB(workload, in: directory)
            let key = SyncKey.generate()
            try b.setSyncKey(key)
            let server = PeerServer(store: b)
            let address = try await server.start(host: "127.0.0.1", port: 0)
            do {
                try await measure(serving: b, at: address, operations: operations, key: key, in: directory)
            } catch {
                await server.stop()
                throw error
            }
            await server.stop()
        }
    }

    /// Syncs new stores from B, served at `address`, and reports.
    private func measure(serving b: ConcordStore, at address: PeerAddress, operations: Int, key: SyncKey, in directory: String) async throws {
        let workload = options.workload
        var times: [Double] = []
        var peak = 0
        var record: PeerSessionRecord?
        var last: ConcordStore?
        for run in 1...options.runs {
            progressNote("sync run \(run) of \(options.runs)")
            let path = directory + "/a-\(run).db"
            let target = try await ConcordStore.create(at: path, environment: workload.environmentA)
            try target.setSyncKey(key)
            Measure.resetPeakMemory()
            times.append(try await Measure.seconds {
                record = try await PeerClient.sync(store: target, address: address) { progress in
                    ProgressLine.shared.update { "sync run \(run) of \(options.runs): \(progress.operationsReceived) operations received" }
                }
            })
            peak = max(peak, Measure.peakMemoryBytes())
            if let failure = record?.failure { throw ValidationError("the session failed: \(Advice.line(for: failure))") }
            guard record?.summary.operationsReceived == operations, record?.newOperations == operations else {
                throw ValidationError("the session brought \(record?.summary.operationsReceived ?? 0) operations, not \(operations)")
            }
            if let previous = last {
                try await previous.close()
                for suffix in ["", "-wal", "-shm", "-lock"] { try? FileManager.default.removeItem(atPath: previous.path + suffix) }
            }
            last = target
        }
        progressNote("verifying")
        guard try Measure.dumpDigest(last!) == (try Measure.dumpDigest(b)) else {
            throw ValidationError("after the sync, the store does not hold B's state")
        }
        ProgressLine.shared.clear()
        let summary = record!.summary
        let median = Measure.median(times)
        let perOperation = Double(summary.bytesReceived) / Double(operations)
        if options.json {
            say(JSON.object([
                ("benchmark", .string("peer")), ("workload", .string(options.description)),
                ("operations", .int(Int64(operations))), ("runs", .int(Int64(times.count))),
                ("medianSeconds", .decimal(median, fractionDigits: 3)),
                ("operationsPerSecond", .int(Int64(Double(operations) / median))),
                ("bytesFromServer", .int(Int64(summary.bytesReceived))), ("bytesToServer", .int(Int64(summary.bytesSent))),
                ("bytesPerOperation", .decimal(perOperation, fractionDigits: 2)), ("batches", .int(Int64(summary.batchesReceived))),
                ("peakResidentBytes", .int(Int64(peak))), ("verified", .bool(true)),
            ]).canonical)
        } else {
            say("workload    \(options.description)")
            say("operations  \(operations) from B (served on loopback) into an empty store, in \(summary.batchesReceived) batches")
            say("session     median \(formatted(median, 3)) s over \(times.count) runs (\(times.map { formatted($0, 3) }.joined(separator: ", ")))")
            say("throughput  \(Int(Double(operations) / median)) operations/s")
            say("wire        \(summary.bytesReceived) bytes from B (\(formatted(perOperation, 2)) bytes/operation), \(summary.bytesSent) bytes to B")
            say("memory      \(peak / 1_000_000) MB peak resident (this process runs both sides)")
            say("verified    the store holds B's state")
        }
    }
}
