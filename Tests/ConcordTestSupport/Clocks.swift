import ConcordCore
import ConcordStore
import Foundation

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

/// A wall-clock reading in November 2026, where the tests' clocks start.
public let baseMillis: UInt64 = 1_795_000_000_000
