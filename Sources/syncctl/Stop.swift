import ConcordExchange
import ConcordStore
import Foundation
import Logging
import ServiceLifecycle

/// How the long-lived modes (`serve`, `sync --watch` and `--live`, `changes --follow`, `relay`)
/// and the commands that talk to a relay (`sync --relay`, `wipe`) take SIGINT or SIGTERM: as a
/// graceful shutdown, swift-service-lifecycle's. A mode finishes the sync or session under way,
/// then ends; the relay finishes the requests under way; a request to a relay is cancelled, what
/// the relay acknowledged being kept.
enum Stop {
    /// Runs `services` as one group until they end, or until SIGINT or SIGTERM, which shuts them
    /// all down gracefully: the relay's servers, or a mode's one body (below). One ending or
    /// failing shuts the others down; the group throws the first failure.
    static func run(_ services: [any Service], logger: Logger = .silent) async throws {
        // Ignored from now on, not only once the group listens: a signal in between would kill
        // the process. (The group's handlers take them all the same.)
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services.map {
                    .init(service: $0, successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup)
                },
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    /// Runs `body` with SIGINT and SIGTERM taken as a graceful shutdown of it, which the calls
    /// below see. What `body` returns or throws is what this returns or throws.
    static func withStopSignals<Result: Sendable>(_ body: @escaping @Sendable () async throws -> Result) async throws -> Result {
        let outcome = LockedState<Result?>(nil)
        // ServiceGroup's own log (services starting, a signal caught) is not syncctl's output.
        try await run([LongLivedMode {
            let result = try await body()
            outcome.withLock { $0 = result }
        }])
        // The one service returned (else `run()` threw its error), so its result is set.
        return outcome.withLock { $0! }
    }

    /// Runs `body`, cancelled when SIGINT or SIGTERM arrives; what it returns or throws then.
    static func cancellingOnStop<Result: Sendable>(_ body: @escaping @Sendable () async throws -> Result) async rethrows -> Result {
        try await cancelWhenGracefulShutdown(body)
    }

    /// Whether SIGINT or SIGTERM has arrived (within `withStopSignals`). Once true, it stays true.
    static var isStopping: Bool { Task.isShuttingDownGracefully }

    /// Waits `duration`, or less if SIGINT or SIGTERM arrives; whether it did.
    static func pause(for duration: Duration) async -> Bool {
        await cancellingOnStop { try? await Task.sleep(for: duration) }
        return isStopping
    }

    /// The body of a long-lived command, as the one service of its group.
    private struct LongLivedMode: Service {
        let body: @Sendable () async throws -> Void
        func run() async throws { try await body() }
    }
}
