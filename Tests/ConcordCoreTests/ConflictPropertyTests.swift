import ConcordCore
import Foundation
import PropertyBased
import Testing

// Property tests of conflict detection (SPEC.md §5.1, "Heads and conflicts") on the in-memory
// `Replica` model: an assign records what its writer had seen of the register (its
// predecessors), a register keeps its heads (the writes no write it holds had seen), and a field
// is in conflict when it has more than one head.
//
// The key space is tiny (2–3 replicas, 1–3 records, three fields per kind, wall clocks that
// collide and jump back an hour) so that writes to the same register are the common case. As in
// `Generators.swift`, inputs are plain integers that shrink, and any other randomness (subsets,
// shuffles, which copies lose their predecessors) comes from a `SplitMix64` seeded by an input,
// so the seed `propertyCheck` prints for a failure replays that case exactly.
//
// The exactness check (`Oracle`) does not use `Predecessors` at all: it remembers, for each
// assign, which assigns to the same register its writer held when it wrote, closes that
// transitively, and computes the heads a replica must show from the writes it holds.

// MARK: - The key space

enum ConflictSpace {
    /// Three replicas whose id order differs from their index (ties of timestamps break by id).
    static let replicas = Array(Universe.replicaIDs.prefix(3))
    /// Two reminders and a note.
    static let records = Universe.records

    /// The fields the edits write: three per kind.
    static func fields(of ref: RecordRef) -> [Field] {
        ref.kind == .note ? [.title, .body, .pinned] : [.title, .notes, .priority]
    }

    /// The field `field` (0...2) of `ref`.
    static func field(_ field: Int, of ref: RecordRef) -> Field { fields(of: ref)[field % 3] }

    /// An ordinary edit of `ref`: field `field % 4` (3 edits the title and a second field at
    /// once) to a value picked by `value`. Values repeat, so two heads may hold equal values.
    static func edit(_ ref: RecordRef, field: Int, value: Int) -> Change {
        let title = Universe.titles[value % Universe.titles.count]
        if ref.kind == .note {
            switch field % 4 {
            case 0: return .editNote(NotePatch(title: title))
            case 1: return .editNote(NotePatch(body: "body \(value % 5)"))
            case 2: return .editNote(NotePatch(isPinned: value % 2 == 0))
            default: return .editNote(NotePatch(title: title, body: "both \(value % 5)"))
            }
        }
        switch field % 4 {
        case 0: return .editReminder(ReminderPatch(title: title))
        case 1: return .editReminder(ReminderPatch(notes: value % 3 == 0 ? .some(nil) : .some("notes \(value % 5)")))
        case 2: return .editReminder(ReminderPatch(priority: Priority(rawValue: Int64(value % 4))))
        default: return .editReminder(ReminderPatch(title: title, priority: Priority(rawValue: Int64(value % 4))))
        }
    }

    /// An edit of exactly `field` (0...2) of `ref`.
    static func edit(_ ref: RecordRef, only field: Int, value: Int) -> Change { edit(ref, field: field % 3, value: value) }

    /// The create of record `index`.
    static func create(_ index: Int) -> Change {
        let ref = records[index]
        return ref.kind == .note
            ? .createNote(NoteDraft(title: "note \(index)", body: "b"))
            : .createReminder(ReminderDraft(title: "reminder \(index)", notes: "n", priority: .low))
    }
}

/// One field's heads on one record: an entry of a conflict list.
struct FieldHeads: Hashable, CustomStringConvertible {
    var record: RecordRef
    var field: Field
    /// The winner, then the other heads, greatest stamp first.
    var heads: [LWWRegister.Write]

    var description: String {
        "\(record).\(field.name): " + heads.map { "\($0.value)@\($0.stamp.timestamp)/\($0.stamp.replica)#\($0.stamp.seq)" }.joined(separator: " | ")
    }
}

/// The conflict list of a set of record states: for each record (in `RecordRef` order) and each of
/// its fields in conflict (in the order of `RecordState.registers`), its heads as value and stamp.
func conflictList(_ records: [RecordRef: RecordState]) -> [FieldHeads] {
    records.values.sorted { $0.ref < $1.ref }.flatMap { state in
        state.registers.filter { $0.register.inConflict }.map { FieldHeads(record: state.ref, field: $0.field, heads: $0.register.heads) }
    }
}

/// Every register of every record with more than one head, or whose rivals are set.
func registersWithRivals(_ records: [RecordRef: RecordState]) -> [FieldHeads] {
    records.values.sorted { $0.ref < $1.ref }.flatMap { state in
        state.registers.filter { !$0.register.rivals.isEmpty || $0.register.heads.count != 1 }
            .map { FieldHeads(record: state.ref, field: $0.field, heads: $0.register.heads) }
    }
}

/// The write an assign makes, as a register's heads show it.
func write(of operation: Op) -> LWWRegister.Write? {
    guard case let .assign(_, value) = operation.action else { return nil }
    return LWWRegister.Write(value: value, stamp: operation.stamp)
}

/// Whether `operation` assigns `field` of `ref`.
func assigns(_ operation: Op, _ ref: RecordRef, _ field: Field) -> Bool {
    guard operation.record == ref, case let .assign(written, _) = operation.action else { return false }
    return written == field
}

/// `operation` as a build older than predecessors wrote it, or as a peer session carries it.
func stripped(_ operation: Op) -> Op {
    var copy = operation
    copy.predecessors = nil
    return copy
}

/// A fresh replica (that authors nothing) after merging `operations` shuffled, in 1–4 batches.
func shuffledObserver(_ operations: [Op], using rng: inout SplitMix64) -> Replica {
    let shuffled = operations.shuffled(using: &rng)
    let batchCount = Int.random(in: 1...4, using: &rng)
    let size = max(1, (shuffled.count + batchCount - 1) / batchCount)
    var replica = Replica(id: Universe.observerID)
    for start in stride(from: 0, to: shuffled.count, by: size) {
        do { try replica.merge(shuffled[start..<min(start + size, shuffled.count)]) } catch { Issue.record("merge failed: \(error)") }
    }
    return replica
}

// MARK: - What each writer had seen, independently of `Predecessors`

/// A `World` that remembers, for every assign, the assigns to the same register that its writer
/// held when it wrote (its own earlier ones included), closed transitively: what it had seen.
struct Oracle {
    var world: World
    /// Per assign: every assign to its register that it had seen, directly or through one it held.
    var seen: [OperationID: Set<OperationID>] = [:]
    /// Every operation performed, in order.
    var performed: [Op] = []

    init(replicaCount: Int, skews: [Int], seed: UInt64) {
        world = World(Script(replicaCount: replicaCount, skews: skews + Array(repeating: 0, count: max(0, 4 - skews.count)), seed: seed, steps: []))
    }

    var count: Int { world.count }

    /// Performs `change` on replica `r` after moving its wall clock by `clock` (as `World` does),
    /// and records what each assign it makes had seen.
    @discardableResult
    mutating func perform(_ change: Change, on ref: RecordRef, by r: Int, clock: Int = 1) -> [Op] {
        world.advanceClock(r, by: clock)
        let held = world.replicas[r].operations.values.filter { $0.record == ref }
        let made = world.perform(change, on: ref, by: r)
        for operation in made {
            guard case let .assign(field, _) = operation.action else { continue }
            var had: Set<OperationID> = []
            for earlier in held where assigns(earlier, ref, field) {
                had.insert(earlier.id)
                had.formUnion(seen[earlier.id] ?? [])
            }
            seen[operation.id] = had
        }
        performed += made
        return made
    }

    /// The heads a replica holding `held` must show for `field` of `ref`: the writes held that no
    /// write held had seen, greatest stamp first.
    func expectedHeads(_ ref: RecordRef, _ field: Field, among held: [Op]) -> [LWWRegister.Write] {
        let writes = held.filter { assigns($0, ref, field) }
        let heads = writes.filter { candidate in
            !writes.contains { other in other.id != candidate.id && seen[other.id]?.contains(candidate.id) == true }
        }
        return heads.compactMap(write(of:)).sorted { $0.stamp > $1.stamp }
    }

    /// Checks that every register of every record replica `r` holds has exactly the expected heads.
    func checkExactHeads(of r: Int, _ context: @autoclosure () -> String) {
        let replica = world.replicas[r]
        let held = Array(replica.operations.values)
        for (ref, state) in replica.records {
            let ofRecord = held.filter { $0.record == ref }
            for (field, register) in state.registers {
                let expected = expectedHeads(ref, field, among: ofRecord)
                #expect(register.heads == expected, "replica \(r), \(ref).\(field.name) \(context())")
            }
        }
    }
}

// MARK: - Scripts of edits and deliveries

/// One step of a conflict script, as raw integers; `ConflictScript.run` interprets it.
struct ConflictStep: Hashable, Sendable, CustomStringConvertible {
    /// 0...5: an edit; 6...9: a delivery.
    var kind: Int
    /// The replica editing, or receiving the delivery.
    var replica: Int
    /// The record edited, or the replica whose operations are delivered.
    var target: Int
    /// Which field and value (edit), or which delivery mode (`World.delivery`, modulo 6).
    var arg: Int
    /// How the acting replica's wall clock moves first (-4 jumps back an hour).
    var clock: Int

    var isEdit: Bool { kind <= 5 }

    var description: String { "(\(kind),\(replica),\(target),\(arg),\(clock))" }
}

struct ConflictScript: Hashable, Sendable, CustomStringConvertible {
    var replicaCount: Int
    var recordCount: Int
    var skews: [Int]
    var seed: UInt64
    var steps: [ConflictStep]

    var description: String {
        "ConflictScript(replicas: \(replicaCount), records: \(recordCount), skews: \(skews), seed: \(seed), steps: [\(steps.map(\.description).joined(separator: ","))])"
    }

    static let step = zip(Gen.int(in: 0...9), Gen.int(in: 0...2), Gen.int(in: 0...2), Gen.int(in: 0...23), Gen.int(in: -4...8))
        .map { ConflictStep(kind: $0, replica: $1, target: $2, arg: $3, clock: $4) }

    /// Scripts on 2–3 replicas and 1–3 records, of up to 30 steps.
    static let gen = zip(Gen.int(in: 2...3), Gen.int(in: 1...3), Gen.int(in: -8...8).array(of: 3), Gen<UInt64>.value(in: 0...UInt64.max), step.array(of: 0...30))
        .map { ConflictScript(replicaCount: $0, recordCount: $1, skews: $2, seed: $3, steps: $4) }

    /// The records exist on every replica (created by replica 0, then a full exchange); then the
    /// steps run. `afterEach` is called after every step with its index.
    func run(afterEach: (Oracle, Int) -> Void = { _, _ in }) -> Oracle {
        var oracle = Oracle(replicaCount: replicaCount, skews: skews, seed: seed)
        for index in 0..<recordCount { oracle.perform(ConflictSpace.create(index), on: ConflictSpace.records[index], by: 0) }
        oracle.world.syncAll()
        for (index, step) in steps.enumerated() {
            let r = step.replica % replicaCount
            if step.isEdit {
                let ref = ConflictSpace.records[step.target % recordCount]
                oracle.perform(ConflictSpace.edit(ref, field: step.arg % 4, value: step.arg / 4 + step.kind), on: ref, by: r, clock: step.clock)
            } else {
                var from = step.target % replicaCount
                if from == r { from = (from + 1) % replicaCount }
                var rng = oracle.world.rng(index)
                let delivered = World.delivery(of: oracle.world.replicas[from].operations(), to: oracle.world.replicas[r], mode: step.arg % 6, using: &rng)
                oracle.world.merge(delivered, into: r)
            }
            afterEach(oracle, index)
        }
        return oracle
    }
}

// MARK: - Sequential histories

/// A history where every edit is made after a full exchange: (replica, record, change kind, arg, clock).
struct SequentialScript: Hashable, Sendable, CustomStringConvertible {
    var replicaCount: Int
    var skews: [Int]
    var seed: UInt64
    var steps: [Step]

    var description: String {
        "SequentialScript(replicas: \(replicaCount), skews: \(skews), seed: \(seed), steps: [\(steps.map(\.description).joined(separator: ","))])"
    }

    /// `Step.kind` is 0...13 (any local change of `World.change`) or 14...21 (an edit of one of
    /// the three fields, made more likely since they are what conflicts are about).
    static let step = zip(Gen.int(in: 0...21), Gen.int(in: 0...2), Gen.int(in: 0...2), Gen.int(in: 0...11), Gen.int(in: -4...8))
        .map { Step(kind: $0, replica: $1, target: $2, arg: $3, clock: $4) }

    static let gen = zip(Gen.int(in: 2...3), Gen.int(in: -8...8).array(of: 3), Gen<UInt64>.value(in: 0...UInt64.max), step.array(of: 1...25))
        .map { SequentialScript(replicaCount: $0, skews: $1, seed: $2, steps: $3) }

    /// The change a step stands for on replica `r`'s view of `ref`.
    static func change(_ step: Step, ref: RecordRef, replica: Replica, now: UInt64) -> Change {
        // Most changes to a record the replica has not seen become creates, as in `World.apply`.
        if replica.records[ref] == nil, step.arg % 3 != 0 { return World.change(kind: 0, arg: step.arg, ref: ref, now: now) }
        if step.kind >= 14 { return ConflictSpace.edit(ref, field: step.kind - 14, value: step.arg) }
        return World.change(kind: step.kind, arg: step.arg, ref: ref, now: now)
    }

    /// Runs the steps, each after a full exchange made by `exchange`; `afterEach` sees the world
    /// after each step, with the operations it made.
    func run(exchange: (inout World, Int) -> Void, afterEach: (World, Int, [Op]) -> Void = { _, _, _ in }) -> World {
        var world = World(Script(replicaCount: replicaCount, skews: skews + [0], seed: seed, steps: []))
        for (index, step) in steps.enumerated() {
            exchange(&world, index)
            let r = step.replica % replicaCount
            world.advanceClock(r, by: step.clock)
            let ref = ConflictSpace.records[step.target % ConflictSpace.records.count]
            let made = world.perform(SequentialScript.change(step, ref: ref, replica: world.replicas[r], now: world.wall[r]), on: ref, by: r)
            afterEach(world, index, made)
        }
        return world
    }
}

extension World {
    /// A full exchange in which each operation delivered loses its predecessors with probability
    /// 1/2 (as a peer session or an older build carries it); a replica keeps the copy it got first.
    mutating func syncAllStripping(using rng: inout SplitMix64) {
        let all = allOperations
        for r in 0..<count {
            let delivered = all.map { Bool.random(using: &rng) ? stripped($0) : $0 }
            merge(delivered, into: r)
        }
    }
}

// MARK: - Concurrent edits of one field

/// Two or three replicas, from a common synced state, edit one field of one record without an exchange.
struct ConcurrentEdits: Hashable, Sendable, CustomStringConvertible {
    var replicaCount: Int
    /// How many replicas edit the field (at least 2, at most `replicaCount`).
    var editorCount: Int
    /// Which replica edits first; the editors are the next ones in turn.
    var firstEditor: Int
    var record: Int
    var field: Int
    /// Sequential edits of the record's fields before (replica, field, value, clock), each after a full exchange.
    var before: [[Int]]
    /// Per editor, its edits of the field: (value, clock) each.
    var edits: [[[Int]]]
    var skews: [Int]
    var seed: UInt64

    var description: String {
        "ConcurrentEdits(replicas: \(replicaCount), editors: \(editorCount), first: \(firstEditor), record: \(record), field: \(field), before: \(before), edits: \(edits), skews: \(skews), seed: \(seed))"
    }

    var ref: RecordRef { ConflictSpace.records[record] }
    var fieldName: Field { ConflictSpace.field(field, of: ref) }
    var editors: [Int] { (0..<min(editorCount, replicaCount)).map { (firstEditor + $0) % replicaCount } }

    static let edit = Gen.int(in: 0...11).array(of: 2)
    static let gen = zip(
        Gen.int(in: 2...3), Gen.int(in: 2...3), Gen.int(in: 0...2), Gen.int(in: 0...2), Gen.int(in: 0...2),
        zip(Gen.int(in: 0...2), Gen.int(in: 0...3), Gen.int(in: 0...11), Gen.int(in: -4...8)).map { [$0, $1, $2, $3] }.array(of: 0...4),
        edit.map { [$0[0], $0[1] - 4] }.array(of: 1...3).array(of: 3),
        Gen.int(in: -8...8).array(of: 3), Gen<UInt64>.value(in: 0...UInt64.max)
    ).map {
        ConcurrentEdits(replicaCount: $0, editorCount: $1, firstEditor: $2, record: $3, field: $4, before: $5, edits: $6, skews: $7, seed: $8)
    }

    /// The replicas after the create, the sequential edits and the concurrent ones, before any
    /// exchange; and each editor's last write of the field.
    func run() -> (oracle: Oracle, last: [Int: Op]) {
        var oracle = Oracle(replicaCount: replicaCount, skews: skews, seed: seed)
        oracle.perform(ConflictSpace.create(record), on: ref, by: 0)
        for edit in before {
            oracle.world.syncAll()
            oracle.perform(ConflictSpace.edit(ref, field: edit[1], value: edit[2]), on: ref, by: edit[0] % replicaCount, clock: edit[3])
        }
        oracle.world.syncAll()
        var last: [Int: Op] = [:]
        for (index, editor) in editors.enumerated() {
            for edit in edits[index] {
                let made = oracle.perform(ConflictSpace.edit(ref, only: field, value: edit[0]), on: ref, by: editor, clock: edit[1])
                if let write = made.first(where: { assigns($0, ref, fieldName) }) { last[editor] = write }
            }
        }
        return (oracle, last)
    }
}

// MARK: - Writes with random predecessors, for the register laws

enum RivalGen {
    static let replicas = ConflictSpace.replicas

    /// The stamp of write `seq` (1...3) of replica `r` (0...2): increasing with `seq`, as a
    /// replica's clock makes it, and interleaved with the other replicas' writes (some tie).
    static func stamp(_ r: Int, _ seq: Int) -> Stamp {
        Stamp(timestamp: ts(1_000 + UInt64(seq * 4 + (r * 7 + seq * 3) % 5)), replica: replicas[r], seq: UInt64(seq))
    }

    /// The value is a function of the write, as an operation's is of its id.
    static func value(_ r: Int, _ seq: Int) -> Value {
        switch (r + seq) % 3 {
        case 0: .string("v\(r)\(seq)")
        case 1: .int(Int64(r * 10 + seq))
        default: .null
        }
    }

    /// The predecessors of write `seq` of replica `r` for `choice` (0...19): unknown for 0...3,
    /// else seqs of the two other replicas, each cut to the writes stamped before this one (a
    /// writer sees only writes made before its own).
    static func predecessors(_ r: Int, _ seq: Int, _ choice: Int) -> Predecessors? {
        guard choice >= 4 else { return nil }
        let others = (0..<3).filter { $0 != r }
        let wanted = [(choice - 4) % 4, (choice - 4) / 4]
        let own = stamp(r, seq)
        return Predecessors(zip(others, wanted).map { other, want in
            let seen = (0...want).last { $0 == 0 || stamp(other, $0) < own } ?? 0
            return OperationID(replica: replicas[other], seq: UInt64(seen))
        })
    }

    /// The register of the writes `ids` (0...8: replica `id % 3`, seq `id / 3 + 1`), merged in
    /// the order given, each with the predecessors `table[id]` gives it.
    static func register(_ ids: [Int], _ table: [Int]) -> LWWRegister {
        var register: LWWRegister?
        for id in ids {
            let (r, seq) = (id % 3, id / 3 + 1)
            let one = LWWRegister(value: value(r, seq), stamp: stamp(r, seq), predecessors: predecessors(r, seq, table[id]))
            if register == nil { register = one } else { register!.merge(one) }
        }
        return register!
    }

    /// The heads of the writes `ids` by the rule itself: the greatest stamp, and every write that
    /// no other had seen (a later write of its author, one whose predecessors list it, or one of
    /// unknown predecessors with a greater stamp); greatest stamp first.
    static func expectedHeads(_ ids: Set<Int>, _ table: [Int]) -> [LWWRegister.Write] {
        let writes = ids.map { (r: $0 % 3, seq: $0 / 3 + 1, choice: table[$0]) }
        let top = writes.map { stamp($0.r, $0.seq) }.max()!
        return writes.filter { w in
            let s = stamp(w.r, w.seq)
            if s == top { return true }
            return !writes.contains { o in
                if o.r == w.r { return o.seq > w.seq }
                guard let p = predecessors(o.r, o.seq, o.choice) else { return s < stamp(o.r, o.seq) }
                return p.covers(OperationID(replica: replicas[w.r], seq: UInt64(w.seq)))
            }
        }.map { LWWRegister.Write(value: value($0.r, $0.seq), stamp: stamp($0.r, $0.seq)) }.sorted { $0.stamp > $1.stamp }
    }

    static let table = Gen.int(in: 0...19).array(of: 9)
    static let ids = Gen.int(in: 0...8).array(of: 1...4)
}

// MARK: - The tests

@Suite("Conflicts: heads of concurrent writes")
struct ConflictPropertyTests {
    // MARK: Examples

    /// A creates a reminder; both replicas sync; A and B each edit the title offline; after a sync
    /// both show the title in conflict between the two titles, the later write winning.
    @Test func offlineEditsOfOneTitleConflict() throws {
        let ref = Universe.records[0]
        var a = Replica(id: ConflictSpace.replicas[0])
        var b = Replica(id: ConflictSpace.replicas[1])
        try a.perform(.createReminder(ReminderDraft(title: "Buy milk")), on: ref, wallMillis: 1_000)
        try b.merge(a.operations())
        #expect(!b.records[ref]!.inConflict)

        let onA = try a.perform(.editReminder(ReminderPatch(title: "Buy oat milk")), on: ref, wallMillis: 2_000)
        let onB = try b.perform(.editReminder(ReminderPatch(title: "Buy soy milk")), on: ref, wallMillis: 3_000)
        // Each had seen the create, and only it.
        #expect(onA[0].predecessors == Predecessors.empty)
        #expect(onB[0].predecessors == Predecessors([OperationID(replica: a.id, seq: 1)]))
        #expect(!a.records[ref]!.inConflict && !b.records[ref]!.inConflict)

        try a.merge(b.operations())
        try b.merge(a.operations())
        for replica in [a, b] {
            let state = replica.records[ref]!
            #expect(state.inConflict)
            #expect(state.value(.title) == .string("Buy soy milk"))
            #expect(state.register(.title)!.heads == [write(of: onB[0])!, write(of: onA[0])!])
            #expect(conflictList(replica.records).map(\.field) == [.title])
        }
        #expect(conflictList(a.records) == conflictList(b.records))
    }

    /// A write that a replica holds hidden, covered only by a write of unknown predecessors (its
    /// copy came through a peer of protocol version 1 or 2), is still listed by the replica's next
    /// write: a replica that holds every copy with its predecessors then sees no conflict either.
    @Test func aWriteHiddenByAnOldFormatCopyIsStillSeenByTheNextWrite() throws {
        let ref = Universe.records[0]
        var a = Replica(id: ConflictSpace.replicas[0])
        var b = Replica(id: ConflictSpace.replicas[1])
        var c = Replica(id: ConflictSpace.replicas[2])
        try a.perform(.createReminder(ReminderDraft(title: "Buy milk")), on: ref, wallMillis: 1_000)
        try b.merge(a.operations())
        try c.merge(a.operations())
        try a.perform(.editReminder(ReminderPatch(title: "on A")), on: ref, wallMillis: 2_000)
        try b.perform(.editReminder(ReminderPatch(title: "on B")), on: ref, wallMillis: 3_000)
        // C gets A's edit as it is, and B's without its predecessors.
        try c.merge(a.operations())
        try c.merge(b.operations().map { var copy = $0; copy.predecessors = nil; return copy })
        #expect(!c.records[ref]!.inConflict, "B's copy of unknown predecessors covers A's older write")
        let settled = try c.perform(.editReminder(ReminderPatch(title: "on C")), on: ref, wallMillis: 4_000)
        #expect(settled[0].predecessors?.covers(OperationID(replica: a.id, seq: 6)) == true, "\(settled[0])")
        var d = Replica(id: ReplicaID(high: 0xD, low: 0xD))
        try d.merge(a.operations())
        try d.merge(b.operations())
        try d.merge(c.operations().filter { $0.id.replica == c.id })
        #expect(!d.records[ref]!.inConflict, "\(d.records[ref]!.register(.title)!)")
        #expect(d.records[ref]!.value(.title) == .string("on C"))
    }

    /// After seeing both titles, an edit on B records both as seen: the conflict is settled on B
    /// at once, and on A once it has B's edit; an edit of another field never conflicts.
    @Test func anEditAfterSeeingBothSettlesTheConflict() throws {
        let ref = Universe.records[0]
        var a = Replica(id: ConflictSpace.replicas[0])
        var b = Replica(id: ConflictSpace.replicas[1])
        try a.perform(.createReminder(ReminderDraft(title: "Buy milk")), on: ref, wallMillis: 1_000)
        try b.merge(a.operations())
        let onA = try a.perform(.editReminder(ReminderPatch(title: "Buy oat milk", priority: .high)), on: ref, wallMillis: 2_000)
        try b.perform(.editReminder(ReminderPatch(title: "Buy soy milk", notes: .some("2 l"))), on: ref, wallMillis: 3_000)
        try a.merge(b.operations())
        try b.merge(a.operations())
        #expect(conflictList(b.records).map(\.field) == [.title])

        // B's clock is behind: the settling write still wins, as it has seen both.
        let settle = try b.perform(.editReminder(ReminderPatch(title: "Buy milk, any")), on: ref, wallMillis: 500)
        #expect(settle[0].predecessors?.covers(onA[0].id) == true)
        #expect(settle[0].predecessors?.seq(of: b.id) == 0, "the author is never listed")
        #expect(!b.records[ref]!.inConflict)
        #expect(a.records[ref]!.inConflict, "A has not seen the settling write yet")
        try a.merge(b.operations())
        for replica in [a, b] {
            let state = replica.records[ref]!
            #expect(!state.inConflict)
            #expect(state.value(.title) == .string("Buy milk, any"))
            #expect(state.register(.title)!.heads == [write(of: settle[0])!])
            // Priority (only A) and notes (only B) were each written by one side: no conflict.
            #expect(state.value(.priority) == .int(Priority.high.rawValue))
            #expect(state.value(.notes) == .string("2 l"))
        }
        #expect(a.records == b.records)
    }

    /// Two offline edits that write the same value are still two heads: a conflict is about
    /// writes that had not seen each other, not about differing values.
    @Test func equalValuesWrittenConcurrentlyStillConflict() throws {
        let ref = Universe.records[2]
        var a = Replica(id: ConflictSpace.replicas[0])
        var b = Replica(id: ConflictSpace.replicas[1])
        try a.perform(.createNote(NoteDraft(title: "n")), on: ref, wallMillis: 1_000)
        try b.merge(a.operations())
        try a.perform(.editNote(NotePatch(isPinned: true)), on: ref, wallMillis: 2_000)
        try b.perform(.editNote(NotePatch(isPinned: true)), on: ref, wallMillis: 2_000)
        try a.merge(b.operations())
        #expect(a.records[ref]!.register(.pinned)!.heads.map(\.value) == [.bool(true), .bool(true)])
    }

    // MARK: 1. Sequential edits

    /// Rule: a write that has seen every earlier write of its register leaves one head. Random
    /// changes of any kind, each made after a full exchange, never leave a register with rivals,
    /// on the writing replica right after the change nor on any replica at the end.
    @Test func sequentialEditsNeverConflict() async {
        var edits = 0
        await propertyCheck(count: 300, input: SequentialScript.gen) { script in
            var world = script.run(exchange: { world, _ in world.syncAll() }) { world, index, made in
                edits += made.count
                for (r, replica) in world.replicas.enumerated() {
                    let rivals = registersWithRivals(replica.records)
                    #expect(rivals.isEmpty, "replica \(r) after step \(index): \(rivals)")
                }
                // Each assign lists the greatest earlier write of each other replica to its register.
                for operation in made {
                    guard case let .assign(field, _) = operation.action else { continue }
                    let earlier = world.allOperations.filter { assigns($0, operation.record, field) && $0.id != operation.id }
                    for author in Set(earlier.map(\.id.replica)) where author != operation.id.replica {
                        let greatest = earlier.filter { $0.id.replica == author }.map(\.id.seq).max()!
                        #expect(operation.predecessors?.seq(of: author) == greatest, "\(operation)")
                    }
                }
            }
            world.syncAll()
            for (r, replica) in world.replicas.enumerated() {
                #expect(registersWithRivals(replica.records).isEmpty, "replica \(r) after the final exchange")
                #expect(!replica.records.values.contains { $0.inConflict })
            }
            #expect(conflictList(observer(merging: world.allOperations.reversed()).records).isEmpty)
        }
        #expect(edits > 300 * 5, "only \(edits) operations made")
    }

    // MARK: 2. Concurrent edits

    /// Rule: writes made without an exchange between them are all heads. From a synced state, 2–3
    /// replicas each edit one field (1–3 times, clocks skewed and jumping back); after a full
    /// exchange every replica shows that field, and only it, in conflict, with exactly one head
    /// per editor (its last write), the greatest stamp winning.
    @Test func editsWithoutAnExchangeConflict() async {
        await propertyCheck(count: 300, input: ConcurrentEdits.gen) { input in
            var (oracle, last) = input.run()
            #expect(last.count == input.editors.count, "every editor wrote the field")
            for (r, replica) in oracle.world.replicas.enumerated() {
                #expect(conflictList(replica.records).isEmpty, "replica \(r) before the exchange")
            }
            oracle.world.syncAll()
            let expected = last.values.compactMap(write(of:)).sorted { $0.stamp > $1.stamp }
            let all = oracle.world.allOperations
            let greatest = all.filter { assigns($0, input.ref, input.fieldName) }.map(\.stamp).max()
            for (r, replica) in oracle.world.replicas.enumerated() {
                let register = replica.records[input.ref]!.register(input.fieldName)!
                #expect(register.inConflict, "replica \(r)")
                #expect(register.heads == expected, "replica \(r)")
                #expect(Set(register.heads.map(\.stamp.replica)).count == input.editors.count, "one head per editor")
                #expect(register.stamp == greatest, "the winner is the greatest stamp")
                #expect(register.value == expected.first?.value)
                #expect(conflictList(replica.records).map(\.field) == [input.fieldName], "replica \(r)")
                oracle.checkExactHeads(of: r, "after the exchange")
            }
        }
    }

    // MARK: 3. Convergence of the conflict list

    /// Rule: the heads are a function of the set of writes held, and exactly the writes no write
    /// held had seen. Random edits and partial, shuffled, duplicated and gapped deliveries: after
    /// every step each replica's heads are exactly those (computed without predecessors); after a
    /// full exchange every replica's conflict list and dump are equal, and equal to those of a
    /// fresh replica that merged all the operations shuffled, in batches.
    @Test func conflictListConvergesLikeTheDump() async {
        var withConflicts = 0
        var total = 0
        await propertyCheck(count: 300, input: ConflictScript.gen) { script in
            var oracle = script.run { oracle, index in
                for r in 0..<oracle.count { oracle.checkExactHeads(of: r, "after step \(index)") }
            }
            oracle.world.syncAll()
            let all = oracle.world.allOperations
            var rng = oracle.world.rng(1_000_000, 0xC0F1)
            let fresh = shuffledObserver(all, using: &rng)
            let expected = conflictList(fresh.records)
            for (r, replica) in oracle.world.replicas.enumerated() {
                #expect(conflictList(replica.records) == expected, "replica \(r)")
                #expect(replica.dump() == fresh.dump(), "replica \(r)")
                #expect(replica.records == fresh.records, "replica \(r)")
                oracle.checkExactHeads(of: r, "after the full exchange")
            }
            #expect(conflictList(fold(all)) == expected)
            total += 1
            if !expected.isEmpty { withConflicts += 1 }
        }
        // The scripts must actually make conflicts, and not always.
        #expect(withConflicts * 3 >= total && withConflicts < total, "\(withConflicts) of \(total) scripts ended in conflict")
    }

    /// Merge laws of registers with rivals (`LWWRegister`'s doc comment): for registers built from
    /// random writes with random predecessors (unknown ones included), merge is commutative,
    /// associative and idempotent, agrees with merging the writes in any order, and keeps
    /// exactly the heads the rule gives. A write with the register's `predecessors(ofWriteBy:)`
    /// and a greater stamp leaves it the only head.
    @Test func registerWithRivalsMergeLaws() async {
        var inConflict = 0
        await propertyCheck(count: 500, input: RivalGen.table, RivalGen.ids, RivalGen.ids, RivalGen.ids) { table, ids1, ids2, ids3 in
            let (a, b, c) = (RivalGen.register(ids1, table), RivalGen.register(ids2, table), RivalGen.register(ids3, table))
            #expect(a.merging(b) == b.merging(a))
            #expect(a.merging(b).merging(c) == a.merging(b.merging(c)))
            #expect(a.merging(a) == a)
            #expect(a.merging(b).merging(a) == a.merging(b))
            let union = Set(ids1 + ids2 + ids3)
            let abc = a.merging(b).merging(c)
            #expect(abc == RivalGen.register(union.sorted(), table))
            #expect(abc == RivalGen.register(union.sorted().reversed(), table))
            #expect(abc.heads == RivalGen.expectedHeads(union, table), "heads of \(union.sorted())")
            #expect(abc.stamp == union.map { RivalGen.stamp($0 % 3, $0 / 3 + 1) }.max())
            if abc.inConflict { inConflict += 1 }

            // A later write by replica (ids1[0] % 3) that records what the register holds settles it.
            let author = ids1[0] % 3
            let settling = LWWRegister(
                value: .string("settled"), stamp: RivalGen.stamp(author, 9),
                predecessors: abc.predecessors(ofWriteBy: RivalGen.replicas[author]))
            let settled = abc.merging(settling)
            #expect(!settled.inConflict && settled.value == .string("settled"))
            #expect(settled == settling.merging(abc))
        }
        #expect(inConflict >= 50, "only \(inConflict) registers in conflict")
    }

    // MARK: 4. Settling

    /// Rule: a write that has seen every head settles the field. Once a conflict is on every
    /// replica, any replica editing the field (an ordinary edit, its clock possibly behind)
    /// records every head as seen; after a full exchange no replica has a conflict on the record
    /// and all show the settling value. Until they receive it, the others still show the conflict.
    @Test func settlingOnAnyReplicaClearsTheConflictEverywhere() async {
        await propertyCheck(count: 250, input: ConcurrentEdits.gen, Gen.int(in: 0...2), Gen.int(in: 0...11), Gen.int(in: -4...8)) {
            input, settler, value, clock in
            var (oracle, _) = input.run()
            oracle.world.syncAll()
            let heads = oracle.world.replicas[0].records[input.ref]!.register(input.fieldName)!.heads
            #expect(heads.count >= 2)
            let r = settler % input.replicaCount
            let made = oracle.perform(ConflictSpace.edit(input.ref, only: input.field, value: value), on: input.ref, by: r, clock: clock)
            guard let settle = made.first(where: { assigns($0, input.ref, input.fieldName) }) else {
                Issue.record("the settling edit was refused")
                return
            }
            for head in heads where head.stamp.replica != oracle.world.replicas[r].id {
                #expect(settle.predecessors?.covers(OperationID(replica: head.stamp.replica, seq: head.stamp.seq)) == true)
            }
            for (other, replica) in oracle.world.replicas.enumerated() {
                #expect(conflictList(replica.records).isEmpty == (other == r), "replica \(other) before it has the settling write")
            }
            oracle.world.syncAll()
            for (other, replica) in oracle.world.replicas.enumerated() {
                let state = replica.records[input.ref]!
                #expect(conflictList(replica.records).isEmpty, "replica \(other)")
                #expect(state.register(input.fieldName)!.heads == [write(of: settle)!], "replica \(other)")
                #expect(state.value(input.fieldName) == write(of: settle)!.value)
                oracle.checkExactHeads(of: other, "after settling")
            }
        }
    }

    // MARK: 5. Operations without predecessors

    /// Rule: an assign of unknown predecessors has seen every write of a smaller stamp, so old
    /// format operations never make a conflict appear where writes were sequential. Histories
    /// of changes each made after a full exchange in which every operation delivered may lose
    /// its predecessors (as a peer session or an older build carries it): no replica ever has a
    /// register with rivals, nor does a fresh replica given a random mix of the copies.
    @Test func oldFormatOperationsInSequentialHistoriesNeverConflict() async {
        await propertyCheck(count: 300, input: SequentialScript.gen, Gen<UInt64>.value(in: 0...UInt64.max)) { script, stripSeed in
            var rng = SplitMix64(seed: stripSeed)
            var world = script.run(exchange: { world, _ in world.syncAllStripping(using: &rng) }) { world, index, _ in
                for (r, replica) in world.replicas.enumerated() {
                    let rivals = registersWithRivals(replica.records)
                    #expect(rivals.isEmpty, "replica \(r) after step \(index): \(rivals)")
                }
            }
            world.syncAllStripping(using: &rng)
            for (r, replica) in world.replicas.enumerated() {
                let rivals = registersWithRivals(replica.records)
                #expect(rivals.isEmpty, "replica \(r) after the final exchange: \(rivals)")
            }
            // The authors' own copies, some stripped at random, in any order.
            var originals: [Op] = []
            for replica in world.replicas {
                originals += replica.operations.values.filter { $0.id.replica == replica.id }
            }
            let mixed = originals.map { Bool.random(using: &rng) ? stripped($0) : $0 }
            let fresh = shuffledObserver(mixed, using: &rng)
            #expect(registersWithRivals(fresh.records).isEmpty, "\(registersWithRivals(fresh.records))")
            #expect(fresh.dump() == world.replicas[0].dump())
        }
    }

    /// Rule: whatever mix of operations with and without predecessors a replica holds, its heads
    /// are a function of that set. Concurrent scripts, then a random part of the operations loses
    /// its predecessors: fresh replicas merging them in different orders and batches hold equal
    /// records and conflict lists, equal to the fold of the operations; with none stripped, the
    /// conflict list is the replicas' own.
    @Test func mixedOldAndNewFormatOperationsConverge() async {
        await propertyCheck(count: 250, input: ConflictScript.gen, Gen.int(in: 0...2)) { script, how in
            var oracle = script.run()
            oracle.world.syncAll()
            var rng = oracle.world.rng(2_000_000, 0x01D)
            let all = oracle.world.allOperations
            // None, about half, or all of them without predecessors.
            let mixed = all.map { how == 2 || (how == 1 && Bool.random(using: &rng)) ? stripped($0) : $0 }
            let first = shuffledObserver(mixed, using: &rng)
            let second = shuffledObserver(mixed.reversed(), using: &rng)
            #expect(first.records == second.records)
            #expect(conflictList(first.records) == conflictList(second.records))
            #expect(first.records == fold(mixed))
            #expect(first.dump() == oracle.world.replicas[0].dump())
            if how == 0 { #expect(conflictList(first.records) == conflictList(oracle.world.replicas[0].records)) }
            if how == 2 { #expect(conflictList(first.records).isEmpty, "all unknown: every smaller stamp was seen") }
        }
    }
}
