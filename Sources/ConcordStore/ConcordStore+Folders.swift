import ConcordCore
import Foundation
import GRDB

/// A bundle file of a shared folder that a store has imported (or published) whole.
public struct ImportedFile: Hashable, Sendable {
    /// The shared folder, as the store knows it (its absolute path).
    public var folder: String
    /// The file's name in the folder.
    public var name: String
    public var size: Int64
    /// The version vector the file's manifest says the folder covers once it is there.
    public var top: VersionVector

    public init(folder: String, name: String, size: Int64, top: VersionVector) {
        self.folder = folder
        self.name = name
        self.size = size
        self.top = top
    }
}

extension ConcordStore {
    /// The files of `folder` this store has imported or published, by name.
    public func importedFiles(in folder: String) throws(StoreError) -> [String: ImportedFile] {
        try guarded {
            try writer.read { db in
                var files: [String: ImportedFile] = [:]
                let rows = try Row.fetchCursor(db, sql: "SELECT name, size, top FROM folder_files WHERE folder = ?", arguments: [folder])
                while let row = try rows.next() {
                    let name: String = try row.column(0)
                    let top: String = try row.column(2)
                    guard let vector = try? JSONDecoder().decode(VersionVector.self, from: Data(top.utf8)) else {
                        throw StoreError(.corrupt, "the record of shared-folder file \(name) is damaged")
                    }
                    files[name] = ImportedFile(folder: folder, name: name, size: try row.column(1), top: vector)
                }
                return files
            }
        }
    }

    /// Records files as imported from their folder (used for files this store publishes itself).
    public func recordImported(_ files: [ImportedFile]) throws(StoreError) {
        try guarded {
            try writer.write { db in
                try prepareWrite(db)
                for file in files { try Self.record(file, db) }
            }
        }
    }

    /// Forgets the files of `folder` not in `present` (they were coalesced or removed).
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

    static func record(_ file: ImportedFile, _ db: Database) throws {
        try db.execute(
            sql: "INSERT OR REPLACE INTO folder_files (folder, name, size, top) VALUES (?, ?, ?, ?)",
            arguments: [file.folder, file.name, file.size, file.top.json.canonical])
    }
}
