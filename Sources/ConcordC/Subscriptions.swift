import ConcordCore
import ConcordStore
import Foundation

/// `concord_event_callback`.
public typealias EventCallback = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> Void

/// A stream of events delivered to an app's callback (concord.h, "Subscriptions"): a store's
/// changes, a live sync's events. A task reads the stream and calls the callback with each event's
/// JSON on a queue of the subscription's own: the callback is the app's code and may block (a
/// JVM attaching its thread, a lock of the app's), so it never runs on the threads Swift's tasks
/// share.
final class Subscription: Sendable {
    let store: ConcordStore
    /// Made, delivering, or over. A subscription starts delivering only once it has its handle,
    /// so that one refused as it begins (its store closing) never calls back.
    private enum State {
        /// The delivery, given a way to ask whether the subscription was stopped.
        case made(@Sendable (_ isStopped: @escaping @Sendable () -> Bool) async -> Void)
        case delivering(Task<Void, Never>)
        /// Stopped: with the task that delivered, which a second stop (a close of the store
        /// beside a cancel) waits for too.
        case stopped(Task<Void, Never>?)
    }

    private let state: LockedState<State>
    /// The thread that runs the callback now, so that a callback that cancels its own
    /// subscription is refused rather than left waiting for itself.
    private let caller: LockedState<pthread_t?> = LockedState(nil)

    /// A subscription that, once started, delivers what `events` hands to its `deliver`
    /// function: each a JSON text. When `events` returns or throws by itself (not stopped), the
    /// callback hears the end.
    init(
        store: ConcordStore, callback: EventCallback, context: UnsafeMutableRawPointer?,
        events: @escaping @Sendable (_ deliver: @Sendable (String) async -> Void) async throws -> Void
    ) {
        self.store = store
        let queue = DispatchQueue(label: "concord.c.subscription")
        // The pointer is the app's: it is handed back as it is, never read here.
        let context = UInt(bitPattern: context)
        let call: @Sendable (String?, InterfaceError?) -> Void = { [caller] event, end in
            caller.withLock { $0 = pthread_self() }
            defer { caller.withLock { $0 = nil } }
            let pointer = UnsafeMutableRawPointer(bitPattern: context)
            if let event {
                event.withCString { callback(pointer, $0, nil) }
            } else {
                let box = end.map { Unmanaged.passRetained(ErrorBox($0)) }
                defer { box?.release() }
                callback(pointer, nil, box.map { OpaquePointer($0.toOpaque()) })
            }
        }
        state = LockedState(.made { isStopped in
            let end: InterfaceError?
            do {
                try await events { event in await ConcordStore.offload(on: queue) { call(event, nil) } }
                end = nil
            } catch {
                end = InterfaceError(error)
            }
            // Asked again on the callback's queue, just before the call: a stop that came while
            // the end waited for the queue must not be followed by it. (A stop that comes during
            // the call waits for it to return.)
            if !Task.isCancelled { await ConcordStore.offload(on: queue) { if !isStopped() { call(nil, end) } } }
        })
    }

    /// Starts delivering, unless it was stopped first.
    func start() {
        state.withLock { state in
            guard case .made(let deliver) = state else { return }
            let isStopped: @Sendable () -> Bool = { [state = self.state] in
                state.withLock { if case .stopped = $0 { true } else { false } }
            }
            state = .delivering(Task { await deliver(isStopped) })
        }
    }

    /// Whether the calling thread is running this subscription's callback.
    var isCallingBack: Bool {
        caller.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Stops the stream, and returns once no call of the callback is under way and none will come,
    /// whether this call or another stopped it.
    func stop() {
        let task = state.withLock { state -> Task<Void, Never>? in
            switch state {
            case .made:
                state = .stopped(nil)
                return nil
            case .delivering(let task):
                state = .stopped(task)
                return task
            case .stopped(let task):
                return task
            }
        }
        guard let task else { return }
        task.cancel()
        waitFor { await task.value }
    }
}

/// Blocks the calling thread until `body` is done and returns what it returned: the one place the
/// C interface waits for async work (a peer session, a subscription's end), since a C function
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

/// `waitFor` of work that can fail: returns what it returned, or throws what it threw.
func waitFor<T: Sendable>(_ body: @escaping @Sendable () async throws(ConcordError) -> T) throws(ConcordError) -> T {
    let result = waitFor { () async -> Result<T, ConcordError> in
        do throws(ConcordError) {
            return .success(try await body())
        } catch {
            return .failure(error)
        }
    }
    return try result.get()
}

/// Checks a subscription's arguments and hands out its handle.
func subscribe(
    _ callback: EventCallback?, _ handle: UnsafeMutablePointer<UInt64>?, _ make: (EventCallback) throws -> Subscription
) throws {
    guard let callback else { throw InterfaceError.misuse("the callback is NULL") }
    guard let handle else { throw InterfaceError.misuse("the pointer to return the subscription through is NULL") }
    let subscription = try make(callback)
    let number = subscriptions.add(subscription)
    // A close of its store under way may have swept the store's subscriptions before this one was
    // added: then its store is no longer open, and this one must not outlive it. (The close takes
    // the store's handle out before it sweeps, so one of the two always sees the other; and a
    // subscription the close stopped first never starts.)
    guard stores.holds(subscription.store) else {
        _ = try? subscriptions.remove(number)
        subscription.stop()
        throw InterfaceError.misuse("the store was closed as the subscription began")
    }
    subscription.start()
    handle.pointee = number
}

/// Follows a store's changes.
@_cdecl("concord_observe")
public func concord_observe(
    _ handle: UInt64, _ since: UnsafePointer<CChar>?, _ callback: EventCallback?, _ context: UnsafeMutableRawPointer?,
    _ subscription: UnsafeMutablePointer<UInt64>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let store = try stores.get(handle)
        let since = try optionalText(since, "the version vector").map { text throws(ConcordError) in try VersionVector(json: text) }
        try subscribe(callback, subscription) { callback in
            // Made now, not in the task: a change committed right after this call returns is heard.
            let changes = store.changes(since: since)
            return Subscription(store: store, callback: callback, context: context) { deliver in
                for try await change in changes { await deliver(change.json.canonical) }
            }
        }
    }
}

/// Stops a subscription.
@_cdecl("concord_cancel")
public func concord_cancel(_ handle: UInt64, _ error: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    perform(error) {
        let subscription = try subscriptions.get(handle)
        // Any callback, not only its own: two callbacks cancelling each other would each wait for
        // the other to return.
        guard subscriptions.all(where: \.isCallingBack).isEmpty else {
            throw InterfaceError.misuse("a subscription's callback cannot cancel a subscription")
        }
        // Stopped before it leaves the registry: a close of its store meanwhile finds it there,
        // and waits for its stop as well, so that the close returns only once no callback of the
        // store's can come (the caller may free their contexts then).
        subscription.stop()
        _ = try? subscriptions.remove(handle)
    }
}
