import GRDB

extension ConcordStore {
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
