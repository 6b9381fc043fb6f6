import ArgumentParser
import ConcordCore
import ConcordStore
import Foundation

/// `syncctl history ID [--json]`: every write to one record (SPEC.md §10 "History", §11).
struct History: OneShotCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every write to one record's fields and tags, and whether it holds now.",
        discussion: """
            One line per operation, oldest first: its time, its replica (and seq), what it wrote, \
            and 'holds', 'conflict' (a head that is not the value shown) or 'superseded'.
            """)
    @OptionGroup var store: StoreOptions
    @Argument(help: "The record's id or a unique prefix.") var id: String
    @OptionGroup var output: JSONFlag

    func work() throws {
        let store = try store.open()
        let ref = try store.resolve(id)
        guard let entries = try store.history(of: ref) else { throw try store.notFound(ref, named: id) }
        if output.json {
            say(JSON.array(entries.map(\.json)).canonical)
        } else {
            // Where compaction trimmed it (SPEC.md §10, "History").
            if let through = try store.compactedThrough(of: ref) {
                say("(writes up to \(CivilTime(millis: Int64(through.physicalMillis)).iso8601) that later ones made redundant were compacted)")
            }
            for entry in entries { say("\(Output.text(of: entry.operation))  \(entry.standing.rawValue)") }
        }
    }
}

/// `syncctl conflicts [--json]`: the fields written concurrently (SPEC.md §5.1, §11).
struct Conflicts: OneShotCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the fields that were written on two replicas that had not seen each other's write.",
        discussion: """
            For each, every competing value with its replica and time; the first is the value shown. \
            'syncctl resolve' settles one, and so does any edit of the field.
            """)
    @OptionGroup var store: StoreOptions
    @OptionGroup var output: JSONFlag

    func work() throws {
        let store = try store.open()
        let conflicts = try store.conflicts()
        if output.json {
            say(JSON.array(conflicts.map(\.json)).canonical)
            return
        }
        guard !conflicts.isEmpty else {
            say("no conflicts")
            return
        }
        for conflict in conflicts {
            say("\(conflict.record.kind.name) \(conflict.record.id.hex) \(conflict.field.name):")
            for (index, head) in conflict.heads.enumerated() {
                let mine = head.stamp.replica == store.replicaID ? " (this replica)" : ""
                let time = CivilTime(millis: Int64(head.stamp.timestamp.physicalMillis)).iso8601
                say("  \(index == 0 ? "shown" : "other")  \(JSON(head.value).canonical)  by \(head.stamp.replica.hex)\(mine) at \(time)")
            }
        }
    }
}

/// `syncctl resolve ID --field NAME (--value V | --keep REPLICA)` (SPEC.md §11).
struct Resolve: OneShotCommand {
    static let configuration = CommandConfiguration(
        abstract: "Settle a field in conflict: write one value that has seen every competing one.",
        discussion: """
            --keep REPLICA keeps the value that replica wrote (its id, or a prefix of at least 4 \
            digits); --value V writes V: text as it is, a date as 'reminder edit' takes one, a \
            priority by name, true or false, none for no value. Once the replicas have synced, the \
            conflict is gone on all of them.
            """)
    @OptionGroup var store: StoreOptions
    @Argument(help: "The record's id or a unique prefix.") var id: String
    @Option(help: "The field in conflict, as 'syncctl conflicts' names it.") var field: String
    @Option(help: "The value to write.") var value: String?
    @Option(help: "The replica whose value to keep.") var keep: String?

    func validate() throws {
        guard (value == nil) != (keep == nil) else { throw ValidationError("give one of --value V and --keep REPLICA") }
    }

    func work() throws {
        let store = try store.open()
        let ref = try store.resolve(id)
        let named = Field(name: field)
        guard let conflict = try store.conflicts().first(where: { $0.record == ref && $0.field == named }) else {
            throw ConcordError(.invalidInput, "\(ref.kind.name) \(ref.id.hex) has no conflict in field '\(field)'")
        }
        let chosen: Value
        if let keep {
            let matches = conflict.heads.filter { keep.count >= 4 && $0.stamp.replica.hex.hasPrefix(keep.lowercased()) }
            let replicas = Set(matches.map(\.stamp.replica)).sorted()
            guard let head = matches.first, replicas.count == 1 else {
                if replicas.count > 1 {
                    let candidates = replicas.map(\.hex).joined(separator: ", ")
                    throw ConcordError(.invalidInput, "--keep \(keep) is ambiguous: it matches the replicas \(candidates) in conflict; give more of the id")
                }
                let all = conflict.heads.map(\.stamp.replica.hex).joined(separator: ", ")
                throw ConcordError(.invalidInput, "--keep \(keep) names none of the replicas in conflict (\(all))")
            }
            chosen = head.value
        } else {
            chosen = try Self.parse(value!, for: named)
        }
        try store.perform(.settle(named, chosen), on: ref)
        say("\(ref.kind.name) \(ref.id.hex) \(named.name) = \(JSON(chosen).canonical)")
    }

    /// V as the field takes it (SPEC.md §11 `resolve`): text as it is, a date as `reminder edit`
    /// takes one, a priority by name, a repeat rule as stored, true or false, or `none` for no value.
    static func parse(_ text: String, for field: Field) throws -> Value {
        func refused(_ expected: String) -> ConcordError {
            ConcordError(.invalidInput, "'\(text)' is not a value of field '\(field.name)': \(expected)")
        }
        switch field {
        case .title, .notes, .body:
            return .string(text)
        case .due, .completed, .snoozedUntil:
            if text == "none" { return .null }
            guard let date = DateArgument.parse(text) else { throw refused("a date such as 2026-11-22T09:30:00Z, or none") }
            return .int(date.millisecondsSince1970)
        case .priority:
            guard let priority = Priority(name: text) else { throw refused("none, low, medium or high") }
            return .int(priority.rawValue)
        case .repeatRule:
            if text == "none" { return .null }
            guard RepeatRule(rawValue: text) != nil else { throw refused("a repeat rule as stored (daily, monthly:31, …), or none") }
            return .string(text)
        case .deleted, .pinned:
            guard let flag = ["true": true, "false": false][text] else { throw refused("true or false") }
            return .bool(flag)
        case .other:
            throw ConcordError(.invalidInput, "field '\(field.name)' is not one this build knows: keep a replica's value with --keep")
        }
    }
}
