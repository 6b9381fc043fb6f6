import ConcordCore
import ConcordRelayProtocol
import Foundation
import GRDB

/// The embedded back end (SPEC.md §16.4): one SQLite file holds every space's files, for a
/// personal relay on one machine. Each upload is one transaction; the file is in WAL mode, so
/// lists and downloads go on while an upload is written.
public final class SQLiteRelayStorage: RelayStorage {
    private let pool: DatabasePool
    private let bell = ChangeBell()
    /// How often a waiting request looks at the file anyway: another process may have written it.
    private static let pollInterval = Duration.seconds(1)

    /// Opens (creating it if need be) the relay's database at `path`.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        pool = try DatabasePool(path: path, configuration: configuration)
        try pool.write { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS spaces(
                    space TEXT PRIMARY KEY NOT NULL, cursor INTEGER NOT NULL, bytes INTEGER NOT NULL, files INTEGER NOT NULL);
                CREATE TABLE IF NOT EXISTS files(
                    space TEXT NOT NULL, name TEXT NOT NULL, sha256 BLOB NOT NULL, size INTEGER NOT NULL, body BLOB NOT NULL,
                    PRIMARY KEY (space, name));
                """)
        }
    }

    /// The files of `space` and its cursor, read in one transaction.
    public func listing(of space: String) async throws -> RelayListing {
        try await pool.read { db in
            let cursor = try Int64.fetchOne(db, sql: "SELECT cursor FROM spaces WHERE space = ?", arguments: [space]) ?? 0
            let files = try Row.fetchAll(db, sql: "SELECT name, sha256, size FROM files WHERE space = ? ORDER BY name", arguments: [space])
                .map { RelayFile(name: $0[0], sha256: [UInt8]($0[1] as Data), size: $0[2]) }
            return RelayListing(files: files, cursor: cursor)
        }
    }

    /// The bytes of a file, read in one transaction.
    public func contents(of name: String, in space: String) async throws -> [UInt8]? {
        try await pool.read { db in
            try Data.fetchOne(db, sql: "SELECT body FROM files WHERE space = ? AND name = ?", arguments: [space, name]).map { [UInt8]($0) }
        }
    }

    /// Stores a file in one transaction, which checks the name and the quota and moves the cursor.
    public func store(_ bytes: [UInt8], sha256: [UInt8], as name: String, in space: String, quota: RelayQuota) async throws -> RelayStoreOutcome {
        let outcome = try await pool.write { db -> RelayStoreOutcome in
            if let held = try Data.fetchOne(db, sql: "SELECT sha256 FROM files WHERE space = ? AND name = ?", arguments: [space, name]) {
                return [UInt8](held) == sha256 ? .alreadyHeld : .nameTaken(otherSHA256: [UInt8](held))
            }
            let row = try Row.fetchOne(db, sql: "SELECT bytes, files FROM spaces WHERE space = ?", arguments: [space])
            let (bytesHeld, filesHeld): (Int, Int) = row.map { ($0[0], $0[1]) } ?? (0, 0)
            guard bytesHeld + bytes.count <= quota.bytes, filesHeld + 1 <= quota.files else {
                return .spaceFull(bytes: bytesHeld, files: filesHeld)
            }
            try db.execute(
                sql: "INSERT INTO files(space, name, sha256, size, body) VALUES (?, ?, ?, ?, ?)",
                arguments: [space, name, Data(sha256), bytes.count, Data(bytes)])
            try db.execute(sql: """
                INSERT INTO spaces(space, cursor, bytes, files) VALUES (?1, 1, ?2, 1)
                ON CONFLICT(space) DO UPDATE SET cursor = cursor + 1, bytes = bytes + ?2, files = files + 1
                """, arguments: [space, bytes.count])
            return .stored
        }
        if outcome == .stored { bell.ring(space) }
        return outcome
    }

    /// Deletes files in one transaction, which moves the cursor once.
    public func delete(_ names: [String], in space: String) async throws -> [String] {
        let deleted = try await pool.write { db -> [String] in
            var deleted: [String] = []
            var bytes = 0
            for name in names {
                guard let size = try Int.fetchOne(db, sql: "SELECT size FROM files WHERE space = ? AND name = ?", arguments: [space, name]) else {
                    continue
                }
                try db.execute(sql: "DELETE FROM files WHERE space = ? AND name = ?", arguments: [space, name])
                deleted.append(name)
                bytes += size
            }
            if !deleted.isEmpty {
                try db.execute(
                    sql: "UPDATE spaces SET cursor = cursor + 1, bytes = bytes - ?, files = files - ? WHERE space = ?",
                    arguments: [bytes, deleted.count, space])
            }
            return deleted
        }
        if !deleted.isEmpty { bell.ring(space) }
        return deleted
    }

    /// Deletes a space's files in one transaction, which moves the cursor.
    public func deleteSpace(_ space: String) async throws -> Int {
        let count = try await pool.write { db -> Int in
            try db.execute(sql: "DELETE FROM files WHERE space = ?", arguments: [space])
            let count = db.changesCount
            // The cursor stays, and moves: a device waiting on it hears of the deletion.
            try db.execute(sql: "UPDATE spaces SET cursor = cursor + 1, bytes = 0, files = 0 WHERE space = ?", arguments: [space])
            return count
        }
        bell.ring(space)
        return count
    }

    /// Waits for a change of this process, rung at once, or of another process on the same file, seen within a second.
    public func waitForChange(of space: String, from cursor: Int64, timeout: Duration) async throws {
        try await waitForChange(of: space, from: cursor, timeout: timeout, bell: bell, poll: Self.pollInterval) {
            try await listingCursor(of: space)
        }
    }

    private func listingCursor(of space: String) async throws -> Int64 {
        try await pool.read { db in
            try Int64.fetchOne(db, sql: "SELECT cursor FROM spaces WHERE space = ?", arguments: [space]) ?? 0
        }
    }
}
