import ConcordCore
import ConcordKeys
import ConcordStore
import Crypto
import Foundation

extension ConcordStore {
    /// Writes a bundle of the operations a peer with version vector `since` lacks (all of them
    /// by default) to `path`, atomically.
    ///
    /// - Parameter contiguousOnly: leave out operations held above a gap (delivered out of order);
    ///   they follow once the gap is filled. Shared-folder sync uses this so that a file's `top`
    ///   says exactly what it covers.
    /// - Parameter exclusive: fail with `ConcordError.Code.exists` rather than replace a file at `path`.
    /// - Parameter key: encrypt the bundle with this sync key (SPEC.md §13.1); the summary's
    ///   `bytes` is then the encrypted file's size.
    @discardableResult
    public func exportBundle(
        to path: String, since: VersionVector = VersionVector(), contiguousOnly: Bool = false,
        exclusive: Bool = false, temporaryName: String? = nil, encryptingWith key: SyncKey? = nil
    ) throws -> BundleSummary {
        try exportBundle(
            to: path, since: since, contiguousOnly: contiguousOnly, exclusive: exclusive, temporaryName: temporaryName, encryptingWith: key
        ) { _, place in try place() }
    }

    /// `exportBundle(to:…)`, which hands the written file, durable under its temporary name, to
    /// `placing` with its summary and the call that moves it into place. A shared-folder sync
    /// records a file as its own before the file is there (SPEC.md §14, "Serials"). The temporary
    /// file is removed if `placing` throws.
    package func exportBundle(
        to path: String, since: VersionVector = VersionVector(), contiguousOnly: Bool = false, exclusive: Bool = false,
        temporaryName: String? = nil, encryptingWith key: SyncKey? = nil,
        placing: (BundleSummary, _ place: () throws(ConcordError) -> Void) throws -> Void
    ) throws -> BundleSummary {
        if FileKind.of(path: path) == .store {
            throw ConcordError(.invalidInput, "\(path) is a Concord store; a bundle is never written over one")
        }
        var status = stat()
        if stat(path, &status) == 0, status.st_mode & S_IFMT != S_IFREG {
            throw ConcordError(.invalidInput, "\(path) is not a regular file")
        }
        if let owner = StoreFile.sideFileOwner(of: path) {
            throw ConcordError(.invalidInput, "\(path) is SQLite's side file of the store at \(owner); a bundle is never written over one")
        }
        let name = temporaryName ?? ".\((path as NSString).lastPathComponent).tmp-\(String(environment.random() & 0xFFFF_FFFF, radix: 16))"
        while true {
            // A store that does not hold where removes were dropped as stable may hold the adds
            // they named: it gets every compacted seq, from the empty vector (SPEC.md §5.8).
            let dropped = try droppedStableThrough()
            let base = since.covers(dropped) ? since : VersionVector()
            let manifest = BundleManifest(
                publisher: replicaID, createdMillis: environment.wallClock(), base: base, top: try versionVector(), droppedStableThrough: dropped)
            do {
                return try exportBundle(
                    to: path, manifest: manifest, since: base, contiguousOnly: contiguousOnly, exclusive: exclusive,
                    temporaryName: name, encryptingWith: key, placing: placing)
            } catch is DroppedRemovesMoved {
                continue
            }
        }
    }

    /// A compaction dropped removes as stable while an export read the log: the export starts
    /// again with a manifest that says so.
    private struct DroppedRemovesMoved: Error {}

    /// `exportBundle(to:…)` with the manifest the bundle is to carry.
    private func exportBundle(
        to path: String, manifest: BundleManifest, since: VersionVector, contiguousOnly: Bool, exclusive: Bool,
        temporaryName name: String, encryptingWith key: SyncKey?, placing: (BundleSummary, () throws(ConcordError) -> Void) throws -> Void
    ) throws -> BundleSummary {
        let top = manifest.top
        let file = try AtomicFile(path: path, temporaryName: name)
        // A write of the file that failed, inside the store's read or not: it says what failed.
        var writeFailure: ConcordError?
        var summary: BundleSummary
        do {
            var hasher = SHA256()
            let write = { (bytes: ArraySlice<UInt8>) throws(ConcordError) in
                hasher.update(data: bytes)
                do throws(ConcordError) {
                    try file.write(bytes)
                } catch {
                    writeFailure = error
                    throw error
                }
            }
            let sealer = try key.map { key in try BundleSealer(key: key, sink: write) }
            var writer = try BundleWriter(manifest: manifest) { bytes in
                if let sealer { try sealer.write(bytes) } else { try write(bytes) }
            }
            // Every seq past `since`: its operation, or compacted (SPEC.md §5.8, §13).
            try forEachRun(since: since) { author, seqs, operations in
                let end = contiguousOnly ? min(seqs.upperBound, top[author]) : seqs.upperBound
                guard seqs.lowerBound <= end else { return }
                try Self.forEachEntry(of: seqs.lowerBound...end, holding: operations.prefix { $0.id.seq <= end }) { entry in
                    switch entry {
                    case .operation(let operation): try writer.append(operation)
                    case .compacted(let stretch): try writer.appendCompacted(stretch, of: author)
                    }
                }
            }
            summary = try writer.finish()
            if let sealer {
                try sealer.finish()
                summary.bytes = sealer.bytesWritten
            }
            summary.sha256 = Array(hasher.finalize())
        } catch {
            file.abandon()
            if let writeFailure { throw writeFailure }
            throw ConcordError(.io, "cannot export to \(path): \(error)", cause: error)
        }
        try file.flush()
        // A compaction records where it drops removes before it drops them: the log read above
        // holds none dropped past what the manifest says, unless this moved since.
        guard try droppedStableThrough() == manifest.droppedStableThrough else {
            file.abandon()
            throw DroppedRemovesMoved()
        }
        do {
            try placing(summary) { () throws(ConcordError) in try file.place(exclusive: exclusive) }
        } catch {
            file.abandon()
            throw error
        }
        return summary
    }

    /// Merges the bundle at `path`, plain or encrypted (SPEC.md §13). The bundle is first read
    /// whole, checking every block, operation and the end block while applying nothing, and its
    /// operations are kept sorted by record (in memory, or in a temporary file beside the store);
    /// then they are logged and applied from there: in one transaction if they fit in one batch,
    /// else in bounded batches, each its own transaction (SPEC.md §5.6). A damaged bundle applies
    /// nothing; a merge interrupted halfway keeps its committed batches.
    ///
    /// An encrypted bundle (§13.1) is read with the store's sync key; one this store cannot
    /// authenticate (no key, another key, a chunk that fails authentication) applies nothing.
    /// The summary describes the whole file (its `sha256` is that of every byte the merge read:
    /// the reader reads to the end of the file, to check that nothing follows the bundle).
    /// - Parameter requireEncrypted: refuse a plain bundle (shared folders do, when the store has a key).
    /// - Parameter skipping: leave out the operations of these replicas from these seqs up
    ///   (a shared folder's file that clashes, SPEC.md §14).
    @discardableResult
    public func mergeBundle(
        at path: String, requireEncrypted: Bool = false, skipping: [ReplicaID: UInt64] = [:]
    ) throws -> (MergeReport, BundleSummary) {
        let merged: (MergeReport, BundleSummary, vouched: Bool)
        do {
            merged = try mergeBundle(telling: path, requireEncrypted: requireEncrypted, skipping: skipping)
        } catch {
            switch error {
            case .file(let error): throw error
            case .store(let error): throw error
            }
        }
        let (report, summary, vouched) = merged
        if vouched { try learn([(summary.manifest.publisher, summary.manifest.top)], dropped: summary.manifest.droppedStableThrough) }
        return (report, summary)
    }

    /// `mergeBundle(at:requireEncrypted:skipping:)`, telling a file that cannot be read or merged
    /// (a shared folder skips it) from a store that failed (a sync stops), and whether the file
    /// vouches for what it claims (its compacted seqs, and that its publisher holds its `top`):
    /// sealed with the store's key, or plain for a store without one, and merged whole.
    func mergeBundle(
        telling path: String, requireEncrypted: Bool, skipping: [ReplicaID: UInt64]
    ) throws(BundleMergeFailure) -> (MergeReport, BundleSummary, vouched: Bool) {
        let key: SyncKey?
        do throws(ConcordError) {
            key = try syncKey()
        } catch {
            throw .store(error)
        }
        let file: FileSource
        var reader: BundleReader<BundleSource<FileSource>>
        do {
            file = try FileSource(path: path, hashing: true)
            reader = try Self.bundleReader(file, path: path, key: key, requireEncrypted: requireEncrypted)
        } catch {
            throw .file(error)
        }
        var summary: BundleSummary?
        let result = Result { () throws(ConcordError) in
            try merge(reading: { each in
                guard !skipping.isEmpty else { return summary = try reader.forEachOperation(each) }
                summary = try reader.forEachOperation { operation in
                    if let from = skipping[operation.id.replica], operation.id.seq >= from { return }
                    try each(operation)
                }
            }, compacted: {
                // A store with a sync key takes compacted seqs only from a bundle sealed with it: a
                // plain one could claim seqs it never held, and make it skip operations (SPEC.md §13).
                guard key == nil || reader.input.isEncrypted else { return [] }
                // Nor from a file that clashes: the operations left out may be the very ones that
                // made its compacted seqs, of any replica, redundant (SPEC.md §14).
                guard skipping.isEmpty, let seqs = summary?.compacted, let base = summary?.manifest.base else { return [] }
                return [CompactedSeqs(seqs: seqs, base: base, droppedStableThrough: summary?.manifest.droppedStableThrough ?? VersionVector())]
            })
        }
        switch result {
        case .failure(let error) where error.code == .invalidInput:
            throw .file(ConcordError(.invalidInput, "\(path): \(error.message)", cause: error))
        case .failure(let error):
            throw .store(error)
        case .success(let report):
            summary?.sha256 = file.sha256
            return (report, summary!, (key == nil || reader.input.isEncrypted) && skipping.isEmpty)
        }
    }

    /// A reader of the bundle file at `path`, plain or encrypted (opened with `key`).
    package static func bundleReader(
        at path: String, key: SyncKey?, requireEncrypted: Bool = false
    ) throws -> BundleReader<BundleSource<FileSource>> {
        try bundleReader(try FileSource(path: path), path: path, key: key, requireEncrypted: requireEncrypted)
    }

    private static func bundleReader(
        _ file: FileSource, path: String, key: SyncKey?, requireEncrypted: Bool
    ) throws -> BundleReader<BundleSource<FileSource>> {
        do {
            let source = try BundleSource(file, key: key)
            if requireEncrypted, !source.isEncrypted {
                throw ConcordError(.invalidInput, "\(path): a plain bundle; this store has a sync key, and takes only bundles encrypted with it from a shared folder")
            }
            return BundleReader(source)
        } catch let error as BundleError {
            let code: ConcordError.Code =
                switch error {
                case .encrypted: .encryptedBundle
                default: .invalidInput
                }
            throw ConcordError(code, "\(path): \(error)", cause: error)
        }
    }
}

/// Why the merge of a bundle file failed: the file (it cannot be read, or is not a bundle the
/// store takes), or the store.
enum BundleMergeFailure: Error {
    case file(any Error)
    case store(ConcordError)
}

extension VersionVector {
    /// A version vector given as text: a JSON object from replica id to seq, or an object that
    /// holds one under `versionVector` (the whole output of `syncctl status --json`).
    package init(json text: String) throws(ConcordError) {
        struct Status: Decodable { var versionVector: [String: UInt64] }
        let data = Data(text.utf8)
        guard let entries = (try? JSONDecoder().decode([String: UInt64].self, from: data))
            ?? (try? JSONDecoder().decode(Status.self, from: data).versionVector)
        else {
            throw ConcordError(.notAVersionVector, "a version vector is a JSON object from replica id to sequence number")
        }
        var vector: [ReplicaID: UInt64] = [:]
        for (key, value) in entries {
            guard let replica = ReplicaID(hex: key) else {
                throw ConcordError(.invalidInput, "'\(key)' in the version vector is not a replica id")
            }
            vector[replica] = value
        }
        self.init(vector)
    }
}
