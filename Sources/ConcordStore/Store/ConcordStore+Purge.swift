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
            try read { db in try Self.holdsPurges(db) }
        }
    }

    /// The error of a read of `ref` that found no record, named `text` by the user: a purged
    /// record's says so (SPEC.md §12).
    package func notFound(_ ref: RecordRef, named text: String) throws(ConcordError) -> ConcordError {
        let purged = try guarded {
            try read { db in
                try Self.holdsPurges(db)
                    && Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM purged WHERE id = ? AND kind = ?)",
                                     arguments: [Data(ref.id.bytes), Int64(ref.kind.rawValue)]) == true
            }
        }
        return purged ? ConcordError(.notFound, ChangeError.purged(ref).description) : ConcordError(.notFound, "no record with id \(text)")
    }

    /// Whether the `purged` table has a row. A store of a schema before 6 opened read-only (not
    /// migrated) has no such table, and no purge.
    static func holdsPurges(_ db: Database) throws -> Bool {
        try db.tableExists("purged") && Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM purged)") == true
    }

    /// How many transactions have erased content from the store (`meta.erasures`, SPEC.md §9): a
    /// folder file this replica published when the count was lower may hold erased content.
    package func erasures() throws(ConcordError) -> Int64 {
        try guarded {
            try read { db in try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'erasures'") ?? 0 }
        }
    }

    /// After content was erased (a purge, a replaced sync key): SQLite zeroes what it deletes in
    /// its page (`PRAGMA secure_delete`), but the earlier page lives on in the database file until
    /// a checkpoint copies the new one over it, and in earlier WAL frames until the WAL is
    /// truncated; another process holding the store open could delay both indefinitely. A
    /// checkpoint that truncates the WAL waits for the reads under way to end, as a writer waits
    /// (30 s), and is tried twice, long enough for a peer session stalled on an old key to reach
    /// its idle timeout (60 s). It runs on a connection of its own, so that this store object
    /// meanwhile serves its other callers: a peer session reading through it must notice the new
    /// key, and end its reads, for the wait to end. What a reader still holds after that is erased
    /// by a later checkpoint (SPEC.md §9, "Erasing").
    func eraseFreedPages() {
        guard path != ":memory:",
              let queue = try? DatabaseQueue(path: path, configuration: Self.configuration(readOnly: false))
        else { return }
        defer { try? queue.close() }
        for _ in 0..<2 {
            // (busy, frames in the WAL, frames checkpointed): done when not busy.
            let row = try? queue.writeWithoutTransaction { db in try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            if let row, row[0] as Int? == 0 { return }
        }
    }
}
