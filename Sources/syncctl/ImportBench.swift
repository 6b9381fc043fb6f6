import ArgumentParser
import ConcordCore
import ConcordStore
import ConcordWorkload
import Foundation

/// `syncctl bench import`: `syncctl import` of the list of N reminders, into an empty store and
/// again into the store that then holds them all, each run in a process of its own.
struct ImportBench: OneShotCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import the JSON list of N reminders into an empty store, and again once it holds them.",
        discussion: """
            Builds replica B's reminders (creates only, not timed) and writes them as \
            'reminder list --all --json' prints them. Then, --runs times, imports that file into a \
            new empty store, and imports it again into the same store, which then holds every \
            record already. Each import runs in a process of its own, as 'syncctl import' would, so \
            that its time and peak memory are its own. Checks that the store then lists the same \
            reminders as B, and prints the median times, records per second and the peak resident \
            memory of the imports.
            """)
    @OptionGroup var options: WorkloadOptions

    func work() throws {
        // Creates only: a list shows each record's values, however many updates made them.
        var options = self.options
        options.updatesPerRecord = 0
        let workload = options.workload
        try withBenchDirectory { directory in
            let (b, _) = try buildReplicaB(workload, in: directory)
            progressNote("writing the list")
            let file = directory + "/reminders.json"
            let listed = JSON.array(try b.reminders(includeCompleted: true, includeDeleted: true).map(\.json)).canonical
            try Data((listed + "\n").utf8).write(to: URL(fileURLWithPath: file))
            let fileBytes = listed.utf8.count + 1

            var first: [ImportRun.Result] = []
            var again: [ImportRun.Result] = []
            var target = ""
            for run in 1...options.runs {
                if !target.isEmpty {
                    for suffix in ["", "-wal", "-shm", "-lock"] { try? FileManager.default.removeItem(atPath: target + suffix) }
                }
                target = directory + "/t-\(run).db"
                try ConcordStore.create(at: target, environment: workload.environmentA).close()
                progressNote("import run \(run) of \(options.runs)")
                let created = try ImportRun.inChildProcess(store: target, file: file)
                guard created.reminders == workload.records, created.held == 0 else {
                    throw ValidationError("the import created \(created.reminders) reminders (\(created.held) held), not \(workload.records)")
                }
                first.append(created)
                progressNote("import run \(run) of \(options.runs), again")
                let held = try ImportRun.inChildProcess(store: target, file: file)
                guard held.reminders == 0, held.held == workload.records else {
                    throw ValidationError("the second import created \(held.reminders) reminders (\(held.held) held), not 0")
                }
                again.append(held)
            }
            progressNote("verifying")
            let imported = try ConcordStore.open(at: target, readOnly: true)
            defer { try? imported.close() }
            guard JSON.array(try imported.reminders(includeCompleted: true, includeDeleted: true).map(\.json)).canonical == listed else {
                throw ValidationError("after the import, the store does not list B's reminders")
            }
            ProgressLine.shared.clear()

            let median = Measure.median(first.map(\.seconds))
            let againMedian = Measure.median(again.map(\.seconds))
            let peak = first.map(\.peakResidentBytes).max() ?? 0
            let againPeak = again.map(\.peakResidentBytes).max() ?? 0
            let rate = Double(workload.records) / median
            if options.json {
                say(JSON.object([
                    ("benchmark", .string("import")), ("workload", .string(options.description)),
                    ("records", .int(Int64(workload.records))), ("fileBytes", .int(Int64(fileBytes))),
                    ("runs", .int(Int64(first.count))), ("medianMilliseconds", .int(Int64((median * 1000).rounded()))),
                    ("recordsPerSecond", .int(Int64(rate))), ("peakResidentBytes", .int(Int64(peak))),
                    ("heldMedianMilliseconds", .int(Int64((againMedian * 1000).rounded()))),
                    ("heldPeakResidentBytes", .int(Int64(againPeak))), ("verified", .bool(true)),
                ]).canonical)
            } else {
                say("workload    \(options.description)")
                say("file        \(workload.records) reminders as 'reminder list --all --json' prints them, \(fileBytes) bytes")
                say("import      median \(formatted(median, 3)) s over \(first.count) runs (\(first.map { formatted($0.seconds, 3) }.joined(separator: ", "))) into an empty store")
                say("throughput  \(Int(rate)) records/s")
                say("memory      \(peak / 1_000_000) MB peak resident during the imports")
                say("again       median \(formatted(againMedian, 3)) s (\(again.map { formatted($0.seconds, 3) }.joined(separator: ", "))) with every record held, \(againPeak / 1_000_000) MB peak")
                say("verified    the store lists B's reminders")
            }
        }
    }
}

/// One timed import of `bench import`, in a process of its own: imports the file into the store
/// as `syncctl import` does and prints one JSON object with the time, what it created and the
/// process's peak memory.
struct ImportRun: OneShotCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-run", abstract: "One timed import of 'bench import' (run by it).", shouldDisplay: false)
    @Option(help: "The store to import into.") var store: String
    @Option(help: "The file to import.") var file: String

    /// What a run prints.
    struct Result: Decodable {
        var microseconds: Int
        var reminders: Int
        var held: Int
        var peakResidentBytes: Int

        var seconds: Double { Double(microseconds) / 1e6 }
    }

    func work() throws {
        Measure.resetPeakMemory()
        var summary = Import.Summary()
        let seconds = try Measure.seconds {
            let input = try ImportFile(file)
            defer { input.close() }
            let target = try ConcordStore.open(at: store, environment: try StoreOptions.environment())
            defer { try? target.close() }
            summary = try Import.importRecords(from: input, into: target)
        }
        say(JSON.object([
            ("microseconds", .int(Int64((seconds * 1e6).rounded()))), ("reminders", .int(Int64(summary.reminders))),
            ("held", .int(Int64(summary.held))), ("peakResidentBytes", .int(Int64(Measure.peakMemoryBytes()))),
        ]).canonical)
    }

    /// Runs `syncctl bench import-run` (this executable) and reads its result.
    static func inChildProcess(store: String, file: String) throws -> Result {
        guard let executable = Bundle.main.executableURL else { throw ValidationError("cannot find the syncctl executable") }
        let process = Process()
        process.executableURL = executable
        process.arguments = ["bench", "import-run", "--store", store, "--file", file]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let bytes = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ValidationError("the import process failed (exit \(process.terminationStatus))")
        }
        guard let result = try? JSONDecoder().decode(Result.self, from: bytes) else {
            throw ValidationError("the import process printed no result: \(String(decoding: bytes, as: UTF8.self))")
        }
        return result
    }
}
