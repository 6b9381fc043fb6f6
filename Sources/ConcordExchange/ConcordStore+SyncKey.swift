import ConcordKeys
import ConcordStore

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
