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

    /// Watches the bell of the store at `path`: `wake` is called on `queue` soon after it rings,
    /// whoever rings it. Nil where the side file can be neither opened nor made, or the platform
    /// cannot watch it (an observer then relies on polling).
    static func watch(store path: String, queue: DispatchQueue, wake: @escaping @Sendable () -> Void) -> FileWatch? {
        let turns = WriterTurns(store: path)
        guard turns.ensureSideFile() else { return nil }
        return FileWatch(file: turns.path, queue: queue, wake: wake)
    }

    /// Watches the side file at `path` (`WriterTurns.path`) as it is now, without making it: nil
    /// where there is none, or it is not one.
    static func watch(sideFile path: String, queue: DispatchQueue, wake: @escaping @Sendable () -> Void) -> FileWatch? {
        guard WriterTurns.isSideFile(at: path) else { return nil }
        return FileWatch(file: path, queue: queue, wake: wake)
    }
}
