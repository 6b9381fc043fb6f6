import ConcordStore
import Foundation
import Logging

/// A shared folder watched (`FolderSync.watch(every:logger:)`): an asynchronous sequence of what
/// happens, one sync at a time, for as long as the task that iterates it runs.
///
/// It takes a cheap look at both sides (the folder's listing and the store's version vector), and
/// syncs when either changed since the last sync, whenever something may have changed: a file
/// added, renamed or removed in the folder (the platform's notifications, `FileWatch`), a commit
/// to the store by any process (`ConcordStore.changes()`), and every `interval` regardless, for
/// file systems whose notifications do not arrive (network ones). A burst of wake-ups costs one
/// look. It yields each sync that
/// moved something or warned, each that failed (the next look tries again), and, as its last
/// event, a store that another process made another replica, or a store file replaced by another
/// (each look checks the file first). Cancelling the iterating task ends it: the sync under way
/// finishes first, so the store and the folder stay consistent.
///
/// ```swift
/// let watching = Task {
///     for await event in FolderSync(store: store, folder: shared).watch(every: .seconds(2)) {
///         if case .synced(let report) = event { print(report.summary) }
///     }
/// }
/// …
/// watching.cancel()
/// ```
///
/// After each look it compacts the store by itself, on a queue of its own, when its schedule
/// says a compaction is due (`CompactionSchedule`).
///
/// It logs to `logger` (by default nowhere): each sync that moved something at `info` (its
/// `summary`), each file skipped and each failed sync at `warning`, each sync that found nothing
/// to do at `debug`, a store forked or replaced at `notice`; a warning or an error worded by
/// `describeError`.
/// The syncs, which block while they read and write, run on the store's queue for async calls
/// (as `try await store.reminders()` does), not on the threads that the process's tasks share:
/// the store's other async calls wait for a sync under way, as they would for its connection.
public struct FolderWatch: AsyncSequence, Sendable {
    /// Each sync's outcome.
    public typealias Element = FolderWatchEvent

    let sync: FolderSync
    let interval: Duration
    /// Asked after each look; nil: the watch never compacts.
    let compaction: BackgroundCompaction?
    let logger: Logger
    let describeError: @Sendable (ConcordError) -> String

    /// An iterator that looks at the folder every interval and syncs when the store or the
    /// folder changed, until its task is cancelled.
    public func makeAsyncIterator() -> Iterator {
        Iterator(watch: self)
    }

    /// Runs the looks and syncs of a watch: each `next()` looks at once the first time, then at
    /// each wake-up, until a sync has something to report.
    public struct Iterator: AsyncIteratorProtocol {
        private let watch: FolderWatch
        /// The change token seen before the last sync; nil forces a sync.
        private var lastState: String?
        private var looked = false
        private var ended = false
        /// What wakes the watch, from its first look on.
        private var wakes: FolderWakes?

        init(watch: FolderWatch) {
            self.watch = watch
        }

        /// The next sync that moved something, warned or failed, or the store's fork or
        /// replacement; `nil` once the task is cancelled or after either.
        public mutating func next() async -> FolderWatchEvent? {
            while !ended {
                if looked {
                    if wakes == nil { wakes = FolderWakes(watch.sync, every: watch.interval) }
                    // The folder's own directory appears with the first sync: watched from then,
                    // and watched anew whenever its path names another.
                    wakes!.watchFolder()
                    guard await wakes!.next() else { return nil }  // cancelled
                }
                looked = true
                guard !Task.isCancelled else { return nil }
                let (sync, logger, describe, seen) = (watch.sync, watch.logger, watch.describeError, lastState)
                // On the store's queue for async calls, as any other blocking call of an async
                // caller: never on the threads the process's tasks share (a sync reads and
                // writes files and the store for as long as it takes).
                let look = await sync.store.offload { Self.look(sync, logger, describe, seen) }
                lastState = look.state
                ended = look.ends
                if !ended { watch.compaction?.poke() }
                if let event = look.event { return event }
            }
            return nil
        }

        /// What one look saw and did.
        private struct Look {
            var event: FolderWatchEvent?
            /// The change token to compare the next look with.
            var state: String?
            var ends = false
        }

        /// One look, and a sync when something changed since `lastState`.
        private static func look(
            _ sync: FolderSync, _ logger: Logger, _ describe: (ConcordError) -> String, _ lastState: String?
        ) -> Look {
            do {
                // The store file first: a sync would write into a file no other process finds at
                // the store's path any more, and its state would be of that file.
                try sync.store.ensureSameFile()
                let state = try sync.changeToken()
                guard state != lastState else { return Look(state: lastState) }
                // Remember the state seen *before* the sync: a change that lands while it runs (or
                // as it ends) then differs from it and is synced next time. The sync's own writes
                // cost one more sync that finds nothing to do.
                let started = ContinuousClock.now
                let report = try sync.sync()
                let metadata: Logger.Metadata = [
                    "folder": "\(sync.folder)", "operations_imported": "\(report.importedOperations)",
                    "files_imported": "\(report.importedFiles)", "operations_published": "\(report.publishedOperations)",
                    "seconds": "\(String(format: "%.3f", (ContinuousClock.now - started) / .seconds(1)))",
                ]
                for warning in report.warnings { logger.warning("\(describe(warning))", metadata: ["folder": "\(sync.folder)"]) }
                if report.movedSomething {
                    logger.info("\(report.summary)", metadata: metadata)
                } else {
                    logger.debug("\(report.summary)", metadata: metadata)
                }
                return Look(event: report.movedSomething || !report.warnings.isEmpty ? .synced(report) : nil, state: state)
            } catch let error as ConcordError where error.code == .forked {
                // No retry can go on under the old id: the watch ends, and the caller opens the
                // store again.
                logger.notice("\(describe(error))", metadata: ["folder": "\(sync.folder)"])
                return Look(event: .forked(error), state: nil, ends: true)
            } catch let error as ConcordError where error.code == .closed && sync.store.isClosed {
                // The store object was closed under the watch: nothing is left to sync.
                logger.notice("\(describe(error))", metadata: ["folder": "\(sync.folder)"])
                return Look(event: nil, state: nil, ends: true)
            } catch let error as ConcordError where error.code == .replaced {
                // Nor in a file no other process finds: the watch ends, and the caller decides.
                logger.notice("\(describe(error))", metadata: ["folder": "\(sync.folder)"])
                return Look(event: .replaced(error), state: nil, ends: true)
            } catch {
                let error = error as? ConcordError ?? ConcordError(.io, "\(error)", cause: error)
                logger.warning("\(describe(error)); retrying", metadata: ["folder": "\(sync.folder)"])
                return Look(event: .failed(error), state: nil)
            }
        }
    }
}

/// What wakes a folder watch: the folder's notifications, the store's commits, and a poll. Each
/// wake-up is kept until the watch takes it, and several count as one. Everything stops when the
/// watch's iterator is dropped.
final class FolderWakes: Sendable {
    private let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    private let queue = DispatchQueue(label: "concord.folder-watch")
    /// The layout's directory, `<folder>/concord-v1`, and the folder that holds it.
    private let directory: String
    private let folder: String
    private let sources: LockedState<Sources>

    private struct Sources {
        /// The layout's directory: its entries.
        var directory: FileWatch?
        /// The folder: its entry `concord-v1` made, moved in or out, or removed.
        var folder: FileWatch?
        var poll: (any DispatchSourceTimer)?
        var commits: Task<Void, Never>?
    }

    init(_ sync: FolderSync, every interval: Duration) {
        (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        directory = sync.directory
        folder = sync.folder
        let continuation = continuation
        // A timer on the watch's own queue, not a sleeping task: the poll is what retries a
        // folder that is not there yet, and it must come even while the process's tasks are all
        // busy (a full test run starved a sleeping task for minutes).
        let poll = DispatchSource.makeTimerSource(queue: queue)
        let (seconds, attoseconds) = interval.components
        let every = DispatchTimeInterval.nanoseconds(max(1_000_000, Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)))
        poll.schedule(deadline: .now() + every, repeating: every)
        poll.setEventHandler { continuation.yield() }
        poll.resume()
        let commits = Task {
            // The stream ends when the watch stops. It fails when the store's file was replaced,
            // which the next look finds and says at once; or when the store cannot be followed,
            // and the poll then stands in for the commits.
            do {
                for try await _ in sync.store.changes() { continuation.yield() }
            } catch {
                continuation.yield()
            }
        }
        sources = LockedState(Sources(poll: poll, commits: commits))
    }

    /// Watches the layout's directory, and the folder for that directory to appear, each anew
    /// whenever its path no longer names what is watched (SPEC.md §14, "Watching"): the directory
    /// moved away, deleted and made again, or a restored copy put in its place; a file system
    /// unmounted or mounted again. Called before each wait, so checked at every wake-up and poll.
    /// A watch that begins wakes the watch once, for what changed before it began.
    func watchFolder() {
        sources.withLock { sources in
            let continuation = continuation
            var began = false
            if sources.directory?.isCurrent != true {
                sources.directory?.cancel()
                sources.directory = FileWatch(directory: directory, queue: queue) { continuation.yield() }
                began = began || sources.directory != nil
            }
            if sources.folder?.isCurrent != true {
                sources.folder?.cancel()
                let name = (directory as NSString).lastPathComponent
                sources.folder = FileWatch(entry: name, in: folder, queue: queue) { continuation.yield() }
                began = began || sources.folder != nil
            }
            if began { continuation.yield() }
        }
    }

    /// Waits for the next wake-up; false once the waiting task is cancelled.
    func next() async -> Bool {
        var iterator = stream.makeAsyncIterator()
        return await iterator.next() != nil && !Task.isCancelled
    }

    deinit {
        sources.withLock { sources in
            sources.directory?.cancel()
            sources.folder?.cancel()
            sources.poll?.cancel()
            sources.commits?.cancel()
        }
        continuation.finish()
    }
}

/// What a watched folder reports (`FolderWatch`).
public enum FolderWatchEvent: Hashable, Sendable {
    /// A sync that moved operations, or warned about a file it skipped.
    case synced(FolderSyncReport)
    /// A sync that failed (the folder vanished, the disk is full), with its error; the next look
    /// tries again.
    case failed(ConcordError)
    /// Another process made the store another replica (`ConcordStore.fork(at:)`, SPEC.md §9.1),
    /// with the error of code `forked` that says so: the watch has ended, since nothing may go on
    /// under the old id. Open the store again, and watch anew.
    case forked(ConcordError)
    /// The store's path names another file than the one the store object opened, or none (it was
    /// wiped and created again, a backup restored over it, or moved away; SPEC.md §9.1), with the
    /// error of code `replaced` that says so: the watch has ended, since its syncs would go into a
    /// file no other process finds at the path. Open the store at the path again if it is the one
    /// to keep in step, and watch anew.
    case replaced(ConcordError)
}
