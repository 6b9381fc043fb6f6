import ConcordCore
import ConcordExchange
import ConcordStore
import ConcordTestSupport
import Testing

/// What a store records of its shared folders (SPEC.md §9, §14), kept by the exchange layer.
@Suite struct FolderRecordsTests {
    /// A folder's files are recorded whole (how they are known, what they hold, who wrote
    /// them) and forgotten only as they were seen; serials are taken once each, passing over
    /// names taken, and only grow (SPEC.md §9, §14).
    @Test func filesAndSerialsOfASharedFolderAreRecorded() throws {
        let store = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 1))
        var holds = SeqRanges(upTo: VersionVector([store.replicaID: 5]))
        holds.insert(9...12, of: store.replicaID)
        let plain = FolderFile(
            folder: "/shared", name: "a", identity: "1 2 3 4 5", sha256: Array(repeating: 7, count: 32), keyID: nil, holds: holds, published: true)
        let sealed = FolderFile(
            folder: "/shared", name: "b", identity: "", sha256: Array(repeating: 8, count: 32), keyID: [1, 2, 3, 4, 5, 6, 7, 8],
            holds: SeqRanges(), published: false)
        try store.recordFolderFiles([plain, sealed])
        #expect(try store.folderFiles(in: "/shared") == ["a": plain, "b": sealed])
        #expect(try store.folderFiles(in: "/elsewhere") == [:])
        // Forgotten only if still recorded with the hash seen.
        var rewritten = sealed
        rewritten.sha256 = Array(repeating: 9, count: 32)
        try store.forgetFolderFiles([rewritten])
        #expect(try store.folderFiles(in: "/shared") == ["a": plain, "b": sealed])
        try store.forgetFolderFiles([plain])
        #expect(try store.folderFiles(in: "/shared") == ["b": sealed])

        #expect(try store.lastPublishedSerial(in: "/shared") == 0)
        #expect(try store.takeSerial(in: "/shared", passing: [], maximum: 10) == 1)
        #expect(try store.takeSerial(in: "/shared", passing: [2, 3, 5], maximum: 10) == 4)
        #expect(try store.takeSerial(in: "/shared", passing: [5, 9_999], maximum: 10) == 6)
        #expect(try store.takeSerial(in: "/elsewhere", passing: [], maximum: 10) == 1)
        #expect(try store.lastPublishedSerial(in: "/shared") == 6)
        #expect(try store.takeSerial(in: "/shared", passing: [7, 8, 9, 10], maximum: 10) == nil)
        #expect(try store.lastPublishedSerial(in: "/shared") == 6, "nothing taken past the maximum")
    }

    /// A file is recorded as its own before it is linked into place, and linked only while that
    /// record is there; a record of a missing file is forgotten only while the file is still
    /// missing (SPEC.md §14, "Serials"). So no crash leaves a file that its replica does not know
    /// it wrote, and no other process of the replica forgets a file being placed.
    @Test func aFileIsRecordedAsItsOwnBeforeItIsPlaced() throws {
        let store = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 1))
        let file = FolderFile(
            folder: "/shared", name: "n", identity: "", sha256: Array(repeating: 7, count: 32), keyID: nil, holds: SeqRanges(), published: true,
            erasures: 3)
        #expect(try store.reserveFolderFile(file))
        #expect(try store.folderFiles(in: "/shared") == ["n": file])
        var other = file
        other.sha256 = Array(repeating: 8, count: 32)
        #expect(try !store.reserveFolderFile(other), "a name recorded is taken")

        // Another process found the name missing and forgot its record: the file is not placed.
        try store.forgetFolderFiles([file]) { _ in false }
        #expect(try store.folderFiles(in: "/shared") == ["n": file], "not forgotten while the file is there")
        try store.forgetFolderFiles([file]) { _ in true }
        var placed = false
        #expect(try !store.placeFolderFile(file) { placed = true })
        #expect(!placed)

        #expect(try store.reserveFolderFile(file))
        #expect(try store.placeFolderFile(file) { placed = true })
        #expect(placed)
        #expect(try store.folderFiles(in: "/shared") == ["n": file])

        // A name someone took as the file was linked: the record goes with the failure.
        let second = FolderFile(
            folder: "/shared", name: "m", identity: "", sha256: Array(repeating: 9, count: 32), keyID: nil, holds: SeqRanges(), published: true)
        #expect(try store.reserveFolderFile(second))
        #expect(throws: ConcordError.self) { try store.placeFolderFile(second) { () throws(ConcordError) in throw ConcordError(.exists, "m already exists") } }
        #expect(try store.folderFiles(in: "/shared") == ["n": file])
    }
}
