package dev.concord;

/**
 * Hears a store's changes: give one to {@link ConcordStore#changes(ChangeListener)}.
 *
 * <p>Its methods are called on a thread of the library's, never the thread that made the change
 * nor the one that subscribed, one call at a time for one {@link Observation}, in the order of the
 * changes. They may block and may call the store (a listener commonly reads the list it shows);
 * an Android app posts to its main thread before touching views.
 *
 * <p>A listener that throws is not unsubscribed: it hears the changes that follow. What it threw
 * is printed on standard error the first time, and counted by
 * {@link Observation#listenerFailures()}; it never reaches the library's thread.
 *
 * <p>A listener must not close the store it listens to, nor its own observation: the library
 * refuses both ({@link ConcordException} with {@link ConcordException#MISUSE}), since each would
 * wait for the listener itself to return.
 */
@FunctionalInterface
public interface ChangeListener {
    /** Called with each change. */
    void onChange(Change change);

    /**
     * Called once when the stream ends by itself, after which nothing more is delivered: with the
     * error that ended it (such as {@link ConcordException#REPLACED}: the store's path names
     * another file now; open it again), or null when it ended without one. Not called when the app
     * ends it, by closing the {@link Observation} or the store. Does nothing by default.
     */
    default void onEnd(ConcordException errorOrNull) {}
}
