package dev.concord;

import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * Hands what a subscription's C callback receives to the app's listener: a {@link ChangeListener}
 * (concord_observe) or a {@link LiveListener} (concord_sync_peer_live, concord_sync_relay_live).
 * The JNI glue calls {@link #deliver} and {@link #end} on the library's thread. Here, not in C, a
 * listener's exception is caught, so that it never reaches a thread that never returns to Java.
 */
final class EventDispatcher {
    /** The dispatcher whose listener the current thread is running, if any. */
    private static final ThreadLocal<EventDispatcher> DELIVERING = new ThreadLocal<>();

    /** The listener's interface, for the message of its first failure. */
    private final String listenerName;
    private final Consumer<String> onEvent;
    private final Consumer<ConcordException> onEnd;
    private final AtomicLong listenerFailures = new AtomicLong();

    private EventDispatcher(String listenerName, Consumer<String> onEvent, Consumer<ConcordException> onEnd) {
        this.listenerName = listenerName;
        this.onEvent = onEvent;
        this.onEnd = onEnd;
    }

    /** The dispatcher of a store's changes. */
    static EventDispatcher forChanges(ChangeListener listener) {
        return new EventDispatcher("ChangeListener", json -> listener.onChange(Change.fromJson(json)), listener::onEnd);
    }

    /** The dispatcher of a live sync's events. */
    static EventDispatcher forLiveSync(LiveListener listener) {
        return new EventDispatcher("LiveListener", json -> listener.onEvent(LiveEvent.fromJson(json)), listener::onEnd);
    }

    /** Called by the JNI glue with each event's JSON. */
    void deliver(String eventJson) {
        DELIVERING.set(this);
        try {
            // Parsed here too, inside the try: an event this binding cannot read is counted as a
            // failure rather than thrown on the library's thread.
            onEvent.accept(eventJson);
        } catch (Throwable failure) {
            noteFailure(failure);
        } finally {
            DELIVERING.remove();
        }
    }

    /** Called by the JNI glue once the stream ended by itself: code 0 when without an error. */
    void end(int code, String codeName, String message) {
        DELIVERING.set(this);
        try {
            onEnd.accept(code == 0 ? null : new ConcordException(code, codeName, message));
        } catch (Throwable failure) {
            noteFailure(failure);
        } finally {
            DELIVERING.remove();
        }
    }

    /** How many times the listener threw. */
    long listenerFailures() {
        return listenerFailures.get();
    }

    /** Whether the current thread is running any dispatcher's listener. */
    static boolean isDeliveringOnThisThread() {
        return DELIVERING.get() != null;
    }

    /** Whether the current thread is running this dispatcher's listener. */
    boolean isDeliveringItsListenerOnThisThread() {
        return DELIVERING.get() == this;
    }

    /**
     * Counts a failure, and prints the first one: a listener that throws on every event would
     * otherwise flood standard error.
     */
    private void noteFailure(Throwable failure) {
        if (listenerFailures.getAndIncrement() == 0) {
            System.err.println("concord: a " + listenerName + " threw; it goes on hearing events, and later failures of it"
                    + " are only counted (Observation.listenerFailures()):");
            failure.printStackTrace();
        }
    }
}
