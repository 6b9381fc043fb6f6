import ConcordCore
import ConcordTestSupport
import Foundation
import Testing

@testable import ConcordStore

/// Reading a store's file outside its connections (SPEC.md §9, "Touching a store's files").
@Suite struct StoreFileTests {
    /// Closing any descriptor of a file drops every POSIX lock the process holds on it. A connection
    /// without its locks lets another process's last connection delete the WAL it writes into, so
    /// nothing this process does to the store's file by path may drop them.
    @Test func openingAndReadingTheFileAgainKeepsThisProcessLocks() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.db")
        let store = try ConcordStore.create(at: path)
        _ = try store.versionVector()
        let held = try locks(on: path)
        // In WAL mode a connection holds a shared lock on the database file while it is open.
        #expect(!held.isEmpty, "no lock of this process on \(path) in /proc/locks")

        #expect(try StoreFile.head(of: path, count: 16) == Array("SQLite format 3\0".utf8))
        let second = try ConcordStore.open(at: path)
        _ = try second.status()
        try second.close()
        let reader = try ConcordStore.open(at: path, readOnly: true)
        #expect(try reader.verify().isSound)
        try reader.close()
        _ = try ConcordStore.open(at: path, readOnly: true)

        #expect(try locks(on: path) == held)
    }

    @Test func onlyRegularFilesAreRead() throws {
        let directory = try TemporaryDirectory()
        let fifo = directory.file("fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(throws: StoreFile.Failure.notRegular) { try StoreFile.head(of: fifo, count: 100) }
        #expect(throws: StoreFile.Failure.directory) { try StoreFile.head(of: directory.path, count: 100) }
        #expect(throws: StoreFile.Failure.missing) { try StoreFile.head(of: directory.file("none"), count: 100) }
        let error = #expect(throws: ConcordError.self) { try ConcordStore.open(at: fifo) }
        #expect(error?.message == "\(fifo) is not a regular file")
        let short = directory.file("short")
        #expect(FileManager.default.createFile(atPath: short, contents: Data([1, 2, 3])))
        #expect(try StoreFile.head(of: short, count: 100) == [1, 2, 3])
    }

    /// This process's POSIX locks on the file at `path`, as /proc/locks lists them (type and range).
    private func locks(on path: String) throws -> [String] {
        var status = stat()
        #expect(stat(path, &status) == 0)
        let table = try String(contentsOfFile: "/proc/locks", encoding: .utf8)
        // "1: POSIX  ADVISORY  READ 1234 fe:00:5351486 1073741826 1073742335"
        return table.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 8, fields[1] == "POSIX", fields[4] == "\(getpid())",
                  fields[5].split(separator: ":").last == "\(status.st_ino)"
            else { return nil }
            return fields[3...].filter { $0 != fields[4] && $0 != fields[5] }.joined(separator: " ")
        }.sorted()
    }
}
