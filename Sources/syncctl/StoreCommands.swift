import ArgumentParser
import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordStore
import Foundation

struct Init: OneShotCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the store and print its replica id.",
        discussion: """
            A store that was copied (to another laptop, or restored from a backup) refuses writes, since \
            the copy and the original would write different operations under one replica id. \
            --fork gives the copy a replica id of its own and keeps its data; --moved keeps the id, for \
            a store that was moved and whose original is no longer used.
            """)
    @OptionGroup var store: StoreOptions
    @Option(help: "A name for this replica (shown by status).") var name: String?
    @Flag(help: "Give an existing store a new replica id, keeping its data (the fix for a copied store).") var fork = false
    @Flag(help: "Declare an existing store moved, not copied: it keeps its replica id.") var moved = false

    func validate() throws {
        guard !(fork && moved) else { throw ValidationError("--fork and --moved exclude each other") }
        guard !(fork || moved) || name == nil else { throw ValidationError("--name is for a new store") }
    }

    func work() throws {
        if fork {
            let (forked, former) = try ConcordStore.fork(at: store.resolvedPath)
            say("\(forked.replicaID.hex) (a new replica; the store was \(former.hex), whose operations it keeps)")
        } else if moved {
            let adopted = try ConcordStore.adoptLocation(at: store.resolvedPath)
            say("\(adopted.replicaID.hex) (the store keeps its replica id at its new location)")
        } else {
            let created = try ConcordStore.create(at: store.resolvedPath, name: name)
            say(created.replicaID.hex)
        }
    }
}

struct Show: OneShotCommand {
    static let configuration = CommandConfiguration(abstract: "Show one reminder or note.")
    @OptionGroup var store: StoreOptions
    @Argument(help: "The record's id or a unique prefix.") var id: String
    @OptionGroup var output: JSONFlag

    func work() throws {
        let store = try store.open()
        let ref = try store.resolve(id)
        switch ref.kind {
        case .reminder:
            guard let reminder = try store.reminder(ref.id) else { throw try store.notFound(ref, named: id) }
            say(output.json ? reminder.json.canonical : Output.details(of: reminder))
        case .note:
            guard let note = try store.note(ref.id) else { throw try store.notFound(ref, named: id) }
            say(output.json ? note.json.canonical : Output.details(of: note))
        default:
            guard let state = try store.state(of: ref) else { throw try store.notFound(ref, named: id) }
            say(ConcordCore.Dump.json(of: state).canonical)
        }
    }
}

struct Dump: OneShotCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the whole replicated state as canonical JSON.",
        discussion: "Replicas that hold the same operations print byte-identical dumps.")
    @OptionGroup var store: StoreOptions

    func work() throws {
        say(try store.open().dump())
    }
}

struct Status: OneShotCommand {
    static let configuration = CommandConfiguration(abstract: "Show the replica, its counts and its version vector.")
    @OptionGroup var store: StoreOptions
    @OptionGroup var output: JSONFlag

    func work() throws {
        let status = try store.open().status()
        say(output.json ? status.json.canonical : Output.text(of: status))
    }
}

struct Log: OneShotCommand {
    static let configuration = CommandConfiguration(abstract: "Show the newest operations.")
    @OptionGroup var store: StoreOptions
    @Option(help: "How many (default 20).") var limit = 20
    @OptionGroup var output: JSONFlag

    func validate() throws {
        guard limit >= 1 else { throw ValidationError("--limit must be at least 1") }
    }

    func work() throws {
        let operations = try store.open().recentOperations(limit: limit)
        if output.json {
            say(JSON.array(operations.map(\.json)).canonical)
        } else {
            operations.forEach { say(Output.text(of: $0)) }
        }
    }
}

struct Merge: OneShotCommand {
    static let configuration = CommandConfiguration(
        abstract: "Merge other stores and bundles into this one.",
        discussion: """
            Each PATH is a store or a bundle, told apart by its content. Stores are opened read-only \
            and never modified. Every file is read and checked whole first, so a damaged file merges \
            nothing of any; then the operations are applied in batches (other writers get the store \
            between them).
            """)
    @OptionGroup var store: StoreOptions
    @Argument(help: "Stores and bundles to merge from.") var paths: [String]

    func validate() throws {
        if paths.isEmpty { throw ValidationError("give at least one store or bundle to merge") }
    }

    func work() throws {
        let report = try store.open().merge(filesAt: paths)
        let replicas = report.newOperations.count
        var line = "merged \(report.newOperationCount) new operation\(report.newOperationCount == 1 ? "" : "s") from \(replicas) replica\(replicas == 1 ? "" : "s")"
        if report.compactedSeqs > 0 { line += " and \(report.compactedSeqs) compacted seq\(report.compactedSeqs == 1 ? "" : "s")" }
        say(line)
        if let far = report.farFutureTimestamp { warnFarFuture(far) }
    }
}

func warnFarFuture(_ timestamp: Timestamp) {
    warn("warning: \(farFutureMessage(timestamp))")
}

func farFutureMessage(_ timestamp: Timestamp) -> String {
    "merged a timestamp from \(CivilTime(millis: Int64(timestamp.physicalMillis)).iso8601), more than a day ahead of this machine's clock; this replica's clock now follows it (SPEC.md, \"Clock\")"
}

struct Compact: OneShotCommand {
    static let configuration = CommandConfiguration(
        abstract: "Drop from the log the operations whose effect later ones give; the state stays exactly.",
        discussion: """
            Drops every edit of a field that a later edit had seen, and every tag add that a remove \
            names, keeping their seqs (SPEC.md, "Compaction"): the dump, the conflicts and what \
            other replicas receive stay the same, and they sync as before. 'history' then shows the \
            writes kept: by default those of the last 30 days (--keep-history). It goes through the \
            records a few hundred per transaction, so other processes write between them; killed, \
            it leaves a sound store. Prints how many operations it dropped. The freed pages are \
            reused by later writes; --vacuum gives them back to the file system now.
            """)
    @OptionGroup var store: StoreOptions
    @Option(help: ArgumentHelp(
        "The history to keep of what could be dropped: the writes of the last N days (30d) or hours (12h), or the last N writes of each field (10); 0 keeps none.",
        valueName: "history"))
    var keepHistory = "30d"
    @Flag(help: "Then give the freed pages back to the file system (VACUUM): other processes' writes wait meanwhile.")
    var vacuum = false
    @OptionGroup var output: JSONFlag

    func validate() throws {
        guard Self.history(keepHistory) != nil else {
            throw ValidationError("--keep-history takes days (30d), hours (12h) or a number of writes per field (10), not '\(keepHistory)'")
        }
    }

    /// `--keep-history`'s value: `Nd`, `Nh`, or a number of writes per field (0: none).
    static func history(_ text: String) -> KeptHistory? {
        if let days = text.wholeMatch(of: /([0-9]{1,5})d/).flatMap({ Int64($0.1) }) { return KeptHistory(newerThan: .seconds(days * 86_400)) }
        if let hours = text.wholeMatch(of: /([0-9]{1,6})h/).flatMap({ Int64($0.1) }) { return KeptHistory(newerThan: .seconds(hours * 3_600)) }
        if let writes = text.wholeMatch(of: /[0-9]{1,6}/).flatMap({ Int($0.0) }) { return KeptHistory(writesPerField: writes) }
        return nil
    }

    func work() throws {
        let opened = try store.open()
        let report = try opened.compact(keeping: Self.history(keepHistory)!)
        let sizes = vacuum ? try opened.vacuum() : nil
        if output.json {
            guard case .object(var members) = report.json else { return }
            if let sizes { members += [("fileBytesBefore", .int(sizes.before)), ("fileBytesAfter", .int(sizes.after))] }
            say(JSON.object(members).canonical)
            return
        }
        let dropped = "dropped \(report.droppedOperations) operation\(report.droppedOperations == 1 ? "" : "s") of \(report.records) record\(report.records == 1 ? "" : "s")"
        say(report.deferred ? dropped + "; another process's merge is under way: run it again once it is done" : dropped)
        if let sizes { say("the store file takes \(sizes.after) bytes, \(sizes.before) before the vacuum") }
    }
}

struct Verify: OneShotCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the store: SQLite's integrity and Concord's invariants. Changes nothing.",
        discussion: """
            Checks that the log decodes and its runs do not overlap, that the version vector matches \
            the log, that the clock is ahead of every logged timestamp, and that every record's \
            materialized state equals a replay of the log. Operations a merge has logged and not yet \
            applied to their records (an interrupted merge, which the next merge finishes) are counted, \
            not problems. Exits 0 when the store is sound; otherwise prints each problem on a line and \
            exits 1.
            """)
    @OptionGroup var store: StoreOptions
    @OptionGroup var output: JSONFlag

    func work() throws {
        let path = store.resolvedPath
        let report = try ConcordStore.open(at: path, readOnly: true).verify()
        if output.json {
            say(JSON.object([
                ("sound", .bool(report.isSound)), ("records", .int(Int64(report.records))),
                ("operations", .int(Int64(report.operations))), ("pendingOperations", .int(Int64(report.pendingOperations))),
                ("problems", .array(report.problems.map(JSON.string))),
            ]).canonical)
        } else if report.isSound {
            say("sound: \(report.records) records, \(report.operations) operations"
                + (report.pendingOperations == 0 ? "" : " (\(report.pendingOperations) of them not yet applied to their records: the next merge applies them)"))
        } else {
            report.problems.forEach(say)
        }
        if !report.isSound {
            throw ConcordError(.corrupt, "the store at \(path) has \(report.problems.count) problem\(report.problems.count == 1 ? "" : "s")")
        }
    }
}
