import ArgumentParser
import ConcordCore
import ConcordStore

struct NoteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "note",
        abstract: "Add, change and list notes.",
        subcommands: [
            Add.self, Edit.self, TagCommand<NoteKind>.self, DeleteCommand<NoteKind>.self, RestoreCommand<NoteKind>.self, PurgeCommand<NoteKind>.self,
            List.self,
        ])

    struct Add: OneShotCommand {
        static let configuration = CommandConfiguration(abstract: "Add a note and print its id.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The title.") var title: String
        @Option(help: "The text.") var body: String = ""
        @Option(name: .customLong("tag"), help: "A tag (repeatable).") var tags: [String] = []
        @Flag(help: "Pin the note.") var pinned = false

        func work() throws {
            let id = try store.open().addNote(NoteDraft(title: title, body: body, tags: tags, isPinned: pinned))
            say(id.hex)
        }
    }

    struct Edit: OneShotCommand {
        static let configuration = CommandConfiguration(abstract: "Change a note.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The note's id or a unique prefix.") var id: String
        @Option var title: String?
        @Option var body: String?
        @Flag(help: "Pin the note.") var pin = false
        @Flag(help: "Unpin the note.") var unpin = false

        func validate() throws {
            if pin, unpin { throw ValidationError("--pin and --unpin cannot be combined") }
            if title == nil, body == nil, !pin, !unpin {
                throw ValidationError("nothing to change: give --title, --body, --pin or --unpin")
            }
        }

        func work() throws {
            let store = try store.open()
            let ref = try store.resolve(id, kind: .note)
            try store.editNote(ref.id, NotePatch(title: title, body: body, isPinned: pin ? true : unpin ? false : nil))
        }
    }

    struct List: OneShotCommand {
        static let configuration = CommandConfiguration(abstract: "List notes (--all: deleted too).")
        @OptionGroup var store: StoreOptions
        @Flag(help: "Include deleted notes.") var all = false
        @OptionGroup var output: JSONFlag

        func work() throws {
            Output.printNotes(try store.open().notes(includeDeleted: all), json: output.json)
        }
    }
}
