import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The commit bell (SPEC.md §9, "The commit bell"): once a writer's transaction has committed, and
/// while it still holds its turn, it adds one to the counter in bytes 8–15 of the side file
/// `STORE-lock`. Observers in any process watch that file (`CommitBell.Watch`), so they hear of a
/// commit as it lands without opening the store's own files outside SQLite.
enum CommitBell {
    /// Where the counter is in the side file, and the side file's size once it has rung.
    static let offset: off_t = 8
    static let fileBytes: off_t = 16

    /// Adds one to the counter (little-endian; a side file too short to hold it counts as 0).
    /// The writer holds its turn, so no other writer of this build rings meanwhile.
    static func ring(_ descriptor: Int32) {
        var stored: UInt64 = 0
        let read = withUnsafeMutableBytes(of: &stored) { pread(descriptor, $0.baseAddress, 8, offset) }
        var next = (read == 8 ? UInt64(littleEndian: stored) : 0) &+ 1
        next = next.littleEndian
        _ = withUnsafeBytes(of: &next) { pwrite(descriptor, $0.baseAddress, 8, offset) }
    }

    /// Calls `wake` on `queue` soon after the bell of the store at `path` rings, whoever rings it:
    /// through inotify on Linux, a file-system object source on Apple platforms. There is none
    /// (`init` returns nil) where the platform has neither, or the side file can be neither opened
    /// nor made; an observer then relies on polling.
    final class Watch {
        private let source: any DispatchSourceProtocol

        init?(store path: String, queue: DispatchQueue, wake: @escaping @Sendable () -> Void) {
            let turns = WriterTurns(store: path)
            guard turns.ensureSideFile() else { return nil }
            #if os(Linux)
            let events = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            guard events >= 0 else { return nil }
            guard inotify_add_watch(events, turns.path, UInt32(IN_MODIFY)) >= 0 else {
                close(events)
                return nil
            }
            let source = DispatchSource.makeReadSource(fileDescriptor: events, queue: queue)
            source.setEventHandler {
                // Drain the events (their content does not matter), then wake once.
                var buffer = [UInt8](repeating: 0, count: 4096)
                while buffer.withUnsafeMutableBytes({ read(events, $0.baseAddress, $0.count) }) > 0 {}
                wake()
            }
            source.setCancelHandler { close(events) }
            #elseif canImport(Darwin)
            let descriptor = open(turns.path, O_EVTONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return nil }
            let source = DispatchSource.makeFileSystemObjectSource(fileDescriptor: descriptor, eventMask: .write, queue: queue)
            source.setEventHandler { wake() }
            source.setCancelHandler { close(descriptor) }
            #else
            return nil
            #endif
            source.resume()
            self.source = source
        }

        /// Stops watching; `wake` is not called after this returns and the queue has drained.
        func cancel() {
            source.cancel()
        }

        deinit { source.cancel() }
    }
}
