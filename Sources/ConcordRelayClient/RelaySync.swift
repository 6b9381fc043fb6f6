import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordRelayProtocol
import ConcordStore
import Crypto
import Foundation

/// Two-way sync of a store through a relay (SPEC.md §16.5). A relay is a shared folder that can
/// push: the store keeps a **mirror** of the relay's space, a folder beside it, brings the mirror
/// in step with the relay, syncs with the mirror by every rule of §14 (publish, repair, coalesce),
/// then brings the relay in step with what the sync changed. So the relay's files are those a
/// shared folder would hold, sealed with the sync key, and no second set of rules exists.
public struct RelaySync: Sendable {
    /// The store that syncs.
    public let store: ConcordStore
    /// The relay.
    public let client: RelayClient
    /// The mirror: a folder of §14 (its files in `MIRROR/concord-v1/`).
    public let mirror: String

    /// A sync of `store` through the relay at `url`, with the store's sync key, which a relay
    /// requires. The mirror is `STORE.relay-H/`, H the first 16 hex digits of SHA-256 of the URL
    /// as given without trailing `/` (§16.5).
    public init(store: ConcordStore, url: String) throws(ConcordError) {
        guard let key = try store.syncKey() else {
            throw ConcordError(.noSyncKey, "the store at \(store.path) has no sync key; a relay serves only stores that hold one")
        }
        try self.init(store: store, client: try RelayClient(url: url, key: key))
    }

    /// The same, through `client` (which tests give a clock).
    public init(store: ConcordStore, client: RelayClient) throws(ConcordError) {
        self.store = store
        self.client = client
        mirror = Self.mirror(of: store.path, url: client.url)
    }

    /// Where the store at `storePath` keeps its mirror of the relay at `url` (§16.5).
    public static func mirror(of storePath: String, url: String) -> String {
        var url = url
        while url.hasSuffix("/") { url.removeLast() }
        return storePath + ".relay-" + SHA256.hash(data: Array(url.utf8)).prefix(8).hexString
    }

    /// One sync, both ways (§16.5).
    public func sync() async throws(ConcordError) -> RelaySyncReport {
        var report = RelaySyncReport()
        let files = mirror + "/concord-v1"
        try Self.makeDirectory(mirror)
        try Self.makeDirectory(files)
        let own = store.replicaID.hex + "-"

        // 1. The mirror gets what the relay holds, and loses what the relay no longer holds
        //    (coalesced away by its publisher), but for this replica's own files, which step 3
        //    uploads if the relay lacks them.
        let before = try await client.listing()
        let relayNames = Set(before.files.map(\.name))
        let mirrored = try Self.bundleNames(in: files)
        for file in before.files where !mirrored.contains(file.name) {
            do {
                guard let bytes = try await client.download(file) else { continue }
                try Self.place(bytes, as: file.name, in: files, staging: mirror, random: store.environment.random)
                report.downloadedFiles += 1
            } catch {
                report.warnings.append(ConcordError(error.code, "skipping \(file.name): \(error.message)"))
            }
        }
        for name in mirrored.subtracting(relayNames) where !name.hasPrefix(own) {
            unlink(files + "/" + name)
        }

        // 2. The mirror is a shared folder: every rule of §14.
        do {
            report.folder = try await FolderSync(store: store, folder: mirror).sync()
        } catch {
            throw error as? ConcordError ?? ConcordError(.io, "\(error)", cause: error)
        }

        // 3. The relay gets this replica's files the mirror holds and it lacks (new ones, and
        //    any the relay lost), and then loses those that the sync coalesced away: uploads
        //    first, so that the relay never holds less than the mirror.
        let after = try Self.bundleNames(in: files)
        for name in after.sorted() where name.hasPrefix(own) && !relayNames.contains(name) {
            guard let bytes = FileManager.default.contents(atPath: files + "/" + name) else { continue }
            try await client.upload(Array(bytes), as: name)
            report.uploadedFiles += 1
        }
        for name in relayNames.sorted() where name.hasPrefix(own) && !after.contains(name) {
            if try await client.delete(name) { report.deletedFiles += 1 }
        }
        report.cursor = before.cursor
        return report
    }

    // MARK: The mirror

    private static func makeDirectory(_ path: String) throws(ConcordError) {
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
            throw ConcordError(.io, "cannot make the relay's mirror \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// The names of the bundle files in `directory`.
    private static func bundleNames(in directory: String) throws(ConcordError) -> Set<String> {
        do {
            return Set(try FileManager.default.contentsOfDirectory(atPath: directory).filter { RelayNames.isFile($0) })
        } catch {
            throw ConcordError(.io, "cannot list the relay's mirror \(directory): \(error.localizedDescription)", cause: error)
        }
    }

    /// Puts a downloaded file into the mirror whole, as §14 puts a bundle into a folder: written
    /// under a temporary name outside `concord-v1` (no sync reads it half-written), flushed, then
    /// linked under its name, which it never replaces.
    private static func place(_ bytes: [UInt8], as name: String, in directory: String, staging: String, random: @Sendable () -> UInt64) throws(ConcordError) {
        let temporary = staging + "/.download-" + String(random() & 0xFFFF_FFFF, radix: 16)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else { throw ConcordError(.io, "cannot write \(temporary): \(String(cString: strerror(errno)))") }
        defer { unlink(temporary) }
        var written = 0
        while written < bytes.count {
            let count = bytes[written...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                throw ConcordError(.io, "cannot write \(temporary): \(reason)")
            }
            written += count
        }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        guard synced else { throw ConcordError(.io, "cannot flush \(temporary): \(String(cString: strerror(errno)))") }
        // Another process of this store may have placed it meanwhile: the same bytes, kept.
        guard link(temporary, directory + "/" + name) == 0 || errno == EEXIST else {
            throw ConcordError(.io, "cannot place \(name) in the relay's mirror: \(String(cString: strerror(errno)))")
        }
    }
}

/// What a sync through a relay did (§16.5).
public struct RelaySyncReport: Hashable, Sendable {
    /// What the sync with the mirror did: imported, published, coalesced, and its warnings.
    public var folder = FolderSyncReport()
    /// Files of the relay brought into the mirror.
    public var downloadedFiles = 0
    /// This replica's files stored on the relay.
    public var uploadedFiles = 0
    /// This replica's files deleted from the relay, once coalesced into one it stored first.
    public var deletedFiles = 0
    /// The files the relay listed that could not be brought (one line each, like a folder's skipped files).
    public var warnings: [ConcordError] = []
    /// The space's cursor when the sync listed it: `RelayClient.listing(waitingFrom:)` waits for the next change.
    public var cursor: Int64 = 0

    public init() {}

    /// One line (§11): `downloaded D files, uploaded U, deleted X; ` then the folder's summary.
    public var summary: String {
        "downloaded \(downloadedFiles) file\(downloadedFiles == 1 ? "" : "s"), uploaded \(uploadedFiles), deleted \(deletedFiles); \(folder.summary)"
    }
}
