import ConcordCore
import ConcordExchange
import ConcordStore
import Foundation
import Testing

@_exported import ConcordTestSupport

// Helpers for bundles and shared folders; the shared ones are in Tests/ConcordTestSupport.

// MARK: Files

func readBytes(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

func writeBytes(_ bytes: [UInt8], to path: String) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

/// The repository's `Fixtures/` directory.
let fixturesDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures")

// MARK: Bundles

/// One block of a bundle as its header describes it.
struct BlockInfo: Equatable, CustomStringConvertible {
    var offset: Int
    var type: UInt8
    var flags: UInt8
    var storedLength: Int
    var rawLength: Int

    var payloadOffset: Int { offset + 14 }
    var end: Int { payloadOffset + storedLength }
    var description: String { "block(type \(type) at \(offset), stored \(storedLength), raw \(rawLength))" }
}

/// Walks the blocks of a well-formed bundle (test-side parser of SPEC.md §13's framing).
func blocks(of bytes: [UInt8]) -> [BlockInfo] {
    func u32(_ at: Int) -> Int { bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
    var result: [BlockInfo] = []
    var offset = 10
    while offset + 14 <= bytes.count {
        let block = BlockInfo(offset: offset, type: bytes[offset], flags: bytes[offset + 1], storedLength: u32(offset + 2), rawLength: u32(offset + 6))
        result.append(block)
        offset = block.end
    }
    return result
}

/// Reads a whole bundle from memory: its manifest, operations and summary.
func readBundle(_ bytes: [UInt8], chunk: Int = .max) throws -> (BundleManifest, [Op], BundleSummary) {
    var reader = BundleReader(MemorySource(bytes, chunk: chunk))
    let manifest = try reader.readManifest()
    var operations: [Op] = []
    let summary = try reader.forEachOperation { operations.append($0) }
    return (manifest, operations, summary)
}

/// The error reading `bytes` as a bundle throws, or nil if it reads.
func bundleError(_ bytes: [UInt8], chunk: Int = .max) -> (any Error)? {
    do {
        _ = try readBundle(bytes, chunk: chunk)
        return nil
    } catch {
        return error
    }
}

/// A store with a little of everything: reminders (notes, due, priority, tags, completed,
/// deleted, repeating) and notes (pinned, tagged, edited), tags added and removed.
@discardableResult
func populate(_ store: ConcordStore, clock: ManualClock, label: String = "") throws -> [RecordRef] {
    var refs: [RecordRef] = []
    let call = try store.addReminder(ReminderDraft(
        title: "Call Ana \(label)", notes: "about Friday", due: Date(timeIntervalSince1970: 1_795_100_000),
        priority: .high, tags: ["work", "phone"]))
    refs.append(.reminder(call))
    clock.advance(1_000)
    let milk = try store.addReminder(ReminderDraft(title: "Buy milk \(label)", tags: ["home"]))
    refs.append(.reminder(milk))
    try store.completeReminder(milk)
    clock.advance(1_000)
    let gym = try store.addReminder(ReminderDraft(
        title: "Gym \(label)", due: Date(timeIntervalSince1970: 1_795_200_000), repeatRule: "weekly"))
    refs.append(.reminder(gym))
    try store.editReminder(gym, ReminderPatch(notes: .some("leg day ✓ — é"), priority: .low))
    try store.tag(.reminder(call), add: ["urgent"], remove: ["phone"])
    let gone = try store.addReminder(ReminderDraft(title: "Old task \(label)"))
    refs.append(.reminder(gone))
    try store.delete(.reminder(gone))
    clock.advance(1_000)
    let note = try store.addNote(NoteDraft(title: "Ideas \(label)", body: "a\nb\tc \"quoted\"", tags: ["misc"], isPinned: true))
    refs.append(.note(note))
    try store.editNote(note, NotePatch(body: "rewritten", isPinned: false))
    return refs
}

/// A file-backed store, its clock, and its syncs through shared folders.
final class Replica {
    let store: ConcordStore
    let clock: ManualClock
    let name: String
    var coalesceThreshold = 32

    init(in directory: TemporaryDirectory, _ name: String, seed: UInt64) throws {
        self.name = name
        clock = ManualClock(baseMillis + seed * 7)
        store = try ConcordStore.create(
            at: directory.file("\(name).db"), name: name, environment: environment(clock: clock, seed: seed))
    }

    func folderSync(_ folder: String) -> FolderSync {
        FolderSync(store: store, folder: folder, coalesceThreshold: coalesceThreshold)
    }

    @discardableResult
    func sync(_ folder: String) throws -> FolderSyncReport {
        try folderSync(folder).sync()
    }

    var hex: String { store.replicaID.hex }

    func dump() throws -> String { try store.dump() }
}

/// The names and sizes of the entries of `concord-v1` in `folder`.
func listing(_ folder: String) throws -> [String: Int64] {
    let directory = folder + "/concord-v1"
    var result: [String: Int64] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
        let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/" + name)
        result[name] = (attributes[.size] as? NSNumber)?.int64Value ?? -1
    }
    return result
}

/// The bundle file name of a publisher's serial.
func bundleName(_ hex: String, _ serial: Int) -> String {
    let digits = String(serial)
    return hex + "-" + String(repeating: "0", count: 10 - digits.count) + digits + ".cbundle"
}

/// A replica id's hex that no store of the test has.
func strangerHex(_ n: UInt64) -> String { ReplicaID(high: 0xDEAD_BEEF_0000_0000 | n, low: n &* 0x9E37_79B9).hex }

extension FolderSyncReport {
    /// The lines of the warnings, to compare with text.
    var warningLines: [String] { warnings.map(\.message) }
}
