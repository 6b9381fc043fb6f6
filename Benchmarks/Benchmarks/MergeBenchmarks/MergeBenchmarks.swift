// The merge-throughput benchmarks of issue 5 at library level, over the same seeded workload as
// `syncctl bench`. Run from this directory: `swift package benchmark` (CONCORD_BENCH_RECORDS sets
// N, default 100000). Thresholds are checked in under Thresholds/, so a regression shows in
// `swift package benchmark thresholds check`.
import Benchmark
import ConcordCore
import ConcordExchange
import ConcordStore
import ConcordWorkload
import Foundation

/// The workload, built once per process (not measured): replica B's store and bundle, and replica
/// A's store to merge into.
final class Fixture: @unchecked Sendable {
    static let shared = try! Fixture()

    let directory: String
    let workload: ReminderWorkload
    let bundle: String
    let template: String
    let operations: Int
    let b: ConcordStore

    init() throws {
        let records = Int(ProcessInfo.processInfo.environment["CONCORD_BENCH_RECORDS"] ?? "") ?? 100_000
        workload = ReminderWorkload(records: records)
        directory = NSTemporaryDirectory() + "concord-benchmarks-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        b = try ConcordStore.create(at: directory + "/b.db", environment: workload.environmentB)
        try workload.buildB(into: b)
        operations = try b.status().operations
        bundle = directory + "/b.cbundle"
        try b.exportBundle(to: bundle)
        template = directory + "/a-template.db"
        let a = try ConcordStore.create(at: template, environment: workload.environmentA)
        try workload.buildA(into: a)
        try a.close()
    }

    var serial = 0

    /// A fresh copy of replica A.
    func freshA() throws -> ConcordStore {
        serial += 1
        let path = directory + "/a-\(serial).db"
        try FileManager.default.copyItem(atPath: template, toPath: path)
        // The template is never used as a replica: each copy takes its place (SPEC.md §9.1).
        return try ConcordStore.adoptLocation(at: path, environment: workload.environmentA)
    }

    func discard(_ store: ConcordStore) {
        try? store.close()
        try? FileManager.default.removeItem(atPath: store.path)
    }
}

let operationsPerSecond = BenchmarkMetric.custom("operations/s", polarity: .prefersLarger, useScalingFactor: false)

let benchmarks: @Sendable () -> Void = {
    let metrics: [BenchmarkMetric] = [.wallClock, operationsPerSecond, .mallocCountTotal, .peakMemoryResident]
    let configuration = Benchmark.Configuration(
        metrics: metrics, warmupIterations: 0, maxDuration: .seconds(120), maxIterations: 5,
        thresholds: [
            operationsPerSecond: .init(relative: [.p50: 15]),
            .peakMemoryResident: .init(relative: [.p50: 15]),
        ])

    Benchmark("merge: bundle of replica B into replica A, durable", configuration: configuration) { benchmark in
        let fixture = Fixture.shared
        let a = try! fixture.freshA()
        defer { fixture.discard(a) }
        var report = MergeReport()
        benchmark.startMeasurement()
        let seconds = Measure.seconds { report = try! a.mergeBundle(at: fixture.bundle).0 }
        benchmark.stopMeasurement()
        precondition(report.newOperationCount == fixture.operations)
        benchmark.measurement(operationsPerSecond, Int(Double(fixture.operations) / seconds))
    }

    Benchmark("export: replica B as a bundle", configuration: configuration) { benchmark in
        let fixture = Fixture.shared
        let path = fixture.directory + "/export.cbundle"
        var summary: BundleSummary?
        benchmark.startMeasurement()
        let seconds = Measure.seconds { summary = try! fixture.b.exportBundle(to: path) }
        benchmark.stopMeasurement()
        benchmark.measurement(operationsPerSecond, Int(Double(summary!.operations) / seconds))
    }

    Benchmark("writes: add reminders through the library", configuration: configuration) { benchmark in
        let fixture = Fixture.shared
        var workload = fixture.workload
        workload.updatesPerRecord = 0
        let path = fixture.directory + "/writes-\(UUID().uuidString).db"
        let store = try! ConcordStore.create(at: path, environment: workload.environmentB)
        defer { fixture.discard(store) }
        benchmark.startMeasurement()
        let seconds = Measure.seconds { try! workload.buildB(into: store) }
        benchmark.stopMeasurement()
        let operations = try! store.status().operations
        benchmark.measurement(operationsPerSecond, Int(Double(operations) / seconds))
    }
}
