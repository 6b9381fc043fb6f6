import ConcordCore
import ConcordStore
import Foundation

/// The `reminders` workload of the merge benchmark, seeded and deterministic.
///
/// Replica B creates `records` reminders, each with a title (20 characters of words), notes (60),
/// a due date, completed or not, a priority and 1 to 3 tags from a pool of 20; then makes
/// `records × updatesPerRecord` field updates (a random field of a random reminder) interleaved
/// with a tenth as many tag adds or removes. Replica A concurrently creates a tenth of the same
/// reminders with values of its own, so a merge of B into A meets real conflicts. Every field
/// write and every tag add or remove is one operation: about 8.1 operations per record.
public struct ReminderWorkload: Sendable {
    /// How many reminders replica B creates.
    public var records: Int
    /// How many field updates per record replica B makes after creating them.
    public var updatesPerRecord: Int
    /// Multiplies the length of titles and notes.
    public var textScale: Int
    /// The seed of the workload's random choices: the same seed makes the same operations.
    public var seed: UInt64

    /// Uniformly random record ids, as stores of other makers might give, instead of the
    /// time-ordered ones Concord makes (SPEC.md §2).
    public var randomIDs: Bool

    /// A workload of these sizes; the defaults are the benchmark's.
    public init(records: Int = 100_000, updatesPerRecord: Int = 1, textScale: Int = 1, seed: UInt64 = 1, randomIDs: Bool = false) {
        self.records = records
        self.updatesPerRecord = updatesPerRecord
        self.textScale = textScale
        self.seed = seed
        self.randomIDs = randomIDs
    }

    /// The store environment of replica B (deterministic ids and clock).
    public var environmentB: StoreEnvironment { .deterministic(seed: seed &+ 0xB, startMillis: 1_795_000_000_000) }
    /// The store environment of replica A; its clock starts a little later, so conflicts go both ways.
    public var environmentA: StoreEnvironment { .deterministic(seed: seed &+ 0xA, startMillis: 1_795_000_000_500) }

    static let vocabulary = [
        "milk", "call", "mom", "send", "report", "buy", "book", "flight", "renew", "passport", "pay", "rent", "water",
        "plants", "fix", "bike", "email", "team", "plan", "trip", "dentist", "car", "tax", "gift", "review", "draft",
        "order", "printer", "ink", "cancel", "gym", "walk", "dog", "clean", "garage", "visit", "grandma", "pick", "up", "kids",
    ]
    static let tagPool = (0..<20).map { "tag\($0)" }

    /// The ids of the workload's reminders, in the order B creates them: made as B's store makes
    /// ids, one millisecond apart from the start of B's clock (or at random, with `randomIDs`).
    public func recordIDs() -> [RecordID] {
        var generator = SplitMix64(seed: seed &* 0x9E37_79B9)
        var previous: RecordID?
        return (0..<records).map { index in
            let id =
                randomIDs
                ? RecordID(high: generator.next(), low: generator.next())
                : RecordID.timeOrdered(
                    millis: 1_795_000_000_000 + UInt64(index), following: previous, random: generator.next(), generator.next())
            previous = id
            return id
        }
    }

    struct Text {
        var generator: SplitMix64

        mutating func words(_ length: Int) -> String {
            var text = ""
            while text.utf8.count < length {
                if !text.isEmpty { text += " " }
                text += ReminderWorkload.vocabulary[Int(generator.next() % UInt64(ReminderWorkload.vocabulary.count))]
            }
            return String(text.prefix(length))
        }

        mutating func int(_ bound: Int) -> Int { Int(generator.next() % UInt64(bound)) }
    }

    func draft(_ text: inout Text) -> ReminderDraft {
        var tags: [String] = []
        for _ in 0..<(1 + text.int(3)) {
            let tag = Self.tagPool[text.int(Self.tagPool.count)]
            if !tags.contains(tag) { tags.append(tag) }
        }
        let base = 1_795_000_000_000 as Int64
        return ReminderDraft(
            title: text.words(20 * textScale), notes: text.words(60 * textScale),
            due: Date(millisecondsSince1970: base + Int64(text.int(90 * 24)) * 3_600_000),
            priority: Priority(rawValue: Int64(text.int(4))), tags: tags,
            completedAt: text.int(2) == 0 ? Date(millisecondsSince1970: base - Int64(text.int(1000)) * 60_000) : nil)
    }

    /// Writes replica B's history into `store` through the library, `batch` changes per transaction.
    /// - Returns: the seconds spent creating the reminders (the local-writes figure) and in all.
    @discardableResult
    public func buildB(into store: ConcordStore, batch: Int = 1000) throws -> (createSeconds: Double, totalSeconds: Double) {
        let ids = recordIDs()
        var text = Text(generator: SplitMix64(seed: seed &+ 0x5EED))
        // The creates are generated before the clock starts: only the store's work is timed.
        let creates = ids.map { id in (RecordRef.reminder(id), Change.createReminder(draft(&text))) }
        let start = Date()
        for first in stride(from: 0, to: creates.count, by: batch) {
            try store.perform(Array(creates[first..<min(first + batch, creates.count)]))
        }
        let created = Date().timeIntervalSince(start)
        var pending: [(RecordRef, Change)] = []
        pending.reserveCapacity(batch)
        func flush() throws {
            if !pending.isEmpty { try store.perform(pending) }
            pending.removeAll(keepingCapacity: true)
        }
        // Tags each reminder has, to choose removals that remove something.
        var updates = 0
        for index in 0..<(records * updatesPerRecord) {
            let ref = RecordRef.reminder(ids[text.int(records)])
            let change: Change
            switch text.int(5) {
            case 0: change = .editReminder(ReminderPatch(title: text.words(20 * textScale)))
            case 1: change = .editReminder(ReminderPatch(notes: .some(text.words(60 * textScale))))
            case 2: change = .editReminder(ReminderPatch(due: .some(Date(millisecondsSince1970: 1_795_000_000_000 + Int64(text.int(90 * 24)) * 3_600_000))))
            case 3: change = .editReminder(ReminderPatch(priority: Priority(rawValue: Int64(text.int(4)))))
            default: change = text.int(2) == 0 ? .complete : .reopen
            }
            pending.append((ref, change))
            updates += 1
            if index % 10 == 9 {
                let tag = Self.tagPool[text.int(Self.tagPool.count)]
                let tagRef = RecordRef.reminder(ids[text.int(records)])
                pending.append((tagRef, text.int(2) == 0 ? .tag(add: [tag], remove: []) : .tag(add: [], remove: [tag])))
            }
            if pending.count >= batch { try flush() }
        }
        try flush()
        return (created, Date().timeIntervalSince(start))
    }

    /// Writes replica A's concurrent creates of a tenth of the same reminders into `store`.
    public func buildA(into store: ConcordStore, batch: Int = 1000) throws {
        let ids = recordIDs()
        var text = Text(generator: SplitMix64(seed: seed &+ 0xA11CE))
        var pending: [(RecordRef, Change)] = []
        for index in stride(from: 0, to: records, by: 10) {
            pending.append((.reminder(ids[index]), .createReminder(draft(&text))))
            if pending.count == batch {
                try store.perform(pending)
                pending.removeAll(keepingCapacity: true)
            }
        }
        if !pending.isEmpty { try store.perform(pending) }
    }
}
