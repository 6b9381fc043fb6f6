import ConcordCore
import ConcordStore
import Foundation

extension ConcordStore {
    /// Writes a bundle of the operations a peer with version vector `since` lacks (all of them
    /// by default) to `path`, atomically.
    ///
    /// - Parameter contiguousOnly: leave out operations held above a gap (delivered out of order);
    ///   they follow once the gap is filled. Shared-folder sync uses this so that a file's `top`
    ///   says exactly what it covers.
    /// - Parameter exclusive: fail with `ExchangeError.Code.exists` rather than replace a file at `path`.
    @discardableResult
    public func exportBundle(
        to path: String, since: VersionVector = VersionVector(), contiguousOnly: Bool = false,
        exclusive: Bool = false, temporaryName: String? = nil
    ) throws -> BundleSummary {
        let top = try versionVector()
        let manifest = BundleManifest(publisher: replicaID, createdMillis: environment.wallClock(), base: since, top: top)
        if FileKind.of(path: path) == .store {
            throw ExchangeError(.invalidInput, "\(path) is a Concord store; a bundle is never written over one")
        }
        let name = temporaryName ?? ".\((path as NSString).lastPathComponent).tmp-\(String(environment.random() & 0xFFFF_FFFF, radix: 16))"
        let file = try AtomicFile(path: path, temporaryName: name)
        do {
            var writer = try BundleWriter(manifest: manifest) { bytes in try file.write(bytes) }
            try forEachOperation(since: since) { operation in
                if !contiguousOnly || operation.id.seq <= top[operation.id.replica] { try writer.append(operation) }
            }
            let summary = try writer.finish()
            try file.commit(exclusive: exclusive)
            return summary
        } catch {
            file.abandon()
            // A write of the file that failed inside the store's read comes back wrapped.
            if let error = error as? ExchangeError ?? (error as? StoreError)?.underlying as? ExchangeError { throw error }
            throw ExchangeError(.io, "cannot export to \(path): \(error)")
        }
    }

    /// Merges the bundle at `path`: first reads it whole, checking every block, operation and the
    /// end block while applying nothing; then applies it in bounded batches, each its own
    /// transaction (SPEC.md §13). A damaged bundle applies nothing; a merge interrupted halfway
    /// keeps its committed batches. With `importing`, records the file as imported from its folder
    /// in the last batch's transaction.
    @discardableResult
    public func mergeBundle(at path: String, importing file: ImportedFile? = nil) throws -> (MergeReport, BundleSummary) {
        var verifier = BundleReader(try FileSource(path: path))
        let verified: BundleSummary
        do {
            verified = try verifier.forEachOperation { _ in }
        } catch let error as BundleError {
            throw ExchangeError(.invalidInput, "\(path): \(error)")
        }
        var reader = BundleReader(try FileSource(path: path))
        var summary: BundleSummary?
        let report: MergeReport
        do {
            report = try mergeInBatches(importing: file) { ingest in
                summary = try reader.forEachOperation(ingest)
            }
        } catch {
            guard error.code == .invalidInput else { throw error }
            throw ExchangeError(.invalidInput, "\(path): \(error.message)")
        }
        guard let summary, summary == verified else {
            throw ExchangeError(.invalidInput, "\(path): the bundle changed while it was being merged")
        }
        return (report, summary)
    }
}

extension VersionVector {
    /// A version vector given on the command line: a JSON object from replica id to seq, or the
    /// whole output of `syncctl status --json` (its `versionVector`).
    public init(json text: String) throws(ExchangeError) {
        struct Status: Decodable { var versionVector: [String: UInt64] }
        let data = Data(text.utf8)
        guard let entries = (try? JSONDecoder().decode([String: UInt64].self, from: data))
            ?? (try? JSONDecoder().decode(Status.self, from: data).versionVector)
        else {
            throw ExchangeError(.invalidInput, "a version vector is a JSON object from replica id to sequence number, as 'syncctl status --json' prints")
        }
        var vector: [ReplicaID: UInt64] = [:]
        for (key, value) in entries {
            guard let replica = ReplicaID(hex: key) else {
                throw ExchangeError(.invalidInput, "'\(key)' in the version vector is not a replica id")
            }
            vector[replica] = value
        }
        self.init(vector)
    }
}
