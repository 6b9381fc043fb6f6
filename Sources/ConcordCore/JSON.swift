import Foundation

/// A JSON value with one canonical text form: object keys sorted by their UTF-8 bytes, no
/// insignificant white space, integers only, strings escaped minimally (`"`, `\`, and control
/// characters as `\u00XX`), everything else written as UTF-8. Equal values give equal bytes on
/// every platform.
package indirect enum JSON: Hashable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    /// A measurement, written with `fractionDigits` digits after the point (`0.042`): a JSON number,
    /// never a string. Only benchmarks print them; the data Concord prints has integers only.
    case decimal(Double, fractionDigits: Int)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    package static func == (lhs: JSON, rhs: JSON) -> Bool { lhs.canonical == rhs.canonical }
    package func hash(into hasher: inout Hasher) { hasher.combine(canonical) }

    package var canonical: String {
        var out: [UInt8] = []
        write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    package func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case let .decimal(value, digits):
            // JSON has no NaN or infinity: a measurement that is not a number is null.
            out += Array((value.isFinite ? String(format: "%.\(max(0, digits))f", value) : "null").utf8)
        case .string(let s): JSON.writeString(s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            let inOrder: (String, String) -> Bool = { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            // Objects are mostly built in order already (the records' are): then no sort is needed.
            let sorted = zip(members, members.dropFirst()).allSatisfy { inOrder($0.0, $1.0) } ? members : members.sorted { inOrder($0.0, $1.0) }
            for (index, member) in sorted.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(member.0, into: &out)
                out.append(UInt8(ascii: ":"))
                member.1.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    package static func writeString(_ string: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings need no escape: copy them whole.
        let copied = string.utf8.withContiguousStorageIfAvailable { bytes in
            guard !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return false }
            out.append(contentsOf: bytes)
            return true
        }
        if copied == true {
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                out.append(UInt8(ascii: "\\"))
                out.append(byte)
            case 0..<0x20:
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                out.append(hexDigit(byte >> 4))
                out.append(hexDigit(byte & 0xF))
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    /// The canonical text of an array of strings, without building a `JSON` value.
    package static func canonicalArray(of strings: [String]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(2 + strings.count * 16)
        canonicalArray(of: strings, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the canonical text of an array of strings to `out`, as UTF-8.
    package static func canonicalArray(of strings: [String], into out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        for index in strings.indices {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            writeString(strings[index], into: &out)
        }
        out.append(UInt8(ascii: "]"))
    }

    package static func instant(_ millis: Int64?) -> JSON {
        millis.map { .string(CivilTime(millis: $0).iso8601) } ?? .null
    }

    package init(_ value: Value) {
        switch value {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .int(let i): self = .int(i)
        case .string(let s): self = .string(s)
        }
    }
}

extension Reminder {
    /// The reminder's JSON object (SPEC.md, "JSON output").
    package var json: JSON {
        // In the canonical order of the keys, which then need no sort.
        .object([
            ("completed", .bool(isCompleted)),
            ("completedAt", .instant(completedAt?.millisecondsSince1970)),
            ("conflict", .bool(isInConflict)),
            ("deleted", .bool(isDeleted)),
            ("due", .instant(due?.millisecondsSince1970)),
            ("id", .string(id.hex)),
            ("kind", .string("reminder")),
            ("notes", notes.map(JSON.string) ?? .null),
            ("priority", (0...3).contains(priority.rawValue) ? .string(priority.name) : .int(priority.rawValue)),
            ("repeat", repeatRule.map { .string($0.rawValue) } ?? .null),
            ("snoozedUntil", .instant(snoozedUntil?.millisecondsSince1970)),
            ("tags", .array(tags.map(JSON.string))),
            ("title", .string(title)),
        ])
    }
}

extension Note {
    /// The note's JSON object (SPEC.md, "JSON output").
    package var json: JSON {
        // In the canonical order of the keys, which then need no sort.
        .object([
            ("body", .string(body)),
            ("conflict", .bool(isInConflict)),
            ("deleted", .bool(isDeleted)),
            ("id", .string(id.hex)),
            ("kind", .string("note")),
            ("pinned", .bool(isPinned)),
            ("tags", .array(tags.map(JSON.string))),
            ("title", .string(title)),
        ])
    }
}

extension Op {
    /// The operation's JSON object (SPEC.md, "Dump and JSON").
    package var json: JSON {
        var members: [(String, JSON)] = [
            ("replica", .string(id.replica.hex)),
            ("seq", .int(Int64(clamping: id.seq))),
            ("timestamp", .int(Int64(bitPattern: timestamp.rawValue))),
            ("time", .instant(Int64(timestamp.physicalMillis))),
            ("kind", .string(record.kind.name)),
            ("record", .string(record.id.hex)),
        ]
        switch action {
        case let .assign(field, value):
            members += [("action", .string("assign")), ("field", .string(field.name)), ("value", JSON(value))]
            if let predecessors { members.append(("predecessors", .array(predecessors.entries.map { .string($0.description) }))) }
        case let .addTag(tag):
            members += [("action", .string("addTag")), ("tag", .string(tag.string))]
        case let .removeTag(tag, observed):
            members += [
                ("action", .string("removeTag")), ("tag", .string(tag.string)),
                ("observed", .array(observed.map { .string($0.description) })),
            ]
        case .purge:
            members.append(("action", .string("purge")))
        case .elided:
            members.append(("action", .string("elided")))
        }
        return .object(members)
    }
}

/// The canonical dump of a replica's state (SPEC.md, "Dump").
package enum Dump {
    package static let formatVersion: Int64 = 1

    /// The dump of the given records, which must be sorted by `RecordRef`; purged records are
    /// left out (SPEC.md §10).
    package static func canonical(_ states: [RecordState]) -> String {
        var out: [UInt8] = Array("{\"format\":\"concord-dump\",\"records\":[".utf8)
        var first = true
        for state in states where !state.isPurged {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            json(of: state).write(into: &out)
        }
        out += Array("],\"version\":\(formatVersion)}".utf8)
        return String(decoding: out, as: UTF8.self)
    }

    /// One record's object in the dump: its JSON output, with the raw value of a repeat rule
    /// this version does not know and an `unknown` object of fields it does not know.
    package static func json(of state: RecordState) -> JSON {
        var members: [(String, JSON)]
        switch state.ref.kind {
        case .reminder:
            guard case .object(let object) = Reminder(state: state).json else { preconditionFailure() }
            members = object.filter { $0.0 != "conflict" }.map { key, value in
                key == "repeat" ? (key, JSON(state.value(.repeatRule))) : (key, value)
            }
        case .note:
            guard case .object(let object) = Note(state: state).json else { preconditionFailure() }
            // `conflicts` lists them; the dump keeps its form.
            members = object.filter { $0.0 != "conflict" }
        case .replica:
            members = [("id", .string(state.ref.id.hex)), ("kind", .string("replica")), ("retired", .bool(state.retires))]
        default:
            members = [
                ("id", .string(state.ref.id.hex)),
                ("kind", .string(state.ref.kind.name)),
                ("tags", .array(state.tags.present.map { .string($0.string) })),
                ("deleted", .bool(state.isDeleted)),
            ]
        }
        let unknown = state.registers.filter {
            !state.ref.kind.knows($0.field) && !(state.ref.kind == .replica && $0.field == RecordState.retiredField)
        }
        if !unknown.isEmpty {
            members.append(("unknown", .object(unknown.map { ($0.field.name, JSON($0.register.value)) })))
        }
        return .object(members)
    }
}
