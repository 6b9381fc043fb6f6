import ConcordCore
import Foundation

/// Where a store gets time and randomness. Inject a deterministic one in tests.
public struct StoreEnvironment: Sendable {
    /// The wall clock, in milliseconds since the Unix epoch.
    public var wallClock: @Sendable () -> UInt64
    /// Draws 64 random bits, for replica and record ids.
    public var random: @Sendable () -> UInt64
    /// How much a batched merge applies in one transaction (SPEC.md §5.6).
    public var mergeBatch = MergeBatch.standard
    /// The last record id made, shared by the copies of this environment.
    private let lastRecordID = LockedState<RecordID?>(nil)

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
    func makeRecordID() -> RecordID {
        let millis = wallClock()
        let (random1, random2) = (random(), random())
        return lastRecordID.withLock { last in
            let id = RecordID.timeOrdered(millis: millis, following: last, random: random1, random2)
            last = id
            return id
        }
    }
}

/// The bounds of a batched merge (`ConcordStore.mergeInBatches`, SPEC.md §5.6). A batch that logs
/// operations ends once it has logged `operations` of them; a batch that applies logged operations
/// to their records ends once it has applied them to `records` records (it holds about a thousand
/// at a time in memory: they come in record order). Larger batches merge faster (each commit
/// rewrites every page the batch touched); smaller ones let local writes in sooner. Operations are sorted by record in runs of at most `sortRun` operations (about
/// 30 bytes each, plus 32 of index; at most 8 MiB of them); more than one run goes through a
/// temporary file.
public struct MergeBatch: Sendable, Equatable {
    public var operations: Int
    public var records: Int
    public var sortRun: Int
    /// How many record states a batch that applies holds before it writes them out (they come in
    /// record order).
    var flushRecords = 1024
    /// From how many sorted operations they are folded into record states on a thread of their own.
    var foldThreadFrom = 20_000

    public init(operations: Int, records: Int, sortRun: Int = 250_000) {
        self.operations = max(1, operations)
        self.records = max(1, records)
        self.sortRun = max(1, sortRun)
    }

    /// A local write waits for at most one transaction of a merge (a batch, or the logging batch
    /// and the first applying one together): a second or two of merging on a 2-core machine.
    public static let standard = MergeBatch(operations: 1_000_000, records: 110_000)
}

/// A value behind a lock, for the little shared state a store keeps.
final class LockedState<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

enum FileAccess {
    static func isReadOnly(_ path: String) -> Bool {
        FileManager.default.fileExists(atPath: path) && !FileManager.default.isWritableFile(atPath: path)
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
