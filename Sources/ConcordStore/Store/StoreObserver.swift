import ConcordCore
import Dispatch
import Foundation
import GRDB

/// Finds what happens to a store file, for `ConcordStore.events()` and `changes()` (SPEC.md §7.1,
/// "Observing changes"): the changes committed to it by this store object or any other connection
/// or process, another process's fork of it, and its replacement by another file.
///
/// It keeps the operations it has reported (`reported`). When it is woken (the commit bell rang,
/// this store object committed, or the safety poll came), it first checks that the store's path
/// still names the file the store object opened; then, if `PRAGMA data_version` moved, it reads,
/// through a read-only connection of its own that never waits for a writer, the store's replica
/// id (whose operations are `local`) and the log rows that may hold operations it has not
/// reported: for each author, only the rows from its first unreported seq on (an index range,
/// never the whole log). Their records make one change. Rows that a merge has logged and not yet
/// applied to their records (`pending_merge`) are left for later, and reported once the merge has
/// applied them.
final class StoreObserver: Sendable {
    /// Where the observer reads, and where its bell and its poll wake it: one at a time, in order,
    /// on a queue of its own, since a read may wait for the disk and must not hold one of the
    /// threads that the process's tasks share.
    private let queue = DispatchQueue(label: "concord.observe")
    /// The store's path, and the file the store object opened there (nil in memory): once the
    /// path names another, or none, the observer reports it and stops.
    private let path: String
    private let openedFile: FileNode?
    /// The side file whose bell the observer watches (nil in memory).
    private let bellPath: String?
    private let reader: any DatabaseReader
    private let closesReader: Bool
    private let deliver: @Sendable (StoreEvent) -> Void
    private let state: LockedState<State>

    private struct State {
        /// The operations reported so far, by author.
        var reported: SeqRanges
        /// `PRAGMA data_version` at the last look.
        var dataVersion: Int
        /// The store's replica id at the last look: its operations are `local`.
        var replica: ReplicaID
        var watch: FileWatch?
        var poll: (any DispatchSourceTimer)?
        var stopped = false
    }

    /// How often the observer looks without being woken: a safety net for writers that ring no
    /// bell, and the only way where the platform cannot watch the bell.
    static let pollWithBell = DispatchTimeInterval.seconds(1)
    static let pollWithoutBell = DispatchTimeInterval.milliseconds(100)

    /// Starts observing `store` from what it holds now, or from `since`: what is committed from
    /// there on is reported (what is newer than `since` at once), and operations logged but not
    /// yet applied once they are.
    /// - Parameter pollEvery: how often to look without being woken; by default `pollWithBell`,
    ///   or `pollWithoutBell` where the bell cannot be watched (a test sets it, to tell a wake-up
    ///   from a poll).
    init(
        _ store: ConcordStore, since: VersionVector? = nil, pollEvery: DispatchTimeInterval? = nil,
        deliver: @escaping @Sendable (StoreEvent) -> Void
    ) throws {
        path = store.path
        openedFile = store.openedFile
        self.deliver = deliver
        if store.path == ":memory:" {
            (reader, closesReader, bellPath) = (store.connection, false, nil)
        } else {
            (reader, closesReader) = (try DatabaseQueue(path: store.path, configuration: ConcordStore.configuration(readOnly: true)), true)
            bellPath = WriterTurns(store: store.path).path
        }
        let (reported, dataVersion, current) = try reader.read { db in
            // What the log holds now: up to the vector, and above its gaps; or what `since`
            // covers. Less what waits to be applied.
            var reported = SeqRanges(upTo: try since ?? ReplicaDirectory(db).versionVector)
            if since == nil {
                for (author, ranges) in try ConcordStore.heldAboveGaps(db) {
                    for range in ranges { reported.insert(range, of: author) }
                }
            }
            for row in try Self.pendingRows(db) { reported.remove(row.seqs, of: row.author) }
            return (reported, try Self.dataVersion(db), try Self.replicaID(db))
        }
        // The id the store object opened the store as: a fork since then is reported at the
        // first look, which then comes at once.
        state = LockedState(State(reported: reported, dataVersion: dataVersion, replica: store.replicaID))
        let watch = store.path == ":memory:" ? nil : CommitBell.watch(store: store.path, queue: queue) { [weak self] in self?.look(force: false) }
        let poll = DispatchSource.makeTimerSource(queue: queue)
        let interval = pollEvery ?? (watch == nil ? Self.pollWithoutBell : Self.pollWithBell)
        poll.schedule(deadline: .now() + interval, repeating: interval)
        poll.setEventHandler { [weak self] in self?.look(force: false) }
        poll.resume()
        state.withLock { state in
            state.watch = watch
            state.poll = poll
        }
        if since != nil || current != store.replicaID { wake() }
    }

    /// The change since `vector`: the records of the operations `store` holds and `vector` does
    /// not cover, outside rows still pending; nil if there are none.
    static func change(since vector: VersionVector, in store: ConcordStore) throws -> StoreChange? {
        try store.read { db in
            var reported = SeqRanges(upTo: vector)
            return try unreported(in: db, &reported, localReplica: try replicaID(db))
        }
    }

    /// This store object has committed: look now.
    func wake() {
        queue.async { self.look(force: true) }
    }

    /// Stops watching and polling; nothing is delivered once the queue has drained, and the
    /// observer's connection closes then. Never waits: it is called on the observer's own queue.
    func stop() {
        halt()
        queue.async { [self] in closeReader() }
    }

    /// Stops, and closes the observer's connection before it returns: its store object is
    /// closing, and the writing connection must be the store's last to close, to checkpoint the
    /// WAL into the file (`ConcordStore.close()`). Not on the observer's queue.
    func close() {
        halt()
        queue.sync { closeReader() }
    }

    private func halt() {
        state.withLock { state in
            state.stopped = true
            state.watch?.cancel()
            state.poll?.cancel()
            state.watch = nil
            state.poll = nil
        }
    }

    private func closeReader() {
        if closesReader, let queue = reader as? DatabaseQueue { try? queue.close() }
    }

    /// Reports what happened since the last look: the store file replaced, or a fork and what was
    /// committed (without `force`, only when `PRAGMA data_version` says that another connection
    /// has committed). On `queue`.
    private func look(force: Bool) {
        guard let (reported, replica) = state.withLock({ $0.stopped ? nil : ($0.reported, $0.replica) }) else { return }
        // The path first, at every look: the file now at the path rings no bell this observer
        // hears and moves no `data_version` its connection reads (SPEC.md §9.1).
        if let openedFile, FileNode(at: path) != openedFile {
            stop()
            deliver(.replaced(ConcordStore.replacedError(path)))
            return
        }
        watchBellAgainIfReplaced()
        let found: (change: StoreChange?, reported: SeqRanges, dataVersion: Int, replica: ReplicaID)?
        do {
            found = try reader.read { db in
                let dataVersion = try Self.dataVersion(db)
                guard force || dataVersion != state.withLock({ $0.dataVersion }) else { return nil }
                // `local` is what the store's replica id wrote, as the file says now, read in the
                // same transaction as the log (SPEC.md §7.1): after a fork, the former id's
                // operations are another replica's.
                let current = try Self.replicaID(db)
                var reported = reported
                let change = try Self.unreported(in: db, &reported, localReplica: current)
                return (change, reported, dataVersion, current)
            }
        } catch {
            // The store cannot be read now (it is being replaced, say): look again at the next wake-up.
            return
        }
        guard let found else { return }
        state.withLock { state in
            state.reported = found.reported
            state.dataVersion = found.dataVersion
            state.replica = found.replica
        }
        if found.replica != replica { deliver(.forked(replica: found.replica, former: replica)) }
        if let change = found.change { deliver(.changed(change)) }
    }

    /// Watches the bell anew when its side file is another than the one watched, or was not
    /// there: writers open it by its path for each turn, so once it is removed or replaced they
    /// ring another (SPEC.md §9, "The commit bell"). A side file that is not there is not made
    /// here, as it is when observing begins: its store may have been wiped, and the poll looks
    /// meanwhile. On `queue`, at every look.
    private func watchBellAgainIfReplaced() {
        guard let bellPath else { return }
        state.withLock { state in
            guard !state.stopped, state.watch?.isCurrent != true else { return }
            state.watch?.cancel()
            state.watch = CommitBell.watch(sideFile: bellPath, queue: queue) { [weak self] in self?.look(force: false) }
        }
    }

    /// The records of the operations the log holds and `reported` lacks, outside rows still
    /// pending; adds them to `reported`.
    private static func unreported(in db: Database, _ reported: inout SeqRanges, localReplica: ReplicaID) throws -> StoreChange? {
        let directory = try ReplicaDirectory(db)
        let pending = Set(try pendingRows(db).map { PendingKey(author: $0.author, firstSeq: $0.seqs.lowerBound) })
        var records: Set<RecordRef> = []
        var local = false
        var merged = false
        for (author, held) in directory.versionVector.sorted where held > 0 {
            // The first operation of `author` not reported; rows from the one that holds it on.
            let first = (reported.ranges(of: author).first.map { $0.lowerBound == 1 ? $0.upperBound + 1 : 1 }) ?? 1
            guard let index = directory.indexByID[author] else { continue }
            let rows = try Row.fetchCursor(db, sql: """
                SELECT first_seq, last_seq, ops FROM log
                WHERE replica = ?1 AND first_seq >= coalesce(
                    (SELECT first_seq FROM log WHERE replica = ?1 AND first_seq <= ?2 ORDER BY first_seq DESC LIMIT 1), 0)
                ORDER BY first_seq
                """, arguments: [index, Int64(clamping: first)])
            while let row = try rows.next() {
                let firstSeq = UInt64(bitPattern: try row.column(0) as Int64)
                let lastSeq = UInt64(bitPattern: try row.column(1) as Int64)
                let seqs = firstSeq...Swift.max(firstSeq, lastSeq)
                // Pending rows wait; rows reported whole are not decoded again.
                guard !pending.contains(PendingKey(author: author, firstSeq: firstSeq)),
                      reported.count(of: author, in: seqs) < UInt64(seqs.count)
                else { continue }
                for operation in try ConcordStore.decodeChunk(try row.column(2), author: author, first: firstSeq, last: lastSeq)
                where !reported.contains(operation.id) {
                    reported.insert(operation.id)
                    records.insert(operation.record)
                    if author == localReplica { local = true } else { merged = true }
                }
            }
        }
        guard !records.isEmpty else { return nil }
        var versions = VersionVector()
        for author in reported.replicas {
            if let first = reported.ranges(of: author).first, first.lowerBound == 1 { versions[author] = first.upperBound }
        }
        return StoreChange(origin: local ? (merged ? .mixed : .local) : .merge, records: records, versions: versions)
    }

    private struct PendingKey: Hashable {
        let author: ReplicaID
        let firstSeq: UInt64
    }

    /// The log rows listed in `pending_merge`: their operations are logged and not yet applied.
    private static func pendingRows(_ db: Database) throws -> [(author: ReplicaID, seqs: ClosedRange<UInt64>)] {
        let directory = try ReplicaDirectory(db)
        return try Row.fetchAll(db, sql: """
            SELECT log.replica, log.first_seq, log.last_seq FROM pending_merge
            JOIN log ON log.replica = pending_merge.replica AND log.first_seq = pending_merge.first_seq
            """).map { row in
            let first = UInt64(bitPattern: try row.column(1) as Int64)
            let last = UInt64(bitPattern: try row.column(2) as Int64)
            return (try directory.id(at: try row.column(0)), first...max(first, last))
        }
    }

    /// The store's replica id, as the file says now.
    private static func replicaID(_ db: Database) throws -> ReplicaID {
        guard let data = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'replica_id'"), let id = ReplicaID(bytes: data) else {
            throw ConcordError(.corrupt, "the store has no replica id")
        }
        return id
    }

    private static func dataVersion(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "PRAGMA data_version") ?? 0
    }
}
