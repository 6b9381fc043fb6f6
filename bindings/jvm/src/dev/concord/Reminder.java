package dev.concord;

import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;

/**
 * A reminder as the store holds it: an immutable value read from the library's reminder object
 * (SPEC.md §10). Read one with {@link ConcordStore#reminder(String)} or a list with
 * {@link ConcordStore#reminders(boolean)}; change one through {@link ConcordStore}'s writes.
 */
public final class Reminder {
    private final String id;
    private final String title;
    private final String notes;
    private final Instant due;
    private final long priorityValue;
    private final boolean completed;
    private final Instant completedAt;
    private final Instant snoozedUntil;
    private final String repeat;
    private final List<String> tags;
    private final boolean deleted;
    private final boolean conflict;

    private Reminder(JsonObject json) {
        id = json.string("id");
        title = json.string("title");
        notes = json.stringOrNull("notes");
        due = json.instantOrNull("due");
        priorityValue = Priority.valueOfJson(json.value("priority"));
        completed = json.bool("completed");
        completedAt = json.instantOrNull("completedAt");
        snoozedUntil = json.instantOrNull("snoozedUntil");
        repeat = json.stringOrNull("repeat");
        tags = json.strings("tags");
        deleted = json.bool("deleted");
        conflict = json.bool("conflict");
    }

    /** The reminder of a reminder object; the caller has checked its "kind". */
    static Reminder fromJson(JsonObject json) {
        return new Reminder(json);
    }

    /** The reminders of a list's JSON array. */
    static List<Reminder> listFromJson(String json) {
        List<Reminder> list = new ArrayList<>();
        for (JsonObject object : JsonObject.parseArray(json, "reminders")) list.add(new Reminder(object));
        return Collections.unmodifiableList(list);
    }

    /** Its id: 32 lower-case hex digits. */
    public String id() {
        return id;
    }

    /** Its title (never empty when written on this replica; a merge may bring an empty one). */
    public String title() {
        return title;
    }

    /** Its notes, or null when it has none. */
    public String notes() {
        return notes;
    }

    /** When it is due, or null. */
    public Instant due() {
        return due;
    }

    /** Its priority; {@link Priority#OTHER} for an integer outside 0 to 3. */
    public Priority priority() {
        return Priority.ofValue(priorityValue);
    }

    /** Its priority's stored integer: 0 to 3 for the named ones, any other for {@link Priority#OTHER}. */
    public long priorityValue() {
        return priorityValue;
    }

    /** Whether it is completed. */
    public boolean completed() {
        return completed;
    }

    /** When it was completed, or null when it is open. */
    public Instant completedAt() {
        return completedAt;
    }

    /** When its snooze ends, or null when it is not snoozed. */
    public Instant snoozedUntil() {
        return snoozedUntil;
    }

    /** Its repeat rule ("hourly", "daily", "weekly", "monthly:D"), or null when it does not repeat. */
    public String repeat() {
        return repeat;
    }

    /** Its tags, in the order of their UTF-8 bytes; unmodifiable. */
    public List<String> tags() {
        return tags;
    }

    /** Whether it is deleted (a tombstone, which a restore brings back). */
    public boolean deleted() {
        return deleted;
    }

    /** Whether a field of it is in conflict (SPEC.md §5.1); never for a deleted reminder. */
    public boolean conflict() {
        return conflict;
    }

    /** Equal when every field is. */
    @Override
    public boolean equals(Object other) {
        if (!(other instanceof Reminder)) return false;
        Reminder that = (Reminder) other;
        return id.equals(that.id) && title.equals(that.title) && Objects.equals(notes, that.notes)
                && Objects.equals(due, that.due) && priorityValue == that.priorityValue && completed == that.completed
                && Objects.equals(completedAt, that.completedAt) && Objects.equals(snoozedUntil, that.snoozedUntil)
                && Objects.equals(repeat, that.repeat) && tags.equals(that.tags) && deleted == that.deleted
                && conflict == that.conflict;
    }

    /** A hash of every field. */
    @Override
    public int hashCode() {
        return Objects.hash(id, title, notes, due, priorityValue, completed, completedAt, snoozedUntil, repeat, tags,
                deleted, conflict);
    }

    /** Its fields, for logs and test failures. */
    @Override
    public String toString() {
        return "Reminder{id=" + id + ", title=" + title + ", notes=" + notes + ", due=" + due + ", priority="
                + priorityValue + ", completed=" + completed + ", completedAt=" + completedAt + ", snoozedUntil="
                + snoozedUntil + ", repeat=" + repeat + ", tags=" + tags + ", deleted=" + deleted + ", conflict="
                + conflict + "}";
    }
}
