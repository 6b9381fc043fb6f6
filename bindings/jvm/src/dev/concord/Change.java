package dev.concord;

import java.util.List;

/**
 * One change a {@link ChangeListener} hears: the records whose operations were committed, by this
 * process or any other, since the change before (SPEC.md §7.1). A change may stand for several
 * commits; no operation is reported twice, and none is missed.
 */
public final class Change {
    private final String origin;
    private final List<String> records;
    private final String versionsJson;

    private Change(JsonObject json) {
        origin = json.string("origin");
        records = json.strings("records");
        versionsJson = Json.write(json.value("versions"));
    }

    /** The change of an event of concord_observe, {"origin","records","versions"}. */
    static Change fromJson(String json) {
        return new Change(JsonObject.parse(json, "a change"));
    }

    /**
     * Where its operations were written: "local" (all on this replica, by any process writing
     * this store), "merge" (all on other replicas), or "mixed".
     */
    public String origin() {
        return origin;
    }

    /**
     * The records it touched, each "KIND:ID" ("reminder:…", "note:…", "kind-N:…" for a kind this
     * version does not know), in record order; unmodifiable.
     */
    public List<String> records() {
        return records;
    }

    /**
     * The version vector it reports up to, as canonical JSON (replica id to sequence number):
     * give it to {@link ConcordStore#changes(String, ChangeListener)} to go on from here, missing
     * nothing, after the app restarts.
     */
    public String versionsJson() {
        return versionsJson;
    }

    /** Its origin and records, for logs. */
    @Override
    public String toString() {
        return "Change{" + origin + " " + records + "}";
    }
}
