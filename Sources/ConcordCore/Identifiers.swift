/// A 128-bit identifier, printed as 32 lowercase hexadecimal digits.
///
/// Identifiers order by their big-endian bytes, which is also the order of their hex strings.
public protocol Identifier128: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The identifier's first 64 bits.
    var high: UInt64 { get }
    /// The identifier's last 64 bits.
    var low: UInt64 { get }
    /// The identifier with these two halves.
    init(high: UInt64, low: UInt64)
}

extension Identifier128 {
    /// Makes a random identifier from the given generator (inject a seeded one for determinism).
    public static func random(using generator: inout some RandomNumberGenerator) -> Self {
        Self(high: generator.next(), low: generator.next())
    }

    /// Parses exactly 32 hexadecimal digits (either case).
    public init?(hex: some StringProtocol) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 32 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, byte) in utf8.enumerated() {
            guard let nibble = hexValue(byte) else { return nil }
            if index < 16 { high = high << 4 | UInt64(nibble) } else { low = low << 4 | UInt64(nibble) }
        }
        self.init(high: high, low: low)
    }

    /// The 16 big-endian bytes of the identifier.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, byte) in bytes.enumerated() {
            if index < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
        }
        self.init(high: high, low: low)
    }

    /// The 16 big-endian bytes of the identifier.
    public var bytes: [UInt8] {
        var result = [UInt8](repeating: 0, count: 16)
        for index in 0..<8 {
            result[index] = UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64(index)))
            result[8 + index] = UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64(index)))
        }
        return result
    }

    /// 32 lowercase hexadecimal digits.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(32)
        for word in [high, low] {
            for shift in stride(from: 60, through: 0, by: -4) {
                out.append(digits[Int((word >> UInt64(shift)) & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// 32 lowercase hexadecimal digits.
    public var description: String { hex }

    /// Orders by the big-endian bytes (the order of the hex strings).
    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }

    /// Decodes the 32-digit hex string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = Self(hex: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a 32-digit hex identifier: \(text)")
        }
        self = value
    }

    /// Encodes the 32-digit hex string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }
}

@inline(__always)
func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
}

/// The identity of one replica (one store), chosen at random once when the store is created.
public struct ReplicaID: Identifier128 {
    /// The first 64 bits.
    public let high: UInt64
    /// The last 64 bits.
    public let low: UInt64
    /// The id with these two halves.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }
}

/// The identity of one record (a reminder or a note), chosen at random by the replica that creates it.
public struct RecordID: Identifier128 {
    /// The first 64 bits.
    public let high: UInt64
    /// The last 64 bits.
    public let low: UInt64
    /// The id with these two halves.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }
}

extension RecordID {
    /// The id a replica gives the record it creates next (SPEC.md §2): 48 bits of `millis`, then
    /// 80 random bits; or, when that would not come after `previous` (the same millisecond, a
    /// clock that went back), `previous` plus a random step from 1 to 2^32. The ids one replica
    /// makes increase, so its new records go to the end of a store's id-ordered tables instead
    /// of anywhere in them.
    public static func timeOrdered(millis: UInt64, following previous: RecordID?, random: UInt64, _ random2: UInt64) -> RecordID {
        let time = min(millis, (1 << 48) - 1)
        let fresh = RecordID(high: time << 16 | random >> 48, low: random2)
        guard let previous, fresh <= previous else { return fresh }
        let (low, carry) = previous.low.addingReportingOverflow(1 + (random2 & 0xFFFF_FFFF))
        let (high, overflow) = previous.high.addingReportingOverflow(carry ? 1 : 0)
        // Past the largest id nothing comes after: start over from the fresh one.
        return overflow ? fresh : RecordID(high: high, low: low)
    }
}

/// The identity of one operation: its author and its sequence number there (a "dot").
public struct OperationID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The author: the replica that wrote the operation.
    public var replica: ReplicaID
    /// Its position in the author's log, from 1.
    public var seq: UInt64

    /// The operation `seq` of `replica`.
    public init(replica: ReplicaID, seq: UInt64) {
        self.replica = replica
        self.seq = seq
    }

    /// Orders by replica id, then by sequence number.
    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.replica, lhs.seq) < (rhs.replica, rhs.seq)
    }

    /// `replicahex:seq`.
    public var description: String { "\(replica.hex):\(seq)" }
}
