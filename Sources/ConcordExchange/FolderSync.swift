import ConcordCore
import ConcordKeys
import ConcordStore
import Foundation
import Logging

/// Two-way sync of a store through a shared folder (SPEC.md §14) that a file-sync tool (Dropbox,
/// Syncthing, iCloud Drive, NFS) keeps in step between machines.
///
/// Each replica writes only files it created, whole (temporary name, flush, rename), and never
/// touches another replica's files. A sync imports every bundle of the folder it has not imported
/// yet, then publishes what it holds that the folder lacks. Files that are not bundles, damaged,
/// incomplete or from a newer version are skipped with a warning and never change the store.
///
/// A store with a sync key publishes only encrypted bundles (SPEC.md §13.1) and imports only
/// bundles encrypted with its key: a plain one, one of another key, or one that fails
/// authentication is skipped with a warning.
public final class FolderSync {
    public let store: ConcordStore
    /// The shared folder.
    public let folder: String
    /// Where this layout version keeps its files: `<folder>/concord-v1`.
    public let directory: String
    /// A replica merges its own files into one once it has more than this many.
    public var coalesceThreshold = 32

    public static let layoutVersion = 1
    /// How old (seconds) a temporary file of this replica must be before a sync removes it.
    static let staleTemporaryAge: TimeInterval = 15 * 60
    static let fileExtension = ".cbundle"

    public init(store: ConcordStore, folder: String) {
        self.store = store
        let absolute = folder.hasPrefix("/") ? folder : FileManager.default.currentDirectoryPath + "/" + folder
        self.folder = (absolute as NSString).standardizingPath
        directory = (self.folder as NSString).appendingPathComponent("concord-v\(Self.layoutVersion)")
    }

    /// One sync, both ways: import what is new, publish what the folder lacks, coalesce, forget
    /// (SPEC.md §14).
    @discardableResult
    public func sync(progress: ((SyncProgress) -> Void)? = nil) throws -> FolderSyncReport {
        // A copy would publish files under its original's name, and coalesce the original's away.
        try store.ensureNotCopied()
        // What a merge left pending (one a kill interrupted) is applied first (SPEC.md §5.6).
        try store.finishPendingMerge()
        var report = FolderSyncReport()
        try prepareDirectory(&report)
        let key = try store.syncKey()
        let recorded = try store.importedFiles(in: folder)
        var state = State(listing: try list(&report), recorded: recorded, key: key)
        state.formerlyHeld = state.holdsOfCounted(recorded.values)
        try importNewFiles(&state, &report, progress)
        try publishWhatIsMissing(&state, &report, progress)
        try coalesceIfNeeded(&state, &report, progress)
        // Records of files gone (coalesced, removed, lost) or no longer what was read are dropped.
        try store.forgetImportedFiles(in: folder, keeping: Set(state.listing.bundles.map(\.name)).intersection(state.recorded.keys))
        return report
    }

    /// What a sync knows of the folder as it goes.
    struct State {
        var listing: Listing
        /// The files recorded as imported or published, by name; a file whose contents are no
        /// longer those recorded is dropped from here.
        var recorded: [String: ImportedFile]
        let key: SyncKey?
        /// What the files this store had recorded when the sync began held: what the folder
        /// held, or should have, as far as this store knew.
        var formerlyHeld = SeqRanges()
        /// The id of `key`: only files sealed with it count (or plain ones, without a key).
        var keyID: [UInt8]? { key.map { EncryptedBundleFormat.keyIDBytes(of: $0) } }

        func holdsOfCounted(_ files: some Sequence<ImportedFile>) -> SeqRanges {
            var union = SeqRanges()
            for file in files where file.keyID == keyID { union.formUnion(file.holds) }
            return union
        }

        /// The recorded files in the folder that the replicas sharing this store's key can read.
        var counted: [ListedFile] {
            listing.bundles.filter { file in recorded[file.name].map { $0.keyID == keyID } ?? false }
        }

        /// The operations the folder holds, as far as this store can tell: those of its counted files.
        var covered: SeqRanges {
            holdsOfCounted(counted.map { recorded[$0.name]! })
        }
    }

    // MARK: 1. Import

    /// Imports every file whose contents this store has not read, oldest serial first. A file
    /// recorded before is read again only if `stat` says it changed and its SHA-256 differs.
    private func importNewFiles(_ state: inout State, _ report: inout FolderSyncReport, _ progress: ((SyncProgress) -> Void)?) throws {
        var pending: [ListedFile] = []
        var seenAgain: [ImportedFile] = []
        for file in state.listing.bundles {
            guard var known = state.recorded[file.name] else {
                pending.append(file)
                continue
            }
            guard known.identity != file.identity else { continue }
            // Touched, copied or replaced since it was read: the same file only if the same bytes.
            if let hash = try? FileSource.sha256(of: path(of: file)), hash == known.sha256 {
                known.identity = file.identity
                state.recorded[file.name] = known
                seenAgain.append(known)
            } else {
                state.recorded[file.name] = nil
                pending.append(file)
            }
        }
        if !seenAgain.isEmpty { try store.recordImported(seenAgain) }

        for (index, file) in pending.enumerated() {
            progress?(.importing(file: index + 1, of: pending.count, name: file.name))
            let path = path(of: file)
            do {
                guard file.size > 0 else {
                    report.warn("skipping \(file.name): empty file (still being written?)")
                    continue
                }
                let (merge, summary) = try store.mergeBundle(at: path, requireEncrypted: state.key != nil)
                let imported = ImportedFile(
                    folder: folder, name: file.name, identity: file.identity, sha256: summary.sha256!,
                    keyID: state.key == nil ? nil : state.keyID, holds: summary.holds)
                // Recorded after the merge: a crash between the two means the file is read again
                // and its operations found held.
                try store.recordImported([imported])
                state.recorded[file.name] = imported
                report.importedFiles += 1
                report.importedOperations += merge.newOperationCount
                report.farFutureTimestamp = merge.farFutureTimestamp ?? report.farFutureTimestamp
            } catch let error as StoreError where error.code == .clash {
                // Two stores under one replica id (a copy, or a forged file): this store keeps the
                // operation it holds, and publishes as usual (SPEC.md §9.1, §14).
                let id = (error.underlying as? OperationClash)?.id
                report.warn(
                    "skipping \(file.name): it holds another operation under replica \(id.map { "\($0.replica)" } ?? "?")'s seq \(id.map { "\($0.seq)" } ?? "?") than this store holds: two stores share that replica id (one is a copy of the other, see 'syncctl init --fork') or the file was forged; this store keeps its own")
            } catch let error as StoreError where error.code != .invalidInput {
                throw error  // the store failed (disk full, read-only, locked): stop, nothing half-done
            } catch {
                // A file removed as it was about to be read was coalesced away by its publisher
                // (SPEC.md §14): what it held is in that replica's newer file. Nothing to say.
                if !FileManager.default.fileExists(atPath: path) { continue }
                report.warn("skipping \(file.name): \(Self.reason(error, path: path))")
            }
        }
    }

    // MARK: 2. Publish

    /// Publishes every operation this store holds (below no gap) that no counted file holds: new
    /// ones, and those of files lost, restored to older versions, skipped or unreadable.
    private func publishWhatIsMissing(_ state: inout State, _ report: inout FolderSyncReport, _ progress: ((SyncProgress) -> Void)?) throws {
        let mine = try store.versionVector()
        let covered = state.covered
        var base: [ReplicaID: UInt64] = [:]
        var missing = 0
        var lost = 0
        for (replica, seq) in mine.entries {
            let gaps = covered.missing(of: replica, through: seq)
            base[replica] = (gaps.first?.lowerBound ?? seq + 1) - 1
            for gap in gaps {
                missing += Int(gap.count)
                lost += Int(state.formerlyHeld.count(of: replica, in: gap))
            }
        }
        guard missing > 0 else { return }
        progress?(.publishing)
        let (name, summary) = try publish(since: VersionVector(base), &state)
        report.publishedFile = name
        report.publishedOperations = summary.operations
        report.republishedOperations = lost
    }

    /// Writes one bundle of every operation held above `since` (and below no gap) under this
    /// replica's next free serial, and records it as this replica's own.
    private func publish(since: VersionVector, _ state: inout State) throws -> (String, BundleSummary) {
        // Files are named after the replica: not under an id another process has just replaced
        // (`init --fork`, SPEC.md §9.1) since this sync began.
        try store.ensureNotCopied()
        var serial = try firstFreeSerial(state)
        while true {
            let name = Self.name(of: store.replicaID, serial: serial)
            do {
                let summary = try store.exportBundle(
                    to: (directory as NSString).appendingPathComponent(name), since: since, contiguousOnly: true,
                    exclusive: true, temporaryName: temporaryName(for: name), encryptingWith: state.key)
                // Its identity is left unknown: it changes as the file is linked into place, and
                // the next sync checks the file by its hash once (SPEC.md §14).
                let file = ImportedFile(
                    folder: folder, name: name, identity: "", sha256: summary.sha256!, keyID: state.keyID, holds: summary.holds)
                try store.recordImported([file], publishedSerial: serial)
                state.recorded[name] = file
                state.listing.add(ListedFile(name: name, size: Int64(summary.bytes), identity: "", publisher: store.replicaID, serial: serial))
                return (name, summary)
            } catch let error as ExchangeError where error.code == .exists {
                // Another process of this replica published under this name at the same moment,
                // or someone put a file there since the listing: never replaced, passed over.
                serial = try nextSerial(after: serial)
            }
        }
    }

    /// The serial of this replica's next file: above every serial it published in this folder
    /// (kept by the store, so no file of someone else's moves it), passing over names taken.
    private func firstFreeSerial(_ state: State) throws -> Int {
        var last = try store.lastPublishedSerial(in: folder)
        for file in state.listing.bundles where file.publisher == store.replicaID && state.recorded[file.name] != nil {
            last = max(last, file.serial)
        }
        var serial = try nextSerial(after: last)
        while state.listing.names.contains(Self.name(of: store.replicaID, serial: serial)) { serial = try nextSerial(after: serial) }
        return serial
    }

    private func nextSerial(after serial: Int) throws -> Int {
        // Unreachable in practice: a serial grows by one per file this replica publishes.
        guard serial < Self.maxSerial else {
            throw ExchangeError(.folder, "replica \(store.replicaID) has used every serial of the shared folder \(folder); sync through a new folder")
        }
        return serial + 1
    }

    // MARK: 3. Coalesce

    /// When this replica has more than `coalesceThreshold` counted files of its own, writes one
    /// file holding all they held (and all the folder lacks), then deletes them.
    private func coalesceIfNeeded(_ state: inout State, _ report: inout FolderSyncReport, _ progress: ((SyncProgress) -> Void)?) throws {
        let own = state.counted.filter { $0.publisher == store.replicaID }
        guard own.count > coalesceThreshold else { return }
        progress?(.coalescing(files: own.count))
        var held = SeqRanges()
        for file in own { held.formUnion(state.recorded[file.name]!.holds) }
        let mine = try store.versionVector()
        let covered = state.covered
        var base: [ReplicaID: UInt64] = [:]
        for (replica, seq) in mine.entries {
            let starts = [held.ranges(of: replica).first?.lowerBound, covered.missing(of: replica, through: seq).first?.lowerBound]
            base[replica] = (starts.compactMap { $0 }.min() ?? seq + 1) - 1
        }
        let (name, _) = try publish(since: VersionVector(base), &state)
        for old in own {
            unlink(path(of: old))
            state.recorded[old.name] = nil
        }
        syncDirectory(of: (directory as NSString).appendingPathComponent(name))
        state.listing.bundles.removeAll { old in own.contains { $0.name == old.name } }
        report.coalescedFiles = own.count
    }

    /// Syncs now and then every `interval` until `shouldStop` says so (checked every 100 ms),
    /// calling `onSync` after each sync that moved something or warned. A sync that fails (the
    /// folder vanished, the disk is full) is reported to `onError` and retried next time.
    ///
    /// It logs to `logger` (by default nowhere): each sync that moved something at `info` (its
    /// `summary`), each file skipped and each failed sync at `warning`, each sync that found
    /// nothing to do at `debug`.
    public func watch(
        interval: Duration, logger: Logger = .silent, shouldStop: () -> Bool, onSync: (FolderSyncReport) -> Void = { _ in },
        onError: (any Error) -> Void = { _ in }
    ) {
        var lastState: String?
        while !shouldStop() {
            do {
                // A cheap look at both sides: skip the sync when neither changed.
                let state = try changeToken()
                if state != lastState {
                    // Remember the state seen *before* the sync: a change that lands while it runs
                    // (or as it ends) then differs from it and is synced next time. The sync's own
                    // writes cost one more sync that finds nothing to do.
                    lastState = state
                    let started = ContinuousClock.now
                    let report = try sync()
                    let metadata: Logger.Metadata = [
                        "folder": "\(folder)", "operations_imported": "\(report.importedOperations)",
                        "files_imported": "\(report.importedFiles)", "operations_published": "\(report.publishedOperations)",
                        "seconds": "\(String(format: "%.3f", (ContinuousClock.now - started) / .seconds(1)))",
                    ]
                    for warning in report.warnings { logger.warning("\(warning)", metadata: ["folder": "\(folder)"]) }
                    if report.movedSomething {
                        logger.info("\(report.summary)", metadata: metadata)
                    } else {
                        logger.debug("\(report.summary)", metadata: metadata)
                    }
                    if report.movedSomething || !report.warnings.isEmpty { onSync(report) }
                }
            } catch let error as StoreError where error.code == .forked {
                // No retry can go on under the old id: the caller opens the store again.
                logger.notice("\(error.message)", metadata: ["folder": "\(folder)"])
                onError(error)
                lastState = nil
            } catch {
                logger.warning("\(error); retrying", metadata: ["folder": "\(folder)"])
                onError(error)
                lastState = nil
            }
            let deadline = ContinuousClock.now + interval
            while ContinuousClock.now < deadline, !shouldStop() {
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
    }

    /// A summary of the folder's listing and the store's version vector: when it is unchanged,
    /// a sync has nothing to do.
    func changeToken() throws -> String {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var parts = [try store.versionVector().description]
        for name in names.sorted() {
            // Its identity, not its size: a file replaced by one of the same size is a change.
            parts.append("\(name):\(fileIdentity(of: (directory as NSString).appendingPathComponent(name)) ?? "gone")")
        }
        return parts.joined(separator: "\n")
    }

    // MARK: The folder

    struct ListedFile {
        var name: String
        var size: Int64
        /// `fileIdentity(of:)` when it was listed.
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
    }

    private func path(of file: ListedFile) -> String {
        (directory as NSString).appendingPathComponent(file.name)
    }

    private func prepareDirectory(_ report: inout FolderSyncReport) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ExchangeError(.folder, "the shared folder \(folder) does not exist or is not a directory (is it mounted?)")
        }
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        let layouts = entries.compactMap { name -> Int? in
            guard name.hasPrefix("concord-v") else { return nil }
            return Int(name.dropFirst("concord-v".count))
        }
        if let newest = layouts.max(), newest > Self.layoutVersion {
            guard layouts.contains(Self.layoutVersion) else {
                throw ExchangeError(.folder, "the shared folder \(folder) uses layout version \(newest), newer than this build supports (\(Self.layoutVersion)); upgrade Concord")
            }
            report.warn("the shared folder also holds layout version \(newest), which this build ignores; upgrade Concord")
        }
        if !FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            // mkdir(2), for the system's reason: SPEC.md §12's "cannot write in DIR (REASON)".
            guard mkdir(directory, 0o777) == 0 || errno == EEXIST else {
                throw ExchangeError(.folder, "cannot write in \(folder) (\(String(cString: strerror(errno))))")
            }
        } else if !isDirectory.boolValue {
            throw ExchangeError(.folder, "\(directory) is not a directory")
        }
    }

    private func list(_ report: inout FolderSyncReport) throws -> Listing {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw ExchangeError(.folder, "cannot list the shared folder \(directory): \(error.localizedDescription)")
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
                    report.warn("removed \(Self.shown(name)), a half-written file of an interrupted sync")
                } else {
                    report.warn("skipping \(Self.shown(name)): a half-written file of replica \(writer.hex)'s interrupted sync (that replica removes it)")
                }
                continue
            }
            guard let (publisher, serial) = Self.parse(name) else {
                report.warn("skipping \(Self.shown(name)): not a bundle of this folder (a sync tool's temporary file or conflict copy?)")
                continue
            }
            var isDirectory: ObjCBool = false
            // Gone since the folder was listed: its publisher coalesced it away (SPEC.md §14).
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            guard !isDirectory.boolValue else {
                report.warn("skipping \(Self.shown(name)): a directory, not a file")
                continue
            }
            guard let identity = fileIdentity(of: path), let size = Int64(identity.split(separator: " ")[2]) else { continue }
            guard access(path, R_OK) == 0 else {
                report.warn("skipping \(Self.shown(name)): cannot read it (\(String(cString: strerror(errno))))")
                continue
            }
            listing.bundles.append(ListedFile(name: name, size: size, identity: identity, publisher: publisher, serial: serial))
        }
        listing.bundles.sort { ($0.serial, $0.name) < ($1.serial, $1.name) }
        return listing
    }

    /// A file name as a warning shows it: anyone who can write to the folder names its files, so
    /// control characters are escaped (`\n`, `\u{1B}`), and a name can neither break a warning
    /// into several lines (one of which could pass for syncctl's own) nor drive the terminal.
    static func shown(_ name: String) -> String {
        guard name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return name }
        return name.unicodeScalars.map { $0.properties.generalCategory == .control ? $0.escaped(asASCII: true) : String($0) }.joined()
    }

    /// The replica whose temporary file this is: `.<replica id>-<serial>.tmp-<hex>`.
    static func temporaryFileWriter(_ name: String) -> ReplicaID? {
        guard name.hasPrefix("."), let range = name.range(of: ".tmp-") else { return nil }
        let stem = name.dropFirst().prefix(upTo: range.lowerBound)
        guard let (writer, _) = parse(stem + fileExtension) else { return nil }
        return writer
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

    /// Why a file was skipped, in a few words.
    private static func reason(_ error: any Error, path: String) -> String {
        let text: String
        switch error {
        case BundleError.truncated: return "incomplete (still being written?); it is imported once whole"
        case let error as ExchangeError: text = error.message
        case let error as StoreError: text = error.message
        default: text = "\(error)"
        }
        if text.hasSuffix(BundleError.truncated.description) { return "incomplete (still being written?); it is imported once whole" }
        return text.hasPrefix(path + ": ") ? String(text.dropFirst(path.count + 2)) : text
    }
}

/// What a folder sync is doing, for progress displays.
public enum SyncProgress: Hashable, Sendable {
    case importing(file: Int, of: Int, name: String)
    case publishing
    case coalescing(files: Int)
}

/// What one folder sync did.
public struct FolderSyncReport: Hashable, Sendable {
    public var importedFiles = 0
    public var importedOperations = 0
    public var publishedFile: String?
    public var publishedOperations = 0
    /// How many of the operations published the folder had held once, or should have, and no
    /// longer does: its files were lost, restored to older versions, replaced or skipped.
    public var republishedOperations = 0
    public var coalescedFiles = 0
    /// One line per file skipped or cleaned up.
    public var warnings: [String] = []
    public var farFutureTimestamp: Timestamp?

    public init() {}

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

    mutating func warn(_ line: String) {
        warnings.append(line)
    }
}

extension ConcordStore {
    /// One two-way sync through a shared folder (SPEC.md §14). See `FolderSync`.
    @discardableResult
    public func sync(folder: String, progress: ((SyncProgress) -> Void)? = nil) throws -> FolderSyncReport {
        try FolderSync(store: self, folder: folder).sync(progress: progress)
    }

    /// Syncs through a shared folder now and whenever the store or the folder changes, until
    /// `shouldStop` returns true. See `FolderSync.watch`.
    public func watch(
        folder: String, interval: Duration = .seconds(2), shouldStop: () -> Bool,
        logger: Logger = .silent, onSync: (FolderSyncReport) -> Void = { _ in }, onError: (any Error) -> Void = { _ in }
    ) {
        FolderSync(store: self, folder: folder).watch(
            interval: interval, logger: logger, shouldStop: shouldStop, onSync: onSync, onError: onError)
    }
}
