import ConcordCore
import ConcordStore
import Foundation

/// Measurements for benchmarks: peak resident memory, medians, a digest of a store's state.
public enum Measure {
    /// Starts a new peak-memory measurement (Linux: resets the process's high-water mark; elsewhere
    /// the peak stays the process's own since it started).
    public static func resetPeakMemory() {
        #if os(Linux)
        if let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") {
            handle.write(Data("5".utf8))
            try? handle.close()
        }
        #endif
    }

    /// The peak resident memory in bytes since the last reset (or since the process started).
    public static func peakMemoryBytes() -> Int {
        #if os(Linux)
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
           let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
           let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") {
            return kilobytes * 1024
        }
        #endif
        var usage = rusage()
        #if os(Linux)
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Int(usage.ru_maxrss) * 1024
        #else
        getrusage(RUSAGE_SELF, &usage)
        return Int(usage.ru_maxrss)
        #endif
    }

    /// The median of `values`: the middle one, or the mean of the two middle ones; 0 if there are none.
    public static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    /// A 64-bit FNV-1a digest of the store's canonical dump, computed record by record.
    public static func dumpDigest(_ store: ConcordStore) throws -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        var bytes: [UInt8] = []
        try store.forEachRecord { state in
            bytes.removeAll(keepingCapacity: true)
            Dump.json(of: state).write(into: &bytes)
            for byte in bytes {
                hash ^= UInt64(byte)
                hash = hash &* 0x0000_0100_0000_01B3
            }
        }
        return hash
    }

    /// Times `body`.
    public static func seconds(_ body: () throws -> Void) rethrows -> Double {
        let start = ContinuousClock.now
        try body()
        return (ContinuousClock.now - start).seconds
    }

    /// The wall-clock seconds `body` took, for async work.
    public static func seconds(_ body: () async throws -> Void) async rethrows -> Double {
        let start = ContinuousClock.now
        try await body()
        return (ContinuousClock.now - start).seconds
    }
}
