import ConcordCore
import Foundation
import GRDB

/// The store-local small integers that stand for replica ids inside rows and log chunks. A
/// replica's index never changes once committed (no row of `replicas` is ever deleted), so a copy
/// of the directory stays right for as long as the store lives.
struct ReplicaDirectory {
    private(set) var indexByID: [ReplicaID: Int64] = [:]
    /// Ids by index: indexes are small integers handed out from 1, so an array serves.
    private var idByIndex: [ReplicaID?] = []
    private(set) var contiguous: [ReplicaID: UInt64] = [:]
    /// The last lookup: most stamps of a batch name the same replica.
    private var lastID: ReplicaID?
    private var lastIndex: Int64 = 0

    init(_ db: Database) throws {
        let rows = try Row.fetchCursor(db, sql: "SELECT idx, id, contiguous FROM replicas")
        while let row = try rows.next() {
            let data: Data = try row.column(1)
            guard let id = ReplicaID(bytes: data) else { throw ConcordError(.corrupt, "a replica row has a malformed id") }
            let index: Int64 = try row.column(0)
            indexByID[id] = index
            setID(id, at: index)
            contiguous[id] = UInt64(clamping: try row.column(2) as Int64)
        }
    }

    /// The index of `id`, registering the replica when it is new. Without `db` (a copy of the
    /// directory, used where the store cannot be written), a new replica throws `Unregistered`.
    mutating func index(of id: ReplicaID, _ db: Database?) throws -> Int64 {
        if id == lastID { return lastIndex }
        if let index = indexByID[id] {
            lastID = id
            lastIndex = index
            return index
        }
        guard let db else { throw Unregistered() }
        try db.execute(sql: "INSERT INTO replicas (id) VALUES (?)", arguments: [Data(id.bytes)])
        let index = db.lastInsertedRowID
        indexByID[id] = index
        setID(id, at: index)
        contiguous[id] = 0
        return index
    }

    /// A replica `index(of:_:)` could not register, having no database.
    struct Unregistered: Error {}

    func id(at index: Int64) throws -> ReplicaID {
        guard index >= 0, index < idByIndex.count, let id = idByIndex[Int(index)] else {
            throw ConcordError(.corrupt, "a record refers to unknown replica #\(index)")
        }
        return id
    }

    private mutating func setID(_ id: ReplicaID, at index: Int64) {
        guard index >= 0, index < 1 << 24 else { return }  // a damaged index is reported by `id(at:)`
        if index >= idByIndex.count { idByIndex += Array(repeating: nil, count: Int(index) - idByIndex.count + 1) }
        idByIndex[Int(index)] = id
    }

    var versionVector: VersionVector { VersionVector(contiguous) }

    mutating func setContiguous(_ seq: UInt64, for id: ReplicaID) {
        contiguous[id] = seq
    }
}

extension Row {
    /// A text column selected as `CAST(column AS BLOB)` (`RecordTable.rowColumns`), as UTF-8:
    /// GRDB decodes text as a C string, which would end it at a NUL. Nil for NULL.
    func text(_ index: Int) throws -> String? {
        let database: DatabaseValue = self[index]
        switch database.storage {
        case .null: return nil
        case .blob(let data): return String(decoding: data, as: UTF8.self)
        default: throw ConcordError(.corrupt, "a text column holds a value of another type")
        }
    }

    /// The value of a column, or a `corrupt` error when the file holds something else there
    /// (a NULL where there must be a value, a value of the wrong type).
    package func column<Value: DatabaseValueConvertible>(_ index: Int) throws -> Value {
        guard index < count else { throw ConcordError(.corrupt, "a row of the store is missing columns") }
        do {
            return try decode(atIndex: index)
        } catch {
            throw ConcordError(.corrupt, "a row of the store is damaged (column \(index): \(error))")
        }
    }
}
