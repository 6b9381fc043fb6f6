package dev.concord;

import java.io.File;

/**
 * Syncs a store once, the way an app's "sync now" button would: creates the store if there is
 * none (else opens it), sets its sync key, adds one reminder titled "from the JVM", and makes one
 * sync through a shared folder or with a peer that {@code syncctl serve} serves. Prints the sync's
 * report on one line, then the store's dump as its last line. On a failure, prints one line on
 * standard error and exits 1.
 *
 * <p>Usage: {@code java ... dev.concord.Sync STORE KEY folder FOLDER} or
 * {@code java ... dev.concord.Sync STORE KEY peer HOST:PORT}
 */
public final class Sync {
    private Sync() {}

    /** Runs the sync. */
    public static void main(String[] arguments) {
        if (arguments.length != 4 || !(arguments[2].equals("folder") || arguments[2].equals("peer"))) {
            System.err.println("usage: Sync STORE KEY folder FOLDER | Sync STORE KEY peer HOST:PORT");
            System.exit(64);
        }
        String path = arguments[0];
        try (ConcordStore store = new File(path).exists() ? ConcordStore.open(path) : ConcordStore.create(path, "jvm")) {
            // Not replacing: a store that holds another key is refused, and the same key again is fine.
            store.setKey(arguments[1], false);
            store.addReminder(new ReminderDraft("from the JVM"));
            Report report = arguments[2].equals("folder") ? store.syncFolder(arguments[3]) : store.syncPeer(arguments[3]);
            System.out.println(report.json());
            System.out.println(store.dump());
        } catch (ConcordException e) {
            System.err.println("sync: " + e.codeName() + ": " + e.getMessage());
            System.exit(1);
        }
    }
}
