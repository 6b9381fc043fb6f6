import ConcordCore
import ConcordExchange
import ConcordKeys
import ConcordNet
import ConcordStore
import Foundation

/// A replica in a test: a file-backed store with a hand-set clock and seeded randomness, and the
/// ways it syncs (through a shared folder, or with a peer over loopback TCP).
public final class Node: @unchecked Sendable {
    // @unchecked Sendable: `coalesceThreshold` is set by the test before the node is shared; the
    // rest is immutable or Sendable.
    public let store: ConcordStore
    public let clock: ManualClock
    public let name: String
    /// Kept alive as long as the node: its store lives there.
    public let directory: TemporaryDirectory
    /// How many of its own files a folder sync leaves before it merges them into one.
    public var coalesceThreshold = 32

    /// Creates `NAME.db` in `directory`, holding `key` if one is given.
    public init(in directory: TemporaryDirectory, _ name: String, seed: UInt64, key: SyncKey? = nil) throws {
        self.name = name
        self.directory = directory
        clock = ManualClock(baseMillis + seed * 7)
        store = try ConcordStore.create(at: directory.file("\(name).db"), name: name, environment: environment(clock: clock, seed: seed))
        if let key { try store.setSyncKey(key) }
    }

    public var hex: String { store.replicaID.hex }
    public func dump() throws -> String { try store.dump() }
    public var operationCount: Int { (try? store.status().operations) ?? -1 }

    /// Adds `count` reminders in transactions of 1000, each with notes of about `textLength`
    /// characters (random hex digits, which compress little, when `random`).
    public func addReminders(_ count: Int, label: String, textLength: Int = 20, random: Bool = false) throws {
        var changes: [(RecordRef, Change)] = []
        var generator = SplitMix64(seed: UInt64(count))
        // The same ids in every run (a String's hashValue is seeded per process).
        let labelBits = label.utf8.reduce(UInt64(0)) { ($0 &* 31 &+ UInt64($1)) & 0xFFFF }
        for index in 0..<count {
            clock.advance(1)
            let notes = random
                ? (0..<max(1, textLength / 16)).map { _ in String(generator.next(), radix: 16) }.joined()
                : String(repeating: "\(label)\(index) ", count: max(1, textLength / 8))
            changes.append((.reminder(RecordID(high: labelBits, low: UInt64(index))),
                            .createReminder(ReminderDraft(title: "\(label) \(index)", notes: notes, tags: ["t\(index % 5)"]))))
            if changes.count == 1000 {
                try store.perform(changes)
                changes.removeAll()
            }
        }
        if !changes.isEmpty { try store.perform(changes) }
    }

    /// Merges a note of a replica that is never heard from again: a remove is never stable then
    /// (SPEC.md §5.8), so a compaction drops only what the kept operations make redundant.
    public func hearOnceFromASilentReplica() throws {
        let silent = try Node(in: directory, "silent-\(name)", seed: 99)
        try silent.store.addNote(NoteDraft(title: "from a replica heard from once"))
        try store.merge(storeAt: silent.store.path)
    }

    // MARK: Shared folders

    /// The node's syncs through `folder`.
    public func folderSync(_ folder: String) -> FolderSync {
        FolderSync(store: store, folder: folder, coalesceThreshold: coalesceThreshold)
    }

    /// One sync through `folder`.
    @discardableResult
    public func sync(_ folder: String) throws -> FolderSyncReport {
        try folderSync(folder).sync()
    }

    // MARK: Peers

    /// One peer session with the server at `address`, with the key the node's store holds.
    public func sync(with address: PeerAddress, configuration: PeerTransportConfiguration = quickConfiguration(idle: .seconds(10))) throws -> PeerSessionRecord {
        try runOffThePool { [store] in try await PeerClient.sync(store: store, address: address, configuration: configuration) }
    }
}

/// A store with a little of everything: reminders (notes, due, priority, tags, completed,
/// deleted, repeating) and notes (pinned, tagged, edited), tags added and removed.
@discardableResult
public func populate(_ store: ConcordStore, clock: ManualClock, label: String = "") throws -> [RecordRef] {
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
