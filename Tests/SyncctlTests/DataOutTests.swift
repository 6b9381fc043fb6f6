import Foundation
import Testing

/// "Delete all data" and "remove it from this machine" (SPEC.md §7, §11): `reminder delete
/// --all` and `note delete --all` write ordinary deletes that reach another replica, and `wipe
/// --yes` removes this replica's store and its own folder files, never another replica's.
@Suite struct DataOutTests {
    @Test func deleteAllReachesASecondReplicaAndLeavesTheOtherKind() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let folder = try sandbox.makeDirectory("shared")
        let open = try a.addReminder("open one")
        let done = try a.addReminder("done one")
        try a.ok("reminder", "complete", done)
        try a.addReminder("already deleted")
        let deletedID = try a.reminders(all: false).first { $0["title"] as? String == "already deleted" }?["id"] as? String
        try a.ok("reminder", "delete", try #require(deletedID))
        try a.addNote("a note stays")
        try a.ok("sync", "--folder", folder)
        try b.ok("sync", "--folder", folder)
        #expect(try b.reminders(all: true).count == 3)

        #expect(try a.ok("reminder", "delete", "--all") == "deleted 2 reminders")
        #expect(try a.ok("reminder", "delete", "--all") == "deleted 0 reminders")
        #expect(try a.reminders().isEmpty)
        try a.ok("sync", "--folder", folder)
        try b.ok("sync", "--folder", folder)
        #expect(try b.reminders().isEmpty, "the deletes reached b")
        #expect(try b.reminders(all: true).count == 3, "as deletes: b still holds them, deleted")
        #expect(try b.ok("note", "list").contains("a note stays"))
        #expect(try a.dump() == (try b.dump()))
        // Ordinary deletes: restore undoes one.
        try b.ok("reminder", "restore", open)
        #expect(try b.reminders().map { $0["id"] as? String } == [open])

        #expect(try b.ok("note", "delete", "--all") == "deleted 1 note")
        try b.expectRefused(["reminder", "delete"], mentions: ["give either an id or --all"])
        try b.expectRefused(["reminder", "delete", open, "--all"], mentions: ["give either an id or --all"])
    }

    @Test func wipeRemovesThisReplicaAndNothingOfAnother() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let folder = try sandbox.makeDirectory("shared")
        try a.addReminder("from a")
        try b.addReminder("from b")
        try a.ok("sync", "--folder", folder)
        try b.ok("sync", "--folder", folder)
        try a.ok("sync", "--folder", folder)  // a holds b's reminder too
        try b.ok("key", "generate")
        let aID = try a.replicaID()
        let bID = try b.replicaID()
        let bFiles = try bundleNames(in: folder).filter { $0.hasPrefix(bID) }
        #expect(!bFiles.isEmpty)
        let aFiles = try bundleNames(in: folder).filter { $0.hasPrefix(aID) }
        #expect(!aFiles.isEmpty)
        let layout = "\(folder)/concord-v1"

        // Refused without --yes (the store and the folder unchanged), and for a file that is not
        // a store (left as it is).
        let folderBefore = try listing(of: folder)
        try b.expectRefused(["wipe", "--folder", folder], mentions: ["add --yes"])
        let notAStore = try sandbox.write(Data("not a store".utf8), to: "not-a-store.db")
        let refused = try sandbox.run(["wipe", "--yes", "--folder", folder, "--store", notAStore])
        #expect(!refused.succeeded, "\(refused)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: notAStore)) == Data("not a store".utf8))
        #expect(try listing(of: folder) == folderBefore)

        let result = try sandbox.run(["wipe", "--yes", "--folder", folder, "--store", b.path])
        #expect(result.succeeded, "\(result)")
        let lines = result.out.split(separator: "\n").map(String.init)
        #expect(lines.last == "wiped replica \(bID) from this machine")
        for name in bFiles { #expect(lines.contains("removed \(layout)/\(name)"), "\(lines)") }
        #expect(lines.contains("removed \(b.path)"))
        for suffix in ["", "-wal", "-shm", "-lock"] { #expect(!FileManager.default.fileExists(atPath: b.path + suffix)) }
        #expect(try bundleNames(in: folder).allSatisfy { !$0.hasPrefix(bID) })
        // a's files and store are untouched, and a syncs on.
        #expect(try bundleNames(in: folder).filter { $0.hasPrefix(aID) } == aFiles)
        try a.ok("sync", "--folder", folder)
        #expect(try a.reminders().count == 2)
        try a.expectSound("after b was wiped")
    }
}
