/// A hybrid-logical-clock timestamp: 48 bits of physical milliseconds since the Unix epoch, then a
/// 16-bit logical counter, packed into one `UInt64` so that integer order is timestamp order.
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The packed form: physical milliseconds in the high 48 bits, the logical counter in the low 16.
    public var rawValue: UInt64

    /// The largest physical time a valid timestamp may carry: 9999-12-31T23:59:59.999Z.
    public static let maxPhysicalMillis: UInt64 = 253_402_300_799_999

    /// The earliest timestamp, before any write.
    public static let zero = Timestamp(rawValue: 0)

    /// The timestamp with this packed form.
    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// The timestamp of these physical milliseconds and logical counter.
    public init(physicalMillis: UInt64, logical: UInt16) {
        rawValue = physicalMillis << 16 | UInt64(logical)
    }

    /// Milliseconds since the Unix epoch.
    public var physicalMillis: UInt64 { rawValue >> 16 }
    /// The counter that orders timestamps of the same millisecond.
    public var logical: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    /// Whether the physical part is within the range SPEC.md allows (at most year 9999).
    public var isValid: Bool { physicalMillis <= Self.maxPhysicalMillis }

    /// Timestamps order by their packed form: physical time, then the counter.
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// `millis.counter`, as in `1795000000000.3`.
    public var description: String { "\(physicalMillis).\(logical)" }
}

/// A hybrid logical clock (Kulkarni et al.): timestamps that follow the wall clock when it moves
/// forward, never go backwards, and always land after every timestamp the replica has seen.
///
/// The clock is a value: the caller persists `latest` and passes wall-clock readings in, so the
/// clock itself reads no time and is deterministic under test.
package struct HybridLogicalClock: Hashable, Sendable {
    /// The greatest timestamp this replica has issued or observed.
    package private(set) var latest: Timestamp

    /// How far ahead of the local wall clock a remote timestamp may be before a merge warns.
    package static let farFutureThresholdMillis: UInt64 = 24 * 60 * 60 * 1000

    /// A clock that has issued and seen nothing after `latest`: the persisted value, or `.zero`
    /// for a new replica.
    package init(latest: Timestamp = .zero) {
        self.latest = latest
    }

    /// Issues the next local timestamp: the wall clock if it is ahead of everything seen,
    /// otherwise the successor of `latest` (a logical-counter overflow carries into the milliseconds).
    package mutating func tick(wallMillis: UInt64) throws(ClockError) -> Timestamp {
        let wall = Timestamp(physicalMillis: min(wallMillis, Timestamp.maxPhysicalMillis), logical: 0)
        if wall > latest {
            latest = wall
        } else {
            let next = Timestamp(rawValue: latest.rawValue &+ 1)
            guard next > latest, next.isValid else { throw ClockError.exhausted }
            latest = next
        }
        return latest
    }

    /// Whether `latest` is more than `farFutureThresholdMillis` ahead of a wall-clock reading.
    package func isFarAhead(ofWallMillis wallMillis: UInt64) -> Bool {
        let (limit, overflow) = wallMillis.addingReportingOverflow(Self.farFutureThresholdMillis)
        return !overflow && latest.physicalMillis > limit
    }

    /// Moves the clock past a timestamp received from another replica.
    package mutating func observe(_ remote: Timestamp) {
        if remote > latest { latest = remote }
    }
}

/// Why the clock cannot issue a timestamp.
package enum ClockError: Error, Equatable, CustomStringConvertible {
    /// The clock reached the end of the valid range (year 9999) and can issue no later timestamp.
    case exhausted

    /// The message.
    package var description: String {
        "the replica's clock has reached the largest valid timestamp (year 9999) and cannot advance"
    }
}
