package dev.concord;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * A "widget": a program that shows a store that another process writes. It follows the store's
 * changes and, after each, prints the count of open reminders ("open N"), until there are at
 * least N; then it prints the store's dump as its last line and exits 0. Exits 1 if that does not
 * happen within SECONDS (default 120).
 *
 * <p>Usage: {@code java ... dev.concord.Widget STORE N [SECONDS]}
 */
public final class Widget {
    private Widget() {}

    /** Runs the widget. */
    public static void main(String[] arguments) throws InterruptedException {
        if (arguments.length < 2 || arguments.length > 3) {
            System.err.println("usage: Widget STORE N [SECONDS]");
            System.exit(64);
        }
        String path = arguments[0];
        int wanted = Integer.parseInt(arguments[1]);
        int seconds = arguments.length == 3 ? Integer.parseInt(arguments[2]) : 120;
        CountDownLatch enough = new CountDownLatch(1);
        try (ConcordStore store = ConcordStore.open(path)) {
            // Called on the library's thread after each change; and once here, for the reminders
            // written before the subscription.
            ChangeListener showCount = change -> {
                if (showOpenReminders(store) >= wanted) enough.countDown();
            };
            Observation observation = store.changes(showCount);
            if (showOpenReminders(store) >= wanted) enough.countDown();
            boolean seen = enough.await(seconds, TimeUnit.SECONDS);
            // Closed before the dump is printed: no "open N" line can come after it.
            observation.close();
            if (!seen) {
                System.err.println("widget: fewer than " + wanted + " open reminders after " + seconds + " s");
                System.exit(1);
            }
            System.out.println(store.dump());
        }
        System.exit(0);
    }

    /** Prints the count of open reminders, and returns it. */
    private static int showOpenReminders(ConcordStore store) {
        int open = store.reminders(false).size();
        System.out.println("open " + open);
        System.out.flush();
        return open;
    }
}
