package dev.concord;

import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.time.temporal.ChronoUnit;

/**
 * Instants as Concord writes them (SPEC.md §10): "YYYY-MM-DDTHH:MM:SS.sssZ", in UTC, with
 * milliseconds always written (java.time's own {@code Instant.toString()} leaves out a zero
 * fraction and writes finer ones, which the library would refuse).
 */
final class Instants {
    private static final DateTimeFormatter FORMAT =
            DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);

    private Instants() {}

    /**
     * The text of {@code instant}, truncated to the millisecond, which is all a Concord instant
     * holds; null for null. An instant outside the years 1 to 9999 gives a text the library
     * refuses, with its own message.
     */
    static String format(Instant instant) {
        return instant == null ? null : FORMAT.format(instant.truncatedTo(ChronoUnit.MILLIS));
    }

    /** The instant of a text of the library's; IllegalArgumentException if it is not one. */
    static Instant parse(String text) {
        try {
            return Instant.parse(text);
        } catch (DateTimeParseException e) {
            throw new IllegalArgumentException("'" + text + "' is not an instant", e);
        }
    }
}
