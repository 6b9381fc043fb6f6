package dev.concord;

import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.List;

/**
 * The example of README.md's section for Android and JVM developers, run by JVMBindingTests as it
 * is: it makes a store, writes a reminder, hears the change, and lists what the store holds.
 *
 * <p>Usage: {@code java ... dev.concord.Hello STORE}
 */
public final class Hello {
    private Hello() {}

    /** Runs the example. */
    public static void main(String[] arguments) throws Exception {
        try (ConcordStore store = ConcordStore.create(arguments[0], "phone")) {
            // A change by this process or any other (a widget's, syncctl's) is heard on a library thread.
            Observation changes = store.changes(change -> System.out.println("changed: " + change.records()));
            String id = store.addReminder(new ReminderDraft("Call the dentist")
                    .due(Instant.now().plus(1, ChronoUnit.DAYS))
                    .priority(Priority.HIGH)
                    .tags(List.of("health")));
            store.completeReminder(id);
            for (Reminder reminder : store.reminders(true)) {
                System.out.println(reminder.title() + (reminder.completed() ? " (done)" : ""));
            }
            Thread.sleep(500);
            changes.close();
        } catch (ConcordException error) {
            System.err.println(error.codeName() + ": " + error.getMessage());
            System.exit(1);
        }
    }
}
