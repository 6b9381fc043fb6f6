import ConcordStore
import Logging
import ServiceLifecycle

/// How the long-lived modes (`serve`, `sync --watch` and `--live`, `changes --follow`) and the
/// requests to a relay (`sync --relay`, `wipe --relay`) end on SIGINT or SIGTERM: the work under
/// way finishes first. It is swift-service-lifecycle's graceful shutdown, as in `syncctl relay`.
enum Stop {
    /// Runs `body` until it returns; SIGINT or SIGTERM meanwhile begins a graceful shutdown of it,
    /// which the calls below see. What `body` returns or throws is what this returns or throws.
    static func runUntilSignalled<Result: Sendable>(_ body: @escaping @Sendable () async throws -> Result) async throws -> Result {
        let outcome = LockedState<Result?>(nil)
        let mode = LongLivedMode {
            let result = try await body()
            outcome.withLock { $0 = result }
        }
        // ServiceGroup's own log (services starting, a signal caught) is not syncctl's output.
        let quiet = Logger(label: "concord.stop") { _ in SwiftLogNoOpLogHandler() }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: mode, successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup)],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: quiet))
        try await group.run()
        // The one service returned (else `run()` threw its error), so its result is set.
        return outcome.withLock { $0! }
    }

    /// Runs `body`, cancelled when SIGINT or SIGTERM arrives; what it returns then.
    static func cancellingOnStop<Result: Sendable>(_ body: @escaping @Sendable () async -> Result) async -> Result {
        await cancelWhenGracefulShutdown(body)
    }

    /// Whether SIGINT or SIGTERM has arrived. Once true, it stays true.
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
