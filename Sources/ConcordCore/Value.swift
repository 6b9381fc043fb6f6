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

    // Tags and field names are compared and hashed on every merge, so these work on the UTF-8
    // bytes in place (native strings are contiguous) rather than byte by byte through a view.

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.withUTF8 { left in rhs.withUTF8 { right in left.elementsEqual(right) } }
    }

    public func hash(into hasher: inout Hasher) {
        withUTF8 { bytes in
            hasher.combine(bytes.count)
            hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
        }
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        lhs.withUTF8 { left in rhs.withUTF8 { right in left.lexicographicallyPrecedes(right) } }
    }

    private func withUTF8<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        if let result = string.utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(string.utf8).withUnsafeBufferPointer(body)
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
