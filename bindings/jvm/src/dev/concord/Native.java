package dev.concord;

/**
 * The native methods of the JNI glue (jni/concord_jni.c), one for each concord.h call the binding
 * makes. They take and return store handles as longs and text as Strings; every failure is thrown
 * as a {@link ConcordException}. Only the classes of this package call them: they are the raw C
 * interface, and {@link ConcordStore} is the Java one.
 */
final class Native {
    /** The oldest version of concord.h's interface that this binding can use. */
    private static final int REQUIRED_ABI_VERSION = 2;

    /** concord.h's flags and kinds, as the calls take them. */
    static final int OPEN_READ_ONLY = 1;
    static final int INCLUDE_COMPLETED = 1;
    static final int INCLUDE_DELETED = 2;
    static final int REMINDERS = 0;
    static final int NOTES = 1;
    static final int EXPORT_ENCRYPTED = 1;
    static final int KEY_REPLACE = 1;

    static {
        load();
    }

    private Native() {}

    /**
     * Loads libconcord_jni: from the full path the system property {@code concord.jni.path} gives,
     * or by name from java.library.path (on Android, from the app's own native libraries).
     * libconcord_jni links libConcordC, which the system's loader then finds by its rpath or
     * beside it.
     */
    private static void load() {
        String path = System.getProperty("concord.jni.path");
        if (path != null && !path.isEmpty()) {
            System.load(path);
        } else {
            System.loadLibrary("concord_jni");
        }
        int version = abiVersion();
        if (version < REQUIRED_ABI_VERSION) {
            throw new UnsatisfiedLinkError("libConcordC implements version " + version
                    + " of concord.h's interface; this binding needs version " + REQUIRED_ABI_VERSION + " or later");
        }
    }

    static native int abiVersion();

    static native long storeOpen(String path, int flags);

    static native long storeCreate(String path, String name);

    static native void storeClose(long store);

    static native String replicaId(long store);

    static native String reminderAdd(long store, String draftJson);

    static native void reminderEdit(long store, String id, String patchJson);

    static native void reminderComplete(long store, String id);

    static native void reminderReopen(long store, String id);

    static native void reminderSnooze(long store, String id, String until);

    static native String noteAdd(long store, String draftJson);

    static native void noteEdit(long store, String id, String patchJson);

    static native void recordTag(long store, String id, String addJson, String removeJson);

    static native void recordDelete(long store, String id);

    static native void recordRestore(long store, String id);

    static native long deleteAll(long store, int kind);

    static native void recordPurge(long store, String id);

    static native long purgeAll(long store, int kind);

    static native String reminders(long store, int flags);

    static native String dueReminders(long store, String at);

    static native String notes(long store, int flags);

    static native String show(long store, String id);

    static native String conflicts(long store);

    static native String history(long store, String id);

    static native String status(long store);

    static native String dump(long store);

    /** concord_merge: {@code pathsJson} a JSON array of paths; returns the report. */
    static native String merge(long store, String pathsJson);

    /** concord_export: returns the summary. */
    static native String export(long store, String path, String sinceJson, int flags);

    static native String syncFolder(long store, String folder);

    static native String syncPeer(long store, String address);

    static native String syncRelay(long store, String url);

    /** concord_key_generate: returns the new key's text. */
    static native String keyGenerate(long store, int flags);

    static native void keySet(long store, String key, int flags);

    static native String keyId(long store);

    /**
     * Makes the context a subscription's callback gets: a JNI global reference to
     * {@code dispatcher}, which keeps it alive until {@link #deleteContext} deletes the reference.
     */
    static native long newContext(EventDispatcher dispatcher);

    /** Deletes a context of {@link #newContext}; only once no callback can be given it. */
    static native void deleteContext(long context);

    /** concord_observe, with a context of {@link #newContext}; returns the subscription handle. */
    static native long observe(long store, String sinceJson, long context);

    /** concord_sync_peer_live, with a context of {@link #newContext}; returns the subscription handle. */
    static native long syncPeerLive(long store, String address, long context);

    /** concord_sync_relay_live, with a context of {@link #newContext}; returns the subscription handle. */
    static native long syncRelayLive(long store, String url, long context);

    /** concord_cancel (of any subscription): returns once no callback of it runs, nor will. */
    static native void cancel(long subscription);
}
