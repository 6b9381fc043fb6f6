package dev.concord;

/**
 * One event of a live sync, which a {@link LiveListener} hears (SPEC.md §17, "Subscriptions"): an
 * object whose "event" is its {@link #kind()}, over the JSON the library gave. Immutable.
 *
 * <p>Of {@link ConcordStore#syncPeerLive}:
 * <ul>
 *   <li>"live": a session's exchange is done and it is live; "progress": operations moved so far.
 *       Both have the numbers "bytesReceived", "bytesSent", "operationsReceived" and
 *       "operationsSent", of the session so far.
 *   <li>"disconnected": the session ended; it connects again after the number
 *       "reconnectingInMilliseconds". {@link #failure()} says why, or is null when the peer closed
 *       the connection without a word.
 * </ul>
 * Of {@link ConcordStore#syncRelayLive}:
 * <ul>
 *   <li>"synced": one sync done, whose {@link #report()} is a relay sync's report.
 *   <li>"failed": a sync failed ({@link #failure()}); it tries again after the number
 *       "retryingInMilliseconds".
 *   <li>"forked": another process forked the store (into the replica of the text "replica"); the
 *       stream then ends without an error. Open the store again to go on as that replica.
 * </ul>
 */
public final class LiveEvent {
    private final String json;
    private final JsonObject object;
    private final String kind;

    private LiveEvent(String json) {
        this.json = json;
        object = JsonObject.parse(json, "a live sync's event");
        kind = object.string("event");
    }

    /** The event of a live sync's callback. */
    static LiveEvent fromJson(String json) {
        return new LiveEvent(json);
    }

    /**
     * What happened: "live", "progress" or "disconnected" (a peer's live sync), "synced", "failed"
     * or "forked" (a relay's); another name is a kind a later library added.
     */
    public String kind() {
        return kind;
    }

    /** The event's JSON object: the exact text the library gave (canonical JSON, SPEC.md §10). */
    public String json() {
        return json;
    }

    /**
     * The integer field {@code key}, such as "operationsSent" or "reconnectingInMilliseconds".
     *
     * @throws IllegalArgumentException when this event has no field {@code key}, or it is not an
     *     integer
     */
    public long number(String key) {
        return object.askedNumber(key);
    }

    /**
     * The text field {@code key}, such as a "forked" event's "replica"; null when it is JSON null.
     *
     * @throws IllegalArgumentException when this event has no field {@code key}, or it is neither
     *     a string nor null
     */
    public String text(String key) {
        return object.askedText(key);
    }

    /**
     * Why a "disconnected" or "failed" event's session or sync failed, as the exception a call
     * failing so would throw (its code, such as {@link ConcordException#CLOSED}, and the
     * library's message); null when the event has no failure (a peer that closed the connection
     * without a word, or another kind of event). Not thrown: the live sync goes on.
     */
    public ConcordException failure() {
        if (!object.has("failure")) return null;
        JsonObject failure = object.objectOrNull("failure");
        return failure == null ? null : ConcordException.fromJson(failure);
    }

    /** A "synced" event's report of the relay sync (as {@link ConcordStore#syncRelay} returns it), or null. */
    public Report report() {
        if (!object.has("report")) return null;
        JsonObject report = object.objectOrNull("report");
        return report == null ? null : Report.of(report);
    }

    /** Its JSON text, for logs. */
    @Override
    public String toString() {
        return json;
    }
}
