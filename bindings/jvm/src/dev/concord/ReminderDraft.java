package dev.concord;

import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A new reminder, for {@link ConcordStore#addReminder(ReminderDraft)}: a title, and whichever other
 * fields are set. A field not set (or set to null) is left out, and the reminder has the default:
 * no notes, no due date, priority none, no tags, no repeat rule.
 *
 * <pre>{@code
 * String id = store.addReminder(new ReminderDraft("Buy milk").due(tomorrow).priority(Priority.HIGH));
 * }</pre>
 */
public final class ReminderDraft {
    /** The draft's JSON object (concord_reminder_add's keys), in the order the fields were set. */
    private final Map<String, Object> fields = new LinkedHashMap<>();

    /**
     * A draft with the title {@code title}, which must not be empty nor only white space (the
     * library refuses that with {@link ConcordException#INVALID_CHANGE}).
     */
    public ReminderDraft(String title) {
        fields.put("title", title);
    }

    /** Sets its notes; null for none. */
    public ReminderDraft notes(String notes) {
        return set("notes", notes);
    }

    /** Sets when it is due (kept to the millisecond, in the years 1 to 9999); null for never. */
    public ReminderDraft due(Instant due) {
        return set("due", Instants.format(due));
    }

    /**
     * Sets its priority; null for none.
     *
     * @throws IllegalArgumentException for {@link Priority#OTHER}: give its number to {@link #priorityValue}
     */
    public ReminderDraft priority(Priority priority) {
        if (priority == Priority.OTHER) throw new IllegalArgumentException("Priority.OTHER has no number: use priorityValue(long)");
        return set("priority", priority == null ? null : priority.jsonName());
    }

    /** Sets its priority as the stored integer: 0 to 3 for the named ones, or any other. */
    public ReminderDraft priorityValue(long value) {
        return set("priority", value);
    }

    /** Sets its tags (each non-empty, without control characters); null for none. */
    public ReminderDraft tags(List<String> tags) {
        return set("tags", tags == null ? null : new ArrayList<>(tags));
    }

    /** Sets its repeat rule: "hourly", "daily", "weekly" or "monthly" (on the due date's day); null for none. */
    public ReminderDraft repeat(String rule) {
        return set("repeat", rule);
    }

    /** The JSON object concord_reminder_add takes (SPEC.md §17, "Writes"). */
    public String toJson() {
        return Json.write(fields);
    }

    /** The same as {@link #toJson()}. */
    @Override
    public String toString() {
        return toJson();
    }

    private ReminderDraft set(String key, Object value) {
        if (value == null) {
            fields.remove(key);
        } else {
            fields.put(key, value);
        }
        return this;
    }
}
