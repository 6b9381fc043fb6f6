package dev.concord;

import java.util.List;

/**
 * A failure of a Concord call: the library's status code, the code's stable name and the
 * library's one-line message (concord.h, "Status codes"; SPEC.md §12.1). Branch on {@link #code()}
 * or {@link #codeName()}, never on the message's words.
 */
public class ConcordException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** No store at the path a store is opened at. */
    public static final int MISSING = 1;
    /** A file is already at the path of a store or bundle to make, or the store holds another sync key. */
    public static final int EXISTS = 2;
    /** The file is not a Concord store. */
    public static final int NOT_A_STORE = 3;
    /** The store has a newer schema than this build of the library reads. */
    public static final int NEWER_SCHEMA = 4;
    /** The store is corrupt. */
    public static final int CORRUPT = 5;
    /** The store cannot be written (opened read-only, or a read-only file). */
    public static final int READ_ONLY = 6;
    /** A local change is refused: an empty title, a deleted record, a bad tag, a snooze out of range. */
    public static final int INVALID_CHANGE = 7;
    /** Input is refused: a draft or patch of the wrong shape, text that is not valid Unicode, a bad address. */
    public static final int INVALID_INPUT = 8;
    /** No record matches an id (of the kind asked for), or a text is not a record id. */
    public static final int NOT_FOUND = 9;
    /** Id digits match more than one record. */
    public static final int AMBIGUOUS = 10;
    /** A failure of the file system or SQLite, such as a store that stayed locked. */
    public static final int IO = 11;
    /** A copied store is written to. */
    public static final int COPIED = 12;
    /** Another process forked the store; open it again. */
    public static final int FORKED = 13;
    /** The store's path names another file than the one opened; open it again. */
    public static final int REPLACED = 14;
    /** Two stores share a replica id (one is a copy of the other): their operations clash. */
    public static final int CLASH = 15;
    /** The store's sync key was replaced while a write or a session made for the old one ran. */
    public static final int KEY_REPLACED = 16;
    /** A shared folder is missing, not a directory, of a newer layout, or cannot be used. */
    public static final int FOLDER = 17;
    /** A bundle is encrypted and the store has no sync key to open it. */
    public static final int ENCRYPTED_BUNDLE = 18;
    /** The store has no sync key, and the call needs one (a peer, a relay, an encrypted export). */
    public static final int NO_SYNC_KEY = 19;
    /** A text given as a version vector is not one. */
    public static final int NOT_A_VERSION_VECTOR = 20;
    /** A sync key's text does not start with "concord-key-". */
    public static final int WRONG_PREFIX = 21;
    /** A sync key's text is of a format this build does not know. */
    public static final int UNSUPPORTED_FORMAT = 22;
    /** A sync key's text holds a character outside its alphabet. */
    public static final int BAD_CHARACTER = 23;
    /** A sync key's text is too short or too long. */
    public static final int WRONG_LENGTH = 24;
    /** A sync key's text has a typo: its checksum does not match. */
    public static final int CHECKSUM_MISMATCH = 25;
    /** What answered at a peer's address is not a Concord peer. */
    public static final int NOT_A_PEER = 26;
    /** The peer speaks another protocol version. */
    public static final int VERSION_MISMATCH = 27;
    /** The peer does not hold this store's sync key. */
    public static final int WRONG_KEY = 28;
    /** The peer sent a frame over the size limit. */
    public static final int FRAME_TOO_LARGE = 29;
    /** A frame from the peer failed authentication. */
    public static final int AUTHENTICATION_FAILED = 30;
    /** The peer broke the protocol. */
    public static final int PROTOCOL_VIOLATION = 31;
    /** Both stores of a peer session have the same replica id. */
    public static final int SAME_REPLICA = 32;
    /** The peer ended the session with an error of its own. */
    public static final int PEER_ERROR = 33;
    /** The connection ended in the middle of a frame. */
    public static final int TRUNCATED = 34;
    /** The connection could not be made, or closed before the session finished. */
    public static final int CLOSED = 35;
    /** An operation is too large to travel to a peer. */
    public static final int OPERATION_TOO_LARGE = 36;
    /** A session used all its frame counters. */
    public static final int COUNTER_EXHAUSTED = 37;
    /** A peer session timed out. */
    public static final int TIMED_OUT = 38;
    /** This side ended a peer session (a store that could not be read or written, say). */
    public static final int LOCAL = 39;
    /** A relay refused a request, broke its protocol, or could not be reached. */
    public static final int RELAY = 40;
    /** The store's replica was retired by another replica: it neither writes nor syncs until forked. */
    public static final int RETIRED = 41;
    /** A call that breaks the interface's rules: a null where a value is required, a closed store. */
    public static final int MISUSE = 100;
    /**
     * The code of a failure that a report or a live sync's event names (by its name only) with a
     * name this binding does not know: one concord.h added later. {@link #codeName()} holds it.
     */
    public static final int UNKNOWN = -1;

    /**
     * The codes' names, at their numbers (1 to 41): SPEC.md §12.1's table, which only grows at its
     * end. A report gives a failure by its name alone; this turns it back into its number.
     */
    private static final List<String> NAMES = List.of("missing", "exists", "notAStore", "newerSchema", "corrupt",
            "readOnly", "invalidChange", "invalidInput", "notFound", "ambiguous", "io", "copied", "forked", "replaced",
            "clash", "keyReplaced", "folder", "encryptedBundle", "noSyncKey", "notAVersionVector", "wrongPrefix",
            "unsupportedFormat", "badCharacter", "wrongLength", "checksumMismatch", "notAPeer", "versionMismatch",
            "wrongKey", "frameTooLarge", "authenticationFailed", "protocolViolation", "sameReplica", "peerError",
            "truncated", "closed", "operationTooLarge", "counterExhausted", "timedOut", "local", "relay", "retired");

    private final int code;
    private final String codeName;

    /**
     * Makes the exception of a failure: the JNI glue calls this with what the library said.
     *
     * @param code the status code, such as {@link #NOT_FOUND}
     * @param codeName the code's stable name, such as "notFound"
     * @param message the library's message
     */
    public ConcordException(int code, String codeName, String message) {
        super(message);
        this.code = code;
        this.codeName = codeName;
    }

    /**
     * The code named {@code codeName} (such as {@link #CLOSED} for "closed"), or {@link #UNKNOWN}
     * for a name this binding does not know.
     */
    public static int codeOf(String codeName) {
        if ("misuse".equals(codeName)) return MISUSE;
        int index = NAMES.indexOf(codeName);
        return index < 0 ? UNKNOWN : index + 1;
    }

    /** The exception of a failure a report or an event holds: {"code": NAME, "message": TEXT}. */
    static ConcordException fromJson(JsonObject failure) {
        String name = failure.string("code");
        return new ConcordException(codeOf(name), name, failure.string("message"));
    }

    /** A {@link #MISUSE} failure that the binding itself detects. */
    static ConcordException misuse(String message) {
        return new ConcordException(MISUSE, "misuse", message);
    }

    /**
     * The status code: one of this class's constants, or a code concord.h added later
     * ({@link #UNKNOWN} when the library gave only a name this binding does not know).
     */
    public int code() {
        return code;
    }

    /** The code's stable name, as SPEC.md §12.1 gives it: "notFound", "misuse", ... */
    public String codeName() {
        return codeName;
    }

    /** The class, the code's name and the message, as "dev.concord.ConcordException (notFound): no reminder ...". */
    @Override
    public String toString() {
        return getClass().getName() + " (" + codeName + "): " + getMessage();
    }
}
