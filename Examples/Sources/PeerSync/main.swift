// Two devices that sync directly over TCP: a desktop serves its store, a phone connects to it.
// Both hold the same sync key, which authenticates them to each other and encrypts the session.
import Concord
import Foundation

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("concord-peer-sync-\(UUID().uuidString)").path
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }

let desktop = try ConcordStore.create(at: directory + "/desktop.db", name: "desktop")
let phone = try ConcordStore.create(at: directory + "/phone.db", name: "phone")
let key = SyncKey.generate()          // shown once on the desktop, typed or scanned on the phone
try desktop.setSyncKey(key)
try phone.setSyncKey(try SyncKey(text: key.text))

try desktop.addNote(NoteDraft(title: "Agenda", body: "1. Budget\n2. Hiring"))
try phone.addReminder(ReminderDraft(title: "Book the meeting room"))

let server = PeerServer(store: desktop, onSession: { record in print("desktop: \(record.logLine)") })
let address = try await server.start(host: "127.0.0.1", port: 0)
let record = try await PeerClient.sync(store: phone, address: address)
await server.stop()

guard record.failure == nil, try desktop.dump() == phone.dump() else {
    fatalError("the session failed or the stores differ: \(record.logLine)")
}
print("phone: received \(record.summary.operationsReceived) operations, sent \(record.summary.operationsSent); both devices hold the same")
