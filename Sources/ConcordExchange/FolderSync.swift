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

    /// One sync, both ways.
    @discardableResult
    public func sync(progress: ((SyncProgress) -> Void)? = nil) throws -> FolderSyncReport {
        // A copy would publish files under its original's name, and coalesce the original's away.
        try store.ensureNotCopied()
        // What a merge left pending (one a kill interrupted) is applied first (SPEC.md §5.6).
        try store.finishPendingMerge()
        var report = FolderSyncReport()
        try prepareDirectory(&report)
        let key = try store.syncKey()
        var listing = try list(&report)
        var recorded = try store.importedFiles(in: folder)

        // Import what this store has not imported yet, oldest serial first.
        let pending = listing.bundles.filter { recorded[$0.name]?.size != $0.size }
        for (index, file) in pending.enumerated() {
            progress?(.importing(file: index + 1, of: pending.count, name: file.name))
            let path = (directory as NSString).appendingPathComponent(file.name)
            do {
                guard let manifest = try Self.manifest(at: path, key: key, requireEncrypted: key != nil) else {
                    report.warn("skipping \(file.name): empty file (still being written?)")
                    continue
                }
                let imported = ImportedFile(folder: folder, name: file.name, size: file.size, top: manifest.top)
                let (merge, summary) = try store.mergeBundle(at: path, importing: imported, requireEncrypted: key != nil)
                recorded[file.name] = imported
                report.importedFiles += 1
                report.importedOperations += merge.newOperationCount
                report.farFutureTimestamp = merge.farFutureTimestamp ?? report.farFutureTimestamp
                _ = summary
            } catch let error as StoreError where error.code != .invalidInput {
                throw error  // the store failed (disk full, read-only, locked): stop, nothing half-done
            } catch {
                // A file removed as it was about to be read was coalesced away by its publisher
                // (SPEC.md §14): what it held is in that replica's newer file. Nothing to say.
                if !FileManager.default.fileExists(atPath: path) { continue }
                report.warn("skipping \(file.name): \(Self.reason(error, path: path))")
            }
        }

        // Publish what the folder lacks: every operation above what the folder's files cover. With
        // a key, only files sealed with it count: replicas that hold the key read no others.
        var covered = VersionVector()
        for file in listing.bundles {
            guard let known = recorded[file.name], readable(file, key: key) else { continue }
            covered.merge(known.top)
        }
        let mine = try store.versionVector()
        if mine.entries.contains(where: { $0.value > covered[$0.key] }) {
            // Files are named after the replica: not under an id another process has just
            // replaced (`init --fork`, SPEC.md §9.1) since this sync began.
            try store.ensureNotCopied()
            progress?(.publishing)
            // Another process of this replica may publish at the same moment: a file is never
            // replaced, and a clash moves on to the next serial.
            var summary: BundleSummary?
            var name = nextName(listing)
            for _ in 0..<100 where summary == nil {
                name = nextName(listing)
                do {
                    summary = try store.exportBundle(
                        to: (directory as NSString).appendingPathComponent(name), since: covered, contiguousOnly: true,
                        exclusive: true, temporaryName: temporaryName(for: name), encryptingWith: key)
                } catch let error as ExchangeError where error.code == .exists {
                    listing.nextSerial += 1
                }
            }
            guard let summary else { throw ExchangeError(.io, "cannot find a free file name in \(directory)") }
            let file = ImportedFile(folder: folder, name: name, size: Int64(summary.bytes), top: summary.manifest.top)
            try store.recordImported([file])
            recorded[name] = file
            listing.bundles.append(ListedFile(name: name, size: file.size, publisher: store.replicaID, serial: listing.nextSerial))
            listing.nextSerial += 1
            report.publishedFile = name
            report.publishedOperations = summary.operations
        }

        try coalesceIfNeeded(&listing, &recorded, &report, key: key, progress)
        try store.forgetImportedFiles(in: folder, keeping: Set(listing.bundles.map(\.name)))
        return report
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
            let size = (try? FileManager.default.attributesOfItem(atPath: (directory as NSString).appendingPathComponent(name))[.size] as? Int) ?? -1
            parts.append("\(name):\(size)")
        }
        return parts.joined(separator: "\n")
    }

    // MARK: The folder

    struct ListedFile {
        var name: String
        var size: Int64
        var publisher: ReplicaID
        var serial: Int
    }

    struct Listing {
        var bundles: [ListedFile] = []
        var nextSerial = 1
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
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            } catch {
                throw ExchangeError(.folder, "cannot create \(directory): \(error.localizedDescription)")
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
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                  let size = (attributes[.size] as? NSNumber)?.int64Value
            else {
                report.warn("skipping \(Self.shown(name)): cannot read it")
                continue
            }
            listing.bundles.append(ListedFile(name: name, size: size, publisher: publisher, serial: serial))
            if publisher == store.replicaID { listing.nextSerial = max(listing.nextSerial, serial + 1) }
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

    private func nextName(_ listing: Listing) -> String {
        let serial = String(listing.nextSerial)
        return store.replicaID.hex + "-" + String(repeating: "0", count: max(0, 10 - serial.count)) + serial + Self.fileExtension
    }

    private func temporaryName(for name: String) -> String {
        ".\(name.dropLast(Self.fileExtension.count)).tmp-\(String(store.environment.random() & 0xFFFF_FFFF, radix: 16))"
    }

    /// The manifest of the bundle at `path`, plain or encrypted with `key`, or nil for an empty file.
    static func manifest(at path: String, key: SyncKey?, requireEncrypted: Bool = false) throws -> BundleManifest? {
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue
        guard size != 0 else { return nil }
        var reader = try ConcordStore.bundleReader(at: path, key: key, requireEncrypted: requireEncrypted)
        return try reader.readManifest()
    }

    /// Whether the replicas that share this store's key (or, without a key, those without one) can
    /// read the file: sealed with the key, or plain when there is no key. Read from the header only.
    private func readable(_ file: ListedFile, key: SyncKey?) -> Bool {
        guard let key else { return true }
        let path = (directory as NSString).appendingPathComponent(file.name)
        // Through SQLite's file layer, as every first look at a file (SPEC.md §9).
        guard let head = try? StoreFile.head(of: path, count: 18) else { return false }
        return head.count == 18 && head.starts(with: EncryptedBundleFormat.magic)
            && Array(head[10..<18]) == EncryptedBundleFormat.keyIDBytes(of: key)
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

    // MARK: Coalescing

    /// Writes the operations of the bundles at `paths`, in order, as one bundle (sealed with `key`
    /// when there is one).
    private static func concatenate(_ paths: [String], manifest: BundleManifest, key: SyncKey?, into output: AtomicFile) throws -> BundleSummary {
        let sealer = try key.map { key in try BundleSealer(key: key) { bytes in try output.write(bytes) } }
        var writer = try BundleWriter(manifest: manifest) { bytes in
            if let sealer { try sealer.write(bytes) } else { try output.write(bytes) }
        }
        for path in paths {
            var reader = try ConcordStore.bundleReader(at: path, key: key)
            try reader.forEachOperation { operation in try writer.append(operation) }
        }
        var summary = try writer.finish()
        if let sealer {
            try sealer.finish()
            summary.bytes = sealer.bytesWritten
        }
        return summary
    }

    /// Merges this replica's own files into one when there are too many, deleting the old ones
    /// only once the new one is durable.
    private func coalesceIfNeeded(
        _ listing: inout Listing, _ recorded: inout [String: ImportedFile], _ report: inout FolderSyncReport,
        key: SyncKey?, _ progress: ((SyncProgress) -> Void)?
    ) throws {
        // With a key, files of this replica from before it had the key (plain) are left as they are.
        let own = listing.bundles.filter { $0.publisher == store.replicaID && recorded[$0.name] != nil && readable($0, key: key) }
        guard own.count > coalesceThreshold else { return }
        progress?(.coalescing(files: own.count))
        var top = VersionVector()
        for file in own { top.merge(recorded[file.name]!.top) }
        let name = nextName(listing)
        let path = (directory as NSString).appendingPathComponent(name)
        let output = try AtomicFile(path: path, temporaryName: temporaryName(for: name))
        let summary: BundleSummary
        do {
            let paths = own.map { (directory as NSString).appendingPathComponent($0.name) }
            var first = try ConcordStore.bundleReader(at: paths[0], key: key)
            let manifest = BundleManifest(
                publisher: store.replicaID, createdMillis: store.environment.wallClock(), base: try first.readManifest().base, top: top)
            summary = try Self.concatenate(paths, manifest: manifest, key: key, into: output)
            try output.commit(exclusive: true)
        } catch {
            output.abandon()
            report.warn("could not merge this replica's \(own.count) files into one (\(error)); will try again")
            return
        }
        let file = ImportedFile(folder: folder, name: name, size: Int64(summary.bytes), top: top)
        try store.recordImported([file])
        recorded[name] = file
        for old in own {
            unlink((directory as NSString).appendingPathComponent(old.name))
            recorded[old.name] = nil
        }
        syncDirectory(of: path)
        listing.bundles.removeAll { old in own.contains { $0.name == old.name } }
        listing.bundles.append(ListedFile(name: name, size: file.size, publisher: store.replicaID, serial: listing.nextSerial))
        listing.nextSerial += 1
        report.coalescedFiles = own.count
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
            parts.append("published \(publishedOperations) operation\(publishedOperations == 1 ? "" : "s") as \(publishedFile)")
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
