import ArgumentParser
import ConcordCore
import ConcordStore

/// The kind of record a generic command acts on.
protocol CommandKind {
    static var kind: RecordKind { get }
}

enum ReminderKind: CommandKind {
    static var kind: RecordKind { .reminder }
}

enum NoteKind: CommandKind {
    static var kind: RecordKind { .note }
}

/// `reminder tag` and `note tag`.
struct TagCommand<Kind: CommandKind>: OneShotCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "tag", abstract: "Add or remove a \(Kind.kind.name)'s tags.")
    }

    @OptionGroup var store: StoreOptions
    @Argument(help: "The record's id or a unique prefix.") var id: String
    @Option(name: .customLong("add"), help: "A tag to add (repeatable).") var add: [String] = []
    @Option(name: .customLong("remove"), help: "A tag to remove (repeatable).") var remove: [String] = []

    init() {}

    func validate() throws {
        if add.isEmpty, remove.isEmpty { throw ValidationError("give at least one --add or --remove") }
    }

    func work() throws {
        let store = try store.open()
        try store.tag(try store.resolve(id, kind: Kind.kind), add: add, remove: remove)
    }
}

/// `reminder delete` and `note delete`.
struct DeleteCommand<Kind: CommandKind>: OneShotCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "delete", abstract: "Delete a \(Kind.kind.name), or every one with --all (they can be restored).")
    }

    @OptionGroup var store: StoreOptions
    @Argument(help: "The record's id or a unique prefix.") var id: String?
    @Flag(help: "Delete every \(Kind.kind.name) this store holds; the deletes reach every replica.") var all = false

    init() {}

    func validate() throws {
        guard (id == nil) == all else { throw ValidationError("give either an id or --all") }
    }

    func work() throws {
        let store = try store.open()
        guard let id else {
            let count = try store.deleteAll(Kind.kind)
            say("deleted \(count) \(Kind.kind.name)\(count == 1 ? "" : "s")")
            return
        }
        try store.delete(try store.resolve(id, kind: Kind.kind))
    }
}

/// `reminder restore` and `note restore`.
struct RestoreCommand<Kind: CommandKind>: OneShotCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "restore", abstract: "Restore a deleted \(Kind.kind.name).")
    }

    @OptionGroup var store: StoreOptions
    @Argument(help: "The record's id or a unique prefix.") var id: String

    init() {}

    func work() throws {
        let store = try store.open()
        try store.restore(try store.resolve(id, kind: Kind.kind))
    }
}
