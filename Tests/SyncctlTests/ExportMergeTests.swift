import Foundation
import Testing

/// `syncctl export` and `syncctl merge` of bundles (SPEC.md §11, §13).
@Suite(.waitsForProcesses) struct ExportMergeTests {
    /// Gives `a` some records of both kinds, tags and a few edits.
    func populate(_ store: Store, _ prefix: String) throws {
        let reminder = try store.addReminder("\(prefix) reminder", "--due", "2027-01-01T09:00:00Z", "--tag", "work", "--priority", "high")
        _ = try store.addReminder("\(prefix) other", "--repeat", "daily", "--due", "2027-02-01T09:00:00Z")
        let note = try store.addNote("\(prefix) note", "--body", "line one\nline two", "--tag", "ideas", "--pinned")
        try store.ok("reminder", "complete", reminder)
        try store.ok("note", "tag", note, "--add", "later", "--remove", "ideas")
    }

    @Test func exportThenMergeIntoAnotherStoreConverges() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        try populate(a, "A")
        let operations = try a.operationCount()
        let bundle = sandbox.path("a.cbundle")

        let exported = try a.run("export", bundle)
        #expect(exported.succeeded && exported.stderr.isEmpty, "\(exported)")
        #expect(exported.stdoutLines.count == 1, "\(exported)")
        let line = try #require(ExportLine(exported.out), "unexpected export line: \(exported.out)")
        #expect(line.operations == operations)
        #expect(line.file == bundle)
        #expect(line.bytes == (try fileSize(bundle)), "the byte count printed is the file's size")
        #expect(line.perOperation == String(format: "%.1f", Double(line.bytes) / Double(operations)))
        #expect(exported.out == "exported \(operations) operations to \(bundle) (\(line.bytes) bytes, \(line.perOperation) bytes per operation)")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: bundle))
        #expect(Array(bytes.prefix(10)) == [0x89, 0x43, 0x4E, 0x43, 0x44, 0x0D, 0x0A, 0x1A, 7, 0], "magic, format version 7, flags 0")
        #expect(try listing(of: sandbox.root.path).keys.filter { $0.contains(".tmp") }.isEmpty, "no temporary file is left behind")

        let merged = try b.run("merge", bundle)
        #expect(merged.succeeded && merged.stderr.isEmpty, "\(merged)")
        #expect(merged.out == "merged \(operations) new operations from 1 replica")
        #expect(try a.dump() == b.dump())
        #expect(try b.operationCount() == operations)
        #expect(try b.status().object("versionVector")?.int(try a.replicaID()) == operations)

        // The same bundle again brings nothing new, and changes nothing.
        let before = try b.snapshot()
        #expect(try b.ok("merge", bundle) == "merged 0 new operations from 0 replicas")
        #expect(try b.snapshot() == before)
        // Nor into the store that wrote it.
        #expect(try a.ok("merge", bundle) == "merged 0 new operations from 0 replicas")
    }

    @Test func exportOfOneOperationAndOfNone() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let empty = sandbox.path("empty.cbundle")
        let none = try #require(ExportLine(try a.ok("export", empty)))
        #expect(none.operations == 0)
        #expect(none.bytes == (try fileSize(empty)))
        #expect(none.perOperation == "0.0")

        let b = try sandbox.makeStore("b.db")
        #expect(try b.ok("merge", empty) == "merged 0 new operations from 0 replicas")

        let id = try a.addReminder("one")
        let statusFile = try sandbox.write(Data(try a.statusJSON().utf8), to: "a-status.json")
        try a.ok("reminder", "complete", id)
        let one = sandbox.path("one.cbundle")
        let output = try a.ok("export", one, "--since", statusFile)
        let line = try #require(ExportLine(output), "\(output)")
        #expect(output.hasPrefix("exported 1 operation to \(one) ("), "singular wording: \(output)")
        #expect(line.perOperation == String(format: "%.1f", Double(line.bytes)))
    }

    @Test func mergeTellsBundlesAndStoresApartByContentNotName() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let c = try sandbox.makeStore("c.db")
        try populate(a, "A")
        try populate(b, "B")
        // A bundle named like a store, and a store named like a bundle.
        let bundle = sandbox.path("x.db")
        let exported = try a.ok("export", bundle)
        #expect(ExportLine(exported)?.file == bundle)
        let storeNamedLikeABundle = sandbox.path("y.cbundle")
        try FileManager.default.copyItem(atPath: b.path, toPath: storeNamedLikeABundle)

        let total = try a.operationCount() + b.operationCount()
        let merged = try c.run("merge", bundle, storeNamedLikeABundle)
        #expect(merged.succeeded && merged.stderr.isEmpty, "\(merged)")
        #expect(merged.out == "merged \(total) new operations from 2 replicas")

        // c now holds what a and b hold together.
        try a.ok("merge", b.path)
        #expect(try c.dump() == a.dump())
        #expect(try c.operationCount() == total)
    }

    @Test func deltasSinceAPeersVersionVectorHoldOnlyWhatThePeerLacks() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        try populate(a, "A")
        try populate(b, "B")
        try a.ok("merge", b.path)
        try b.ok("merge", a.path)
        #expect(try a.dump() == b.dump())

        // Then each goes on alone: a makes three changes, b one.
        let shared = try #require(try a.reminders().first?.string("id"))
        try a.ok("reminder", "edit", shared, "--title", "retitled on A")
        let fresh = try a.addNote("fresh on A")
        let aNew = try a.operationCount() - b.operationCount()
        #expect(aNew == 4, "one title, three fields of a new note")
        _ = fresh
        try b.ok("reminder", "edit", shared, "--priority", "low")
        let aOperationsBefore = try a.operationCount()

        // b's status, three ways: a file holding the whole `status --json`, that output inline,
        // and the bare version vector.
        let statusText = try b.statusJSON()
        let statusFile = try sandbox.write(Data(statusText.utf8), to: "b-status.json")
        let vector = try #require(try jsonObject(statusText).object("versionVector"))
        let bareVector = String(decoding: try JSONSerialization.data(withJSONObject: vector, options: [.sortedKeys]), as: UTF8.self)
        #expect(bareVector.hasPrefix("{\""))
        let full = sandbox.path("full.cbundle")
        let fullLine = try #require(ExportLine(try a.ok("export", full)))
        #expect(fullLine.operations == aOperationsBefore)

        var deltas: [String] = []
        for (index, since) in [statusFile, statusText, bareVector].enumerated() {
            let delta = sandbox.path("delta-\(index).cbundle")
            let output = try a.ok("export", delta, "--since", since)
            let line = try #require(ExportLine(output), "\(output)")
            #expect(line.operations == aNew, "the delta holds only a's \(aNew) new operations: \(output)")
            #expect(line.bytes == (try fileSize(delta)))
            #expect(line.bytes < fullLine.bytes)
            deltas.append(delta)
        }

        // Any of them brings b up to a: merging it gives b exactly a's new operations.
        let merged = try b.run("merge", deltas[1])
        #expect(merged.out == "merged \(aNew) new operations from 1 replica", "\(merged)")
        #expect(try b.ok("merge", deltas[0], deltas[2]) == "merged 0 new operations from 0 replicas")
        // And b's own change goes back to a the same way.
        let back = sandbox.path("back.cbundle")
        let backLine = try #require(ExportLine(try b.ok("export", back, "--since", try a.statusJSON())))
        #expect(backLine.operations == 1)
        #expect(try a.ok("merge", back) == "merged 1 new operation from 1 replica")
        #expect(try a.dump() == b.dump())
        let reminder = try a.show(shared)
        #expect(reminder.string("title") == "retitled on A")
        #expect(reminder.string("priority") == "low")

        // A peer that already holds everything gets an empty delta.
        let nothing = try #require(ExportLine(try a.ok("export", sandbox.path("nothing.cbundle"), "--since", try b.statusJSON())))
        #expect(nothing.operations == 0)
    }

    @Test func badSinceValuesAreRefusedAndWriteNoFile() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        try populate(a, "A")
        let replica = try a.replicaID()
        let outDirectory = try sandbox.makeDirectory("out")
        let target = outDirectory + "/delta.cbundle"
        let notJSONFile = try sandbox.write(Data("this is not json\n".utf8), to: "notjson.txt")

        // Each refused with one line about the version vector.
        let malformed = [
            "not json",
            "{",
            notJSONFile,
            "[1, 2]",
            "{\"\(replica)\": -1}",
            "{\"\(replica)\": 1.5}",
            "{\"\(replica)\": \"3\"}",
            "{\"\(replica)\": null}",
            "{\"\(replica)\": 18446744073709551616}",
        ]
        for since in malformed {
            try a.expectRefused(["export", target, "--since", since], mentions: ["version vector"])
            #expect(try listing(of: outDirectory).isEmpty, "a refused export writes no file: --since \(since)")
        }

        // A key that is not a replica id names the problem too.
        for since in ["{\"nope\": 1}", "{\"\(replica.dropLast())\": 1}", "{\"\(replica)\": 1, \"status\": 2}"] {
            try a.expectRefused(["export", target, "--since", since], mentions: ["version vector"])
            #expect(try listing(of: outDirectory).isEmpty, "a refused export writes no file: --since \(since)")
        }
        #expect(!FileManager.default.fileExists(atPath: target))
    }

    /// SPEC.md §12 gives the message word for word, quoting the command with single quotes.
    @Test func aBadSinceValueGetsTheMessageOfTheSpec() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        _ = try a.addReminder("mine")
        let result = try a.expectRefused(["export", sandbox.path("delta.cbundle"), "--since", "not json"])
        #expect(result.stderr == "syncctl: a version vector is a JSON object from replica id to sequence number, as 'syncctl status --json' prints\n", "\(result)")
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("delta.cbundle")))
    }

    @Test func damagedBundlesAreRefusedWithOneLineAndChangeNothing() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        try populate(a, "A")
        _ = try b.addReminder("b's own", "--tag", "mine")
        let good = sandbox.path("good.cbundle")
        try a.ok("export", good)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: good))
        let layout = try BundleLayout(bytes)
        #expect(layout.blocks.map(\.type) == [1, 2, 3], "manifest, one operations block, end")
        let manifest = try layout.first(1)
        let operations = try layout.first(2)
        let end = try layout.first(3)

        func refused(_ name: String, _ data: Data, _ problem: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let path = try sandbox.write(data, to: name)
            // Each of the ways a merge of bundles runs (SPEC.md §5.6): in one transaction; in
            // batches, after a check of the whole input, as the manifests promise more than a
            // batch takes; and in batches after the one transaction found more records than a
            // batch holds and rolled back.
            for batch in [nil, "3", "1000000,1"] {
                let environment: [String: String?] = batch.map { ["SYNCCTL_MERGE_BATCH": $0] } ?? [:]
                let result = try b.expectRefused(
                    ["merge", path], mentions: [path, problem], code: 1, environment: environment, sourceLocation: sourceLocation)
                #expect(result.stderr.hasPrefix("syncctl: \(path)"), "the line names the file first: \(result)", sourceLocation: sourceLocation)
                // Also beside a good bundle: all or nothing.
                try b.expectRefused(["merge", good, path], mentions: [path], code: 1, environment: environment, sourceLocation: sourceLocation)
            }
        }

        // Truncated anywhere after the magic.
        for length in [9, 10, 20, manifest.payloadOffset + manifest.payloadLength, operations.payloadOffset + operations.payloadLength / 2, end.headerOffset + 3, bytes.count - 1] {
            try refused("truncated-\(length).cbundle", bytes.prefix(length), ": the bundle is truncated")
        }
        // One byte changed: in the manifest, in the middle of the operations, in the end block.
        for offset in [manifest.payloadOffset + 3, operations.payloadOffset + operations.payloadLength / 2, end.payloadOffset + end.payloadLength - 1] {
            try refused("flipped-\(offset).cbundle", flippingByte(bytes, at: offset), ": the bundle is corrupt: ")
        }
        // A newer format version.
        var newer = bytes
        newer[8] = 8
        try refused("newer.cbundle", newer, ": bundle format version 8 is newer than this build reads (7); upgrade Concord")
        // Bytes after the end block.
        try refused("trailing.cbundle", bytes + Data([0]), ": the bundle is corrupt: ")

        // Not a bundle at all: empty, text, or cut inside the magic.
        for (name, data) in [("empty.cbundle", Data()), ("text.cbundle", Data("hello, these are notes\n".utf8)), ("stub.cbundle", bytes.prefix(5))] {
            let path = try sandbox.write(data, to: name)
            let result = try b.expectRefused(["merge", path], code: 1)
            #expect(result.stderr == "syncctl: \(path) is not a Concord store or bundle\n", "\(result)")
        }

        // The good bundle itself merges.
        #expect(try b.ok("merge", good) == "merged \(try a.operationCount()) new operations from 1 replica")
    }

    @Test func mergeOfADirectoryOrAMissingFileIsRefused() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        _ = try a.addReminder("mine")
        let directory = try sandbox.makeDirectory("bundles.cbundle")
        let result = try a.expectRefused(["merge", directory], code: 1)
        #expect(result.stderr == "syncctl: \(directory) is a directory, not a Concord store or bundle\n", "\(result)")
        let missing = sandbox.path("missing.cbundle")
        let gone = try a.expectRefused(["merge", missing], code: 1)
        #expect(gone.stderr == "syncctl: no store or bundle at \(missing)\n", "\(gone)")
    }

    @Test func exportNeverWritesOverAStore() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        try populate(a, "A")
        let bBytes = try b.bytes()
        // Over the store being exported, and over another store.
        try a.expectRefused(["export", a.path], mentions: [a.path, "is a Concord store"], code: 1)
        try a.expectRefused(["export", b.path], mentions: [b.path, "is a Concord store"], code: 1)
        #expect(try b.bytes() == bBytes)
        #expect(try a.operationCount() > 0)
    }
}
