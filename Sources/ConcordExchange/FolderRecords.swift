import ConcordCore
import ConcordStore
import Foundation
import GRDB

// What a store records of its shared folders (`folder_files` and `folder_serials`, SPEC.md §9 and
// §14): kept by the exchange layer, which alone syncs through folders; the store only holds the
// tables, in its own file and transactions.

/// A bundle file of a shared folder that a store has imported, or published, whole (SPEC.md §14).
package struct FolderFile: Hashable, Sendable {
    /// The shared folder, as the store knows it (its absolute path).
    package var folder: String
    /// The file's name in the folder.
    package var name: String
    /// What `stat` said of the file before it was read, or "" if that could still change without
    /// the file's contents changing being seen: while it is unchanged, so are its contents, and
    /// the file is not read again.
    package var identity: String
    /// SHA-256 of the file's bytes: what decides, once `identity` changed, whether the contents did.
    package var sha256: [UInt8]
    /// The id of the sync key the file is sealed with, or nil for a plain bundle.
    package var keyID: [UInt8]?
    /// Exactly the operations the file delivered: those it holds, but for those of a clash.
    package var holds: SeqRanges
    /// Whether this replica wrote the file (and so may coalesce it away).
    package var published: Bool
    /// Why the file was skipped, if it was (then it holds nothing, and `keyID` is the store's
    /// key's when it was skipped): it is not read again while it and that key are unchanged. The
    /// reason of its warning, after the warning's code (`FolderSync.skippedRecord`).
    package var skipped: String?
    /// For a file this replica published, the store's `erasures()` count before it was written:
    /// once the count is higher, the file may hold content erased since, and is rewritten
    /// (SPEC.md §14, "Purges").
    package var erasures: Int64
    /// For a file this replica published, how many seqs the store held compacted before it was
    /// written (`compactedSeqCount()`): once the store has compacted enough more, the file is
    /// rewritten (SPEC.md §14, "Compaction").
    package var compacted: Int64

    package init(
        folder: String, name: String, identity: String, sha256: [UInt8], keyID: [UInt8]?, holds: SeqRanges, published: Bool,
        skipped: String? = nil, erasures: Int64 = 0, compacted: Int64 = 0
    ) {
        self.folder = folder
        self.name = name
        self.identity = identity
        self.sha256 = sha256
        self.keyID = keyID
        self.holds = holds
        self.published = published
        self.skipped = skipped
        self.erasures = erasures
        self.compacted = compacted
    }
}

extension ConcordStore {
    /// The files of `folder` this store has imported or published, by name.
    package func folderFiles(in folder: String) throws(ConcordError) -> [String: FolderFile] {
        try guarded {
            try read { db in
                var files: [String: FolderFile] = [:]
                let rows = try Row.fetchCursor(
                    db, sql: "SELECT name, identity, sha256, key_id, holds, published, skipped, erasures, compacted FROM folder_files WHERE folder = ?",
                    arguments: [folder])
                while let row = try rows.next() {
                    let name: String = try row.column(0)
                    let hash: Data = try row.column(2)
                    let keyID: Data? = try row.column(3)
                    guard let holds = SeqRanges(try row.column(4) as String) else {
                        throw ConcordError(.corrupt, "the record of shared-folder file \(name) is damaged")
                    }
                    files[name] = FolderFile(
                        folder: folder, name: name, identity: try row.column(1), sha256: [UInt8](hash), keyID: keyID.map { [UInt8]($0) },
                        holds: holds, published: try row.column(5), skipped: try row.column(6), erasures: try row.column(7),
                        compacted: try row.column(8))
                }
                return files
            }
        }
    }

    /// Records files of their folders, replacing what was recorded under the same names; but a
    /// file recorded as published stays so while its contents are the same. Another process of this
    /// replica may import the file that this one published, before it saw that record: the bytes
    /// are still the ones this replica wrote (SPEC.md §14, "Serials").
    package func recordFolderFiles(_ files: [FolderFile]) throws(ConcordError) {
        try write(files, sql: """
            INSERT INTO folder_files (folder, name, identity, sha256, key_id, holds, published, skipped, erasures, compacted)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (folder, name) DO UPDATE SET
                identity = excluded.identity, sha256 = excluded.sha256, key_id = excluded.key_id, holds = excluded.holds,
                published = excluded.published OR (published AND sha256 = excluded.sha256), skipped = excluded.skipped,
                erasures = CASE WHEN sha256 = excluded.sha256 THEN max(erasures, excluded.erasures) ELSE excluded.erasures END,
                compacted = CASE WHEN sha256 = excluded.sha256 THEN max(compacted, excluded.compacted) ELSE excluded.compacted END
            """
        ) { file in
            [file.folder, file.name, file.identity, Data(file.sha256), file.keyID.map { Data($0) }, file.holds.description, file.published,
             file.skipped, file.erasures, file.compacted]
        }
    }

    /// Records `file`, which this replica is about to link into place under its name, as published:
    /// before the file is there, so that no crash leaves in the folder a file this replica wrote
    /// and does not know as its own (SPEC.md §14, "Serials"). False, recording nothing, if a file
    /// is recorded under that name: the name is taken.
    package func reserveFolderFile(_ file: FolderFile) throws(ConcordError) -> Bool {
        try guarded {
            try write { db in
                try prepareWrite(db)
                try db.execute(
                    sql: """
                        INSERT INTO folder_files (folder, name, identity, sha256, key_id, holds, published, skipped, erasures, compacted)
                        VALUES (?, ?, ?, ?, ?, ?, 1, NULL, ?, ?) ON CONFLICT (folder, name) DO NOTHING
                        """,
                    arguments: [
                        file.folder, file.name, file.identity, Data(file.sha256), file.keyID.map { Data($0) }, file.holds.description, file.erasures,
                        file.compacted,
                    ])
                return db.changesCount == 1
            }
        }
    }

    /// Links `file`, reserved by `reserveFolderFile(_:)`, into place with `place`, inside a write
    /// transaction that first finds it still recorded. Another process of this replica forgets a
    /// record of a file it found missing only in a write transaction that finds the file still
    /// missing (`forgetFolderFiles(_:if:)`), so a record is never forgotten under a file that is
    /// there. False, placing nothing, if the record is gone; if `place` fails, the record goes.
    package func placeFolderFile(_ file: FolderFile, with place: () throws(ConcordError) -> Void) throws(ConcordError) -> Bool {
        let placed: Result<Bool, ConcordError> = try guarded {
            try write { db in
                try prepareWrite(db)
                let arguments: StatementArguments = [file.folder, file.name, Data(file.sha256)]
                guard try Bool.fetchOne(
                    db, sql: "SELECT EXISTS (SELECT 1 FROM folder_files WHERE folder = ? AND name = ? AND sha256 = ? AND published)",
                    arguments: arguments) == true
                else { return .success(false) }
                do throws(ConcordError) {
                    try place()
                    return .success(true)
                } catch {
                    try db.execute(sql: "DELETE FROM folder_files WHERE folder = ? AND name = ? AND sha256 = ?", arguments: arguments)
                    return .failure(error)
                }
            }
        }
        return try placed.get()
    }

    /// Whether this replica published a file named `name` with these contents, in any shared
    /// folder: a folder moved or copied whole keeps its files' names and bytes, and they are still
    /// the files this replica wrote (SPEC.md §14, "Serials").
    package func published(name: String, sha256: [UInt8]) throws(ConcordError) -> Bool {
        try guarded {
            try read { db in
                try Bool.fetchOne(
                    db, sql: "SELECT EXISTS (SELECT 1 FROM folder_files WHERE name = ? AND sha256 = ? AND published)",
                    arguments: [name, Data(sha256)]) ?? false
            }
        }
    }

    /// Records that files this replica published are its own no more (one it could not delete once
    /// coalesced): each only if it is still recorded with the same hash.
    package func disownFolderFiles(_ files: [FolderFile]) throws(ConcordError) {
        try write(files, sql: "UPDATE folder_files SET published = 0 WHERE folder = ? AND name = ? AND sha256 = ?") { file in
            [file.folder, file.name, Data(file.sha256)]
        }
    }

    /// Forgets files that are gone from their folder, or whose contents are no longer those
    /// recorded: each only if it is still recorded with the same hash, so that what another
    /// process of this replica has recorded since is kept, and if `condition`, asked inside the
    /// transaction, holds for it (a file found missing is still missing: `placeFolderFile`).
    package func forgetFolderFiles(_ files: [FolderFile], if condition: (FolderFile) -> Bool = { _ in true }) throws(ConcordError) {
        try write(files, where: condition, sql: "DELETE FROM folder_files WHERE folder = ? AND name = ? AND sha256 = ?") { file in
            [file.folder, file.name, Data(file.sha256)]
        }
    }

    /// Runs `sql` once per file for which `condition` holds in the transaction, with the arguments
    /// `arguments` gives, in one transaction.
    private func write(
        _ files: [FolderFile], where condition: (FolderFile) -> Bool = { _ in true }, sql: String, arguments: (FolderFile) -> StatementArguments
    ) throws(ConcordError) {
        guard !files.isEmpty else { return }
        try guarded {
            try write { db in
                try prepareWrite(db)
                let statement = try db.cachedStatement(sql: sql)
                for file in files where condition(file) { try statement.execute(arguments: arguments(file)) }
            }
        }
    }

    /// The highest serial this replica has published, or taken for a file it was about to
    /// publish, in `folder` (0 if none). Kept per replica id, so a store forked (`init --fork`)
    /// starts its new id's serials afresh.
    package func lastPublishedSerial(in folder: String) throws(ConcordError) -> Int {
        try guarded {
            try read { db in
                try Int.fetchOne(
                    db, sql: "SELECT last FROM folder_serials WHERE folder = ? AND replica = ?", arguments: [folder, Data(replicaID.bytes)]) ?? 0
            }
        }
    }

    /// Takes the next serial for a file of this replica in `folder`: the smallest above every one
    /// it took before that is not in `taken` (names someone else holds), recorded before the file
    /// is written, so that no two processes of this replica, and no crash, ever give two files
    /// one name (SPEC.md §14). Nil if it would exceed `maximum`.
    package func takeSerial(in folder: String, passing taken: Set<Int>, maximum: Int) throws(ConcordError) -> Int? {
        try guarded {
            try write { db in
                try prepareWrite(db)
                let replica = Data(replicaID.bytes)
                var serial = try Int.fetchOne(
                    db, sql: "SELECT last FROM folder_serials WHERE folder = ? AND replica = ?", arguments: [folder, replica]) ?? 0
                repeat { serial += 1 } while taken.contains(serial)
                guard serial <= maximum else { return nil }
                try db.execute(
                    sql: "INSERT OR REPLACE INTO folder_serials (folder, replica, last) VALUES (?, ?, ?)", arguments: [folder, replica, serial])
                return serial
            }
        }
    }
}
