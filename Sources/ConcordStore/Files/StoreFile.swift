import Foundation
import GRDBSQLite

/// Reads the first bytes of a file that may be a store some connection of this process has open,
/// without breaking that connection's locks (SPEC.md §9, "Touching a store's files").
///
/// POSIX record locks belong to a process and a file, not to a descriptor: closing *any*
/// descriptor of a file drops every lock the process holds on it, SQLite's included. A process
/// that opened its store's file itself, even only to read 100 bytes of header, and closed it
/// while a connection was open, left that connection without its locks. Another process's last
/// connection then believed it was alone, checkpointed, and deleted the `-wal` and `-shm` files
/// that the first was still writing into: the first process's later commits, acknowledged to
/// their writers, were lost.
///
/// SQLite's own file layer (its VFS) keeps a table of the files it has open and the locks it holds
/// on each, and defers closing a descriptor while the process holds locks on that file. So this
/// reads through it: whatever connections this process has open, a read here cannot drop their
/// locks. Nothing else reads or opens a store's files (the database, `-wal`, `-shm`, `-journal`)
/// but SQLite; code outside SQLite touches them only with calls that open no descriptor (`stat`,
/// `access`, `chmod`, `link`, `rename`, `unlink`).
package enum StoreFile {
    /// Why a file's first bytes could not be read.
    package enum Failure: Error, Equatable {
        case missing
        case directory
        /// A FIFO, a device or a socket: opening it could block forever or read what never ends.
        case notRegular
        /// The `-wal`, `-shm` or `-journal` file of the store at the associated path: SQLite
        /// tracks their locks apart from the files it opens, so even its file layer must not
        /// open and close them.
        case sideFile(of: String)
        /// The system's reason.
        case unreadable(String)
    }

    /// The store whose `-wal`, `-shm` or `-journal` file `path` is, if such a file exists beside it.
    package static func sideFileOwner(of path: String) -> String? {
        for suffix in ["-wal", "-shm", "-journal"] where path.hasSuffix(suffix) {
            let owner = String(path.dropLast(suffix.count))
            var status = stat()
            if !owner.isEmpty, stat(owner, &status) == 0, status.st_mode & S_IFMT == S_IFREG { return owner }
        }
        return nil
    }

    /// The first `count` bytes of the regular file at `path` (fewer if it is shorter).
    package static func head(of path: String, count: Int) throws(Failure) -> [UInt8] {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw errno == ENOENT ? .missing : .unreadable(String(cString: strerror(errno)))
        }
        switch status.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw .directory
        default: throw .notRegular
        }
        if let owner = sideFileOwner(of: path) { throw .sideFile(of: owner) }
        guard access(path, R_OK) == 0 else { throw .unreadable(String(cString: strerror(errno))) }
        guard count > 0, status.st_size > 0 else { return [] }
        guard let vfs = sqlite3_vfs_find(nil) else { throw .unreadable(String(cString: strerror(EIO))) }
        // The VFS takes a main database file's name as SQLite's pager gives it: a full path,
        // followed by two NULs (where URI parameters would follow). It keeps the name until the
        // file is closed.
        let nameBytes = Int(vfs.pointee.mxPathname) + 2
        let name = UnsafeMutablePointer<CChar>.allocate(capacity: nameBytes)
        defer { name.deallocate() }
        name.initialize(repeating: 0, count: nameBytes)
        // A path through a symbolic link is answered with `SQLITE_OK_SYMLINK` (`SQLITE_OK` in its
        // low byte), the link resolved: the name of the file SQLite's own connections open.
        guard vfs.pointee.xFullPathname(vfs, path, vfs.pointee.mxPathname + 1, name) & 0xFF == SQLITE_OK else {
            throw .unreadable(String(cString: strerror(ENAMETOOLONG)))
        }
        let storage = UnsafeMutableRawPointer.allocate(byteCount: Int(vfs.pointee.szOsFile), alignment: 16)
        defer { storage.deallocate() }
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: Int(vfs.pointee.szOsFile))
        let file = storage.bindMemory(to: sqlite3_file.self, capacity: 1)
        var flags: Int32 = 0
        // Opened as a main database file: that is the kind whose locks the VFS tracks, and it
        // creates nothing beside the file.
        let opened = vfs.pointee.xOpen(vfs, name, file, SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_READONLY, &flags)
        defer { if let methods = file.pointee.pMethods { _ = methods.pointee.xClose(file) } }
        guard opened == SQLITE_OK, let methods = file.pointee.pMethods else {
            // stat and access found a readable regular file: what failed is the system's to say.
            throw .unreadable(String(cString: strerror(EIO)))
        }
        let length = Int(min(Int64(count), Int64(status.st_size)))
        var bytes = [UInt8](repeating: 0, count: length)
        let read = bytes.withUnsafeMutableBytes { buffer in
            methods.pointee.xRead(file, buffer.baseAddress, Int32(length), 0)
        }
        // (A file that shrank since stat reads short, and fails here too.)
        guard read == SQLITE_OK else {
            throw .unreadable(String(cString: strerror(EIO)))
        }
        return bytes
    }
}
