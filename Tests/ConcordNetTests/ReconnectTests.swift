import ConcordCore
import ConcordKeys
import ConcordStore
import Foundation
import Testing
@testable import ConcordNet

/// A live client's waits between attempts (SPEC.md §15.10, "A live client"): they double after
/// each failed attempt, up to 30 s, and start again from the first after an attempt whose session
/// went live and then heard the peer in its live phase, whatever ended it.
@Suite(.serialized) struct ReconnectTests {
    /// With the jitter fixed: 0.5 s doubling up to 30 s over failed attempts in a row; the first
    /// wait after each success, however many failed before it; and doubling from there again.
    @Test func theWaitsDoubleAfterFailedAttemptsAndStartAgainAfterOneThatSucceeded() {
        var backoff = ReconnectBackoff(jitter: { 0 })
        let failedInARow = (0..<9).map { _ in backoff.wait(after: .failed) }
        #expect(failedInARow == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(30), .seconds(30), .seconds(30)])
        // Live sessions cut one after the other, each once the peer was heard.
        let liveSessionsCut = (0..<4).map { _ in backoff.wait(after: .succeeded) }
        #expect(liveSessionsCut == Array(repeating: .milliseconds(500), count: 4))
        // Then attempts that fail (the server is down, say) double from the first.
        let thenFailed = (0..<3).map { _ in backoff.wait(after: .failed) }
        #expect(thenFailed == [.seconds(1), .seconds(2), .seconds(4)])
        #expect(backoff.wait(after: .succeeded) == .milliseconds(500))
    }

    /// Each wait is its base varied by the jitter drawn for it, kept within 20% either way; the
    /// base doubles whatever was drawn.
    @Test func eachWaitIsVariedByItsOwnDrawWithinTwentyPercent() {
        let draws = LockedState([-0.9, 0.2, 0.125, 0.5, -0.1])
        var backoff = ReconnectBackoff(jitter: { draws.withLock { $0.removeFirst() } })
        let waits = [ReconnectBackoff.Attempt.failed, .failed, .failed, .failed, .succeeded].map { backoff.wait(after: $0) }
        #expect(waits == [.milliseconds(400), .milliseconds(1200), .milliseconds(2250), .milliseconds(4800), .milliseconds(450)])
    }

    /// How far an attempt of a live client got, as its events tell.
    enum Step: Equatable {
        /// Its session went live.
        case live
        /// It ended, and the client waits this long before the next.
        case ended(reconnectingIn: Duration)
    }

    /// The client's next step (its progress skipped), or nil once its events end.
    static func nextStep(_ events: inout AsyncThrowingStream<LiveSyncEvent, any Error>.Iterator) async throws -> Step? {
        while let event = try await events.next() {
            switch event {
            case .live: return .live
            case .disconnected(_, let wait): return .ended(reconnectingIn: wait)
            case .progress: continue
            }
        }
        return nil
    }

    /// A live client, with its jitter fixed, behind a proxy that drops or cuts its connections:
    /// attempts dropped as they connect (a server that accepts and drops) double the wait; a live
    /// session cut once the peer was heard in it (by a push) is followed by the first wait,
    /// whatever failed before; one cut as soon as it went live, before the peer was heard, counts
    /// as failed, so that a server that drops each session as it goes live is not met every half
    /// second. The code before counted every cut as a failed attempt.
    @Test(.timeLimit(.minutes(2)))
    func aLiveSessionCutOnceThePeerWasHeardIsFollowedByTheFirstWait() async throws {
        let directory = try TemporaryDirectory()
        let key = SyncKey.generate()
        let a = try Node(in: directory, "a", seed: 1, key: key)
        let b = try Node(in: directory, "b", seed: 2, key: key)
        let server = try TestServer(a, configuration: LivePeersTests.configuration())
        defer { server.stop() }
        let proxy = try SteeredProxy(target: server.address.port)
        defer { proxy.stop() }
        proxy.dropping = true
        var configuration = LivePeersTests.configuration()
        configuration.reconnectJitter = { 0.125 }
        /// The wait of base `base`, varied by the fixed draw.
        func wait(_ base: Duration) -> Duration { base * 1.125 }
        var events = PeerClient.live(store: b.store, address: PeerAddress(host: "127.0.0.1", port: proxy.port), configuration: configuration)
            .makeAsyncIterator()

        for base in [Duration.milliseconds(500), .seconds(1), .seconds(2)] {
            #expect(try await Self.nextStep(&events) == .ended(reconnectingIn: wait(base)), "dropped as it connected")
        }
        proxy.dropping = false

        /// Writes a reminder on a, and waits until it has been pushed to b.
        func push(_ title: String) async throws {
            _ = try await a.store.addReminder(ReminderDraft(title: title))
            #expect(try await LivePeersTests.eventually(20) { try await b.store.reminders().map(\.title).contains(title) }, "\(title) pushed")
        }

        #expect(try await Self.nextStep(&events) == .live)
        try await push("before the first cut")
        #expect(proxy.cutAll() == 1)
        #expect(try await Self.nextStep(&events) == .ended(reconnectingIn: wait(.milliseconds(500))), "cut once the peer was heard")

        // Cut at once: nothing of the live phase has come (the heartbeat's ping would take 5 s).
        #expect(try await Self.nextStep(&events) == .live)
        #expect(proxy.cutAll() == 1)
        #expect(try await Self.nextStep(&events) == .ended(reconnectingIn: wait(.seconds(1))), "cut before the peer was heard")

        #expect(try await Self.nextStep(&events) == .live)
        try await push("before the third cut")
        #expect(proxy.cutAll() == 1)
        #expect(try await Self.nextStep(&events) == .ended(reconnectingIn: wait(.milliseconds(500))), "cut once the peer was heard")
    }
}
