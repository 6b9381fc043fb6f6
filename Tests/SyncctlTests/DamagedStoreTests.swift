import Foundation
import Testing

/// Files that are not usable stores: each is refused with one line on standard error (exit 1),
/// without a crash and (but for the corrupt store, see `RefusalsWriteNothingTests`) without its
/// bytes changing; a merge from one is refused and leaves the target unchanged.
@Suite(.waitsForProcesses) struct DamagedStoreTests {
    /// Commands that read or write a store, run against `path`.
    static let commands: [[String]] = [
        ["status"], ["status", "--json"], ["dump"], ["reminder", "list", "--all"], ["note", "list", "--all"], ["log", "--limit", "1000"],
        ["reminder", "add", "new"], ["note", "add", "new"], ["reminder", "due", "--at", "2030-01-01T00:00:00Z"],
    ]

    /// Runs every command on the file at `path`, then a merge from it into a good store, and
    /// checks each is refused with one line mentioning `mentions`, leaving both files as they were.
    /// (`checkBytes: false` leaves the file's bytes to `RefusalsWriteNothingTests`.)
    func expectUnusable(
        _ path: String, in sandbox: Sandbox, mentions: [String], checkBytes: Bool = true, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let url = URL(fileURLWithPath: path)
        var isDirectory: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
        let bytes = isDirectory.boolValue || !checkBytes ? nil : try Data(contentsOf: url)
        for command in Self.commands {
            let result = try sandbox.run(command + ["--store", path])
            expectOneLineFailure(result, mentions: mentions, code: 1, sourceLocation: sourceLocation)
        }
        if let bytes {
            #expect(try Data(contentsOf: url) == bytes, "the file at \(path) was modified", sourceLocation: sourceLocation)
        }

        let target = try sandbox.makeStore("target-\(UUID().uuidString).db", sourceLocation: sourceLocation)
        _ = try target.addReminder("target's own", sourceLocation: sourceLocation)
        try target.expectRefused(["merge", path], mentions: mentions, sourceLocation: sourceLocation)
        if let bytes {
            #expect(try Data(contentsOf: url) == bytes, "merging from \(path) modified it", sourceLocation: sourceLocation)
        }
    }

    /// A store with some records in it, closed (so the whole of it is in the main file).
    static func populatedStore(_ sandbox: Sandbox, _ name: String) throws -> Store {
        let store = try sandbox.makeStore(name)
        for index in 0..<6 {
            _ = try store.addReminder("reminder \(index) " + String(repeating: "r", count: 150), "--notes", String(repeating: "n", count: 300), "--tag", "t\(index)")
            _ = try store.addNote("note \(index)", "--body", String(repeating: "b", count: 400))
        }
        return store
    }

    /// A copy of `store` that took over as if moved (`init --moved`): what the tests then report
    /// about it is the damage they do, never that it is a copy (SPEC.md §9.1), whichever page of
    /// the file the damage hits.
    static func copy(_ store: Store, to name: String, in sandbox: Sandbox) throws -> String {
        let path = sandbox.path(name)
        try FileManager.default.copyItem(atPath: store.path, toPath: path)
        let moved = try sandbox.run(["init", "--moved", "--store", path])
        #expect(moved.succeeded, "\(moved)")
        return path
    }

    @Test func randomBytesAreNotAStore() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("random.db")
        var generator = SplitMix(seed: 42)
        try Data((0..<8192).map { _ in UInt8(truncatingIfNeeded: generator.next()) }).write(to: URL(fileURLWithPath: path))
        try expectUnusable(path, in: sandbox, mentions: ["\(path) is not a Concord store"])
    }

    @Test func anEmptyFileIsNotAStore() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("empty.db")
        _ = FileManager.default.createFile(atPath: path, contents: Data())
        try expectUnusable(path, in: sandbox, mentions: ["not a Concord store"])
        #expect((try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue == 0)
    }

    @Test func aTextFileIsNotAStore() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("notes.txt")
        try Data("SQLite format 3 is what this pretends to be, but it is just text.\n".utf8).write(to: URL(fileURLWithPath: path))
        try expectUnusable(path, in: sandbox, mentions: ["not a Concord store"])
    }

    @Test func aDirectoryIsNotAStore() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("a-directory")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try expectUnusable(path, in: sandbox, mentions: ["is a directory"])
    }

    @Test func anotherApplicationsSQLiteDatabaseIsNotAStore() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("other-app.sqlite")
        try sandbox.python("""
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1])
            c.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
            c.execute("INSERT INTO notes (body) VALUES ('not concord')")
            c.commit(); c.close()
            """, [path])
        try expectUnusable(path, in: sandbox, mentions: ["\(path) is not a Concord store"])
    }

    @Test func aConcordStoreWithAnotherApplicationIDIsNotAStore() throws {
        let sandbox = try Sandbox()
        let original = try Self.populatedStore(sandbox, "original.db")
        let path = try Self.copy(original, to: "relabelled.db", in: sandbox)
        try sandbox.python("""
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1]); c.execute("PRAGMA application_id = 1"); c.commit(); c.close()
            """, [path])
        try expectUnusable(path, in: sandbox, mentions: ["not a Concord store"])
    }

    @Test func aStoreFromANewerSchemaIsRefused() throws {
        let sandbox = try Sandbox()
        let original = try Self.populatedStore(sandbox, "original.db")
        let path = try Self.copy(original, to: "newer.db", in: sandbox)
        try sandbox.python("""
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1]); c.execute("PRAGMA user_version = 99"); c.commit(); c.close()
            """, [path])
        try expectUnusable(path, in: sandbox, mentions: ["newer", "schema version 99"])
        // The original still works.
        #expect(try original.reminders().count == 6)
    }

    /// The middle half of a store overwritten with 0xFF bytes: SQLite reports corruption, which
    /// syncctl must turn into one line, never a crash.
    @Test func aStoreDamagedInTheMiddleIsRefusedWithoutACrash() throws {
        let sandbox = try Sandbox()
        let original = try Self.populatedStore(sandbox, "original.db")
        let path = try Self.copy(original, to: "damaged.db", in: sandbox)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let pageSize = 4096
        #expect(bytes.count >= 8 * pageSize, "the store should span several pages: \(bytes.count) bytes")
        let start = bytes.count / 4 / pageSize * pageSize
        let end = bytes.count * 3 / 4 / pageSize * pageSize
        bytes.replaceSubrange(start..<end, with: Data(repeating: 0xFF, count: end - start))
        try bytes.write(to: URL(fileURLWithPath: path))
        try expectUnusable(path, in: sandbox, mentions: ["the store at \(path) is corrupt", "restore it from a backup"], checkBytes: false)
    }

    /// One table's page with its cells zeroed: SQLite then reads a row whose every column is
    /// NULL, including the `id` primary key. Reading such a row must be reported as a damaged
    /// store on one line, not crash the process.
    @Test(arguments: [("reminders", ["reminder", "list", "--all"]), ("notes", ["note", "list", "--all"])])
    func aRowWithANullIDIsReportedNotACrash(table: String, listing: [String]) throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        _ = try store.addReminder("one reminder")
        _ = try store.addNote("one note")
        let path = try Self.copy(store, to: "zeroed.db", in: sandbox)
        try sandbox.python("""
            import sqlite3, sys
            path, table = sys.argv[1], sys.argv[2]
            c = sqlite3.connect(path)
            page_size = c.execute("PRAGMA page_size").fetchone()[0]
            root = c.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
            c.close()
            with open(path, "r+b") as f:
                base = (root - 1) * page_size
                f.seek(base + (100 if root == 1 else 0))
                header = f.read(8)
                assert header[0] == 0x0A, "expected a leaf page of a WITHOUT ROWID table"
                content = int.from_bytes(header[5:7], "big") or 65536
                f.seek(base + content)
                f.write(bytes(page_size - content))
            """, [path, table])
        for command in [listing, ["dump"]] {
            let result = try sandbox.run(command + ["--store", path])
            #expect(!result.crashed, "syncctl crashed on a damaged \(table) row (signal \(result.status)): \(result)")
            expectOneLineFailure(result)
            let line = result.stderrLines.first?.lowercased() ?? ""
            #expect(["corrupt", "damaged", "malformed"].contains { line.contains($0) }, "the message should say the store is damaged: \(result)")
        }
    }
}

/// A small seeded generator, so the "random" file is the same on every run.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
