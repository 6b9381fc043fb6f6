import ConcordCore
import Foundation
import PropertyBased
import Testing

// Shared generators and a script interpreter for the property tests.
//
// The key space is deliberately tiny (4 replicas, 3 records, 4 tags, a handful of titles and due
// dates, wall clocks that collide and go backwards) so that concurrent writes to the same register
// or tag are the common case, not the rare one. A fifth, "newer version" replica injects
// operations on unknown fields and unknown record kinds, which must be kept and merged like any other.
//
// A script is generated as plain integers (`Step`) with PropertyBased generators, so a failing
// script shrinks to a short one; the interpreter (`World`) turns the integers into changes and
// merges. Any randomness a step needs (subsets, shuffles) comes from a `SplitMix64` seeded by the
// script's `seed` and the step's index, so a script replays exactly from its printed description.

// MARK: - The universe

enum Universe {
    /// Replica ids whose order differs from their index, so that replica-id tie-breaks are exercised.
    static let replicaIDs: [ReplicaID] = [
        ReplicaID(high: 0x3333_0000_0000_0000, low: 3),
        ReplicaID(high: 0x1111_0000_0000_0000, low: 1),
        ReplicaID(high: 0x4444_0000_0000_0000, low: 4),
        ReplicaID(high: 0x2222_0000_0000_0000, low: 2),
        ReplicaID(high: 0x5555_0000_0000_0000, low: 5),
    ]
    /// The ids that replicas restored from backups take (`Replica.forked(as:)`), in turn.
    static let forkIDs: [ReplicaID] = (1...8).map { ReplicaID(high: 0x0666_0000_0000_0000, low: UInt64($0)) }
    /// A replica that authors nothing: used to receive operation sets.
    static let observerID = ReplicaID(high: 0xFFFF_0000_0000_0000, low: 0xFF)
    /// A replica running a newer version: it writes fields and kinds this version does not know.
    static let newerID = ReplicaID(high: 0x2222_0000_0000_0000, low: 0xEE)
    /// Records of a kind this version does not know, sharing ids with `records`.
    static let unknownKindRecords: [RecordRef] = recordIDs.map { RecordRef(kind: RecordKind(rawValue: 9), id: $0) }

    static let recordIDs: [RecordID] = [
        RecordID(high: 0xAAAA, low: 1),
        RecordID(high: 0xAAAA, low: 2),
        RecordID(high: 0xAAAA, low: 3),
    ]
    /// Two reminders and a note.
    static let records: [RecordRef] = [.reminder(recordIDs[0]), .reminder(recordIDs[1]), .note(recordIDs[2])]

    /// Two ASCII tags and "é" precomposed (NFC) and decomposed (NFD): different tags.
    static let tags: [String] = ["home", "work", "\u{E9}", "e\u{301}"]
    static let titles: [String] = ["a", "b", "Buy milk", "caf\u{E9}", "\"quoted\"\\", "e\u{301}"]

    /// 2024-01-31T00:00:00Z.
    static let baseMillis: UInt64 = 1_706_659_200_000

    /// A few due dates: none, month ends (monthly rules clamp there), a leap day, a year end.
    static let dues: [Int64?] = [
        nil,
        1_706_691_600_000,  // 2024-01-31T09:00:00Z
        1_709_200_800_000,  // 2024-02-29T10:00:00Z
        1_704_065_400_000,  // 2023-12-31T23:30:00Z
        1_710_490_500_000,  // 2024-03-15T08:15:00Z
    ]
    static let repeatNames: [String?] = ["hourly", "daily", "weekly", "monthly", nil]

    static func date(_ millis: Int64?) -> Date? { millis.map(Date.init(millisecondsSince1970:)) }
}

// MARK: - Steps and scripts

/// One step of a script, as raw integers (so that it shrinks); `World` interprets it.
struct Step: Hashable, Sendable, CustomStringConvertible {
    /// 0...13: a local change; 14...19: a merge; 20...21: an operation from a newer version
    /// arrives; 22: a purge (one time in four; a tag add otherwise).
    var kind: Int
    /// The replica acting (or receiving a merge), reduced modulo the replica count.
    var replica: Int
    /// The record changed (mod 3), or the replica whose operations are merged.
    var target: Int
    /// A small parameter: which title, tag, due date, merge mode...
    var arg: Int
    /// How the acting replica's wall clock moves before the step (-4 jumps back an hour).
    var clock: Int

    static let kinds = 0...22

    var isMerge: Bool { (14...19).contains(kind) }
    var isForeign: Bool { (20...21).contains(kind) }

    var description: String { "(\(kind),\(replica),\(target),\(arg),\(clock))" }
}

struct Script: Hashable, Sendable, CustomStringConvertible {
    var replicaCount: Int
    /// Per-replica wall-clock skew in units of 700 ms.
    var skews: [Int]
    var seed: UInt64
    var steps: [Step]

    var description: String {
        "Script(replicas: \(replicaCount), skews: \(skews), seed: \(seed), steps: [\(steps.map(\.description).joined(separator: ","))])"
    }
}

enum ScriptGen {
    static let step = zip(
        Gen.int(in: Step.kinds), Gen.int(in: 0...3), Gen.int(in: 0...3), Gen.int(in: 0...11), Gen.int(in: -4...8)
    ).map { Step(kind: $0, replica: $1, target: $2, arg: $3, clock: $4) }

    /// Scripts on 2–4 replicas of up to 40 steps.
    static let script = zip(Gen.int(in: 2...4), Gen.int(in: -8...8).array(of: 4), Gen<UInt64>.value(in: 0...UInt64.max), step.array(of: 0...40))
        .map { Script(replicaCount: $0, skews: $1, seed: $2, steps: $3) }
}

// MARK: - Interpreting scripts

/// A set of replicas with injected wall clocks, driven by a script.
struct World {
    var replicas: [Replica]
    var wall: [UInt64]
    let seed: UInt64
    /// The greatest timestamp each replica has issued or received (kept independently of its clock).
    var maxSeen: [Timestamp]
    /// Clock or sequence-number rules a local operation broke (should stay empty).
    var clockViolations: [String] = []
    var performed = 0
    var refused = 0
    var merges = 0
    /// The newer-version replica's clock and log.
    var newerClock = HybridLogicalClock()
    var newerLog: [Op] = []
    /// Every operation any replica wrote, as written (before any purge elided or compaction
    /// dropped it).
    var written: [Op] = []

    init(_ script: Script) {
        replicas = (0..<script.replicaCount).map { Replica(id: Universe.replicaIDs[$0]) }
        wall = (0..<script.replicaCount).map { index in
            UInt64(Int64(Universe.baseMillis) + Int64(script.skews[index]) * 700)
        }
        seed = script.seed
        maxSeen = Array(repeating: .zero, count: script.replicaCount)
    }

    static func run(_ script: Script) -> World {
        var world = World(script)
        for (index, step) in script.steps.enumerated() { world.apply(step, index: index) }
        return world
    }

    var count: Int { replicas.count }

    func rng(_ index: Int, _ salt: UInt64 = 0) -> SplitMix64 {
        SplitMix64(seed: seed &+ UInt64(index) &* 0x9E37_79B9 &+ salt)
    }

    mutating func advanceClock(_ replica: Int, by clock: Int) {
        let delta: Int64 = clock == -4 ? -3_600_000 : Int64(clock) * 400
        wall[replica] = UInt64(max(0, Int64(wall[replica]) + delta))
    }

    mutating func apply(_ step: Step, index: Int) {
        let r = step.replica % count
        advanceClock(r, by: step.clock)
        if step.isForeign {
            merge([foreignOperation(step, wallMillis: wall[r])], into: r)
        } else if step.isMerge {
            var from = step.target % count
            if from == r { from = (from + 1) % count }
            var generator = rng(index)
            let mode = step.arg % 6
            // A delivery of every operation (modes 0, 2 and 4 from the start, 1 since the
            // receiver's vector) carries the sender's compacted seqs; a partial one ended before them.
            var export = replicas[from].export(since: mode == 1 ? replicas[r].versionVector : VersionVector())
            export.operations = World.delivery(of: export.operations, to: replicas[r], mode: mode, using: &generator)
            if ![0, 1, 2, 4].contains(mode) { export.compacted = SeqRanges() }
            merge(export, into: r)
        } else {
            let ref = Universe.records[step.target % Universe.records.count]
            // Most changes to a record the replica has not seen become creates, so that records
            // exist early and concurrent creates of one id happen; the rest are refused.
            let kind = replicas[r].records[ref] == nil && step.arg % 3 != 0 ? 0 : step.kind
            let change = World.change(kind: kind, arg: step.arg, ref: ref, now: wall[r])
            perform(change, on: ref, by: r)
        }
    }

    /// An operation of the newer-version replica: unknown fields, a priority or repeat rule this
    /// version does not know, or a record of an unknown kind.
    mutating func foreignOperation(_ step: Step, wallMillis: UInt64) -> Op {
        let known = Universe.records[step.target % Universe.records.count]
        let unknownKind = Universe.unknownKindRecords[step.target % Universe.unknownKindRecords.count]
        let (record, action): (RecordRef, Action) = switch step.arg % 6 {
        case 0: (known, .assign(.other(["color", "size"][step.arg / 6 % 2]), .string("v\(step.arg)")))
        case 1: (known, .assign(.other("\u{E9}"), .int(Int64(step.arg) - 5)))
        case 2: (known, .assign(.priority, .int(7)))
        case 3: (known, .assign(.repeatRule, .string("yearly")))
        case 4: (unknownKind, .assign(step.arg % 2 == 0 ? .title : .deleted, .int(Int64(step.arg))))
        default: (unknownKind, .addTag(ExactString(Universe.tags[step.arg % Universe.tags.count])))
        }
        let timestamp = (try? newerClock.tick(wallMillis: wallMillis)) ?? newerClock.latest
        let op = Op(id: OperationID(replica: Universe.newerID, seq: UInt64(newerLog.count + 1)), timestamp: timestamp, record: record, action: action)
        newerLog.append(op)
        written.append(op)
        return op
    }

    /// Performs a change, refusing nothing the replica refuses (`try?`), and checks the clock rules.
    @discardableResult
    mutating func perform(_ change: Change, on ref: RecordRef, by r: Int, wallMillis: UInt64? = nil) -> [Op] {
        if let wallMillis { wall[r] = wallMillis }
        let before = maxSeen[r]
        let seqBefore = replicas[r].versionVector[replicas[r].id]
        guard let made = try? replicas[r].perform(change, on: ref, wallMillis: wall[r]) else {
            refused += 1
            return []
        }
        performed += 1
        written += made
        var previous = before
        for (offset, op) in made.enumerated() {
            if op.timestamp <= previous {
                clockViolations.append("replica \(r) issued \(op.timestamp) after \(previous) (\(op))")
            }
            if op.id.seq != seqBefore + UInt64(offset) + 1 || op.id.replica != replicas[r].id {
                clockViolations.append("replica \(r) issued \(op.id) after seq \(seqBefore)")
            }
            previous = op.timestamp
        }
        maxSeen[r] = max(maxSeen[r], previous)
        return made
    }

    mutating func merge(_ operations: [Op], covering: SeqRanges = SeqRanges(), since base: VersionVector = VersionVector(), into r: Int) {
        do {
            try replicas[r].merge(operations, covering: covering, since: base, wallMillis: wall[r])
            merges += 1
            for op in operations { maxSeen[r] = max(maxSeen[r], op.timestamp) }
        } catch {
            Issue.record("merging valid operations failed: \(error)")
        }
    }

    mutating func merge(_ export: Export, into r: Int) {
        do {
            try replicas[r].merge(export, wallMillis: wall[r])
            merges += 1
            for op in export.operations { maxSeen[r] = max(maxSeen[r], op.timestamp) }
        } catch {
            Issue.record("merging valid operations failed: \(error)")
        }
    }

    /// Every replica merges every other replica's operations (all of them, in one batch), and
    /// the seqs they hold compacted.
    mutating func syncAll() {
        let all = allOperations
        var compacted = SeqRanges()
        for replica in replicas { compacted.formUnion(replica.compacted) }
        for r in 0..<count { merge(all, covering: compacted, into: r) }
    }

    /// The union of all replicas' logs, by id.
    var allOperations: [Op] {
        var byID: [OperationID: Op] = [:]
        for replica in replicas {
            for (id, op) in replica.operations { byID[id] = op }
        }
        return byID.values.sorted { $0.id < $1.id }
    }

    /// What a merge step delivers of `operations` (sorted by id), depending on `mode`.
    static func delivery(of operations: [Op], to receiver: Replica, mode: Int, using rng: inout SplitMix64) -> [Op] {
        switch mode {
        case 0: return operations
        case 1: return operations.filter { !receiver.versionVector.covers($0.id) }
        case 2: return operations.shuffled(using: &rng)
        case 3: return operations.filter { _ in Bool.random(using: &rng) }.shuffled(using: &rng)
        case 4: return (operations + operations.filter { _ in Bool.random(using: &rng) }).reversed()
        default: return Array(operations.prefix(operations.count / 2))
        }
    }

    /// The change a step's integers stand for on `ref`.
    static func change(kind: Int, arg: Int, ref: RecordRef, now: UInt64) -> Change {
        let tag = Universe.tags[arg % Universe.tags.count]
        let otherTag = Universe.tags[(arg / 4 + 1) % Universe.tags.count]
        let title = Universe.titles[arg % Universe.titles.count]
        if kind == 22 { return arg % 4 == 0 ? .purge : .tag(add: [tag], remove: []) }
        if ref.kind == .note {
            switch kind % 9 {
            case 0: return .createNote(NoteDraft(title: title, body: "body \(arg)", tags: arg % 3 == 0 ? [tag] : [], isPinned: arg % 2 == 0))
            case 1: return .editNote(NotePatch(title: title))
            case 2: return .editNote(NotePatch(body: "body \(arg % 3)"))
            case 3: return .editNote(NotePatch(isPinned: arg % 2 == 0))
            case 4: return .tag(add: [tag], remove: [])
            case 5: return .tag(add: [], remove: [tag])
            case 6: return .tag(add: [otherTag], remove: [tag])
            case 7: return .delete
            default: return .restore
            }
        }
        let due = Universe.dues[arg % Universe.dues.count]
        switch kind {
        case 0:
            return .createReminder(ReminderDraft(
                title: title, notes: arg % 2 == 0 ? nil : "n", due: Universe.date(due),
                priority: Priority(rawValue: Int64(arg % 4)), tags: arg % 3 == 0 ? [tag] : [],
                repeatRule: due == nil ? nil : Universe.repeatNames[arg % Universe.repeatNames.count]))
        case 1: return .editReminder(ReminderPatch(title: title))
        case 2: return .editReminder(ReminderPatch(notes: arg % 2 == 0 ? .some(nil) : .some("notes \(arg % 3)")))
        case 3: return .editReminder(ReminderPatch(priority: Priority(rawValue: Int64(arg % 4))))
        case 4: return .editReminder(ReminderPatch(due: .some(Universe.date(due))))
        case 5: return .editReminder(ReminderPatch(repeatRule: .some(Universe.repeatNames[arg % Universe.repeatNames.count])))
        case 6: return .complete
        case 7: return .reopen
        case 8: return .snooze(until: Date(millisecondsSince1970: Int64(now) + Int64(arg + 1) * 600_000))
        case 9: return .tag(add: [tag], remove: [])
        case 10: return .tag(add: [], remove: [tag])
        case 11: return .tag(add: [otherTag], remove: [tag])
        case 12: return .delete
        default: return .restore
        }
    }
}

// MARK: - Helpers

/// A fresh replica (that authors nothing) after merging each batch in turn.
func observer(merging batches: [Op]...) -> Replica {
    var replica = Replica(id: Universe.observerID)
    for batch in batches {
        do { try replica.merge(batch) } catch { Issue.record("merge failed: \(error)") }
    }
    return replica
}

/// The record states obtained by folding `operations` into fresh states with `RecordState.apply`:
/// an independent model of what a replica holds after merging them.
func fold(_ operations: some Sequence<Op>) -> [RecordRef: RecordState] {
    var states: [RecordRef: RecordState] = [:]
    for op in operations { states[op.record, default: RecordState(ref: op.record)].apply(op) }
    return states
}

/// Splits `operations` into a random subset using `rng` (each kept with probability 1/2).
func subset(_ operations: [Op], using rng: inout SplitMix64) -> [Op] {
    operations.filter { _ in Bool.random(using: &rng) }
}

/// The largest k such that 1...k are all in `seqs`.
func contiguousPrefix(_ seqs: Set<UInt64>) -> UInt64 {
    var k: UInt64 = 0
    while seqs.contains(k + 1) { k += 1 }
    return k
}

extension Replica {
    func state(_ ref: RecordRef) -> RecordState? { records[ref] }
}

func op(
    _ replica: ReplicaID, _ seq: UInt64, at timestamp: Timestamp, _ record: RecordRef, _ action: Action
) -> Op {
    Op(id: OperationID(replica: replica, seq: seq), timestamp: timestamp, record: record, action: action)
}

func ts(_ millis: UInt64, _ logical: UInt16 = 0) -> Timestamp {
    Timestamp(physicalMillis: millis, logical: logical)
}
