import ConcordCore
import ConcordTestSupport
import Foundation
import Testing

/// `syncctl reminder purge`, `note purge` and `purge --all` (SPEC.md §5.7, §11), with real
/// processes: the content leaves every store file, folder file and peer.
@Suite(.waitsForProcesses) struct PurgeCommandTests {
    @Test func purgeErasesForGoodAndSaysSo() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let secret = try store.addReminder("secret-title-C1", "--notes", "secret-notes-C1", "--tag", "secret-tag-C1")
        let kept = try store.addReminder("kept-C1")
        let note = try store.addNote("note-C1", "--body", "secret-body-C1")
        #expect(try store.ok("reminder", "purge", String(secret.suffix(6))) == "")
        #expect(filesHolding("secret-title-C1", in: [store.path]) == [])
        #expect(filesHolding("secret-notes-C1", in: [store.path]) == [])
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
        #expect(filesHolding("secret-body-C1", in: [store.path]) == [])
        #expect(filesHolding("kept-C1", in: [store.path]) == [])
        #expect(try store.ok("dump") == #"{"format":"concord-dump","records":[],"version":1}"#)
        try store.expectSound("after the purges")
    }

    /// `purge --all` killed at random moments: it is one transaction, so each kill leaves every
    /// reminder or none, in a store that `verify` passes; once a purge has committed, the next
    /// command that writes (and closes the store) leaves no byte of the content in the store file
    /// or its WAL, whatever the kill left in the WAL.
    @Test func purgeAllKilledAtRandomMomentsIsAllOrNothing() throws {
        let sandbox = try Sandbox()
        var random = SplitMix64(seed: 35)
        var outcomes: [String] = []
        // Round 0 runs to its end, and times it: the kills land within that time.
        var duration = 0.0
        for round in 0..<9 {
            let directory = try TemporaryDirectory()
            let node = try Node(in: directory, "k\(round)", seed: UInt64(round + 1))
            try node.addReminders(3_000, label: "killed-secret-\(round)-", textLength: 200)
            try node.store.close()
            let store = Store(sandbox: sandbox, path: directory.file("k\(round).db"))
            // Every other kill in the last third, where the commit and the checkpoint after it are.
            let fraction = Double(random.next() % 1_000) / 1_000
            let delay = round == 0 ? 1_000 : duration * (round % 2 == 0 ? fraction : 0.67 + fraction / 3)
            let started = Date()
            let killed = try sandbox.runKilled(["purge", "--all", "--store", store.path], at: .after(delay))
            if round == 0 { duration = Date().timeIntervalSince(started) }
            try store.expectSound("after purge --all was killed at \(delay) s")
            let left = try store.reminders(all: true).count
            #expect(left == 3_000 || left == 0, "a kill at \(delay) s left \(left) of 3000 reminders")
            outcomes.append(killed.status == 0 ? "finished" : left == 0 ? "killed after its commit" : "killed before its commit")
            // Whatever the kill left, a purge that runs to its end erases every byte of the content.
            #expect(try store.ok("purge", "--all") == "purged \(left) record\(left == 1 ? "" : "s")")
            #expect(filesHolding("killed-secret-\(round)-", in: [store.path]) == [], "round \(round)")
            try store.expectSound("after purge --all ran to its end")
        }
        print("PurgeCommandTests kills (seed 35): \(outcomes)")
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
            #expect(filesHolding(secret, in: [folder, a.path, b.path, c.path]) == [], "\(secret) survives")
        }
        for store in [a, b, c] { try store.expectSound("after the purge reached it") }
    }
}
