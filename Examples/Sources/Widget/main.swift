// A widget that shows what the app has just written. The app is another process (here this
// program started again as `Widget app STORE`), which adds reminders one at a time; the widget
// opens the same store file and reads it as the app writes, until it has seen every reminder.
import ConcordStore
import Foundation

let arguments = CommandLine.arguments
let count = 20

if arguments.count == 3, arguments[1] == "app" {
    // The app: each reminder in a write of its own, committed before the next.
    let store = try ConcordStore.open(at: arguments[2])
    for index in 1...count {
        try store.addReminder(ReminderDraft(title: "Reminder \(index)"))
        try await Task.sleep(for: .milliseconds(20))
    }
    exit(0)
}

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("concord-widget-\(UUID().uuidString)").path
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }
let path = directory + "/store.db"
try ConcordStore.create(at: path, name: "phone").close()

let app = Process()
app.executableURL = URL(fileURLWithPath: arguments[0])
app.arguments = ["app", path]
try app.run()

// The widget's own connection: it reads while the app writes (SQLite's WAL lets it), each time
// the store tells it that a change was committed, by any process.
let widget = try ConcordStore.open(at: path, readOnly: true)
// Observed before the first read, so that no commit falls between the two.
let changes = widget.changes()
/// How many reminders are open, printed if not `shown`.
func show(after shown: Int) throws -> Int {
    let open = try widget.reminders()
    if open.count != shown { print("widget: \(open.count) open reminders, the last '\(open.last?.title ?? "")'") }
    return open.count
}
// A minute at most, rather than for ever should the app stop writing.
let watchdog = Task {
    try await Task.sleep(for: .seconds(60))
    fatalError("the widget did not see all \(count) reminders within a minute")
}
var shown = try show(after: 0)
if shown < count {
    for try await _ in changes {
        shown = try show(after: shown)
        if shown == count { break }
    }
}
watchdog.cancel()
app.waitUntilExit()
guard shown == count, app.terminationStatus == 0 else { fatalError("the widget saw \(shown) of \(count) reminders") }
print("the widget saw all \(count) reminders the app wrote")
