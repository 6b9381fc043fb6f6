import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which file or directory a path names: its file system's device number and its inode number
/// (symbolic links followed). Another file put at the path (renamed over it, deleted and made
/// again, a backup restored there) or a file system mounted or unmounted there has other numbers;
/// the file itself, renamed, keeps its own.
package struct FileNode: Hashable, Sendable {
    package let device: UInt64
    package let inode: UInt64

    /// What `path` names now; nil if nothing (or it cannot be looked at).
    package init?(at path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        self.init(status)
    }

    fileprivate init(_ status: stat) {
        device = UInt64(truncatingIfNeeded: status.st_dev)
        inode = UInt64(truncatingIfNeeded: status.st_ino)
    }
}

/// The platform's file-system notifications for one path, behind one small type: inotify on
/// Linux, a file-system object `DispatchSource` on Apple platforms. `wake` is called on `queue`
/// soon after the path changes: a file written (the commit bell, `CommitBell`), a directory
/// whose entries were added, removed, renamed or closed after writing (a shared folder), or one
/// entry of a directory added, removed or renamed (a shared folder's `concord-v1`). There is none
/// (`init` returns nil) where the platform has neither or the path cannot be watched; callers
/// then poll, as they do anyway for file systems whose notifications do not arrive (network ones).
///
/// A watch follows the file or directory the path named when it began, not the path: once that
/// is renamed away, deleted, or replaced by another, or a file system is mounted or unmounted
/// there, it hears nothing more of what the path names. It wakes as that happens, where the
/// platform says so, and `isCurrent` is then false: its owner makes a new one (checking at each
/// wake-up and each poll also catches what no notification reports, such as a mount).
package final class FileWatch {
    private let source: any DispatchSourceProtocol
    /// The path watched.
    package let path: String
    /// What it named when the watch began.
    private let node: FileNode

    /// Whether the path still names what this watch watches.
    package var isCurrent: Bool { FileNode(at: path) == node }

    /// Watches a file for writes, and for its own deletion, renaming or replacement.
    package convenience init?(file path: String, queue: DispatchQueue, wake: @escaping @Sendable () -> Void) {
        #if os(Linux)
        // Unlinking a file changes its link count (IN_ATTRIB): its deletion itself (IN_DELETE_SELF)
        // waits until no process holds it open, and writers of other processes may.
        self.init(path, events: UInt32(IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF), queue: queue, wake: wake)
        #elseif canImport(Darwin)
        self.init(path, events: [.write, .extend, .attrib, .link, .rename, .delete, .revoke], queue: queue, wake: wake)
        #else
        return nil
        #endif
    }

    /// Watches a directory for entries added, removed or renamed, files in it written, and its own
    /// deletion, renaming or replacement.
    package convenience init?(directory path: String, queue: DispatchQueue, wake: @escaping @Sendable () -> Void) {
        #if os(Linux)
        self.init(
            path, events: UInt32(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR),
            queue: queue, wake: wake)
        #elseif canImport(Darwin)
        self.init(path, events: [.write, .extend, .rename, .delete, .revoke], queue: queue, wake: wake)
        #else
        return nil
        #endif
    }

    /// Watches the entry `name` of the directory at `path`: made, removed, or renamed to or from
    /// that name; and the directory's own deletion, renaming or replacement. (On Apple platforms,
    /// whose notifications name no entry, any entry of the directory wakes it.)
    package convenience init?(entry name: String, in path: String, queue: DispatchQueue, wake: @escaping @Sendable () -> Void) {
        #if os(Linux)
        self.init(
            path, events: UInt32(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR),
            entry: name, queue: queue, wake: wake)
        #elseif canImport(Darwin)
        self.init(path, events: [.write, .rename, .delete, .revoke], queue: queue, wake: wake)
        #else
        return nil
        #endif
    }

    #if os(Linux)
    /// - Parameter entry: wake only for events of this entry of the watched directory, or of the
    ///   directory itself; nil: for every event.
    private init?(_ path: String, events: UInt32, entry: String? = nil, queue: DispatchQueue, wake: @escaping @Sendable () -> Void) {
        // What the path names, taken before the watch is added: if the path is replaced in
        // between, the watch is on the new one and `isCurrent` false, which only costs a
        // new watch; taken after, a replacement in between would leave this one deaf unnoticed.
        guard let node = FileNode(at: path) else { return nil }
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        guard inotify_add_watch(descriptor, path, events) >= 0 else {
            close(descriptor)
            return nil
        }
        let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        let wanted = entry.map { Array($0.utf8) }
        source.setEventHandler {
            // Drain the events, then wake once if any of them matters.
            var matters = false
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                guard count > 0 else { break }
                matters = matters || wanted == nil || Self.names(wanted!, in: buffer[..<count])
            }
            if matters { wake() }
        }
        source.setCancelHandler { close(descriptor) }
        source.resume()
        self.source = source
        self.path = path
        self.node = node
    }

    /// Whether one of the inotify events in `events` names `entry`, or is about the watched
    /// directory itself (deleted, moved, unmounted, the watch removed) or a lost queue.
    private static func names(_ entry: [UInt8], in events: ArraySlice<UInt8>) -> Bool {
        let header = MemoryLayout<inotify_event>.size
        let itself = UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED | IN_Q_OVERFLOW)
        var offset = events.startIndex
        while offset + header <= events.endIndex {
            let event = events.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset - events.startIndex, as: inotify_event.self) }
            let nameStart = offset + header
            let nameEnd = min(events.endIndex, nameStart + Int(event.len))
            // The name is NUL-padded to its length.
            let name = events[nameStart..<nameEnd].prefix { $0 != 0 }
            if event.mask & itself != 0 || name.elementsEqual(entry) { return true }
            offset = nameEnd
        }
        return false
    }
    #elseif canImport(Darwin)
    private init?(_ path: String, events: DispatchSource.FileSystemEvent, queue: DispatchQueue, wake: @escaping @Sendable () -> Void) {
        let descriptor = open(path, O_EVTONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        // What the descriptor watches, exactly.
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            close(descriptor)
            return nil
        }
        let node = FileNode(status)
        let source = DispatchSource.makeFileSystemObjectSource(fileDescriptor: descriptor, eventMask: events, queue: queue)
        source.setEventHandler { wake() }
        source.setCancelHandler { close(descriptor) }
        source.resume()
        self.source = source
        self.path = path
        self.node = node
    }
    #endif

    /// Stops watching; `wake` is not called once `queue` has run what it holds.
    package func cancel() {
        source.cancel()
    }

    deinit { source.cancel() }
}
