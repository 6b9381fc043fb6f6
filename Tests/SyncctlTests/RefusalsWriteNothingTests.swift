import Foundation
import Testing

/// SPEC.md §12: "Every failure prints exactly one line on stderr, … and changes no store and no
/// file." These tests look at the files themselves, not only at what syncctl reports about them.
@Suite(.waitsForProcesses) struct RefusalsWriteNothingTests {
    /// A refused change must leave the store file byte for byte as it was: not only the same
    /// records, but no rewrite of the file at all.
    @Test func aRefusedCommandLeavesTheStoreFileByteIdentical() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let id = try store.addReminder("Existing", "--due", "2027-01-01T09:00:00Z")
        let gone = try store.addNote("Gone")
        try store.ok("note", "delete", gone)
        let unknown = unusedPrefix(avoiding: [id, gone])
        let refusals: [(arguments: [String], code: Int32)] = [
            (["reminder", "add", "x", "--due", "not a date"], 64),
            (["reminder", "edit", id], 64),
            (["show", unknown], 1),
            (["reminder", "complete", unknown], 1),
            (["reminder", "add", " "], 1),
            (["reminder", "snooze", id, "--until", "2020-01-01T00:00:00Z"], 1),
            (["note", "edit", gone, "--title", "x"], 1),
        ]
        for refusal in refusals {
            let bytes = try store.bytes()
            let result = try store.run(arguments: refusal.arguments)
            expectOneLineFailure(result, code: refusal.code)
            let after = try store.bytes()
            #expect(after == bytes, "the store file changed although \(refusal.arguments.joined(separator: " ")) was refused: \(differingBytes(bytes, after))")
        }
    }

    /// A store that SQLite reports as corrupt must not be written to: the user is told to restore
    /// it from a backup, and the damaged file is the evidence.
    @Test func aCorruptStoreIsNotWrittenTo() throws {
        let sandbox = try Sandbox()
        let original = try DamagedStoreTests.populatedStore(sandbox, "original.db")
        let path = try DamagedStoreTests.copy(original, to: "damaged.db", in: sandbox)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let start = bytes.count / 4 / 4096 * 4096
        let end = bytes.count * 3 / 4 / 4096 * 4096
        bytes.replaceSubrange(start..<end, with: Data(repeating: 0xFF, count: end - start))
        try bytes.write(to: URL(fileURLWithPath: path))

        for command in [["status"], ["reminder", "add", "x"]] {
            let result = try sandbox.run(command + ["--store", path])
            expectOneLineFailure(result, mentions: ["corrupt"], code: 1)
            let after = try Data(contentsOf: URL(fileURLWithPath: path))
            #expect(after == bytes, "syncctl \(command.joined(separator: " ")) wrote to a store it reports as corrupt: \(differingBytes(bytes, after))")
        }
    }

    /// Refusing a WAL-mode database (a newer Concord store, or one relabelled as another
    /// application's) must not leave SQLite's `-wal` and `-shm` files beside it.
    @Test(arguments: ["PRAGMA user_version = 99", "PRAGMA application_id = 1"])
    func refusingADatabaseCreatesNoFilesBesideIt(pragma: String) throws {
        let sandbox = try Sandbox()
        let original = try sandbox.makeStore("original.db")
        _ = try original.addReminder("something")
        let directory = sandbox.root.appendingPathComponent("refused", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("store.db").path
        try FileManager.default.copyItem(atPath: original.path, toPath: path)
        try sandbox.python("""
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit(); c.close()
            """, [path, pragma])
        let before = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(before == ["store.db"])

        let result = try sandbox.run(["status", "--store", path])
        expectOneLineFailure(result, code: 1)
        let after = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(after == before, "refusing \(path) left new files beside it: \(after)")
    }
}

/// A short description of where two byte strings differ, for failure messages.
func differingBytes(_ a: Data, _ b: Data) -> String {
    guard a.count == b.count else { return "sizes \(a.count) and \(b.count)" }
    let offsets = zip(a, b).enumerated().filter { $0.element.0 != $0.element.1 }.map(\.offset)
    return "\(offsets.count) bytes differ, at offsets \(offsets.prefix(8).map(String.init).joined(separator: ", "))"
}
