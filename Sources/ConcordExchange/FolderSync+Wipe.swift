import ConcordCore
import ConcordStore
import Foundation

/// What `syncctl wipe --folder DIR` removes of a replica in a shared folder (SPEC.md §11, `wipe`).
package struct FolderWipe: Sendable {
    /// The files to remove: paths in the folder's layout directory.
    package var files: [String] = []
    /// One per file that carries the replica's name but is left where it is, and why.
    package var warnings: [ConcordError] = []

    /// Nothing to remove.
    package init() {}
}

extension FolderSync {
    /// The files of the shared folder that this replica wrote and that are still as it wrote them:
    /// those it recorded as its own (`isOwn`), with the SHA-256 it recorded, and its temporary
    /// files of interrupted syncs (never read by anyone). A file that merely carries its name (a
    /// forged bundle, a symbolic link, a directory, a file changed since) stays, with a warning:
    /// a copy of the store, in particular, must not remove what the original published.
    ///
    /// Nothing is removed here: the caller removes the files once it knows it can remove all it
    /// was asked to (SPEC.md §11: a wipe that cannot do all of it does none of it).
    /// - Throws: `folder` when the folder is missing or cannot be listed, `copied` when the store
    ///   is a copy (its records of published files are the original's), `io` when the files
    ///   cannot be removed (the layout directory is not writable).
    package func ownFiles() throws(ConcordError) -> FolderWipe {
        if let original = store.copiedFrom {
            throw ConcordError(
                .copied, "\(store.path) is a copy of the store at \(original) (another file): the files it records in shared folders are the original's")
        }
        try Self.checkExists(folder)
        var wipe = FolderWipe()
        guard FileManager.default.fileExists(atPath: directory) else { return wipe }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw ConcordError(.folder, "cannot list the shared folder \(directory): \(error.localizedDescription)")
        }
        let listed = Set(names)
        for file in try store.folderFiles(in: folder).values.filter(isOwn).sorted(by: { $0.name < $1.name }) where listed.contains(file.name) {
            let path = (directory as NSString).appendingPathComponent(file.name)
            var status = stat()
            guard lstat(path, &status) == 0 else { continue }  // gone since the listing
            guard status.st_mode & S_IFMT == S_IFREG else {
                let what = status.st_mode & S_IFMT == S_IFDIR ? "a directory" : "not a regular file"
                wipe.warnings.append(ConcordError(.invalidInput, "skipping \(Self.shown(file.name)): \(what), not the file this replica wrote; it stays"))
                continue
            }
            guard (try? FileSource.sha256(of: path)) == file.sha256 else {
                wipe.warnings.append(ConcordError(.invalidInput, "skipping \(Self.shown(file.name)): not the file this replica wrote (its contents changed); it stays"))
                continue
            }
            wipe.files.append(path)
        }
        for name in names.sorted() where Self.temporaryFileWriter(name) == store.replicaID {
            let path = (directory as NSString).appendingPathComponent(name)
            var status = stat()
            guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { continue }
            wipe.files.append(path)
        }
        if let first = wipe.files.first, access(directory, W_OK) != 0 {
            throw ConcordError(.io, "cannot remove \(first): \(String(cString: strerror(errno)))")
        }
        return wipe
    }
}

extension FolderSync {
    /// The SHA-256 of each file this replica recorded as its own in the folder, by name, whether
    /// or not the folder still holds it: what a relay that mirrors the folder may hold of this
    /// replica (SPEC.md §16.5, `wipe --relay`).
    /// - Throws: `copied` when the store is a copy (its records are the original's).
    package func ownRecordedFiles() throws(ConcordError) -> [String: [UInt8]] {
        if let original = store.copiedFrom {
            throw ConcordError(
                .copied, "\(store.path) is a copy of the store at \(original) (another file): the files it records on relays are the original's")
        }
        var files: [String: [UInt8]] = [:]
        for file in try store.folderFiles(in: folder).values where isOwn(file) { files[file.name] = file.sha256 }
        return files
    }
}
