package dev.concord;

import java.io.File;

/**
 * Adds N reminders to a store, one write at a time, printing each one's id once it is committed
 * (durable: the write returned). For a test that kills the JVM in the middle, then checks that
 * the store passes {@code syncctl verify} and holds every id printed. Creates the store if there
 * is none.
 *
 * <p>Usage: {@code java ... dev.concord.Writer STORE N}
 */
public final class Writer {
    private Writer() {}

    /** Runs the writer. */
    public static void main(String[] arguments) {
        if (arguments.length != 2) {
            System.err.println("usage: Writer STORE N");
            System.exit(64);
        }
        String path = arguments[0];
        int count = Integer.parseInt(arguments[1]);
        try (ConcordStore store = new File(path).exists() ? ConcordStore.open(path) : ConcordStore.create(path, "writer")) {
            for (int i = 1; i <= count; i++) {
                String id = store.addReminder(new ReminderDraft("writer reminder " + i));
                System.out.println(id);
                System.out.flush();
            }
        }
    }
}
