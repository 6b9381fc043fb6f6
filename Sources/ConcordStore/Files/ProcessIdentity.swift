import Foundation

#if canImport(Darwin)
import Darwin
#endif

/// A process, named so that another process can tell whether it still runs: its id, and when it
/// started (a process id alone is reused once its process has ended). A merge records the one
/// that runs it in the store while it has operations pending (SPEC.md §9), so that a store opened
/// meanwhile leaves them to it.
struct ProcessIdentity: Equatable {
    var pid: Int32
    /// When the process started, in a form only compared for equality; "" where the platform
    /// does not say (then the process id alone is compared).
    var start: String

    /// This process.
    static let current = ProcessIdentity(running: getpid())

    /// Process `pid`, as it runs now.
    init(running pid: Int32) {
        self.init(pid: pid, start: Self.startOfProcess(pid) ?? "")
    }

    /// `meta` key and value: `merging <pid>`, `<start>`.
    var key: String { "merging \(pid)" }

    init(pid: Int32, start: String) {
        self.pid = pid
        self.start = start
    }

    /// Parses a `meta` entry written by `key`, nil for any other key.
    init?(key: String, value: String) {
        guard key.hasPrefix("merging "), let pid = Int32(key.dropFirst("merging ".count)), pid > 0 else { return nil }
        self.init(pid: pid, start: value)
    }

    /// Whether the process still runs (and is the one recorded, not another that got its id).
    var isRunning: Bool {
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        return start.isEmpty || Self.startOfProcess(pid) == start
    }

    /// When process `pid` started, as the platform tells it.
    private static func startOfProcess(_ pid: Int32) -> String? {
        #if os(Linux)
        // Field 22 of /proc/PID/stat: clock ticks from boot to the process's start; with the boot's
        // id, unique across reboots. The second field (the command) may hold spaces and
        // parentheses, so the fields are counted from its closing parenthesis (field 3 on).
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19 else { return nil }
        let boot = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        return "\(boot) \(fields[19])"
        #elseif canImport(Darwin)
        var info = kinfo_proc()
        var size = MemoryLayout<kinfo_proc>.stride
        var name: [Int32] = [CTL_KERN, KERN_PROC, KERN_PROC_PID, pid]
        guard sysctl(&name, 4, &info, &size, nil, 0) == 0, size > 0 else { return nil }
        let started = info.kp_proc.p_un.__p_starttime
        return "\(started.tv_sec).\(started.tv_usec)"
        #else
        return nil
        #endif
    }
}
