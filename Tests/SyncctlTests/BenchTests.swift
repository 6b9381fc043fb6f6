import Foundation
import Testing

/// `syncctl bench merge` on a small workload (SPEC.md §11): it runs each merge in a process of its
/// own, checks the result, reports what it measured, and leaves nothing behind.
@Suite(.waitsForProcesses) struct BenchTests {
    /// The members of the one JSON object a `--json` run printed.
    func members(_ result: RunResult, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: OrderedJSON] {
        #expect(result.succeeded, "\(result)", sourceLocation: sourceLocation)
        guard case .object(let members) = try OrderedJSON.parse(result.stdout) else {
            Issue.record("not a JSON object: \(result)", sourceLocation: sourceLocation)
            return [:]
        }
        return Dictionary(uniqueKeysWithValues: members)
    }

    func number(_ value: OrderedJSON?) -> Double? {
        switch value {
        case .number(let text)?, .string(let text)?: Double(text)
        default: nil
        }
    }

    /// In one transaction (the default batch), and in batches that log and apply a few records at a
    /// time: the merged store holds B's state where B won (the bench checks it, and says so).
    @Test(arguments: [nil, "300,40"])
    func mergeBenchMergesInProcessesOfItsOwnAndChecksTheResult(batch: String?) throws {
        let sandbox = try Sandbox()
        let temporary = try sandbox.makeDirectory("tmp")
        var environment: [String: String?] = ["TMPDIR": temporary]
        if let batch { environment["SYNCCTL_MERGE_BATCH"] = batch }
        let result = try sandbox.run(["bench", "merge", "--records", "120", "--runs", "3", "--json"], environment: environment)
        let report = try members(result)
        #expect(report["benchmark"] == .string("merge"))
        #expect(report["verified"] == .bool(true))
        #expect(report["runs"] == .number("3"))
        let operations = try #require(number(report["operations"]))
        // 120 reminders, each 5 field writes and 1 to 3 tags, then 120 updates and 12 tag changes.
        #expect(operations >= 120 * 6 + 120 + 12 && operations <= 120 * 8 + 120 + 12, "\(result)")
        let seconds = try #require(number(report["medianSeconds"]))
        #expect(seconds > 0)
        // The median is printed to the millisecond.
        let throughput = try #require(number(report["operationsPerSecond"]))
        #expect(throughput >= operations / (seconds + 0.0005) - 1 && (seconds < 0.001 || throughput <= operations / (seconds - 0.0005)), "\(result)")
        #expect(number(report["bundleBytes"]).map { $0 > 0 } == true)
        // The merging processes' own memory: more than nothing, less than a whole workload's.
        #expect(number(report["peakResidentBytes"]).map { $0 > 1_000_000 && $0 < 500_000_000 } == true, "\(result)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty)
    }

    /// With cores kept busy, as on a machine where other programs run: the merges still hold B's
    /// state, and the report says how many cores were busy.
    @Test func mergeBenchKeepsCoresBusyWhenAsked() throws {
        let sandbox = try Sandbox()
        let report = try members(try sandbox.run(["bench", "merge", "--records", "60", "--runs", "1", "--busy-cores", "1", "--json"]))
        #expect(report["verified"] == .bool(true))
        #expect(report["busyCores"] == .number("1"))
        let text = try sandbox.run(["bench", "merge", "--records", "60", "--runs", "1", "--busy-cores", "2"])
        #expect(text.stdout.split(separator: "\n").contains { $0.hasPrefix("merge ") && $0.hasSuffix(", 2 cores kept busy") }, "\(text)")
        let refused = try sandbox.run(["bench", "merge", "--busy-cores", "65"])
        #expect(!refused.succeeded && refused.stderr.contains("--busy-cores must be from 0 to 64"), "\(refused)")
    }

    /// The kept files work as the help says: `syncctl merge b.cbundle --store COPY-OF-a.db`, for
    /// on as many copies as one likes (a.db records no location, so no copy is refused as one).
    @Test func keptFilesMergeAsDocumented() throws {
        let sandbox = try Sandbox()
        let kept = sandbox.path("kept")
        let result = try sandbox.run(["bench", "merge", "--records", "60", "--runs", "1", "--keep", kept, "--json"])
        let operations = try #require(number(try members(result)["operations"]))
        #expect(try FileManager.default.contentsOfDirectory(atPath: kept).sorted() == ["a.db", "b.cbundle"])
        for name in ["first.db", "second.db"] {
            try FileManager.default.copyItem(atPath: kept + "/a.db", toPath: sandbox.path(name))
            let copy = Store(sandbox: sandbox, path: sandbox.path(name))
            let merged = try copy.ok("merge", kept + "/b.cbundle")
            #expect(merged.hasPrefix("merged \(Int(operations)) new operation"), "\(merged)")
            try copy.ok("verify")
        }
        #expect(try Store(sandbox: sandbox, path: sandbox.path("first.db")).dump() == (try Store(sandbox: sandbox, path: sandbox.path("second.db")).dump()))
    }

    /// `bench history` on a small workload: the interleaved reminder's history has a span per
    /// write, the contiguous one's few, both checked against the log, and nothing is left behind.
    @Test func callsBenchTimesWritesOneAtATimeAndAWholeList() throws {
        let sandbox = try Sandbox()
        let temporary = try sandbox.makeDirectory("tmp")
        let result = try sandbox.run(
            ["bench", "calls", "--writes", "50", "--records", "300", "--runs", "2", "--keep", sandbox.path("kept"), "--json"],
            environment: ["TMPDIR": temporary])
        let report = try members(result)
        #expect(report["benchmark"] == .string("calls"))
        #expect(report["writes"] == .number("50") && report["records"] == .number("300") && report["runs"] == .number("2"))
        #expect(try #require(number(report["writesPerSecond"])) > 0)
        #expect(try #require(number(report["listMedianSeconds"])) >= 0)
        // The bench's stores are gone with its directory, but the one it kept, which takes writes.
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty)
        let kept = Store(sandbox: sandbox, path: sandbox.path("kept/list.db"))
        #expect(try kept.reminders(all: true).count == 300)
        _ = try kept.addReminder("after the bench")
    }

    @Test func historyBenchReadsBothHistoriesAndChecksThem() throws {
        let sandbox = try Sandbox()
        let temporary = try sandbox.makeDirectory("tmp")
        let result = try sandbox.run(
            ["bench", "history", "--records", "60", "--writes", "300", "--others", "2", "--runs", "2", "--json"],
            environment: ["TMPDIR": temporary])
        let report = try members(result)
        #expect(report["benchmark"] == .string("history"))
        #expect(report["verified"] == .bool(true))
        #expect(report["runs"] == .number("2"))
        for name in ["interleaved", "contiguous"] {
            // Its create (5 field writes and 1 to 3 tags), a few of the workload's updates, then 300 more.
            let operations = try #require(number(report["\(name)Operations"]), "\(result)")
            #expect(operations >= 300 + 6 && operations <= 300 + 8 + 20, "\(result)")
            #expect(number(report["\(name)MedianMilliseconds"]).map { $0 > 0 } == true, "\(result)")
        }
        #expect(number(report["interleavedSpans"]).map { $0 >= 300 } == true, "\(result)")
        #expect(number(report["contiguousSpans"]).map { $0 <= 20 } == true, "\(result)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty)
    }

    /// `bench import` on a few records: each import creates every record, the second none, the
    /// store then lists the same reminders (the bench checks it, and says so), and every figure
    /// of its JSON is a JSON number.
    @Test func importBenchImportsTheListTwiceAndReportsNumbers() throws {
        let sandbox = try Sandbox()
        let temporary = try sandbox.makeDirectory("tmp")
        let result = try sandbox.run(["bench", "import", "--records", "60", "--runs", "2", "--json"], environment: ["TMPDIR": temporary])
        let report = try members(result)
        #expect(report["benchmark"] == .string("import"))
        #expect(report["verified"] == .bool(true))
        #expect(report["records"] == .number("60"))
        #expect(report["runs"] == .number("2"))
        for key in ["fileBytes", "medianMilliseconds", "recordsPerSecond", "peakResidentBytes", "heldMedianMilliseconds", "heldPeakResidentBytes"] {
            guard case .number(let text)? = report[key] else {
                Issue.record("\(key) is not a JSON number: \(result)")
                continue
            }
            #expect(Double(text).map { $0 >= 0 } == true, "\(key): \(text)")
        }
        #expect(number(report["peakResidentBytes"]).map { $0 > 1_000_000 && $0 < 500_000_000 } == true, "\(result)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty, "the bench removes its directories")
    }

    /// `bench live` on a few changes: every commit reaches the follower by each path, and the
    /// latencies are reported in order, and nothing is left behind.
    @Test func liveBenchReportsTheLatencyOfEachPath() throws {
        let sandbox = try Sandbox()
        let temporary = try sandbox.makeDirectory("tmp")
        let result = try sandbox.run(["bench", "live", "--changes", "30", "--rate", "50", "--json"], environment: ["TMPDIR": temporary])
        let report = try members(result)
        #expect(report["benchmark"] == .string("live"))
        for path in ["observe", "folder"] {
            guard case .object(let latencies)? = report[path] else {
                Issue.record("no \(path) in \(result)")
                continue
            }
            let figures = Dictionary(uniqueKeysWithValues: latencies)
            let (p50, p99, max) = (number(figures["p50Milliseconds"]), number(figures["p99Milliseconds"]), number(figures["maxMilliseconds"]))
            #expect(p50 != nil && p99 != nil && max != nil, "\(result)")
            if let p50, let p99, let max { #expect(0 <= p50 && p50 <= p99 && p99 <= max, "\(result)") }
            #expect(figures["changes"] == .number("30"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty, "the bench removes its directories")
    }

    /// `bench relay` on an embedded database, small: each part runs through real relay and
    /// device processes, the first sync brings every operation, the load reports each rate with
    /// its latencies, and nothing is left behind.
    @Test func relayBenchRunsEachPartOnAnEmbeddedRelay() throws {
        let sandbox = try Sandbox()
        let temporary = try sandbox.makeDirectory("tmp")
        let result = try sandbox.run(Self.smallRelayBench, environment: ["TMPDIR": temporary])
        let report = try members(result)
        #expect(report["benchmark"] == .string("relay"))
        #expect(report["backEnd"] == .string("embedded"))
        expectRelayParts(report, nodes: [1], result: result)
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty, "the bench removes its directories")
    }

    /// The same on PostgreSQL: the latency part runs its devices on two nodes, the load runs on
    /// one node and then on two, and every space the bench made is deleted afterwards.
    @Test func relayBenchRunsOnTwoNodesOfPostgreSQLAndDeletesItsSpaces() throws {
        let postgres = try PostgresServer()
        let sandbox = try Sandbox()
        let temporary = try sandbox.makeDirectory("tmp")
        let result = try sandbox.run(Self.smallRelayBench + ["--postgres", postgres.url], environment: ["TMPDIR": temporary])
        let report = try members(result)
        #expect(report["backEnd"] == .string("postgres"))
        expectRelayParts(report, nodes: [1, 2], result: result)
        if case .object(let latency)? = report["latency"] { #expect(Dictionary(uniqueKeysWithValues: latency)["nodes"] == .number("2")) }
        #expect(try postgres.query("SELECT count(*) FROM concord_relay_files") == "0", "every file the bench uploaded is deleted")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty, "the bench removes its directories")
    }

    /// A URL that is not PostgreSQL's is a bad argument; a database that cannot be reached stops
    /// the bench with one line that says why the node stopped; nothing is left behind.
    @Test func relayBenchRefusesABadOrUnreachableDatabase() throws {
        let sandbox = try Sandbox()
        let temporary = try sandbox.makeDirectory("tmp")
        let bad = try sandbox.run(["bench", "relay", "--postgres", "mysql://x@127.0.0.1/db"], environment: ["TMPDIR": temporary])
        expectOneLineFailure(bad, mentions: ["'mysql://x@127.0.0.1/db' is not a PostgreSQL URL"], code: 64)
        let unreachable = try sandbox.run(
            ["bench", "relay", "--part", "latency", "--postgres", "postgres://concord@127.0.0.1:9/postgres"], environment: ["TMPDIR": temporary])
        expectOneLineFailure(unreachable, mentions: ["the relay node exited with status 1 before it listened", "cannot reach the database at postgres://concord@127.0.0.1:9/postgres"], code: 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty, "the bench removes its directories")
    }

    private static let smallRelayBench = [
        "bench", "relay", "--changes", "20", "--rate", "50", "--records", "300", "--runs", "1",
        "--spaces", "20", "--rates", "20", "40", "--seconds", "1", "--json",
    ]

    private func expectRelayParts(_ report: [String: OrderedJSON], nodes: [Int], result: RunResult) {
        guard case .object(let latency)? = report["latency"], case .object(let firstSync)? = report["firstSync"],
              case .array(let loads)? = report["load"]
        else {
            Issue.record("a part is missing: \(result)")
            return
        }
        let figures = Dictionary(uniqueKeysWithValues: latency)
        if let p50 = number(figures["p50Milliseconds"]), let p99 = number(figures["p99Milliseconds"]) {
            #expect(0 <= p50 && p50 <= p99, "\(result)")
        } else {
            Issue.record("no latencies: \(result)")
        }
        #expect(figures["changes"] == .number("20"))

        let sync = Dictionary(uniqueKeysWithValues: firstSync)
        // 300 reminders with one update each, as `bench merge` builds them.
        #expect(number(sync["operations"]).map { $0 > 300 } == true, "\(result)")
        for key in ["uploadSeconds", "syncMedianSeconds", "mergeMedianSeconds", "mergeOverSync", "bytes", "files"] {
            #expect(number(sync[key]).map { $0 > 0 } == true, "\(key): \(result)")
        }

        #expect(loads.count == nodes.count, "\(result)")
        for (load, count) in zip(loads, nodes) {
            guard case .object(let members) = load else { continue }
            let run = Dictionary(uniqueKeysWithValues: members)
            #expect(run["nodes"] == .number("\(count)"))
            #expect(run["devices"] == .number("50"), "20 spaces of 2 and 3 devices in turn")
            guard case .array(let resident)? = run["waitingResidentBytes"], case .array(let rates)? = run["rates"] else {
                Issue.record("no memory or rates: \(result)")
                continue
            }
            #expect(resident.count == count && resident.allSatisfy { number($0).map { $0 > 1_000_000 } == true }, "\(result)")
            #expect(!rates.isEmpty, "\(result)")
            for case .object(let step) in rates {
                let figures = Dictionary(uniqueKeysWithValues: step)
                #expect(number(figures["uploads"]).map { $0 > 0 } == true, "\(result)")
                #expect(figures["uploads"] == figures["acknowledged"] || figures["failedUploads"] != .number("0"), "\(result)")
                if let p50 = number(figures["p50Milliseconds"]), let p99 = number(figures["p99Milliseconds"]) {
                    #expect(0 <= p50 && p50 <= p99, "\(result)")
                }
            }
        }
    }
}
