import Foundation
import Testing

/// `syncctl sync --folder` on a folder damaged as sync tools and people damage it (SPEC.md §14):
/// issue 16's five failures, with the built binary. (The fifth, a folder that cannot be written,
/// is `DiskFaultTests.aReadOnlySharedFolderEndsTheSyncAfterItsImportsAndRecovers`, which needs
/// another user than root.)
@Suite(.waitsForProcesses) struct FolderDamageCommandTests {
    /// Runs `sync --folder`, which must exit 0; returns its result (warnings on stderr).
    @discardableResult
    func sync(_ store: Store, _ folder: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> RunResult {
        let result = try store.run("sync", "--folder", folder)
        #expect(result.succeeded, "\(result)", sourceLocation: sourceLocation)
        return result
    }

    /// Failure 1: a's first file is deleted after b imported it. Both republish what it held, and
    /// a replica that joins later converges.
    @Test func aLostFileIsRepublishedAndANewReplicaConverges() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let first = try a.addReminder("only in a's first file")
        try sync(a, folder)
        try sync(b, folder)
        try b.addReminder("from b")
        try sync(b, folder)
        let lost = "\(try a.replicaID())-0000000001.cbundle"
        try FileManager.default.removeItem(atPath: folder + "/concord-v1/" + lost)

        var outputs: [String] = []
        for round in 1...3 {
            try a.addReminder("a, round \(round)")
            try b.addReminder("b, round \(round)")
            for store in [a, b] {
                let result = try sync(store, folder)
                #expect(result.stderr.isEmpty, "\(result)")
                outputs.append(result.out)
            }
        }
        #expect(outputs.contains { $0.contains(" of them the folder had lost)") }, "\(outputs)")
        let c = try sandbox.makeStore("c.db")
        #expect(try sync(c, folder).stderr.isEmpty)
        try sync(a, folder)
        #expect(try c.show(first).string("title") == "only in a's first file")
        #expect(try c.dump() == a.dump())
        #expect(try c.status().object("versionVector")?.count == 2, "c has both replicas' operations")
        for store in [a, b, c] { #expect(try sync(store, folder).out == "up to date") }
    }

    /// Failure 2: a's first file replaced by a file of the same name and size that holds other
    /// operations. b, which imported the first, reads the new one too.
    @Test func aFileReplacedByOneOfTheSameSizeIsReadAgain() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        try a.addReminder("title 0")
        try sync(a, folder)
        try sync(b, folder)
        let path = folder + "/concord-v1/\(try a.replicaID())-0000000001.cbundle"
        let size = try fileSize(path)

        // The same edit made by another replica, exported until its bundle has the same size.
        var replacement: (store: Store, bytes: Data)?
        for attempt in 1...20 where replacement == nil {
            let other = try sandbox.makeStore("other-\(attempt).db")
            try other.addReminder("title \(attempt % 10)")
            let bundle = sandbox.path("other-\(attempt).cbundle")
            try other.ok("export", bundle)
            let bytes = try Data(contentsOf: URL(fileURLWithPath: bundle))
            if bytes.count == size { replacement = (other, bytes) }
        }
        let (other, bytes) = try #require(replacement, "no bundle of \(size) bytes came out")
        try sandbox.write(bytes, to: path)
        #expect(try fileSize(path) == size)

        let result = try sync(b, folder)
        #expect(result.stderr.isEmpty, "\(result)")
        #expect(result.out.hasPrefix("imported \(try other.operationCount()) operations from 1 file; published "), "\(result)")
        try sync(a, folder)
        try sync(b, folder)
        #expect(try a.dump() == b.dump())
        let c = try sandbox.makeStore("c.db")
        try sync(c, folder)
        #expect(try c.dump() == a.dump())
    }

    /// Failure 3: a keyless writer drops junk under b's id with a huge serial, and on b's next
    /// names, into an encrypted folder. b publishes under its own next free serial, a receives
    /// b's change, and 45 syncs with nothing new add no file.
    @Test func junkWithAHugeSerialNeitherDivertsNorGrowsTheFolder() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let (a, b) = try sandbox.makePairedStores()
        try b.addReminder("before the junk")
        try sync(b, folder)
        try sync(a, folder)
        let idB = try b.replicaID()
        let junk = ["\(idB)-9999999999.cbundle", "\(idB)-0000000002.cbundle"]
        for name in junk { try sandbox.write(Data("not from anyone with the key".utf8), to: folder + "/concord-v1/" + name) }

        let change = try b.addReminder("after the junk")
        let published = try sync(b, folder)
        #expect(published.out == "published 4 operations as \(idB)-0000000003.cbundle" || published.out.hasSuffix("as \(idB)-0000000003.cbundle"), "\(published)")
        #expect(published.stderrLines.count == 2 && published.stderrLines.allSatisfy { $0.hasPrefix("syncctl: warning: skipping \(idB)-") }, "\(published)")
        let received = try sync(a, folder)
        #expect(received.out.hasPrefix("imported "), "\(received)")
        #expect(try a.show(change).string("title") == "after the junk")

        let count = try bundleNames(in: folder).count
        for _ in 0..<45 {
            let quiet = try sync(b, folder)
            #expect(quiet.out == "up to date", "\(quiet)")
        }
        #expect(try bundleNames(in: folder).count == count, "the folder grew with syncs that had nothing new")
    }

    /// Failure 4: a copy of b's store, declared moved so that it writes, publishes other
    /// operations under b's id; then one of b's files is rewritten with them. Every sync exits 0
    /// with one warning line per clashing file, imports the rest, and publishes; the owner keeps
    /// publishing, and nobody applies the copy's operations over what they hold.
    @Test func aClashingFileIsAWarningAndTheOwnerGoesOnPublishing() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        try b.addReminder("b before the copy")
        try sandbox.copy(b.path, to: sandbox.path("copy.db"))
        try sandbox.adoptCopy(sandbox.path("copy.db"))
        let copy = Store(sandbox: sandbox, path: sandbox.path("copy.db"))
        let idB = try b.replicaID()
        #expect(try copy.replicaID() == idB)

        let genuine = try b.addReminder("written by b")
        try sync(b, folder)
        try sync(a, folder)
        let forged = try copy.addReminder("written by the copy")
        let fromCopy = try sync(copy, folder)
        let copyFile = try #require(fromCopy.out.components(separatedBy: " as ").last, "\(fromCopy)")

        for (name, store) in [("a", a), ("b", b)] {
            let own = try store.addReminder("\(name) goes on")
            let result = try sync(store, folder)
            #expect(result.stderrLines.count == 1, "\(name): \(result)")
            let warning = result.stderrLines.first ?? ""
            #expect(warning.hasPrefix("syncctl: warning: skipping what \(copyFile) holds of replica \(idB) from seq "), "\(warning)")
            #expect(warning.hasSuffix(": another operation than this store holds under that seq (two stores share that replica id: one is a copy of the other, see 'syncctl init --fork'; or the file was forged); this store keeps its own"), "\(warning)")
            #expect(result.out.contains("published "), "\(name) publishes as usual: \(result)")
            #expect(!(try store.run("show", forged).succeeded), "\(name) applied the copy's operation")
            _ = own
        }
        let later = try b.addReminder("b, later")
        #expect(try sync(b, folder).out.contains("published "))
        try sync(a, folder)
        #expect(try a.show(later).string("title") == "b, later")

        // One of b's own files rewritten with the copy's operations.
        let bFiles = try bundleNames(in: folder).filter { $0.hasPrefix(idB) && $0 != copyFile }
        let rewritten = try #require(bFiles.last)
        let copyBytes = try Data(contentsOf: URL(fileURLWithPath: folder + "/concord-v1/" + copyFile))
        try sandbox.write(copyBytes, to: sandbox.path("staged"))
        #expect(rename(sandbox.path("staged"), folder + "/concord-v1/" + rewritten) == 0)
        for store in [b, a] {
            let result = try sync(store, folder)
            #expect(result.stderrLines.count == 1, "\(result)")
            #expect(result.stderrLines.contains { $0.hasPrefix("syncctl: warning: skipping what \(rewritten) holds of replica \(idB) from seq ") }, "\(result)")
        }
        let c = try sandbox.makeStore("c.db")
        try sync(c, folder)
        #expect(try c.show(genuine).string("title") == "written by b")
        #expect(try c.show(later).string("title") == "b, later")
        #expect(!(try c.run("show", forged).succeeded))
    }

    /// Two processes of one replica, a watcher and the commands beside it, publish and coalesce
    /// into one folder at once: every sync succeeds without a warning, no file is lost, and
    /// another replica gets everything.
    @Test func aWatcherAndCommandsOfOneReplicaSyncAtOnce() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let watcher = try sandbox.start(["sync", "--folder", folder, "--watch", "--interval", "0.1", "--store", a.path])
        for round in 1...40 {
            try a.addReminder("round \(round)")
            let result = try sync(a, folder)
            #expect(result.stderr.isEmpty, "\(result)")
        }
        watcher.send(SIGTERM)
        let stopped = watcher.wait(timeout: 30)
        #expect(stopped.succeeded, "\(stopped)")
        #expect(!stopped.stderr.contains("warning"), "\(stopped)")
        #expect(try sync(a, folder).stderr.isEmpty)
        let names = try bundleNames(in: folder)
        #expect(names.count <= 33, "coalesced: \(names.count) files")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder + "/concord-v1").allSatisfy { !$0.hasPrefix(".") })
        let b = try sandbox.makeStore("b.db")
        let imported = try sync(b, folder)
        #expect(imported.stderr.isEmpty, "\(imported)")
        #expect(try b.dump() == a.dump())
    }

    /// §12's line for a file of the folder that cannot be read: a warning, and the sync goes on.
    @Test func anUnreadableFileIsSkippedWithTheSystemsReason() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        try a.addReminder("from a")
        try sync(a, folder)
        let name = try bundleNames(in: folder)[0]
        let path = folder + "/concord-v1/" + name
        // (As root, `runAsUser` drops the capability to read what permissions forbid.)
        chmod(path, 0)
        defer { chmod(path, 0o644) }
        let result = try b.runAsUser("sync", "--folder", folder)
        #expect(result.succeeded, "\(result)")
        #expect(result.stderrLines == ["syncctl: warning: skipping \(name): cannot read it (Permission denied)"], "\(result)")
    }
}
