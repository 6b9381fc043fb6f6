import ConcordCore
import Foundation

/// A value given to the interface as JSON (a draft's or a patch's fields, a list of tags), read
/// strictly: the fields a call knows, each once, of the types it takes, and nothing after.
enum InputValue {
    case null
    case string(String)
    case bool(Bool)
    case number(String)
    case strings([String])
}

enum JSONInput {
    /// The members of the JSON object `text` (`what` names it in messages), each one of `keys`.
    static func object(_ text: String, _ what: String, keys: [String]) throws -> [String: InputValue] {
        try reading(text, what) { reader in
            guard try reader.nextValue() == .object else { throw invalid("\(what) must be a JSON object") }
            try reader.enterObject()
            var members: [String: InputValue] = [:]
            while let key = try reader.nextKey() {
                guard keys.contains(key) else {
                    throw invalid("\(what): unknown field '\(escapingControlCharacters(key))' (it takes \(keys.joined(separator: ", ")))")
                }
                guard members[key] == nil else { throw invalid("\(what): \(key) is given twice") }
                members[key] = try value(&reader, "\(what): \(key)")
            }
            return members
        }
    }

    /// The strings of the JSON array `text`.
    static func strings(_ text: String, _ what: String) throws -> [String] {
        try reading(text, what) { reader in
            let refusal = invalid("\(what) must be a JSON array of strings")
            guard try reader.nextValue() == .array else { throw refusal }
            try reader.enterArray()
            var strings: [String] = []
            while try reader.nextElement() {
                guard try reader.peekKind() == .string else { throw refusal }
                strings.append(try reader.readString())
            }
            return strings
        }
    }

    /// `body`'s result, once it read the whole of `text` as one JSON value.
    private static func reading<T>(_ text: String, _ what: String, _ body: (inout JSONReader) throws -> T) throws -> T {
        var reader = JSONReader(bytes: Array(text.utf8))
        do {
            let result = try body(&reader)
            guard try reader.nextValue() == nil else { throw invalid("\(what): more than one JSON value") }
            return result
        } catch let error as JSONReader.SyntaxError {
            throw invalid("\(what) is not JSON: \(error)")
        }
    }

    private static func value(_ reader: inout JSONReader, _ what: String) throws -> InputValue {
        switch try reader.peekKind() {
        case .null:
            try reader.readNull()
            return .null
        case .string: return .string(try reader.readString())
        case .bool: return .bool(try reader.readBool())
        case .number: return .number(try reader.readNumber())
        case .array:
            try reader.enterArray()
            var strings: [String] = []
            while try reader.nextElement() {
                guard try reader.peekKind() == .string else { throw invalid("\(what) must be an array of strings") }
                strings.append(try reader.readString())
            }
            return .strings(strings)
        case .object: throw invalid("\(what) cannot be an object")
        }
    }

    static func invalid(_ message: String) -> ConcordError {
        ConcordError(.invalidInput, message)
    }
}

extension [String: InputValue] {
    /// The string of `key`: nil when it is absent; refused when it is null (unless `nullable`,
    /// when null is `.some(nil)`) or of another type.
    func string(_ key: String, _ what: String) throws -> String? {
        switch self[key] {
        case nil: return nil
        case .string(let text): return text
        default: throw JSONInput.invalid("\(what): \(key) must be a string")
        }
    }

    /// The value of a field that null removes: nil when absent, `.some(nil)` for null.
    func removable<T>(_ key: String, _ what: String, _ read: (String) throws -> T) throws -> T?? {
        switch self[key] {
        case nil: return nil
        case .null: return .some(nil)
        case .string(let text): return .some(try read(text))
        default: throw JSONInput.invalid("\(what): \(key) must be a string or null")
        }
    }

    func bool(_ key: String, _ what: String) throws -> Bool? {
        switch self[key] {
        case nil: return nil
        case .bool(let flag): return flag
        default: throw JSONInput.invalid("\(what): \(key) must be true or false")
        }
    }

    func strings(_ key: String, _ what: String) throws -> [String]? {
        switch self[key] {
        case nil: return nil
        case .strings(let strings): return strings
        default: throw JSONInput.invalid("\(what): \(key) must be an array of strings")
        }
    }

    /// A priority by name ("none", "low", "medium", "high") or its number, as the reads print it.
    func priority(_ what: String) throws -> Priority? {
        switch self["priority"] {
        case nil: return nil
        case .string(let name): if let priority = Priority(name: name) { return priority }
        case .number(let digits): if let number = Int64(digits) { return Priority(rawValue: number) }
        default: break
        }
        throw JSONInput.invalid("\(what): priority must be none, low, medium, high or an integer")
    }
}

/// The instant `text` names (SPEC.md §10), for `what`.
func instant(_ text: String, _ what: String) throws -> Date {
    guard let millis = CivilTime.instant(parsing: text) else {
        throw JSONInput.invalid("\(what) must be an instant within the years 1 to 9999, such as 2026-11-25T09:30:00.000Z")
    }
    return Date(millisecondsSince1970: millis)
}
