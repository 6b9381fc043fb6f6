import ConcordCore
import ConcordStore
import Foundation

/// A wall clock a test sets by hand, shared with a store's environment.
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var millis: UInt64

    init(_ millis: UInt64) {
        self.millis = millis
    }

    var now: UInt64 {
        get { lock.withLock { millis } }
        set { lock.withLock { millis = newValue } }
    }
}

/// A store environment with a hand-set clock and seeded randomness.
func environment(clock: ManualClock, seed: UInt64) -> StoreEnvironment {
    let random = LockedGenerator(seed: seed)
    return StoreEnvironment(wallClock: { clock.now }, random: { random.next() })
}

final class LockedGenerator: @unchecked Sendable {
    private let lock = NSLock()
    private var generator: SplitMix64

    init(seed: UInt64) {
        generator = SplitMix64(seed: seed)
    }

    func next() -> UInt64 { lock.withLock { generator.next() } }
}

/// A temporary directory, removed when the value is released.
final class TemporaryDirectory {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "concord-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

extension ConcordStore {
    /// Every operation in the log, in author and sequence order.
    func allOperations() throws -> [Op] {
        var operations: [Op] = []
        try forEachOperation { operations.append($0) }
        return operations
    }
}

let baseMillis: UInt64 = 1_795_000_000_000
