import ConcordCore
import Foundation

/// Where a store gets time and randomness. Inject a deterministic one in tests.
public struct StoreEnvironment: Sendable {
    /// The wall clock, in milliseconds since the Unix epoch.
    public var wallClock: @Sendable () -> UInt64
    /// Draws 64 random bits, for replica and record ids.
    public var random: @Sendable () -> UInt64
    /// How much a merge applies in one transaction (SPEC.md §5.6).
    package var mergeBatch = MergeBatch.standard
    /// The last record id made, shared by the copies of this environment.
    private let lastRecordID = LockedState<RecordID?>(nil)

    /// An environment with this clock and this source of random bits.
    public init(wallClock: @escaping @Sendable () -> UInt64, random: @escaping @Sendable () -> UInt64) {
        self.wallClock = wallClock
        self.random = random
    }

    /// The system clock and the system's secure random generator.
    public static let live = StoreEnvironment(
        wallClock: { UInt64(max(0, Date().millisecondsSince1970)) },
        random: {
            var generator = SystemRandomNumberGenerator()
            return generator.next()
        })

    /// A seeded generator and a clock that starts at `startMillis` and advances `stepMillis` per reading.
    public static func deterministic(seed: UInt64, startMillis: UInt64 = 1_795_000_000_000, stepMillis: UInt64 = 1) -> StoreEnvironment {
        let state = LockedState((SplitMix64(seed: seed), startMillis))
        return StoreEnvironment(
            wallClock: { state.withLock { value in
                defer { value.1 += stepMillis }
                return value.1
            } },
            random: { state.withLock { value in value.0.next() } })
    }

    func makeID<ID: Identifier128>(_: ID.Type = ID.self) -> ID {
        ID(high: random(), low: random())
    }

    /// The id of a new record: time-ordered, after every one this environment made (SPEC.md §2).
    package func makeRecordID() -> RecordID {
        let millis = wallClock()
        let (random1, random2) = (random(), random())
        return lastRecordID.withLock { last in
            let id = RecordID.timeOrdered(millis: millis, following: last, random: random1, random2)
            last = id
            return id
        }
    }
}

enum FileAccess {
    static func isReadOnly(_ path: String) -> Bool {
        FileManager.default.fileExists(atPath: path) && !FileManager.default.isWritableFile(atPath: path)
    }

    /// Whether SQLite cannot make the `-shm` file it needs beside the store at `path` to read it
    /// at all: it is not there, and the directory cannot be written (its permissions, or a
    /// read-only mount, where the store itself is read-only too).
    static func isSideFileUncreatable(beside path: String) -> Bool {
        let directory = (path as NSString).deletingLastPathComponent
        return !FileManager.default.fileExists(atPath: path + "-shm") && access(directory.isEmpty ? "." : directory, W_OK) != 0
    }

    /// Whether the file system that holds `path` has (almost) no room left: less than SQLite
    /// needs to open a store (its 32 KiB shared-memory file) and write a little.
    static func isDiskFull(near path: String) -> Bool {
        let directory = (path as NSString).deletingLastPathComponent
        var info = statvfs()
        guard statvfs(directory.isEmpty ? "." : directory, &info) == 0 else { return false }
        return UInt64(info.f_bavail) * UInt64(info.f_frsize) < 256 * 1024
    }
}
