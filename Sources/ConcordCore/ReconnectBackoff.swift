import Foundation

/// The waits of a live client between attempts (SPEC.md §15.10, "A live client"; a relay's live
/// client waits the same way, §16.5): a base of 0.5 s
/// that doubles after each wait up to 30 s, each wait varied at random by up to 20% either way,
/// and the base back to 0.5 s after an attempt that succeeded. What counts is what the attempt
/// achieved, not how long it lasted: a flaky network that cuts live sessions must not push the
/// wait to 30 s, while a server that drops every session, however early or late in its
/// handshake and exchange, must be met less and less often.
package struct ReconnectBackoff {
    package static let first: Duration = .milliseconds(500)
    package static let longest: Duration = .seconds(30)

    /// How an attempt ended, as the wait after it sees it.
    package enum Attempt {
        /// Its session went live and then received a message of the live phase from the peer
        /// (`PeerSessionRecord.peerHeardWhileLive`), whatever ended it: the peer keeps live
        /// sessions, so the next wait is the first. For a relay: a sync that succeeded.
        case succeeded
        /// Anything else: no connection, a connection closed or failed before the session was
        /// live, or a live session that ended before the peer was heard in it.
        case failed
    }

    private let jitter: @Sendable () -> Double
    private var base = first

    /// - Parameter jitter: a number in -0.2...0.2 for each wait (random, unless a test injects it).
    package init(jitter: @escaping @Sendable () -> Double) {
        self.jitter = jitter
    }

    /// The wait before the next attempt, after `attempt`.
    package mutating func wait(after attempt: Attempt) -> Duration {
        if attempt == .succeeded { base = Self.first }
        let wait = base * (1 + max(-0.2, min(0.2, jitter())))
        base = min(base * 2, Self.longest)
        return wait
    }
}
