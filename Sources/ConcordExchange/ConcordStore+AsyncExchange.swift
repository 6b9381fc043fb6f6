import ConcordCore
import ConcordKeys
import ConcordStore

/// The async forms of the exchange layer's merges and syncs: the same names, called with `await`,
/// each running its synchronous form on the store's queue for async calls (see
/// `ConcordStore+Async.swift` in ConcordStore).
extension ConcordStore {
    /// The async form of `mergeBundle(at:requireEncrypted:skipping:)`.
    @discardableResult
    public func mergeBundle(
        at path: String, requireEncrypted: Bool = false, skipping: [ReplicaID: UInt64] = [:]
    ) async throws -> (MergeReport, BundleSummary) {
        try await offload { () throws in try self.mergeBundle(at: path, requireEncrypted: requireEncrypted, skipping: skipping) }
    }

    /// The async form of `exportBundle(to:since:contiguousOnly:exclusive:temporaryName:encryptingWith:)`.
    @discardableResult
    public func exportBundle(
        to path: String, since: VersionVector = VersionVector(), contiguousOnly: Bool = false,
        exclusive: Bool = false, temporaryName: String? = nil, encryptingWith key: SyncKey? = nil
    ) async throws -> BundleSummary {
        try await offload { () throws in
            try self.exportBundle(
                to: path, since: since, contiguousOnly: contiguousOnly, exclusive: exclusive, temporaryName: temporaryName,
                encryptingWith: key)
        }
    }

    /// The async form of `sync(folder:progress:)`: one two-way sync through a shared folder.
    @discardableResult
    public func sync(folder: String, progress: (@Sendable (SyncProgress) -> Void)? = nil) async throws(ConcordError) -> FolderSyncReport {
        try await offload { () throws(ConcordError) in try self.sync(folder: folder, progress: progress) }
    }
}

extension FolderSync {
    /// The async form of `sync(progress:)`.
    @discardableResult
    public func sync(progress: (@Sendable (SyncProgress) -> Void)? = nil) async throws(ConcordError) -> FolderSyncReport {
        try await store.offload { () throws(ConcordError) in try self.sync(progress: progress) }
    }
}
