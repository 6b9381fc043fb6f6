import ConcordCore
import ConcordStore

// Local writes (concord.h, "Local writes"): each one transaction of the store's, durable when it
// returns.

/// Adds a reminder from its JSON draft and returns its id.
@_cdecl("concord_reminder_add")
public func concord_reminder_add(
    _ handle: UInt64, _ draft: UnsafePointer<CChar>?, _ id: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let id = try output(id)
        let store = try stores.get(handle)
        let what = "the reminder"
        let fields = try JSONInput.object(try text(draft, what), what, keys: ["title", "notes", "due", "priority", "tags", "repeat"])
        guard let title = try fields.string("title", what) else { throw JSONInput.invalid("\(what): title is missing") }
        let made = ReminderDraft(
            title: title,
            notes: try fields.removable("notes", what) { $0 } ?? nil,
            due: try fields.removable("due", what) { try instant($0, "\(what): due") } ?? nil,
            priority: try fields.priority(what) ?? .none,
            tags: try fields.strings("tags", what) ?? [],
            repeatRule: try fields.removable("repeat", what) { $0 } ?? nil)
        give(try store.addReminder(made).hex, to: id)
    }
}

/// Changes a reminder's fields from a JSON patch.
@_cdecl("concord_reminder_edit")
public func concord_reminder_edit(
    _ handle: UInt64, _ id: UnsafePointer<CChar>?, _ patch: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let store = try stores.get(handle)
        let ref = try store.resolve(try text(id, "the id"), kind: .reminder)
        let what = "the patch"
        let fields = try JSONInput.object(try text(patch, what), what, keys: ["title", "notes", "due", "priority", "repeat"])
        var change = ReminderPatch(title: try fields.string("title", what), priority: try fields.priority(what))
        change.notes = try fields.removable("notes", what) { $0 }
        change.due = try fields.removable("due", what) { try instant($0, "\(what): due") }
        change.repeatRule = try fields.removable("repeat", what) { $0 }
        try store.editReminder(ref.id, change)
    }
}

/// Completes a reminder.
@_cdecl("concord_reminder_complete")
public func concord_reminder_complete(_ handle: UInt64, _ id: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    perform(error) {
        let store = try stores.get(handle)
        try store.completeReminder(try store.resolve(try text(id, "the id"), kind: .reminder).id)
    }
}

/// Reopens a completed reminder.
@_cdecl("concord_reminder_reopen")
public func concord_reminder_reopen(_ handle: UInt64, _ id: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    perform(error) {
        let store = try stores.get(handle)
        try store.reopenReminder(try store.resolve(try text(id, "the id"), kind: .reminder).id)
    }
}

/// Snoozes a reminder until an instant.
@_cdecl("concord_reminder_snooze")
public func concord_reminder_snooze(
    _ handle: UInt64, _ id: UnsafePointer<CChar>?, _ until: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let store = try stores.get(handle)
        let ref = try store.resolve(try text(id, "the id"), kind: .reminder)
        try store.snoozeReminder(ref.id, until: try instant(try text(until, "the end of the snooze"), "the end of the snooze"))
    }
}

/// Adds a note from its JSON draft and returns its id.
@_cdecl("concord_note_add")
public func concord_note_add(
    _ handle: UInt64, _ draft: UnsafePointer<CChar>?, _ id: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let id = try output(id)
        let store = try stores.get(handle)
        let what = "the note"
        let fields = try JSONInput.object(try text(draft, what), what, keys: ["title", "body", "pinned", "tags"])
        guard let title = try fields.string("title", what) else { throw JSONInput.invalid("\(what): title is missing") }
        let made = NoteDraft(
            title: title, body: try fields.string("body", what) ?? "", tags: try fields.strings("tags", what) ?? [],
            isPinned: try fields.bool("pinned", what) ?? false)
        give(try store.addNote(made).hex, to: id)
    }
}

/// Changes a note's fields from a JSON patch.
@_cdecl("concord_note_edit")
public func concord_note_edit(
    _ handle: UInt64, _ id: UnsafePointer<CChar>?, _ patch: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let store = try stores.get(handle)
        let ref = try store.resolve(try text(id, "the id"), kind: .note)
        let what = "the patch"
        let fields = try JSONInput.object(try text(patch, what), what, keys: ["title", "body", "pinned"])
        try store.editNote(ref.id, NotePatch(
            title: try fields.string("title", what), body: try fields.string("body", what), isPinned: try fields.bool("pinned", what)))
    }
}

/// Adds and removes a record's tags.
@_cdecl("concord_record_tag")
public func concord_record_tag(
    _ handle: UInt64, _ id: UnsafePointer<CChar>?, _ add: UnsafePointer<CChar>?, _ remove: UnsafePointer<CChar>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let store = try stores.get(handle)
        let ref = try store.resolve(try text(id, "the id"))
        let added = try optionalText(add, "the tags to add").map { try JSONInput.strings($0, "the tags to add") } ?? []
        let removed = try optionalText(remove, "the tags to remove").map { try JSONInput.strings($0, "the tags to remove") } ?? []
        try store.tag(ref, add: added, remove: removed)
    }
}

/// Deletes a record.
@_cdecl("concord_record_delete")
public func concord_record_delete(_ handle: UInt64, _ id: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    perform(error) {
        let store = try stores.get(handle)
        try store.delete(try store.resolve(try text(id, "the id")))
    }
}

/// Restores a deleted record.
@_cdecl("concord_record_restore")
public func concord_record_restore(_ handle: UInt64, _ id: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    perform(error) {
        let store = try stores.get(handle)
        try store.restore(try store.resolve(try text(id, "the id")))
    }
}

/// Deletes every record of a kind.
@_cdecl("concord_delete_all")
public func concord_delete_all(
    _ handle: UInt64, _ kind: Int32, _ count: UnsafeMutablePointer<Int64>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error, onEveryRecordOf: kind, in: handle, counting: count) { store, kind in try store.deleteAll(kind) }
}

/// Purges a record: erases its content on every replica, for good (ABI version 2).
@_cdecl("concord_record_purge")
public func concord_record_purge(_ handle: UInt64, _ id: UnsafePointer<CChar>?, _ error: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    perform(error) {
        let store = try stores.get(handle)
        try store.purge(try store.resolve(try text(id, "the id")))
    }
}

/// Purges every record of a kind, deleted ones too (ABI version 2).
@_cdecl("concord_purge_all")
public func concord_purge_all(
    _ handle: UInt64, _ kind: Int32, _ count: UnsafeMutablePointer<Int64>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error, onEveryRecordOf: kind, in: handle, counting: count) { store, kind in try store.purgeAll(kind) }
}

/// Runs `body` on the store `handle` with the record kind `kind`, and sets `*count` to what it
/// returns: the calls on every record of a kind.
private func perform(
    _ error: UnsafeMutablePointer<OpaquePointer?>?, onEveryRecordOf kind: Int32, in handle: UInt64, counting count: UnsafeMutablePointer<Int64>?,
    _ body: (ConcordStore, RecordKind) throws -> Int
) -> Int32 {
    perform(error) {
        let done = try body(try stores.get(handle), try recordKind(kind))
        count?.pointee = Int64(done)
    }
}

/// `CONCORD_REMINDERS` or `CONCORD_NOTES`.
func recordKind(_ kind: Int32) throws -> RecordKind {
    switch kind {
    case 0: .reminder
    case 1: .note
    default: throw InterfaceError.misuse("\(kind) is not CONCORD_REMINDERS (0) or CONCORD_NOTES (1)")
    }
}
