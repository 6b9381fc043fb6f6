import ArgumentParser
import ConcordCore
import ConcordStore
import Foundation

struct Changes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the changes committed to the store: since a version vector, or as they happen.",
        discussion: """
            Each change is one line: its origin (local, merge or mixed) and the records it changed, \
            as KIND:ID in order. With --json, one JSON object a line, with "origin", "records" and \
            "versions": the version vector reported up to, which --since takes to go on from there \
            missing nothing. --follow keeps printing, whoever commits (syncctl, an app, serve), until \
            SIGINT or SIGTERM; without --since it starts from what the store holds now. After another \
            process's 'init --fork' it says so on stderr and follows on, local meaning the new replica \
            id; it ends with exit 1 if the store file is replaced by another (wiped, restored or \
            moved). Without --follow, --since is required.
            """)
    @OptionGroup var store: StoreOptions
    @Option(help: ArgumentHelp("A version vector, or a file holding it: what was seen already.", valueName: "version-vector"))
    var since: String?
    @Flag(help: "Keep printing changes as they are committed, until SIGINT or SIGTERM.") var follow = false
    @Flag(help: "Print JSON Lines.") var json = false

    func validate() throws {
        guard follow || since != nil else { throw ValidationError("give --since, --follow, or both") }
    }

    func run() async throws {
        // Read before the store is opened, as `export` does (SPEC.md §9).
        let vector = try since.map(VersionVector.init(argument:))
        let store = try await store.open()
        guard follow else {
            let change = try await store.offloadRead { try store.change(since: vector ?? VersionVector()) }
            if let change { Self.print(change, json: json) }
            return
        }
        let json = json
        let replaced = try await Stop.withStopSignals {
            try await Stop.cancellingOnStop { () throws -> ConcordError? in
                for try await event in store.events(since: vector) {
                    switch event {
                    case .changed(let change):
                        Self.print(change, json: json)
                    case .forked(let replica, _):
                        // The same file and history under a new id (SPEC.md §7.1, §9.1): the follower
                        // goes on, `local` now meaning written under the new id. Said on stderr, so
                        // that the changes on stdout stay one kind of line.
                        warn("the store is now replica \(replica.hex) ('syncctl init --fork'); following on as that replica")
                    case .replaced(let error):
                        // Another file at the path (SPEC.md §7.1, §9.1): its history is not the one
                        // printed so far, so the follower ends, and whoever reads it starts again.
                        return error
                    }
                }
                return nil
            }
        }
        if let replaced {
            try? await store.close()
            throw replaced
        }
        try await store.close()
    }

    /// One line for `change`, written at once (a script reads it as it comes).
    static func print(_ change: StoreChange, json: Bool) {
        let line = json
            ? change.json.canonical
            : ([change.origin.name] + change.records.sorted().map { "\($0.kind.name):\($0.id.hex)" }).joined(separator: " ")
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

extension VersionVector {
    /// A version vector given on the command line: the JSON object `syncctl status --json` prints
    /// under "versionVector" (or that whole output), inline or in a regular file.
    init(argument: String) throws {
        let text: String
        if FileManager.default.fileExists(atPath: argument) {
            var status = stat()
            // A FIFO would block the read forever (SPEC.md §12).
            guard stat(argument, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
                throw ConcordError(.invalidInput, "\(argument) is not a regular file")
            }
            guard let contents = FileManager.default.contents(atPath: argument) else { throw ConcordError(.io, "cannot read \(argument)") }
            text = String(decoding: contents, as: UTF8.self)
        } else {
            text = argument
        }
        try self.init(json: text)
    }
}
