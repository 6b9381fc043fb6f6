import ConcordCore
import ConcordStore

/// The stores and subscriptions the C interface has handed out, by handle: a number never reused in
/// the process, so that a handle used after it was closed is refused (`misuse`) rather than
/// followed to freed memory.
final class Handles<Object: Sendable>: Sendable {
    private struct State {
        var objects: [UInt64: Object] = [:]
        var next: UInt64 = 1
    }

    private let state = LockedState(State())
    private let what: String

    init(what: String) {
        self.what = what
    }

    /// A new handle for `object`.
    func add(_ object: Object) -> UInt64 {
        state.withLock { state in
            let handle = state.next
            state.next += 1
            state.objects[handle] = object
            return handle
        }
    }

    /// The object of `handle`.
    func get(_ handle: UInt64) throws(InterfaceError) -> Object {
        guard let object = state.withLock({ $0.objects[handle] }) else { throw refusal(handle) }
        return object
    }

    /// Takes the object of `handle` out: the handle is no longer one.
    func remove(_ handle: UInt64) throws(InterfaceError) -> Object {
        guard let object = state.withLock({ $0.objects.removeValue(forKey: handle) }) else { throw refusal(handle) }
        return object
    }

    /// Whether `object` has a handle.
    func holds(_ object: Object) -> Bool where Object: AnyObject {
        state.withLock { state in state.objects.values.contains { $0 === object } }
    }

    /// Every object `isIncluded` picks, left in.
    func all(where isIncluded: (Object) -> Bool) -> [Object] {
        state.withLock { state in state.objects.values.filter(isIncluded) }
    }

    /// Takes out every object `isIncluded` picks.
    func removeAll(where isIncluded: (Object) -> Bool) -> [Object] {
        state.withLock { state in
            let picked = state.objects.filter { isIncluded($0.value) }
            for handle in picked.keys { state.objects[handle] = nil }
            return Array(picked.values)
        }
    }

    private func refusal(_ handle: UInt64) -> InterfaceError {
        .misuse(handle == 0 ? "0 is not a \(what) handle" : "\(what) handle \(handle) is closed, or was never one")
    }
}

/// The open stores, and the subscriptions to each (`Subscription.store`).
let stores = Handles<ConcordStore>(what: "store")
let subscriptions = Handles<Subscription>(what: "subscription")
