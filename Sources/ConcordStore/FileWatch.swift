import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The platform's file-system notifications for one path, behind one small type: inotify on
/// Linux, a file-system object `DispatchSource` on Apple platforms. `wake` is called on `queue`
/// soon after the path changes: a file written (the commit bell, `CommitBell`), or a directory
/// whose entries were added, removed, renamed or closed after writing (a shared folder). There is
/// none (`init` returns nil) where the platform has neither or the path cannot be watched; callers
/// then poll, as they do anyway for file systems whose notifications do not arrive (network ones).
package final class FileWatch {
    private let source: any DispatchSourceProtocol

    /// Watches a file for writes.
    package convenience init?(file path: String, queue: DispatchQueue, wake: @escaping @Sendable () -> Void) {
        #if os(Linux)
        self.init(path, events: UInt32(IN_MODIFY), queue: queue, wake: wake)
        #else
        self.init(path, queue: queue, wake: wake)
        #endif
    }

    /// Watches a directory for entries added, removed or renamed, and files in it written.
    package convenience init?(directory path: String, queue: DispatchQueue, wake: @escaping @Sendable () -> Void) {
        #if os(Linux)
        self.init(path, events: UInt32(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE), queue: queue, wake: wake)
        #else
        self.init(path, queue: queue, wake: wake)
        #endif
    }

    #if os(Linux)
    private init?(_ path: String, events: UInt32, queue: DispatchQueue, wake: @escaping @Sendable () -> Void) {
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        guard inotify_add_watch(descriptor, path, events) >= 0 else {
            close(descriptor)
            return nil
        }
        let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        source.setEventHandler {
            // Drain the events (what they say does not matter), then wake once.
            var buffer = [UInt8](repeating: 0, count: 4096)
            while buffer.withUnsafeMutableBytes({ read(descriptor, $0.baseAddress, $0.count) }) > 0 {}
            wake()
        }
        source.setCancelHandler { close(descriptor) }
        source.resume()
        self.source = source
    }
    #elseif canImport(Darwin)
    private init?(_ path: String, queue: DispatchQueue, wake: @escaping @Sendable () -> Void) {
        let descriptor = open(path, O_EVTONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        let source = DispatchSource.makeFileSystemObjectSource(fileDescriptor: descriptor, eventMask: [.write, .extend, .rename, .delete], queue: queue)
        source.setEventHandler { wake() }
        source.setCancelHandler { close(descriptor) }
        source.resume()
        self.source = source
    }
    #else
    private init?(_ path: String, queue: DispatchQueue, wake: @escaping @Sendable () -> Void) {
        return nil
    }
    #endif

    /// Stops watching; `wake` is not called once `queue` has run what it holds.
    package func cancel() {
        source.cancel()
    }

    deinit { source.cancel() }
}
