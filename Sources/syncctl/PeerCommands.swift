import ArgumentParser
import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordNet
import ConcordPeer
import ConcordStore
import Foundation
import Logging

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve this store to peers that hold its sync key, until SIGINT or SIGTERM.",
        discussion: """
            Each connection is one two-way sync session ('syncctl sync --peer' on the other side); \
            many run at once. Prints one line per session: the peer, operations and bytes each way \
            and the duration, or why it failed. Listens on 127.0.0.1 (this machine only) unless \
            --listen names a wider address, such as 0.0.0.0:7420 for the local network.
            """)
    @OptionGroup var store: StoreOptions
    @Option(help: ArgumentHelp("Where to listen (port 0: any free port, printed).", valueName: "host:port"))
    var listen = "127.0.0.1:\(PeerAddress.defaultPort)"
    @OptionGroup var log: LogOptions
    @OptionGroup var compaction: CompactionOptions

    func validate() throws {
        if PeerAddress(listen) == nil { throw ValidationError("'\(listen)' is not HOST:PORT") }
    }

    func run() async throws {
        let store = try await self.store.open()
        guard let key = try await store.syncKey() else { throw ConcordError.noSyncKey(at: store.path) }
        try await Stop.withStopSignals { [self] in try await serve(store, key: key) }
    }

    /// Serves until SIGINT or SIGTERM: once a second, a look at the store file, its replica and
    /// its key.
    private func serve(_ store: ConcordStore, key: SyncKey) async throws {
        var (store, key) = (store, key)
        var address = PeerAddress(listen)!
        let progress = ServerProgress()
        let logger = log.logger(label: "concord.serve")
        var server = try await start(store, on: &address, progress: progress, logger: logger)
        let schedule = compaction.schedule
        var compaction = schedule.map { BackgroundCompaction(store, schedule: $0, logger: logger) }
        // Each session uses the key the store holds when it starts (SPEC.md §15.1): this is the
        // key now, until `key generate --force` or `key import --force` replaces it.
        logger.notice("serving \(store.path) on \(address) (sync key \(key.id)); stop with Ctrl-C", metadata: ["store": "\(store.path)", "address": "\(address)", "key": "\(key.id)"])
        // Every second, or at once when the signal arrives.
        while await !Stop.pause(for: .seconds(1)) {
            compaction?.poke()
            // Another process may make the store another replica (`init --fork`, SPEC.md §9.1):
            // the store object then refuses every batch, so the server opens the store again and
            // serves on, on the same address, as the new replica. Or replace the store file.
            do {
                let looked = store
                // Through the writing connection (`ensureNotCopied` reads the store's own file).
                let now = try await looked.offload { () throws(ConcordError) in
                    try looked.ensureNotCopied()
                    return try looked.syncKey()
                }
                if let now, now.id != key.id {
                    key = now
                    logger.notice("the store's sync key is now \(key.id); peers with the old key are refused", metadata: ["key": "\(key.id)"])
                }
            } catch let error where error.code == .forked {
                // The new store first: if it cannot be opened now, the server goes on (refusing
                // batches, each session saying why) and the next look tries again.
                guard let reopened = try? await self.store.open() else { continue }
                await server.stop()
                try? await store.close()
                store = reopened
                server = try await start(store, on: &address, progress: progress, logger: logger)
                compaction = schedule.map { BackgroundCompaction(store, schedule: $0, logger: logger) }
                logger.notice("the store is now replica \(store.replicaID.hex) ('syncctl init --fork'); serving on as that replica", metadata: ["replica": "\(store.replicaID.hex)"])
            } catch let error where error.code == .replaced {
                // Another file at the path (SPEC.md §9.1): peers' batches would go into a file
                // no other process finds there, and whatever is there now was not asked to be
                // served. The sessions under way end as at a stop, and so does the server.
                await server.stop()
                try? await store.close()
                throw error
            } catch {
                // A copy, or a store that cannot be read now: each session says why.
            }
        }
        await server.stop()
        logger.notice("stopped")
    }

    /// Starts a server of `store` on `address`, and sets `address` to the one it bound (its port
    /// when port 0 was asked for).
    private func start(_ store: ConcordStore, on address: inout PeerAddress, progress: ServerProgress, logger: Logger) async throws -> PeerServer {
        // The server logs each session's line itself, with syncctl's advice.
        let server = PeerServer(
            store: store, configuration: .syncctl, logger: logger, onProgress: progress.update,
            onSession: { record in
                progress.ended(record.peer)
                if let far = record.farFutureTimestamp { logger.warning("\(farFutureMessage(far))", metadata: ["peer": "\(record.peer)"]) }
            })
        let bound = try await server.start(host: address.host, port: address.port)
        address = bound
        return server
    }
}

/// The progress line of a server: its sessions under way and what they moved.
final class ServerProgress: Sendable {
    private let state = LockedState<[String: PeerProgress]>([:])

    func update(_ progress: PeerProgress) {
        let line = state.withLock { sessions -> String in
            sessions[progress.peer] = progress
            let received = sessions.values.reduce(0) { $0 + $1.operationsReceived }
            let sent = sessions.values.reduce(0) { $0 + $1.operationsSent }
            return "\(sessions.count) session\(sessions.count == 1 ? "" : "s"): received \(received) operations, sent \(sent)"
        }
        ProgressLine.shared.update { line }
    }

    func ended(_ peer: String) {
        state.withLock { _ = $0.removeValue(forKey: peer) }
    }
}

/// `syncctl sync --peer HOST:PORT`.
enum PeerSync {
    static func run(store: ConcordStore, address: PeerAddress) async throws {
        guard try await store.syncKey() != nil else { throw ConcordError.noSyncKey(at: store.path) }
        let record = try await PeerClient.sync(store: store, address: address, configuration: .syncctl) { progress in
            ProgressLine.shared.update {
                "received \(progress.operationsReceived) operations (\(progress.bytesReceived / 1000) kB), sent \(progress.operationsSent) (\(progress.bytesSent / 1000) kB)"
            }
        }
        ProgressLine.shared.clear()
        if let far = record.farFutureTimestamp { warnFarFuture(far) }
        let summary = record.summary
        if let failure = record.failure {
            let kept = summary.operationsReceived > 0 && record.newOperations > 0
                ? " (the \(record.newOperations) operations received before it are kept)" : ""
            throw PeerCommandError(message: "sync with \(address) failed: \(Advice.line(for: failure))\(kept)")
        }
        let moved = summary.operationsReceived == 0 && summary.operationsSent == 0
            ? "up to date"
            : "received \(summary.operationsReceived) operation\(summary.operationsReceived == 1 ? "" : "s"), sent \(summary.operationsSent)"
        say("synced with \(address): \(moved) (\(summary.bytesReceived) bytes in, \(summary.bytesSent) bytes out, \(String(format: "%.2f", record.duration.seconds)) s)")
    }
}

extension PeerSync {
    /// `syncctl sync --peer HOST:PORT --live`: keeps a live session (SPEC.md §15.10) until SIGINT
    /// or SIGTERM, connecting again after each drop. Logs each session's start and end; on a
    /// terminal, a status line shows the connection and the operations moved each way.
    static func live(store: ConcordStore, address: PeerAddress, compacting: CompactionSchedule?, logger: Logger) async throws {
        guard try await store.syncKey() != nil else { throw ConcordError.noSyncKey(at: store.path) }
        let compaction = compacting.map { BackgroundCompaction(store, schedule: $0, logger: logger) }
        let failure = try await Stop.withStopSignals {
            logger.notice("syncing live with \(address); stop with Ctrl-C", metadata: ["peer": "\(address)"])
            return await Stop.cancellingOnStop { () -> ConcordError? in
                // Operations moved by the sessions that have ended, and by the one under way.
                var (earlierReceived, earlierSent) = (0, 0)
                var current: PeerProgress?
                do {
                    for try await event in PeerClient.live(store: store, address: address, configuration: .syncctl) {
                        compaction?.poke()
                        switch event {
                        case .live(let summary):
                            logger.notice(
                                "live with \(address) after receiving \(summary.operationsReceived) operations and sending \(summary.operationsSent)",
                                metadata: ["peer": "\(address)"])
                        case .progress(let progress):
                            current = progress
                        case .disconnected(let failure, let delay):
                            earlierReceived += current?.operationsReceived ?? 0
                            earlierSent += current?.operationsSent ?? 0
                            current = nil
                            let why = failure.map { Advice.line(for: $0) } ?? "the peer closed the session"
                            logger.notice(
                                "disconnected from \(address): \(why); connecting again in \(String(format: "%.1f", delay.seconds)) s",
                                metadata: ["peer": "\(address)"])
                            ProgressLine.shared.show("reconnecting to \(address) in \(String(format: "%.1f", delay.seconds)) s · received \(earlierReceived), sent \(earlierSent)")
                            continue
                        }
                        let (received, sent) = (earlierReceived + (current?.operationsReceived ?? 0), earlierSent + (current?.operationsSent ?? 0))
                        ProgressLine.shared.show("connected to \(address) · received \(received) operations, sent \(sent)")
                    }
                    return nil
                } catch {
                    return error as? ConcordError ?? ConcordError(.local, "\(error)")
                }
            }
        }
        ProgressLine.shared.clear()
        if let failure { throw PeerCommandError(message: "live sync with \(address) failed: \(Advice.line(for: failure))") }
        logger.notice("stopped")
    }
}

extension PeerTransportConfiguration {
    /// The defaults, with failures worded with syncctl's advice: in the server's log, and in
    /// what a side tells its peer (SPEC.md §15.6, §15.8).
    static var syncctl: PeerTransportConfiguration {
        var configuration = PeerTransportConfiguration()
        configuration.describeError = { Advice.line(for: $0) }
        return configuration
    }
}

struct PeerCommandError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
