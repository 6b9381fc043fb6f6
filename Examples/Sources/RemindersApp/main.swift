// A reminders app on a laptop and a phone. The laptop adds a weekly reminder, snoozes it, and
// completes it (a repeating reminder moves to its next occurrence instead of closing); both
// devices sync through a folder that a file-sync tool (Dropbox, Syncthing) keeps in step.
import ConcordExchange
import ConcordStore
import Foundation

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("concord-reminders-\(UUID().uuidString)").path
let shared = directory + "/Shared"
try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }

let laptop = try ConcordStore.create(at: directory + "/laptop.db", name: "laptop")
let phone = try ConcordStore.create(at: directory + "/phone.db", name: "phone")

let due = try Date("2026-11-27T09:00:00Z", strategy: .iso8601)
let plants = try laptop.addReminder(ReminderDraft(title: "Water the plants", due: due, tags: ["home"], repeatRule: "weekly"))
try laptop.snoozeReminder(plants, until: due.addingTimeInterval(3600))
try laptop.completeReminder(plants)
let next = try laptop.reminder(plants)!
print("'\(next.title)' is next due \(next.due!), still open: \(!next.isCompleted)")

// The laptop publishes to the folder; the phone imports from it.
try laptop.sync(folder: shared)
let imported = try phone.sync(folder: shared)
print("the phone imported \(imported.importedOperations) operations")

// Dismissed on the phone, dismissed everywhere: a one-off reminder completes for good.
let call = try phone.addReminder(ReminderDraft(title: "Call the dentist"))
try phone.completeReminder(call)
try phone.sync(folder: shared)
try laptop.sync(folder: shared)
guard try laptop.reminder(call)?.isCompleted == true, try laptop.dump() == phone.dump() else {
    fatalError("the two devices did not converge")
}
print("both devices hold the same \(try laptop.reminders(includeCompleted: true).count) reminders")
