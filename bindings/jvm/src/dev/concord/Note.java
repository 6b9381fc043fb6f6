package dev.concord;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;

/**
 * A note as the store holds it: an immutable value read from the library's note object (SPEC.md
 * §10). Read one with {@link ConcordStore#note(String)} or a list with
 * {@link ConcordStore#notes(boolean)}.
 */
public final class Note {
    private final String id;
    private final String title;
    private final String body;
    private final boolean pinned;
    private final List<String> tags;
    private final boolean deleted;
    private final boolean conflict;

    private Note(JsonObject json) {
        id = json.string("id");
        title = json.string("title");
        body = json.string("body");
        pinned = json.bool("pinned");
        tags = json.strings("tags");
        deleted = json.bool("deleted");
        conflict = json.bool("conflict");
    }

    /** The note of a note object; the caller has checked its "kind". */
    static Note fromJson(JsonObject json) {
        return new Note(json);
    }

    /** The notes of a list's JSON array. */
    static List<Note> listFromJson(String json) {
        List<Note> list = new ArrayList<>();
        for (JsonObject object : JsonObject.parseArray(json, "notes")) list.add(new Note(object));
        return Collections.unmodifiableList(list);
    }

    /** Its id: 32 lower-case hex digits. */
    public String id() {
        return id;
    }

    /** Its title. */
    public String title() {
        return title;
    }

    /** Its body; empty when it has none. */
    public String body() {
        return body;
    }

    /** Whether it is pinned. */
    public boolean pinned() {
        return pinned;
    }

    /** Its tags, in the order of their UTF-8 bytes; unmodifiable. */
    public List<String> tags() {
        return tags;
    }

    /** Whether it is deleted (a tombstone, which a restore brings back). */
    public boolean deleted() {
        return deleted;
    }

    /** Whether a field of it is in conflict (SPEC.md §5.1); never for a deleted note. */
    public boolean conflict() {
        return conflict;
    }

    /** Equal when every field is. */
    @Override
    public boolean equals(Object other) {
        if (!(other instanceof Note)) return false;
        Note that = (Note) other;
        return id.equals(that.id) && title.equals(that.title) && body.equals(that.body) && pinned == that.pinned
                && tags.equals(that.tags) && deleted == that.deleted && conflict == that.conflict;
    }

    /** A hash of every field. */
    @Override
    public int hashCode() {
        return Objects.hash(id, title, body, pinned, tags, deleted, conflict);
    }

    /** Its fields, for logs and test failures. */
    @Override
    public String toString() {
        return "Note{id=" + id + ", title=" + title + ", body=" + body + ", pinned=" + pinned + ", tags=" + tags
                + ", deleted=" + deleted + ", conflict=" + conflict + "}";
    }
}
