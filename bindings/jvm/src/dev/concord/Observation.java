package dev.concord;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A subscription: to a store's changes ({@link ConcordStore#changes(ChangeListener)}), or a live
 * sync ({@link ConcordStore#syncPeerLive}, {@link ConcordStore#syncRelayLive}), which runs until it
 * is closed. Close it to stop it: once {@link #close()} returns, the listener is not running and
 * will not be called again. Closing the store closes its observations too. One whose stream ended
 * by itself (its listener heard {@code onEnd}) still holds its listener until it is closed.
 */
public final class Observation implements AutoCloseable {
    private final ConcordStore store;
    private final long subscription;
    private final EventDispatcher dispatcher;
    /** The JNI global reference the C callback gets, deleted once no callback can come. */
    private final long context;
    private final AtomicBoolean contextDeleted = new AtomicBoolean();
    private volatile boolean closed;

    Observation(ConcordStore store, long subscription, long context, EventDispatcher dispatcher) {
        this.store = store;
        this.subscription = subscription;
        this.context = context;
        this.dispatcher = dispatcher;
    }

    /**
     * Stops the subscription, and returns once its listener is not running and will not be called
     * again. Closing it again does nothing.
     *
     * @throws ConcordException {@link ConcordException#MISUSE} when called from its own listener,
     *     which the library refuses: the cancel would wait for the listener to return
     */
    @Override
    public void close() {
        if (dispatcher.isDeliveringItsListenerOnThisThread()) {
            // Asked before taking this object's lock, which another thread closing it holds while
            // it waits for this very listener to return. The library refuses it, in its words.
            cancel();
            return;
        }
        synchronized (this) {
            cancel();
        }
    }

    /** How many times the listener threw (the first is printed on standard error). */
    public long listenerFailures() {
        return dispatcher.listenerFailures();
    }

    private void cancel() {
        if (closed) return;
        try {
            Native.cancel(subscription);
        } catch (ConcordException e) {
            // A listener's cancel is refused whatever the store does; otherwise a refusal while the
            // store closes means its close took the subscription out and stops it. It deletes the
            // context once it has returned, when no callback can run any more: wait for that.
            if (e.code() == ConcordException.MISUSE && !EventDispatcher.isDeliveringOnThisThread()
                    && store.isClosing()) {
                store.awaitClose();
                closed = true;
                return;
            }
            throw e;
        }
        closed = true;
        deleteContext();
        store.forget(this);
    }

    /** Called by the store once its close returned, which stopped every subscription to it. */
    void storeClosed() {
        closed = true;
        deleteContext();
    }

    private void deleteContext() {
        if (contextDeleted.compareAndSet(false, true)) Native.deleteContext(context);
    }
}
