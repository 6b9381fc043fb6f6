import ArgumentParser
import ConcordCore
import ConcordExchange
import ConcordStore
import Foundation

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Create the store and print its replica id.")
    @OptionGroup var store: StoreOptions
    @Option(help: "A name for this replica (shown by status).") var name: String?

    func run() throws {
        let created = try ConcordStore.create(at: store.resolvedPath, name: name)
        say(created.replicaID.hex)
    }
}

struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show one reminder or note.")
    @OptionGroup var store: StoreOptions
    @Argument(help: "The record's id or a unique prefix.") var id: String
    @OptionGroup var output: JSONFlag

    func run() throws {
        let store = try store.open()
        let ref = try store.resolve(id)
        switch ref.kind {
        case .reminder:
            guard let reminder = try store.reminder(ref.id) else { throw StoreError(.notFound, "no reminder with id \(id)") }
            say(output.json ? reminder.json.canonical : Output.details(of: reminder))
        case .note:
            guard let note = try store.note(ref.id) else { throw StoreError(.notFound, "no note with id \(id)") }
            say(output.json ? note.json.canonical : Output.details(of: note))
        default:
            guard let state = try store.state(of: ref) else { throw StoreError(.notFound, "no record with id \(id)") }
            say(ConcordCore.Dump.json(of: state).canonical)
        }
    }
}

struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the whole replicated state as canonical JSON.",
        discussion: "Replicas that hold the same operations print byte-identical dumps.")
    @OptionGroup var store: StoreOptions

    func run() throws {
        say(try store.open().dump())
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the replica, its counts and its version vector.")
    @OptionGroup var store: StoreOptions
    @OptionGroup var output: JSONFlag

    func run() throws {
        let status = try store.open().status()
        say(output.json ? Output.json(of: status).canonical : Output.text(of: status))
    }
}

struct Log: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the newest operations.")
    @OptionGroup var store: StoreOptions
    @Option(help: "How many (default 20).") var limit = 20
    @OptionGroup var output: JSONFlag

    func validate() throws {
        guard limit >= 1 else { throw ValidationError("--limit must be at least 1") }
    }

    func run() throws {
        let operations = try store.open().recentOperations(limit: limit)
        if output.json {
            say(JSON.array(operations.map(\.json)).canonical)
        } else {
            operations.forEach { say(Output.text(of: $0)) }
        }
    }
}

struct Merge: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Merge other stores and bundles into this one.",
        discussion: """
            Each PATH is a store or a bundle, told apart by its content. Stores are opened read-only \
            and never modified. Everything is merged in one transaction: all of it, or (if any file \
            is damaged) none.
            """)
    @OptionGroup var store: StoreOptions
    @Argument(help: "Stores and bundles to merge from.") var paths: [String]

    func validate() throws {
        if paths.isEmpty { throw ValidationError("give at least one store or bundle to merge") }
    }

    func run() throws {
        let target = try store.open()
        var stores: [ConcordStore] = []
        var bundles: [(path: String, reader: BundleReader<BundleSource<FileSource>>)] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw ExchangeError(.io, "no store or bundle at \(path)")
            }
            guard !isDirectory.boolValue else {
                throw ExchangeError(.invalidInput, "\(path) is a directory, not a Concord store or bundle")
            }
            switch FileKind.of(path: path) {
            case .store: stores.append(try ConcordStore.open(at: path, readOnly: true))
            case .bundle: bundles.append((path, try ConcordStore.bundleReader(at: path, key: nil)))
            // Opened with this store's key: a bundle it cannot authenticate is refused before anything is merged.
            case .encryptedBundle: bundles.append((path, try ConcordStore.bundleReader(at: path, key: try target.syncKey())))
            case .other: throw ExchangeError(.invalidInput, "\(path) is not a Concord store or bundle")
            }
        }
        let since = try target.versionVector()
        let report = try target.merge { ingest in
            for other in stores { try other.forEachOperation(since: since, ingest) }
            for index in bundles.indices {
                do {
                    try bundles[index].reader.forEachOperation(ingest)
                } catch let error as BundleError {
                    throw FileInputError(path: bundles[index].path, reason: error.description)
                }
            }
        }
        let replicas = report.newOperations.count
        say("merged \(report.newOperationCount) new operation\(report.newOperationCount == 1 ? "" : "s") from \(replicas) replica\(replicas == 1 ? "" : "s")")
        if let far = report.farFutureTimestamp { warnFarFuture(far) }
    }
}

func warnFarFuture(_ timestamp: Timestamp) {
    warn("warning: merged a timestamp from \(CivilTime(millis: Int64(timestamp.physicalMillis)).iso8601), more than a day ahead of this machine's clock; this replica's clock now follows it (SPEC.md, \"Clock\")")
}

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the store: SQLite's integrity and Concord's invariants. Changes nothing.",
        discussion: """
            Checks that the log decodes and its runs do not overlap, that the version vector matches \
            the log, that the clock is ahead of every logged timestamp, and that every record's \
            materialized state equals a replay of the log. Exits 0 when the store is sound; otherwise \
            prints each problem on a line and exits 1.
            """)
    @OptionGroup var store: StoreOptions
    @OptionGroup var output: JSONFlag

    func run() throws {
        let path = store.resolvedPath
        let report = try ConcordStore.open(at: path, readOnly: true).verify()
        if output.json {
            say(JSON.object([
                ("sound", .bool(report.isSound)), ("records", .int(Int64(report.records))),
                ("operations", .int(Int64(report.operations))), ("problems", .array(report.problems.map(JSON.string))),
            ]).canonical)
        } else if report.isSound {
            say("sound: \(report.records) records, \(report.operations) operations")
        } else {
            report.problems.forEach(say)
        }
        if !report.isSound {
            throw StoreError(.corrupt, "the store at \(path) has \(report.problems.count) problem\(report.problems.count == 1 ? "" : "s")")
        }
    }
}
