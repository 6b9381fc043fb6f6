import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordRelayProtocol
import ConcordStore
import Crypto
import Foundation

/// Two-way sync of a store through a relay (SPEC.md §16.5). A relay is a shared folder that can
/// push: the store keeps a **mirror** of its space, a folder beside it, brings the mirror in step
/// with the relay, syncs with the mirror by every rule of §14 (publish, repair, coalesce), then
/// brings the relay in step with what the sync changed. So the relay's files are those a shared
/// folder would hold, sealed with the sync key, and no second set of rules exists.
public struct RelaySync: Sendable {
    /// The store that syncs.
    public let store: ConcordStore
    /// The relay, as kept: `http://HOST:PORT` or `https://HOST:PORT`, without a `/` at its end.
    public let url: String
    private let nowMillis: @Sendable () -> UInt64

    /// A sync of `store` through the relay at `url`. Each sync reads the store's sync key, which
    /// a relay requires, when it starts: a key replaced meanwhile is used from the next sync on.
    ///
    /// - Parameter nowMillis: the device's clock for the requests' signatures (tests inject it).
    public init(
        store: ConcordStore, url: String, nowMillis: @escaping @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970 * 1000) }
    ) throws(ConcordError) {
        self.store = store
        self.url = try RelayClient.relayURL(url)
        self.nowMillis = nowMillis
    }

    /// Where the store at `storePath` keeps its mirror of `space` on the relay at `url` (§16.5):
    /// `STORE.relay-H`, H the first 8 bytes of SHA-256 of `URL LF SPACE` in hex.
    public static func mirror(of storePath: String, url: String, space: String) -> String {
        storePath + ".relay-" + SHA256.hash(data: Array("\(url)\n\(space)".utf8)).prefix(8).hexString
    }

    /// The client of the store's space, with the key the store holds now.
    public func client() async throws(ConcordError) -> RelayClient {
        guard let key = try await store.offloadRead({ () throws(ConcordError) in try store.syncKey() }) else {
            throw ConcordError(.noSyncKey, "the store at \(store.path) has no sync key; a relay serves only stores that hold one")
        }
        return try RelayClient(url: url, key: key, nowMillis: nowMillis)
    }

    /// One sync, both ways (§16.5).
    public func sync() async throws(ConcordError) -> RelaySyncReport {
        try await sync(listed: nil)
    }

    /// One sync, which begins with `listed` where a listing that waited for a change just
    /// answered it (a live sync's) and is of the space the store's key names now, or lists the
    /// space itself.
    private func sync(listed: SpaceListing?) async throws(ConcordError) -> RelaySyncReport {
        let client = try await client()
        let mirror = Self.mirror(of: store.path, url: url, space: client.space)
        var report = RelaySyncReport()
        let files = mirror + "/concord-v1"
        let own = store.replicaID.hex + "-"
        // The mirror's files are read and written off the tasks' shared threads, as the store is
        // (`offload`): a slow disk holds up this sync only.
        let mirrored = try await ConcordStore.offload { () throws(ConcordError) in
            try Self.makeDirectory(mirror)
            try Self.makeDirectory(files)
            return try Self.bundleNames(in: files)
        }

        // 1. The mirror gets what the relay holds, and loses what the relay no longer holds
        //    (coalesced away by its publisher), but for this replica's own files, which step 3
        //    uploads if the relay lacks them.
        let before: RelayListing
        if let listed, listed.space == client.space { before = listed.listing } else { before = try await client.listing() }
        let relayNames = Set(before.files.map(\.name))
        for file in before.files where !mirrored.contains(file.name) {
            // A file whose bytes are not those listed is skipped; a relay that cannot be reached
            // fails the sync, which is tried again.
            do {
                guard let bytes = try await client.download(file) else { continue }
                let random = store.environment.random
                try await ConcordStore.offload { () throws(ConcordError) in
                    try Self.place(bytes, as: file.name, in: files, staging: mirror, random: random)
                }
                report.downloadedFiles += 1
            } catch where error.code == .corrupt {
                report.warnings.append(ConcordError(error.code, "skipping \(file.name): \(error.message)"))
            }
        }
        let gone = mirrored.subtracting(relayNames).filter { !$0.hasPrefix(own) }
        await ConcordStore.offload {
            for name in gone { unlink(files + "/" + name) }
        }

        // 2. The mirror is a shared folder: every rule of §14.
        report.folder = try await FolderSync(store: store, folder: mirror).sync()

        // 3. The relay gets this replica's files the mirror holds and it lacks (new ones, and
        //    any the relay lost), and then loses those that the sync coalesced away: uploads
        //    first, so that the relay never holds less than the mirror.
        let after = try await ConcordStore.offload { () throws(ConcordError) in try Self.bundleNames(in: files) }
        for name in after.sorted() where name.hasPrefix(own) && !relayNames.contains(name) {
            guard let bytes = await ConcordStore.offload({ FileManager.default.contents(atPath: files + "/" + name) }) else { continue }
            try await client.upload(Array(bytes), as: name)
            report.uploadedFiles += 1
        }
        report.deletedFiles = try await client.delete(relayNames.filter { $0.hasPrefix(own) && !after.contains($0) }).count
        report.cursor = before.cursor
        return report
    }

    // MARK: Wiping

    /// This replica's files on the relay, as it uploaded them (§11, `wipe --relay`): the files
    /// the relay lists under this replica's id whose SHA-256 is that of a file the store recorded
    /// as its own in its mirror. One that merely carries its id stays, with a warning. Nothing is
    /// deleted here: `RelayWipe.delete()` does, once the caller knows it can do all it was asked.
    public func ownFiles() async throws(ConcordError) -> RelayWipe {
        let client = try await client()
        let folder = FolderSync(store: store, folder: Self.mirror(of: store.path, url: url, space: client.space))
        let recorded = try await store.offloadRead { () throws(ConcordError) in try folder.ownRecordedFiles() }
        var wipe = RelayWipe(client: client)
        for file in try await client.listing().files where file.name.hasPrefix(store.replicaID.hex + "-") {
            if recorded[file.name] == file.sha256 {
                wipe.files.append(file)
            } else {
                wipe.warnings.append(ConcordError(.invalidInput, "skipping \(file.name) on the relay: not a file this replica uploaded; it stays"))
            }
        }
        return wipe
    }

    /// The mirrors the store at `storePath` keeps, of any relay and space (`STORE.relay-H`).
    public static func mirrors(of storePath: String) -> [String] {
        let directory = (storePath as NSString).deletingLastPathComponent
        let prefix = (storePath as NSString).lastPathComponent + ".relay-"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.isEmpty ? "." : directory)) ?? []
        return names.filter { $0.hasPrefix(prefix) && $0.utf8.count == prefix.utf8.count + 16 && [UInt8](lowercaseHex: $0.dropFirst(prefix.count)) != nil }
            .sorted().map { (directory as NSString).appendingPathComponent($0) }
    }

    // MARK: Live

    /// Keeps the store and the relay in step until the task iterating the stream is cancelled
    /// (§16.5, "Live"): a sync, then a wait for the space to change on the relay (a listing that
    /// waits, `wait=25`, asked again as it ends) or for a commit to the store by any process,
    /// whichever comes first, then a sync again. A sync that fails is tried again after the waits
    /// of a live peer client (`ReconnectBackoff`, §15.10), back to the first after one that
    /// succeeded.
    ///
    /// The stream finishes after `forked` (open the store again and go on as the new replica),
    /// and throws a failure that would recur: no sync key (`noSyncKey`), a store file replaced
    /// by another (`replaced`).
    public func live(jitter: @escaping @Sendable () -> Double = { Double.random(in: -0.2...0.2) }) -> AsyncThrowingStream<RelayLiveEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream<RelayLiveEvent, any Error>.makeStream()
        let task = Task {
            do throws(ConcordError) {
                try await keepLive(jitter: jitter) { continuation.yield($0) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    private func keepLive(jitter: @escaping @Sendable () -> Double, report: @escaping @Sendable (RelayLiveEvent) -> Void) async throws(ConcordError) {
        // The store's commits, by any process, ring the bell; a fork or a replaced file ends.
        let commits = ChangeBell()
        let ending = LockedEnding()
        let watcher = Task {
            do {
                for try await event in store.events() {
                    switch event {
                    case .changed:
                        commits.ring("")
                    case .forked(let replica, _):
                        ending.set(.forked(replica: replica))
                        commits.ring("")
                        return
                    case .replaced(let error):
                        ending.set(.ended(error))
                        commits.ring("")
                        return
                    }
                }
            } catch {
                // The store cannot be followed (no file descriptor left, say): what lands would
                // not be published, so live sync ends with that error.
                ending.set(.ended(error as? ConcordError ?? ConcordError(.local, String(describing: error))))
                commits.ring("")
            }
        }
        defer { watcher.cancel() }

        var backoff = ReconnectBackoff(jitter: jitter)
        var listed: SpaceListing?
        while !Task.isCancelled {
            switch ending.value {
            case .ended(let error): throw error
            case .forked(let replica):
                report(.forked(replica: replica))
                return
            case nil: break
            }
            let seen = commits.rings(of: "")
            do throws(ConcordError) {
                // The sync publishes at least this replica's operations up to here.
                let published = try await publishedSeq()
                let synced = try await sync(listed: listed)
                backoff = ReconnectBackoff(jitter: jitter)
                report(.synced(synced))
                listed = try await waitForChange(after: synced.cursor, commits: commits, seen: seen, published: published, ending: ending)
            } catch {
                listed = nil
                if Task.isCancelled { return }
                guard ![.noSyncKey, .replaced].contains(error.code) else { throw error }
                let delay = backoff.wait(after: .failed)
                report(.failed(error, retryingIn: delay))
                try? await Task.sleep(for: delay)
            }
        }
    }

    /// The seq up to which the store holds this replica's operations: what a sync publishes.
    private func publishedSeq() async throws(ConcordError) -> UInt64 {
        try await store.offloadRead { () throws(ConcordError) in try store.versionVector()[store.replicaID] }
    }

    /// Returns once there is something to sync: the relay lists other files than the mirror
    /// holds (a new cursor alone is not enough: this replica's own uploads move it too), or this
    /// replica has written past `published` since the bell rang `seen` times (a commit by this
    /// sync's own imports rings it too), or the store's events ended. The listing that ended the
    /// wait, if one did: the next sync begins with it.
    private func waitForChange(
        after cursor: Int64, commits: ChangeBell, seen: UInt64, published: UInt64, ending: LockedEnding
    ) async throws(ConcordError) -> SpaceListing? {
        let client = try await client()
        let files = Self.mirror(of: store.path, url: url, space: client.space) + "/concord-v1"
        do {
            return try await withThrowingTaskGroup(of: SpaceListing?.self) { group in
                group.addTask {
                    var cursor = cursor
                    while true {
                        let listing = try await client.listing(waitingFrom: cursor, wait: .seconds(25))
                        if listing.cursor == cursor { continue }
                        let mirrored = try await ConcordStore.offload { () throws(ConcordError) in try Self.bundleNames(in: files) }
                        if Set(listing.files.map(\.name)) != mirrored { return SpaceListing(space: client.space, listing: listing) }
                        cursor = listing.cursor
                    }
                }
                group.addTask { [self] in
                    var rings = seen
                    while !Task.isCancelled {
                        if commits.rings(of: "") != rings {
                            rings = commits.rings(of: "")
                            if ending.value != nil { return nil }
                            if try await publishedSeq() != published { return nil }
                        }
                        await commits.wait(for: "", after: rings, upTo: .seconds(3600))
                    }
                    return nil
                }
                let listing = try await group.next() ?? nil
                group.cancelAll()
                return listing
            }
        } catch {
            throw error as? ConcordError ?? ConcordError(.relay, "\(error)", cause: error)
        }
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

/// What `syncctl wipe --relay URL` deletes of a replica on a relay (SPEC.md §11, `wipe`).
public struct RelayWipe: Sendable {
    /// The relay's client, with the key the store held when the files were found.
    public let client: RelayClient
    /// The files to delete.
    public var files: [RelayFile] = []
    /// One per file that carries the replica's id but stays, and why.
    public var warnings: [ConcordError] = []

    /// Deletes `files` from the relay; those it still held.
    public func delete() async throws(ConcordError) -> [RelayFile] {
        let deleted = Set(try await client.delete(files.map(\.name)))
        return files.filter { deleted.contains($0.name) }
    }
}

/// What a live sync through a relay reports as it goes (`RelaySync.live`).
public enum RelayLiveEvent: Sendable, Hashable {
    /// A sync succeeded: what it did.
    case synced(RelaySyncReport)
    /// A sync failed; the next is tried after `retryingIn`.
    case failed(ConcordError, retryingIn: Duration)
    /// Another process made the store another replica (`init --fork`, SPEC.md §9.1): the stream
    /// ends; open the store again to go on as `replica`.
    case forked(replica: ReplicaID)
}

/// A listing, and the space it is of: a key replaced meanwhile names another.
private struct SpaceListing: Sendable {
    var space: String
    var listing: RelayListing
}

/// Why the store's events ended a live sync.
private final class LockedEnding: Sendable {
    /// Another process forked the store; or live sync cannot go on: the store's file replaced, or
    /// the store cannot be followed.
    enum Ending { case forked(replica: ReplicaID), ended(ConcordError) }
    private let state = LockedState<Ending?>(nil)
    var value: Ending? { state.withLock { $0 } }
    func set(_ ending: Ending) { state.withLock { $0 = ending } }
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

    /// A report of a sync that did nothing.
    public init() {}

    /// One line (§16.5): the files moved, `; `, then the folder's summary.
    public var summary: String { "\(transfers); \(folder.summary)" }

    /// The files moved: `downloaded D files, uploaded U, deleted X` (§16.5).
    public var transfers: String {
        "downloaded \(downloadedFiles) file\(downloadedFiles == 1 ? "" : "s"), uploaded \(uploadedFiles), deleted \(deletedFiles)"
    }

    /// Whether the sync moved nothing either way.
    public var isUpToDate: Bool {
        downloadedFiles == 0 && uploadedFiles == 0 && deletedFiles == 0 && folder.summary == "up to date"
    }
}
