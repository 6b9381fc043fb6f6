import ConcordCore
import ConcordRelayProtocol
import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceLifecycle

/// The scale-out back end (SPEC.md §16.4): every space's files in one PostgreSQL database, which
/// any number of relay nodes share. A node holds nothing of its own: each request is one
/// transaction of the database, and each change is announced to every node with
/// `NOTIFY concord_relay, 'SPACE'` in the transaction that makes it (PostgreSQL delivers it at
/// the commit, to every session that listens), so that a listing waiting on one node for a
/// change made through another returns at once.
public final class PostgresRelayStorage: RelayStorage {
    private let client: PostgresClient
    private let bell = ChangeBell()
    private let logger: Logger
    /// The channel of the notifications.
    static let channel = "concord_relay"
    /// How often a waiting listing reads its cursor anyway. A notification is lost while the
    /// listening connection is down (the database restarting, say), but the listener rings every
    /// space once it listens again; so this is a last resort, and rare: at 2,500 waiting listings,
    /// a read every 5 s was 500 queries a second, as many as 80 uploads made.
    private static let pollInterval = Duration.seconds(20)

    /// A back end on the database at `url`, `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`
    /// (port 5432 if left out; `?sslmode=require` for TLS). Nothing connects until its services
    /// run.
    public init(url: String, logger: Logger) throws(ConcordError) {
        self.logger = logger
        redactedURL = try Self.redacted(url)
        // The pool tells each connection it fails to make at `info`: what the relay says once
        // (its requests failing, or `prepare`) is enough, unless the relay's log asks for more.
        var poolLogger = logger
        if poolLogger.logLevel > .debug { poolLogger.logLevel = max(poolLogger.logLevel, .error) }
        client = PostgresClient(configuration: try Self.configuration(url), backgroundLogger: poolLogger)
    }

    private let redactedURL: String
    /// How long `prepare` waits for a first connection.
    private static let connectTimeout = Duration.seconds(15)

    /// `url` without its password, to be shown and logged; a URL that is not one is refused.
    public static func redacted(_ url: String) throws(ConcordError) -> String {
        _ = try configuration(url)
        var parts = URLComponents(string: url)!
        parts.password = nil
        return parts.string ?? url
    }

    /// The configuration `url` gives; a URL that is not one is refused (`invalidInput`).
    static func configuration(_ url: String) throws(ConcordError) -> PostgresClient.Configuration {
        guard let parts = URLComponents(string: url), ["postgres", "postgresql"].contains(parts.scheme ?? ""),
              let host = parts.host, !host.isEmpty, let user = parts.user, !user.isEmpty,
              parts.path.count > 1, (parts.queryItems ?? []).allSatisfy({ $0.name == "sslmode" })
        else {
            throw ConcordError(.invalidInput, "'\(url)' is not a PostgreSQL URL: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")
        }
        let sslmode = parts.queryItems?.first { $0.name == "sslmode" }?.value ?? "disable"
        let tls: PostgresClient.Configuration.TLS
        switch sslmode {
        case "disable": tls = .disable
        case "require": tls = .require(.makeClientConfiguration())
        default: throw ConcordError(.invalidInput, "sslmode=\(sslmode) is not one this relay takes: disable or require")
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: parts.port ?? 5432, username: user, password: parts.password,
            database: String(parts.path.dropFirst()), tls: tls)
        configuration.options.connectTimeout = .seconds(10)
        return configuration
    }

    /// The connection pool, and the listener of other nodes' changes.
    public var services: [any Service] { [client, Listener(storage: self)] }

    /// Creates the tables if they are missing (every node may, at once). A database that
    /// cannot be reached within 15 s stops the relay before it listens.
    public func prepare() async throws {
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await self.createTables() }
                group.addTask {
                    try await Task.sleep(for: Self.connectTimeout)
                    throw ConcordError(.io, "cannot reach the database at \(self.redactedURL) within 15 s")
                }
                try await group.next()
                group.cancelAll()
            }
        } catch let error as ConcordError {
            throw error
        } catch {
            throw ConcordError(.io, "cannot prepare the database at \(redactedURL): \(String(reflecting: error))", cause: error)
        }
    }

    private func createTables() async throws {
        try await client.withTransaction(logger: logger) { connection in
            // One node at a time (until the commit): CREATE TABLE IF NOT EXISTS is not safe
            // against itself.
            try await connection.query("SELECT pg_advisory_xact_lock(7430)", logger: logger)
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS concord_relay_spaces(
                    space text PRIMARY KEY, cursor bigint NOT NULL, bytes bigint NOT NULL, files bigint NOT NULL)
                """, logger: logger)
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS concord_relay_files(
                    space text NOT NULL, name text NOT NULL, sha256 bytea NOT NULL, size bigint NOT NULL, body bytea NOT NULL,
                    PRIMARY KEY (space, name))
                """, logger: logger)
        }
    }

    /// The files of `space` and its cursor, read by one statement (so from one snapshot, and in
    /// one round trip): the space's row, joined with its files, if any.
    public func listing(of space: String) async throws -> RelayListing {
        try await bounded { [self] in
            let rows = try await client.query("""
                SELECT s.cursor, f.name, f.sha256, f.size FROM concord_relay_spaces s
                LEFT JOIN concord_relay_files f ON f.space = s.space
                WHERE s.space = \(space) ORDER BY f.name COLLATE "C"
                """, logger: logger)
            var listing = RelayListing(files: [], cursor: 0)
            for try await (cursor, name, sha256, size) in rows.decode((Int64, String?, ByteBuffer?, Int64?).self) {
                listing.cursor = cursor
                if let name, let sha256, let size { listing.files.append(RelayFile(name: name, sha256: Array(buffer: sha256), size: Int(size))) }
            }
            return listing
        }
    }

    /// The bytes of a file.
    public func contents(of name: String, in space: String) async throws -> [UInt8]? {
        try await bounded { [self] in
            let rows = try await client.query("SELECT body FROM concord_relay_files WHERE space = \(space) AND name = \(name)", logger: logger)
            for try await body in rows.decode(ByteBuffer.self) { return Array(buffer: body) }
            return nil
        }
    }

    /// Stores a file in one transaction, which locks the space's row, checks the name and the
    /// quota, moves the cursor and announces the change: six round trips, BEGIN and COMMIT
    /// included.
    public func store(_ bytes: [UInt8], sha256: [UInt8], as name: String, in space: String, quota: RelayQuota) async throws -> RelayStoreOutcome {
        try await bounded { [self] in
            try await client.withTransaction(logger: logger) { connection in
                // The space's row, made or locked (an update that changes nothing), and its sums.
                var held: (bytes: Int64, files: Int64) = (0, 0)
                let rows = try await connection.query("""
                    INSERT INTO concord_relay_spaces(space, cursor, bytes, files) VALUES (\(space), 0, 0, 0)
                    ON CONFLICT (space) DO UPDATE SET space = excluded.space RETURNING bytes, files
                    """, logger: logger)
                for try await (bytes, files) in rows.decode((Int64, Int64).self) { held = (bytes, files) }
                let existing = try await connection.query(
                    "SELECT sha256 FROM concord_relay_files WHERE space = \(space) AND name = \(name)", logger: logger)
                for try await other in existing.decode(ByteBuffer.self) {
                    let other = Array(buffer: other)
                    return other == sha256 ? .alreadyHeld : .nameTaken(otherSHA256: other)
                }
                let size = Int64(bytes.count)
                guard held.bytes + size <= Int64(quota.bytes), held.files + 1 <= Int64(quota.files) else {
                    return .spaceFull(bytes: Int(held.bytes), files: Int(held.files))
                }
                try await connection.query("""
                    INSERT INTO concord_relay_files(space, name, sha256, size, body)
                    VALUES (\(space), \(name), \(ByteBuffer(bytes: sha256)), \(size), \(ByteBuffer(bytes: bytes)))
                    """, logger: logger)
                try await Self.moved(space, bytes: size, files: 1, connection, logger)
                return .stored
            }
        }
    }

    /// Deletes files in one transaction, which moves the cursor once and announces the change.
    public func delete(_ names: [String], in space: String) async throws -> [String] {
        try await bounded { [self] in
            try await client.withTransaction(logger: logger) { connection in
                try await Self.lock(space, connection, logger)
                let rows = try await connection.query(
                    "DELETE FROM concord_relay_files WHERE space = \(space) AND name = ANY(\(names)) RETURNING name, size", logger: logger)
                var deleted: [String] = []
                var bytes: Int64 = 0
                for try await (name, size) in rows.decode((String, Int64).self) {
                    deleted.append(name)
                    bytes += size
                }
                guard !deleted.isEmpty else { return [] }
                try await Self.moved(space, bytes: -bytes, files: -Int64(deleted.count), connection, logger)
                return deleted.sorted()
            }
        }
    }

    /// Deletes a space's files in one transaction, which moves the cursor and announces the change.
    public func deleteSpace(_ space: String) async throws -> Int {
        try await bounded { [self] in
            try await client.withTransaction(logger: logger) { connection in
                try await Self.lock(space, connection, logger)
                let rows = try await connection.query(
                    "DELETE FROM concord_relay_files WHERE space = \(space) RETURNING size", logger: logger)
                var (count, bytes): (Int64, Int64) = (0, 0)
                for try await size in rows.decode(Int64.self) {
                    count += 1
                    bytes += size
                }
                try await Self.moved(space, bytes: -bytes, files: -count, connection, logger)
                return Int(count)
            }
        }
    }

    /// Waits for a change made through any node: rung by its notification at once, and read
    /// every 20 s regardless.
    public func waitForChange(of space: String, from cursor: Int64, timeout: Duration) async throws {
        try await waitForChange(of: space, from: cursor, timeout: timeout, bell: bell, poll: Self.pollInterval) {
            try await bounded { [self] in
                try await client.withConnection { connection in try await Self.cursor(of: space, connection, logger) }
            }
        }
    }

    /// Runs a request's queries, for at most 30 s: a query can go unanswered when the database
    /// restarts under it (see `withDeadline`), and the request is then refused, to be tried again.
    private func bounded<Value: Sendable>(_ queries: @escaping @Sendable () async throws -> Value) async throws -> Value {
        try await withDeadline(.seconds(30), "a request to the database at \(redactedURL)", queries)
    }

    // MARK: Queries

    private static func cursor(of space: String, _ connection: PostgresConnection, _ logger: Logger) async throws -> Int64 {
        let rows = try await connection.query("SELECT cursor FROM concord_relay_spaces WHERE space = \(space)", logger: logger)
        for try await cursor in rows.decode(Int64.self) { return cursor }
        return 0
    }

    /// Locks the space's row, if it has one, before a deletion touches its files: every change
    /// of a space takes its row's lock first (a store by its upsert), so that two of them never
    /// wait for each other's locks in opposite orders.
    private static func lock(_ space: String, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.query("SELECT 1 FROM concord_relay_spaces WHERE space = \(space) FOR UPDATE", logger: logger)
    }

    /// Moves the space's cursor and sums, and tells every node (at the commit), in one statement.
    private static func moved(_ space: String, bytes: Int64, files: Int64, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.query("""
            WITH moved AS (
                UPDATE concord_relay_spaces SET cursor = cursor + 1, bytes = bytes + \(bytes), files = files + \(files)
                WHERE space = \(space) RETURNING space)
            SELECT pg_notify(\(channel), space) FROM moved
            """, logger: logger)
    }

    /// Listens for the changes of every node, and rings the waiting listings of their spaces. While
    /// it cannot listen (the database restarting), it tries again every second, and rings every
    /// space once it listens again: a change may have been missed meanwhile.
    private struct Listener: Service {
        let storage: PostgresRelayStorage

        func run() async throws {
            try? await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    do {
                        try await storage.client.withConnection { connection in
                            try await connection.listen(on: PostgresRelayStorage.channel) { notifications in
                                storage.bell.ringAll()
                                for try await notification in notifications { storage.bell.ring(notification.payload) }
                            }
                        }
                    } catch {
                        // A relay that stops shuts its pool down, which can fail the listen a
                        // moment before this task hears it is cancelled: a short wait tells a
                        // stop from a database that cannot be reached, which alone is worth a line.
                        try? await Task.sleep(for: .milliseconds(100))
                        if Task.isCancelled { break }
                        storage.logger.warning("cannot listen for the changes of other relay nodes: \(String(reflecting: error)); trying again in 1 s")
                        try? await Task.sleep(for: .milliseconds(900))
                    }
                }
            }
        }
    }
}
