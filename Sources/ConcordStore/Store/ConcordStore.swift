import ConcordCore
import Foundation
import GRDB

/// One replica kept durably in one SQLite file (WAL mode).
///
/// A local change writes its operations and the materialized state in one transaction; a merge
/// applies other replicas' operations the same way. Reads are plain queries over the
/// materialized tables. All methods are synchronous and safe to call from any thread; a store
/// object writes through one connection, one write after the other, and reads through a pool of
/// read-only ones that never wait for a write; several processes may open the same store at once
/// (readers never wait, writers wait for each other).
public final class ConcordStore: Sendable {
    /// The store's file, or `:memory:`.
    public let path: String
    /// This replica's id, made once when the store was created.
    public let replicaID: ReplicaID
    /// The store's writing connection: writes go through `write(_:)`, which waits for this
    /// writer's turn first (`WriterTurns`); a merge reads through it what it is about to write.
    let connection: any DatabaseWriter
    /// The read-only connections that `read(_:)` uses, so that a read never waits behind a write
    /// or a merge of this object (WAL readers see every committed transaction); nil in memory and
    /// for a store opened read-only, whose one connection reads.
    private let readers: DatabasePool?
    /// The turns of the store's writers; nil in memory and read-only.
    private let turns: WriterTurns?
    /// Lets calls reach the connections until `close()`, which waits for those under way.
    private let gate = CallGate()
    /// Held by `close()`, so that a second close returns once the first has.
    private let closing = NSLock()

    /// Whether `close()` was called: every later call fails with `closed`.
    package var isClosed: Bool { gate.isClosed }
    /// Where the store gets time and randomness.
    public let environment: StoreEnvironment
    /// Where the async forms run this store's writes, one after the other (`ConcordStore+Async.swift`).
    let asyncCalls = DispatchQueue(label: "concord.store")
    /// Where they run its reads: as many serial queues as the read pool has connections.
    let asyncReads = LeastBusyQueues(count: readerCount, label: "concord.store.read")
    /// The observers of the streams of `changes()` and `events()`, one each, and how to end each
    /// stream.
    let observers = LockedState<(next: Int, subscribers: [Int: (observer: StoreObserver, end: @Sendable () -> Void)])>((0, [:]))
    /// Where the file was when the store was last written, if that is not where it is now: the
    /// store was copied, and refuses writes (SPEC.md §9.1).
    public let copiedFrom: String?
    /// The parts' sorts that merges in parts into this object keep open (`MergeInParts`).
    let keptSorts = KeptSorts()
    /// The file's location to record with the next write, until it is recorded.
    private let unrecordedLocation: LockedState<FileLocation?>
    /// The file the path named when this object opened it (nil in memory): once the path names
    /// another, or none, the object refuses writes and its observers stop (SPEC.md §9.1).
    let openedFile: FileNode?

    private init(
        path: String, connection: any DatabaseWriter, readers: DatabasePool? = nil, openedFile: FileNode?,
        environment: StoreEnvironment, readOnly: Bool = false
    ) throws {
        self.path = path
        self.connection = connection
        self.readers = readers
        self.openedFile = openedFile
        turns = path == ":memory:" || readOnly ? nil : WriterTurns(store: path)
        self.environment = environment
        let (id, recorded) = try Self.guarded(path) {
            try connection.read { db in
                guard let data = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'replica_id'"),
                      let id = ReplicaID(bytes: data)
                else { throw ConcordError(.corrupt, "the store at \(path) has no replica id") }
                let location = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'location'")
                return (id, location.flatMap(FileLocation.init(recorded:)))
            }
        }
        replicaID = id
        // Read-only, a store still tells whether it is a copy (`wipe` removes no folder file of a
        // copy's), but records no location.
        let current = path == ":memory:" ? nil : FileLocation(of: path)
        switch (current, recorded) {
        case let (current?, recorded?) where !current.isSameFile(as: recorded):
            copiedFrom = recorded.path
            unrecordedLocation = LockedState(nil)
        case let (current?, recorded?):
            // The same file, perhaps renamed: record the new path, for the message.
            copiedFrom = nil
            unrecordedLocation = LockedState(current.path == recorded.path || readOnly ? nil : current)
        case let (current, nil):
            // A store written before locations were recorded, or in memory.
            copiedFrom = nil
            unrecordedLocation = LockedState(readOnly ? nil : current)
        case (nil, _?):
            copiedFrom = nil
            unrecordedLocation = LockedState(nil)
        }
    }

    /// Throws `replaced` if the store's path names another file than the one this object opened,
    /// `copied` if the store file was copied since it was last written (SPEC.md §9.1), and
    /// `forked` if another process made it another replica (`init --fork`) since this object
    /// opened it. Every write of a store checks all three in its transaction; a sync calls this
    /// before it publishes anything under the store's replica id.
    package func ensureNotCopied() throws(ConcordError) {
        // The file first: the checks after it read the file this object opened, which tells
        // nothing of the one at the path now. Then the replica: a copy forked since this object
        // opened it is `forked` (the object is stale), not `copied` (the file now knows where it
        // is).
        try ensureSameFile()
        try guarded { try readOnWriter { db in try ensureSameReplica(db) } }
        try ensureNotCopiedSinceOpening()
    }

    /// Throws `replaced` if the store's path no longer names the file this object opened (SPEC.md
    /// §9.1): it was moved away or deleted, or another was put in its place (the store wiped and
    /// created again, a backup restored over it). The object still reads and writes the file it
    /// opened, which no other process finds at the path any more: a process that holds the store
    /// open for long checks this as it goes on, and ends, or opens the store again.
    package func ensureSameFile() throws(ConcordError) {
        guard let openedFile, FileNode(at: path) != openedFile else { return }
        throw Self.replacedError(path)
    }

    /// Throws `closed` once `close()` was called: a loop that syncs the store (a live session, a
    /// folder watch) ends then, rather than trying again.
    package func ensureOpen() throws(ConcordError) {
        if gate.isClosed { throw closedError() }
    }

    /// The error of a store whose path names another file than the one opened (`ensureSameFile`).
    static func replacedError(_ path: String) -> ConcordError {
        ConcordError(.replaced, "the store at \(path) was replaced by another file (wiped, restored or moved) since this process opened it; open it again")
    }

    private func ensureNotCopiedSinceOpening() throws(ConcordError) {
        if let copiedFrom {
            throw ConcordError(.copied, "\(path) is a copy of the store at \(copiedFrom) (another file)")
        }
    }

    /// A process that holds a store open for long (`serve`, `sync --watch`, an app) must not go on
    /// writing or publishing under the id the store had when it opened it (SPEC.md §9.1).
    private func ensureSameReplica(_ db: Database) throws {
        let current = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'replica_id'")
        guard let current, current != Data(replicaID.bytes) else { return }
        let now = ReplicaID(bytes: current)?.hex ?? "another id"
        throw ConcordError(.forked, "the store at \(path) is now replica \(now) (another process forked it); this process opened it as replica \(replicaID.hex): open it again")
    }

    /// Checks that the store may be written, and records its location in the same transaction
    /// the first time.
    package func prepareWrite(_ db: Database) throws {
        try ensureSameFile()
        try ensureSameReplica(db)
        try ensureNotCopiedSinceOpening()
        try unrecordedLocation.withLock { location in
            guard let current = location else { return }
            try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('location', ?)", arguments: [current.recorded])
            location = nil
        }
    }

    /// The store schema version (SPEC.md §9) this build writes, and the newest it opens.
    package static var schemaVersion: Int { StoreSchema.version }

    // MARK: Creating and opening

    /// Creates a new store at `path` with a new random replica id. The file appears whole or not
    /// at all: it is built under a temporary name and linked into place.
    public static func create(at path: String, name: String? = nil, environment: StoreEnvironment = .live) throws(ConcordError) -> ConcordStore {
        let fileManager = FileManager.default
        removeAbandonedTemporaries(of: path)
        guard !fileManager.fileExists(atPath: path) else {
            throw ConcordError(.exists, "a store already exists at \(path)")
        }
        // The longest name it makes beside the store is its temporary's journal: a name the file
        // system cannot hold fails here, before any directory is made.
        guard ((path as NSString).lastPathComponent + ".init-4294967295-ffffffffffffffff-journal").utf8.count <= Int(NAME_MAX) else {
            throw ConcordError(.io, "cannot create \(path): \(String(cString: strerror(ENAMETOOLONG)))")
        }
        let directory = (path as NSString).deletingLastPathComponent
        // A create that fails leaves no file, and no directory it made (SPEC.md §11, `init`).
        let madeDirectories = try makeDirectories(directory)
        var created = false
        defer {
            if !created { for made in madeDirectories.reversed() { rmdir(made) } }
        }
        guard access(directory.isEmpty ? "." : directory, W_OK) == 0 else {
            throw ConcordError(.io, "cannot write in \(directory.isEmpty ? "." : directory) (\(String(cString: strerror(errno))))")
        }
        // Named after this process, so that a later `create` can tell it was abandoned.
        let temporary = path + ".init-\(getpid())-" + String(environment.random(), radix: 16)
        defer {
            for suffix in ["", "-wal", "-shm", "-journal"] { try? fileManager.removeItem(atPath: temporary + suffix) }
        }
        try guarded(path) {
            let queue = try DatabaseQueue(path: temporary, configuration: configuration(readOnly: false))
            try queue.writeWithoutTransaction { db in
                guard try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") == "wal" else {
                    throw ConcordError(.io, "cannot put \(path) in WAL mode")
                }
            }
            try initialize(queue, name: name, environment: environment)
            try queue.close()
        }
        guard link(temporary, path) == 0 else {
            let reason = errno == EEXIST ? "a store already exists at \(path)" : "cannot create \(path): \(String(cString: strerror(errno)))"
            throw ConcordError(errno == EEXIST ? .exists : .io, reason)
        }
        created = true
        let store = try open(at: path, environment: environment)
        // Record where the file is at once: a copy made before the first write is a copy too.
        try store.guarded { try store.write { db in try store.prepareWrite(db) } }
        return store
    }

    /// Makes `directory` and those above it that are missing; returns those it made, outermost
    /// first, for a create that fails to remove again.
    private static func makeDirectories(_ directory: String) throws(ConcordError) -> [String] {
        var missing: [String] = []
        var current = directory
        while !current.isEmpty, current != "/", !FileManager.default.fileExists(atPath: current) {
            missing.append(current)
            current = (current as NSString).deletingLastPathComponent
        }
        var made: [String] = []
        for directory in missing.reversed() {
            guard mkdir(directory, 0o777) == 0 || errno == EEXIST else {
                let reason = String(cString: strerror(errno))
                for made in made.reversed() { rmdir(made) }
                throw ConcordError(.io, "cannot create the directory \(directory): \(reason)")
            }
            made.append(directory)
        }
        return made
    }

    /// Removes what a `create` of `path` killed part way left: `PATH.init-PID-HEX` and its `-wal`,
    /// `-shm` and `-journal` files, when process PID no longer runs (SPEC.md §11, `init`). A
    /// `create` under way in another process is left alone; a name with no process id, from an
    /// older build, once it is 15 minutes old; any other name always.
    private static func removeAbandonedTemporaries(of path: String) {
        let directory = (path as NSString).deletingLastPathComponent
        let base = (path as NSString).lastPathComponent
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.isEmpty ? "." : directory)) ?? []
        for name in names where name.hasPrefix(base + ".init-") {
            let file = (directory.isEmpty ? "" : directory + "/") + name
            let rest = name.dropFirst(base.count + ".init-".count)
            if let match = rest.wholeMatch(of: /(\d+)-[0-9a-f]+(-wal|-shm|-journal)?/) {
                // This build's name: abandoned when its process no longer runs.
                guard let pid = pid_t(match.1), kill(pid, 0) != 0, errno == ESRCH else { continue }
            } else if rest.wholeMatch(of: /[0-9a-f]+(-wal|-shm|-journal)?/) != nil {
                // An older build's name, with no process id: abandoned once it is a quarter of an
                // hour old (a create takes well under a second).
                let modified = (try? FileManager.default.attributesOfItem(atPath: file))?[.modificationDate] as? Date
                guard let modified, modified.timeIntervalSinceNow < -15 * 60 else { continue }
            } else {
                continue  // not a name `create` makes
            }
            unlink(file)
        }
    }

    /// Makes the store at `path` a new replica: a new random replica id, every operation and
    /// record kept (those of the old id stay the old replica's). The fix for a copied store
    /// (SPEC.md §9.1); it works on any store.
    /// - Returns: the store, and the replica id it had.
    public static func fork(at path: String, environment: StoreEnvironment = .live) throws(ConcordError) -> (ConcordStore, formerID: ReplicaID) {
        let store = try open(at: path, environment: environment)
        let former = store.replicaID
        let id: ReplicaID = environment.makeID()
        try store.guarded {
            try store.write { db in
                try db.execute(sql: "UPDATE meta SET value = ? WHERE key = 'replica_id'", arguments: [Data(id.bytes)])
                try db.execute(sql: "INSERT INTO replicas (id) VALUES (?)", arguments: [Data(id.bytes)])
                try db.execute(
                    sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('location', ?)",
                    arguments: [FileLocation(of: path)?.recorded ?? ""])
            }
        }
        try store.close()
        return (try open(at: path, environment: environment), former)
    }

    /// Declares that the store at `path` was moved, not copied: it keeps its replica id and records
    /// where it is now. Only for a store whose original is no longer used (SPEC.md §9.1).
    public static func adoptLocation(at path: String, environment: StoreEnvironment = .live) throws(ConcordError) -> ConcordStore {
        let store = try open(at: path, environment: environment)
        try store.guarded {
            try store.write { db in
                try db.execute(
                    sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('location', ?)",
                    arguments: [FileLocation(of: path)?.recorded ?? ""])
            }
        }
        try store.close()
        return try open(at: path, environment: environment)
    }

    /// Makes the store at `path` forget where it lives, as if it had never been written: the next
    /// write of it, or of any copy of it, records that file's location (SPEC.md §9.1). For a file
    /// handed out to be copied, such as the store `syncctl bench merge --keep` leaves.
    package static func forgetLocation(at path: String) throws(ConcordError) {
        let store = try open(at: path)
        try store.guarded { try store.write { db in try db.execute(sql: "DELETE FROM meta WHERE key = 'location'") } }
        try store.close()
    }

    /// Opens the existing store at `path`. A missing file, a file that is not a Concord store, or a
    /// store of a newer schema is refused before anything is written. Opened for writing, the
    /// store first applies what a merge logged and did not apply to its records (one a crash
    /// interrupted, SPEC.md §5.6), so that reads miss nothing the log holds: unless a running
    /// process is applying it (`merging PID`, §9), or the store is a copy (which refuses writes).
    public static func open(at path: String, readOnly: Bool = false, environment: StoreEnvironment = .live) throws(ConcordError) -> ConcordStore {
        let store = try openWithoutFinishing(at: path, readOnly: readOnly, environment: environment)
        // A copy refuses writes: it is told so at its first write, as ever.
        if !readOnly, store.copiedFrom == nil { try store.finishAbandonedMerge() }
        return store
    }

    private static func openWithoutFinishing(at path: String, readOnly: Bool, environment: StoreEnvironment) throws(ConcordError) -> ConcordStore {
        // Identify the file from its header before SQLite opens it: opening a file, even
        // read-only, may create files beside it, and a refused file must stay untouched.
        try checkHeader(path)
        if !readOnly { restoreWriteAccessToSidecars(of: path) }
        return try guarded(path) {
            // What the path names, taken before SQLite opens it: a file put in its place in
            // between makes the object see a replaced store at once, never miss one.
            let openedFile = FileNode(at: path)
            // One connection per store object. The file is already in WAL mode (set at creation),
            // so other processes still read while this one writes; and unlike a pool, a queue
            // writes nothing when it opens and keeps `synchronous = FULL`.
            let queue = try DatabaseQueue(path: path, configuration: configuration(readOnly: readOnly))
            try queue.read { db in try checkIdentity(db, path: path) }
            // Migrating writes: in a turn, as every write (§9). Most opens find nothing to migrate,
            // and take no turn (a turn may wait for a batch of a merge under way).
            if !readOnly, try !queue.read(StoreSchema.migrator.hasCompletedMigrations) {
                try WriterTurns(store: path).withTurn { try StoreSchema.migrator.migrate(queue) }
            }
            let readers = readOnly ? nil : try openReaders(of: openedFile, at: path)
            return try ConcordStore(
                path: path, connection: queue, readers: readers, openedFile: openedFile, environment: environment, readOnly: readOnly)
        }
    }

    /// SQLite creates a store's `-wal` and `-shm` files with the store file's permissions, and a
    /// process that opened the store while it was read-only leaves them so. Once the store is
    /// writable again they would keep every write failing as if it still were: give them the
    /// store's permissions back (only files of this user, only when the store itself is writable).
    private static func restoreWriteAccessToSidecars(of path: String) {
        var store = stat()
        guard access(path, W_OK) == 0, stat(path, &store) == 0 else { return }
        for suffix in ["-wal", "-shm"] {
            var sidecar = stat()
            guard stat(path + suffix, &sidecar) == 0, sidecar.st_uid == geteuid(), access(path + suffix, W_OK) != 0 else { continue }
            chmod(path + suffix, store.st_mode & 0o777)
        }
    }

    /// A store that lives in memory only, for tests and previews.
    public static func inMemory(name: String? = nil, environment: StoreEnvironment = .live) throws(ConcordError) -> ConcordStore {
        try guarded(":memory:") {
            let queue = try DatabaseQueue(configuration: configuration(readOnly: false))
            try initialize(queue, name: name, environment: environment)
            return try ConcordStore(path: ":memory:", connection: queue, openedFile: nil, environment: environment)
        }
    }

    static func configuration(readOnly: Bool) -> Configuration {
        var configuration = Configuration()
        configuration.readonly = readOnly
        // Writers of this build wait for their turn (`WriterTurns`) before SQLite sees them; this
        // timeout orders them with writers that take no turns (another program, a file system
        // without locks), and a checkpoint with the readers it waits for.
        configuration.busyMode = .timeout(TimeInterval(WriterTurns.defaultPatience.components.seconds))
        configuration.label = "Concord"
        if !readOnly {
            configuration.prepareDatabase { db in
                // Durable commits: a transaction that returned is on disk.
                try db.execute(sql: "PRAGMA synchronous = FULL")
                // An 8 MiB page cache: a merge's batch of records (SPEC.md §5.6) is sorted by id and
                // written in order, so a larger cache did not make it faster (16, 32 and 96 MiB were
                // measured, Benchmarks/README.md), and the memory goes to the batch instead.
                // (Memory-mapped reads were tried: as fast, but every mapped page counts as
                // resident memory.)
                try db.execute(sql: "PRAGMA cache_size = -8192")
                // Deleted and replaced content is overwritten with zeros in its page, so that a
                // purge (or an edit before it) leaves no value in free space (SPEC.md §9, "Erasing").
                try db.execute(sql: "PRAGMA secure_delete = ON")
            }
        }
        return configuration
    }

    /// The read-only pool of a store opened for writing; nil if the path already names another
    /// file than the one the store object opened (its reads then go through its one connection).
    private static func openReaders(of openedFile: FileNode?, at path: String) throws -> DatabasePool? {
        do {
            return try DatabasePool(path: path, configuration: readerConfiguration(of: openedFile, at: path))
        } catch is ReaderOpenedAnotherFile {
            return nil
        }
    }

    /// The read-only pool's: each connection it opens, lazily, checks that the path still names
    /// the file the store object opened, and refuses to serve otherwise (`read(_:)` then reads
    /// through the writing connection), so that an object reads the file it writes (SPEC.md §9.1).
    private static func readerConfiguration(of openedFile: FileNode?, at path: String) -> Configuration {
        var configuration = configuration(readOnly: true)
        configuration.label = "Concord reader"
        // Enough for the reads of an app's tasks and a peer session's sends at once; each keeps
        // SQLite's default page cache.
        configuration.maximumReaderCount = readerCount
        configuration.prepareDatabase { _ in
            guard let openedFile, FileNode(at: path) == openedFile else { throw ReaderOpenedAnotherFile() }
        }
        return configuration
    }

    /// The read connections of a store's pool, at most.
    static let readerCount = 4

    /// A reader connection found another file at the store's path than the one the object opened.
    private struct ReaderOpenedAnotherFile: Error {}

    private static func initialize(_ database: any DatabaseWriter, name: String?, environment: StoreEnvironment) throws {
        try database.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA application_id = \(StoreSchema.applicationID)")
        }
        try StoreSchema.migrator.migrate(database)
        let id: ReplicaID = environment.makeID()
        try database.write { db in
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES ('replica_id', ?)", arguments: [Data(id.bytes)])
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES ('name', ?)", arguments: [name ?? ""])
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES ('clock', 0)")
            try db.execute(sql: "INSERT INTO replicas (id) VALUES (?)", arguments: [Data(id.bytes)])
        }
    }

    /// Checks the SQLite header (SPEC.md §9): the magic, the application id at offset 68 and the
    /// schema version (user_version) at offset 60, both big-endian. Read through `StoreFile`, since
    /// this process may already have the store open.
    private static func checkHeader(_ path: String) throws(ConcordError) {
        let header: [UInt8]
        do {
            header = try StoreFile.head(of: path, count: 100)
        } catch {
            switch error {
            case .missing: throw ConcordError(.missing, "no store at \(path)")
            case .directory: throw ConcordError(.notAStore, "\(path) is a directory, not a Concord store")
            case .notRegular: throw ConcordError(.notAStore, "\(path) is not a regular file")
            case .sideFile(let owner): throw ConcordError(.notAStore, "\(path) is SQLite's side file of the store at \(owner), not a store")
            case .unreadable(let reason): throw ConcordError(.io, "cannot read \(path) (\(reason))")
            }
        }
        let magic = Array("SQLite format 3\0".utf8)
        guard header.count == 100, Array(header[0..<16]) == magic else {
            throw ConcordError(.notAStore, "\(path) is not a Concord store")
        }
        func bigEndian(at offset: Int) -> Int32 {
            Int32(bitPattern: header[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) })
        }
        try checkIdentity(applicationID: bigEndian(at: 68), version: Int(bigEndian(at: 60)), path: path)
    }

    private static func checkIdentity(_ db: Database, path: String) throws {
        try checkIdentity(
            applicationID: try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0,
            version: try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0, path: path)
    }

    private static func checkIdentity(applicationID: Int32, version: Int, path: String) throws(ConcordError) {
        guard applicationID == StoreSchema.applicationID else {
            throw ConcordError(.notAStore, "\(path) is not a Concord store")
        }
        guard version <= StoreSchema.version else {
            throw ConcordError(.newerSchema, "the store at \(path) has schema version \(version), newer than this build supports (\(StoreSchema.version)); upgrade Concord")
        }
    }

    /// Runs `body`, turning whatever it throws into a `ConcordError` that names `path`.
    static func guarded<T>(_ path: String, _ body: () throws -> T) throws(ConcordError) -> T {
        do {
            return try body()
        } catch {
            throw ConcordError.wrap(error, path: path)
        }
    }

    package func guarded<T>(_ body: () throws -> T) throws(ConcordError) -> T {
        try Self.guarded(path, body)
    }

    /// Runs `updates` in a write transaction, in this writer's turn (SPEC.md §9).
    package func write<T>(_ updates: (Database) throws -> T) throws -> T {
        try gate.pass(closedError: closedError) { try withTurn { try connection.write(updates) } }
    }

    /// Runs `updates` outside a transaction (they open their own), in this writer's turn.
    func writeWithoutTransaction<T>(_ updates: (Database) throws -> T) throws -> T {
        try gate.pass(closedError: closedError) { try withTurn { try connection.writeWithoutTransaction(updates) } }
    }

    /// Reads through the writing connection, which sees what this object wrote (a merge reads
    /// there what it is about to write).
    func readOnWriter<T>(_ body: (Database) throws -> T) throws -> T {
        try gate.pass(closedError: closedError) { try connection.read(body) }
    }

    /// What a call fails with once the store object is closed.
    private func closedError() -> ConcordError {
        ConcordError(.closed, "the store at \(path) is closed")
    }

    private func withTurn<T>(_ body: () throws -> T) throws -> T {
        guard let turns else { return try body() }
        return try turns.withTurn(body)
    }

    /// Runs `body` in a read transaction of its own, which sees every transaction committed
    /// before it began and waits for no write of this object or another.
    package func read<T>(_ body: (Database) throws -> T) throws -> T {
        try gate.pass(closedError: closedError) {
            guard let readers else { return try connection.read(body) }
            do {
                return try readers.read(body)
            } catch {
                // A reader the pool opened now found another file at the path, or none (SQLite
                // then fails to open it): the writing connection still has the file this object opened.
                guard error is ReaderOpenedAnotherFile || FileNode(at: path) != openedFile else { throw error }
                return try connection.read(body)
            }
        }
    }

    /// The readers close first, and the writing connection last: the last connection to a store
    /// checkpoints its WAL into the file and removes it, which a read-only one cannot do, so that
    /// a store a process has let go of is one file, whole (a copy of it is a copy of everything).
    /// The observers' connections close before them (their streams end).
    deinit {
        closeObservers()
        try? readers?.close()
    }

    /// Closes the store's connections, the observers' and the readers first (as `deinit` does):
    /// the streams of `changes()` and `events()` end. Later calls fail.
    public func close() throws(ConcordError) {
        // A second close waits for the first.
        closing.lock()
        defer { closing.unlock() }
        // Calls under way end first; later ones fail (`closed`).
        guard gate.close() else { return }
        closeObservers()
        try guarded {
            try readers?.close()
            try connection.close()
        }
    }

    private func closeObservers() {
        let observing = observers.withLock { state in
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for subscriber in observing {
            subscriber.observer.close()
            subscriber.end()
        }
    }

    // MARK: Observing

    /// A stream of the changes committed to the store's file from now on (or since `since`), by
    /// this store object or any other connection or process (an app's widget, `syncctl`,
    /// `serve`), each within a few milliseconds of its commit (SPEC.md §7.1). One change may stand
    /// for several commits; none is missed or reported twice. Operations that a merge has logged
    /// are reported once they are applied to their records, so a read after a change sees them.
    /// Each change carries the version vector reported up to: a program that stops can start
    /// again from it with `since`, missing nothing. Iterate it in a task; cancelling the task,
    /// dropping the stream, or closing the store ends it.
    ///
    /// The stream fails, with a `ConcordError`, when the store cannot be read to start observing
    /// it (the error says why), and with `replaced` once the store's path names another file than
    /// the one this object opened: open the store again to follow what is there now.
    public func changes(since: VersionVector? = nil) -> AsyncThrowingStream<StoreChange, any Error> {
        observe(since: since, failsWhenReplaced: true) { event in
            if case .changed(let change) = event { change } else { nil }
        }
    }

    /// A stream of what happens to the store's file from now on (or since `since`): the changes
    /// of `changes(since:)`, another process's fork of the store, and, as its last event, the
    /// file's replacement by another (SPEC.md §7.1, §9.1). Iterate it in a task; cancelling the
    /// task, dropping the stream, or closing the store ends it. It fails, with a `ConcordError`, when the store
    /// cannot be read to start observing it.
    public func events(since: VersionVector? = nil) -> AsyncThrowingStream<StoreEvent, any Error> {
        observe(since: since, failsWhenReplaced: false) { $0 }
    }

    /// A stream of the events of a new observer of the store, each made an element by `element`
    /// (nil: left out). It ends after `replaced`: failing with its error if `failsWhenReplaced`.
    private func observe<Element: Sendable>(
        since: VersionVector?, failsWhenReplaced: Bool, _ element: @escaping @Sendable (StoreEvent) -> Element?
    ) -> AsyncThrowingStream<Element, any Error> {
        let (stream, continuation) = AsyncThrowingStream<Element, any Error>.makeStream(bufferingPolicy: .unbounded)
        let deliver: @Sendable (StoreEvent) -> Void = { event in
            if let element = element(event) { continuation.yield(element) }
            if case .replaced(let error) = event { continuation.finish(throwing: failsWhenReplaced ? error : nil) }
        }
        do {
            try ensureSameFile()
        } catch {
            deliver(.replaced(error))
            return stream
        }
        let end: @Sendable () -> Void = { continuation.finish() }
        let observer: StoreObserver
        let key: Int
        do {
            // Registered in a pass of the gate: a close waits for it, then ends its stream.
            (observer, key) = try gate.pass(closedError: closedError) {
                let observer = try StoreObserver(self, since: since, deliver: deliver)
                let key = observers.withLock { state in
                    state.next += 1
                    state.subscribers[state.next] = (observer, end)
                    return state.next
                }
                return (observer, key)
            }
        } catch {
            continuation.finish(throwing: ConcordError.wrap(error, path: path))
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            observer.stop()
            _ = self?.observers.withLock { $0.subscribers.removeValue(forKey: key) }
        }
        return stream
    }

    /// This store object has committed a transaction: its observers look now (rather than when
    /// the bell's notification arrives).
    func committed() {
        for subscriber in observers.withLock({ Array($0.subscribers.values) }) { subscriber.observer.wake() }
    }

    /// The change since `vector`: the records of the operations the store holds that `vector`
    /// does not cover (and that are applied), with the vector they bring it to; nil if none.
    package func change(since vector: VersionVector) throws(ConcordError) -> StoreChange? {
        try guarded { try StoreObserver.change(since: vector, in: self) }
    }
}

/// What happens to a store file that a program follows (`ConcordStore.events(since:)`, SPEC.md
/// §7.1).
public enum StoreEvent: Hashable, Sendable {
    /// Operations were committed: the records they changed, and where they came from.
    case changed(StoreChange)
    /// Another process made the store another replica (`ConcordStore.fork(at:)`, SPEC.md §9.1).
    /// The stream goes on, the file and its history being the same: from this event on, `local`
    /// means written under `replica`, and the operations of `former` are another replica's. A
    /// store object opened before it refuses writes: open the store again to write.
    case forked(replica: ReplicaID, former: ReplicaID)
    /// The store's path names another file than the one the store object opened, or none: the
    /// store was wiped and created again, a backup restored over it, or it was moved away (an
    /// error of code `replaced`, SPEC.md §9.1). The last event: what is committed to the file now
    /// at the path is another store's history, and is not followed. Open the store again to
    /// follow it.
    case replaced(ConcordError)
}

/// What one or more commits to a store changed (`ConcordStore.changes()`).
public struct StoreChange: Hashable, Sendable {
    /// Where a change's operations came from.
    public enum Origin: Hashable, Sendable {
        /// Every one was written on this replica (by this store object or another process that
        /// writes the same store): under the store's replica id as the change was read, which
        /// after a fork (`StoreEvent.forked`) is the new one.
        case local
        /// Every one was merged from other replicas: a bundle, a folder, a peer, another store;
        /// after a fork, the former id's operations too.
        case merge
        /// Some of each (commits of both kinds, reported together).
        case mixed
    }

    /// Where the change's operations came from.
    public var origin: Origin
    /// The records they changed.
    public var records: Set<RecordRef>
    /// Every operation this vector covers has been reported, up to this change: `changes(since:)`
    /// from it misses nothing.
    public var versions: VersionVector

    /// A change of `records` from `origin`, reported up to `versions`.
    public init(origin: Origin, records: Set<RecordRef>, versions: VersionVector = VersionVector()) {
        self.origin = origin
        self.records = records
        self.versions = versions
    }
}

/// Where a store file is: the file system's device and inode numbers, which a copy, a restored
/// backup or a move to another file system changes and a rename does not; and its path, for the
/// message.
struct FileLocation {
    var device: UInt64
    var inode: UInt64
    var path: String

    /// The file at `path`, through any symbolic links (a store reached through one is the file it
    /// names: `lstat` would take the link for a copy).
    init?(of path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        self.path = (path as NSString).standardizingPath
    }

    /// Parses `meta.location`: "<device> <inode> <path>".
    init?(recorded: String) {
        let parts = recorded.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return nil }
        self.device = device
        self.inode = inode
        path = String(parts[2])
    }

    var recorded: String { "\(device) \(inode) \(path)" }

    func isSameFile(as other: FileLocation) -> Bool { device == other.device && inode == other.inode }
}
