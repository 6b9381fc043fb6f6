package dev.concord;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A new note, for {@link ConcordStore#addNote(NoteDraft)}: a title, and whichever other fields are
 * set. A field not set (or set to null) is left out: an empty body, not pinned, no tags.
 *
 * <pre>{@code
 * String id = store.addNote(new NoteDraft("Ideas").body("one\ntwo").pinned(true));
 * }</pre>
 */
public final class NoteDraft {
    /** The draft's JSON object (concord_note_add's keys). */
    private final Map<String, Object> fields = new LinkedHashMap<>();

    /** A draft with the title {@code title}, which must not be empty nor only white space. */
    public NoteDraft(String title) {
        fields.put("title", title);
    }

    /** Sets its body; null for an empty one. */
    public NoteDraft body(String body) {
        return set("body", body);
    }

    /** Sets whether it is pinned. */
    public NoteDraft pinned(boolean pinned) {
        return set("pinned", pinned);
    }

    /** Sets its tags (each non-empty, without control characters); null for none. */
    public NoteDraft tags(List<String> tags) {
        return set("tags", tags == null ? null : new ArrayList<>(tags));
    }

    /** The JSON object concord_note_add takes (SPEC.md §17, "Writes"). */
    public String toJson() {
        return Json.write(fields);
    }

    /** The same as {@link #toJson()}. */
    @Override
    public String toString() {
        return toJson();
    }

    private NoteDraft set(String key, Object value) {
        if (value == null) {
            fields.remove(key);
        } else {
            fields.put(key, value);
        }
        return this;
    }
}
