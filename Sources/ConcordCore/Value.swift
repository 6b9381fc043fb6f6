/// A string compared, hashed and ordered by its exact UTF-8 bytes.
///
/// Swift's `String` equality is canonical equivalence ("é" precomposed equals "e" + combining
/// acute). Replicas must not merge two different byte sequences into one tag or field name, so
/// every replicated key uses this type instead.
public struct ExactString: Hashable, Comparable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let string: String

    public init(_ string: String) {
        self.string = string
    }

    public init(stringLiteral value: String) {
        self.string = value
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.string.utf8.elementsEqual(rhs.string.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(string.utf8.count)
        for byte in string.utf8 { hasher.combine(byte) }
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        lhs.string.utf8.lexicographicallyPrecedes(rhs.string.utf8)
    }

    public var description: String { string }
}

/// The value of one field write.
public enum Value: Hashable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case string(String)

    public static func == (lhs: Value, rhs: Value) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case let (.bool(a), .bool(b)): a == b
        case let (.int(a), .int(b)): a == b
        case let (.string(a), .string(b)): a.utf8.elementsEqual(b.utf8)
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(1); hasher.combine(b)
        case .int(let i): hasher.combine(2); hasher.combine(i)
        case .string(let s): hasher.combine(3); hasher.combine(ExactString(s))
        }
    }

    public var stringValue: String? {
        if case .string(let s) = self { s } else { nil }
    }

    public var intValue: Int64? {
        if case .int(let i) = self { i } else { nil }
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { b } else { nil }
    }

    public var isNull: Bool {
        if case .null = self { true } else { false }
    }
}
