import ConcordCore
import Foundation
import GRDB

extension ConcordStore {
    /// Erases a record's content (every value, title, text and tag) on every replica, for good
    /// (SPEC.md §5.7): a purge operation that travels like any other, and, here and on every
    /// replica that merges it, the record's row and the content of each of its logged operations
    /// erased. Unlike `delete(_:)`, it cannot be undone. Purging a purged record changes nothing;
    /// a record the store does not hold is refused (`notFound`).
    public func purge(_ ref: RecordRef) throws(ConcordError) {
        try perform(.purge, on: ref)
    }

    /// Purges every record of `kind` that the store holds, deleted or not, in one transaction,
    /// as `purge(_:)` does each. A record that another replica creates meanwhile is not purged.
    /// Returns how many records it purged.
    @discardableResult
    public func purgeAll(_ kind: RecordKind) throws(ConcordError) -> Int {
        try purgeAll([kind])
    }

    /// Purges every record of each of `kinds` in one transaction ("delete all my data" that no
    /// copy brings back, SPEC.md §5.7). Returns how many records it purged.
    @discardableResult
    public func purgeAll(_ kinds: [RecordKind]) throws(ConcordError) -> Int {
        var refs: [RecordRef] = []
        for kind in Set(kinds).sorted(by: { $0.rawValue < $1.rawValue }) { refs += try records(of: kind) }
        guard !refs.isEmpty else { return 0 }
        // Counted by the purges made: another process may purge some of them meanwhile.
        return try perform(refs.map { ($0, Change.purge) }).count
    }

    /// Every record of `kind` that has a row: deleted ones too, purged ones not.
    private func records(of kind: RecordKind) throws(ConcordError) -> [RecordRef] {
        try guarded {
            try read { db in
                let ids: [Data]
                if let table = RecordTable.of(kind) {
                    ids = try Data.fetchAll(db, sql: "SELECT id FROM \(table.name) ORDER BY id")
                } else {
                    ids = try Data.fetchAll(db, sql: "SELECT id FROM other_records WHERE kind = ? ORDER BY id", arguments: [Int64(kind.rawValue)])
                }
                return try ids.map { RecordRef(kind: kind, id: try Self.recordID($0)) }
            }
        }
    }

    /// Whether the store holds a purged record (SPEC.md §9, `purged`): its bundles and peer
    /// sessions may then carry purges and elided operations, which need bundle format 3 and peer
    /// protocol version 5 (§13, §15.10).
    package func holdsPurgedRecords() throws(ConcordError) -> Bool {
        try guarded {
            try read { db in try Self.holdsPurgedRecords(db) }
        }
    }

    /// The error of a read of `ref` that found no record, named `text` by the user: a purged
    /// record's says so (SPEC.md §12).
    package func notFound(_ ref: RecordRef, named text: String) throws(ConcordError) -> ConcordError {
        let purged = try guarded {
            try read { db in
                try Self.holdsPurgedRecords(db)
                    && Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM purged WHERE id = ? AND kind = ?)",
                                     arguments: [Data(ref.id.bytes), Int64(ref.kind.rawValue)]) == true
            }
        }
        return purged ? ConcordError(.notFound, ChangeError.purged(ref).description) : ConcordError(.notFound, "no record with id \(text)")
    }

    /// Whether the `purged` table has a row. A store of a schema before 6 opened read-only (not
    /// migrated) has no such table, and no purge.
    static func holdsPurgedRecords(_ db: Database) throws -> Bool {
        try db.tableExists("purged") && Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM purged)") == true
    }

    /// How many transactions have erased content from the store (`meta.erasures`, SPEC.md §9): a
    /// folder file this replica published when the count was lower may hold erased content.
    package func erasures() throws(ConcordError) -> Int64 {
        try guarded {
            try read { db in try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'erasures'") ?? 0 }
        }
    }
}
