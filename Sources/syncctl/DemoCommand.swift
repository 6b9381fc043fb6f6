import ArgumentParser
import ConcordCore
import ConcordExchange
import ConcordStore
import Foundation

struct Demo: OneShotCommand {
    static let configuration = CommandConfiguration(
        abstract: "Two laptops edit offline, conflict, sync, and converge.",
        discussion: """
            Creates two stores (laptop-a.db and laptop-b.db) and the folder they share (shared/) in a \
            new temporary directory or in --dir, makes conflicting offline edits on both, syncs both \
            through the folder, and prints both sides with the rule that decided each conflict. Exits 0 \
            only if both sides converged.
            """)

    @Option(help: "Where to put the two stores (created if missing; must not hold them already).")
    var dir: String?

    func work() throws {
        let directory = try dir ?? Self.temporaryDirectory()
        // Refuse before creating anything, so a failed demo leaves the directory as it was.
        for name in ["laptop-a.db", "laptop-b.db"] where FileManager.default.fileExists(atPath: directory + "/" + name) {
            throw ConcordError(.exists, "a store already exists at \(directory)/\(name)")
        }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let a = try ConcordStore.create(at: directory + "/laptop-a.db", name: "laptop-a")
        let b = try ConcordStore.create(at: directory + "/laptop-b.db", name: "laptop-b")
        let shared = directory + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        let folderA = FolderSync(store: a, folder: shared)
        let folderB = FolderSync(store: b, folder: shared)
        say("Two laptops sharing the folder \(shared)")
        say("  laptop-a  \(a.replicaID.hex)")
        say("  laptop-b  \(b.replicaID.hex)")

        let tomorrow = Date().addingTimeInterval(86_400)
        let passport = try a.addReminder(ReminderDraft(title: "Renew passport", due: tomorrow, priority: .high, tags: ["errands"]))
        let plants = try a.addReminder(ReminderDraft(title: "Water the plants", tags: ["home"], repeatRule: nil))
        let trip = try a.addNote(NoteDraft(title: "Trip ideas", body: "Lisbon in spring", tags: ["travel"]))
        try sync(folderA, folderB)
        say("\nBoth laptops start from the same reminders and notes. Then, offline:")

        try a.completeReminder(passport)
        say("  laptop-a  completes \"Renew passport\"")
        try b.editReminder(passport, ReminderPatch(title: "Renew passport (bring photos)"))
        say("  laptop-b  retitles it \"Renew passport (bring photos)\"")
        try a.tag(.reminder(plants), remove: ["home"])
        say("  laptop-a  removes the tag #home from \"Water the plants\"")
        try b.tag(.reminder(plants), add: ["home", "weekend"])
        say("  laptop-b  adds #home and #weekend to it")
        try a.delete(.note(trip))
        say("  laptop-a  deletes the note \"Trip ideas\"")
        try b.editNote(trip, NotePatch(body: "Lisbon in spring, Porto in autumn"))
        say("  laptop-b  edits the same note's text")

        let (toB, toA) = try sync(folderA, folderB)
        say("\nBoth sync through the folder: laptop-b received \(toB) operations, laptop-a received \(toA).")
        for (name, store) in [("laptop-a", a), ("laptop-b", b)] {
            say("\n\(name) now shows:")
            for reminder in try store.reminders(includeCompleted: true) {
                let tags = reminder.tags.map { " #" + $0 }.joined()
                say("  [\(reminder.isCompleted ? "x" : " ")] \(reminder.title)\(tags)")
            }
            let notes = try store.notes(includeDeleted: true)
            for note in notes { say("  note \"\(note.title)\"\(note.isDeleted ? " (deleted)" : "")") }
        }

        say("\nWhy:")
        say("  \"Renew passport\" is completed with laptop-b's title: completion and title are separate last-writer-wins fields, and only a reopen undoes a completion.")
        say("  #home stays on \"Water the plants\": tags are an add-wins set; a remove only removes the adds it had seen, and laptop-b's add was new.")
        say("  \"Trip ideas\" stays deleted: a delete is a tombstone that edits elsewhere do not undo; laptop-b's edit is kept and shows if the note is restored.")

        // Each explanation above must be what actually happened, on both sides.
        for store in [a, b] {
            let renewed = try store.reminder(passport)
            let watered = try store.reminder(plants)
            guard renewed?.isCompleted == true, renewed?.title == "Renew passport (bring photos)",
                  watered?.tags.contains("home") == true, try store.note(trip)?.isDeleted == true
            else { throw ValidationError("a merge rule did not decide as explained; see SPEC.md section 5") }
        }
        let dumpA = try a.dump()
        let dumpB = try b.dump()
        guard dumpA == dumpB else {
            throw ValidationError("the two laptops did not converge; their dumps differ")
        }
        let operations = try a.status().operations
        say("\nConverged: both laptops hold byte-identical state (\(operations) operations).")
    }

    /// Syncs both laptops through their folder (a publishes, b imports and publishes, a imports);
    /// returns how many operations each side received.
    @discardableResult
    private func sync(_ a: FolderSync, _ b: FolderSync) throws -> (toB: Int, toA: Int) {
        var received = (toB: 0, toA: 0)
        for (side, sync) in [(0, a), (1, b), (0, a)] {
            let report = try sync.sync()
            for warning in report.warnings { warn("warning: \(Advice.line(for: warning))") }
            if side == 0 { received.toA += report.importedOperations } else { received.toB += report.importedOperations }
        }
        return received
    }

    private static func temporaryDirectory() throws -> String {
        var template = Array((NSTemporaryDirectory() + "concord-demo-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw ValidationError("cannot create a temporary directory") }
        return String(cString: made)
    }
}
