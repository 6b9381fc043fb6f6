import ConcordCore
import ConcordExchange
import ConcordStore
import Foundation
import Testing

/// A schema-3 store that synced through a shared folder, made by the `syncctl` of an older build
/// (`Fixtures/store-v3/`, README there): this build migrates it to schema 4 (SPEC.md §9), keeps
/// its records and the serials it published, and syncs its folder as a replica that had synced it
/// all along.
@Suite struct StoreFixtureTests {
    static let fixture = fixturesDirectory.appendingPathComponent("store-v3")
    /// The folder the fixture's store synced through, as its `folder_files` rows recorded it.
    static let originalFolder = "/tmp/concord-store-v3/Shared"
    /// The fixture store's replica id (replica `a`), and the other replica's (`b`).
    static let a = "0bacfb8bee3dcacccbd3399bec8ecb9e"
    static let b = "32c571493c3e21e12ccca00dbed3b276"
    /// The highest serial `a` had published in the folder.
    static let lastSerialOfA = 3
    /// The files of the fixture's folder.
    static let files = [bundleName(a, 1), bundleName(a, 2), bundleName(a, 3), bundleName(b, 1), bundleName(b, 2)]
    /// A wall clock after every timestamp of the fixture (made on 2026-11-23).
    static let afterFixture: UInt64 = 1_796_000_000_000

    /// The fixture's store and folder copied into `directory`: (store path, folder path).
    func copyFixture(into directory: TemporaryDirectory) throws -> (store: String, folder: String) {
        let store = directory.file("a.db")
        let folder = directory.file("Shared")
        try FileManager.default.copyItem(atPath: Self.fixture.appendingPathComponent("a.db").path, toPath: store)
        try FileManager.default.copyItem(atPath: Self.fixture.appendingPathComponent("Shared").path, toPath: folder)
        return (store, folder)
    }

    /// `syncctl dump`'s output of the fixture store, made by the build that wrote it.
    func expectedDump() throws -> [UInt8] {
        try readBytes(Self.fixture.appendingPathComponent("a.dump.json").path)
    }

    @Test func theFixtureIsASchema3StoreAndReadsAsItsDump() throws {
        let directory = try TemporaryDirectory()
        let (path, _) = try copyFixture(into: directory)
        // Read-only: nothing is migrated.
        let store = try ConcordStore.open(at: path, readOnly: true)
        #expect(try store.status().schemaVersion == 3)
        #expect(store.replicaID.hex == Self.a)
        // The dump file is `syncctl dump`'s output: the dump and a newline.
        #expect(Array((try store.dump() + "\n").utf8) == (try expectedDump()))
        try store.close()
    }

    @Test func theStoreMigratesAndSyncsItsFolder() throws {
        let directory = try TemporaryDirectory()
        let (path, folder) = try copyFixture(into: directory)
        let clock = ManualClock(Self.afterFixture)
        // A copied store refuses writes until it is declared moved (SPEC.md §9.1).
        let store = try ConcordStore.adoptLocation(at: path, environment: environment(clock: clock, seed: 1))
        #expect(ConcordStore.schemaVersion == 9)
        #expect(try store.status().schemaVersion == 9)
        #expect(try !store.holdsPurgedRecords() && store.erasures() == 0)
        #expect(store.replicaID.hex == Self.a)
        #expect(Array((try store.dump() + "\n").utf8) == (try expectedDump()))
        #expect(try store.verify().isSound)
        // The migration to schema 5 applied the log again: every record knows where its operations
        // are (its history is exactly its operations of the log), and none is in conflict, since
        // no operation of the fixture carries predecessors.
        let operations = try store.allOperations()
        #expect(try store.conflicts().isEmpty)
        for ref in Set(operations.map(\.record)) {
            let history = try #require(try store.history(of: ref)).map(\.operation)
            #expect(history == operations.filter { $0.record == ref }.sorted { $0.stamp < $1.stamp }, "\(ref)")
        }

        // The migration kept the highest serial `a` published in the folder it synced through,
        // and dropped the old records of its files, so that every file is read once more.
        #expect(try store.lastPublishedSerial(in: Self.originalFolder) == Self.lastSerialOfA)
        #expect(try store.folderFiles(in: Self.originalFolder).isEmpty)
        #expect(try store.lastPublishedSerial(in: folder) == 0)

        // A sync of the copied folder: every file is read, none holds anything new; `a` publishes
        // its edit made after its last sync (2 operations), under a serial it never used.
        let before = try Self.files.map { try readBytes(folder + "/concord-v1/" + $0) }
        let first = try FolderSync(store: store, folder: folder).sync()
        #expect(first.warnings.isEmpty)
        #expect(first.farFutureTimestamp == nil)
        #expect(first.importedFiles == Self.files.count)
        #expect(first.importedOperations == 0)
        #expect(first.publishedFile == bundleName(Self.a, Self.lastSerialOfA + 1))
        #expect(first.publishedOperations == 2)
        #expect(first.republishedOperations == 0)
        #expect(try listing(folder).keys.sorted() == (Self.files + [bundleName(Self.a, Self.lastSerialOfA + 1)]).sorted())
        #expect(try Self.files.map { try readBytes(folder + "/concord-v1/" + $0) } == before, "no file of the fixture changed")
        #expect(try store.lastPublishedSerial(in: folder) == Self.lastSerialOfA + 1)
        #expect(try store.lastPublishedSerial(in: Self.originalFolder) == Self.lastSerialOfA)
        #expect(Array((try store.dump() + "\n").utf8) == (try expectedDump()))

        // The next sync finds nothing to do.
        let second = try FolderSync(store: store, folder: folder).sync()
        #expect(second.warnings.isEmpty)
        #expect(!second.movedSomething)
        #expect(second.importedFiles == 0)
        #expect(second.publishedFile == nil)
        #expect(try listing(folder).count == Self.files.count + 1)
        #expect(try store.verify().isSound)

        // A fresh store that syncs the folder holds what `a` holds, and publishes nothing.
        let fresh = try ConcordStore.create(at: directory.file("fresh.db"), environment: environment(clock: ManualClock(Self.afterFixture), seed: 2))
        let report = try FolderSync(store: fresh, folder: folder).sync()
        #expect(report.warnings.isEmpty)
        #expect(report.importedFiles == Self.files.count + 1)
        #expect(report.publishedFile == nil)
        #expect(try fresh.versionVector() == (try store.versionVector()))
        #expect(Array((try fresh.dump() + "\n").utf8) == (try expectedDump()))
        try fresh.close()
        try store.close()
    }
}
