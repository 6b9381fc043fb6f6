import ConcordCore
import ConcordKeys
import Foundation
import GRDB

extension ConcordStore {
    /// The length of a sync key in bytes (SPEC.md §15.1).
    package static let syncKeyByteCount = 32

    /// The sync key's 32 bytes as stored in the store's `meta` table (SPEC.md §9, §15.1), or `nil`
    /// when the store has none: `syncKey()`, without the type.
    package func syncKeyBytes() throws(ConcordError) -> [UInt8]? {
        try guarded {
            try read { db in
                guard let data = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'sync_key'") else { return nil }
                guard data.count == Self.syncKeyByteCount else {
                    throw ConcordError(.corrupt, "the store at \(path) holds a sync key of \(data.count) bytes, not \(Self.syncKeyByteCount)")
                }
                return [UInt8](data)
            }
        }
    }

    static func syncKeyBytes(_ db: Database) throws -> [UInt8]? {
        try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'sync_key'").map { [UInt8]($0) }
    }

    /// Stores a sync key (32 bytes) in the store's `meta` table, in one transaction.
    ///
    /// Once the transaction holds the store for writing, and before the key is written, the store's
    /// file and its `-wal` and `-shm` files lose every permission of group and others, so the key
    /// never sits in a file others can read (SQLite gives the `-wal` and `-shm` files it creates
    /// later the database file's mode); the owner's permissions are kept, so a read-only store
    /// stays read-only. If the key is not written after all, their modes are put back. A replaced
    /// key is overwritten in its database page (`PRAGMA secure_delete`, on for every write), and the WAL is then
    /// checkpointed and truncated, so that its bytes are in no file (SPEC.md §15.1).
    ///
    /// - Parameter replacing: replace a key the store already holds. Without it, a store that holds
    ///   another key is left unchanged and the call fails with `ConcordError.Code.exists`; storing
    ///   the key the store already holds changes nothing.
    /// - Returns: whether the store changed (it held no key, or another one).
    @discardableResult
    package func setSyncKeyBytes(_ bytes: [UInt8], replacing: Bool = false) throws(ConcordError) -> Bool {
        precondition(bytes.count == Self.syncKeyByteCount, "a sync key has \(Self.syncKeyByteCount) bytes")
        let outcome: KeyWrite = try guarded {
            try writeWithoutTransaction { db in
                var outcome = KeyWrite.unchanged
                try db.inTransaction(.immediate) {
                    let old = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'sync_key'")
                    if let old {
                        if [UInt8](old) == bytes { return .commit }
                        guard replacing else {
                            throw ConcordError(.exists, "the store at \(path) already holds another sync key")
                        }
                    }
                    // Narrowed while this transaction holds the store, and put back before it lets
                    // go if the key is not written: no other writer sees the modes in between.
                    // (Should the commit itself fail, they stay narrowed: the owner's bits are
                    // kept, so that changes nothing but who else may read.)
                    var modes = FileModes()
                    do {
                        if path != ":memory:" { try modes.makePrivate([path, path + "-wal", path + "-shm"]) }
                        try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('sync_key', ?)", arguments: [Data(bytes)])
                    } catch {
                        modes.restore()
                        throw error
                    }
                    outcome = old == nil ? .stored : .replaced
                    return .commit
                }
                return outcome
            }
        }
        // The key is replaced whatever happens next: erasing the old one's bytes is best effort.
        if outcome == .replaced { eraseFreedPages() }
        return outcome != .unchanged
    }

    private enum KeyWrite { case unchanged, stored, replaced }
}

/// The modes of files made private, to put back if what they were made private for fails.
private struct FileModes {
    private var original: [(path: String, mode: mode_t)] = []

    /// Clears the group and other permission bits of each file that exists.
    mutating func makePrivate(_ paths: [String]) throws(ConcordError) {
        for path in paths {
            var status = stat()
            guard stat(path, &status) == 0 else { continue }
            let mode = status.st_mode & 0o7777
            guard mode & 0o077 != 0 else { continue }
            guard chmod(path, mode & 0o700) == 0 else {
                throw ConcordError(.io, "cannot make \(path) private (chmod): \(String(cString: strerror(errno)))")
            }
            original.append((path, mode))
        }
    }

    func restore() {
        for (path, mode) in original { chmod(path, mode) }
    }
}

extension ConcordStore {
    /// The store's sync key (SPEC.md §15.1), or `nil` when it has none. It is kept in the store's
    /// `meta` table, and the store's files are private to their owner once it is set.
    public func syncKey() throws(ConcordError) -> SyncKey? {
        try syncKeyBytes().flatMap { SyncKey(bytes: $0) }
    }

    /// Sets the store's sync key. With a key, every bundle the store publishes to a shared folder
    /// is encrypted with it, folder bundles are taken only when encrypted with it, and the store
    /// syncs with peers that hold it (SPEC.md §13.1, §14, §15).
    ///
    /// - Parameter replacing: replace another key the store holds. Without it, that is refused
    ///   (`ConcordError.Code.exists`) and the store is unchanged. Setting the key it holds changes nothing.
    /// - Returns: whether the store changed.
    @discardableResult
    public func setSyncKey(_ key: SyncKey, replacing: Bool = false) throws(ConcordError) -> Bool {
        try setSyncKeyBytes(key.bytes, replacing: replacing)
    }
}

extension ConcordError {
    /// The error of a store at `path` without a sync key, where one is needed.
    package static func noSyncKey(at path: String) -> ConcordError {
        ConcordError(.noSyncKey, "the store at \(path) has no sync key")
    }
}
