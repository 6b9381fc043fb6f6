import Dispatch
import Foundation
import Testing

@testable import ConcordStore

/// The seam over the platform's file notifications (`FileWatch`): a watch follows what its path
/// named when it began, says when the path names another, and a watch of one entry of a directory
/// wakes for that entry only.
@Suite struct FileWatchTests {
    /// Counts the wake-ups of a watch.
    final class Wakes: @unchecked Sendable {
        // @unchecked Sendable: `count` is touched only with `lock` held.
        private let lock = NSLock()
        private var count = 0
        let queue = DispatchQueue(label: "test.file-watch")

        func wake() { lock.withLock { count += 1 } }
        var seen: Int { lock.withLock { count } }

        /// Waits until the watch woke more than `than` times, for `seconds` at most.
        func more(than: Int, within seconds: Double = 10) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if seen > than { return true }
                Thread.sleep(forTimeInterval: 0.005)
            }
            return seen > than
        }

        /// Lets what the queue holds run, then what notifications are under way arrive.
        func settle() {
            Thread.sleep(forTimeInterval: 0.2)
            queue.sync {}
        }
    }

    @Test func aDirectoryMovedAwayWakesItsWatchWhichIsThenNoLongerCurrent() throws {
        let directory = try TemporaryDirectory()
        let watched = try directory.directory("concord-v1")
        let wakes = Wakes()
        let watch = try #require(FileWatch(directory: watched, queue: wakes.queue, wake: wakes.wake))
        defer { watch.cancel() }
        #expect(watch.isCurrent)

        #expect(rename(watched, directory.file("moved-away")) == 0)
        #expect(wakes.more(than: 0), "the directory's own move wakes its watch")
        #expect(!watch.isCurrent, "the path names nothing now")
        _ = try directory.directory("concord-v1")
        #expect(!watch.isCurrent, "the path names another directory")

        // What happens in the new directory is not the watch's.
        wakes.settle()
        let before = wakes.seen
        _ = FileManager.default.createFile(atPath: watched + "/new", contents: Data("x".utf8))
        wakes.settle()
        #expect(wakes.seen == before)
    }

    @Test func aFileReplacedByAnotherWakesItsWatch() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("STORE-lock")
        _ = FileManager.default.createFile(atPath: path, contents: Data(count: 16))
        let wakes = Wakes()
        let watch = try #require(FileWatch(file: path, queue: wakes.queue, wake: wakes.wake))
        defer { watch.cancel() }
        // Held open, as a writer holds a side file during its turn: its unlinking is still heard.
        let held = open(path, O_RDONLY)
        defer { close(held) }
        let other = directory.file("restored")
        _ = FileManager.default.createFile(atPath: other, contents: Data(count: 16))
        #expect(rename(other, path) == 0)
        #expect(wakes.more(than: 0), "the file renamed over wakes the watch of the one it replaced")
        #expect(!watch.isCurrent)
    }

    @Test func aWatchOfAnEntryWakesForThatEntryAlone() throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.directory("Shared")
        let wakes = Wakes()
        let watch = try #require(FileWatch(entry: "concord-v1", in: folder, queue: wakes.queue, wake: wakes.wake))
        defer { watch.cancel() }

        _ = try directory.directory("Shared/other")
        _ = FileManager.default.createFile(atPath: folder + "/concord-v1.tmp", contents: nil)
        wakes.settle()
        #if os(Linux)
        // (Apple platforms' notifications name no entry: any entry wakes the watch there.)
        #expect(wakes.seen == 0, "other entries of the folder do not wake it")
        #endif

        _ = try directory.directory("elsewhere/concord-v1")
        #expect(rename(directory.file("elsewhere/concord-v1"), folder + "/concord-v1") == 0)
        #expect(wakes.more(than: 0), "the entry moved in wakes it")
        wakes.settle()
        let moved = wakes.seen
        #expect(rename(folder + "/concord-v1", folder + "/moved-away") == 0)
        #expect(wakes.more(than: moved), "the entry moved away wakes it")
    }
}
