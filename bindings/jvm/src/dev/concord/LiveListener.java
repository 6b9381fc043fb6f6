package dev.concord;

/**
 * Hears a live sync's events: give one to {@link ConcordStore#syncPeerLive} or
 * {@link ConcordStore#syncRelayLive}.
 *
 * <p>It is called as a {@link ChangeListener} is: on a thread of the library's, one call at a time
 * for one {@link Observation}, in the order of the events. It may block and may call the store. A
 * listener that throws goes on hearing the events that follow (what it threw is printed on
 * standard error the first time, and counted by {@link Observation#listenerFailures()}). It must
 * not close its own observation nor its store: both throw {@link ConcordException} with
 * {@link ConcordException#MISUSE}, since each would wait for the listener itself to return.
 */
@FunctionalInterface
public interface LiveListener {
    /** Called with each event: see {@link LiveEvent} for their kinds. */
    void onEvent(LiveEvent event);

    /**
     * Called once when the live sync ends by itself, after which nothing more is delivered: with
     * the failure that would recur at every attempt (such as {@link ConcordException#NO_SYNC_KEY},
     * {@link ConcordException#CLASH}, {@link ConcordException#REPLACED}), or null when it ended
     * without one (a relay's live sync after a "forked" event). Not called when the app ends it,
     * by closing the {@link Observation} or the store. Does nothing by default.
     */
    default void onEnd(ConcordException errorOrNull) {}
}
