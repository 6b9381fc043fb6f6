package dev.concord;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * What one exchange did: the report of {@link ConcordStore#merge}, {@link ConcordStore#export},
 * {@link ConcordStore#syncFolder}, {@link ConcordStore#syncPeer} or {@link ConcordStore#syncRelay},
 * over the JSON object the library returned (SPEC.md §17, "Exchange"). Immutable.
 *
 * <p>Its fields are read by name, as the C interface documents them: {@code number("newOperations")},
 * {@code text("farFuture")}. Reading them by name, rather than through one method each, keeps one
 * class for every report, and a field a later library adds readable without a new binding.
 */
public final class Report {
    private final String json;
    private final JsonObject object;

    private Report(String json, JsonObject object) {
        this.json = json;
        this.object = object;
    }

    /** The report of the library's JSON text {@code json}. */
    static Report fromJson(String json) {
        return new Report(json, JsonObject.parse(json, "the report"));
    }

    /** The report nested in another report or an event, as an object. */
    static Report of(JsonObject object) {
        return new Report(object.toJson(), object);
    }

    /**
     * The report's JSON object: the exact text the library returned (canonical JSON, SPEC.md §10).
     * For a report nested in another ({@link #folder()}, {@link LiveEvent#report()}), its canonical
     * JSON text, as the library writes it.
     */
    public String json() {
        return json;
    }

    /**
     * The integer field {@code key}, such as "newOperations" or "bytes".
     *
     * @throws IllegalArgumentException when the report has no field {@code key}, or it is not an
     *     integer
     */
    public long number(String key) {
        return object.askedNumber(key);
    }

    /**
     * The text field {@code key}, such as "sha256", "publishedFile" or "farFuture" (an instant of
     * SPEC.md §10); null when it is JSON null.
     *
     * @throws IllegalArgumentException when the report has no field {@code key}, or it is neither a
     *     string nor null
     */
    public String text(String key) {
        return object.askedText(key);
    }

    /**
     * The files the exchange skipped, each with the code and message of why (a folder's or a
     * relay's report); an empty list for a report without warnings. Unmodifiable.
     */
    public List<Warning> warnings() {
        // Read on each call rather than kept: most reports have none, and most apps never ask.
        Object value = object.has("warnings") ? object.value("warnings") : null;
        if (value == null) return Collections.emptyList();
        List<Warning> warnings = new ArrayList<>();
        for (JsonObject warning : object.objects("warnings")) warnings.add(Warning.fromJson(warning));
        return Collections.unmodifiableList(warnings);
    }

    /**
     * The report of the sync with the relay's mirror folder, nested in a relay sync's report
     * (its "folder"); null for another report.
     */
    public Report folder() {
        if (!object.has("folder")) return null;
        JsonObject folder = object.objectOrNull("folder");
        return folder == null ? null : of(folder);
    }

    /** Its JSON text. */
    @Override
    public String toString() {
        return json;
    }

    /** Whether {@code other} is a report of the same JSON text. */
    @Override
    public boolean equals(Object other) {
        return other instanceof Report && ((Report) other).json.equals(json);
    }

    @Override
    public int hashCode() {
        return json.hashCode();
    }
}
