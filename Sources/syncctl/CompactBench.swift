import ArgumentParser
import ConcordCore
import ConcordExchange
import ConcordStore
import ConcordWorkload
import Foundation

/// `syncctl bench compact`: a store of reminders edited many times, compacted by another process
/// while this one adds reminders to it, against B's reminders written once (SPEC.md §5.8).
struct CompactBench: OneShotCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Compact a store of reminders edited many times, beside a writer, against the same reminders written once.",
        discussion: """
            Builds replica B of the workload (N reminders, N × U field updates) and B's reminders \
            written once (each created with its values and tags), not timed. Then runs 'syncctl compact --keep-history 0' on B in a \
            process of its own while this one adds reminders to B one at a time, and reports: each \
            store's operations held, log rows, bytes in use (pages less free ones) and bytes once \
            vacuumed (the size of a VACUUM INTO copy), before and \
            after; the compaction's time; the adds' latencies (p50, p99, max); and the first sync of a \
            new device from a bundle of B (as a shared folder's coalesced file gives it): its bytes \
            and the time to merge it into an empty store, before and after. Checks that the \
            compaction left the same dump, and a sound store.
            """)
    @OptionGroup var options: WorkloadOptions

    struct Figures {
        var operations: Int
        var logRows: Int
        var usedBytes: Int64
        var vacuumedBytes: Int64

        init(_ store: ConcordStore, vacuumingAt path: String) throws {
            operations = try store.verify().operations
            (logRows, usedBytes) = try store.logFigures()
            vacuumedBytes = try store.vacuumedBytes(at: path)
        }

        var json: JSON {
            .object([
                ("operations", .int(Int64(operations))), ("logRows", .int(Int64(logRows))), ("usedBytes", .int(usedBytes)),
                ("vacuumedBytes", .int(vacuumedBytes)),
            ])
        }
    }

    /// Writes `reminders` into `store` as they are, each created once with its values and tags,
    /// in transactions of 4096: the size their state takes with no history.
    static func writeOnce(_ reminders: [Reminder], into store: ConcordStore) throws {
        var changes: [(RecordRef, Change)] = []
        for reminder in reminders {
            let draft = ReminderDraft(
                title: reminder.title, notes: reminder.notes, due: reminder.due, priority: reminder.priority, tags: reminder.tags,
                completedAt: reminder.completedAt)
            changes.append((.reminder(reminder.id), .createReminder(draft)))
            if reminder.isDeleted { changes.append((.reminder(reminder.id), .delete)) }
            if changes.count >= 4096 {
                try store.perform(changes)
                changes.removeAll()
            }
        }
        if !changes.isEmpty { try store.perform(changes) }
    }

    /// A new device's first sync from a bundle of `store`: its bytes, and seconds to merge it.
    static func firstSync(of store: ConcordStore, in directory: String, _ name: String) throws -> (bytes: Int, seconds: Double) {
        let bundle = directory + "/\(name).cbundle"
        let summary = try store.exportBundle(to: bundle)
        let fresh = try ConcordStore.create(at: directory + "/\(name)-new.db")
        defer { try? fresh.close() }
        let seconds = try Measure.seconds { try fresh.mergeBundle(at: bundle) }
        try FileManager.default.removeItem(atPath: bundle)
        return (summary.bytes, seconds)
    }

    func work() throws {
        try withBenchDirectory { directory in
            let (b, _) = try buildReplicaB(options.workload, in: directory)
            progressNote("writing B's reminders once")
            let single = try ConcordStore.create(at: directory + "/once.db", environment: options.workload.environmentB)
            try Self.writeOnce(try b.reminders(includeCompleted: true, includeDeleted: true), into: single)
            let written = try Figures(single, vacuumingAt: directory + "/vacuumed.db")
            try single.close()

            progressNote("measuring B before compaction")
            let before = try Figures(b, vacuumingAt: directory + "/vacuumed.db")
            let digest = try Measure.dumpDigest(b)
            let syncBefore = try Self.firstSync(of: b, in: directory, "before")

            progressNote("compacting B in another process, adding reminders here")
            let errors = directory + "/compact.err"
            let start = DispatchTime.now().uptimeNanoseconds
            let compaction = try BenchProcess.spawn(["compact", "--keep-history", "0", "--store", directory + "/b.db"], output: nil, errors: errors)
            var latencies: [Double] = []
            var added: [RecordID] = []
            while compaction.isRunning {
                let began = DispatchTime.now().uptimeNanoseconds
                added.append(try b.addReminder(ReminderDraft(title: "added during compaction \(added.count)")))
                latencies.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
            }
            compaction.waitUntilExit()
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            guard compaction.terminationStatus == 0 else {
                let said = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
                throw ValidationError("the compaction failed: \(said.split(separator: "\n").last ?? "")")
            }
            for id in added { try b.purge(.reminder(id)) }
            progressNote("measuring B after compaction")
            let after = try Figures(b, vacuumingAt: directory + "/vacuumed.db")
            let verified = try Measure.dumpDigest(b) == digest && b.verify().isSound
            let syncAfter = try Self.firstSync(of: b, in: directory, "after")
            try b.close()
            guard verified else { throw ValidationError("the compaction changed the store's state, or left it unsound") }

            latencies.sort()
            func percentile(_ p: Double) -> Double { latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
            ProgressLine.shared.clear()
            if options.json {
                say(JSON.object([
                    ("benchmark", .string("compact")), ("workload", .string(options.description)),
                    ("writtenOnce", written.json), ("before", before.json), ("after", after.json),
                    ("compactSeconds", .decimal(seconds, fractionDigits: 3)),
                    ("addsDuringCompaction", .int(Int64(latencies.count))),
                    ("addP50Milliseconds", .decimal(percentile(0.5), fractionDigits: 2)), ("addP99Milliseconds", .decimal(percentile(0.99), fractionDigits: 2)),
                    ("addMaxMilliseconds", .decimal(latencies.last ?? 0, fractionDigits: 2)),
                    ("firstSyncBytesBefore", .int(Int64(syncBefore.bytes))), ("firstSyncSecondsBefore", .decimal(syncBefore.seconds, fractionDigits: 3)),
                    ("firstSyncBytesAfter", .int(Int64(syncAfter.bytes))), ("firstSyncSecondsAfter", .decimal(syncAfter.seconds, fractionDigits: 3)),
                ]).canonical)
                return
            }
            func line(_ name: String, _ figures: Figures) -> String {
                "\(name)  \(figures.operations) operations, \(figures.logRows) log rows, \(formatted(Double(figures.usedBytes) / 1_048_576, 1)) MB in use, \(formatted(Double(figures.vacuumedBytes) / 1_048_576, 1)) MB vacuumed"
            }
            say("compact  \(options.description)")
            say(line("written once ", written))
            say(line("before       ", before))
            say(line("after        ", after) + "  (\(formatted(Double(after.vacuumedBytes) / Double(max(written.vacuumedBytes, 1)), 2))× written once, vacuumed)")
            say("compaction    \(formatted(seconds, 2)) s in another process; \(latencies.count) adds meanwhile here: p50 \(formatted(percentile(0.5), 1)) ms, p99 \(formatted(percentile(0.99), 1)) ms, max \(formatted(latencies.last ?? 0, 1)) ms")
            say("first sync    before: \(syncBefore.bytes) bytes, \(formatted(syncBefore.seconds, 2)) s; after: \(syncAfter.bytes) bytes, \(formatted(syncAfter.seconds, 2)) s")
        }
    }
}
