package dev.concord;

/**
 * A reminder's priority. The store holds an integer: 0 to 3 are the four named priorities, and
 * another integer, which only another program or a newer version writes, is {@link #OTHER}, whose
 * number {@link Reminder#priorityValue()} gives.
 */
public enum Priority {
    /** No priority (0), the default. */
    NONE("none", 0),
    /** Low (1). */
    LOW("low", 1),
    /** Medium (2). */
    MEDIUM("medium", 2),
    /** High (3). */
    HIGH("high", 3),
    /** An integer other than 0 to 3. */
    OTHER(null, -1);

    private final String jsonName;
    private final long value;

    Priority(String jsonName, long value) {
        this.jsonName = jsonName;
        this.value = value;
    }

    /** The priority of the stored integer {@code value}: {@link #OTHER} outside 0 to 3. */
    public static Priority ofValue(long value) {
        for (Priority priority : values()) {
            if (priority != OTHER && priority.value == value) return priority;
        }
        return OTHER;
    }

    /**
     * The stored integer of a named priority (0 to 3).
     *
     * @throws IllegalStateException for {@link #OTHER}, which has no one number
     */
    public long value() {
        if (this == OTHER) throw new IllegalStateException("Priority.OTHER stands for any other integer: see Reminder.priorityValue()");
        return value;
    }

    /** The name the JSON uses ("none", "low", "medium", "high"), or null for {@link #OTHER}. */
    String jsonName() {
        return jsonName;
    }

    /**
     * The stored integer of a reminder object's "priority", a name or an integer (SPEC.md §10).
     *
     * @throws IllegalStateException when it is neither
     */
    static long valueOfJson(Object json) {
        if (json instanceof Long) return (Long) json;
        for (Priority priority : values()) {
            if (priority != OTHER && priority.jsonName.equals(json)) return priority.value;
        }
        throw new IllegalStateException("'priority' of a reminder from the library is " + json
                + ", neither a priority's name nor an integer");
    }
}
