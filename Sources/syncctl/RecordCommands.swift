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
            commandName: "delete", abstract: "Delete a \(Kind.kind.name), or every one with --all (they can be restored).",
            discussion: """
                A delete is a tombstone: the record leaves the lists on every replica, but its content \
                stays in every replica's log, and in the shared-folder files and relay uploads that \
                carry it, so that 'restore' can bring it back. To erase the content for good, use \
                '\(Kind.kind.name) purge'.
                """)
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

/// `reminder purge` and `note purge`.
struct PurgeCommand<Kind: CommandKind>: OneShotCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "purge", abstract: "Erase a \(Kind.kind.name)'s content on every replica, for good, or every one's with --all.",
            discussion: """
                A purge erases every value, title, text and tag of the record, here at once and on \
                every replica that syncs it, from their stores and from the shared-folder files and \
                relay uploads they rewrite (SPEC.md §5.7). It cannot be undone: the record cannot be \
                restored, edited or created again. Purging a purged record changes nothing.
                """)
    }

    @OptionGroup var store: StoreOptions
    @Argument(help: "The record's id or a unique prefix (a purged record's full id).") var id: String?
    @Flag(help: "Purge every \(Kind.kind.name) this store holds, deleted ones too.") var all = false

    init() {}

    func validate() throws {
        guard (id == nil) == all else { throw ValidationError("give either an id or --all") }
    }

    func work() throws {
        let store = try store.open()
        guard let id else {
            let count = try store.purgeAll(Kind.kind)
            say("purged \(count) \(Kind.kind.name)\(count == 1 ? "" : "s")")
            return
        }
        try store.purge(try store.resolve(id, kind: Kind.kind))
    }
}

/// `purge --all`: every reminder and every note.
struct Purge: OneShotCommand {
    static let configuration = CommandConfiguration(
        abstract: "Erase every reminder's and note's content on every replica, for good (\"delete all my data\").",
        discussion: """
            Purges every reminder and every note this store holds, deleted ones too, in one \
            transaction, as 'reminder purge' and 'note purge' do each, and prints how many. Records that another replica \
            creates meanwhile are not purged. It cannot be undone.
            """)

    @OptionGroup var store: StoreOptions
    @Flag(help: "Purge every record: required, so that nothing is purged by accident.") var all = false

    init() {}

    func validate() throws {
        guard all else { throw ValidationError("purge erases every record for good; add --all to do it") }
    }

    func work() throws {
        let count = try store.open().purgeAll([.reminder, .note])
        say("purged \(count) record\(count == 1 ? "" : "s")")
    }
}
