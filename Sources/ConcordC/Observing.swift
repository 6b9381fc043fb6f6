import ConcordCore
import ConcordExchange
import ConcordStore
import Foundation

/// `concord_change_callback`.
public typealias ChangeCallback = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> Void

/// One observer of a store (concord.h, "Observing"): a task that follows the store's changes and
/// calls the app's callback with each, on a queue of the observer's own. The callback is the
/// app's code and may block (a JVM attaching its thread, a lock of the app's), so it never runs
/// on the threads Swift's tasks share.
final class Observer: Sendable {
    let store: ConcordStore
    private let task: LockedState<Task<Void, Never>?> = LockedState(nil)
    /// The thread that runs the callback now, so that a callback that cancels its own observer is
    /// refused rather than left waiting for itself.
    private let caller: LockedState<pthread_t?> = LockedState(nil)

    init(store: ConcordStore, since: VersionVector?, callback: ChangeCallback, context: UnsafeMutableRawPointer?) {
        self.store = store
        let queue = DispatchQueue(label: "concord.c.observer")
        // The pointer is the app's: it is handed back as it is, never read here.
        let context = UInt(bitPattern: context)
        let deliver: @Sendable (String?, InterfaceError?) -> Void = { [caller] change, end in
            caller.withLock { $0 = pthread_self() }
            defer { caller.withLock { $0 = nil } }
            let pointer = UnsafeMutableRawPointer(bitPattern: context)
            let box = end.map { Unmanaged.passRetained(ErrorBox($0)) }
            defer { box?.release() }
            if let change {
                change.withCString { callback(pointer, $0, nil) }
            } else {
                callback(pointer, nil, box.map { OpaquePointer($0.toOpaque()) })
            }
        }
        let changes = store.changes(since: since)
        task.withLock {
            $0 = Task {
                do {
                    for try await change in changes {
                        let text = change.json.canonical
                        await ConcordStore.offload(on: queue) { deliver(text, nil) }
                    }
                    // The stream ended: the store was closed, or this observer was cancelled.
                    if !Task.isCancelled { await ConcordStore.offload(on: queue) { deliver(nil, nil) } }
                } catch {
                    let end = InterfaceError(error)
                    if !Task.isCancelled { await ConcordStore.offload(on: queue) { deliver(nil, end) } }
                }
            }
        }
    }

    /// Whether the calling thread is running this observer's callback.
    var isCallingBack: Bool {
        caller.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Stops following the store, and returns once no call of the callback is under way and none
    /// will come.
    func stop() {
        guard let task = task.withLock({ $0 }) else { return }
        task.cancel()
        waitFor { await task.value }
    }
}

/// Blocks the calling thread until `body` is done and returns what it returned: the one place the
/// C interface waits for async work (a peer session, an observer's end), since a C function
/// returns only once its work is done. Called on a C caller's thread, never on the threads Swift's
/// tasks share, which `body` needs.
func waitFor<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let done = DispatchSemaphore(value: 0)
    let result = LockedState<T?>(nil)
    Task {
        let value = await body()
        result.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return result.withLock { $0 }!
}

/// Starts observing a store's changes.
@_cdecl("concord_observe")
public func concord_observe(
    _ handle: UInt64, _ since: UnsafePointer<CChar>?, _ callback: ChangeCallback?, _ context: UnsafeMutableRawPointer?,
    _ observer: UnsafeMutablePointer<UInt64>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let store = try stores.get(handle)
        let since = try optionalText(since, "the version vector").map { text throws(ConcordError) in try VersionVector(json: text) }
        guard let callback else { throw InterfaceError.misuse("the callback is NULL") }
        guard let observer else { throw InterfaceError.misuse("the pointer to return the observer through is NULL") }
        observer.pointee = observers.add(Observer(store: store, since: since, callback: callback, context: context))
    }
}

/// Stops an observer.
@_cdecl("concord_observer_cancel")
public func concord_observer_cancel(_ handle: UInt64, _ error: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    perform(error) {
        let observer = try observers.get(handle)
        guard !observer.isCallingBack else { throw InterfaceError.misuse("an observer's callback cannot cancel its own observer") }
        _ = try observers.remove(handle)
        observer.stop()
    }
}
