import ArgumentParser

struct Syncctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "syncctl",
        abstract: "Keep reminders and notes in a local Concord replica and sync it with others.",
        discussion: """
            The store is --store PATH, else $SYNCCTL_STORE, else $XDG_DATA_HOME/concord/store.db \
            (~/.local/share/concord/store.db when XDG_DATA_HOME is unset).
            """,
        version: "0.1.0",
        subcommands: [
            Init.self, ReminderCommand.self, NoteCommand.self, Show.self, Dump.self, Status.self, Log.self, Merge.self, Export.self,
            KeyCommand.self, Sync.self, Serve.self, Verify.self, Demo.self, Bench.self,
        ])
}
