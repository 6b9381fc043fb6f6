package dev.concord;

import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * A Concord store: a file of reminders and notes that replicas keep in sync, opened through the
 * C interface (concord.h, SPEC.md §17).
 *
 * <p><b>Threads.</b> A store may be used from any number of threads at once. Each call blocks its
 * thread until it is done; a write may wait for another process's turn (up to 30 s), a read never
 * waits behind a write. Do not call it on an Android app's main thread.
 *
 * <p><b>Syncing.</b> A store syncs with other replicas through a shared folder
 * ({@link #syncFolder}), a peer ({@link #syncPeer}, {@link #syncPeerLive}), a relay
 * ({@link #syncRelay}, {@link #syncRelayLive}) or files ({@link #export}, {@link #merge}); the
 * network ones need the same sync key on both stores ({@link #generateKey}, {@link #setKey}). An
 * exchange blocks its thread until done and returns a {@link Report}; a live sync runs on the
 * library's threads until its {@link Observation} or the store is closed.
 *
 * <p><b>Ownership.</b> A store holds the file open until {@link #close()}: close it (try with
 * resources) when done. After close, every call throws {@link ConcordException} with
 * {@link ConcordException#MISUSE}.
 *
 * <p><b>Failures.</b> Every call that fails throws {@link ConcordException} with the library's code
 * and message, and changes nothing. A null where a value is required (an id, a draft) is the
 * library's {@link ConcordException#MISUSE} too. Text is passed as UTF-8; a String holding U+0000
 * where the C interface takes plain text (an id, a path) or a surrogate without its pair is refused
 * with {@link ConcordException#INVALID_INPUT}. Titles, notes and bodies go inside JSON, where
 * U+0000 is escaped and kept.
 *
 * <p><b>Ids.</b> Where a call takes a record's id, a unique prefix or suffix of at least 4 of its
 * hex digits will do.
 */
public final class ConcordStore implements AutoCloseable {
    private final long handle;

    /** The store's states: {@link #close()} moves it from OPEN to CLOSING to CLOSED. */
    private static final int OPEN = 0;
    private static final int CLOSING = 1;
    private static final int CLOSED = 2;

    /** Guards {@link #state} and {@link #observations}; never held across a call of the library. */
    private final Object lock = new Object();
    private int state = OPEN;
    /** The observations not closed yet, whose contexts the store's close deletes. */
    private final Set<Observation> observations = new HashSet<>();

    private ConcordStore(long handle) {
        this.handle = handle;
    }

    // MARK: Opening and closing

    /**
     * Opens the existing store at {@code path}.
     *
     * @throws ConcordException {@link ConcordException#MISSING} when there is none,
     *     {@link ConcordException#NOT_A_STORE} when the file is something else
     */
    public static ConcordStore open(String path) {
        return new ConcordStore(Native.storeOpen(path, 0));
    }

    /**
     * Opens the existing store at {@code path} read-only: reads work, writes throw
     * {@link ConcordException#READ_ONLY}. For a process that only shows the store, such as a
     * widget.
     */
    public static ConcordStore openReadOnly(String path) {
        return new ConcordStore(Native.storeOpen(path, Native.OPEN_READ_ONLY));
    }

    /**
     * Creates a store at {@code path}, a new replica with its own id.
     *
     * @param name a name that {@link #statusJson()} shows, or null for none
     * @throws ConcordException {@link ConcordException#EXISTS} when a file is there already
     */
    public static ConcordStore create(String path, String name) {
        return new ConcordStore(Native.storeCreate(path, name));
    }

    /**
     * The version of concord.h's interface that the loaded libConcordC implements (1 or later: the
     * binding refuses to load an older one).
     */
    public static int interfaceVersion() {
        return Native.abiVersion();
    }

    /**
     * Closes the store, and first every {@link Observation} of it: their listeners are not called
     * again, nor told of the end ({@code onEnd} is not called), and a live sync stops. Calls under
     * way on other threads end with an error. Closing it again does nothing; while another
     * thread's close is under way, it waits for that close to end.
     *
     * @throws ConcordException {@link ConcordException#MISUSE} when called from any listener,
     *     which the library refuses (the close would wait for the listeners of this store to
     *     return); the store stays open
     */
    @Override
    public void close() {
        synchronized (lock) {
            // A listener must not wait here: the close under way waits for it to return.
            if (!EventDispatcher.isDeliveringOnThisThread()) awaitNotClosing();
            if (state == CLOSED) return;
            if (state == CLOSING) throw ConcordException.misuse("a subscription's callback cannot close a store");
            state = CLOSING;
        }
        try {
            Native.storeClose(handle);
        } catch (ConcordException e) {
            if (e.code() == ConcordException.MISUSE) {
                // The library refused before it did anything (only this object closes the handle,
                // so the refusal is of a close from one of the store's callbacks): still open.
                synchronized (lock) {
                    state = OPEN;
                    lock.notifyAll();
                }
                throw e;
            }
            // Any other failure comes after the handle was taken out and the subscriptions
            // stopped: the store is closed all the same.
            closed();
            throw e;
        }
        closed();
    }

    /**
     * Deletes the contexts of the observations, once the library's close returned: it stopped
     * every subscription to the store, so no callback can be handed one any more.
     */
    private void closed() {
        List<Observation> open;
        synchronized (lock) {
            state = CLOSED;
            lock.notifyAll();
            open = new ArrayList<>(observations);
            observations.clear();
        }
        for (Observation observation : open) observation.storeClosed();
    }

    /**
     * Waits, holding {@link #lock}, until no close is under way. An interrupt does not end the
     * wait (the close must not return before the store is closed); it is kept for the caller.
     */
    private void awaitNotClosing() {
        boolean interrupted = false;
        while (state == CLOSING) {
            try {
                lock.wait();
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) Thread.currentThread().interrupt();
    }

    /** This replica's id: 32 hex digits. */
    public String replicaId() {
        return Native.replicaId(handle);
    }

    // MARK: Writes (each one transaction, durable when the call returns)

    /**
     * Adds a reminder and returns its id.
     *
     * @throws ConcordException {@link ConcordException#INVALID_CHANGE} for an empty title, a bad tag
     *     or an unknown repeat rule; {@link ConcordException#INVALID_INPUT} for a due date outside
     *     the years 1 to 9999
     */
    public String addReminder(ReminderDraft draft) {
        return Native.reminderAdd(handle, draft == null ? null : draft.toJson());
    }

    /**
     * Changes the fields of the reminder {@code id} that {@code patch} sets.
     *
     * @throws ConcordException {@link ConcordException#NOT_FOUND} when there is no such reminder,
     *     {@link ConcordException#INVALID_CHANGE} when it is deleted or the title is empty
     */
    public void editReminder(String id, ReminderPatch patch) {
        Native.reminderEdit(handle, id, patch == null ? null : patch.toJson());
    }

    /** Completes the reminder {@code id}; a repeating one moves to its next occurrence instead. */
    public void completeReminder(String id) {
        Native.reminderComplete(handle, id);
    }

    /** Reopens the completed reminder {@code id}. */
    public void reopenReminder(String id) {
        Native.reminderReopen(handle, id);
    }

    /**
     * Snoozes the reminder {@code id} until {@code until}, which must be after now and at most 366
     * days ahead ({@link ConcordException#INVALID_CHANGE} otherwise). Kept to the millisecond.
     */
    public void snoozeReminder(String id, Instant until) {
        Native.reminderSnooze(handle, id, Instants.format(until));
    }

    /** Adds a note and returns its id. */
    public String addNote(NoteDraft draft) {
        return Native.noteAdd(handle, draft == null ? null : draft.toJson());
    }

    /** Changes the fields of the note {@code id} that {@code patch} sets. */
    public void editNote(String id, NotePatch patch) {
        Native.noteEdit(handle, id, patch == null ? null : patch.toJson());
    }

    /**
     * Adds and removes tags of the record {@code id}, a reminder or a note; a tag both added and
     * removed is added.
     *
     * @param add the tags to add, or null for none
     * @param remove the tags to remove, or null for none
     */
    public void tag(String id, List<String> add, List<String> remove) {
        Native.recordTag(handle, id, add == null ? null : Json.write(add), remove == null ? null : Json.write(remove));
    }

    /** Deletes the record {@code id}: it stays as a tombstone, which {@link #restore} brings back. */
    public void delete(String id) {
        Native.recordDelete(handle, id);
    }

    /** Brings back the deleted record {@code id}. */
    public void restore(String id) {
        Native.recordRestore(handle, id);
    }

    /** Deletes every reminder, in one transaction; the deletes reach every replica. Returns how many. */
    public long deleteAllReminders() {
        return Native.deleteAll(handle, Native.REMINDERS);
    }

    /** Deletes every note, in one transaction; the deletes reach every replica. Returns how many. */
    public long deleteAllNotes() {
        return Native.deleteAll(handle, Native.NOTES);
    }

    /**
     * Purges the record {@code id}: erases its content (every value, title, text and tag) on every
     * replica, for good. It cannot be restored, edited or created again; purging it again changes
     * nothing.
     */
    public void purge(String id) {
        Native.recordPurge(handle, id);
    }

    /** Purges every reminder, deleted ones too, in one transaction. Returns how many. */
    public long purgeAllReminders() {
        return Native.purgeAll(handle, Native.REMINDERS);
    }

    /** Purges every note, deleted ones too, in one transaction. Returns how many. */
    public long purgeAllNotes() {
        return Native.purgeAll(handle, Native.NOTES);
    }

    // MARK: Typed reads

    /**
     * The reminders, in the order of {@code syncctl reminder list}: the open ones, or with
     * {@code includeCompletedAndDeleted} every one. Unmodifiable.
     */
    public List<Reminder> reminders(boolean includeCompletedAndDeleted) {
        int flags = includeCompletedAndDeleted ? Native.INCLUDE_COMPLETED | Native.INCLUDE_DELETED : 0;
        return Reminder.listFromJson(Native.reminders(handle, flags));
    }

    /**
     * The reminders that should alert at {@code at} (null: now): due by then, open, not deleted,
     * and not snoozed past it. Unmodifiable.
     */
    public List<Reminder> dueReminders(Instant at) {
        return Reminder.listFromJson(Native.dueReminders(handle, Instants.format(at)));
    }

    /** The notes, without or with the deleted ones. Unmodifiable. */
    public List<Note> notes(boolean includeDeleted) {
        return Note.listFromJson(Native.notes(handle, includeDeleted ? Native.INCLUDE_DELETED : 0));
    }

    /**
     * The reminder {@code id}, deleted or not.
     *
     * @throws ConcordException {@link ConcordException#NOT_FOUND} when no record has that id, and
     *     also when the record is a note (as the library's reminder writes refuse a note's id,
     *     with the same message)
     */
    public Reminder reminder(String id) {
        return Reminder.fromJson(record(id, "reminder"));
    }

    /**
     * The note {@code id}, deleted or not.
     *
     * @throws ConcordException {@link ConcordException#NOT_FOUND} when no record has that id, and
     *     also when the record is a reminder
     */
    public Note note(String id) {
        return Note.fromJson(record(id, "note"));
    }

    /** The object of the record {@code id}, which must be of the kind {@code kind}. */
    private JsonObject record(String id, String kind) {
        JsonObject record = JsonObject.parse(Native.show(handle, id), "a record");
        if (!kind.equals(record.string("kind"))) {
            throw new ConcordException(ConcordException.NOT_FOUND, "notFound", "no " + kind + " with id " + record.string("id"));
        }
        return record;
    }

    // MARK: JSON reads (SPEC.md §10, as `syncctl ... --json` prints them)

    /** The fields in conflict: a JSON array, "[]" when there is none. */
    public String conflictsJson() {
        return Native.conflicts(handle);
    }

    /** Every write to the record {@code id}, each with its standing: a JSON array. */
    public String historyJson(String id) {
        return Native.history(handle, id);
    }

    /** The replica, its name, its counts and its version vector ("versionVector"): a JSON object. */
    public String statusJson() {
        return Native.status(handle);
    }

    /**
     * The whole replicated state, as {@code syncctl dump} prints it (without the final line
     * feed): byte for byte the same on replicas that hold the same operations.
     */
    public String dump() {
        return Native.dump(handle);
    }

    // MARK: Observing

    /** Follows the changes committed from now on, by this process or any other. */
    public Observation changes(ChangeListener listener) {
        return changes(null, listener);
    }

    /**
     * Follows the changes committed since the version vector {@code sinceVersionVectorJson} (as
     * {@link Change#versionsJson()} or the status's "versionVector" give it; null: from now), by
     * this process or any other. The listener hears them on a thread of the library's; see
     * {@link ChangeListener}.
     *
     * @throws ConcordException {@link ConcordException#NOT_A_VERSION_VECTOR} or
     *     {@link ConcordException#INVALID_INPUT} for a bad version vector
     */
    public Observation changes(String sinceVersionVectorJson, ChangeListener listener) {
        if (listener == null) throw ConcordException.misuse("the listener is null");
        return subscribe(EventDispatcher.forChanges(listener),
                context -> Native.observe(handle, sinceVersionVectorJson, context));
    }

    // MARK: Exchange (each one exchange, as the syncctl command named; SPEC.md §17, "Exchange")

    /**
     * Merges the stores and bundles at {@code paths}, as {@code syncctl merge}: each is told
     * apart by its content, and every one is read and checked whole before anything is merged. An
     * encrypted bundle is opened with the store's sync key. The report's numbers:
     * "newOperations" (the operations new to this store) and "replicas" (how many replicas they
     * came from); its text "farFuture" (see {@link #syncFolder}).
     *
     * @param paths at least one path ({@link ConcordException#INVALID_INPUT} for none)
     */
    public Report merge(List<String> paths) {
        return Report.fromJson(Native.merge(handle, paths == null ? null : Json.write(paths)));
    }

    /**
     * Writes a bundle at {@code path} (replacing a file there) of the operations a replica that
     * holds {@code sinceVersionVectorJsonOrNull} lacks, as {@code syncctl export}. The report's
     * numbers: "bytes" (the file's size) and "operations"; its text "sha256" (of the file's bytes,
     * 64 hex digits).
     *
     * @param sinceVersionVectorJsonOrNull a version vector (as the status's "versionVector"), or
     *     null for every operation
     * @param encrypted whether to encrypt the bundle with the store's sync key
     *     ({@link ConcordException#NO_SYNC_KEY} when it has none)
     */
    public Report export(String path, String sinceVersionVectorJsonOrNull, boolean encrypted) {
        return Report.fromJson(Native.export(handle, path, sinceVersionVectorJsonOrNull, encrypted ? Native.EXPORT_ENCRYPTED : 0));
    }

    /**
     * One sync with the shared folder {@code folder} (kept in step by Dropbox, Syncthing, a network
     * drive), as {@code syncctl sync --folder}: imports what the store lacks, publishes what the
     * folder lacks. A bad file in the folder is skipped with a {@link Report#warnings() warning},
     * not an error. The report's numbers: "coalescedFiles", "importedFiles", "importedOperations",
     * "publishedOperations", "republishedOperations"; its texts "publishedFile" (the name of the
     * file written, or null) and "farFuture" (the instant of a timestamp more than a day ahead of
     * this machine's clock that was taken in, or null).
     *
     * @throws ConcordException {@link ConcordException#FOLDER} when the folder is missing or
     *     cannot be used
     */
    public Report syncFolder(String folder) {
        return Report.fromJson(Native.syncFolder(handle, folder));
    }

    /**
     * One two-way session with the peer that {@code syncctl serve} serves at {@code address}
     * ("HOST:PORT"; port 7420 when left out), as {@code syncctl sync --peer}. Both stores must
     * hold the same sync key ({@link #setKey}). The report's numbers: "bytesReceived",
     * "bytesSent", "milliseconds", "newOperations", "operationsReceived", "operationsSent"; its
     * text "farFuture". Blocks for the whole session.
     *
     * @throws ConcordException the session's failure, such as {@link ConcordException#CLOSED} (no
     *     peer there), {@link ConcordException#WRONG_KEY}, {@link ConcordException#NO_SYNC_KEY},
     *     or {@link ConcordException#INVALID_INPUT} for an address that is not HOST:PORT; the
     *     operations received before a failure are kept
     */
    public Report syncPeer(String address) {
        return Report.fromJson(Native.syncPeer(handle, address));
    }

    /**
     * One sync through the relay at {@code url} ("http://HOST:PORT" or "https://..."), as
     * {@code syncctl sync --relay}, with the store's sync key. The report's numbers:
     * "deletedFiles", "downloadedFiles", "uploadedFiles"; its {@link Report#folder()} (the sync
     * with the relay's mirror, as {@link #syncFolder} reports it) and {@link Report#warnings()}
     * (the files the relay listed that could not be brought).
     *
     * @throws ConcordException {@link ConcordException#INVALID_INPUT} for another kind of URL,
     *     {@link ConcordException#RELAY} when the relay refused or could not be reached
     */
    public Report syncRelay(String url) {
        return Report.fromJson(Native.syncRelay(handle, url));
    }

    // MARK: Keys (SPEC.md §15.1)

    /**
     * Makes a new random sync key for the store, and returns its text ("concord-key-1-...") to set
     * on the other stores that sync with this one ({@link #setKey}). Keep it secret: it opens what
     * the stores publish.
     *
     * @param replace whether to replace a key the store holds (its peers then need the new one)
     * @throws ConcordException {@link ConcordException#EXISTS} when the store holds a key and
     *     {@code replace} is false
     */
    public String generateKey(boolean replace) {
        return Native.keyGenerate(handle, replace ? Native.KEY_REPLACE : 0);
    }

    /**
     * Sets the store's sync key to the one whose text {@code keyText} is (made by
     * {@link #generateKey} or {@code syncctl key generate} on another store). Setting the key the
     * store holds changes nothing.
     *
     * @param replace whether to replace another key the store holds
     * @throws ConcordException {@link ConcordException#EXISTS} when the store holds another key and
     *     {@code replace} is false; for a text that is not a key, {@link ConcordException#WRONG_PREFIX},
     *     {@link ConcordException#UNSUPPORTED_FORMAT}, {@link ConcordException#BAD_CHARACTER},
     *     {@link ConcordException#WRONG_LENGTH} or {@link ConcordException#CHECKSUM_MISMATCH}, with
     *     nothing changed
     */
    public void setKey(String keyText, boolean replace) {
        Native.keySet(handle, keyText, replace ? Native.KEY_REPLACE : 0);
    }

    /**
     * The id of the store's sync key: 16 hex digits that name the key without revealing it (equal
     * on stores that hold the same key).
     *
     * @throws ConcordException {@link ConcordException#NO_SYNC_KEY} when the store has none
     */
    public String keyId() {
        return Native.keyId(handle);
    }

    // MARK: Live syncs (subscriptions: each runs until its Observation or the store is closed)

    /**
     * Keeps a live session with the peer at {@code address}, as {@code syncctl sync --peer
     * --live}: after each session's exchange, each side pushes what its store commits as it
     * lands; after a drop it connects again by itself (waiting 0.5 s, doubling up to 30 s). The
     * listener hears "live", "progress" and "disconnected" events ({@link LiveEvent}) on a thread
     * of the library's, and {@code onEnd} when a failure would recur (no sync key, a clash, a peer
     * of a newer protocol, the store's file replaced).
     *
     * @throws ConcordException {@link ConcordException#INVALID_INPUT} for an address that is not
     *     HOST:PORT; a peer that cannot be reached is an event, not an exception
     */
    public Observation syncPeerLive(String address, LiveListener listener) {
        if (listener == null) throw ConcordException.misuse("the listener is null");
        return subscribe(EventDispatcher.forLiveSync(listener), context -> Native.syncPeerLive(handle, address, context));
    }

    /**
     * Keeps the store and the relay at {@code url} in step, as {@code syncctl sync --relay URL
     * --live}: it syncs as the store or the relay's space changes. The listener hears "synced",
     * "failed" and "forked" events ({@link LiveEvent}); after "forked" the stream ends, and
     * {@code onEnd} hears null.
     *
     * @throws ConcordException {@link ConcordException#INVALID_INPUT} for another kind of URL
     */
    public Observation syncRelayLive(String url, LiveListener listener) {
        if (listener == null) throw ConcordException.misuse("the listener is null");
        return subscribe(EventDispatcher.forLiveSync(listener), context -> Native.syncRelayLive(handle, url, context));
    }

    // MARK: Subscriptions

    /** One of the C interface's calls that subscribe, given the context for its callback. */
    private interface Subscribe {
        /** Returns the subscription's handle. */
        long subscribe(long context);
    }

    /**
     * Subscribes {@code dispatcher} by {@code call}, and keeps the observation, whose context the
     * store's close deletes. The library looks after a subscription that races the store's close
     * (it is cancelled by the close, or the call fails with MISUSE); what is left here is when the
     * context may be deleted: only once no callback can be handed it.
     */
    private Observation subscribe(EventDispatcher dispatcher, Subscribe call) {
        long context = Native.newContext(dispatcher);
        long subscription;
        try {
            subscription = call.subscribe(context);
        } catch (RuntimeException | Error e) {
            // A call that failed made no subscription, or stopped the one it made before failing.
            Native.deleteContext(context);
            throw e;
        }
        Observation observation = new Observation(this, subscription, context, dispatcher);
        synchronized (lock) {
            if (state != CLOSED) {
                // While the store is OPEN, or CLOSING (then the close, once it returns, deletes the
                // context: a subscription the library made began before the close took the handle
                // out, so the close stops it).
                observations.add(observation);
                return observation;
            }
        }
        // The close returned after this subscription began: it stopped it already. Answered as
        // the library answers a subscription it refuses for a close under way.
        observation.storeClosed();
        throw ConcordException.misuse("the store was closed as the subscription began");
    }

    /** Whether {@link #close()} has begun (and was not refused). */
    boolean isClosing() {
        synchronized (lock) {
            return state != OPEN;
        }
    }

    /** Returns once no close of the store is under way. */
    void awaitClose() {
        synchronized (lock) {
            awaitNotClosing();
        }
    }

    /** Forgets an observation closed on its own. */
    void forget(Observation observation) {
        synchronized (lock) {
            observations.remove(observation);
        }
    }
}
