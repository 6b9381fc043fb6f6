import ConcordCore
import ConcordStore
import Crypto
import Foundation

/// What a file holds, told from its first bytes (never from its name).
package enum FileKind: Sendable {
    case store
    case bundle
    /// An encrypted bundle (SPEC.md §13.1).
    case encryptedBundle
    case other

    /// What the file at `path` holds; `.other` also when it cannot be read. Read through
    /// `StoreFile`: the file may be a store this process has open.
    package static func of(path: String) -> FileKind {
        (try? input(at: path)) ?? .other
    }

    /// What the file to read at `path` holds, or the error of SPEC.md §12 that says why it cannot
    /// be read: missing, a directory, not a regular file (a FIFO would block forever), unreadable.
    package static func input(at path: String) throws(ConcordError) -> FileKind {
        let head: [UInt8]
        do {
            head = try StoreFile.head(of: path, count: 16)
        } catch {
            switch error {
            case .missing: throw ConcordError(.io, "no store or bundle at \(path)")
            case .directory: throw ConcordError(.invalidInput, "\(path) is a directory, not a Concord store or bundle")
            case .notRegular: throw ConcordError(.invalidInput, "\(path) is not a regular file")
            case .sideFile(let owner): throw ConcordError(.invalidInput, "\(path) is SQLite's side file of the store at \(owner), not a Concord store or bundle")
            case .unreadable(let reason): throw ConcordError(.io, "cannot read \(path) (\(reason))")
            }
        }
        if head.starts(with: BundleFormat.magic) { return .bundle }
        if head.starts(with: EncryptedBundleFormat.magic) { return .encryptedBundle }
        if head.starts(with: Array("SQLite format 3\0".utf8)) { return .store }
        return .other
    }
}

/// A byte source over a file, read in bounded chunks, optionally hashing what it reads.
package final class FileSource: ByteSource {
    private let handle: FileHandle
    private var hasher: SHA256?

    /// The file is first identified through SQLite's file layer (SPEC.md §9): a store, or a side
    /// file of one, given as a bundle is refused before this opens it, since this process may have
    /// it open; so is anything but a regular file (a FIFO would block the read forever).
    /// - Parameter hashing: keep a SHA-256 of the bytes read, for `sha256`.
    package init(path: String, hashing: Bool = false) throws(ConcordError) {
        if try FileKind.input(at: path) == .store {
            throw ConcordError(.invalidInput, "\(path) is a Concord store, not a bundle")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ConcordError(.io, "cannot read \(path)")
        }
        self.handle = handle
        hasher = hashing ? SHA256() : nil
    }

    /// The SHA-256 of every byte read so far (of the whole file, once a read returned nothing),
    /// if the source was made `hashing`.
    package var sha256: [UInt8]? {
        hasher.map { Array($0.finalize()) }
    }

    /// The SHA-256 of the whole file at `path`, read through a `FileSource`.
    package static func sha256(of path: String) throws -> [UInt8] {
        let source = try FileSource(path: path, hashing: true)
        while try !source.read(maxCount: 1 << 20).isEmpty {}
        return source.sha256!
    }

    deinit {
        try? handle.close()
    }

    package func read(maxCount: Int) throws -> [UInt8] {
        let bytes = [UInt8](try handle.read(upToCount: min(maxCount, 1 << 20)) ?? Data())
        hasher?.update(data: bytes)
        return bytes
    }
}

/// What `stat` says of a file that changes whenever its contents may have: device, inode, size,
/// and the times of its last modification and status change, in nanoseconds (SPEC.md §14). A
/// write or a replacement changes the inode or the status-change time, which no program can set
/// back, but only by a tick of the file system's clock: a file changed within the last
/// `settlingSeconds` may change again with the same identity, so it is not yet `settled`.
struct FileIdentity: Hashable {
    /// `"<device> <inode> <size> <mtime s>.<ns> <ctime s>.<ns>"`.
    var text: String
    var size: Int64
    /// Whether its last status change is more than `settlingSeconds` old.
    var settled: Bool

    static let settlingSeconds = 2

    /// Nil if there is no such file.
    init?(of path: String, now: Date = Date()) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        #if canImport(Darwin)
        let (modified, changed) = (status.st_mtimespec, status.st_ctimespec)
        #else
        let (modified, changed) = (status.st_mtim, status.st_ctim)
        #endif
        text = "\(status.st_dev) \(status.st_ino) \(status.st_size) \(modified.tv_sec).\(modified.tv_nsec) \(changed.tv_sec).\(changed.tv_nsec)"
        size = Int64(status.st_size)
        settled = Int(now.timeIntervalSince1970) - Int(changed.tv_sec) > Self.settlingSeconds
    }
}

/// Writes a file whole or not at all: into a temporary file beside it, flushed to disk, then
/// renamed into place, and the directory flushed too.
struct AtomicFile {
    let path: String
    let temporaryPath: String
    private let handle: FileHandle

    init(path: String, temporaryName: String) throws(ConcordError) {
        self.path = path
        let directory = (path as NSString).deletingLastPathComponent
        temporaryPath = (directory as NSString).appendingPathComponent(temporaryName)
        // Created with open(2), not FileManager.createFile: that writes "atomically" on Linux, through
        // a `.dat.nosync…` file of its own in the same directory, which another replica listing a
        // shared folder at that moment would see (and a sync tool might carry to other machines).
        let descriptor = open(temporaryPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw ConcordError(.io, "cannot write in \(directory.isEmpty ? "." : directory) (\(String(cString: strerror(errno))))")
        }
        handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }

    func write(_ bytes: ArraySlice<UInt8>) throws(ConcordError) {
        do {
            try handle.write(contentsOf: Data(bytes))
        } catch {
            throw ConcordError(.io, Self.failure(writing: path, error))
        }
    }

    /// What to tell the user when writing `path` failed: SPEC.md §12's line for a full disk, else
    /// the system's reason.
    static func failure(writing path: String, _ error: any Error) -> String {
        switch posixCode(of: error) {
        case ENOSPC?, EDQUOT?: "the disk is full; nothing was written to \(path)"
        case let code?: "cannot write \(path): \(String(cString: strerror(code)))"
        case nil: "cannot write \(path): \(error.localizedDescription)"
        }
    }

    /// The POSIX error code behind a Foundation error, if there is one.
    static func posixCode(of error: any Error) -> Int32? {
        let error = error as NSError
        if error.domain == NSPOSIXErrorDomain { return Int32(error.code) }
        return (error.userInfo[NSUnderlyingErrorKey] as? NSError).flatMap { posixCode(of: $0) }
    }

    /// Makes the file durable and moves it into place. With `exclusive`, an existing file at the
    /// path is never replaced: the commit fails with `.exists` instead.
    func commit(exclusive: Bool = false) throws(ConcordError) {
        try flush()
        try place(exclusive: exclusive)
    }

    /// Makes the temporary file durable, and closes it.
    func flush() throws(ConcordError) {
        do {
            try handle.synchronize()
            try handle.close()
        } catch {
            abandon()
            throw ConcordError(.io, Self.failure(writing: path, error))
        }
    }

    /// Moves the flushed file into place (see `commit(exclusive:)`).
    func place(exclusive: Bool) throws(ConcordError) {
        if exclusive {
            guard link(temporaryPath, path) == 0 else {
                let clash = errno == EEXIST
                let reason = String(cString: strerror(errno))
                abandon()
                throw clash ? ConcordError(.exists, "\(path) already exists") : ConcordError(.io, "cannot create \(path): \(reason)")
            }
            unlink(temporaryPath)
        } else {
            guard rename(temporaryPath, path) == 0 else {
                let reason = String(cString: strerror(errno))
                abandon()
                throw ConcordError(.io, "cannot move \(temporaryPath) to \(path): \(reason)")
            }
        }
        syncDirectory(of: path)
    }

    /// Removes the temporary file.
    func abandon() {
        try? handle.close()
        unlink(temporaryPath)
    }
}

/// Flushes a directory entry change (a rename, an unlink) to disk, where the system allows it.
func syncDirectory(of path: String) {
    let directory = (path as NSString).deletingLastPathComponent
    let descriptor = open(directory.isEmpty ? "." : directory, O_RDONLY)
    guard descriptor >= 0 else { return }
    fsync(descriptor)
    close(descriptor)
}

extension BundleError: InvalidInputError {}

/// A damaged or foreign file met in a merge, named by its path (`syncctl merge`'s bundles): a
/// merge reports it as a `ConcordError` of code `invalidInput`, its `cause`.
package struct FileInputError: InvalidInputError, Hashable {
    package var path: String
    package var reason: String

    package init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    package var description: String { "\(path): \(reason)" }
}
