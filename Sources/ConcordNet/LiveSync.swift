import ConcordCore
import ConcordPeer
import ConcordStore
import Foundation
import NIOCore
import NIOPosix

/// What a live client (`PeerClient.live`) reports as it goes.
public enum LiveSyncEvent: Sendable, Hashable {
    /// The session's exchange is done and it is live: from now on each side pushes what its store
    /// commits. Carries what the exchange moved.
    case live(PeerSummary)
    /// Operations moved so far in the current session, each way (the exchange's included).
    case progress(PeerProgress)
    /// The session ended (`failure` says why, or is `nil` when the peer closed the connection
    /// without a word, as a server killed or a dropped network leaves it); the client connects
    /// again after `reconnectingIn`.
    case disconnected(failure: ConcordError?, reconnectingIn: Duration)
}

extension PeerClient {
    /// Keeps a live session with the peer at `address` (SPEC.md §15.10): each session starts with
    /// the exchange from version vectors, then each side pushes the operations its store commits
    /// (by any process) as they land. When a session ends, the client connects again after a
    /// wait (`ReconnectBackoff`) that starts at 0.5 s, doubles at each failed attempt up to 30 s,
    /// varies at random by up to 20% either way, and starts again at 0.5 s after an attempt that
    /// succeeded: its session went live and then heard the peer in its live phase, whatever ended
    /// it. A server that speaks only protocol version 1 refuses version 2 at each attempt, and
    /// gets a one-shot session right after, every 30 s.
    ///
    /// The stream ends when the task iterating it is cancelled (the session under way ends
    /// normally), or throws a failure that would recur: no sync key here, two stores with one
    /// replica id, a clash, an operation too large, a server of a newer protocol version, or a
    /// store file replaced by another (code `replaced`, checked before each attempt).
    public static func live(
        store: ConcordStore, address: PeerAddress,
        configuration: PeerTransportConfiguration = PeerTransportConfiguration()
    ) -> AsyncThrowingStream<LiveSyncEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream<LiveSyncEvent, any Error>.makeStream()
        let task = Task {
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let ending = await keepLive(store: store, address: address, configuration: configuration, group: group) {
                continuation.yield($0)
            }
            try? await group.shutdownGracefully()
            continuation.finish(throwing: ending)
        }
        // Cancelling the task ends the session under way normally (`PeerClient.session`).
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// The sessions of `live`, one after the other, until the task is cancelled (nil) or a
    /// session fails in a way that would recur (that failure).
    private static func keepLive(
        store: ConcordStore, address: PeerAddress, configuration: PeerTransportConfiguration, group: any EventLoopGroup,
        report: @escaping @Sendable (LiveSyncEvent) -> Void
    ) async -> ConcordError? {
        var backoff = ReconnectBackoff(jitter: configuration.reconnectJitter)
        // A server refused this side's version naming an older one: this attempt proposes at most
        // that one (a one-shot session when it is 1).
        var fallback: PeerTransportConfiguration?
        while !Task.isCancelled {
            // A closed store, or another file at the store's path (SPEC.md §9.1), would fail every
            // attempt: a session ended because its store's commits could no longer be followed may be why.
            do {
                try await store.offloadRead { () throws(ConcordError) in
                    try store.ensureOpen()
                    try store.ensureSameFile()
                }
            } catch {
                return error
            }
            let attempt = fallback ?? configuration
            var failure: ConcordError?
            var succeeded = false
            do {
                let record = try await session(
                    store: store, address: address, configuration: attempt, group: group,
                    progress: { report(.progress($0)) }, offersLive: true, onLive: { report(.live($0)) })
                failure = record.failure
                succeeded = record.peerHeardWhileLive
            } catch {
                failure = error
            }
            if Task.isCancelled { break }
            if fallback == nil, let older = PeerClient.olderVersion(after: failure, configuration) {
                // A server of an older build: at once, with its version. The refusal is in clear
                // and may be forged, so the fallback lasts this attempt only.
                fallback = older
                continue
            }
            if let failure, !Self.retries(after: failure) { return failure }
            // After a one-shot session with a server of version 1, the longest wait.
            let oneShot = fallback.map { !PeerProtocol.isLive(PeerProtocol.proposal(live: true, upTo: $0.highestVersion)) } ?? false
            let delay = oneShot ? ReconnectBackoff.longest : backoff.wait(after: succeeded ? .succeeded : .failed)
            fallback = nil
            report(.disconnected(failure: failure, reconnectingIn: delay))
            // `Task.sleep`: between sessions, a wait that ends late only connects later; the
            // timeouts of a session under way ring by its event loop's timers (LivePeerClock).
            try? await Task.sleep(for: delay)
        }
        return nil
    }

    /// Whether a live client connects again after `failure` (SPEC.md §15.10, "A live client").
    static func retries(after failure: ConcordError) -> Bool {
        switch failure.code {
        case .sameReplica, .clash, .operationTooLarge, .noSyncKey, .replaced: false
        case .versionMismatch: ((failure.cause as? ConcordError.PeerVersionMismatch)?.peerVersion ?? 0) <= PeerProtocol.highestVersion
        default: true
        }
    }
}
