import ConcordCore

// A version vector in bundle manifests and peer messages (SPEC.md §13, §15.5): a varint count n,
// then n × (id replica, varint seq). Written in ascending replica id order without seq 0; read in
// any order, seq 0 ignored, a replica named twice refused.

extension ByteWriter {
    package mutating func versionVector(_ vector: VersionVector) {
        let entries = vector.sorted
        varint(UInt64(entries.count))
        for (replica, seq) in entries {
            identifier(replica)
            varint(seq)
        }
    }
}

extension ByteReader {
    package mutating func versionVector() throws(DecodeError) -> VersionVector {
        let count = try varint()
        guard count <= UInt64(remaining / 17) else { throw .truncated }
        var entries: [ReplicaID: UInt64] = [:]
        for _ in 0..<count {
            let replica: ReplicaID = try identifier()
            guard entries.updateValue(try varint(), forKey: replica) == nil else {
                throw .malformed("a version vector names a replica twice")
            }
        }
        return VersionVector(entries)
    }
}
