import ConcordCore
import ConcordKeys
import ConcordStore
import Foundation
import Logging

/// Two-way sync of a store through a shared folder (SPEC.md §14) that a file-sync tool (Dropbox,
/// Syncthing, iCloud Drive, NFS) keeps in step between machines.
///
/// Each replica writes only files it created, whole (temporary name, flush, rename), and never
/// touches another replica's files. A sync imports every bundle of the folder whose contents it
/// has not read, then publishes every operation it holds that the folder's files do not: new
/// ones, and those of files lost, restored to old versions or replaced. Files that are not
/// bundles, damaged, incomplete, from a newer version, or clashing with what the store holds are
/// skipped with a warning and never change the store; they never stop a sync either.
///
/// The folder is trusted with nothing (SPEC.md §14, "What a folder is trusted with"): a replica
/// knows a file by its contents and exactly what it holds, and takes its serials from its own
/// records, never from names someone else may have put there.
///
/// A store with a sync key publishes only encrypted bundles (SPEC.md §13.1) and imports only
/// bundles encrypted with its key: a plain one, one of another key, or one that fails
/// authentication is skipped with a warning.
public final class FolderSync: Sendable {
    /// The store that syncs.
    public let store: ConcordStore
    /// The shared folder.
    public let folder: String
    /// Where this layout version keeps its files: `<folder>/concord-v1`.
    public let directory: String
    /// A replica merges its own files into one once it has more than this many.
    public let coalesceThreshold: Int

    package static let layoutVersion = 1
    /// How old (seconds) a file's last change must be before its `stat` identity is trusted to
    /// tell that its contents did not change: until then each sync hashes it (SPEC.md §14).
    package static var settlingSeconds: Int { FileIdentity.settlingSeconds }
    /// How old (seconds) a temporary file of this replica must be before a sync removes it.
    static let staleTemporaryAge: TimeInterval = 15 * 60
    static let fileExtension = ".cbundle"

    /// The time a file's last change is compared with, to tell whether its identity has settled.
    private let now: @Sendable () -> Date

    /// A sync of `store` through `folder` (a path, made absolute); nothing happens until `sync()` or `watch(every:)`.
    public convenience init(store: ConcordStore, folder: String, coalesceThreshold: Int = 32) {
        self.init(store: store, folder: folder, coalesceThreshold: coalesceThreshold, now: Date.init)
    }

    /// The same, telling time with `now` (the bench reads folders whose files it takes as settled).
    package init(store: ConcordStore, folder: String, coalesceThreshold: Int = 32, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.now = now
        self.coalesceThreshold = coalesceThreshold
        let absolute = folder.hasPrefix("/") ? folder : FileManager.default.currentDirectoryPath + "/" + folder
        self.folder = (absolute as NSString).standardizingPath
        directory = Self.directory(of: self.folder)
    }

    /// One sync, both ways: import what is new, publish what the folder lacks, coalesce, forget
    /// (SPEC.md §14).
    @discardableResult
    public func sync(progress: ((SyncProgress) -> Void)? = nil) throws(ConcordError) -> FolderSyncReport {
        // A copy would publish files under its original's name, and coalesce the original's away.
        try store.ensureNotCopied()
        try store.ensureNotRetired()
        return try store.guarded {
            var report = FolderSyncReport()
            try prepareDirectory(&report)
            var state = State(listing: try list(&report), recorded: try store.folderFiles(in: folder), key: try store.syncKey())
            try importNewFiles(&state, &report, progress)
            try takeWaitingCompactedSeqs(&state)
            try store.learn(state.heard, dropped: state.dropped)
            try publishWhatIsMissing(&state, &report, progress)
            try coalesceIfNeeded(&state, &report, progress)
            // Records of files no longer what was recorded, or gone (coalesced, removed, lost):
            // those still gone in the transaction that forgets them, for another process of
            // this replica links a file it recorded only while the record is there.
            let gone = state.recorded.values.filter { !state.listing.names.contains($0.name) }
            try store.forgetFolderFiles(state.stale)
            try store.forgetFolderFiles(gone) { file in
                var status = stat()
                return lstat((directory as NSString).appendingPathComponent(file.name), &status) != 0 && errno == ENOENT
            }
            return report
        }
    }

    /// What a sync knows of the folder as it goes.
    struct State {
        var listing: Listing
        /// The files recorded as imported or published, by name; a file whose contents are no
        /// longer those recorded moves to `stale`.
        var recorded: [String: FolderFile]
        /// Records this sync found no longer true, to forget.
        var stale: [FolderFile] = []
        let key: SyncKey?
        /// The id of `key`: only files sealed with it count (or plain ones, without a key).
        let keyID: [UInt8]?
        /// What the files this store had recorded when the sync began held: what the folder
        /// held, or should have, as far as this store knew.
        let formerlyHeld: SeqRanges
        /// The compacted seqs of the files this sync imported that the store left for lack of
        /// their base, with their bases; those files, recorded only once the seqs are settled
        /// (a sync killed before reads them again); and the operations of every file it
        /// imported: see `takeWaitingCompactedSeqs`.
        var compacted: [CompactedSeqs] = []
        var unrecorded: [FolderFile] = []
        var delivered = SeqRanges()
        /// What the publishers of the files read vouch they held (their `top`), for the stable
        /// frontier (SPEC.md §5.8): learned once the files are read.
        var heard: [(replica: ReplicaID, holds: VersionVector)] = []
        /// Where those files' publishers knew removes were dropped as stable.
        var dropped = VersionVector()

        init(listing: Listing, recorded: [String: FolderFile], key: SyncKey?) {
            self.listing = listing
            self.recorded = recorded
            self.key = key
            keyID = key.map { EncryptedBundleFormat.keyIDBytes(of: $0) }
            formerlyHeld = SeqRanges(recorded.values.filter { [keyID] in $0.keyID == keyID && $0.skipped == nil }.flatMap(\.holds.runs))
        }

        /// The recorded files in the folder that the replicas sharing this store's key can read.
        var counted: [FolderFile] {
            listing.bundles.compactMap { file in recorded[file.name].flatMap { $0.keyID == keyID && $0.skipped == nil ? $0 : nil } }
        }

        /// The operations the folder holds, as far as this store can tell: those of its counted files.
        var covered: SeqRanges { SeqRanges(counted.flatMap(\.holds.runs)) }
    }

    // MARK: 1. Import

    /// One sync in this many hashes every file it has recorded, whatever `stat` says, and reads
    /// again those it skipped: on a file system where a writer can set a file's times back (SMB,
    /// some FUSE mounts), a replaced file is still found (SPEC.md §14).
    static let fullCheckEvery: UInt64 = 64

    /// Imports every file whose contents this store has not read, oldest serial first. A file
    /// recorded before is read again only if `stat` says it may have changed and its SHA-256
    /// differs; one skipped before is warned about again, and read again only if it changed or
    /// the store's key did.
    private func importNewFiles(_ state: inout State, _ report: inout FolderSyncReport, _ progress: ((SyncProgress) -> Void)?) throws {
        let checksAll = store.environment.random() % Self.fullCheckEvery == 0
        var pending: [ListedFile] = []
        var seenAgain: [FolderFile] = []
        for file in state.listing.bundles {
            guard var known = state.recorded[file.name] else {
                pending.append(file)
                continue
            }
            let retry = known.skipped.map { checksAll || known.keyID != state.keyID || Self.readsNow($0) } ?? false
            let unchanged = !checksAll && known.identity == file.identity && !known.identity.isEmpty
            // Touched, copied, replaced, or too recent to tell: the same file only if the same bytes.
            guard !retry, unchanged || (try? FileSource.sha256(of: path(of: file))) == known.sha256 else {
                state.recorded[file.name] = nil
                state.stale.append(known)
                pending.append(file)
                continue
            }
            if let skipped = known.skipped {
                let (code, reason) = Self.parseSkipped(skipped)
                report.warn(code, "skipping \(file.name): \(reason)")
            }
            if known.identity != file.identity {
                known.identity = file.identity
                state.recorded[file.name] = known
                seenAgain.append(known)
            }
        }
        try store.recordFolderFiles(seenAgain)

        for (index, file) in pending.enumerated() {
            progress?(.importing(file: index + 1, of: pending.count, name: file.name))
            let path = path(of: file)
            let (code, reason): (ConcordError.Code, String)
            do {
                guard file.size > 0 else { throw Skipped.empty }
                try importFile(file, &state, &report)
                continue
            } catch let error as ConcordError where error.code != .invalidInput {
                throw error  // the store failed (disk full, read-only, locked): stop, nothing half-done
            } catch {
                // A file removed as it was about to be read was coalesced away by its publisher
                // (SPEC.md §14): what it held is in that replica's newer file. Nothing to say.
                if !FileManager.default.fileExists(atPath: path) { continue }
                (code, reason) = Self.reason(error, path: path)
            }
            report.warn(code, "skipping \(file.name): \(reason)")
            // Recorded, so that it is not read again while it stays as it is.
            if let hash = try? FileSource.sha256(of: path) {
                let skipped = FolderFile(
                    folder: folder, name: file.name, identity: file.identity, sha256: hash, keyID: state.keyID, holds: SeqRanges(),
                    published: false, skipped: Self.skippedRecord(code, reason))
                try store.recordFolderFiles([skipped])
                state.recorded[file.name] = skipped
            }
        }
    }

    private enum Skipped: Error { case empty }

    /// Takes the compacted seqs that files read in this sync carried and the store left for lack
    /// of their base (SPEC.md §14, "Compaction"). A replica's coalesced file has for base what the
    /// folder's other files held of the other replicas when it was written, so a new device reads
    /// each publisher's file before it holds that file's base, and no file alone could fill the
    /// gaps in its version vector. Taken together they can: a claim is taken when every seq of its
    /// base is held by the store, delivered by a file of this sync, or compacted in another claim
    /// taken; the largest such set of claims is found by dropping, until none is dropped, every
    /// claim whose base that leaves uncovered. Each file holds every seq past its base, so each
    /// compacted seq's operation was made redundant by operations that the store now holds, or by
    /// compacted seqs taken whose own operations were, and so on: the state is whole.
    private func takeWaitingCompactedSeqs(_ state: inout State) throws {
        var claims = state.compacted
        state.compacted = []
        guard !claims.isEmpty else { return }
        defer { state.unrecorded = [] }
        var held = SeqRanges(upTo: try store.versionVector())
        held.formUnion(state.delivered)
        while true {
            var covered = held
            for claim in claims { covered.formUnion(claim.seqs) }
            let kept = claims.filter { claim in
                claim.base.entries.allSatisfy { covered.missing(of: $0.key, through: $0.value).isEmpty }
            }
            if kept.count == claims.count { break }
            claims = kept
        }
        // In one transaction, then the files are recorded.
        var dropped = VersionVector()
        for claim in claims { dropped.merge(claim.droppedStableThrough) }
        try store.holdCompacted(SeqRanges(claims.flatMap(\.seqs.runs)), droppingCopiesThrough: dropped)
        try store.recordFolderFiles(state.unrecorded)
    }

    /// Merges one file and records it. Where it holds another operation than the store under a
    /// held id (a clash: a copied store, or a forged file), its operations of that replica from
    /// that seq up are left out, with a warning, and the rest is merged (SPEC.md §9.1, §14).
    private func importFile(_ file: ListedFile, _ state: inout State, _ report: inout FolderSyncReport) throws {
        var skipping: [ReplicaID: UInt64] = [:]
        while true {
            do {
                let (merge, summary, vouched) = try store.mergeBundle(telling: path(of: file), requireEncrypted: state.key != nil, skipping: skipping)
                if vouched {
                    state.heard.append((summary.manifest.publisher, summary.manifest.top))
                    state.dropped.merge(summary.manifest.droppedStableThrough)
                }
                var holds = summary.holds
                for (replica, seq) in skipping { holds.remove(of: replica, from: seq) }
                // A file of this replica's in a folder moved or copied whole (or published by
                // another of its processes) is still its own: the same name and the same bytes.
                let own = try skipping.isEmpty && file.publisher == store.replicaID && store.published(name: file.name, sha256: summary.sha256!)
                // Recorded after the merge: a crash between the two means the file is read again
                // and its operations found held.
                let imported = FolderFile(
                    folder: folder, name: file.name, identity: file.identity, sha256: summary.sha256!, keyID: state.keyID, holds: holds,
                    published: own)
                state.recorded[file.name] = imported
                var operations = holds
                for (replica, seqs) in summary.compacted.runs { operations.remove(seqs, of: replica) }
                state.delivered.formUnion(operations)
                // Compacted seqs left for lack of their base wait for the other files (a clashing
                // file's are never taken: `mergeBundle(telling:…)`).
                if skipping.isEmpty, UInt64(merge.compactedSeqs) < summary.compacted.count {
                    state.compacted.append(CompactedSeqs(
                        seqs: summary.compacted, base: summary.manifest.base, droppedStableThrough: summary.manifest.droppedStableThrough))
                    state.unrecorded.append(imported)
                } else {
                    try store.recordFolderFiles([imported])
                }
                report.importedFiles += 1
                report.importedOperations += merge.newOperationCount
                report.farFutureTimestamp = merge.farFutureTimestamp ?? report.farFutureTimestamp
                for (replica, seq) in skipping.sorted(by: { $0.key < $1.key }) {
                    report.warn(
                        .clash,
                        "skipping what \(file.name) holds of replica \(replica) from seq \(seq): another operation than this store holds under that seq (two stores share that replica id: one is a copy of the other; or the file was forged); this store keeps its own")
                }
                return
            } catch {
                // A file that cannot be read or merged is skipped, and a store that failed stops the
                // sync (`importNewFiles`); a clash is merged again without what clashed.
                guard case BundleMergeFailure.store(let error) = error else { throw error }
                guard error.code == .clash else { throw error }
                // Each retry leaves out more (a lower seq, or another replica), so this ends.
                guard let id = (error.cause as? OperationClash)?.id, id.seq < skipping[id.replica] ?? .max else {
                    throw BundleMergeFailure.file(error)
                }
                skipping[id.replica] = id.seq
            }
        }
    }

    // MARK: 2. Publish

    /// Publishes every operation this store holds (below no gap) that no counted file holds: new
    /// ones, and those of files lost, restored to older versions, replaced, skipped or unreadable.
    private func publishWhatIsMissing(_ state: inout State, _ report: inout FolderSyncReport, _ progress: ((SyncProgress) -> Void)?) throws {
        let mine = try store.versionVector()
        let covered = state.covered
        var missing = 0
        var lost = 0
        for (replica, seq) in mine.entries {
            for gap in covered.missing(of: replica, through: seq) {
                missing += Int(gap.count)
                lost += Int(state.formerlyHeld.count(of: replica, in: gap))
            }
        }
        guard missing > 0 || holdsMoreThanItLastSaid(mine, state) else { return }
        progress?(.publishing)
        let (name, summary) = try publish(since: Self.base(mine, from: covered), &state)
        report.publishedFile = name
        report.publishedOperations = summary.operations
        report.republishedOperations = lost
    }

    /// How long a replica that has nothing new to publish waits before it says again what it
    /// holds (SPEC.md §14, step 2).
    package static let topRefreshMillis: UInt64 = 3_600_000

    /// Whether the store holds more than the `top` of the newest file this replica wrote to the
    /// folder, written at least `topRefreshMillis` ago by the store's clock. The others know what
    /// it holds by that `top` alone (SPEC.md §5.8): a replica that only reads would hold their
    /// stable frontier back for good, and publishes a file of nothing to move it.
    private func holdsMoreThanItLastSaid(_ mine: VersionVector, _ state: State) -> Bool {
        let own = state.counted.filter(isOwn)
        guard let newest = own.max(by: { (Self.parse($0.name)?.1 ?? 0) < (Self.parse($1.name)?.1 ?? 0) }) else { return false }
        let manifest: BundleManifest
        do {
            var reader = try ConcordStore.bundleReader(at: (directory as NSString).appendingPathComponent(newest.name), key: state.key)
            manifest = try reader.readManifest()
        } catch {
            // Gone or unreadable since the listing: the next sync sees to it.
            return false
        }
        return !manifest.top.covers(mine) && store.environment.wallClock() >= manifest.createdMillis &+ Self.topRefreshMillis
    }

    /// The base of a file that holds every operation of `vector` from, for each replica, the
    /// first seq `starts` lacks (and from no later than `alsoFrom`'s first seq of that replica).
    private static func base(_ vector: VersionVector, from starts: SeqRanges, alsoFrom: SeqRanges = SeqRanges()) -> VersionVector {
        var base: [ReplicaID: UInt64] = [:]
        for (replica, seq) in vector.entries {
            let first = [starts.missing(of: replica, through: seq).first?.lowerBound, alsoFrom.ranges(of: replica).first?.lowerBound]
            base[replica] = (first.compactMap { $0 }.min() ?? seq + 1) - 1
        }
        return VersionVector(base)
    }

    /// Writes one bundle of every operation held above `since` (and below no gap) under a serial
    /// this replica takes first, and records it as its own.
    private func publish(since: VersionVector, _ state: inout State) throws -> (String, BundleSummary) {
        // Files are named after the replica: not under an id another process has just replaced
        // (`init --fork`, SPEC.md §9.1) since this sync began.
        try store.ensureNotCopied()
        var taken = Set(state.listing.names.compactMap { name in Self.parse(name).flatMap { $0.0 == store.replicaID ? $0.1 : nil } })
        while true {
            guard let serial = try store.takeSerial(in: folder, passing: taken, maximum: Self.maxSerial) else {
                // Unreachable in practice: a serial grows by one per file this replica publishes.
                throw ConcordError(.folder, "replica \(store.replicaID) has used every serial of the shared folder \(folder); sync through a new folder")
            }
            let name = Self.name(of: store.replicaID, serial: serial)
            do {
                // Read before the export: content erased, or seqs compacted, after these counts
                // may be in the file.
                let erasures = try store.erasures()
                let compacted = try store.compactedSeqCount()
                var recorded: FolderFile?
                let summary = try store.exportBundle(
                    to: (directory as NSString).appendingPathComponent(name), since: since, contiguousOnly: true,
                    exclusive: true, temporaryName: temporaryName(for: name), encryptingWith: state.key
                ) { summary, place in
                    // Its identity is left unknown: it changes as the file is linked into place,
                    // and the next syncs check the file by its hash (SPEC.md §14).
                    let file = FolderFile(
                        folder: folder, name: name, identity: "", sha256: summary.sha256!, keyID: state.keyID, holds: summary.holds,
                        published: true, erasures: erasures, compacted: compacted)
                    // Recorded as its own before it is there: a crash between the two leaves a
                    // record of a missing file, never a file this replica does not know it wrote.
                    guard try store.reserveFolderFile(file), try store.placeFolderFile(file, with: place) else {
                        throw ConcordError(.exists, "\(name) is recorded, or was forgotten, before it was placed")
                    }
                    recorded = file
                }
                state.recorded[name] = recorded
                state.listing.add(ListedFile(name: name, size: Int64(summary.bytes), identity: "", publisher: store.replicaID, serial: serial))
                return (name, summary)
            } catch let error as ConcordError where error.code == .exists {
                // Someone put a file under that name since the listing (never replaced), or another
                // process of this replica forgot its record, finding no file: passed over.
                taken.insert(serial)
            }
        }
    }

    // MARK: 3. Coalesce

    /// When this replica has more than `coalesceThreshold` counted files that it wrote itself, or
    /// one of them may hold content that the store has erased since it was written (a purge,
    /// SPEC.md §14, "Purges"), or the store has compacted a quarter as many seqs as they hold
    /// since the first of them was written (§14, "Compaction"), writes one file holding all they
    /// held (and all the folder lacks), from the store's log as it is now, then deletes them.
    private func coalesceIfNeeded(_ state: inout State, _ report: inout FolderSyncReport, _ progress: ((SyncProgress) -> Void)?) throws {
        let own = state.counted.filter(isOwn)
        guard !own.isEmpty else { return }
        let erasures = try store.erasures()
        let compactedSince = try store.compactedSeqCount() - own.map(\.compacted).min()!
        let held = SeqRanges(own.flatMap(\.holds.runs)).count
        guard own.count > coalesceThreshold || own.contains(where: { $0.erasures < erasures }) || compactedSince >= max(1, Int64(held / 4))
        else { return }
        progress?(.coalescing(files: own.count))
        let (name, _) = try publish(
            since: Self.base(try store.versionVector(), from: state.covered, alsoFrom: SeqRanges(own.flatMap(\.holds.runs))), &state)
        var kept: [FolderFile] = []
        for var old in own {
            let path = (directory as NSString).appendingPathComponent(old.name)
            if unlink(path) == 0 || errno == ENOENT {
                state.recorded[old.name] = nil
                state.stale.append(old)
                state.listing.remove(old.name)
                report.coalescedFiles += 1
            } else {
                // Counted no more among its own files, so that no sync coalesces again for it.
                report.warn(.io, "cannot remove \(old.name), merged into \(name) (\(String(cString: strerror(errno)))); it stays")
                old.published = false
                state.recorded[old.name] = old
                kept.append(old)
            }
        }
        try store.disownFolderFiles(kept)
        syncDirectory(of: (directory as NSString).appendingPathComponent(name))
    }

    /// Whether this replica wrote `file`: it recorded it as published, under its own id. A store
    /// forked from another (`init --fork`) keeps the other's records, of files that are still the
    /// other's (SPEC.md §14, "Serials").
    func isOwn(_ file: FolderFile) -> Bool {
        file.published && Self.parse(file.name)?.0 == store.replicaID
    }

    /// Syncs now and then every `interval`, whenever the store or the folder changed, for as long
    /// as the task that iterates the sequence runs: cancelling it ends the watch, after the sync
    /// under way. See `FolderWatch`.
    ///
    /// - Parameter compacting: when the watch compacts the store by itself, beside its syncs
    ///   (SPEC.md §5.8, "Compacting by itself"); nil: never.
    /// - Parameter describeError: how the log words a warning or a failure: by default its
    ///   `message`; an app may add its own advice from the code, as `syncctl` names its commands.
    public func watch(
        every interval: Duration, compacting: CompactionSchedule? = CompactionSchedule(), logger: Logger = .silent,
        describeError: @escaping @Sendable (ConcordError) -> String = { $0.message }
    ) -> FolderWatch {
        FolderWatch(
            sync: self, interval: interval, compaction: compacting.map { BackgroundCompaction(store, schedule: $0, logger: logger) },
            logger: logger, describeError: describeError)
    }

    /// A summary of the folder's listing and the store's version vector: when it is unchanged,
    /// a sync has nothing to do.
    func changeToken() throws -> String {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var parts = [try store.versionVector().description]
        for name in names.sorted() {
            // Its identity, not its size: a file replaced by one of the same size is a change.
            parts.append("\(name):\(FileIdentity(of: (directory as NSString).appendingPathComponent(name))?.text ?? "gone")")
        }
        return parts.joined(separator: "\n")
    }

    // MARK: The folder

    struct ListedFile {
        var name: String
        var size: Int64
        /// Its `FileIdentity` when it was listed, or "" if that was not settled yet.
        var identity: String
        var publisher: ReplicaID
        var serial: Int
    }

    struct Listing {
        /// The bundle files, by serial.
        var bundles: [ListedFile] = []
        /// Every name in the directory, bundle or not: a name taken.
        var names: Set<String> = []

        mutating func add(_ file: ListedFile) {
            bundles.append(file)
            names.insert(file.name)
        }

        mutating func remove(_ name: String) {
            bundles.removeAll { $0.name == name }
            names.remove(name)
        }
    }

    private func path(of file: ListedFile) -> String {
        (directory as NSString).appendingPathComponent(file.name)
    }

    /// Throws `folder` unless `folder` is a directory: a shared folder that is not mounted, say.
    package static func checkExists(_ folder: String) throws(ConcordError) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ConcordError(.folder, "the shared folder \(folder) does not exist or is not a directory (is it mounted?)")
        }
    }

    private func prepareDirectory(_ report: inout FolderSyncReport) throws {
        try Self.checkExists(folder)
        var isDirectory: ObjCBool = false
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        let layouts = entries.compactMap { name -> Int? in
            guard name.hasPrefix("concord-v") else { return nil }
            return Int(name.dropFirst("concord-v".count))
        }
        if let newest = layouts.max(), newest > Self.layoutVersion {
            guard layouts.contains(Self.layoutVersion) else {
                throw ConcordError(.folder, "the shared folder \(folder) uses layout version \(newest), newer than this build supports (\(Self.layoutVersion)); upgrade Concord")
            }
            report.warn(.folder, "the shared folder also holds layout version \(newest), which this build ignores; upgrade Concord")
        }
        if !FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            // mkdir(2), for the system's reason: SPEC.md §12's "cannot write in DIR (REASON)".
            guard mkdir(directory, 0o777) == 0 || errno == EEXIST else {
                throw ConcordError(.folder, "cannot write in \(folder) (\(String(cString: strerror(errno))))")
            }
        } else if !isDirectory.boolValue {
            throw ConcordError(.folder, "\(directory) is not a directory")
        }
    }

    private func list(_ report: inout FolderSyncReport) throws -> Listing {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw ConcordError(.folder, "cannot list the shared folder \(directory): \(error.localizedDescription)")
        }
        var listing = Listing()
        listing.names = Set(names)
        for name in names.sorted() {
            let path = (directory as NSString).appendingPathComponent(name)
            if let writer = Self.temporaryFileWriter(name) {
                // Never renamed into place, so never read by anyone. A recent one is being written
                // (by another replica, or another process of this one): nothing to say. An old one
                // is left from an interrupted sync: this replica removes its own, and warns about
                // another's, which only that replica removes.
                let modified = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) ?? .distantFuture
                guard Date().timeIntervalSince(modified) > Self.staleTemporaryAge else { continue }
                if writer == store.replicaID {
                    unlink(path)
                    report.warn(.io, "removed \(Self.shown(name)), a half-written file of an interrupted sync")
                } else {
                    report.warn(.invalidInput, "skipping \(Self.shown(name)): a half-written file of replica \(writer.hex)'s interrupted sync (that replica removes it)")
                }
                continue
            }
            guard let (publisher, serial) = Self.parse(name) else {
                report.warn(.invalidInput, "skipping \(Self.shown(name)): not a bundle of this folder (a sync tool's temporary file or conflict copy?)")
                continue
            }
            var isDirectory: ObjCBool = false
            // Gone since the folder was listed: its publisher coalesced it away (SPEC.md §14).
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            guard !isDirectory.boolValue else {
                report.warn(.invalidInput, "skipping \(Self.shown(name)): a directory, not a file")
                continue
            }
            guard let identity = FileIdentity(of: path, now: now()) else { continue }
            guard access(path, R_OK) == 0 else {
                let failure = errno
                // Gone between the checks above and this one: coalesced away as well.
                if failure == ENOENT { continue }
                report.warn(.io, "skipping \(Self.shown(name)): cannot read it (\(String(cString: strerror(failure))))")
                continue
            }
            listing.bundles.append(ListedFile(
                name: name, size: identity.size, identity: identity.settled ? identity.text : "", publisher: publisher, serial: serial))
        }
        listing.bundles.sort { ($0.serial, $0.name) < ($1.serial, $1.name) }
        return listing
    }

    /// A file name as a warning shows it: anyone who can write to the folder names its files, so
    /// control characters are escaped (`\u{0a}`, `\u{1b}`, SPEC.md §12), and a name can neither break a warning
    /// into several lines (one of which could pass for syncctl's own) nor drive the terminal.
    static func shown(_ name: String) -> String {
        escapingControlCharacters(name)
    }

    /// The replica whose temporary file this is: `.<replica id>-<serial>.tmp-<hex>`.
    static func temporaryFileWriter(_ name: String) -> ReplicaID? {
        guard name.hasPrefix("."), let range = name.range(of: ".tmp-") else { return nil }
        let stem = name.dropFirst().prefix(upTo: range.lowerBound)
        guard let (writer, _) = parse(stem + fileExtension) else { return nil }
        return writer
    }

    /// Where this layout version keeps its files in the shared folder `folder`.
    static func directory(of folder: String) -> String {
        (folder as NSString).appendingPathComponent("concord-v\(layoutVersion)")
    }

    /// `<replica id>-<serial, 10 digits>.cbundle`
    static func parse(_ name: String) -> (ReplicaID, Int)? {
        let utf8 = Array(name.utf8)
        guard utf8.count == 32 + 1 + 10 + fileExtension.utf8.count, name.hasSuffix(fileExtension), utf8[32] == UInt8(ascii: "-"),
              let replica = ReplicaID(hex: String(decoding: utf8[0..<32], as: UTF8.self)),
              String(decoding: utf8[0..<32], as: UTF8.self) == replica.hex,
              utf8[33..<43].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let serial = Int(String(decoding: utf8[33..<43], as: UTF8.self))
        else { return nil }
        return (replica, serial)
    }

    /// The highest serial a name of layout 1 can hold (10 digits).
    static let maxSerial = 9_999_999_999

    /// `<replica id>-<serial, 10 digits>.cbundle`
    static func name(of replica: ReplicaID, serial: Int) -> String {
        let digits = String(serial)
        return replica.hex + "-" + String(repeating: "0", count: max(0, 10 - digits.count)) + digits + fileExtension
    }

    private func temporaryName(for name: String) -> String {
        ".\(name.dropLast(Self.fileExtension.count)).tmp-\(String(store.environment.random() & 0xFFFF_FFFF, radix: 16))"
    }

    /// Why a file was skipped, in a few words, and the code of its warning.
    private static func reason(_ error: any Error, path: String) -> (ConcordError.Code, String) {
        let incomplete = "incomplete (still being written?); it is imported once whole"
        let code: ConcordError.Code
        let text: String
        switch error {
        case Skipped.empty: return (.invalidInput, "empty file (still being written?)")
        case BundleError.truncated: return (.invalidInput, incomplete)
        case BundleMergeFailure.file(let error): return reason(error, path: path)
        case let error as ConcordError: (code, text) = (error.code, error.message)
        default: (code, text) = (.io, "\(error)")
        }
        if text.hasSuffix(BundleError.truncated.description) { return (.invalidInput, incomplete) }
        return (code, text.hasPrefix(path + ": ") ? String(text.dropFirst(path.count + 2)) : text)
    }

    /// What the store records of a skipped file (SPEC.md §9, `folder_files.skipped`): the reason,
    /// after the code of its warning and `: ` unless that is `invalidInput`, so that the warning
    /// given again on later syncs has its code too.
    package static func skippedRecord(_ code: ConcordError.Code, _ reason: String) -> String {
        code == .invalidInput ? reason : "\(code): \(reason)"
    }

    /// Whether a file was skipped as of a format version that this build reads: it was skipped by
    /// an older build, this store's before an upgrade, and is read again at once (SPEC.md §14).
    package static func readsNow(_ skipped: String) -> Bool {
        let newer = [
            ("an encrypted bundle of format version ", ", newer than this build reads", EncryptedBundleFormat.version),
            ("bundle format version ", " is newer than this build reads", BundleFormat.version),
        ]
        for (before, after, newest) in newer {
            guard let start = skipped.range(of: before)?.upperBound else { continue }
            let version = skipped[start...].prefix { $0.isASCII && $0.isNumber }
            guard skipped[version.endIndex...].hasPrefix(after), let version = UInt8(version) else { continue }
            return version <= newest
        }
        return false
    }

    /// The code and reason of a skipped file's record; a record without a code is `invalidInput`
    /// (as every one an older build wrote).
    package static func parseSkipped(_ record: String) -> (ConcordError.Code, String) {
        guard let colon = record.range(of: ": "), let code = ConcordError.Code(name: String(record[..<colon.lowerBound])) else {
            return (.invalidInput, record)
        }
        return (code, String(record[colon.upperBound...]))
    }
}

/// What a folder sync is doing, for progress displays.
public enum SyncProgress: Hashable, Sendable {
    /// Importing the `file`th of `of` files to import, named `name`.
    case importing(file: Int, of: Int, name: String)
    /// Publishing this replica's new operations.
    case publishing
    /// Merging this replica's `files` files into one.
    case coalescing(files: Int)
}

/// What one folder sync did.
public struct FolderSyncReport: Hashable, Sendable {
    /// How many files it imported operations from.
    public var importedFiles = 0
    /// How many operations new to the store it imported.
    public var importedOperations = 0
    /// The name of the file it published, if it published one.
    public var publishedFile: String?
    /// How many operations it published.
    public var publishedOperations = 0
    /// How many of the operations published the folder had held once, or should have, and no
    /// longer does: its files were lost, restored to older versions, replaced or skipped.
    public var republishedOperations = 0
    /// How many of this replica's files it merged into one.
    public var coalescedFiles = 0
    /// One per file skipped or cleaned up: a line to show (its `message`) and the code of what
    /// went wrong (`clash` for a file whose clashing operations were left out, SPEC.md §14).
    public var warnings: [ConcordError] = []
    /// The greatest imported timestamp more than a day ahead of this device's clock, if any: a sign of a peer's wrong clock.
    public var farFutureTimestamp: Timestamp?

    /// An empty report: nothing done.
    public init() {}

    /// Whether it imported, published or coalesced anything.
    public var movedSomething: Bool { importedOperations > 0 || publishedOperations > 0 || coalescedFiles > 0 }

    /// One line: what was imported, published and merged, or `up to date` (SPEC.md §11).
    public var summary: String {
        var parts: [String] = []
        if importedOperations > 0 || importedFiles > 0 {
            parts.append("imported \(importedOperations) operation\(importedOperations == 1 ? "" : "s") from \(importedFiles) file\(importedFiles == 1 ? "" : "s")")
        }
        if let publishedFile {
            let lost = republishedOperations > 0 ? " (\(republishedOperations) of them the folder had lost)" : ""
            parts.append("published \(publishedOperations) operation\(publishedOperations == 1 ? "" : "s") as \(publishedFile)\(lost)")
        }
        if coalescedFiles > 0 { parts.append("merged \(coalescedFiles) of this replica's files into one") }
        return parts.isEmpty ? "up to date" : parts.joined(separator: "; ")
    }

    mutating func warn(_ code: ConcordError.Code, _ line: String) {
        warnings.append(ConcordError(code, line))
    }
}

extension ConcordStore {
    /// One two-way sync through a shared folder (SPEC.md §14). See `FolderSync`.
    @discardableResult
    public func sync(folder: String, progress: ((SyncProgress) -> Void)? = nil) throws(ConcordError) -> FolderSyncReport {
        try FolderSync(store: self, folder: folder).sync(progress: progress)
    }
}
