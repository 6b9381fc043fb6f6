import ConcordCore
import Foundation
import GRDB

/// A bundle file of a shared folder that a store has imported, or published, whole (SPEC.md §14).
public struct ImportedFile: Hashable, Sendable {
    /// The shared folder, as the store knows it (its absolute path).
    public var folder: String
    /// The file's name in the folder.
    public var name: String
    /// What `stat` said of the file when it was read: while it is unchanged, so are its contents
    /// (any write or replacement changes its inode or ctime), and the file is not read again.
    public var identity: String
    /// SHA-256 of the file's bytes: what decides, once `identity` changed, whether the contents did.
    public var sha256: [UInt8]
    /// The id of the sync key the file is sealed with, or nil for a plain bundle.
    public var keyID: [UInt8]?
    /// Exactly the operations the file holds.
    public var holds: SeqRanges

    public init(folder: String, name: String, identity: String, sha256: [UInt8], keyID: [UInt8]?, holds: SeqRanges) {
        self.folder = folder
        self.name = name
        self.identity = identity
        self.sha256 = sha256
        self.keyID = keyID
        self.holds = holds
    }
}

extension ConcordStore {
    /// The files of `folder` this store has imported or published, by name.
    public func importedFiles(in folder: String) throws(StoreError) -> [String: ImportedFile] {
        try guarded {
            try writer.read { db in
                var files: [String: ImportedFile] = [:]
                let rows = try Row.fetchCursor(
                    db, sql: "SELECT name, identity, sha256, key_id, holds FROM folder_files WHERE folder = ?", arguments: [folder])
                while let row = try rows.next() {
                    let name: String = try row.column(0)
                    let hash: Data = try row.column(2)
                    let keyID: Data? = try row.column(3)
                    guard let holds = SeqRanges(try row.column(4) as String) else {
                        throw StoreError(.corrupt, "the record of shared-folder file \(name) is damaged")
                    }
                    files[name] = ImportedFile(
                        folder: folder, name: name, identity: try row.column(1), sha256: [UInt8](hash), keyID: keyID.map { [UInt8]($0) },
                        holds: holds)
                }
                return files
            }
        }
    }

    /// The highest serial this replica has published in `folder` (0 if none): its next file
    /// takes a higher one, whatever other files the folder holds (SPEC.md §14). Kept per replica
    /// id, so a store forked (`init --fork`) starts its new id's serials afresh.
    public func lastPublishedSerial(in folder: String) throws(StoreError) -> Int {
        try guarded {
            try writer.read { db in
                try Int.fetchOne(
                    db, sql: "SELECT last FROM folder_serials WHERE folder = ? AND replica = ?", arguments: [folder, Data(replicaID.bytes)]) ?? 0
            }
        }
    }

    /// Records files as imported from their folder (or published to it, with the serial this
    /// replica gave its file), replacing what was recorded of files of the same names.
    public func recordImported(_ files: [ImportedFile], publishedSerial serial: Int? = nil) throws(StoreError) {
        try guarded {
            try writer.write { db in
                try prepareWrite(db)
                for file in files {
                    try db.execute(
                        sql: "INSERT OR REPLACE INTO folder_files (folder, name, identity, sha256, key_id, holds) VALUES (?, ?, ?, ?, ?, ?)",
                        arguments: [file.folder, file.name, file.identity, Data(file.sha256), file.keyID.map { Data($0) }, file.holds.description])
                }
                if let serial, let folder = files.first?.folder {
                    try db.execute(
                        sql: """
                            INSERT INTO folder_serials (folder, replica, last) VALUES (?, ?, ?)
                            ON CONFLICT (folder, replica) DO UPDATE SET last = max(last, excluded.last)
                            """,
                        arguments: [folder, Data(replicaID.bytes), serial])
                }
            }
        }
    }

    /// Forgets the files of `folder` not in `present` (they were coalesced, removed or lost).
    public func forgetImportedFiles(in folder: String, keeping present: Set<String>) throws(StoreError) {
        try guarded {
            try writer.write { db in
                try prepareWrite(db)
                let known = try String.fetchAll(db, sql: "SELECT name FROM folder_files WHERE folder = ?", arguments: [folder])
                for name in known where !present.contains(name) {
                    try db.execute(sql: "DELETE FROM folder_files WHERE folder = ? AND name = ?", arguments: [folder, name])
                }
            }
        }
    }
}
