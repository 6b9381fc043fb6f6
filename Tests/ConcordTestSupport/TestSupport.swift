import ConcordCore
import ConcordStore
import Foundation

// Helpers shared by the test targets (test targets cannot import each other).

/// A wall clock a test sets by hand, shared with a store's environment.
public final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var millis: UInt64

    public init(_ millis: UInt64) {
        self.millis = millis
    }

    public var now: UInt64 {
        get { lock.withLock { millis } }
        set { lock.withLock { millis = newValue } }
    }

    public func advance(_ delta: UInt64) {
        lock.withLock { millis += delta }
    }
}

/// A store environment with a hand-set clock and seeded randomness.
public func environment(clock: ManualClock, seed: UInt64) -> StoreEnvironment {
    let random = LockedGenerator(seed: seed)
    return StoreEnvironment(wallClock: { clock.now }, random: { random.next() })
}

/// A seeded generator behind a lock.
public final class LockedGenerator: @unchecked Sendable {
    private let lock = NSLock()
    private var generator: SplitMix64

    public init(seed: UInt64) {
        generator = SplitMix64(seed: seed)
    }

    public func next() -> UInt64 { lock.withLock { generator.next() } }
}

/// A temporary directory of one test, removed when the value is released. It lives in `/dev/shm`
/// where there is one (a RAM file system: the many fsyncs of store commits and folder syncs cost
/// nothing there, so the property tests stay fast), else in the system's temporary directory.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String

    public init() throws {
        var isDirectory: ObjCBool = false
        let base =
            FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory) && isDirectory.boolValue
                && access("/dev/shm", W_OK) == 0
            ? "/dev/shm/" : NSTemporaryDirectory()
        path = (base.hasSuffix("/") ? base : base + "/") + "concord-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    public func file(_ name: String) -> String { path + "/" + name }

    /// Makes a subdirectory and returns its path.
    public func directory(_ name: String) throws -> String {
        let path = file(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    deinit {
        // A test may leave a file it made unreadable; make everything removable again.
        if let enumerator = FileManager.default.enumerator(atPath: path) {
            for case let name as String in enumerator { chmod(path + "/" + name, 0o755) }
        }
        try? FileManager.default.removeItem(atPath: path)
    }
}

extension ConcordStore {
    /// Every operation in the log, in author and sequence order.
    public func allOperations() throws -> [Op] {
        var operations: [Op] = []
        try forEachOperation { operations.append($0) }
        return operations
    }
}

/// A wall-clock reading in November 2026, where the tests' clocks start.
public let baseMillis: UInt64 = 1_795_000_000_000
