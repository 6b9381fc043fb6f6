/// A string compared, hashed and ordered by its exact UTF-8 bytes.
///
/// Swift's `String` equality is canonical equivalence ("é" precomposed equals "e" + combining
/// acute). Replicas must not merge two different byte sequences into one tag or field name, so
/// every replicated key uses this type instead.
public struct ExactString: Hashable, Comparable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The string itself.
    public let string: String

    /// The exact bytes of `string`.
    public init(_ string: String) {
        self.string = string
    }

    /// The exact bytes of the literal.
    public init(stringLiteral value: String) {
        self.string = value
    }

    // Tags and field names are compared and hashed on every merge, so these work on the UTF-8
    // bytes in place (native strings are contiguous) rather than byte by byte through a view.

    /// Equal when the UTF-8 bytes are equal (not canonical equivalence).
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.withUTF8 { left in rhs.withUTF8 { right in left.elementsEqual(right) } }
    }

    /// Hashes the UTF-8 bytes.
    public func hash(into hasher: inout Hasher) {
        withUTF8 { bytes in
            hasher.combine(bytes.count)
            hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
        }
    }

    /// Orders by the UTF-8 bytes.
    public static func < (lhs: Self, rhs: Self) -> Bool {
        lhs.withUTF8 { left in rhs.withUTF8 { right in left.lexicographicallyPrecedes(right) } }
    }

    private func withUTF8<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        if let result = string.utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(string.utf8).withUnsafeBufferPointer(body)
    }

    /// The string itself.
    public var description: String { string }
}

/// The value of one field write.
public enum Value: Hashable, Sendable {
    /// No value: a cleared field.
    case null
    /// A flag, such as `pinned` or `deleted`.
    case bool(Bool)
    /// An integer, such as a priority or an instant in milliseconds since the Unix epoch.
    case int(Int64)
    /// Text, compared by its exact bytes.
    case string(String)

    /// Equal when of the same case and value; strings compare by their exact UTF-8 bytes.
    public static func == (lhs: Value, rhs: Value) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case let (.bool(a), .bool(b)): a == b
        case let (.int(a), .int(b)): a == b
        case let (.string(a), .string(b)): a.utf8.elementsEqual(b.utf8)
        default: false
        }
    }

    /// Hashes the case and the value (strings by their exact bytes).
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(1); hasher.combine(b)
        case .int(let i): hasher.combine(2); hasher.combine(i)
        case .string(let s): hasher.combine(3); hasher.combine(ExactString(s))
        }
    }

    /// The text, if the value is a string.
    public var stringValue: String? {
        if case .string(let s) = self { s } else { nil }
    }

    /// The integer, if the value is an integer.
    public var intValue: Int64? {
        if case .int(let i) = self { i } else { nil }
    }

    /// The flag, if the value is a flag.
    public var boolValue: Bool? {
        if case .bool(let b) = self { b } else { nil }
    }

    /// Whether the value is `.null`.
    public var isNull: Bool {
        if case .null = self { true } else { false }
    }
}
