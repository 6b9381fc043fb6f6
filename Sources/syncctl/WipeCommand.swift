import ArgumentParser
import ConcordCore
import ConcordExchange
import ConcordStore
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `syncctl wipe --yes [--folder DIR]`: removes this replica from this machine (SPEC.md §11).
struct Wipe: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove this replica's store, and its files in a shared folder, from this machine.",
        discussion: """
            Removes the store file with its -wal, -shm and -lock files (the sync key is in the store), \
            and with --folder DIR the files this replica published in that folder; never another \
            replica's. Other replicas keep everything they hold. It cannot be undone: without --yes \
            nothing is removed. Prints each file it removed.
            """)
    @OptionGroup var store: StoreOptions
    @Option(help: "A shared folder: the files this replica wrote there are removed too.") var folder: String?
    @Flag(help: "Remove them: without it, nothing is.") var yes = false

    func validate() throws {
        guard yes else { throw ValidationError("wipe removes this replica's store from this machine for good; add --yes to do it") }
    }

    func run() throws {
        // Read-only: whatever the store's schema, nothing is written to it first. A file that is
        // not a Concord store is refused here, with nothing removed.
        let opened = try ConcordStore.open(at: store.resolvedPath, readOnly: true)
        let replica = opened.replicaID
        let path = opened.path
        try opened.close()
        let own = try folder.map { folder in try FolderSync.files(of: replica, in: folder) } ?? []
        // Its folder files first: if one cannot be removed, the store is still there to say so again.
        var removed: [String] = []
        for file in own where try Self.remove(file) { removed.append(file) }
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        for file in [resolved, resolved + "-wal", resolved + "-shm", resolved + "-lock"] where try Self.remove(file) {
            removed.append(file)
        }
        if resolved != path, try Self.remove(path) { removed.append(path) }
        for file in removed { say("removed \(file)") }
        say("wiped replica \(replica.hex) from this machine")
    }

    /// Removes `path`: whether it was there.
    private static func remove(_ path: String) throws -> Bool {
        if unlink(path) == 0 { return true }
        guard errno == ENOENT else { throw ConcordError(.io, "cannot remove \(path): \(String(cString: strerror(errno)))") }
        return false
    }
}
