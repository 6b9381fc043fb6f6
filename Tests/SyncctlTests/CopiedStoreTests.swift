import Foundation
import Testing

/// A store copied to a second laptop, or restored from a backup (SPEC.md §9.1).
@Suite(.waitsForProcesses) struct CopiedStoreTests {
    /// A store and a copy of its file, made the way a user makes one.
    func storeAndCopy(_ sandbox: Sandbox) throws -> (original: Store, copy: Store, reminder: String) {
        let original = try sandbox.makeStore("laptop-a.db")
        let reminder = try original.addReminder("water the plants", "--tag", "home")
        let copy = Store(sandbox: sandbox, path: sandbox.path("laptop-b.db"))
        try FileManager.default.copyItem(atPath: original.path, toPath: copy.path)
        return (original, copy, reminder)
    }

    @Test func aCopyRefusesWritesWithOneLineSayingWhatToRun() throws {
        let sandbox = try Sandbox()
        let (original, copy, reminder) = try storeAndCopy(sandbox)
        let before = try copy.bytes()
        for arguments in [["reminder", "add", "buy milk"], ["reminder", "complete", reminder], ["merge", original.path]] {
            let refused = try copy.run(arguments: arguments)
            #expect(refused.status == 1, "\(refused)")
            #expect(refused.stderrLines.count == 1, "\(refused)")
            #expect(refused.stderr.contains("is a copy of the store at \(original.path)"), "\(refused)")
            #expect(refused.stderr.contains("syncctl init --fork"), "\(refused)")
        }
        let folder = sandbox.path("shared")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let sync = try copy.run("sync", "--folder", folder)
        #expect(sync.status == 1 && sync.stderr.contains("is a copy"), "\(sync)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty, "a copy publishes nothing")
        #expect(try copy.bytes() == before, "the refusals wrote nothing")
        // Reading a copy is fine, and the original is not affected.
        #expect(try copy.reminders().count == 1)
        try original.addReminder("still the original")
    }

    @Test func forkGivesTheCopyAReplicaOfItsOwnThatKeepsItsData() throws {
        let sandbox = try Sandbox()
        let (original, copy, reminder) = try storeAndCopy(sandbox)
        let originalID = try #require(original.status()["replica"] as? String)

        let forked = try copy.ok("init", "--fork")
        let newID = String(forked.prefix(32))
        #expect(isRecordID(newID) && newID != originalID, "\(forked)")
        #expect(forked.contains(originalID), "\(forked)")
        #expect(try copy.status()["replica"] as? String == newID)
        #expect(try copy.show(reminder)["title"] as? String == "water the plants")
        #expect(try copy.ok("verify").isEmpty == false)

        // Both laptops go on writing, and converge.
        try copy.ok("reminder", "complete", reminder)
        try copy.addReminder("written on the copy")
        try original.addReminder("written on the original")
        try original.ok("merge", copy.path)
        try copy.ok("merge", original.path)
        #expect(try original.dump() == copy.dump())
        #expect(try original.reminders(all: true).count == 3)
    }

    @Test func aMovedStoreIsAdoptedAndARenameIsNotACopy() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore("store.db")
        try store.addReminder("one")
        let renamed = Store(sandbox: sandbox, path: sandbox.path("renamed.db"))
        try FileManager.default.moveItem(atPath: store.path, toPath: renamed.path)
        try renamed.addReminder("two")

        // Copied elsewhere and the original removed: `--moved` keeps the replica id.
        let id = try #require(renamed.status()["replica"] as? String)
        let restored = Store(sandbox: sandbox, path: sandbox.path("restored.db"))
        try FileManager.default.copyItem(atPath: renamed.path, toPath: restored.path)
        try FileManager.default.removeItem(atPath: renamed.path)
        #expect(try restored.run("reminder", "add", "three").status == 1)
        let adopted = try restored.ok("init", "--moved")
        #expect(adopted.hasPrefix(id), "\(adopted)")
        try restored.addReminder("three")
        #expect(try restored.reminders().count == 3)
    }

    /// Two stores with one replica id that both wrote (a copy declared moved while the original
    /// lives on): each side refuses the other's operations under the shared id, and neither
    /// changes.
    @Test func clashingOperationsAreRefusedOnBothSides() throws {
        let sandbox = try Sandbox()
        let (original, copy, _) = try storeAndCopy(sandbox)
        try copy.ok("init", "--moved")
        try original.addReminder("only on the original")
        try copy.addReminder("only on the copy")
        let originalBefore = try original.bytes()
        let copyBefore = try copy.bytes()

        let bundle = sandbox.path("copy.cbundle")
        try copy.ok("export", bundle)
        for (target, source) in [(original, copy.path), (copy, original.path), (original, bundle)] {
            let refused = try target.run("merge", source)
            #expect(refused.status == 1, "\(refused)")
            #expect(refused.stderrLines.count == 1, "\(refused)")
            #expect(refused.stderr.contains("two different operations with seq"), "\(refused)")
            #expect(refused.stderr.contains("init --fork"), "\(refused)")
        }
        #expect(try original.bytes() == originalBefore)
        #expect(try copy.bytes() == copyBefore)
    }

    @Test func theSameOperationsTwiceAreNotAClash() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        for index in 0..<20 { try a.addReminder("reminder \(index)", "--tag", "t\(index % 3)") }
        let bundle = sandbox.path("a.cbundle")
        try a.ok("export", bundle)
        try b.ok("merge", bundle)
        let once = try b.dump()
        // Again, from the bundle and from the store, and both at once.
        try b.ok("merge", bundle)
        try b.ok("merge", a.path)
        try b.ok("merge", bundle, a.path)
        #expect(try b.dump() == once)
        #expect(try a.dump() == once)
    }
}
