import ConcordCore
import ConcordStore
import Foundation

// Reads (concord.h, "Reads"): JSON text as `syncctl … --json` prints it, from the same JSON forms.

/// `CONCORD_INCLUDE_COMPLETED` and `CONCORD_INCLUDE_DELETED`.
private let includeCompleted: UInt32 = 1
private let includeDeleted: UInt32 = 2

/// The reminders, as `reminder list --json`.
@_cdecl("concord_reminders")
public func concord_reminders(
    _ handle: UInt64, _ flags: UInt32, _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let json = try output(json)
        guard flags & ~(includeCompleted | includeDeleted) == 0 else { throw InterfaceError.misuse("unknown flags \(flags) to list reminders") }
        let reminders = try stores.get(handle).reminders(
            includeCompleted: flags & includeCompleted != 0, includeDeleted: flags & includeDeleted != 0)
        give(JSON.array(reminders.map(\.json)).canonical, to: json)
    }
}

/// The reminders that should alert at an instant, as `reminder due --json`.
@_cdecl("concord_due_reminders")
public func concord_due_reminders(
    _ handle: UInt64, _ at: UnsafePointer<CChar>?, _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let json = try output(json)
        let store = try stores.get(handle)
        let time = try optionalText(at, "the time").map { try instant($0, "the time") } ?? Date()
        give(JSON.array(try store.dueReminders(at: time).map(\.json)).canonical, to: json)
    }
}

/// The notes, as `note list --json`.
@_cdecl("concord_notes")
public func concord_notes(
    _ handle: UInt64, _ flags: UInt32, _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let json = try output(json)
        guard flags & ~includeDeleted == 0 else { throw InterfaceError.misuse("unknown flags \(flags) to list notes") }
        let notes = try stores.get(handle).notes(includeDeleted: flags & includeDeleted != 0)
        give(JSON.array(notes.map(\.json)).canonical, to: json)
    }
}

/// One record, as `show --json`.
@_cdecl("concord_show")
public func concord_show(
    _ handle: UInt64, _ id: UnsafePointer<CChar>?, _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let json = try output(json)
        let store = try stores.get(handle)
        let text = try text(id, "the id")
        let ref = try store.resolve(text)
        let object: JSON? = switch ref.kind {
        case .reminder: try store.reminder(ref.id)?.json
        case .note: try store.note(ref.id)?.json
        default: try store.state(of: ref).map(ConcordCore.Dump.json(of:))
        }
        guard let object else { throw ConcordError(.notFound, "no \(ref.kind.name) with id \(text)") }
        give(object.canonical, to: json)
    }
}

/// The fields in conflict, as `conflicts --json`.
@_cdecl("concord_conflicts")
public func concord_conflicts(
    _ handle: UInt64, _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let json = try output(json)
        give(JSON.array(try stores.get(handle).conflicts().map(\.json)).canonical, to: json)
    }
}

/// Every write to one record, as `history --json`.
@_cdecl("concord_history")
public func concord_history(
    _ handle: UInt64, _ id: UnsafePointer<CChar>?, _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let json = try output(json)
        let store = try stores.get(handle)
        let text = try text(id, "the id")
        guard let entries = try store.history(of: try store.resolve(text)) else { throw ConcordError(.notFound, "no record with id \(text)") }
        give(JSON.array(entries.map(\.json)).canonical, to: json)
    }
}

/// The replica, its counts and its version vector, as `status --json`.
@_cdecl("concord_status")
public func concord_status(
    _ handle: UInt64, _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let json = try output(json)
        give(try stores.get(handle).status().json.canonical, to: json)
    }
}

/// The whole replicated state, as `dump`.
@_cdecl("concord_dump")
public func concord_dump(
    _ handle: UInt64, _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let json = try output(json)
        give(try stores.get(handle).dump(), to: json)
    }
}
