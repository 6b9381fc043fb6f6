import ConcordStore
import ConcordWorkload
import Foundation
import Testing

// Helpers for the crash, concurrency and disk-fault tests: syncctl killed at a chosen moment,
// several syncctl processes at once, and large stores and bundles built through the library.

/// The number an environment variable holds, or `fallback`.
func environmentNumber(_ name: String, default fallback: Int) -> Int {
    ProcessInfo.processInfo.environment[name].flatMap { Int($0) } ?? fallback
}

extension Sandbox {
    /// Runs syncctl and sends it SIGKILL at `point`, unless it ended first. The result's
    /// `wasKilled` tells whether the kill found it running.
    func runKilled(_ arguments: [String], at point: KillPoint) throws -> RunResult {
        try runWatched(arguments, killAt: point).result
    }

    /// Runs syncctl to its end, sampling `measure` all along; returns the result, how long it
    /// took and the greatest value `measure` gave (for a `KillPoint.progress` later).
    func runSampling(_ arguments: [String], measure: @escaping () -> Int) throws -> (result: RunResult, seconds: TimeInterval, greatest: Int) {
        try runWatched(arguments, killAt: nil, measure: measure)
    }

    private func runWatched(
        _ arguments: [String], killAt point: KillPoint?, measure: (() -> Int)? = nil
    ) throws -> (result: RunResult, seconds: TimeInterval, greatest: Int) {
        let token = UUID().uuidString
        let outURL = root.appendingPathComponent(".watched-stdout-\(token)")
        let errURL = root.appendingPathComponent(".watched-stderr-\(token)")
        defer {
            try? FileManager.default.removeItem(at: outURL)
            try? FileManager.default.removeItem(at: errURL)
        }
        let start = Date()
        let process = try startProcess(
            SyncctlBinary.require(), arguments, environment: environment(), directory: root, stdout: outURL, stderr: errURL)
        var greatest = 0
        var killAt: Date?
        while process.isRunning {
            let now = Date()
            if let measure { greatest = max(greatest, measure()) }
            if let point, killAt == nil {
                switch point {
                case let .after(delay): killAt = start.addingTimeInterval(delay)
                case let .progress(measure, threshold, then): if measure() >= threshold { killAt = now.addingTimeInterval(then) }
                }
            }
            if let killAt, now >= killAt {
                kill(process.processIdentifier, SIGKILL)
                break
            }
            if now.timeIntervalSince(start) > 120 {
                kill(process.processIdentifier, SIGKILL)
                break
            }
            usleep(200)
        }
        process.waitUntilExit()
        let seconds = Date().timeIntervalSince(start)
        let result = RunResult(
            arguments: arguments,
            stdout: String(decoding: (try? Data(contentsOf: outURL)) ?? Data(), as: UTF8.self),
            stderr: String(decoding: (try? Data(contentsOf: errURL)) ?? Data(), as: UTF8.self),
            status: process.terminationStatus, crashed: process.terminationReason == .uncaughtSignal, timedOut: false)
        return (result, seconds, greatest)
    }

    /// Runs `arguments` to completion and returns the result with how long it took, in seconds.
    func timed(_ arguments: [String]) throws -> (RunResult, TimeInterval) {
        let start = Date()
        let result = try run(arguments)
        return (result, Date().timeIntervalSince(start))
    }

    /// Declares the store copied to `path` moved rather than copied (`init --moved`), so that it
    /// takes writes: the tests never use the original as a replica alongside it.
    func adoptCopy(_ path: String) throws {
        let result = try run(["init", "--moved", "--store", path])
        guard result.succeeded else { throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "\(result)"]) }
    }

    /// Copies a file or a directory (replacing what is at `destination`).
    func copy(_ source: String, to destination: String) throws {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: destination + suffix) }
        try FileManager.default.copyItem(atPath: source, toPath: destination)
    }
}

/// When a test kills a process.
enum KillPoint: CustomStringConvertible {
    /// This many seconds after it started.
    case after(TimeInterval)
    /// `then` seconds after `measure` (a file's size, say) first reaches `threshold`.
    case progress(measure: () -> Int, threshold: Int, then: TimeInterval)

    var description: String {
        switch self {
        case let .after(delay): String(format: "after %.3f s", delay)
        case let .progress(_, threshold, then): String(format: "%.3f s after reaching %d bytes", then, threshold)
        }
    }
}

/// The size of the file at `path`, or 0 when there is none.
func sizeOfFile(_ path: String) -> Int {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_size) : 0
}

/// The size of the largest file in `directory` (0 when it is empty or missing).
func largestFile(in directory: String) -> Int {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return 0 }
    return names.map { sizeOfFile(directory + "/" + $0) }.max() ?? 0
}

extension RunResult {
    /// Whether the process died of the SIGKILL a test sent it.
    var wasKilled: Bool { crashed && status == SIGKILL }
}

extension Store {
    /// `syncctl verify` must say the store is sound.
    func expectSound(_ context: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try run("verify")
        #expect(result.succeeded && result.out.hasPrefix("sound: "), "\(context()): verify: \(result)", sourceLocation: sourceLocation)
    }
}

/// Large stores of the seeded reminders workload (`ConcordWorkload`), built through the library:
/// far faster than thousands of `syncctl` runs.
enum LargeStores {
    /// Writes replica B of the workload (about 8 operations per record) into a new store at `path`.
    static func makeB(at path: String, records: Int, seed: UInt64) throws {
        let store = try ConcordStore.create(at: path, name: "workload-b")
        try ReminderWorkload(records: records, seed: seed).buildB(into: store)
        try store.close()
    }

    /// Writes replica A of the workload (concurrent creates of a tenth of B's reminders) into a
    /// new store at `path`.
    static func makeA(at path: String, records: Int, seed: UInt64) throws {
        let store = try ConcordStore.create(at: path, name: "workload-a")
        try ReminderWorkload(records: records, seed: seed).buildA(into: store)
        try store.close()
    }
}
