import Foundation
import Testing

/// The bundles under `Fixtures/` through the built `syncctl`: format 1, whose assigns carry no
/// predecessors, shows no conflict; format 2 shows the conflicts its operations hold, the same as
/// the store that exported it (SPEC.md §5.1, §13).
@Suite(.waitsForProcesses) struct FormatFixtureTests {
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")

    /// Merges `Fixtures/<folder>/<name>.cbundle` into a fresh store, which must say `merged`, then
    /// print the dump beside it (`<name>.dump.json`); returns the store (in a sandbox of its own)
    /// and the dump.
    static func mergedFixture(_ folder: String, _ name: String, says merged: String) throws -> (Store, dump: String) {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let directory = fixtures.appendingPathComponent(folder)
        #expect(try store.ok("merge", directory.appendingPathComponent("\(name).cbundle").path) == merged)
        let dump = try String(contentsOf: directory.appendingPathComponent("\(name).dump.json"), encoding: .utf8)
            .trimmingCharacters(in: .newlines)
        #expect(try store.ok("dump") == dump)
        return (store, dump)
    }

    @Test(arguments: ["basic", "two-replicas"])
    func aFormat1BundleMergesWithNoConflict(_ name: String) throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        try store.ok("merge", Self.fixtures.appendingPathComponent("bundle-v1/\(name).cbundle").path)
        let expected = try String(contentsOf: Self.fixtures.appendingPathComponent("bundle-v1/\(name).dump.json"), encoding: .utf8)
        #expect(try store.ok("dump") == expected.trimmingCharacters(in: .newlines))
        #expect(try store.ok("conflicts") == "no conflicts")
        #expect(try store.ok("conflicts", "--json") == "[]")
    }

    /// A reminder's title edited on two replicas without an exchange between them, its priority
    /// edited on one and then on the other after a sync, and a note edited on one.
    @Test func aFormat2BundleShowsItsConflicts() throws {
        let (store, _) = try Self.mergedFixture("bundle-v2", "conflicts", says: "merged 14 new operations from 2 replicas")
        let conflicts = try String(
            contentsOf: Self.fixtures.appendingPathComponent("bundle-v2/conflicts.conflicts.json"), encoding: .utf8)
        #expect(try store.ok("conflicts", "--json") == conflicts.trimmingCharacters(in: .newlines))
        let lines = try store.ok("conflicts").split(separator: "\n")
        #expect(lines.count == 3 && lines[0].hasSuffix(" title:"), "\(lines)")
        #expect(lines[1].contains(#""Buy almond milk""#) && lines[2].contains(#""Buy oat milk""#), "\(lines)")
        try store.expectSound("after merging the fixture")
    }

    /// A bundle of format 3 (SPEC.md §13): a note purged after two edits (four operations elided,
    /// then the purge), beside a completed reminder. A fresh store merges it to the dump `syncctl`
    /// printed, with no trace of the note, and holds the purge: the note cannot be made again.
    @Test func aFormat3BundleCarriesAPurge() throws {
        let (store, _) = try Self.mergedFixture("bundle-v3", "purge", says: "merged 12 new operations from 1 replica")
        let log = try store.ok("log").split(separator: "\n")
        #expect(log.count == 12)
        #expect(log.filter { $0.hasSuffix("  (elided: its record was purged)") }.count == 4)
        #expect(log.filter { $0.hasSuffix("  purge") }.count == 1)
        try store.expectSound("after merging the fixture")
    }

    /// A bundle of format 4 (SPEC.md §13): a reminder edited after it was added, one of its two
    /// tags removed, and then compacted: 7 operations and 5 compacted seqs. A fresh store merges
    /// it to the dump `syncctl` printed and holds every seq, the compacted ones without operations.
    @Test func aFormat4BundleCarriesCompactedSeqs() throws {
        let (store, dump) = try Self.mergedFixture("bundle-v4", "compacted", says: "merged 7 new operations from 1 replica and 5 compacted seqs")
        #expect(try store.ok("log").split(separator: "\n").count == 7)
        let vector = try #require(try JSONSerialization.jsonObject(with: Data(try store.ok("status", "--json").utf8)) as? [String: Any])
        let held = try #require(vector["versionVector"] as? [String: Any])
        #expect(held.values.compactMap { $0 as? Int } == [12], "\(held)")
        // Its publisher vouched that it held all 12 seqs, as the store does: the tag's remove is
        // stable, and goes (SPEC.md §5.8); the dump stays.
        #expect(try store.ok("compact", "--keep-history", "0") == "dropped 1 operation of 1 record")
        #expect(try store.ok("dump") == dump)
        try store.expectSound("after merging the fixture")
    }

    /// A bundle of format 5 (SPEC.md §13): its manifest says where its publisher dropped removes
    /// as stable (§5.8). A fresh store merges it to the dump `syncctl` printed; what it exports
    /// then is of format 7, and a third store merges that to the same dump. (That format 7 carries
    /// the vector on, `StableRemoveTests` checks on an export's manifest.)
    @Test func aFormat5BundleSaysWhereRemovesWereDropped() throws {
        let (store, dump) = try Self.mergedFixture("bundle-v5", "stable", says: "merged 6 new operations from 1 replica and 3 compacted seqs")
        #expect(try store.ok("log").split(separator: "\n").count == 6)
        let exported = store.sandbox.path("again.cbundle")
        try store.ok("export", exported)
        #expect(try Data(contentsOf: URL(fileURLWithPath: exported))[8] == 7)
        let again = try store.sandbox.makeStore("again.db")
        try again.ok("merge", exported)
        #expect(try again.ok("dump") == dump)
        try store.expectSound("after merging the fixture")
    }

    /// A bundle of format 6 (SPEC.md §13): its operations blocks hold their entries in columns. Two
    /// replicas' operations, a conflict settled by a write with predecessors, a removed tag,
    /// compacted seqs, a purge with the operations it elided, and a field by name (a retired
    /// replica's record).
    @Test func aFormat6BundleHoldsItsEntriesInColumns() throws {
        let (store, _) = try Self.mergedFixture("bundle-v6", "mixed", says: "merged 24 new operations from 2 replicas and 2 compacted seqs")
        #expect(try store.ok("conflicts") == "no conflicts", "the last title write saw both of the conflict's")
        try store.expectSound("after merging the fixture")
    }

    /// A bundle of format 7 (SPEC.md §13): a note's body of 1 MiB is a block of its own, and the
    /// block after it names by number the records the first block listed. Merged, it gives the
    /// dump `syncctl` printed; exported again and merged into a third store, the same dump.
    @Test func aFormat7BundleNamesRecordsAcrossBlocks() throws {
        let (store, dump) = try Self.mergedFixture("bundle-v7", "long", says: "merged 20 new operations from 2 replicas")
        #expect(try store.ok("conflicts") == "no conflicts", "the last title write saw both of the conflict's")
        let exported = store.sandbox.path("again.cbundle")
        try store.ok("export", exported)
        let again = try store.sandbox.makeStore("again.db")
        try again.ok("merge", exported)
        #expect(try again.ok("dump") == dump)
        try store.expectSound("after merging the fixture")
    }
}
