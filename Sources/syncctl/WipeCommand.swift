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
            and with --folder DIR the files this replica published in that folder, as it wrote them; \
            never another replica's, nor a file that merely carries its name. Other replicas keep \
            everything they hold: it erases nothing from them (a delete, or 'reminder delete --all', \
            reaches every replica). It cannot be undone: without --yes nothing is removed. Prints \
            each file it removed.
            """)
    @OptionGroup var store: StoreOptions
    @Option(help: "A shared folder: the files this replica wrote there are removed too.") var folder: String?
    @Flag(help: "Remove them: without it, nothing is.") var yes = false

    func validate() throws {
        guard yes else { throw ValidationError("wipe removes this replica's store from this machine for good; add --yes to do it") }
    }

    func run() throws {
        // A folder that is not there (not mounted, mistyped) is refused before the store is even
        // opened: a read-only connection leaves SQLite's empty `-wal` and `-shm` files behind.
        if let folder { try FolderSync.checkExists(folder) }
        // Read-only: whatever the store's schema, nothing is written to it first. A file that is
        // not a Concord store is refused here, with nothing removed.
        let opened = try ConcordStore.open(at: store.resolvedPath, readOnly: true)
        let replica = opened.replicaID
        let path = opened.path
        // Everything that would stop the wipe part way is found before anything is removed: a
        // missing folder, a copy's folder files, a directory that cannot be written.
        let inFolder = try folder.map { folder in try FolderSync(store: opened, folder: folder).ownFiles() } ?? FolderWipe()
        try opened.close()
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        for directory in Set([resolved, path].map { ($0 as NSString).deletingLastPathComponent }) where access(directory.isEmpty ? "." : directory, W_OK) != 0 {
            throw ConcordError(.io, "cannot remove \(path): \(String(cString: strerror(errno)))")
        }
        for warning in inFolder.warnings { warn("warning: \(Advice.line(for: warning))") }
        // Its folder files first: if one cannot be removed, the store is still there to say so again.
        var removed: [String] = []
        for file in inFolder.files where try Self.remove(file) { removed.append(file) }
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
