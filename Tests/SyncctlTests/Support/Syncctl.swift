import Foundation
import Testing

// Helpers that run the built `syncctl` binary as a subprocess, each test in its own sandbox.

/// Where the built `syncctl` binary is: `$SYNCCTL_BINARY`, else the first directory at or above the
/// test runner (or a loaded test bundle) that holds an executable file named `syncctl`.
enum SyncctlBinary {
    static let url: URL? = locate()

    private static func locate() -> URL? {
        let fileManager = FileManager.default
        if let override = ProcessInfo.processInfo.environment["SYNCCTL_BINARY"], !override.isEmpty {
            return URL(fileURLWithPath: override)
        }
        var starts = [URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()]
        starts += Bundle.allBundles.map(\.bundleURL)
        if let executable = Bundle.main.executableURL { starts.append(executable) }
        for start in starts {
            var directory = start.deletingLastPathComponent()
            while true {
                let candidate = directory.appendingPathComponent("syncctl")
                var isDirectory: ObjCBool = false
                if fileManager.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue,
                   fileManager.isExecutableFile(atPath: candidate.path) {
                    return candidate
                }
                let parent = directory.deletingLastPathComponent()
                if parent.path == directory.path { break }
                directory = parent
            }
        }
        return nil
    }

    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws -> URL {
        try #require(url, "syncctl binary not found next to the test runner; build it or set SYNCCTL_BINARY", sourceLocation: sourceLocation)
    }
}

/// What one run of a program did.
struct RunResult: CustomStringConvertible {
    var arguments: [String]
    var stdout: String
    var stderr: String
    /// The exit code, or the signal number when `crashed`.
    var status: Int32
    /// Whether the process died of a signal (a crash) rather than exiting.
    var crashed: Bool
    var timedOut: Bool

    var succeeded: Bool { !crashed && !timedOut && status == 0 }
    /// Standard output without its trailing newline.
    var out: String { stdout.hasSuffix("\n") ? String(stdout.dropLast()) : stdout }
    var stdoutLines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).dropLastIfEmpty() }
    var stderrLines: [String] { stderr.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).dropLastIfEmpty() }

    var description: String {
        "syncctl \(arguments.joined(separator: " ")) -> \(crashed ? "signal" : "exit") \(status)"
            + "\n--- stdout ---\n\(stdout.prefix(2000))\n--- stderr ---\n\(stderr.prefix(2000))"
    }
}

extension Array where Element == String {
    fileprivate func dropLastIfEmpty() -> [String] {
        last == "" ? Array(dropLast()) : self
    }
}

/// Starts `executable` with `arguments` and exactly `environment` in `directory`, with no standard
/// input and its output written to the files `stdout` and `stderr` (no pipe can fill up).
func startProcess(
    _ executable: URL, _ arguments: [String], environment: [String: String], directory: URL, stdout: URL, stderr: URL
) throws -> Process {
    _ = FileManager.default.createFile(atPath: stdout.path, contents: nil)
    _ = FileManager.default.createFile(atPath: stderr.path, contents: nil)
    let outHandle = try FileHandle(forWritingTo: stdout)
    let errHandle = try FileHandle(forWritingTo: stderr)
    defer {
        try? outHandle.close()
        try? errHandle.close()
    }
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.environment = environment
    process.currentDirectoryURL = directory
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = outHandle
    process.standardError = errHandle
    try process.run()
    return process
}

/// Runs `executable` with `arguments` and exactly `environment`, no standard input, output in files
/// (no pipe can fill up), killed after `timeout` seconds.
func runProcess(
    _ executable: URL, _ arguments: [String], environment: [String: String], scratch: URL, timeout: TimeInterval = 60
) throws -> RunResult {
    let token = UUID().uuidString
    let outURL = scratch.appendingPathComponent("stdout-\(token)")
    let errURL = scratch.appendingPathComponent("stderr-\(token)")
    defer {
        try? FileManager.default.removeItem(at: outURL)
        try? FileManager.default.removeItem(at: errURL)
    }
    let process = try startProcess(executable, arguments, environment: environment, directory: scratch, stdout: outURL, stderr: errURL)
    let watchdog = Watchdog(process)
    DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { watchdog.fire() }
    process.waitUntilExit()
    watchdog.disarm()
    let stdout = String(decoding: (try? Data(contentsOf: outURL)) ?? Data(), as: UTF8.self)
    let stderr = String(decoding: (try? Data(contentsOf: errURL)) ?? Data(), as: UTF8.self)
    return RunResult(
        arguments: arguments, stdout: stdout, stderr: stderr, status: process.terminationStatus,
        crashed: process.terminationReason == .uncaughtSignal, timedOut: watchdog.fired)
}

/// Terminates a process that runs too long.
private final class Watchdog: @unchecked Sendable {
    private let lock = NSLock()
    private var process: Process?
    private(set) var fired = false

    init(_ process: Process) { self.process = process }

    func fire() {
        lock.lock()
        defer { lock.unlock() }
        if let process, process.isRunning {
            fired = true
            process.terminate()
        }
    }

    func disarm() {
        lock.lock()
        process = nil
        lock.unlock()
    }
}

/// A private temporary directory with its own HOME and XDG_DATA_HOME, removed when released.
final class Sandbox {
    let root: URL
    let home: URL
    let dataHome: URL
    /// Where the output of the processes it runs is kept while they run.
    let scratch: URL
    /// Variables every run of this sandbox gets besides the fixed ones (before `overrides`).
    var variables: [String: String] = [:]

    init() throws {
        root = FileManager.default.temporaryDirectory
            .appendingPathComponent("syncctl-tests-\(UUID().uuidString)", isDirectory: true)
        home = root.appendingPathComponent("home", isDirectory: true)
        dataHome = root.appendingPathComponent("xdg-data", isDirectory: true)
        scratch = root.appendingPathComponent(".scratch", isDirectory: true)
        for directory in [home, dataHome, scratch] {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
    }

    deinit {
        try? FileManager.default.removeItem(at: root)
    }

    /// A path inside the sandbox.
    func path(_ name: String) -> String {
        root.appendingPathComponent(name).path
    }

    /// The environment every run gets: nothing inherited but PATH, the sandbox's HOME and
    /// XDG_DATA_HOME, TZ=UTC, no SYNCCTL_STORE. `overrides` adds or replaces variables; a nil
    /// value removes one.
    func environment(_ overrides: [String: String?] = [:]) -> [String: String] {
        var environment: [String: String] = [
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
            "HOME": home.path,
            "XDG_DATA_HOME": dataHome.path,
            "TZ": "UTC",
            "LANG": "C.UTF-8",
            // A crash should end the process at once, not spend a second printing a backtrace.
            "SWIFT_BACKTRACE": "enable=no",
        ]
        environment.merge(variables) { _, new in new }
        for (key, value) in overrides {
            environment[key] = value
        }
        return environment
    }

    /// Runs syncctl with exactly these arguments.
    func run(_ arguments: [String], environment overrides: [String: String?] = [:]) throws -> RunResult {
        try runProcess(SyncctlBinary.require(), arguments, environment: environment(overrides), scratch: scratch)
    }

    /// Runs python3 with a script and arguments (for making SQLite files of other kinds).
    @discardableResult
    func python(_ script: String, _ arguments: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) throws -> RunResult {
        let python = try #require(Python.url, "python3 is needed to craft SQLite files", sourceLocation: sourceLocation)
        let result = try runProcess(python, ["-c", script] + arguments, environment: environment(), scratch: scratch)
        #expect(result.succeeded, "python3 failed: \(result)", sourceLocation: sourceLocation)
        return result
    }

    /// Creates a store at `name` (inside the sandbox) and returns it.
    func makeStore(_ name: String = "store.db", replicaName: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws -> Store {
        let store = Store(sandbox: self, path: path(name))
        var arguments = ["init", "--store", store.path]
        if let replicaName { arguments += ["--name", replicaName] }
        let result = try run(arguments)
        #expect(result.succeeded, "\(result)", sourceLocation: sourceLocation)
        return store
    }
}

enum Python {
    static let url: URL? = {
        var candidates = ["/usr/bin/python3", "/usr/local/bin/python3"]
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            candidates.append("\(directory)/python3")
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }.map(URL.init(fileURLWithPath:))
    }()
}

/// One store in a sandbox; every run gets `--store PATH` appended.
struct Store {
    let sandbox: Sandbox
    let path: String

    /// Runs a command on this store.
    @discardableResult
    func run(_ arguments: String..., environment: [String: String?] = [:]) throws -> RunResult {
        try sandbox.run(arguments + ["--store", path], environment: environment)
    }

    func run(arguments: [String]) throws -> RunResult {
        try sandbox.run(arguments + ["--store", path])
    }

    /// Runs a command that must succeed with nothing on standard error; returns its output
    /// without the trailing newline.
    @discardableResult
    func ok(_ arguments: String..., sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let result = try sandbox.run(arguments + ["--store", path])
        #expect(result.succeeded, "\(result)", sourceLocation: sourceLocation)
        #expect(result.stderr.isEmpty, "\(result)", sourceLocation: sourceLocation)
        return result.out
    }

    /// Adds a reminder and returns its id.
    func addReminder(_ title: String, _ options: String..., sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let result = try sandbox.run(["reminder", "add", title] + options + ["--store", path])
        #expect(result.succeeded, "\(result)", sourceLocation: sourceLocation)
        let id = result.out
        #expect(isRecordID(id), "reminder add printed \(String(reflecting: id))", sourceLocation: sourceLocation)
        return id
    }

    /// Adds a note and returns its id.
    func addNote(_ title: String, _ options: String..., sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let result = try sandbox.run(["note", "add", title] + options + ["--store", path])
        #expect(result.succeeded, "\(result)", sourceLocation: sourceLocation)
        let id = result.out
        #expect(isRecordID(id), "note add printed \(String(reflecting: id))", sourceLocation: sourceLocation)
        return id
    }

    /// `show ID --json` as an object.
    func show(_ id: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        try jsonObject(ok("show", id, "--json", sourceLocation: sourceLocation), sourceLocation: sourceLocation)
    }

    /// `reminder list --json` (with `--all` when asked) as objects.
    func reminders(all: Bool = false, sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
        let output = all ? try ok("reminder", "list", "--all", "--json", sourceLocation: sourceLocation)
            : try ok("reminder", "list", "--json", sourceLocation: sourceLocation)
        return try jsonArray(output, sourceLocation: sourceLocation)
    }

    func notes(all: Bool = false, sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
        let output = all ? try ok("note", "list", "--all", "--json", sourceLocation: sourceLocation)
            : try ok("note", "list", "--json", sourceLocation: sourceLocation)
        return try jsonArray(output, sourceLocation: sourceLocation)
    }

    func status(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        try jsonObject(ok("status", "--json", sourceLocation: sourceLocation), sourceLocation: sourceLocation)
    }

    func operationCount(sourceLocation: SourceLocation = #_sourceLocation) throws -> Int {
        try #require(status(sourceLocation: sourceLocation)["operations"] as? Int, sourceLocation: sourceLocation)
    }

    func dump(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        try ok("dump", sourceLocation: sourceLocation)
    }

    /// The store as seen from outside: its dump and its `status --json`.
    func snapshot(sourceLocation: SourceLocation = #_sourceLocation) throws -> Snapshot {
        Snapshot(
            dump: try dump(sourceLocation: sourceLocation),
            status: try ok("status", "--json", sourceLocation: sourceLocation))
    }

    /// The store file's bytes.
    func bytes() throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: path))
    }

    /// Runs a command that must be refused: a non-zero exit (no crash), nothing on standard
    /// output, exactly one line on standard error that starts with "syncctl: " and contains each
    /// of `mentions` (case-insensitively), and the store unchanged.
    @discardableResult
    func expectRefused(
        _ arguments: [String], mentions: [String] = [], code: Int32? = nil, environment: [String: String?] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> RunResult {
        let before = try snapshot(sourceLocation: sourceLocation)
        let result = try sandbox.run(arguments + ["--store", path], environment: environment)
        expectOneLineFailure(result, mentions: mentions, code: code, sourceLocation: sourceLocation)
        let after = try snapshot(sourceLocation: sourceLocation)
        #expect(after == before, "the store changed after a refused command: \(result)", sourceLocation: sourceLocation)
        return result
    }
}

struct Snapshot: Equatable {
    var dump: String
    var status: String
}

/// Checks a refused run: non-zero exit without a crash, nothing on standard output, one line on
/// standard error starting with "syncctl: " and mentioning each of `mentions`; with `code`, that
/// exit code (SPEC.md §12: 64 for a bad command line, 1 otherwise).
func expectOneLineFailure(_ result: RunResult, mentions: [String] = [], code: Int32? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(!result.crashed, "syncctl crashed: \(result)", sourceLocation: sourceLocation)
    #expect(!result.timedOut, "syncctl timed out: \(result)", sourceLocation: sourceLocation)
    #expect(result.status != 0, "expected a failure: \(result)", sourceLocation: sourceLocation)
    if let code, !result.crashed {
        #expect(result.status == code, "expected exit code \(code): \(result)", sourceLocation: sourceLocation)
    }
    #expect(result.stdout.isEmpty, "expected nothing on stdout: \(result)", sourceLocation: sourceLocation)
    #expect(result.stderrLines.count == 1, "expected exactly one line on stderr: \(result)", sourceLocation: sourceLocation)
    #expect(result.stderr.hasSuffix("\n"), "stderr should end with a newline: \(result)", sourceLocation: sourceLocation)
    let line = result.stderrLines.first ?? ""
    #expect(line.hasPrefix("syncctl: "), "stderr should start with 'syncctl: ': \(result)", sourceLocation: sourceLocation)
    for mention in mentions {
        #expect(line.lowercased().contains(mention.lowercased()), "stderr should mention \(String(reflecting: mention)): \(result)", sourceLocation: sourceLocation)
    }
}

// MARK: Values

/// Whether `text` is 32 lowercase hexadecimal digits.
func isRecordID(_ text: String) -> Bool {
    text.utf8.count == 32 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
}

func jsonValue(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Any {
    do {
        return try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    } catch {
        Issue.record("not JSON: \(String(reflecting: text.prefix(500))) (\(error))", sourceLocation: sourceLocation)
        throw error
    }
}

func jsonObject(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
    try #require(try jsonValue(text, sourceLocation: sourceLocation) as? [String: Any], "not a JSON object: \(text.prefix(500))", sourceLocation: sourceLocation)
}

func jsonArray(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
    try #require(try jsonValue(text, sourceLocation: sourceLocation) as? [[String: Any]], "not a JSON array of objects: \(text.prefix(500))", sourceLocation: sourceLocation)
}

extension Dictionary where Key == String, Value == Any {
    func string(_ key: String) -> String? { self[key] as? String }
    func bool(_ key: String) -> Bool? { self[key] as? Bool }
    func int(_ key: String) -> Int? { self[key] as? Int }
    func strings(_ key: String) -> [String]? { self[key] as? [String] }
    func object(_ key: String) -> [String: Any]? { self[key] as? [String: Any] }
    /// Whether the key is present with a JSON null.
    func isNull(_ key: String) -> Bool { self[key] is NSNull }
}

/// The keys every reminder object has (SPEC.md, "JSON output").
let reminderKeys: Set<String> = [
    "id", "kind", "title", "notes", "due", "priority", "completed", "completedAt", "snoozedUntil", "repeat", "tags", "deleted",
]
/// The keys every note object has.
let noteKeys: Set<String> = ["id", "kind", "title", "body", "pinned", "tags", "deleted"]
/// The keys of the objects `list` and `show` print: the dump's, and `conflict` (SPEC.md §10).
let listedReminderKeys = reminderKeys.union(["conflict"])
let listedNoteKeys = noteKeys.union(["conflict"])

/// Instants as syncctl prints them: `2026-11-22T09:30:00.000Z`.
enum Instant {
    static func format(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    static func parse(_ text: String?) -> Date? {
        guard let text else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }

    /// `date` rounded down to a whole second, so it prints the same with or without milliseconds.
    static func wholeSecond(_ date: Date) -> Date {
        Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))
    }
}

/// 4 hex digits that neither start nor end any of `ids`.
func unusedPrefix(avoiding ids: [String]) -> String {
    var candidate = 0
    while true {
        let digits = String(format: "%04x", candidate)
        if !ids.contains(where: { $0.hasPrefix(digits) || $0.hasSuffix(digits) }) { return digits }
        candidate += 1
    }
}
