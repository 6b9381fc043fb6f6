import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordNet
import ConcordRelayClient
import ConcordStore
import ConcordWire

// Exchange (concord.h, "Exchange"): merges, bundles, shared folders and peers, each returning a
// report in a JSON form of SPEC.md §17.

/// Merges the stores and bundles of a JSON array of paths, as `syncctl merge`.
@_cdecl("concord_merge")
public func concord_merge(
    _ handle: UInt64, _ paths: UnsafePointer<CChar>?, _ report: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let report = try output(report)
        let store = try stores.get(handle)
        let files = try JSONInput.strings(try text(paths, "the paths"), "the paths")
        guard !files.isEmpty else { throw JSONInput.invalid("the paths: give at least one store or bundle to merge") }
        give(Reports.json(of: try store.merge(filesAt: files)).canonical, to: report)
    }
}

/// `CONCORD_EXPORT_ENCRYPTED`.
private let exportEncrypted: UInt32 = 1

/// Writes a bundle of what a peer lacks, as `syncctl export`.
@_cdecl("concord_export")
public func concord_export(
    _ handle: UInt64, _ path: UnsafePointer<CChar>?, _ since: UnsafePointer<CChar>?, _ flags: UInt32,
    _ summary: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let summary = try output(summary)
        guard flags & ~exportEncrypted == 0 else { throw InterfaceError.misuse("unknown flags \(flags) to export") }
        let store = try stores.get(handle)
        let path = try text(path, "the path")
        let vector = try optionalText(since, "the version vector").map { text throws(ConcordError) in try VersionVector(json: text) }
        var key: SyncKey?
        if flags & exportEncrypted != 0 {
            guard let held = try store.syncKey() else { throw ConcordError.noSyncKey(at: store.path) }
            key = held
        }
        let written = try store.exportBundle(to: path, since: vector ?? VersionVector(), encryptingWith: key)
        give(Reports.json(of: written).canonical, to: summary)
    }
}

/// One sync with a shared folder, as `syncctl sync --folder`.
@_cdecl("concord_sync_folder")
public func concord_sync_folder(
    _ handle: UInt64, _ folder: UnsafePointer<CChar>?, _ report: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let report = try output(report)
        let store = try stores.get(handle)
        give(Reports.json(of: try store.sync(folder: try text(folder, "the folder"))).canonical, to: report)
    }
}

/// One two-way session with a peer, as `syncctl sync --peer`.
@_cdecl("concord_sync_peer")
public func concord_sync_peer(
    _ handle: UInt64, _ address: UnsafePointer<CChar>?, _ report: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let report = try output(report)
        let store = try stores.get(handle)
        let peer = try peerAddress(try text(address, "the address"))
        let record = try waitFor { () async throws(ConcordError) in try await PeerClient.sync(store: store, address: peer) }
        // The operations received before a failure are kept; the failure is what the call says.
        if let failure = record.failure { throw failure }
        give(Reports.json(of: record).canonical, to: report)
    }
}

/// The reports' JSON forms (SPEC.md §17, "Exchange").
enum Reports {
    static func json(of report: MergeReport) -> JSON {
        .object([
            ("farFuture", farFuture(report.farFutureTimestamp)),
            ("newOperations", .int(Int64(report.newOperationCount))),
            ("replicas", .int(Int64(report.newOperations.count))),
        ])
    }

    static func json(of summary: BundleSummary) -> JSON {
        .object([
            ("bytes", .int(Int64(summary.bytes))),
            ("operations", .int(Int64(summary.operations))),
            ("sha256", summary.sha256.map { .string($0.hexString) } ?? .null),
        ])
    }

    static func json(of report: FolderSyncReport) -> JSON {
        .object([
            ("coalescedFiles", .int(Int64(report.coalescedFiles))),
            ("farFuture", farFuture(report.farFutureTimestamp)),
            ("importedFiles", .int(Int64(report.importedFiles))),
            ("importedOperations", .int(Int64(report.importedOperations))),
            ("publishedFile", report.publishedFile.map(JSON.string) ?? .null),
            ("publishedOperations", .int(Int64(report.publishedOperations))),
            ("republishedOperations", .int(Int64(report.republishedOperations))),
            ("warnings", warnings(report.warnings)),
        ])
    }

    static func json(of record: PeerSessionRecord) -> JSON {
        .object([
            ("bytesReceived", .int(Int64(record.summary.bytesReceived))),
            ("bytesSent", .int(Int64(record.summary.bytesSent))),
            ("farFuture", farFuture(record.farFutureTimestamp)),
            ("milliseconds", .int(Int64(record.duration.seconds * 1000))),
            ("newOperations", .int(Int64(record.newOperations))),
            ("operationsReceived", .int(Int64(record.summary.operationsReceived))),
            ("operationsSent", .int(Int64(record.summary.operationsSent))),
        ])
    }

    static func json(of report: RelaySyncReport) -> JSON {
        .object([
            ("deletedFiles", .int(Int64(report.deletedFiles))),
            ("downloadedFiles", .int(Int64(report.downloadedFiles))),
            ("folder", json(of: report.folder)),
            ("uploadedFiles", .int(Int64(report.uploadedFiles))),
            ("warnings", warnings(report.warnings)),
        ])
    }

    static func json(of event: LiveSyncEvent) -> JSON {
        switch event {
        case .live(let summary): .object([("event", .string("live"))] + counts(summary.operationsReceived, summary.operationsSent, summary.bytesReceived, summary.bytesSent))
        case .progress(let progress):
            .object([("event", .string("progress"))] + counts(progress.operationsReceived, progress.operationsSent, progress.bytesReceived, progress.bytesSent))
        case .disconnected(let failure, let delay):
            .object([
                ("event", .string("disconnected")),
                ("failure", failure.map(Self.json(of:)) ?? .null),
                ("reconnectingInMilliseconds", .int(Int64(delay.seconds * 1000))),
            ])
        }
    }

    static func json(of event: RelayLiveEvent) -> JSON {
        switch event {
        case .synced(let report): .object([("event", .string("synced")), ("report", json(of: report))])
        case .failed(let failure, let delay):
            .object([("event", .string("failed")), ("failure", json(of: failure)), ("retryingInMilliseconds", .int(Int64(delay.seconds * 1000)))])
        case .forked(let replica): .object([("event", .string("forked")), ("replica", .string(replica.hex))])
        }
    }

    /// An error as a report holds one: its code's name and its message.
    static func json(of error: ConcordError) -> JSON {
        .object([("code", .string(error.code.description)), ("message", .string(escapingControlCharacters(error.message)))])
    }

    private static func warnings(_ warnings: [ConcordError]) -> JSON {
        .array(warnings.map(json(of:)))
    }

    private static func counts(_ received: Int, _ sent: Int, _ bytesReceived: Int, _ bytesSent: Int) -> [(String, JSON)] {
        [
            ("bytesReceived", .int(Int64(bytesReceived))), ("bytesSent", .int(Int64(bytesSent))),
            ("operationsReceived", .int(Int64(received))), ("operationsSent", .int(Int64(sent))),
        ]
    }

    /// A timestamp more than a day ahead of this machine's clock that a merge took in (SPEC.md §3),
    /// as an instant, or null.
    private static func farFuture(_ timestamp: Timestamp?) -> JSON {
        timestamp.map { .string(CivilTime(millis: Int64($0.physicalMillis)).iso8601) } ?? .null
    }
}
