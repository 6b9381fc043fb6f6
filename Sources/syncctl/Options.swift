import ArgumentParser
import ConcordCore
import ConcordStore
import Foundation

struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("store"), help: ArgumentHelp("The store file.", valueName: "path"))
    var path: String?

    /// `--store`, else `SYNCCTL_STORE`, else `$XDG_DATA_HOME/concord/store.db`.
    var resolvedPath: String {
        if let path { return path }
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["SYNCCTL_STORE"], !path.isEmpty { return path }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        let dataHome = environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (home as NSString).appendingPathComponent(".local/share")
        return (dataHome as NSString).appendingPathComponent("concord/store.db")
    }

    /// Opens the store, for a one-shot command's `work()` (which runs off the tasks' threads).
    func open() throws -> ConcordStore {
        try ConcordStore.open(at: resolvedPath, environment: try Self.environment())
    }

    /// `open()` for the commands that sync, serve, follow or wait, off the threads their tasks
    /// share: opening may finish a merge a killed process left (SPEC.md §5.6), which takes as long
    /// as the merge's last batch.
    func open() async throws -> ConcordStore {
        try await ConcordStore.open(at: resolvedPath, environment: try Self.environment())
    }

    /// The live environment, with the merge batch of `SYNCCTL_MERGE_BATCH` when it is set.
    static func environment() throws -> StoreEnvironment {
        var environment = StoreEnvironment.live
        if let batch = try mergeBatch() { environment.mergeBatch = batch }
        return environment
    }

    /// The merge batch of `SYNCCTL_MERGE_BATCH=OPERATIONS[,RECORDS]`, nil when it is not set
    /// (SPEC.md §5.6).
    static func mergeBatch() throws -> MergeBatch? {
        guard let text = ProcessInfo.processInfo.environment["SYNCCTL_MERGE_BATCH"], !text.isEmpty else { return nil }
        let numbers = text.split(separator: ",", omittingEmptySubsequences: false).map { Int($0) }
        guard (1...2).contains(numbers.count), numbers.allSatisfy({ ($0 ?? 0) >= 1 }) else {
            throw ValidationError("SYNCCTL_MERGE_BATCH is OPERATIONS or OPERATIONS,RECORDS (positive whole numbers), not '\(text)'")
        }
        return MergeBatch(operations: numbers[0]!, records: numbers.count == 2 ? numbers[1]! : MergeBatch.standard.records)
    }

    /// Moves `--store PATH` / `--store=PATH` given before the first subcommand to the end of the
    /// options (before a `--`, after which everything is positional).
    static func hoistLeadingStoreOption(_ arguments: inout [String]) {
        var index = 0
        var hoisted: [String] = []
        while index < arguments.count, arguments[index].hasPrefix("-") {
            if arguments[index] == "--store", index + 1 < arguments.count {
                hoisted += arguments[index...index + 1]
                arguments.removeSubrange(index...index + 1)
            } else if arguments[index].hasPrefix("--store=") {
                hoisted.append(arguments.remove(at: index))
            } else {
                index += 1
            }
        }
        arguments.insert(contentsOf: hoisted, at: arguments.firstIndex(of: "--") ?? arguments.endIndex)
    }
}

struct JSONFlag: ParsableArguments {
    @Flag(name: .long, help: "Print JSON (SPEC.md, \"JSON output\").")
    var json = false
}

/// A date on the command line: `2026-11-22T09:30:00Z`, with an offset (`+02:00`), without a
/// zone (local time), or a plain date (local midnight).
struct DateArgument: ExpressibleByArgument {
    var date: Date

    init(date: Date) {
        self.date = date
    }

    init?(argument: String) {
        guard let date = Self.parse(argument) else { return nil }
        self.date = date
    }

    /// The date `text` names, as `CivilTime.date(parsing:)` reads it.
    static func parse(_ text: String) -> Date? {
        CivilTime.date(parsing: text)
    }

    static var defaultCompletionKind: CompletionKind { .default }
}

extension Priority: ExpressibleByArgument {
    public init?(argument: String) {
        self.init(name: argument)
    }

    public static var allValueStrings: [String] { ["none", "low", "medium", "high"] }
}

/// One of `hourly`, `daily`, `weekly`, `monthly`.
struct RepeatArgument: ExpressibleByArgument {
    var name: String

    init?(argument: String) {
        guard ["hourly", "daily", "weekly", "monthly"].contains(argument) else { return nil }
        name = argument
    }

    static var allValueStrings: [String] { ["hourly", "daily", "weekly", "monthly"] }
}

/// Writes a line to standard output, at once: `sync --watch` reports each sync as it happens
/// even under a pipe or a log file.
func say(_ text: String) {
    print(text)
    fflush(nil)
}

/// Writes a line to standard error, `syncctl: TEXT`, with its control characters escaped.
func warn(_ text: String) {
    FileHandle.standardError.write(Data("syncctl: \(escapingControlCharacters(text))\n".utf8))
}


/// How `serve`, `sync --watch` and `sync --live` (with a peer or a relay) compact the store by
/// themselves (SPEC.md §5.8, "Compacting by itself").
struct CompactionOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Compact the store by itself once this many operations were logged since the last compaction (or a quarter of those held then, if more), and daily if any were; 0: never.",
        valueName: "operations"))
    var compactAfter: Int?
    @Option(help: ArgumentHelp(
        "The history those compactions keep: the writes of the last N days (30d) or hours (12h), or the last N writes of each field (10).",
        valueName: "history"))
    var keepHistory: String?

    var isGiven: Bool { compactAfter != nil || keepHistory != nil }

    func validate() throws {
        if let compactAfter, compactAfter < 0 { throw ValidationError("--compact-after takes a number of operations (0: never), not \(compactAfter)") }
        if let keepHistory, Compact.history(keepHistory) == nil {
            throw ValidationError("--keep-history takes days (30d), hours (12h) or a number of writes per field (10), not '\(keepHistory)'")
        }
    }

    /// Nil when compactions are off.
    var schedule: CompactionSchedule? {
        let defaults = CompactionSchedule()
        guard compactAfter != 0 else { return nil }
        return CompactionSchedule(
            keeping: keepHistory.flatMap(Compact.history) ?? defaults.keeping, afterOperations: compactAfter ?? defaults.afterOperations)
    }
}
