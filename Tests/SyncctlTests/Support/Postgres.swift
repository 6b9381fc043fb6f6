import Foundation
import Testing

/// A throwaway PostgreSQL server for one test: a cluster of its own in a temporary directory, on
/// a loopback port, with trust authentication and no fsync, stopped and removed when released.
/// It is Debian's `postgresql` package (`scripts/install-deps`) run by hand: as root, its
/// programs run as the `postgres` user, since PostgreSQL refuses to run as root.
final class PostgresServer {
    let directory: String
    let port: Int
    private let binaries: String

    /// The URL a relay takes: user `concord`, database `postgres`.
    var url: String { "postgres://concord@127.0.0.1:\(port)/postgres" }

    init(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let binaries = try #require(Self.binaries(), "PostgreSQL's server is not installed: run 'bash scripts/install-deps' (Debian's postgresql package)", sourceLocation: sourceLocation)
        self.binaries = binaries
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("concord-postgres-\(UUID().uuidString)").path
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if getuid() == 0 {
            let user = try #require(getpwnam("postgres"), "no postgres user to run PostgreSQL as", sourceLocation: sourceLocation)
            chown(directory, user.pointee.pw_uid, user.pointee.pw_gid)
        }
        try Self.run(binaries + "/initdb", ["-D", directory + "/data", "-A", "trust", "-U", "concord", "--no-sync", "-E", "UTF8"], sourceLocation: sourceLocation)
        var port = 0
        for _ in 0..<10 {
            port = Int.random(in: 20_000...60_000)
            if (try? Self.start(binaries, directory, port: port)) != nil { break }
            port = 0
        }
        let log = (try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? ""
        self.port = try #require(port == 0 ? nil : port, "PostgreSQL did not start on any of 10 ports: \(log)", sourceLocation: sourceLocation)
    }

    deinit {
        _ = try? Self.run(binaries + "/pg_ctl", ["-D", directory + "/data", "-m", "immediate", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Stops the server cleanly (`fast`: what was committed is written to the data files).
    func stop() throws {
        try Self.run(binaries + "/pg_ctl", ["-D", directory + "/data", "-m", "fast", "stop"])
    }

    /// Stops the server at once (`immediate`: connections are cut, as by a crash) and starts it
    /// again on the same port.
    func restart() throws {
        try Self.run(binaries + "/pg_ctl", ["-D", directory + "/data", "-m", "immediate", "stop"])
        try Self.start(binaries, directory, port: port)
    }

    /// What `psql` prints for `sql` (unaligned, tuples only): one line per row.
    func query(_ sql: String) throws -> String {
        try Self.run(binaries + "/psql", ["-h", "127.0.0.1", "-p", "\(port)", "-U", "concord", "-d", "postgres", "-At", "-c", sql])
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The server's log.
    var log: String { (try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? "" }

    private static func start(_ binaries: String, _ directory: String, port: Int) throws {
        try run(binaries + "/pg_ctl", [
            "-D", directory + "/data", "-l", directory + "/log", "-w", "-t", "60",
            "-o", "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            "start",
        ])
    }

    /// Where Debian puts PostgreSQL's server programs: /usr/lib/postgresql/VERSION/bin.
    private static func binaries() -> String? {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        return versions.reversed().map { "\(root)/\($0)/bin" }.first { FileManager.default.isExecutableFile(atPath: $0 + "/pg_ctl") }
    }

    /// Runs a PostgreSQL program (as `postgres` when this process is root); fails unless it exits 0.
    ///
    /// With posix_spawn and waitpid, not Foundation's `Process`: on Linux, `Process` learns that a
    /// child ended when a descriptor it gave the child is closed, and the server that `pg_ctl
    /// start` leaves running inherits that descriptor. Output goes to a file, not a pipe, for the
    /// same reason, and the child gets no descriptor of this process but those three.
    @discardableResult
    private static func run(_ program: String, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let command = getuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--", program] + arguments : [program] + arguments
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("concord-postgres-output-\(UUID().uuidString)").path
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of this process: the server would hold open the descriptors by which
        // `Process` learns that the syncctl processes started meanwhile have ended.
        closeInheritedDescriptors(&actions)
        var pid: pid_t = 0
        let argv = command.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, environ)
        guard spawned == 0 else { throw PostgresFailure(message: "cannot start \(command[0]): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // Exited normally with status 0 (WIFEXITED and WEXITSTATUS, which Swift does not import).
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw PostgresFailure(message: "\((program as NSString).lastPathComponent) \(arguments.joined(separator: " ")) ended with status \(status): \(text)")
        }
        return text
    }

    /// Makes the child close every descriptor from 3 on, with glibc's
    /// `posix_spawn_file_actions_addclosefrom_np` (2.34 and later; Swift does not import it, so
    /// it is looked up), or else each descriptor open now.
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
            return
        }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
            if let descriptor = Int32(name), descriptor > 2 { posix_spawn_file_actions_addclose(&actions, descriptor) }
        }
    }

    struct PostgresFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
