import ArgumentParser
import ConcordCore
import ConcordStore
import Foundation

struct ReplicaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replica",
        abstract: "List the replicas this store knows of, or retire one that will not come back.",
        discussion: """
            A compaction drops a tag's remove, with the adds it named, once every replica the \
            store knows of holds it (SPEC.md §5.8). A replica never heard from again (a lost or \
            wiped device) holds that back for good: retire it, from any replica, and the \
            retirement travels like any change. A retired replica that comes back refuses to \
            write or sync until 'syncctl init --fork' makes it a new replica, keeping its data.
            """,
        subcommands: [List.self, Retire.self])

    struct List: OneShotCommand {
        static let configuration = CommandConfiguration(
            abstract: "List every replica the store knows of: what it wrote, when the store last heard from it, and what it lacked.")
        @OptionGroup var store: StoreOptions
        @OptionGroup var output: JSONFlag

        func work() throws {
            let store = try store.open()
            let listing = ReplicaListing(try store.replicas())
            say(output.json ? listing.json.canonical : listing.text)
        }
    }

    struct Retire: OneShotCommand {
        static let configuration = CommandConfiguration(
            abstract: "Retire a replica that will not sync again, so that it no longer holds back dropping removes.",
            discussion: """
                ID is the replica's id, or enough of its first digits to name one replica that \
                'syncctl replica list' lists. A replica cannot retire itself. Retiring a replica \
                that still syncs makes it refuse to write or sync until it runs 'syncctl init --fork'.
                """)
        @OptionGroup var store: StoreOptions
        @Argument(help: ArgumentHelp("The replica's id or the first digits of it.", valueName: "id")) var id: String

        func work() throws {
            let store = try store.open()
            let replica = try ReplicaListing.replica(matching: id, among: try store.replicas())
            say(try store.retire(replica) ? "retired replica \(replica.hex)" : "replica \(replica.hex) was retired already")
        }
    }
}

/// `replica list`'s output (SPEC.md §11).
struct ReplicaListing {
    var replicas: [ReplicaStanding]
    var held: UInt64
    var stable: UInt64

    init(_ replicas: [ReplicaStanding]) {
        self.replicas = replicas
        let own = replicas.first(where: \.isLocal)?.holds ?? VersionVector()
        held = own.entries.values.reduce(0, +)
        stable = ReplicaStanding.stableFrontier(of: replicas).entries.values.reduce(0, +)
    }

    /// How many operations the store holds that `replica` did not when last heard from.
    func lacks(_ replica: ReplicaStanding) -> UInt64? {
        guard let holds = replica.holds, let own = replicas.first(where: \.isLocal)?.holds else { return nil }
        return own.entries.reduce(0) { $0 + ($1.value > holds[$1.key] ? $1.value - holds[$1.key] : 0) }
    }

    var text: String {
        var lines = replicas.map { replica in
            let wrote = "wrote \(replica.wrote) operation\(replica.wrote == 1 ? "" : "s")"
            let standing: String
            if replica.isLocal {
                standing = "this replica; \(wrote)" + (replica.isRetired ? "; retired" : "")
            } else if replica.isRetired {
                standing = "\(wrote); retired"
            } else if let heard = replica.heardAt, let lacks = lacks(replica) {
                let lacking = lacks == 0 ? "holding every operation this store holds" : "lacking \(lacks) operation\(lacks == 1 ? "" : "s") this store holds"
                standing = "\(wrote); last heard from \(CivilTime(millis: Self.millis(heard)).iso8601), \(lacking)"
            } else {
                standing = "\(wrote); never heard from"
            }
            return "\(replica.id.hex)  \(standing)"
        }
        lines.append("stable through \(stable) of the \(held) operations this store holds")
        return lines.joined(separator: "\n")
    }

    var json: JSON {
        .object([
            ("heldOperations", .int(Int64(clamping: held))),
            ("replicas", .array(replicas.map { replica in
                .object([
                    ("heardAt", .instant(replica.heardAt.map(Self.millis))),
                    ("id", .string(replica.id.hex)),
                    ("lacks", lacks(replica).map { .int(Int64(clamping: $0)) } ?? .null),
                    ("local", .bool(replica.isLocal)),
                    ("retired", .bool(replica.isRetired)),
                    ("wrote", .int(Int64(clamping: replica.wrote))),
                ])
            })),
            ("stableOperations", .int(Int64(clamping: stable))),
        ])
    }

    static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    /// The one replica of `replicas` whose id is `text` or starts with it (at least 4 hex digits).
    static func replica(matching text: String, among replicas: [ReplicaStanding]) throws -> ReplicaID {
        let digits = text.lowercased()
        guard digits.count >= 4, digits.count <= 32, digits.allSatisfy(\.isHexDigit) else {
            throw ValidationError("a replica id is 32 hex digits, or at least the first 4 of them, not '\(text)'")
        }
        let matches = replicas.filter { $0.id.hex.hasPrefix(digits) }
        guard let first = matches.first else {
            throw ConcordError(.notFound, "no replica this store knows of has an id starting with \(digits)")
        }
        guard matches.count == 1 else {
            throw ConcordError(.ambiguous, "id \(digits) is ambiguous: it matches replicas \(matches.map(\.id.hex).joined(separator: ", "))")
        }
        return first.id
    }
}
