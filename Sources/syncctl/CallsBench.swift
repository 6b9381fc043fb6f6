import ArgumentParser
import ConcordCore
import ConcordStore
import ConcordWorkload
import Foundation

/// `syncctl bench calls`: what an app's calls cost one at a time through the Swift API: a local
/// write (one reminder added, in a transaction of its own) and a list of all N reminders. The JVM
/// binding's benchmark (bindings/jvm, `Bench`) makes the same calls through the C interface, so
/// that the two tell what a binding costs.
struct CallsBench: OneShotCommand {
    static let configuration = CommandConfiguration(
        commandName: "calls", abstract: "Local writes one at a time, and a list of N reminders, through the Swift API.")
    @Option(help: "Reminders added one at a time, each its own transaction.") var writes = 2000
    @Option(help: "Reminders in the store that is listed (N).") var records = 100_000
    @Option(help: "Timed runs; the median is reported.") var runs = 3
    @Option(help: ArgumentHelp("Also leave the listed store at DIR/list.db, for a binding's benchmark to list.", valueName: "dir"))
    var keep: String?
    @Flag(help: "Print one JSON object.") var json = false

    func validate() throws {
        guard writes >= 1, records >= 1, runs >= 1 else { throw ValidationError("--writes, --records and --runs are at least 1") }
    }

    func work() throws {
        var writeRates: [Double] = []
        var listSeconds: [Double] = []
        try withBenchDirectory { directory in
            for run in 1...runs {
                progressNote("writes, run \(run) of \(runs)")
                let store = try ConcordStore.create(at: directory + "/writes-\(run).db")
                let seconds = try Measure.seconds {
                    for index in 0..<writes { try store.addReminder(ReminderDraft(title: "reminder \(index)")) }
                }
                writeRates.append(Double(writes) / seconds)
                try store.close()
            }
            progressNote("making a store of \(records) reminders")
            let store = try ConcordStore.create(at: directory + "/list.db")
            _ = try ReminderWorkload(records: records, updatesPerRecord: 0).buildB(into: store)
            for run in 1...runs {
                progressNote("list, run \(run) of \(runs)")
                var listed = 0
                listSeconds.append(try Measure.seconds { listed = try store.reminders(includeCompleted: true, includeDeleted: true).count })
                guard listed == records else { throw ConcordError(.corrupt, "listed \(listed) reminders of \(records)") }
            }
            try store.close()
            if let keep {
                try FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
                let kept = (keep as NSString).appendingPathComponent("list.db")
                try? FileManager.default.removeItem(atPath: kept)
                try FileManager.default.copyItem(atPath: directory + "/list.db", toPath: kept)
                // As `bench history --keep` leaves its store (SPEC.md §9.1): no copy of it is refused as one.
                try ConcordStore.forgetLocation(at: kept)
                try? FileManager.default.removeItem(atPath: kept + "-lock")
            }
        }
        ProgressLine.shared.clear()
        let writeRate = Measure.median(writeRates)
        let list = Measure.median(listSeconds)
        if json {
            say(JSON.object([
                ("benchmark", .string("calls")), ("writes", .int(Int64(writes))), ("writesPerSecond", .int(Int64(writeRate))),
                ("records", .int(Int64(records))), ("listMedianSeconds", .decimal(list, fractionDigits: 3)), ("runs", .int(Int64(runs))),
            ]).canonical)
        } else {
            say("writes      \(writes) reminders added one at a time: median \(Int(writeRate)) writes/s over \(runs) runs")
            say("list        \(records) reminders: median \(String(format: "%.3f", list)) s over \(runs) runs")
        }
    }
}
