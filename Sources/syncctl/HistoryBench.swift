import ArgumentParser
import ConcordCore
import ConcordStore
import ConcordWorkload
import Foundation

/// `syncctl bench history`: the time to read the history of a reminder with many writes, when its
/// writes lie between other records' writes in the log and when they lie together. `bench merge`
/// times histories of a few operations each; this is the case of one span per write.
struct HistoryBench: OneShotCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Read the history of a reminder written many times, among others' writes and alone.",
        discussion: """
            Builds replica B of the workload, then gives one of its reminders --writes field writes, \
            each followed by --others writes of other reminders (its writes interleaved in the log, \
            one operation span each), then gives another reminder --writes writes in a row; all in \
            transactions of 4096 writes, so that log rows are full. Reads each one's history --runs \
            times and prints the medians, after checking that each history is the record's \
            operations in the log, by stamp.
            """)
    @OptionGroup var options: WorkloadOptions
    @Option(help: "Field writes each of the two reminders gets.") var writes = 10_000
    @Option(help: "Writes of other reminders after each write of the interleaved one.") var others = 9
    @Option(help: ArgumentHelp(
        "Also leave the store (history.db) in this directory, to time 'syncctl --store history.db history ID' with the ids printed.",
        valueName: "directory"))
    var keep: String?

    func validate() throws {
        guard (1...1_000_000).contains(writes) else { throw ValidationError("--writes must be from 1 to 1000000") }
        guard (0...1000).contains(others) else { throw ValidationError("--others must be from 0 to 1000") }
    }

    func work() throws {
        let workload = HistoryWorkload(base: options.workload, writes: writes, others: others)
        try withBenchDirectory { directory in
            progressNote("building replica B")
            let path = directory + "/history.db"
            let built = try ConcordStore.create(at: path, environment: workload.base.environmentB)
            try workload.build(into: built)
            try built.close()
            if let keep {
                try FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
                let kept = (keep as NSString).appendingPathComponent("history.db")
                try? FileManager.default.removeItem(atPath: kept)
                try FileManager.default.copyItem(atPath: path, toPath: kept)
                // As `bench merge --keep` leaves its store (SPEC.md §9.1): no copy of it is refused as one.
                try ConcordStore.forgetLocation(at: kept)
                try? FileManager.default.removeItem(atPath: kept + "-lock")
            }
            let store = try ConcordStore.open(at: path, readOnly: true)
            defer { try? store.close() }
            let operations = try store.status().operations
            progressNote("checking the histories against the log")
            let expected = try Self.operationsByStamp(in: store, of: [workload.interleaved, workload.contiguous])
            var results: [(name: String, ref: RecordRef, times: [Double])] = [
                ("interleaved", workload.interleaved, []), ("contiguous", workload.contiguous, []),
            ]
            for index in results.indices {
                let ref = results[index].ref
                for run in 1...options.runs {
                    progressNote("\(results[index].name) history, run \(run) of \(options.runs)")
                    var entries: [HistoryEntry]?
                    results[index].times.append(try Measure.seconds { entries = try store.history(of: ref) })
                    guard entries?.map(\.operation) == expected[ref] else {
                        throw ValidationError("the \(results[index].name) reminder's history is not its operations in the log, by stamp")
                    }
                }
            }
            ProgressLine.shared.clear()
            func spans(_ ref: RecordRef) -> Int {
                var spans = OperationSpans()
                for operation in expected[ref]!.sorted(by: { $0.id < $1.id }) { spans.insert(operation.id) }
                return spans.spans.count
            }
            if options.json {
                var members: [(String, JSON)] = [
                    ("benchmark", .string("history")), ("workload", .string(options.description)),
                    ("operations", .int(Int64(operations))), ("writes", .int(Int64(writes))), ("others", .int(Int64(others))),
                    ("runs", .int(Int64(options.runs))), ("verified", .bool(true)),
                ]
                for (name, ref, times) in results {
                    members += [
                        ("\(name)MedianMilliseconds", .decimal(Measure.median(times) * 1000, fractionDigits: 2)),
                        ("\(name)Operations", .int(Int64(expected[ref]!.count))),
                        ("\(name)Spans", .int(Int64(spans(ref)))),
                    ]
                }
                say(JSON.object(members).canonical)
            } else {
                say("workload    \(options.description); two reminders written \(writes) times more, one among others' writes (\(others) after each of its own), one in a row")
                say("operations  \(operations) in the store")
                for (name, ref, times) in results {
                    say("\(name.padding(toLength: 12, withPad: " ", startingAt: 0))reminder \(ref.id), \(expected[ref]!.count) operations in \(spans(ref)) spans: history median \(formatted(Measure.median(times) * 1000, 2)) ms over \(times.count) runs (\(times.map { formatted($0 * 1000, 2) }.joined(separator: ", ")))")
                }
                say("verified    each history is the reminder's operations in the log, by stamp")
            }
        }
    }

    /// The operations of each of `refs` in the whole log, by stamp: what their histories list.
    static func operationsByStamp(in store: ConcordStore, of refs: [RecordRef]) throws -> [RecordRef: [Op]] {
        var found = Dictionary(uniqueKeysWithValues: refs.map { ($0, [Op]()) })
        try store.forEachOperation { operation in
            if found[operation.record] != nil { found[operation.record]!.append(operation) }
        }
        return found.mapValues { $0.sorted { $0.stamp < $1.stamp } }
    }
}
