import Foundation
import Testing

// A fleet of real syncctl processes on shared stores, for soak tests (issue 15): long-lived ones
// (`serve`, `sync --watch`, and later modes such as live sync or `changes --follow`), loops of
// short commands on threads of their own, a sampler of every live process's open files, and the
// tallies and problems a soak reports. A soak test composes a workload from these; the fleet
// knows nothing of reminders or stores.

/// Many syncctl processes at once, each counted, its standard error scanned, its open files
/// sampled while it runs.
final class ProcessFleet: @unchecked Sendable {
    /// Words that must never appear on a syncctl process's standard error: each means SQLite
    /// saw the store damaged or its locking defeated.
    static let forbiddenPhrases = ["disk I/O error", "database is locked", "malformed"]

    /// An open descriptor of a store's `-wal` or `-shm` file that was unlinked: the process
    /// writes where no other process reads (SQLite's "How To Corrupt", §2).
    struct DeletedFile: CustomStringConvertible {
        var label: String
        var pid: Int32
        var descriptor: String
        var target: String
        var firstSeen: TimeInterval

        var description: String {
            String(format: "%@ (pid %d) held fd %@ -> %@, first seen %.1f s into the run", label, pid, descriptor, target, firstSeen)
        }
    }

    /// What one short command did.
    struct Outcome {
        var label: String
        var kind: String
        var result: RunResult
        /// The fleet sent it SIGKILL (`killEverything`): it may or may not have done its work.
        var killedByFleet: Bool
        /// It ended after the fleet killed the others (a client whose server died, say).
        var endedAfterKill: Bool

        /// Exited 0: what it did is durable and must be found later.
        var succeeded: Bool { result.succeeded }
    }

    let binary: URL
    let environment: [String: String]
    /// Where the fleet writes each process's output.
    let outputDirectory: URL
    let start = Date()

    fileprivate let lock = NSLock()
    /// pid -> label of every process started and not yet reaped: what the sampler reads.
    private var live: [Int32: String] = [:]
    private var stopping = false
    private var killMoment: Date?
    private var killedLabels: [String] = []
    private let loops = DispatchGroup()
    private let sampler = DispatchGroup()
    private var samplerStopped = false
    private var serial = 0
    private var started = 0
    private var counts: [String: Int] = [:]
    fileprivate var exitedZero: [String: Int] = [:]
    private var deleted: [String: DeletedFile] = [:]
    private var samples = 0
    /// Deleted `-shm` descriptors seen for less than `shmGrace` so far.
    private var suspects: [String: DeletedFile] = [:]
    /// Those that were gone within `shmGrace`: held by the closing process that deleted them.
    private var closingShm = 0
    private var problemList: [String] = []

    init(sandbox: Sandbox) throws {
        binary = try SyncctlBinary.require()
        environment = sandbox.environment()
        outputDirectory = URL(fileURLWithPath: try sandbox.makeDirectory("fleet-output"))
    }

    /// Seconds since the fleet was made.
    var elapsed: TimeInterval { Date().timeIntervalSince(start) }

    /// Whether the loops should stop (after `stopLoops` or `killEverything`).
    var isStopping: Bool { lock.withLock { stopping } }

    /// Records a problem for the final report (thread-safe).
    func problem(_ text: String) {
        lock.withLock { problemList.append(String(format: "[%.1f s] ", elapsed) + text) }
    }

    var problems: [String] { lock.withLock { problemList } }
    var deletedFiles: [DeletedFile] { lock.withLock { deleted.values.sorted { $0.firstSeen < $1.firstSeen } } }
    var processesStarted: Int { lock.withLock { started } }
    var commandCounts: [String: Int] { lock.withLock { counts } }
    var fdSamples: Int { lock.withLock { samples } }
    var killed: [String] { lock.withLock { killedLabels } }

    // MARK: Processes

    private func launch(_ label: String, _ arguments: [String]) throws -> (Process, URL, URL)? {
        let (name, refused) = lock.withLock { () -> (String, Bool) in
            serial += 1
            return (String(format: "%06d-", serial) + label.filter { $0.isLetter || $0.isNumber || $0 == "-" }, stopping && killMoment != nil)
        }
        // Once the fleet has killed everything, nothing new starts until the test says so
        // (`resume`): the moment of the kill is one instant of the whole fleet.
        if refused { return nil }
        let out = outputDirectory.appendingPathComponent(name + ".out")
        let err = outputDirectory.appendingPathComponent(name + ".err")
        let process = try startProcess(binary, arguments, environment: environment, directory: outputDirectory, stdout: out, stderr: err)
        let lateKill = lock.withLock { () -> Bool in
            started += 1
            live[process.processIdentifier] = label
            return killMoment != nil && stopping
        }
        // Started while `killEverything` ran: it belongs to the killed instant too.
        if lateKill { kill(process.processIdentifier, SIGKILL) }
        return (process, out, err)
    }

    private func reap(_ process: Process, label: String, arguments: [String], out: URL, err: URL, timedOut: Bool) -> RunResult {
        process.waitUntilExit()
        lock.withLock { _ = live.removeValue(forKey: process.processIdentifier) }
        let result = RunResult(
            arguments: arguments,
            stdout: String(decoding: (try? Data(contentsOf: out)) ?? Data(), as: UTF8.self),
            stderr: String(decoding: (try? Data(contentsOf: err)) ?? Data(), as: UTF8.self),
            status: process.terminationStatus, crashed: process.terminationReason == .uncaughtSignal, timedOut: timedOut)
        for phrase in Self.forbiddenPhrases where result.stderr.localizedCaseInsensitiveContains(phrase) {
            problem("\(label): stderr says \"\(phrase)\": \(result)")
        }
        return result
    }

    /// Runs one short command to its end (SIGKILL after `timeout` seconds) and counts it under
    /// `kind`. A non-zero exit is a problem unless the fleet killed it, it ended after the fleet
    /// killed everything, or `expected` says it is a failure the workload causes on purpose.
    /// Returns nil when the fleet is killed and starts nothing.
    func run(
        _ kind: String, label: String, _ arguments: [String], timeout: TimeInterval = 120, expected: ((RunResult) -> Bool)? = nil
    ) throws -> Outcome? {
        guard let (process, out, err) = try launch(label, arguments) else { return nil }
        let watchdog = FleetWatchdog(process)
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { watchdog.fire() }
        process.waitUntilExit()
        let timedOut = watchdog.disarm()
        let result = reap(process, label: label, arguments: arguments, out: out, err: err, timedOut: timedOut)
        try? FileManager.default.removeItem(at: out)
        try? FileManager.default.removeItem(at: err)
        let (killedByFleet, afterKill) = lock.withLock { () -> (Bool, Bool) in
            counts[kind, default: 0] += 1
            if result.succeeded { exitedZero[kind, default: 0] += 1 }
            let killed = killMoment != nil && result.wasKilled
            return (killed, killMoment != nil)
        }
        if !result.succeeded, !killedByFleet, !afterKill, expected?(result) != true {
            problem("\(label): \(timedOut ? "timed out after \(Int(timeout)) s" : "failed"): \(result)")
        }
        return Outcome(label: label, kind: kind, result: result, killedByFleet: killedByFleet, endedAfterKill: afterKill)
    }

    /// Starts a long-lived process (`serve`, a watcher); the fleet samples it until it is stopped.
    func startDaemon(_ kind: String, label: String, _ arguments: [String]) throws -> Daemon {
        guard let (process, out, err) = try launch(label, arguments) else {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "the fleet is killed; \(label) not started"])
        }
        lock.withLock { counts[kind, default: 0] += 1 }
        return Daemon(fleet: self, kind: kind, label: label, arguments: arguments, process: process, out: out, err: err)
    }

    /// A long-lived process of the fleet.
    final class Daemon: @unchecked Sendable {
        let kind: String
        let label: String
        let arguments: [String]
        private unowned let fleet: ProcessFleet
        private let process: Process
        private let out: URL
        private let err: URL

        fileprivate init(fleet: ProcessFleet, kind: String, label: String, arguments: [String], process: Process, out: URL, err: URL) {
            self.fleet = fleet
            self.kind = kind
            self.label = label
            self.arguments = arguments
            self.process = process
            self.out = out
            self.err = err
        }

        var isRunning: Bool { process.isRunning }
        var pid: Int32 { process.processIdentifier }
        var stdout: String { String(decoding: (try? Data(contentsOf: out)) ?? Data(), as: UTF8.self) }

        /// Sends `signal` (if it still runs) and waits for the end, SIGKILL after `timeout` s.
        func stop(_ signal: Int32, timeout: TimeInterval = 30) -> RunResult {
            if process.isRunning { kill(process.processIdentifier, signal) }
            let deadline = Date().addingTimeInterval(timeout)
            while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            let timedOut = process.isRunning
            if timedOut { kill(process.processIdentifier, SIGKILL) }
            let result = fleet.reap(process, label: label, arguments: arguments, out: out, err: err, timedOut: timedOut)
            if result.succeeded { fleet.lock.withLock { fleet.exitedZero[kind, default: 0] += 1 } }
            return result
        }

        /// Stops it with `signal` and records a problem unless it exited 0 with `stopped` as its
        /// last line (SPEC.md §11: serve and `sync --watch` finish their work, then say so), and
        /// wrote nothing on stderr but lines that `expected` allows.
        @discardableResult
        func stopCleanly(_ signal: Int32, timeout: TimeInterval = 30, expected: (String) -> Bool = { _ in false }) -> RunResult {
            let result = stop(signal, timeout: timeout)
            let errors = result.stderrLines.filter { !expected($0) }
            if !result.succeeded || result.stdoutLines.last != "stopped" || !errors.isEmpty {
                // Its stdout is one line per sync of the whole run: the end of it, and stderr first.
                fleet.problem(
                    "\(label) did not stop cleanly on signal \(signal): \(result.crashed ? "signal" : "exit") \(result.status)"
                        + (result.timedOut ? " (timed out)" : "") + ", last line \(String(reflecting: result.stdoutLines.last ?? ""))"
                        + ", \(errors.count) line(s) on stderr:\n    " + errors.prefix(12).joined(separator: "\n    ")
                        + (errors.count > 12 ? "\n    … and \(errors.count - 12) more" : ""))
            }
            return result
        }
    }

    // MARK: Loops

    /// Runs `body(iteration)` on a thread of its own, again and again until the fleet stops.
    func loop(_ label: String, _ body: @escaping @Sendable (Int) throws -> Void) {
        loops.enter()
        let thread = Thread { [self] in
            defer { loops.leave() }
            var iteration = 0
            while !isStopping {
                do {
                    try body(iteration)
                } catch {
                    problem("\(label): the loop threw \(error)")
                    return
                }
                iteration += 1
            }
        }
        thread.name = label
        thread.start()
    }

    /// Asks the loops to stop and waits until each has finished its command under way.
    func stopLoops() {
        lock.withLock { stopping = true }
        loops.wait()
    }

    /// SIGKILLs every live process at once (daemons and commands under way) and stops the loops.
    /// Daemons must still be reaped with `stop`.
    func killEverything() {
        let victims = lock.withLock { () -> [Int32: String] in
            stopping = true
            killMoment = Date()
            return live
        }
        for pid in victims.keys { kill(pid, SIGKILL) }
        lock.withLock { killedLabels = victims.values.sorted() }
        loops.wait()
    }

    /// Lets processes start again after `killEverything` (to restart serve and exchange).
    func resume() {
        lock.withLock { stopping = false }
    }

    // MARK: Sampling open files

    /// Starts sampling /proc/PID/fd of every live process every `interval` seconds.
    func startSampling(every interval: TimeInterval = 0.025) {
        sampler.enter()
        let thread = Thread { [self] in
            defer { sampler.leave() }
            while !lock.withLock({ samplerStopped }) {
                sampleOnce()
                Thread.sleep(forTimeInterval: interval)
            }
        }
        thread.name = "fd sampler"
        thread.start()
    }

    func stopSampling() {
        lock.withLock { samplerStopped = true }
        sampler.wait()
        // One last look at whatever is still alive.
        sampleOnce()
    }

    /// How long a deleted `-shm` alone may be held before it counts. SQLite's last connection to a
    /// store unlinks the `-shm` and only then closes it (`unixShmUnmap`), so the process that
    /// deleted it holds it for an instant; one still held this long after it was first seen
    /// belongs to a connection that goes on using a wal-index no other process shares. A deleted
    /// `-wal` counts at once: that connection closes the WAL before deleting it (`sqlite3WalClose`),
    /// so a deleted one is only ever held by a process whose WAL another process removed.
    static let shmGrace: TimeInterval = 0.5

    private func sampleOnce() {
        let processes = lock.withLock { live }
        let seconds = elapsed
        var found: [String: DeletedFile] = [:]
        for (pid, label) in processes {
            let directory = "/proc/\(pid)/fd"
            guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: directory) else { continue }
            for descriptor in descriptors {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + descriptor) else { continue }
                if target.hasSuffix("-wal (deleted)") || target.hasSuffix("-shm (deleted)") {
                    found["\(pid) \(descriptor) \(target)"] = DeletedFile(label: label, pid: pid, descriptor: descriptor, target: target, firstSeen: seconds)
                }
            }
        }
        lock.withLock {
            samples += 1
            let holdingDeletedWAL = Set(found.values.filter { $0.target.hasSuffix("-wal (deleted)") }.map(\.pid))
            for (key, file) in found where deleted[key] == nil {
                if holdingDeletedWAL.contains(file.pid) {
                    deleted[key] = suspects.removeValue(forKey: key) ?? file
                } else if let suspect = suspects[key] {
                    if seconds - suspect.firstSeen >= Self.shmGrace {
                        deleted[key] = suspect
                        suspects[key] = nil
                    }
                } else {
                    suspects[key] = file
                }
            }
            // A deleted -shm that is gone again: its process closed it right after deleting it.
            for key in suspects.keys where found[key] == nil {
                suspects[key] = nil
                closingShm += 1
            }
        }
    }

    // MARK: Report

    /// The totals: processes, commands by kind, fd samples.
    var totals: String {
        let (counts, zero): ([String: Int], [String: Int]) = lock.withLock { (self.counts, self.exitedZero) }
        let kinds = counts.keys.sorted().map { kind -> String in
            "\(kind) \(counts[kind] ?? 0) (\(zero[kind] ?? 0) exited 0)"
        }.joined(separator: ", ")
        let closing = lock.withLock { closingShm }
        return "\(processesStarted) processes started; commands by kind: \(kinds); \(fdSamples) fd samples; "
            + "\(deletedFiles.count) deleted -wal/-shm descriptors held; \(closing) deleted -shm seen only in the instant "
            + "their own process closed them (SQLite's last connection unlinks the -shm, then closes it)"
    }
}

/// Kills a command that runs too long, and remembers that it did.
private final class FleetWatchdog: @unchecked Sendable {
    private let lock = NSLock()
    private var process: Process?
    private var fired = false

    init(_ process: Process) { self.process = process }

    func fire() {
        lock.withLock {
            if let process, process.isRunning {
                fired = true
                kill(process.processIdentifier, SIGKILL)
            }
        }
    }

    /// Disarms it; returns whether it fired.
    func disarm() -> Bool {
        lock.withLock {
            process = nil
            return fired
        }
    }
}

/// The seed of a soak: `$CONCORD_SOAK_SEED` to replay one, else random (printed by the test).
enum SoakSettings {
    static let seed: UInt64 = ProcessInfo.processInfo.environment["CONCORD_SOAK_SEED"].flatMap { UInt64($0) }
        ?? UInt64.random(in: 1...999_999)
    /// Seconds of each phase's concurrent run: `$CONCORD_SOAK_SECONDS`, default 60.
    static let seconds = max(5, environmentNumber("CONCORD_SOAK_SECONDS", default: 60))
}
