import ArgumentParser
import ConcordCore
import ConcordExchange
import ConcordPeer
import ConcordStore

struct Syncctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "syncctl",
        abstract: "Keep reminders and notes in a local Concord replica and sync it with others.",
        discussion: """
            The store is --store PATH, else $SYNCCTL_STORE, else $XDG_DATA_HOME/concord/store.db \
            (~/.local/share/concord/store.db when XDG_DATA_HOME is unset).
            """,
        version: version,
        subcommands: [
            Init.self, ReminderCommand.self, NoteCommand.self, Show.self, Dump.self, Status.self, Log.self, Merge.self, Export.self,
            Changes.self, History.self, Conflicts.self, Resolve.self, KeyCommand.self, ReplicaCommand.self, Sync.self, Serve.self, Relay.self, Verify.self, Import.self, Purge.self, Compact.self, Wipe.self,
            Demo.self, Bench.self,
        ])
}

/// `syncctl --version`: the tool's version, then the version of each format it reads and writes,
/// so that two machines can be compared before they sync (SPEC.md §11).
private let version = """
    syncctl 0.1.0
    store schema \(ConcordStore.schemaVersion)
    bundle format \(BundleFormat.version), encrypted bundle format \(EncryptedBundleFormat.version)
    shared folder layout \(FolderSync.layoutVersion)
    peer protocol \(PeerProtocol.highestVersion)
    dump format \(ConcordCore.Dump.formatVersion)
    """
