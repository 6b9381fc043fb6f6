import Foundation
import Testing

/// `syncctl reminder purge`, `note purge` and `purge --all` (SPEC.md §5.7, §11), with real
/// processes: the content leaves every store file, folder file and peer.
@Suite(.waitsForProcesses) struct PurgeCommandTests {
    /// The files under `paths` (directories walked; a store with its WAL) holding `text`.
    static func filesHolding(_ text: String, in paths: [String]) -> [String] {
        let needle = Data(text.utf8)
        var found: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            let files = isDirectory.boolValue
                ? (FileManager.default.enumerator(atPath: path)?.compactMap { $0 as? String }.map { path + "/" + $0 } ?? [])
                : [path, path + "-wal"]
            for file in files where FileManager.default.contents(atPath: file)?.range(of: needle) != nil { found.append(file) }
        }
        return found
    }

    @Test func purgeErasesForGoodAndSaysSo() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let secret = try store.addReminder("secret-title-C1", "--notes", "secret-notes-C1", "--tag", "secret-tag-C1")
        let kept = try store.addReminder("kept-C1")
        let note = try store.addNote("note-C1", "--body", "secret-body-C1")
        #expect(try store.ok("reminder", "purge", String(secret.suffix(6))) == "")
        #expect(Self.filesHolding("secret-title-C1", in: [store.path]) == [])
        #expect(Self.filesHolding("secret-notes-C1", in: [store.path]) == [])
        #expect(try store.reminders(all: true).compactMap { $0.string("id") } == [kept])

        // A purged record, named in full: changes are refused as purged, reads say so, a purge
        // again changes nothing.
        let purged = "reminder \(secret) was purged: its content is erased for good"
        try store.expectRefused(["reminder", "edit", secret, "--title", "back"], mentions: [purged], code: 1)
        try store.expectRefused(["reminder", "restore", secret], mentions: [purged], code: 1)
        try store.expectRefused(["show", secret], mentions: [purged], code: 1)
        try store.expectRefused(["history", secret], mentions: [purged], code: 1)
        #expect(try store.ok("reminder", "purge", secret) == "")
        let log = try store.ok("log").split(separator: "\n")
        #expect(log.first?.hasSuffix("  purge") == true, "\(log)")
        #expect(log.filter { $0.hasSuffix("  (elided: its record was purged)") }.count == 6)

        // Usage: an id or --all, and the top level needs --all.
        try store.expectRefused(["reminder", "purge"], mentions: ["give either an id or --all"], code: 64)
        try store.expectRefused(["note", "purge", note, "--all"], mentions: ["give either an id or --all"], code: 64)
        try store.expectRefused(["purge"], mentions: ["add --all"], code: 64)
        try store.expectRefused(["note", "purge", "ffffffffffffffffffffffffffffffff"], mentions: ["no note with id"], code: 1)

        #expect(try store.ok("note", "purge", "--all") == "purged 1 note")
        #expect(try store.ok("purge", "--all") == "purged 1 record")
        #expect(try store.ok("purge", "--all") == "purged 0 records")
        #expect(Self.filesHolding("secret-body-C1", in: [store.path]) == [])
        #expect(Self.filesHolding("kept-C1", in: [store.path]) == [])
        #expect(try store.ok("dump") == #"{"format":"concord-dump","records":[],"version":1}"#)
        try store.expectSound("after the purges")
    }

    /// Two laptops through a shared folder and a peer session: the purge reaches both, the edit
    /// the other made meanwhile is absorbed, and after one sync of each no file holds the note.
    @Test func aPurgeReachesEveryCopyThroughAFolderAndAPeer() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let c = try sandbox.makeStore("c.db")
        let key = String(try a.ok("key", "generate").split(separator: "\n")[0])
        try b.ok("key", "import", key)
        try c.ok("key", "import", key)
        let note = try a.addNote("diary-C2", "--body", "private-C2")
        try a.ok("sync", "--folder", folder)
        try b.ok("sync", "--folder", folder)
        try b.ok("note", "edit", note, "--body", "edited-on-b-C2")
        try b.ok("sync", "--folder", folder)

        try a.ok("note", "purge", note)
        try a.ok("sync", "--folder", folder)
        try b.ok("sync", "--folder", folder)
        try a.ok("sync", "--folder", folder)
        #expect(try a.dump() == b.dump())

        // C, which never saw the note, syncs with A over TCP: it gets the purge, not the note.
        let server = try sandbox.start(["serve", "--listen", "127.0.0.1:0", "--store", a.path])
        defer { server.send(SIGTERM); _ = server.wait(timeout: 20) }
        #expect(eventually(timeout: 20) { server.stdout.contains("\n") || !server.isRunning })
        let port = try #require(server.stdout.firstMatch(of: /127\.0\.0\.1:(\d+)/).map { String($0.1) }, "\(server.stdout)")
        try c.ok("sync", "--peer", "127.0.0.1:\(port)")
        #expect(try c.dump() == a.dump())
        try c.expectRefused(["note", "edit", note, "--title", "x"], mentions: ["was purged"], code: 1)

        for secret in ["diary-C2", "private-C2", "edited-on-b-C2"] {
            #expect(Self.filesHolding(secret, in: [folder, a.path, b.path, c.path]) == [], "\(secret) survives")
        }
        for store in [a, b, c] { try store.expectSound("after the purge reached it") }
    }
}
