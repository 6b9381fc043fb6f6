package dev.concord;

import java.io.File;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;

/**
 * What an app's calls cost through the binding: the same measures as {@code syncctl bench calls}
 * (SPEC.md §11), through the C interface and JNI. RUNS times, WRITES reminders added one at a time
 * (each its own transaction) to a new store DIR/writes-N.db; then RUNS times, every reminder of
 * LISTSTORE (completed and deleted ones included) listed as Reminder objects, from a store opened
 * read-only. Prints one JSON object of the medians, keys sorted:
 * {@code {"listMedianSeconds":0.123,"records":N,"runs":R,"writes":W,"writesPerSecond":S}}. On a
 * failure, prints one line on standard error and exits 1.
 *
 * <p>Usage: {@code java ... dev.concord.Bench DIR WRITES LISTSTORE RUNS}; LISTSTORE is commonly
 * the list.db that {@code syncctl bench calls --keep DIR} leaves, so that both list the same file.
 */
public final class Bench {
    private Bench() {}

    /** Runs the benchmark. */
    public static void main(String[] arguments) {
        if (arguments.length != 4) {
            System.err.println("usage: Bench DIR WRITES LISTSTORE RUNS");
            System.exit(64);
        }
        String directory = arguments[0];
        int writes = count(arguments[1], "WRITES");
        String listStore = arguments[2];
        int runs = count(arguments[3], "RUNS");
        try {
            List<Double> writeRates = new ArrayList<>();
            for (int run = 1; run <= runs; run++) {
                String path = directory + File.separator + "writes-" + run + ".db";
                try (ConcordStore store = ConcordStore.create(path, null)) {
                    long began = System.nanoTime();
                    for (int i = 0; i < writes; i++) store.addReminder(new ReminderDraft("reminder " + i));
                    writeRates.add(writes / seconds(began));
                }
            }
            List<Double> listSeconds = new ArrayList<>();
            long records;
            try (ConcordStore store = ConcordStore.openReadOnly(listStore)) {
                JsonObject reminders = JsonObject.of(JsonObject.parse(store.statusJson(), "the status").value("reminders"), "the status's reminders");
                records = reminders.number("open") + reminders.number("completed") + reminders.number("deleted");
                for (int run = 1; run <= runs; run++) {
                    long began = System.nanoTime();
                    int listed = store.reminders(true).size();
                    listSeconds.add(seconds(began));
                    if (listed != records) fail("listed " + listed + " reminders of " + records);
                }
            }
            // Written by hand, keys in order: the numbers as syncctl writes them (3 decimals, an
            // integer), which Json.write's Double-free writer has no form for.
            System.out.println(String.format(Locale.ROOT,
                    "{\"listMedianSeconds\":%.3f,\"records\":%d,\"runs\":%d,\"writes\":%d,\"writesPerSecond\":%d}",
                    median(listSeconds), records, runs, writes, (long) median(writeRates)));
        } catch (ConcordException e) {
            fail(e.codeName() + ": " + e.getMessage());
        }
    }

    /** {@code text} as a count of at least 1, which {@code what} names. */
    private static int count(String text, String what) {
        try {
            int count = Integer.parseInt(text);
            if (count >= 1) return count;
        } catch (NumberFormatException e) {
            // Refused below, as a count below 1 is.
        }
        fail(what + " must be a whole number of at least 1, not '" + text + "'");
        return 0;
    }

    private static double seconds(long began) {
        return (System.nanoTime() - began) / 1e9;
    }

    /** The median, as syncctl's: the mean of the two middle values of an even count. */
    private static double median(List<Double> values) {
        List<Double> sorted = new ArrayList<>(values);
        Collections.sort(sorted);
        int middle = sorted.size() / 2;
        return sorted.size() % 2 == 1 ? sorted.get(middle) : (sorted.get(middle - 1) + sorted.get(middle)) / 2;
    }

    private static void fail(String message) {
        System.err.println("bench: " + message);
        System.exit(1);
    }
}
