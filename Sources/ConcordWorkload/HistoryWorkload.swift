import ConcordCore
import ConcordStore
import Foundation

/// Two reminders of the `reminders` workload with long histories, written into replica B after
/// the workload: one whose writes are *interleaved* in the log with other reminders' writes (one
/// write of its own, then `others` of other reminders, over and over), and one whose writes are
/// *contiguous*. A record edited now and then among others has one operation span per write
/// (SPEC.md §9), so the first is the case where reading a history meets the most spans per log
/// row; the second holds as many operations in a few spans. Seeded and deterministic.
public struct HistoryWorkload: Sendable {
    /// The workload the two reminders belong to, built first.
    public var base: ReminderWorkload
    /// How many field writes each of the two reminders gets.
    public var writes: Int
    /// How many writes of other reminders follow each write of the interleaved one.
    public var others: Int

    /// Writes are made in transactions of this many changes, each a single field write: a
    /// transaction's operations fill whole log rows of 4096 (SPEC.md §9), the most a row holds,
    /// as a merge writes them, so that every row holds as many operations as it can.
    static let batch = 4096

    /// `writes` writes to each of the two reminders of `base`, `others` other writes after each
    /// of the interleaved one's.
    public init(base: ReminderWorkload, writes: Int = 10_000, others: Int = 9) {
        self.base = base
        self.writes = writes
        self.others = others
    }

    /// The reminder whose writes are interleaved with others': a third of the way into the workload.
    public var interleaved: RecordRef { .reminder(base.recordIDs()[base.records / 3]) }
    /// The reminder whose writes are contiguous: two thirds of the way into the workload.
    public var contiguous: RecordRef { .reminder(base.recordIDs()[2 * base.records / 3]) }

    /// Writes the workload (`base.buildB`), then the interleaved reminder's writes among others',
    /// then the contiguous reminder's, into `store`.
    public func build(into store: ConcordStore) throws {
        try base.buildB(into: store)
        let ids = base.recordIDs()
        let interleaved = interleaved
        let contiguous = contiguous
        var text = ReminderWorkload.Text(generator: SplitMix64(seed: base.seed &+ 0x4157))
        func edit() -> Change {
            switch text.int(4) {
            case 0: .editReminder(ReminderPatch(title: text.words(20 * base.textScale)))
            case 1: .editReminder(ReminderPatch(notes: .some(text.words(60 * base.textScale))))
            case 2: .editReminder(ReminderPatch(due: .some(Date(millisecondsSince1970: 1_795_000_000_000 + Int64(text.int(90 * 24)) * 3_600_000))))
            default: .editReminder(ReminderPatch(priority: Priority(rawValue: Int64(text.int(4)))))
            }
        }
        var pending: [(RecordRef, Change)] = []
        pending.reserveCapacity(Self.batch)
        func add(_ ref: RecordRef) throws {
            pending.append((ref, edit()))
            if pending.count == Self.batch {
                try store.perform(pending)
                pending.removeAll(keepingCapacity: true)
            }
        }
        for _ in 0..<writes {
            try add(interleaved)
            for _ in 0..<others {
                var other = RecordRef.reminder(ids[text.int(ids.count)])
                while other == interleaved || other == contiguous { other = .reminder(ids[text.int(ids.count)]) }
                try add(other)
            }
        }
        for _ in 0..<writes { try add(contiguous) }
        if !pending.isEmpty { try store.perform(pending) }
    }
}
