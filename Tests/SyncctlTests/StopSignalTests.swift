import Foundation
import Testing

/// SIGINT or SIGTERM is a clean stop of a long-lived mode (SPEC.md §11) at any moment, the first
/// one too: here as soon as the mode says `stop with Ctrl-C`, perhaps before its first sync or
/// session, when a signal that fell before the mode took it as a stop would kill the process. Each
/// ends with `stopped` and exit 0.
@Suite(.waitsForProcesses) struct StopSignalTests {
    @Test(arguments: [SIGINT, SIGTERM])
    func aStopAsSoonAsAModeSaysHowIsClean(signal: Int32) throws {
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let folder = try sandbox.makeDirectory("Shared")
        let relayData = try sandbox.makeDirectory("relay")

        let server = try sandbox.start(["serve", "--listen", "127.0.0.1:0", "--store", a.path])
        let port = try #require(Self.firstLine(of: server).flatMap { $0.firstMatch(of: #/on 127\.0\.0\.1:(\d+) /#) }.map { String($0.1) })
        let relay = try sandbox.start(["relay", "--listen", "127.0.0.1:0", "--data", relayData])
        let modes = [
            try sandbox.start(["sync", "--folder", folder, "--watch", "--store", b.path]),
            try sandbox.start(["sync", "--peer", "127.0.0.1:\(port)", "--live", "--store", b.path]),
            relay,
            server,
        ]
        for mode in modes {
            #expect(Self.firstLine(of: mode)?.hasSuffix("; stop with Ctrl-C") == true, "\(mode.stdout) \(mode.stderr)")
            mode.send(signal)
            let result = mode.wait(timeout: 30)
            #expect(result.succeeded, "\(result)")
            #expect(result.stdoutLines.last == "stopped", "\(result)")
        }
        try a.ok("verify")
        try b.ok("verify")
    }

    /// The mode's first line on stdout, once it has printed it (nil if it ends first, or takes
    /// more than 20 s).
    private static func firstLine(of mode: BackgroundRun) -> String? {
        guard eventually(timeout: 20, { mode.stdout.contains("\n") || !mode.isRunning }) else { return nil }
        return mode.stdout.split(separator: "\n").first.map(String.init)
    }
}
