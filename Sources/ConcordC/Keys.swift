import ConcordCore
import ConcordKeys
import ConcordStore

// The store's sync key (concord.h, "Keys"; SPEC.md §15.1).

/// `CONCORD_KEY_REPLACE`.
private let replaceKey: UInt32 = 1

/// Makes a new random sync key for the store and returns its text.
@_cdecl("concord_key_generate")
public func concord_key_generate(
    _ handle: UInt64, _ flags: UInt32, _ key: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let key = try output(key)
        guard flags & ~replaceKey == 0 else { throw InterfaceError.misuse("unknown flags \(flags) for a key") }
        let store = try stores.get(handle)
        let made = SyncKey.generate()
        try store.setSyncKey(made, replacing: flags & replaceKey != 0)
        give(made.text, to: key)
    }
}

/// Sets the store's sync key to one made on another store.
@_cdecl("concord_key_set")
public func concord_key_set(
    _ handle: UInt64, _ key: UnsafePointer<CChar>?, _ flags: UInt32, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        guard flags & ~replaceKey == 0 else { throw InterfaceError.misuse("unknown flags \(flags) for a key") }
        let store = try stores.get(handle)
        // Parsed first: a bad key changes nothing.
        let parsed = try SyncKey(text: try text(key, "the key"))
        try store.setSyncKey(parsed, replacing: flags & replaceKey != 0)
    }
}

/// The id of the store's sync key.
@_cdecl("concord_key_id")
public func concord_key_id(
    _ handle: UInt64, _ id: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let id = try output(id)
        let store = try stores.get(handle)
        guard let key = try store.syncKey() else { throw ConcordError.noSyncKey(at: store.path) }
        give(key.id, to: id)
    }
}
