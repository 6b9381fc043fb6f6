package dev.concord;

import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Changes to a reminder's fields, for {@link ConcordStore#editReminder(String, ReminderPatch)}.
 * A field not mentioned is left as it is; {@link #removeNotes()}, {@link #removeDue()} and
 * {@link #removeRepeat()} clear a field (the JSON null of SPEC.md §17). The setters take no null,
 * so that a null by mistake never removes a field: say so with a remove method.
 *
 * <pre>{@code
 * store.editReminder(id, new ReminderPatch().title("Buy oat milk").removeDue());
 * }</pre>
 */
public final class ReminderPatch {
    /** The patch's JSON object; a key mapped to null removes that field. */
    private final Map<String, Object> fields = new LinkedHashMap<>();

    /** An empty patch, which changes nothing until fields are set. */
    public ReminderPatch() {}

    /** Sets the title (not empty nor only white space). */
    public ReminderPatch title(String title) {
        return set("title", Objects.requireNonNull(title, "title"));
    }

    /** Sets the notes. */
    public ReminderPatch notes(String notes) {
        return set("notes", Objects.requireNonNull(notes, "notes: use removeNotes() to remove them"));
    }

    /** Removes the notes. */
    public ReminderPatch removeNotes() {
        return set("notes", null);
    }

    /** Sets when it is due (kept to the millisecond). */
    public ReminderPatch due(Instant due) {
        return set("due", Instants.format(Objects.requireNonNull(due, "due: use removeDue() to remove it")));
    }

    /** Removes the due date. */
    public ReminderPatch removeDue() {
        return set("due", null);
    }

    /**
     * Sets the priority.
     *
     * @throws IllegalArgumentException for {@link Priority#OTHER}: give its number to {@link #priorityValue}
     */
    public ReminderPatch priority(Priority priority) {
        if (priority == Priority.OTHER) throw new IllegalArgumentException("Priority.OTHER has no number: use priorityValue(long)");
        return set("priority", Objects.requireNonNull(priority, "priority").jsonName());
    }

    /** Sets the priority as the stored integer: 0 to 3 for the named ones, or any other. */
    public ReminderPatch priorityValue(long value) {
        return set("priority", value);
    }

    /** Sets the repeat rule: "hourly", "daily", "weekly" or "monthly". */
    public ReminderPatch repeat(String rule) {
        return set("repeat", Objects.requireNonNull(rule, "repeat: use removeRepeat() to remove it"));
    }

    /** Removes the repeat rule. */
    public ReminderPatch removeRepeat() {
        return set("repeat", null);
    }

    /** The JSON object concord_reminder_edit takes (SPEC.md §17, "Writes"). */
    public String toJson() {
        return Json.write(fields);
    }

    /** The same as {@link #toJson()}. */
    @Override
    public String toString() {
        return toJson();
    }

    private ReminderPatch set(String key, Object value) {
        fields.put(key, value);
        return this;
    }
}
