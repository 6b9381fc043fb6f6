import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordPeer
import ConcordStore
import Foundation
import Testing

@testable import syncctl

/// Library messages never name a `syncctl` command; syncctl adds its advice from the error's code
/// (SPEC.md §12), so that its lines read as they always have.
@Suite(.waitsForProcesses) struct AdviceTests {
    /// The codes whose remedy is a command of syncctl: exactly those the advice covers.
    static let codesThatNeedACommand: Set<ConcordError.Code> = [
        .missing, .copied, .forked, .clash, .sameReplica, .noSyncKey, .encryptedBundle, .notAVersionVector, .retired,
    ]

    @Test func theAdviceCoversExactlyTheCodesThatNeedACommand() {
        #expect(Set(Advice.edits.keys) == Self.codesThatNeedACommand)
        #expect(Self.codesThatNeedACommand.isSubset(of: ConcordError.Code.all))
        #expect(Set(ConcordError.Code.all).count == ConcordError.Code.all.count, "a code listed twice")
        for code in ConcordError.Code.all {
            #expect(ConcordError.Code(name: code.description) == code)
        }
    }

    /// Every code of SPEC.md §12.1's table, in its order, and nothing else; the row of each code
    /// with advice shows syncctl's words.
    @Test func theSpecListsEveryCodeAndTheAdvice() throws {
        let spec = try String(contentsOf: packageRoot.appendingPathComponent("SPEC.md"), encoding: .utf8)
        let section = try #require(spec.components(separatedBy: "\n## 12. Errors\n").dropFirst().first?.components(separatedBy: "\n## 13.").first)
        var rows: [(String, Substring)] = []
        for line in section.split(separator: "\n") {
            if let match = line.firstMatch(of: /^\| `([a-zA-Z]+)` \|/) { rows.append((String(match.1), line)) }
        }
        #expect(rows.map(\.0) == ConcordError.Code.all.map(\.description))
        for (code, edits) in Advice.edits {
            let row = rows.first { $0.0 == code.description }?.1 ?? ""
            for edit in edits {
                let words: String
                switch edit {
                case .append(let advice), .insert(let advice, _): words = advice
                case .replace(_, let replacement): words = replacement
                }
                #expect(row.contains("`\(words.trimmingCharacters(in: .whitespaces))`"), "\(code): \(words)")
            }
        }
    }

    /// No string in the library's sources names syncctl: only comments may (they say which
    /// command of syncctl does what the code does).
    @Test func noLibrarySourceNamesSyncctl() throws {
        let sources = packageRoot.appendingPathComponent("Sources")
        let modules = try FileManager.default.contentsOfDirectory(atPath: sources.path).filter { $0.hasPrefix("Concord") }
        #expect(modules.count >= 8, "\(modules)")
        var offending: [String] = []
        for module in modules {
            let directory = sources.appendingPathComponent(module)
            for case let name as String in FileManager.default.enumerator(atPath: directory.path)! where name.hasSuffix(".swift") {
                let text = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let code = line.components(separatedBy: "//").first ?? ""
                    if code.contains("syncctl") { offending.append("\(module)/\(name):\(number + 1): \(line)") }
                }
            }
        }
        #expect(offending.isEmpty, "\(offending.joined(separator: "\n"))")
    }

    /// Each error that needs a command, made by the library itself: its message names none, and
    /// syncctl's line is SPEC.md §12's.
    @Test func theLinesOfErrorsThatNeedACommand() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("advice-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var seen: Set<ConcordError.Code> = []
        func check(_ error: ConcordError, _ code: ConcordError.Code, _ line: String, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(error.code == code, sourceLocation: sourceLocation)
            #expect(!error.message.contains("syncctl"), "\(error.message)", sourceLocation: sourceLocation)
            #expect(Advice.line(for: error) == line, sourceLocation: sourceLocation)
            seen.insert(code)
        }
        func error(_ body: () throws -> Void) -> ConcordError? {
            do {
                try body()
                return nil
            } catch {
                return error as? ConcordError
            }
        }

        // A missing store.
        let missing = directory + "/missing.db"
        check(try #require(error { _ = try ConcordStore.open(at: missing) }), .missing, "no store at \(missing); run 'syncctl init' to create one")

        // A copied store, written to; and two stores that share a replica id, merged.
        let original = try Self.storeToCopy(at: directory + "/original.db", copy: directory + "/copy.db")
        let replica = original.replicaID
        let copy = try await ConcordStore.open(at: directory + "/copy.db")
        check(
            try #require(error { _ = try copy.addReminder(ReminderDraft(title: "on the copy")) }), .copied,
            "\(copy.path) is a copy of the store at \(original.path) (another file): run 'syncctl init --fork' to make it a replica of its own, or 'syncctl init --moved' if it was moved and the original is no longer used")
        let moved = try ConcordStore.adoptLocation(at: copy.path)
        try await moved.addReminder(ReminderDraft(title: "on the copy"))
        try await original.addReminder(ReminderDraft(title: "on the original"))
        let clash = try #require(error { _ = try original.merge(storeAt: moved.path) })
        let seq = try #require((clash.cause as? OperationClash)?.id.seq)
        check(
            clash, .clash,
            "replica \(replica) has two different operations with seq \(seq), here and in what is being merged: one of the two stores is a copy of the other; run 'syncctl init --fork' on the copy (nothing of this batch was merged)")

        // A store forked by another store object (another process) since this one opened it.
        let forked = try await ConcordStore.open(at: moved.path)
        let (fork, _) = try ConcordStore.fork(at: moved.path)
        check(
            try #require(error { _ = try forked.addReminder(ReminderDraft(title: "under the old id")) }), .forked,
            "the store at \(moved.path) is now replica \(fork.replicaID.hex) (another process ran 'syncctl init --fork' on it); this process opened it as replica \(replica.hex): open it again")

        // A shared folder's file that clashes: its warning.
        let folder = directory + "/shared"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let clashing = try Self.storeToCopy(at: directory + "/clashing.db", copy: directory + "/clashing-copy.db")
        let clashingCopy = try ConcordStore.adoptLocation(at: directory + "/clashing-copy.db")
        let firstDifferent = try await clashing.versionVector()[clashing.replicaID] + 1
        try await clashing.addReminder(ReminderDraft(title: "on the original"))
        try await clashingCopy.addReminder(ReminderDraft(title: "on the copy"))
        let published = try await #require(try clashingCopy.sync(folder: folder).publishedFile)
        let warning = try await #require(try clashing.sync(folder: folder).warnings.first)
        check(
            warning, .clash,
            "skipping what \(published) holds of replica \(clashing.replicaID) from seq \(firstDifferent): another operation than this store holds under that seq (two stores share that replica id: one is a copy of the other, see 'syncctl init --fork'; or the file was forged); this store keeps its own")

        // Two stores of one replica id in a peer session: both sides say so.
        let key = SyncKey.generate()
        var client = PeerSession(role: .client, key: key, localReplica: replica, localVersions: VersionVector())
        var server = PeerSession(role: .server, key: key, localReplica: replica, localVersions: VersionVector())
        _ = server.start()
        var toServer = client.start().sentBytes
        var toClient: [UInt8] = []
        while !(toServer.isEmpty && toClient.isEmpty) {
            toClient = server.receive(toServer).sentBytes
            toServer = client.receive(toClient).sentBytes
        }
        check(
            try #require(server.failure), .sameReplica,
            "both stores have replica id \(replica.hex); one is a copy of the other: run 'syncctl init --fork' on one")

        // No sync key; an encrypted bundle and no key to read it.
        let keyless = try await ConcordStore.create(at: directory + "/keyless.db")
        check(ConcordError.noSyncKey(at: keyless.path), .noSyncKey,
              "the store at \(keyless.path) has no sync key; run 'syncctl key generate', or 'syncctl key import KEY' with the key of another store")
        try original.setSyncKey(key)
        let bundle = directory + "/sealed.cbundle"
        try await original.exportBundle(to: bundle, encryptingWith: key)
        check(
            try #require(error { _ = try ConcordStore.bundleReader(at: bundle, key: nil) }), .encryptedBundle,
            "\(bundle): the bundle is encrypted (with sync key \(key.id)), and this store has no sync key; run 'syncctl key import KEY'")

        // A version vector that is not one.
        check(
            try #require(error { _ = try VersionVector(json: "[]") }), .notAVersionVector,
            "a version vector is a JSON object from replica id to sequence number, as 'syncctl status --json' prints")

        // A store retired by another, asked to write.
        let retiring = try await ConcordStore.create(at: directory + "/retiring.db")
        try await retiring.merge(storeAt: keyless.path)
        try await keyless.addReminder(ReminderDraft(title: "seen"))
        try await retiring.merge(storeAt: keyless.path)
        try await retiring.retire(keyless.replicaID)
        try await keyless.merge(storeAt: retiring.path)
        check(
            try #require(error { _ = try keyless.addReminder(ReminderDraft(title: "refused")) }), .retired,
            "replica \(keyless.replicaID.hex) was retired by another replica: it writes and syncs no more until it continues under a new id; run 'syncctl init --fork' to go on as a new replica, keeping what this store holds")

        #expect(seen == Self.codesThatNeedACommand)
    }

    /// A store with a reminder at `path`, and a copy of its file at `copy` (made while the store
    /// is closed, so that the copy holds everything).
    static func storeToCopy(at path: String, copy: String) throws -> ConcordStore {
        let store = try ConcordStore.create(at: path)
        try store.addReminder(ReminderDraft(title: "water the plants"))
        try store.close()
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        return try ConcordStore.open(at: path)
    }

    /// An error whose cause needs a command gets the cause's advice (a batch a copied store could
    /// not apply); one whose code needs none is shown as it is.
    @Test func aCauseGivesItsAdvice() {
        let copied = ConcordError(.copied, "/a.db is a copy of the store at /b.db (another file)")
        let failure = ConcordError(.local, "this side cannot apply a batch: \(copied.message)", cause: copied)
        #expect(Advice.line(for: failure) == "this side cannot apply a batch: \(Advice.line(for: copied))")
        #expect(Advice.line(for: ConcordError(.io, "the disk is full; nothing was written to /a.db")) == "the disk is full; nothing was written to /a.db")
        // The forked line's phrase is replaced where it is, after the path, however the path reads.
        let path = "/tmp/(another process forked it)/a.db"
        let forked = ConcordError(.forked, "the store at \(path) is now replica 01 (another process forked it); this process opened it as replica 02: open it again")
        #expect(Advice.line(for: forked) == "the store at \(path) is now replica 01 (another process ran 'syncctl init --fork' on it); this process opened it as replica 02: open it again")
    }
}

/// The package's root directory: two above this file's.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

private extension [PeerAction] {
    /// The bytes of the `.send` actions.
    var sentBytes: [UInt8] {
        flatMap { action -> [UInt8] in
            if case .send(let bytes) = action { return bytes }
            return []
        }
    }
}
