/// A last-writer-wins register: of all writes, the one with the greatest `Stamp` holds.
///
/// Merge laws (each has a property test in `CRDTLawTests`):
/// - Commutative: `a.merging(b) == b.merging(a)`
/// - Associative: `a.merging(b).merging(c) == a.merging(b.merging(c))`
/// - Idempotent: `a.merging(a) == a`
public struct LWWRegister: Hashable, Sendable {
    /// The value of the winning write.
    public var value: Value
    /// The stamp of the winning write, which orders it against any other.
    public var stamp: Stamp

    /// A register holding one write.
    public init(value: Value, stamp: Stamp) {
        self.value = value
        self.stamp = stamp
    }

    /// Keeps the write with the greater stamp. Two writes with equal stamps are one write.
    public mutating func merge(_ other: LWWRegister) {
        if other.stamp > stamp { self = other }
    }

    /// A copy with `other` merged in, by `merge(_:)`.
    public func merging(_ other: LWWRegister) -> LWWRegister {
        var copy = self
        copy.merge(other)
        return copy
    }
}

extension Optional where Wrapped == LWWRegister {
    @inline(__always)
    mutating func merge(_ write: LWWRegister) {
        if let current = self {
            if write.stamp > current.stamp { self = write }
        } else {
            self = write
        }
    }
}
