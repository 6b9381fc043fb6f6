import Foundation
import Testing

/// Several `syncctl` processes on one store, one of them long-running (SPEC.md §9, "Touching a
/// store's files"): what a server acknowledged stays, whatever other processes open the store.
@Suite(.waitsForProcesses) struct SharedStoreTests {
    /// Issue 15's reproduction: `serve` on a.db, and between sessions other processes open a.db
    /// (`status`, `dump`). Each session made the server open its store file a second time outside
    /// SQLite and close it, dropping its own locks; the next process to close a.db then took it for
    /// the last user, checkpointed and deleted the WAL under the server, and what the server
    /// acknowledged afterwards was lost, for good once it was killed.
    @Test func serveKeepsWhatItAcknowledgedWhileOtherProcessesOpenItsStore() throws {
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let (server, port) = try PeerCommandTests().serve(sandbox, a)
        var titles: [String] = []
        for round in 1...8 {
            let title = "acknowledged \(round)"
            try b.addReminder(title)
            titles.append(title)
            #expect(try b.ok("sync", "--peer", "127.0.0.1:\(port)").contains("sent 5"))
            // Other processes open a.db and close it again, as a widget or the CLI would.
            try a.ok("status")
            _ = try a.dump()
            #expect(deletedStoreFiles(of: server.pid).isEmpty, "round \(round): serve holds \(deletedStoreFiles(of: server.pid))")
        }
        server.send(SIGKILL)
        _ = server.wait(timeout: 20)
        let dump = try a.dump()
        for title in titles { #expect(dump.contains("\"title\":\"\(title)\""), "\(title) is missing after the server was killed") }
        try a.ok("verify")
        #expect(dump == (try b.dump()))
    }
}

/// The store files (`-wal`, `-shm`, or the database) that process `pid` holds open although they
/// were deleted: a connection writing into a deleted WAL loses every commit it makes.
func deletedStoreFiles(of pid: Int32) -> [String] {
    let directory = "/proc/\(pid)/fd"
    guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
    return descriptors.compactMap { descriptor in
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + descriptor),
              target.hasSuffix(" (deleted)"), target.contains(".db")
        else { return nil }
        return target
    }
}
