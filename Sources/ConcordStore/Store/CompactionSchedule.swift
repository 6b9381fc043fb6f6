import ConcordCore
import Foundation
import GRDB
import Logging

/// When a long-lived sync (a folder watch, a server, a live session) compacts its store by itself
/// (SPEC.md §5.8, "Compacting by itself"): once the log has grown enough since the last
/// compaction, or once a day if it grew at all.
public struct CompactionSchedule: Hashable, Sendable {
    /// The history each compaction keeps.
    public var keeping: KeptHistory
    /// A compaction is due once this many operations were logged since the last one, or a
    /// quarter of the operations held then, whichever is more.
    public var afterOperations: Int
    /// A compaction is due once this long has passed since the last one, if anything was logged
    /// since.
    public var atLeastEvery: Duration

    /// - Parameters:
    ///   - keeping: the history kept, by default the writes of the last 30 days.
    ///   - afterOperations: by default 10,000.
    ///   - atLeastEvery: by default a day.
    public init(keeping: KeptHistory = .thirtyDays, afterOperations: Int = 10_000, atLeastEvery: Duration = .seconds(86_400)) {
        self.keeping = keeping
        self.afterOperations = afterOperations
        self.atLeastEvery = atLeastEvery
    }
}

extension ConcordStore {
    /// Compacts the store (`compact(keeping:)`) if `schedule` says a compaction is due; nil if
    /// not. What was held at the last compaction, and when, is in the store (`meta`), so every
    /// process of a replica, and `syncctl compact`, keeps one schedule.
    @discardableResult
    public func compactIfDue(_ schedule: CompactionSchedule) throws(ConcordError) -> CompactionReport? {
        let (held, last) = try guarded { try read { db in (try Self.seqsHeld(db), try Self.lastCompaction(db)) } }
        let grown = held - (last?.held ?? 0)
        let byGrowth = grown >= max(Int64(schedule.afterOperations), (last?.held ?? 0) / 4)
        let byAge = grown > 0 && environment.wallClock() >= (last?.millis ?? 0) &+ UInt64(max(0, schedule.atLeastEvery.seconds * 1000))
        guard byGrowth || byAge else { return nil }
        return try compact(keeping: schedule.keeping)
    }

    /// How many seqs the store holds below no gap: the sum of its version vector's entries.
    static func seqsHeld(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT coalesce(sum(contiguous), 0) FROM replicas") ?? 0
    }

    /// What the store held at its last compaction that was not deferred, and when; nil if it never
    /// compacted.
    static func lastCompaction(_ db: Database) throws -> (held: Int64, millis: UInt64)? {
        guard let held = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'compaction_held'"),
            let millis = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'compaction_millis'")
        else { return nil }
        return (held, UInt64(bitPattern: millis))
    }
}

/// Compacts a store by itself (`compactIfDue`) whenever asked, on a queue of its own, one
/// compaction at a time: a long-lived sync asks after each look or sync, and goes on at once.
/// Each of the compaction's transactions takes its turn at the store's writer like any other
/// write, so the sync's own writes, and other processes', wait for one transaction at most
/// (SPEC.md §5.8, "Compacting by itself").
package final class BackgroundCompaction: Sendable {
    private let store: ConcordStore
    private let schedule: CompactionSchedule
    private let logger: Logger
    private let queue = DispatchQueue(label: "concord.compaction")
    /// Whether a look (and its compaction) is under way, and when the next may begin: a look
    /// reads the store, so a caller that asks often (each event of a live session) looks at
    /// most once a second; and after compactions that failed in a row, later and later
    /// (`retryDelay`), so that a store whose compaction keeps failing (a damaged log row) is not
    /// read whole, and the failure logged, every second for as long as the sync runs.
    private let looks = LockedState<(running: Bool, notBefore: ContinuousClock.Instant?, failures: Int)>((false, nil, 0))

    package init(_ store: ConcordStore, schedule: CompactionSchedule, logger: Logger) {
        self.store = store
        self.schedule = schedule
        self.logger = logger
    }

    /// How long after its `failures`-th failure in a row a compaction is tried again: a minute,
    /// doubling up to an hour (SPEC.md §5.8, "Compacting by itself").
    package static func retryDelay(afterFailures failures: Int) -> Duration {
        .seconds(min(60 << min(max(failures - 1, 0), 6), 3600))
    }

    /// Starts a compaction if one is due and none is under way; returns at once.
    package func poke() {
        let now = ContinuousClock.now
        guard looks.withLock({ looks in
            guard !looks.running, looks.notBefore.map({ now >= $0 }) ?? true else { return false }
            looks.running = true
            looks.notBefore = now + .seconds(1)
            return true
        }) else { return }
        // A task, whose blocking work runs on the compaction's own queue (`offload`), as every
        // async caller of the store's synchronous calls does.
        Task { [self, store, schedule, queue] in
            var failed = false
            defer {
                looks.withLock { looks in
                    looks.running = false
                    looks.failures = failed ? looks.failures + 1 : 0
                    if failed { looks.notBefore = ContinuousClock.now + Self.retryDelay(afterFailures: looks.failures) }
                }
            }
            let started = ContinuousClock.now
            do throws(ConcordError) {
                guard let report = try await ConcordStore.offload(on: queue, { () throws(ConcordError) in try store.compactIfDue(schedule) })
                else { return }
                let metadata: Logger.Metadata = [
                    "operations_dropped": "\(report.droppedOperations)", "records": "\(report.records)",
                    "seconds": "\(String(format: "%.3f", (ContinuousClock.now - started).seconds))",
                ]
                if report.deferred {
                    logger.debug("compaction deferred: another process's merge is under way", metadata: metadata)
                } else if report.droppedOperations > 0 {
                    logger.info("compacted: dropped \(report.droppedOperations) operations of \(report.records) records", metadata: metadata)
                } else {
                    logger.debug("compacted: dropped 0 operations of \(report.records) records", metadata: metadata)
                }
            } catch where [.forked, .replaced, .copied, .closed].contains(error.code) {
                // The store object serves no more, or not writes: the sync that owns it says so,
                // and opens the store again (with a compaction of its own) if it goes on.
                logger.debug("compaction stopped: \(error.message)")
            } catch {
                failed = true
                logger.warning("compaction failed: \(error.message); it is tried again later")
            }
        }
    }
}
