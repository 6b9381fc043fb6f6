import ArgumentParser
import ConcordExchange
import ConcordKeys
import ConcordStore
import Foundation

struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Make, import or show the store's sync key.",
        discussion: """
            Stores that hold the same sync key sync with each other over the network (serve, \
            sync --peer), and encrypt what they publish to a shared folder. The key is kept in the \
            store; the store's files are then readable by their owner only (SPEC.md §15.1).
            """,
        subcommands: [Generate.self, Import.self, Show.self])

    struct Generate: OneShotCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new random sync key for this store and print it.",
            discussion: "Prints the key, to import on your other stores, and its id. Refuses to replace a key the store holds unless --force.")
        @OptionGroup var store: StoreOptions
        @Flag(help: "Replace the store's key (its peers then need the new one).") var force = false

        func work() throws {
            let store = try store.open()
            if !force, let old = try store.syncKey() { throw KeyCommandError.exists(store.path, old, "generate") }
            let key = SyncKey.generate()
            try store.setSyncKey(key, replacing: force)
            say(key.text)
            say("key id \(key.id)")
        }
    }

    struct Import: OneShotCommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract: "Set the store's sync key to one made on another store.",
            discussion: """
                KEY is the text 'syncctl key generate' printed (spaces, dashes and case do not matter); \
                without KEY, it is read from standard input, which keeps it out of the shell's history. \
                Refuses to replace another key the store holds unless --force.
                """)
        @OptionGroup var store: StoreOptions
        @Argument(help: ArgumentHelp("The key, concord-key-1-…", valueName: "key")) var key: [String] = []
        @Flag(help: "Replace another key the store holds.") var force = false

        func work() throws {
            var text = key.joined()
            if key.isEmpty || text == "-" {
                text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            }
            // Parse first: a bad key changes nothing, and the store is not even opened for it.
            let key = try SyncKey(text: text)
            let store = try store.open()
            if let old = try store.syncKey() {
                if old == key {
                    say("the store already holds sync key \(key.id)")
                    return
                }
                if !force { throw KeyCommandError.exists(store.path, old, "import") }
            }
            try store.setSyncKey(key, replacing: force)
            say("imported sync key \(key.id)")
        }
    }

    struct Show: OneShotCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the store's sync key and its id.",
            discussion: "With --id, only the id: it names the key, and can be shown without revealing it.")
        @OptionGroup var store: StoreOptions
        @Flag(help: "Print only the key id.") var id = false

        func work() throws {
            let store = try store.open()
            guard let key = try store.syncKey() else { throw ConcordError.noSyncKey(at: store.path) }
            if !id { say(key.text) }
            say(id ? key.id : "key id \(key.id)")
        }
    }
}

enum KeyCommandError: Error, CustomStringConvertible {
    case exists(String, SyncKey, String)

    var description: String {
        switch self {
        case let .exists(path, key, command):
            "the store at \(path) already holds sync key \(key.id); 'syncctl key \(command) --force' replaces it, and every peer then needs the new key"
        }
    }
}
