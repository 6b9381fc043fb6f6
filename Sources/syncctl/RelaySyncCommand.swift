import ConcordCore
import ConcordRelayClient
import ConcordStore
import Foundation
import Logging

/// `syncctl sync --relay URL [--live]` (SPEC.md §16.5).
enum RelaySyncCommand {
    /// One sync: its warnings on stderr, its summary on stdout.
    static func once(_ sync: RelaySync) async throws {
        let report = try await Stop.withStopSignals { () throws(ConcordError) -> RelaySyncReport in
            // A stop cancels the requests under way: what the relay had already acknowledged is kept.
            try await Stop.cancellingOnStop { () -> Result<RelaySyncReport, ConcordError> in
                do throws(ConcordError) { return .success(try await sync.sync()) } catch { return .failure(error) }
            }.get()
        }
        for warning in report.warnings { warn("warning: \(Advice.line(for: warning))") }
        Sync.print(report.folder, prefix: "synced with \(sync.url): \(report.transfers); ")
    }

    /// Syncs whenever the store or the relay's space changes, until SIGINT or SIGTERM; after
    /// another process's `init --fork`, on the store opened again (`reopen`) as the new replica.
    static func live(
        _ sync: RelaySync, compacting: CompactionSchedule?, reopen: @escaping @Sendable () async throws -> ConcordStore, logger: Logger
    ) async throws {
        guard try await sync.store.syncKey() != nil else { throw ConcordError.noSyncKey(at: sync.store.path) }
        try await Stop.withStopSignals {
            logger.notice("syncing live with \(sync.url); stop with Ctrl-C", metadata: ["relay": "\(sync.url)"])
            try await syncLive(sync, compacting: compacting, reopen: reopen, logger: logger)
        }
        logger.notice("stopped")
    }

    /// `live` until SIGINT or SIGTERM.
    private static func syncLive(
        _ sync: RelaySync, compacting: CompactionSchedule?, reopen: @escaping @Sendable () async throws -> ConcordStore, logger: Logger
    ) async throws {
        var sync = sync
        let url = sync.url
        while !Stop.isStopping {
            let current = sync
            let compaction = compacting.map { BackgroundCompaction(current.store, schedule: $0, logger: logger) }
            let ended = await Stop.cancellingOnStop { () -> Result<ReplicaID?, ConcordError> in
                var (downloaded, uploaded) = (0, 0)
                do {
                    for try await event in current.live() {
                        compaction?.poke()
                        switch event {
                        case .synced(let report):
                            for warning in report.warnings { logger.warning("\(Advice.line(for: warning))", metadata: ["relay": "\(url)"]) }
                            for warning in report.folder.warnings { logger.warning("\(Advice.line(for: warning))", metadata: ["relay": "\(url)"]) }
                            if let far = report.folder.farFutureTimestamp { logger.warning("\(farFutureMessage(far))") }
                            let line = "synced with \(url): \(report.summary)"
                            if report.isUpToDate {
                                logger.debug("\(line)", metadata: ["relay": "\(url)"])
                            } else {
                                logger.info("\(line)", metadata: ["relay": "\(url)"])
                            }
                            downloaded += report.downloadedFiles
                            uploaded += report.uploadedFiles
                            ProgressLine.shared.show("live with \(url) · downloaded \(downloaded) files, uploaded \(uploaded)")
                        case .failed(let error, let delay):
                            let seconds = String(format: "%.1f", delay.seconds)
                            logger.warning("sync with \(url) failed: \(Advice.line(for: error)); trying again in \(seconds) s", metadata: ["relay": "\(url)"])
                            ProgressLine.shared.show("trying \(url) again in \(seconds) s · downloaded \(downloaded) files, uploaded \(uploaded)")
                        case .forked(let replica):
                            return .success(replica)
                        }
                    }
                    return .success(nil)
                } catch {
                    return .failure(error as? ConcordError ?? ConcordError(.local, "\(error)"))
                }
            }
            ProgressLine.shared.clear()
            switch ended {
            case .failure(let error):
                try? await sync.store.close()
                throw PeerCommandError(message: "live sync with \(url) failed: \(Advice.line(for: error))")
            case .success(nil):
                break
            case .success(.some(let replica)):
                let store = try await reopen()
                try? await sync.store.close()
                sync = try RelaySync(store: store, url: url)
                logger.notice("the store is now replica \(replica.hex) ('syncctl init --fork'); syncing on as that replica", metadata: ["replica": "\(replica.hex)"])
                continue
            }
            break
        }
    }
}
