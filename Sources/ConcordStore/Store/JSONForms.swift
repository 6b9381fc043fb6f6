import ConcordCore

// The JSON forms of the store's reads (SPEC.md §10, §11): what `syncctl … --json` prints and the
// C interface returns, made in one place so that the two never differ by a byte.

extension StoreStatus {
    /// `status --json`.
    package var json: JSON {
        .object([
            ("replica", .string(replicaID.hex)),
            ("name", .string(name)),
            ("store", .string(path)),
            ("schemaVersion", .int(Int64(schemaVersion))),
            ("reminders", .object([
                ("open", .int(Int64(openReminders))),
                ("completed", .int(Int64(completedReminders))),
                ("deleted", .int(Int64(deletedReminders))),
            ])),
            ("notes", .object([("live", .int(Int64(notes))), ("deleted", .int(Int64(deletedNotes)))])),
            ("otherRecords", .int(Int64(otherRecords))),
            ("operations", .int(Int64(operations))),
            ("versionVector", versionVector.json),
        ])
    }
}

extension Conflict {
    /// One element of `conflicts --json`.
    package var json: JSON {
        .object([
            ("kind", .string(record.kind.name)), ("id", .string(record.id.hex)),
            ("field", .string(field.name)),
            ("heads", .array(heads.map { head in
                .object([
                    ("value", JSON(head.value)), ("replica", .string(head.stamp.replica.hex)), ("seq", .int(Int64(head.stamp.seq))),
                    ("time", .string(CivilTime(millis: Int64(head.stamp.timestamp.physicalMillis)).iso8601)),
                    ("timestamp", .int(Int64(bitPattern: head.stamp.timestamp.rawValue))),
                ])
            })),
        ])
    }
}

extension HistoryEntry {
    /// One element of `history --json`: the operation's object of `log --json`, with its
    /// `standing` (SPEC.md §10, "History").
    package var json: JSON {
        guard case .object(let members) = operation.json else { return operation.json }
        return .object(members + [("standing", .string(standing.rawValue))])
    }
}

extension StoreChange {
    /// One line of `changes --json` (SPEC.md §7.1).
    package var json: JSON {
        .object([
            ("origin", .string(origin.name)),
            ("records", .array(records.sorted().map { .string("\($0.kind.name):\($0.id.hex)") })),
            ("versions", versions.json),
        ])
    }
}

extension StoreChange.Origin {
    /// `local`, `merge` or `mixed`, as `changes` prints it.
    package var name: String {
        switch self {
        case .local: "local"
        case .merge: "merge"
        case .mixed: "mixed"
        }
    }
}

extension CompactionReport {
    /// The report as `syncctl compact --json` prints it (SPEC.md §11).
    package var json: JSON {
        .object([
            ("records", .int(Int64(records))), ("droppedOperations", .int(Int64(droppedOperations))), ("deferred", .bool(deferred)),
        ])
    }
}
