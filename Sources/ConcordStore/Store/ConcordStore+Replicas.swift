import ConcordCore
import Foundation
import GRDB

/// One replica as a store knows it (SPEC.md §5.8, "Stable removes"): what it wrote, what it was
/// last known to hold, and whether it was retired.
public struct ReplicaStanding: Hashable, Sendable {
    /// The replica's id.
    public var id: ReplicaID
    /// Whether it is the store's own replica.
    public var isLocal: Bool
    /// How many of its operations the store holds without a gap (its version vector's entry).
    public var wrote: UInt64
    /// The version vector it was last known to hold (the join of every one it sent or
    /// published); nil when the store never heard from it. The store's own for the local replica.
    public var holds: VersionVector?
    /// When the store last heard from it, by the store's wall clock; nil for the local replica
    /// and for one never heard from.
    public var heardAt: Date?
    /// Whether a `replica` record retires it.
    public var isRetired: Bool

    /// The seqs that every replica of `replicas` but a retired one is known to hold: the meet of
    /// the local replica's vector and of what each other one holds (one never heard from holds
    /// what it wrote). `ConcordStore.stableFrontier()`.
    public static func stableFrontier(of replicas: [ReplicaStanding]) -> VersionVector {
        guard var frontier = replicas.first(where: \.isLocal)?.holds else { return VersionVector() }
        for replica in replicas where !replica.isLocal && !replica.isRetired {
            frontier.formMeet(replica.holds ?? VersionVector([replica.id: replica.wrote]))
        }
        return frontier
    }
}

extension ConcordStore {
    /// Every replica the store knows of: itself, every author of an operation it holds, and every
    /// replica it heard from, in id order (SPEC.md §5.8).
    public func replicas() throws(ConcordError) -> [ReplicaStanding] {
        try guarded { try read { db in try Self.replicas(db, local: replicaID) } }
    }

    /// The seqs every replica the store knows of holds, as far as it knows: the meet of its
    /// version vector and of what each replica that is not retired is known to hold (an author
    /// never heard from holds its own operations). A remove at or below it, with the adds it
    /// named, is held everywhere (SPEC.md §5.8, "Stable removes").
    public func stableFrontier() throws(ConcordError) -> VersionVector {
        ReplicaStanding.stableFrontier(of: try replicas())
    }

    /// Whether the store holds its own retirement: it then takes no local write and no sync
    /// until it continues under a new id (`syncctl init --fork`, SPEC.md §5.8).
    public func isRetired() throws(ConcordError) -> Bool {
        try state(of: .replica(replicaID))?.retires == true
    }

    /// Throws `retired` if the store holds its own retirement: a sync (a folder's, a peer
    /// session, a relay's) starts with it.
    package func ensureNotRetired() throws(ConcordError) {
        guard try isRetired() else { return }
        throw ConcordError(.retired, ChangeError.retired(replicaID).description, cause: ChangeError.retired(replicaID))
    }

    /// Retires `replica`: writes the `replica` record that says so, which travels like any
    /// operation (SPEC.md §5.8, "Retiring a replica"). Refused for the store's own replica and
    /// for one it does not know of.
    /// - Returns: false when the replica was retired already (nothing is written).
    @discardableResult
    public func retire(_ replica: ReplicaID) throws(ConcordError) -> Bool {
        guard replica != replicaID else { throw ConcordError(.invalidChange, ChangeError.retiringItself.description, cause: ChangeError.retiringItself) }
        guard let standing = try replicas().first(where: { $0.id == replica }) else {
            throw ConcordError(.notFound, "replica \(replica.hex) is unknown to this store: it wrote nothing the store holds, and no sync heard from it")
        }
        guard !standing.isRetired else { return false }
        return try !perform(.retire, on: .replica(replica)).isEmpty
    }

    /// Where removes were dropped as stable, as far as the store knows: here, or by a replica whose
    /// export it merged (SPEC.md §5.8, "Stable removes"). An export to a store whose version
    /// vector does not hold it claims every compacted seq.
    public func droppedStableThrough() throws(ConcordError) -> VersionVector {
        try guarded { try read { db in try Self.droppedStableThrough(db) } }
    }

    static func droppedStableThrough(_ db: Database) throws -> VersionVector {
        guard let text = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'dropped_stable_through'") else { return VersionVector() }
        return try decodeVector(text)
    }

    /// Joins `vector` into `meta.dropped_stable_through`, in the transaction of `db`.
    static func joinDroppedStableThrough(_ vector: VersionVector, _ db: Database) throws {
        guard !vector.entries.isEmpty else { return }
        var joined = try droppedStableThrough(db)
        guard !joined.covers(vector) else { return }
        joined.merge(vector)
        try db.execute(
            sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('dropped_stable_through', ?)", arguments: [joined.json.canonical])
    }

    /// Notes what each replica of `vectors` holds (its vector, as it sent or published it), joined
    /// with what was known of it, and joins what `dropped` says of removes dropped as stable, in
    /// one transaction; the store's own replica is skipped.
    package func learn(_ vectors: [(replica: ReplicaID, holds: VersionVector)], dropped: VersionVector = VersionVector()) throws(ConcordError) {
        let vectors = vectors.filter { $0.replica != replicaID && !$0.holds.entries.isEmpty }
        guard !vectors.isEmpty || !dropped.entries.isEmpty else { return }
        let heard = Int64(clamping: environment.wallClock())
        try guarded {
            try write { db in
                try prepareWrite(db)
                try Self.joinDroppedStableThrough(dropped, db)
                for (replica, vector) in vectors {
                    var joined = vector
                    if let text = try String.fetchOne(db, sql: "SELECT vector FROM replica_vectors WHERE replica = ?", arguments: [Data(replica.bytes)]) {
                        joined.merge(try Self.decodeVector(text))
                    }
                    try db.execute(
                        sql: "INSERT OR REPLACE INTO replica_vectors (replica, vector, heard) VALUES (?, ?, ?)",
                        arguments: [Data(replica.bytes), joined.json.canonical, heard])
                }
            }
        }
    }

    static func replicas(_ db: Database, local: ReplicaID) throws -> [ReplicaStanding] {
        let own = try ReplicaDirectory(db).versionVector
        var standings: [ReplicaID: ReplicaStanding] = [:]
        standings[local] = ReplicaStanding(id: local, isLocal: true, wrote: own[local], holds: own, heardAt: nil, isRetired: false)
        for (author, seq) in own.entries where author != local {
            standings[author] = ReplicaStanding(id: author, isLocal: false, wrote: seq, holds: nil, heardAt: nil, isRetired: false)
        }
        for row in try Row.fetchAll(db, sql: "SELECT replica, vector, heard FROM replica_vectors") {
            guard let id = ReplicaID(bytes: row[0] as Data), id != local else { continue }
            let vector = try decodeVector(row[1])
            let heard = Date(timeIntervalSince1970: Double(row[2] as Int64) / 1000)
            standings[id, default: ReplicaStanding(id: id, isLocal: false, wrote: own[id], holds: nil, heardAt: nil, isRetired: false)].holds = vector
            standings[id]!.heardAt = heard
        }
        let directory = try ReplicaDirectory(db)
        for data in try Data.fetchAll(db, sql: "SELECT id FROM other_records WHERE kind = ?", arguments: [Int64(RecordKind.replica.rawValue)]) {
            guard let id = RecordID(bytes: data), let state = try RecordRows.load(RecordRef(kind: .replica, id: id), db, directory), state.retires else { continue }
            let replica = ReplicaID(high: id.high, low: id.low)
            standings[replica, default: ReplicaStanding(id: replica, isLocal: replica == local, wrote: own[replica], holds: nil, heardAt: nil, isRetired: false)].isRetired = true
        }
        return standings.values.sorted { $0.id < $1.id }
    }


    static func decodeVector(_ text: String) throws -> VersionVector {
        guard let vector = try? JSONDecoder().decode(VersionVector.self, from: Data(text.utf8)) else {
            throw ConcordError(.corrupt, "replica_vectors holds a vector that is not one: \(text)")
        }
        return vector
    }
}
