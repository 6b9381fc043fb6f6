// A reminders app on a laptop and a phone. The laptop adds a weekly reminder, snoozes it, and
// completes it (a repeating reminder moves to its next occurrence instead of closing); both
// devices sync through a folder that a file-sync tool (Dropbox, Syncthing) keeps in step. An app
// calls the store from its tasks with `await`: each call then runs off the threads they share.
import Concord
import Foundation

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("concord-reminders-\(UUID().uuidString)").path
let shared = directory + "/Shared"
try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }

// An app's task: every store call below is an async form.
func run(in directory: String, shared: String) async throws {
    let laptop = try await ConcordStore.create(at: directory + "/laptop.db", name: "laptop")
    let phone = try await ConcordStore.create(at: directory + "/phone.db", name: "phone")

    // Due this time tomorrow: a snooze must end in the future (SPEC.md §6.2).
    let due = Date().addingTimeInterval(24 * 3600)
    let plants = try await laptop.addReminder(ReminderDraft(title: "Water the plants", due: due, tags: ["home"], repeatRule: "weekly"))
    try await laptop.snoozeReminder(plants, until: due.addingTimeInterval(3600))
    try await laptop.completeReminder(plants)
    let next = try await laptop.reminder(plants)!
    print("'\(next.title)' is next due \(next.due!), still open: \(!next.isCompleted)")

    // The laptop publishes to the folder; the phone imports from it.
    try await laptop.sync(folder: shared)
    let imported = try await phone.sync(folder: shared)
    print("the phone imported \(imported.importedOperations) operations")

    // Dismissed on the phone, dismissed everywhere: a one-off reminder completes for good.
    let call = try await phone.addReminder(ReminderDraft(title: "Call the dentist"))
    try await phone.completeReminder(call)
    try await phone.sync(folder: shared)
    try await laptop.sync(folder: shared)
    guard try await laptop.reminder(call)?.isCompleted == true, try laptop.dump() == phone.dump() else {
        fatalError("the two devices did not converge")
    }
    print("both devices hold the same \(try await laptop.reminders(includeCompleted: true).count) reminders")
}

try await run(in: directory, shared: shared)
