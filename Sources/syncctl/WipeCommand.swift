import ArgumentParser
import ConcordCore
import ConcordExchange
import ConcordRelayClient
import ConcordRelayProtocol
import ConcordStore
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `syncctl wipe --yes [--folder DIR] [--relay URL]`: removes this replica from this machine
/// (SPEC.md §11).
struct Wipe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove this replica's store, and its files in a shared folder, from this machine.",
        discussion: """
            Removes the store file with its -wal, -shm and -lock files (the sync key is in the store) \
            and its mirrors of relays, with --folder DIR the files this replica published in that \
            folder, as it wrote them, and with --relay URL those it uploaded to that relay; never \
            another replica's, nor a file that merely carries its name. Other replicas keep \
            everything they hold, and can bring it back: it erases nothing from them (a delete, or \
            'reminder delete --all', reaches every replica but can be restored; to erase content \
            everywhere for good, use 'purge --all', 'reminder purge' or 'note purge' before \
            wiping). It cannot be undone: without --yes nothing is removed. Prints \
            each file it removed.
            """)
    @OptionGroup var store: StoreOptions
    @Option(help: "A shared folder: the files this replica wrote there are removed too.") var folder: String?
    @Option(help: ArgumentHelp("A relay: the files this replica uploaded there are deleted too.", valueName: "url")) var relay: String?
    @Flag(help: "Remove them: without it, nothing is.") var yes = false

    func validate() throws {
        guard yes else { throw ValidationError("wipe removes this replica's store from this machine for good; add --yes to do it") }
        if let relay {
            do throws(ConcordError) {
                _ = try RelayClient.relayURL(relay)
            } catch {
                throw ValidationError(error.message)
            }
        }
    }

    func run() async throws {
        // A stop cancels a request to the relay under way (nothing is removed after it), and
        // otherwise waits for the wipe's end: it never leaves a wipe half done.
        try await Stop.withStopSignals { [self] in try await wipe() }
    }

    private func wipe() async throws {
        // A folder that is not there (not mounted, mistyped) is refused before the store is even
        // opened: a read-only connection leaves SQLite's empty `-wal` and `-shm` files behind.
        if let folder { try FolderSync.checkExists(folder) }
        // Read-only: whatever the store's schema, nothing is written to it first. A file that is
        // not a Concord store is refused here, with nothing removed.
        let opened = try await ConcordStore.open(at: store.resolvedPath, readOnly: true)
        let replica = opened.replicaID
        let path = opened.path
        // Everything that would stop the wipe part way is found before anything is removed: a
        // missing folder, a copy's folder files, a directory that cannot be written.
        let inFolder = try await opened.offloadRead { try folder.map { folder in try FolderSync(store: opened, folder: folder).ownFiles() } ?? FolderWipe() }
        var onRelay: RelayWipe?
        if let relay { onRelay = try await Self.ownFiles(of: opened, on: relay) }
        try await opened.close()
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        for directory in Set([resolved, path].map { ($0 as NSString).deletingLastPathComponent }) where access(directory.isEmpty ? "." : directory, W_OK) != 0 {
            throw ConcordError(.io, "cannot remove \(path): \(String(cString: strerror(errno)))")
        }
        for warning in inFolder.warnings + (onRelay?.warnings ?? []) { warn("warning: \(Advice.line(for: warning))") }
        // Its files on the relay and in the folder first, then its mirrors: if one cannot be
        // removed, the store is still there to say so again.
        if let onRelay {
            for file in try await Self.delete(onRelay) { say("removed \(file.name) from \(onRelay.client.url)") }
        }
        var removed: [String] = []
        for file in inFolder.files where try Self.remove(file) { removed.append(file) }
        for mirror in RelaySync.mirrors(of: resolved) {
            do {
                try FileManager.default.removeItem(atPath: mirror)
            } catch {
                throw ConcordError(.io, "cannot remove \(mirror): \(error.localizedDescription)", cause: error)
            }
            removed.append(mirror)
        }
        for file in [resolved, resolved + "-wal", resolved + "-shm", resolved + "-lock"] where try Self.remove(file) {
            removed.append(file)
        }
        if resolved != path, try Self.remove(path) { removed.append(path) }
        for file in removed { say("removed \(file)") }
        say("wiped replica \(replica.hex) from this machine")
    }

    /// This replica's files on the relay at `url`, found before anything is removed: a store
    /// without a sync key, or a relay that cannot be reached, stops the wipe here.
    private static func ownFiles(of store: ConcordStore, on url: String) async throws -> RelayWipe {
        guard try await store.syncKey() != nil else { throw ConcordError.noSyncKey(at: store.path) }
        let sync = try RelaySync(store: store, url: url)
        return try await cancelledByAStop { () throws(ConcordError) in try await sync.ownFiles() }
    }

    /// Deletes the files found on the relay; those it held.
    private static func delete(_ wipe: RelayWipe) async throws -> [RelayFile] {
        try await cancelledByAStop { () throws(ConcordError) in try await wipe.delete() }
    }

    /// `request`, cancelled by SIGINT or SIGTERM (the wipe then ends with the cancellation's error).
    private static func cancelledByAStop<Result: Sendable>(
        _ request: @escaping @Sendable () async throws(ConcordError) -> Result
    ) async throws -> Result {
        try await Stop.cancellingOnStop { () -> Swift.Result<Result, ConcordError> in
            do throws(ConcordError) { return .success(try await request()) } catch { return .failure(error) }
        }.get()
    }

    /// Removes `path`: whether it was there.
    private static func remove(_ path: String) throws -> Bool {
        if unlink(path) == 0 { return true }
        guard errno == ENOENT else { throw ConcordError(.io, "cannot remove \(path): \(String(cString: strerror(errno)))") }
        return false
    }
}
