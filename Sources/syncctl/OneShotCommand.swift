import ArgumentParser
import ConcordStore

/// A command that does one piece of blocking work (store calls, files read and written, a
/// benchmark) and ends: everything but the commands that sync, serve, follow or wait.
///
/// It is async like every command, and runs `work()` off the threads the tool's tasks share, as
/// one job through `ConcordStore.offload`, the one way async code runs blocking store work. One job
/// rather than an `await` per store call: a command's calls are a straight line, several of them
/// calls with no async form (`resolve`, `verify`, a merge that reads its inputs as it goes), and
/// each `await` would be one more hop between threads for nothing.
protocol OneShotCommand: AsyncParsableCommand, Sendable {
    func work() throws
}

extension OneShotCommand {
    func run() async throws {
        try await ConcordStore.offload { try work() }
    }
}
