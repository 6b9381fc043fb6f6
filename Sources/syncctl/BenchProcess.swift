import ConcordCore
import ConcordStore
import Foundation

/// The processes a benchmark starts: this executable again, as `syncctl` would run it.
enum BenchProcess {
    /// A TCP port on 127.0.0.1 that nothing listens on now (the system picks it).
    static func freePort() throws -> Int {
        #if canImport(Glibc)
        let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let socket = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard socket >= 0 else { throw ConcordError(.io, "cannot open a socket to find a free port") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw ConcordError(.io, "cannot find a free port on 127.0.0.1") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs this executable with `arguments`; its standard output goes to `output` line by line
    /// (or nowhere), its standard error nowhere.
    static func spawn(_ arguments: [String], output: Arrivals?, errors: String? = nil) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Bundle.main.executablePath ?? "/proc/self/exe")
        process.arguments = arguments
        if let errors, FileManager.default.createFile(atPath: errors, contents: nil), let file = FileHandle(forWritingAtPath: errors) {
            process.standardError = file
        } else {
            process.standardError = FileHandle.nullDevice
        }
        if let output {
            let pipe = Pipe()
            process.standardOutput = pipe
            // Each line is stamped as it is read. The handler runs on one queue, a call at a time.
            let pending = LockedState(Data())
            pipe.fileHandleForReading.readabilityHandler = { reading in
                let chunk = reading.availableData
                guard !chunk.isEmpty else {
                    reading.readabilityHandler = nil
                    return
                }
                let lines = pending.withLock { pending -> [Data] in
                    pending.append(chunk)
                    var lines: [Data] = []
                    while let newline = pending.firstIndex(of: 10) {
                        lines.append(pending[pending.startIndex..<newline])
                        pending.removeSubrange(pending.startIndex...newline)
                    }
                    return lines
                }
                let now = DispatchTime.now().uptimeNanoseconds
                for line in lines { output.add(line: line, at: now) }
            }
        } else {
            process.standardOutput = FileHandle.nullDevice
        }
        try process.run()
        return process
    }

    /// Runs this executable with `arguments` to its end; the seconds it took. One that fails is
    /// an error with the last line it wrote to its standard error.
    static func time(_ arguments: [String]) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Bundle.main.executablePath ?? "/proc/self/exe")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        let start = DispatchTime.now().uptimeNanoseconds
        try process.run()
        let said = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        guard process.terminationStatus == 0 else {
            let last = String(decoding: said, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? "no message"
            throw ConcordError(.io, "syncctl \(arguments.first ?? "") exited with status \(process.terminationStatus): \(last)")
        }
        return seconds
    }

    /// Returns once something accepts connections on 127.0.0.1:`port`; fails if `process` ends
    /// first (with the last line of `log`, its standard error), or after 30 s.
    static func waitUntilListening(on port: Int, process: Process, what: String, log: String) throws {
        let deadline = DispatchTime.now() + .seconds(30)
        while DispatchTime.now() < deadline {
            guard process.isRunning else {
                process.waitUntilExit()
                let said = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").last.map(String.init) ?? "no message"
                throw ConcordError(.io, "\(what) exited with status \(process.terminationStatus) before it listened: \(said)")
            }
            if accepts(port) { return }
            usleep(20_000)
        }
        throw ConcordError(.io, "\(what) did not listen on 127.0.0.1:\(port) within 30 s")
    }

    private static func accepts(_ port: Int) -> Bool {
        #if canImport(Glibc)
        let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let socket = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// Asks each of `processes` to stop (SIGTERM), and waits for it.
    static func stop(_ processes: [Process]) {
        for process in processes where process.isRunning { process.terminate() }
        for process in processes { process.waitUntilExit() }
    }
}

/// What the system tells of a process's resources: from `/proc` on Linux, and nothing (nil)
/// where there is no `/proc`.
enum ProcessUsage {
    /// Its resident memory (`VmRSS`).
    static func residentBytes(of pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { return nil }
        return kilobytes * 1024
    }

    /// The CPU time it has taken, user and system.
    static func cpuSeconds(of pid: Int32) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return nil }
        return cpuSeconds(stat: stat).map(\.seconds)
    }

    /// The CPU time that every process named `name` has taken (PostgreSQL's are each a process).
    static func cpuSeconds(ofProcessesNamed name: String) -> Double? {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
        var total = 0.0
        for entry in entries where Int32(entry) != nil {
            guard let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let parsed = cpuSeconds(stat: stat), parsed.name == name
            else { continue }
            total += parsed.seconds
        }
        return total
    }

    /// `/proc/PID/stat`: the name in parentheses, then fields of which the 14th and 15th are the
    /// user and system time in clock ticks.
    private static func cpuSeconds(stat: String) -> (name: String, seconds: Double)? {
        guard let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (String(stat[stat.index(after: open)..<close]), (user + system) / Double(sysconf(Int32(_SC_CLK_TCK))))
    }

    /// The CPU time this process has taken, user and system.
    static func ownCPUSeconds() -> Double {
        var usage = rusage()
        #if canImport(Glibc)
        getrusage(RUSAGE_SELF.rawValue, &usage)
        #else
        getrusage(RUSAGE_SELF, &usage)
        #endif
        let seconds = { (time: timeval) in Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// The time all the cores spent busy, and in all, since the system started, in clock ticks.
    struct MachineTimes {
        var busy: Double
        var total: Double
    }

    static func machineTimes() -> MachineTimes? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = stat.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return nil }
        // user nice system idle iowait irq softirq steal ...: idle and iowait are not busy.
        let ticks = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard ticks.count >= 5 else { return nil }
        let total = ticks.prefix(8).reduce(0, +)
        return MachineTimes(busy: total - ticks[3] - ticks[4], total: total)
    }
}
