package dev.concord;

import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * Typed reads of the fields of a JSON object the library returned, for the value classes
 * ({@link Reminder}, {@link Note}, {@link Change}) to build themselves from. A field that is
 * missing or of another type than SPEC.md §10 gives it means this binding and the library
 * disagree: it is an IllegalStateException naming the object and the field, not a quiet default.
 */
final class JsonObject {
    private final Map<?, ?> fields;
    private final String what;

    private JsonObject(Map<?, ?> fields, String what) {
        this.fields = fields;
        this.what = what;
    }

    /** The object {@code value}, which {@code what} names in messages ("a reminder"). */
    static JsonObject of(Object value, String what) {
        if (!(value instanceof Map)) throw new IllegalStateException(what + " from the library is not a JSON object");
        return new JsonObject((Map<?, ?>) value, what);
    }

    /** Parses {@code json}, the text of an object. */
    static JsonObject parse(String json, String what) {
        return of(parseText(json, what), what);
    }

    /** Parses {@code json}, the text of an array, and gives each element as an object. */
    static List<JsonObject> parseArray(String json, String what) {
        Object value = parseText(json, "a list of " + what);
        if (!(value instanceof List)) throw new IllegalStateException("a list of " + what + " from the library is not a JSON array");
        List<JsonObject> objects = new ArrayList<>();
        for (Object element : (List<?>) value) objects.add(of(element, what));
        return objects;
    }

    private static Object parseText(String json, String what) {
        try {
            return Json.parse(json);
        } catch (IllegalArgumentException e) {
            throw new IllegalStateException(what + " from the library is " + e.getMessage(), e);
        }
    }

    /** Whether the object has the field {@code key}. */
    boolean has(String key) {
        return fields.containsKey(key);
    }

    /** The value of {@code key} as it is: a String, Long, Boolean, Map, List, or null. */
    Object value(String key) {
        if (!fields.containsKey(key)) throw wrong(key, "is missing");
        return fields.get(key);
    }

    String string(String key) {
        Object value = value(key);
        if (!(value instanceof String)) throw wrong(key, "is not a string");
        return (String) value;
    }

    /** A string, or null for JSON null. */
    String stringOrNull(String key) {
        return value(key) == null ? null : string(key);
    }

    boolean bool(String key) {
        Object value = value(key);
        if (!(value instanceof Boolean)) throw wrong(key, "is not true or false");
        return (Boolean) value;
    }

    /** An instant of SPEC.md §10, or null for JSON null. */
    Instant instantOrNull(String key) {
        String text = stringOrNull(key);
        if (text == null) return null;
        try {
            return Instants.parse(text);
        } catch (IllegalArgumentException e) {
            throw wrong(key, "is not an instant");
        }
    }

    /** An integer that fits in a long. */
    long number(String key) {
        Object value = value(key);
        if (!(value instanceof Long)) throw wrong(key, "is not an integer");
        return (Long) value;
    }

    /** A nested object, or null for JSON null. */
    JsonObject objectOrNull(String key) {
        Object value = value(key);
        if (value == null) return null;
        if (!(value instanceof Map)) throw wrong(key, "is not an object");
        return of(value, "'" + key + "' of " + what);
    }

    /** An array of objects, as an unmodifiable list. */
    List<JsonObject> objects(String key) {
        Object value = value(key);
        if (!(value instanceof List)) throw wrong(key, "is not an array");
        List<JsonObject> objects = new ArrayList<>();
        for (Object element : (List<?>) value) objects.add(of(element, "an element of '" + key + "' of " + what));
        return Collections.unmodifiableList(objects);
    }

    // MARK: Fields an app asks for by name
    //
    // A report's or an event's fields are read by the key an app gives: a key it lacks, or of
    // another type, is the app's mistake (a typo, a field of another kind of report), so these
    // throw IllegalArgumentException rather than IllegalStateException.

    /** The integer {@code key} an app asked for. */
    long askedNumber(String key) {
        Object value = asked(key);
        if (!(value instanceof Long)) throw new IllegalArgumentException("'" + key + "' of " + what + " is not an integer: " + Json.write(value));
        return (Long) value;
    }

    /** The string {@code key} an app asked for, or null when it is JSON null. */
    String askedText(String key) {
        Object value = asked(key);
        if (value != null && !(value instanceof String)) {
            throw new IllegalArgumentException("'" + key + "' of " + what + " is not a string: " + Json.write(value));
        }
        return (String) value;
    }

    private Object asked(String key) {
        if (!fields.containsKey(key)) throw new IllegalArgumentException(what + " has no '" + key + "': it has " + fields.keySet());
        return fields.get(key);
    }

    /** The canonical JSON text of the object (SPEC.md §10), as the library writes it. */
    String toJson() {
        return Json.write(fields);
    }

    /** An array of strings, as an unmodifiable list. */
    List<String> strings(String key) {
        Object value = value(key);
        if (!(value instanceof List)) throw wrong(key, "is not an array");
        List<String> strings = new ArrayList<>();
        for (Object element : (List<?>) value) {
            if (!(element instanceof String)) throw wrong(key, "is not an array of strings");
            strings.add((String) element);
        }
        return Collections.unmodifiableList(strings);
    }

    private IllegalStateException wrong(String key, String problem) {
        return new IllegalStateException("'" + key + "' of " + what + " from the library " + problem);
    }
}
