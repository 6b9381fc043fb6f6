import ConcordCore
import Foundation
import Testing

/// A relay that works against its devices (SPEC.md §16.5): it rolls back to an old state, which
/// both loses what was uploaded since and serves again files their publisher has coalesced away;
/// it drops a replica's files; it serves a made-up file. Played by editing the embedded relay's
/// database while it is stopped, between real syncs. Each can at worst delay a sync: no device
/// loses an operation, applies one twice or diverges, and all converge once the relay serves
/// what it is sent.
@Suite(.waitsForProcesses) struct RelayAttackTests {
    @Test func aRelayThatRollsBackDropsAndMakesUpFilesOnlyDelaysSyncs() throws {
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let c = try sandbox.makeStore("c.db")
        try c.ok("key", "import", String(try a.ok("key", "show").split(separator: "\n")[0]))
        let relay = try RelayProcess(sandbox, data: sandbox.path("relay"))
        let database = relay.data + "/relay.db"
        let snapshot = sandbox.path("relay-then.db")

        try a.addReminder("the first")
        _ = try a.ok("sync", "--relay", relay.url)
        // The database with its write-ahead log, if the relay left one: as a copy of the disk would be.
        let files = ["", "-wal", "-shm"]
        try relay.whileStopped {
            for suffix in files where FileManager.default.fileExists(atPath: database + suffix) {
                try FileManager.default.copyItem(atPath: database + suffix, toPath: snapshot + suffix)
            }
        }

        // Enough of a's syncs that a coalesces its files, deleting the older ones from the relay.
        var written: Set<String> = ["the first"]
        for round in 1...34 {
            try a.addReminder("a \(round)")
            written.insert("a \(round)")
            _ = try a.ok("sync", "--relay", relay.url)
        }
        try b.addReminder("b 1")
        written.insert("b 1")
        let published = try b.ok("sync", "--relay", relay.url)
        let bReplica = String(try #require(published.firstMatch(of: /published \d+ operations? as ([0-9a-f]{32})-/), "\(published)").1)

        // Rolled back: the relay lost everything since the snapshot, and serves again a's first
        // file, which a has coalesced away. A new device gets what the relay holds: late, not wrong.
        try relay.whileStopped {
            for suffix in files {
                try? FileManager.default.removeItem(atPath: database + suffix)
                if FileManager.default.fileExists(atPath: snapshot + suffix) {
                    try FileManager.default.copyItem(atPath: snapshot + suffix, toPath: database + suffix)
                }
            }
        }
        let first = try c.ok("sync", "--relay", relay.url)
        #expect(try c.reminderTitles() == ["the first"], "c synced with the rolled-back relay: \(first)")
        // a and b upload again what the relay lost (§16.5 step 3); then c gets everything.
        for store in [a, b, c] { _ = try store.ok("sync", "--relay", relay.url) }
        #expect(try c.reminderTitles() == written)

        // Dropped: b's files vanish from the relay. b's next sync uploads them again; a device
        // that syncs before that only waits.
        try b.addReminder("b 2")
        written.insert("b 2")
        _ = try b.ok("sync", "--relay", relay.url)
        try relay.whileStopped {
            try sandbox.python("import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute(\"DELETE FROM files WHERE name LIKE ? || '-%'\", (sys.argv[2],)); db.commit()", [database, bReplica])
        }
        _ = try a.ok("sync", "--relay", relay.url)
        #expect(try !a.reminderTitles().contains("b 2"), "the relay dropped it")
        _ = try b.ok("sync", "--relay", relay.url)
        _ = try a.ok("sync", "--relay", relay.url)
        #expect(try a.reminderTitles() == written)

        // Made up: a file under a's next name, of bytes that are no bundle sealed with the key. It
        // is skipped with a warning, and applies nothing.
        try relay.whileStopped {
            try sandbox.python("""
                import sqlite3, sys, hashlib
                body = bytes([0x89, 0x43, 0x4E, 0x43, 0x45, 0x0D, 0x0A, 0x1A, 0x01]) + bytes(80)
                db = sqlite3.connect(sys.argv[1])
                db.execute("INSERT INTO files(space, name, sha256, size, body) SELECT space, ? || '-9999999999.cbundle', ?, ?, ? FROM spaces", (sys.argv[2], hashlib.sha256(body).digest(), len(body), body))
                db.execute("UPDATE spaces SET cursor = cursor + 1, files = files + 1, bytes = bytes + ?", (len(body),))
                db.commit()
                """, [database, bReplica])
        }
        let skipped = try c.run("sync", "--relay", relay.url)
        #expect(skipped.succeeded && skipped.stderr.contains("skipping \(bReplica)-9999999999.cbundle"), "\(skipped)")

        // Every device holds every write once: the same dump, a sound log. (Each sync warns of the
        // made-up file again, as a folder's sync does of a damaged file it keeps.)
        for store in [a, b, c, a, b, c] {
            let synced = try store.run("sync", "--relay", relay.url)
            #expect(synced.succeeded && synced.stderrLines.allSatisfy { $0.contains("skipping \(bReplica)-9999999999.cbundle: ") }, "\(synced)")
        }
        for store in [a, b, c] {
            #expect(try store.reminderTitles() == written)
            #expect(try store.ok("verify").hasPrefix("sound: "))
        }
        #expect(try a.dump() == (try b.dump()))
        #expect(try b.dump() == (try c.dump()))
        _ = relay.stop()
    }
}
