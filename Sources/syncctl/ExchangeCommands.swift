import ArgumentParser
import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordNet
import ConcordRelayClient
import ConcordStore
import Foundation
import Logging

struct Export: OneShotCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a bundle of operations to a file.",
        discussion: """
            With --since, only the operations a peer lacks, given its version vector: the JSON \
            object `syncctl status --json` prints under "versionVector" (or that whole output), \
            inline or in a file.
            """)
    @OptionGroup var store: StoreOptions
    @Argument(help: "The bundle file to write (replaced if it exists).") var file: String
    @Option(help: ArgumentHelp("The peer's version vector, or a file holding it.", valueName: "version-vector"))
    var since: String?
    @Flag(help: "Encrypt the bundle with the store's sync key (SPEC.md §13.1).") var encrypt = false

    func work() throws {
        // `--since` is read before the store is opened: a file read outside SQLite must not be the
        // store's, or its side files, while this process has it open (SPEC.md §9).
        let vector = try since.map(VersionVector.init(argument:)) ?? VersionVector()
        let store = try store.open()
        var key: SyncKey?
        if encrypt {
            guard let stored = try store.syncKey() else { throw ConcordError.noSyncKey(at: store.path) }
            key = stored
        }
        let summary = try store.exportBundle(to: file, since: vector, encryptingWith: key)
        let perOperation = summary.operations == 0 ? 0 : Double(summary.bytes) / Double(summary.operations)
        say("exported \(summary.operations) operation\(summary.operations == 1 ? "" : "s") to \(file) (\(summary.bytes) bytes, \(String(format: "%.1f", perOperation)) bytes per operation)")
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sync with other replicas through a shared folder, a relay, or with a peer over the network.",
        discussion: """
            With --folder: imports every bundle in the folder this store lacks and publishes what the \
            folder lacks. Files that are not bundles, damaged or incomplete are skipped with a warning. \
            With --watch, keeps syncing as the store or the folder changes until SIGINT or SIGTERM. \
            With --peer: one two-way session with a store that 'syncctl serve' serves; both hold the \
            same sync key ('syncctl key'). With --live, the session stays open after that exchange, \
            each side pushing what its store commits as it lands, and connects again by itself after \
            a drop, until SIGINT or SIGTERM. With --relay: one two-way sync through a relay that \
            'syncctl relay' runs, with the store's sync key; the relay holds only bundles sealed with \
            it. With --live, keeps syncing through the relay as the store or the relay's space \
            changes, until SIGINT or SIGTERM.
            """)
    @OptionGroup var store: StoreOptions
    @Option(help: "The shared folder (kept in step by Dropbox, Syncthing, NFS, …).") var folder: String?
    @Option(help: ArgumentHelp("A peer that 'syncctl serve' serves (default port 7420).", valueName: "host:port"))
    var peer: String?
    @Option(help: ArgumentHelp("A relay that 'syncctl relay' runs: http://HOST:PORT (or https://).", valueName: "url"))
    var relay: String?
    @Flag(help: "With --folder: keep syncing until interrupted.") var watch = false
    @Flag(help: "With --peer: keep the session open, pushing changes both ways, until interrupted. With --relay: keep syncing as either side changes.")
    var live = false
    @Option(help: "With --watch: seconds between looks at the store and the folder.") var interval: Double = 2
    @OptionGroup(title: "With --watch or --live") var log: LogOptions
    @OptionGroup(title: "With --watch or --live") var compaction: CompactionOptions

    func validate() throws {
        guard [folder, peer, relay].compactMap({ $0 }).count == 1 else {
            throw ValidationError("give one of --folder DIR, --peer HOST:PORT and --relay URL")
        }
        if relay != nil, watch { throw ValidationError("--watch goes with --folder; --relay URL --live keeps a relay in step") }
        if let relay {
            do throws(ConcordError) {
                _ = try RelayClient.relayURL(relay)
            } catch {
                throw ValidationError(error.message)
            }
        }
        if let peer, PeerAddress(peer) == nil { throw ValidationError("'\(peer)' is not HOST:PORT") }
        if peer != nil, watch { throw ValidationError("--watch goes with --folder, not --peer (--live keeps a peer session open)") }
        if folder != nil, live { throw ValidationError("--live goes with --peer, not --folder (--watch keeps a folder in step)") }
        if log.isGiven, !watch, !live { throw ValidationError("--log-level and --log-format go with --watch or --live") }
        if compaction.isGiven, !watch, !live { throw ValidationError("--compact-after and --keep-history go with --watch or --live") }
        guard interval >= 0.1, interval <= 86_400 else { throw ValidationError("--interval must be from 0.1 to 86400 seconds") }
    }

    func run() async throws {
        if let relay {
            let sync = try RelaySync(store: try await store.open(), url: relay)
            if live {
                let store = store
                try await RelaySyncCommand.live(
                    sync, compacting: compaction.schedule, reopen: { try await store.open() }, logger: log.logger(label: "concord.relay-live"))
            } else {
                try await RelaySyncCommand.once(sync)
            }
            return
        }
        if let peer, let address = PeerAddress(peer) {
            if live {
                try await PeerSync.live(
                    store: try await store.open(), address: address, compacting: compaction.schedule, logger: log.logger(label: "concord.live"))
            } else {
                try await PeerSync.run(store: try await store.open(), address: address)
            }
            return
        }
        let sync = FolderSync(store: try await store.open(), folder: folder!)
        guard watch else {
            let report = try await sync.sync(progress: ProgressLine.shared.folderProgress)
            ProgressLine.shared.clear()
            Self.print(report)
            return
        }
        let logger = log.logger(label: "concord.watch")
        let (options, interval, schedule) = (store, interval, compaction.schedule)
        try await Stop.withStopSignals { [sync] in
            // Said once a stop is taken: whoever stops it on seeing this line gets `stopped`.
            logger.notice("watching \(sync.folder) every \(interval) s; stop with Ctrl-C", metadata: ["folder": "\(sync.folder)"])
            try await Self.watch(
                sync, every: .milliseconds(Int64(interval * 1000)), compacting: schedule, reopen: { try await options.open() }, logger: logger)
        }
        logger.notice("stopped")
    }

    /// Keeps `sync`'s folder in step until SIGINT or SIGTERM; after another process's `init
    /// --fork`, on the store opened again (`reopen`) as the new replica.
    private static func watch(
        _ sync: FolderSync, every: Duration, compacting: CompactionSchedule?, reopen: @escaping @Sendable () async throws -> ConcordStore,
        logger: Logger
    ) async throws {
        var sync = sync
        while !Stop.isStopping {
            // Another process may make the store another replica (`init --fork`, SPEC.md §9.1):
            // the watch ends, and is started again on the store opened again. A store file
            // replaced by another ends it for good: whatever is at the path now (a new store, a
            // restored copy, nothing) is not the store it was asked to keep in step.
            let watched = sync
            let ended = await Stop.cancellingOnStop { () -> WatchEnd in
                for await event in watched.watch(every: every, compacting: compacting, logger: logger, describeError: { Advice.line(for: $0) }) {
                    switch event {
                    case .synced(let report):
                        if let far = report.farFutureTimestamp { logger.warning("\(farFutureMessage(far))") }
                    case .failed:
                        break  // logged by the watch, and tried again at its next look
                    case .forked:
                        return .forked
                    case .replaced(let error):
                        return .replaced(error)
                    }
                }
                return .stopped
            }
            if case .replaced(let error) = ended {
                try? await sync.store.close()
                throw error
            }
            guard case .forked = ended else { break }
            guard let store = try? await reopen() else {
                // Tried again at the next look.
                if await Stop.pause(for: every) { break }
                continue
            }
            try? await sync.store.close()
            sync = FolderSync(store: store, folder: sync.folder)
            logger.notice("the store is now replica \(store.replicaID.hex) ('syncctl init --fork'); watching on as that replica", metadata: ["replica": "\(store.replicaID.hex)"])
        }
    }

    /// Why a folder watch ended.
    private enum WatchEnd {
        case stopped, forked, replaced(ConcordError)
    }

    static func print(_ report: FolderSyncReport, prefix: String = "") {
        for warning in report.warnings { warn("warning: \(Advice.line(for: warning))") }
        if let far = report.farFutureTimestamp { warnFarFuture(far) }
        say(prefix + report.summary)
    }
}

/// A one-line progress display on standard error, shown only when it is a terminal. Safe to use
/// from several threads (a server's sessions).
final class ProgressLine: Sendable {
    static let shared = ProgressLine()
    private let enabled = isatty(STDERR_FILENO) == 1
    /// Whether a line is shown, and when it was; the line is written to stderr with the lock
    /// held too, so that lines from several threads never interleave.
    private let state = LockedState<(shown: Bool, lastShown: ContinuousClock.Instant)>((false, .now - .seconds(1)))

    func show(_ text: String) {
        guard enabled else { return }
        state.withLock { state in
            FileHandle.standardError.write(Data("\r\u{1B}[K\(text)".utf8))
            state = (true, .now)
        }
    }

    /// Shows `text()` unless a line was shown less than 0.1 s ago (for frequent updates).
    func update(_ text: () -> String) {
        guard enabled, state.withLock({ ContinuousClock.now - $0.lastShown >= .milliseconds(100) }) else { return }
        show(text())
    }

    func clear() {
        guard enabled else { return }
        state.withLock { state in
            guard state.shown else { return }
            FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
            state.shown = false
        }
    }

    func folderProgress(_ progress: SyncProgress) {
        switch progress {
        case let .importing(file, total, name): show("importing \(file)/\(total) \(name)")
        case .publishing: show("publishing")
        case let .coalescing(files): show("merging \(files) of this replica's files into one")
        }
    }
}
