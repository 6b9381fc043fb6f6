import ConcordCore
import ConcordStore

// Opening and closing stores (concord.h, "Stores").

/// Opens the existing store at `path`.
@_cdecl("concord_store_open")
public func concord_store_open(
    _ path: UnsafePointer<CChar>?, _ flags: UInt32, _ handle: UnsafeMutablePointer<UInt64>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let path = try text(path, "the path")
        guard flags & ~readOnlyFlag == 0 else { throw InterfaceError.misuse("unknown flags \(flags) to open a store") }
        guard let handle else { throw InterfaceError.misuse("the pointer to return the store through is NULL") }
        handle.pointee = stores.add(try ConcordStore.open(at: path, readOnly: flags & readOnlyFlag != 0))
    }
}

/// `CONCORD_OPEN_READ_ONLY`.
private let readOnlyFlag: UInt32 = 1

/// Creates a store at `path`.
@_cdecl("concord_store_create")
public func concord_store_create(
    _ path: UnsafePointer<CChar>?, _ name: UnsafePointer<CChar>?, _ handle: UnsafeMutablePointer<UInt64>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let path = try text(path, "the path")
        let name = try optionalText(name, "the name")
        guard let handle else { throw InterfaceError.misuse("the pointer to return the store through is NULL") }
        handle.pointee = stores.add(try ConcordStore.create(at: path, name: name))
    }
}

/// Closes a store: its subscriptions first, then its connections.
@_cdecl("concord_store_close")
public func concord_store_close(_ handle: UInt64, _ error: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    perform(error) {
        // Closing waits for the store's subscriptions to end, and a callback's own cannot end
        // while it runs.
        let store = try stores.get(handle)
        // From any callback, not only one of this store's: two callbacks closing each other's
        // stores would each wait for the other to return.
        if !subscriptions.all(where: \.isCallingBack).isEmpty {
            throw InterfaceError.misuse("a subscription's callback cannot close a store")
        }
        _ = try stores.remove(handle)
        for subscription in subscriptions.removeAll(where: { $0.store === store }) { subscription.stop() }
        try store.close()
    }
}

/// This replica's id.
@_cdecl("concord_store_replica_id")
public func concord_store_replica_id(
    _ handle: UInt64, _ id: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let id = try output(id)
        give(try stores.get(handle).replicaID.hex, to: id)
    }
}
