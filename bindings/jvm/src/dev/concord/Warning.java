package dev.concord;

/**
 * A file that a sync skipped, in a {@link Report}'s {@link Report#warnings()}: a bundle in a shared
 * folder that is damaged or not a bundle, a file a relay listed that could not be brought. The sync
 * went on without it; the code says why.
 */
public final class Warning {
    private final String code;
    private final String message;

    private Warning(String code, String message) {
        this.code = code;
        this.message = message;
    }

    /** The warning of a report's {"code","message"} object. */
    static Warning fromJson(JsonObject json) {
        return new Warning(json.string("code"), json.string("message"));
    }

    /**
     * The code's stable name, as SPEC.md §12.1 gives it ("invalidInput", "clash", ...): the
     * {@link ConcordException#codeName()} an error of that code would have. Branch on it, not on
     * the message; {@link ConcordException#codeOf(String)} gives its number.
     */
    public String code() {
        return code;
    }

    /** The library's one-line message, naming the file. */
    public String message() {
        return message;
    }

    /** The code and the message, as "invalidInput: ...". */
    @Override
    public String toString() {
        return code + ": " + message;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof Warning && ((Warning) other).code.equals(code) && ((Warning) other).message.equals(message);
    }

    @Override
    public int hashCode() {
        return code.hashCode() * 31 + message.hashCode();
    }
}
