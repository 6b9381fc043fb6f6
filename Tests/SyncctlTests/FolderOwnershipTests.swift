import Foundation
import Testing

/// Which files of a shared folder a replica counts as its own, and so coalesces (SPEC.md §14,
/// "Serials" and step 3): the folder stays bounded however many processes of one replica sync
/// at once, and after the store and the folder were moved.
@Suite(.waitsForProcesses) struct FolderOwnershipTests {
    /// A watcher and three sync loops of one replica at once, while it writes: another process
    /// of the replica imports a file before it sees that it was published, which must not make
    /// the file anyone's. Once the single syncs take over, the folder shrinks to SPEC's bound.
    @Test func oneReplicaInSeveralProcessesKeepsItsFolderBounded() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let folder = try sandbox.makeDirectory("shared")
        let aID = try a.replicaID()
        let fleet = try ProcessFleet(sandbox: sandbox)
        let store = a.path
        let watcher = try fleet.startDaemon("watch", label: "watch", ["sync", "--folder", folder, "--watch", "--interval", "1", "--store", store])
        for loop in 0..<3 {
            fleet.loop("sync-\(loop)") { _ in _ = try fleet.run("sync", label: "sync-\(loop)", ["sync", "--folder", folder, "--store", store]) }
        }
        fleet.loop("writer") { iteration in
            _ = try fleet.run("add", label: "writer", ["reminder", "add", "w\(iteration)", "--store", store])
        }
        Thread.sleep(forTimeInterval: 8)
        fleet.stopLoops()
        let stopped = watcher.stopCleanly(SIGTERM)
        #expect(stopped.succeeded, "\(stopped)")
        #expect(fleet.problems.isEmpty, "\(fleet.problems)")
        let afterConcurrency = try bundleNames(in: folder).filter { $0.hasPrefix(aID) }.count

        for round in 0..<40 {
            try a.addReminder("single \(round)")
            _ = try a.ok("sync", "--folder", folder)
        }
        let own = try bundleNames(in: folder).filter { $0.hasPrefix(aID) }
        #expect(own.count <= 33, "a has \(own.count) files (\(afterConcurrency) after the concurrent phase); SPEC §14 bounds them at 33")
        try b.ok("sync", "--folder", folder)
        #expect(try b.dump() == (try a.dump()))
    }

    /// A store moved to another path (`init --moved`) and its folder copied whole to another:
    /// the files it published there are still its own (same names, same bytes), and coalesce.
    @Test func aMovedStoreCoalescesItsFilesInAFolderCopiedWhole() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let folder = try sandbox.makeDirectory("shared")
        let aID = try a.replicaID()
        for round in 0..<32 {
            try a.addReminder("r\(round)")
            try a.ok("sync", "--folder", folder)
        }
        #expect(try bundleNames(in: folder).filter { $0.hasPrefix(aID) }.count == 32)
        try a.ok("verify")
        let moved = Store(sandbox: sandbox, path: try sandbox.makeDirectory("elsewhere") + "/a.db")
        try FileManager.default.copyItem(atPath: a.path, toPath: moved.path)
        try FileManager.default.removeItem(atPath: a.path)
        try moved.ok("init", "--moved")
        let copied = sandbox.path("copied")
        try FileManager.default.copyItem(atPath: folder, toPath: copied)

        try moved.addReminder("after the move")
        let first = try moved.ok("sync", "--folder", copied)
        #expect(first.hasPrefix("imported 0 operations from 32 files; published "), "\(first)")
        #expect(first.contains(" as \(aID)-0000000033.cbundle"), "\(first)")
        #expect(first.hasSuffix("merged 33 of this replica's files into one"), "\(first)")
        #expect(try bundleNames(in: copied).filter { $0.hasPrefix(aID) } == ["\(aID)-0000000034.cbundle"])
        let other = try sandbox.makeStore("other.db")
        try other.ok("sync", "--folder", copied)
        #expect(try other.reminders().count == 33)
    }
}
