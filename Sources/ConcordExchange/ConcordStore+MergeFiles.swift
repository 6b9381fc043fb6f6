import ConcordCore
import ConcordKeys
import ConcordStore
import ConcordWire

extension ConcordStore {
    /// Merges the stores and bundles at `paths`, each told apart by its content (`syncctl merge`,
    /// SPEC.md §11): stores are opened read-only and never modified; an encrypted bundle is read
    /// with this store's key, and one it cannot authenticate is refused before anything is
    /// merged. Everything is read and checked whole first, so that a damaged file merges nothing
    /// of any, and kept sorted by record; then it is logged and applied in bounded batches, each
    /// its own transaction, so that a long merge never keeps other writers out for more than a
    /// batch (SPEC.md §5.6).
    package func merge(filesAt paths: [String]) throws(ConcordError) -> MergeReport {
        var stores: [ConcordStore] = []
        var bundles: [String] = []
        var encrypted: Set<String> = []
        var key: SyncKey?
        for path in paths {
            switch try FileKind.input(at: path) {
            case .store: stores.append(try ConcordStore.open(at: path, readOnly: true))
            case .bundle: bundles.append(path)
            case .encryptedBundle:
                key = try syncKey()
                _ = try guarded { try ConcordStore.bundleReader(at: path, key: key) }
                bundles.append(path)
                encrypted.insert(path)
            case .other: throw ConcordError(.invalidInput, "\(path) is not a Concord store or bundle")
            }
        }
        // A store with a sync key takes compacted seqs only from bundles sealed with it: a plain
        // bundle or another store could claim seqs never held, and make it skip operations
        // (SPEC.md §13).
        let trustsPlain = try syncKey() == nil
        var compacted: [CompactedSeqs] = []
        var heard: [(replica: ReplicaID, holds: VersionVector)] = []
        var dropped = VersionVector()
        let report = try merge(reading: { each in
            for other in stores {
                let claimed = try other.forEachOperation(lackedBy: self, each)
                if trustsPlain {
                    compacted.append(claimed)
                    heard.append((other.replicaID, try other.versionVector()))
                    dropped.merge(try other.droppedStableThrough())
                }
            }
            for path in bundles {
                let summary = try Self.readBundle(at: path, key: key, each)
                if trustsPlain || encrypted.contains(path) {
                    compacted.append(CompactedSeqs(
                        seqs: summary.compacted, base: summary.manifest.base, droppedStableThrough: summary.manifest.droppedStableThrough))
                    heard.append((summary.manifest.publisher, summary.manifest.top))
                    dropped.merge(summary.manifest.droppedStableThrough)
                }
            }
        }, compacted: { compacted })
        try learn(heard, dropped: dropped)
        return report
    }

    /// Reads the bundle at `path`, plain or (with `key`) encrypted, whole, calling `body` with its
    /// operations.
    @discardableResult
    package static func readBundle(at path: String, key: SyncKey?, _ body: (Op) throws -> Void) throws -> BundleSummary {
        var reader = try bundleReader(at: path, key: key)
        do {
            return try reader.forEachOperation(body)
        } catch let error as BundleError {
            throw FileInputError(path: path, reason: error.description)
        }
    }
}
