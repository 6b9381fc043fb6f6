package dev.concord;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Changes to a note's fields, for {@link ConcordStore#editNote(String, NotePatch)}: a field not
 * mentioned is left as it is. A note's fields are never absent (an empty body is ""), so there is
 * nothing to remove: set the body to "" to empty it.
 */
public final class NotePatch {
    /** The patch's JSON object. */
    private final Map<String, Object> fields = new LinkedHashMap<>();

    /** An empty patch, which changes nothing until fields are set. */
    public NotePatch() {}

    /** Sets the title (not empty nor only white space). */
    public NotePatch title(String title) {
        return set("title", Objects.requireNonNull(title, "title"));
    }

    /** Sets the body. */
    public NotePatch body(String body) {
        return set("body", Objects.requireNonNull(body, "body: use \"\" for an empty body"));
    }

    /** Sets whether it is pinned. */
    public NotePatch pinned(boolean pinned) {
        return set("pinned", pinned);
    }

    /** The JSON object concord_note_edit takes (SPEC.md §17, "Writes"). */
    public String toJson() {
        return Json.write(fields);
    }

    /** The same as {@link #toJson()}. */
    @Override
    public String toString() {
        return toJson();
    }

    private NotePatch set(String key, Object value) {
        fields.put(key, value);
        return this;
    }
}
