package dev.concord;

import static dev.concord.Checks.check;
import static dev.concord.Checks.equal;
import static dev.concord.Checks.fails;
import static dev.concord.Checks.part;
import static dev.concord.Checks.throwsA;
import static dev.concord.Checks.waitFor;

import java.io.File;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The binding's test: a store in DIRECTORY, every call on it through the Java API, against the
 * real libConcordC. Progress and failures go to standard error; the last line on standard output
 * is the store's final dump, for the caller to compare with {@code syncctl --store
 * DIRECTORY/store.db dump}. Exits 1 if a check failed.
 *
 * <p>Usage: {@code java -Djava.library.path=OUTDIR -cp OUTDIR/classes:OUTDIR/test-classes
 * dev.concord.BindingTest DIRECTORY}
 */
public final class BindingTest {
    private static final String UNKNOWN_ID = "0123456789abcdef0123456789abcdef";

    private BindingTest() {}

    /** Runs every part, prints the dump, and exits 0 or 1. */
    public static void main(String[] arguments) throws Exception {
        if (arguments.length != 1) {
            System.err.println("usage: BindingTest DIRECTORY");
            System.exit(64);
        }
        String directory = arguments[0];
        String path = directory + "/store.db";

        part("JSON reader and writer", BindingTest::json);
        part("drafts and patches as JSON", BindingTest::draftsAndPatches);
        part("opening and creating", () -> openingAndCreating(directory, path));
        ConcordStore store = ConcordStore.create(path, "jvm test");
        try {
            part("reminders: writes and typed reads", () -> reminders(store));
            part("notes: writes and typed reads", () -> notes(store));
            part("unicode", () -> unicode(store));
            part("refusals", () -> refusals(store));
            part("JSON reads", () -> jsonReads(store));
            part("a listener hears changes from another thread", () -> listening(store));
            part("a listener that throws", () -> throwingListener(store));
            part("a listener closing its own observation or its store", () -> listenerMisuse(store));
            part("changes since a version vector", () -> changesSince(store));
            part("read-only", () -> readOnly(store, path));
            part("8 threads of writes, 2 of reads, at once", () -> stress(store));
        } finally {
            part("closing", () -> closing(store));
        }
        part("delete all", () -> deleteAll(directory));
        part("purges", () -> purges(directory));
        part("a store replaced under its observer", () -> replaced(directory));
        part("subscribing while the store closes", () -> subscribingWhileClosing(directory));
        part("closing from many threads at once", () -> closingFromManyThreads(directory));
        part("sync keys", () -> keys(directory));
        part("export, then merge", () -> exportAndMerge(directory));
        part("sync through a shared folder", () -> folderSync(directory));
        part("peer and relay syncs that fail", () -> failedSyncs(directory));
        part("live syncs without a peer", () -> liveSyncs(directory));

        // The final dump, read again from the file: the caller compares it with syncctl's.
        String dump = null;
        try (ConcordStore reader = ConcordStore.openReadOnly(path)) {
            dump = reader.dump();
        }
        System.err.println("BindingTest: " + Checks.made() + " checks, " + Checks.failures() + " failed");
        System.out.println(dump);
        System.exit(Checks.failures() == 0 ? 0 : 1);
    }

    // MARK: JSON

    private static void json() {
        equal("😀", Json.parse("\"\\ud83d\\ude00\""), "an escaped surrogate pair");
        equal("é😀\u0000", Json.parse("\"é😀\\u0000\""), "raw UTF-16 and an escaped NUL");
        throwsA(IllegalArgumentException.class, "a high surrogate alone", () -> Json.parse("\"\\ud83d\""));
        throwsA(IllegalArgumentException.class, "a low surrogate alone", () -> Json.parse("\"\\ude00x\""));
        throwsA(IllegalArgumentException.class, "a duplicate key", () -> Json.parse("{\"a\":1,\"a\":2}"));
        throwsA(IllegalArgumentException.class, "a second value", () -> Json.parse("{} {}"));
        throwsA(IllegalArgumentException.class, "a raw control character", () -> Json.parse("\"a\nb\""));
        throwsA(IllegalArgumentException.class, "a leading zero", () -> Json.parse("01"));
        equal(-9223372036854775808L, Json.parse("-9223372036854775808"), "the smallest long");
        equal(new BigDecimal("18446744073709551615"), Json.parse("18446744073709551615"), "an integer beyond a long");
        Map<String, Object> object = new HashMap<>();
        object.put("z", 1L);
        object.put("é", Arrays.asList(true, null, "a\u0001\"\\"));
        object.put("😀", "x");
        object.put("\uFFFD", "y");
        // Keys by their UTF-8 bytes: U+FFFD (EF BF BD) before U+1F600 (F0 9F 98 80), which
        // UTF-16's order would put the other way round.
        equal("{\"z\":1,\"é\":[true,null,\"a\\u0001\\\"\\\\\"],\"\uFFFD\":\"y\",\"😀\":\"x\"}", Json.write(object),
                "canonical JSON");
    }

    private static void draftsAndPatches() {
        ReminderDraft draft = new ReminderDraft("Buy milk").notes("two").due(Instant.parse("2026-12-01T09:30:00Z"))
                .priority(Priority.HIGH).tags(Arrays.asList("b", "a")).repeat("weekly");
        equal("{\"due\":\"2026-12-01T09:30:00.000Z\",\"notes\":\"two\",\"priority\":\"high\",\"repeat\":\"weekly\","
                + "\"tags\":[\"b\",\"a\"],\"title\":\"Buy milk\"}", draft.toJson(), "a full reminder draft");
        equal("{\"title\":\"x\"}", new ReminderDraft("x").notes(null).due(null).toJson(), "nulls leave a draft's fields out");
        equal("{\"priority\":-7,\"title\":\"x\"}", new ReminderDraft("x").priorityValue(-7).toJson(), "an integer priority");
        equal("{\"due\":\"2026-01-02T03:04:05.678Z\"}",
                new ReminderPatch().due(Instant.parse("2026-01-02T03:04:05.678999Z")).toJson(), "an instant kept to the millisecond");
        equal("{\"due\":null,\"notes\":null,\"repeat\":null,\"title\":\"t\"}",
                new ReminderPatch().title("t").removeNotes().removeDue().removeRepeat().toJson(), "removals are nulls");
        equal("{}", new ReminderPatch().toJson(), "an empty patch");
        equal("{\"body\":\"a\\u000ab\",\"pinned\":true,\"title\":\"n\"}",
                new NoteDraft("n").body("a\nb").pinned(true).toJson(), "a note draft");
        equal("{\"body\":\"\",\"pinned\":false}", new NotePatch().pinned(false).body("").toJson(), "a note patch");
        throwsA(IllegalArgumentException.class, "Priority.OTHER in a draft", () -> new ReminderDraft("x").priority(Priority.OTHER));
        throwsA(NullPointerException.class, "a null in a patch", () -> new ReminderPatch().notes(null));
        equal(Priority.OTHER, Priority.ofValue(9), "an unknown priority");
        equal(Priority.MEDIUM, Priority.ofValue(2), "priority 2");
    }

    // MARK: Stores

    private static void openingAndCreating(String directory, String path) {
        fails(ConcordException.MISSING, "missing", "no store at", "opening a missing store",
                () -> ConcordStore.open(directory + "/none.db"));
        fails(ConcordException.NOT_A_STORE, "notAStore", "directory", "opening a directory",
                () -> ConcordStore.open(directory));
        fails(ConcordException.MISUSE, "misuse", "NULL", "opening a null path", () -> ConcordStore.open(null));
        fails(ConcordException.INVALID_INPUT, "invalidInput", "U+0000", "a path holding NUL",
                () -> ConcordStore.open(directory + "/a\u0000b.db"));
        check(ConcordStore.interfaceVersion() >= 1, "interface version " + ConcordStore.interfaceVersion());
        try (ConcordStore scratch = ConcordStore.create(directory + "/scratch.db", null)) {
            check(scratch.replicaId().matches("[0-9a-f]{32}"), "replica id " + scratch.replicaId());
            fails(ConcordException.EXISTS, "exists", "already exists", "creating over a store",
                    () -> ConcordStore.create(directory + "/scratch.db", "again"));
        }
        check(!new File(path).exists(), "the test's store exists before the test made it");
    }

    private static void reminders(ConcordStore store) {
        Instant due = Instant.parse("2026-12-01T09:30:00.123Z");
        String milk = store.addReminder(new ReminderDraft("Buy milk").notes("2 litres").due(due).priority(Priority.HIGH)
                .tags(Arrays.asList("home", "errand")).repeat("weekly"));
        check(milk.matches("[0-9a-f]{32}"), "reminder id " + milk);
        Reminder read = store.reminder(milk);
        equal(milk, read.id(), "id");
        equal("Buy milk", read.title(), "title");
        equal("2 litres", read.notes(), "notes");
        equal(due, read.due(), "due");
        equal(Priority.HIGH, read.priority(), "priority");
        equal(3L, read.priorityValue(), "priority's value");
        equal(false, read.completed(), "completed");
        equal(null, read.completedAt(), "completedAt");
        equal(null, read.snoozedUntil(), "snoozedUntil");
        equal("weekly", read.repeat(), "repeat");
        equal(Arrays.asList("errand", "home"), read.tags(), "tags, in byte order");
        equal(false, read.deleted(), "deleted");
        equal(false, read.conflict(), "conflict");
        throwsA(UnsupportedOperationException.class, "tags are unmodifiable", () -> read.tags().add("x"));

        // Completing a repeating reminder moves it to its next occurrence.
        store.completeReminder(milk);
        Reminder next = store.reminder(milk);
        equal(due.plus(7, ChronoUnit.DAYS), next.due(), "a weekly reminder completed moves a week on");
        equal(false, next.completed(), "a repeating reminder stays open");

        store.editReminder(milk, new ReminderPatch().title("Buy oat milk").removeNotes().removeRepeat().priority(Priority.LOW));
        Reminder edited = store.reminder(milk);
        equal("Buy oat milk", edited.title(), "edited title");
        equal(null, edited.notes(), "notes removed");
        equal(null, edited.repeat(), "repeat removed");
        equal(Priority.LOW, edited.priority(), "edited priority");
        equal(next.due(), edited.due(), "a field left out of the patch is unchanged");
        store.editReminder(milk, new ReminderPatch());
        equal(edited, store.reminder(milk), "an empty patch changes nothing");

        store.editReminder(milk, new ReminderPatch().priorityValue(7));
        equal(Priority.OTHER, store.reminder(milk).priority(), "an integer priority");
        equal(7L, store.reminder(milk).priorityValue(), "its value");
        store.editReminder(milk, new ReminderPatch().priorityValue(2));
        equal(Priority.MEDIUM, store.reminder(milk).priority(), "priority 2 is medium");
        store.editReminder(milk, new ReminderPatch().removeDue());
        equal(null, store.reminder(milk).due(), "due removed");

        Instant before = Instant.now().truncatedTo(ChronoUnit.MILLIS);
        store.completeReminder(milk);
        Reminder completed = store.reminder(milk);
        check(completed.completed(), "completed");
        check(completed.completedAt() != null && !completed.completedAt().isBefore(before.minusSeconds(1)),
                "completedAt " + completed.completedAt());
        check(!ids(store.reminders(false)).contains(milk), "a completed reminder is not listed as open");
        check(ids(store.reminders(true)).contains(milk), "a completed reminder is listed with --all");
        store.reopenReminder(milk);
        equal(false, store.reminder(milk).completed(), "reopened");
        equal(null, store.reminder(milk).completedAt(), "reopened: no completedAt");

        store.tag(milk, Arrays.asList("x"), Arrays.asList("home"));
        equal(Arrays.asList("errand", "x"), store.reminder(milk).tags(), "tags added and removed");
        store.tag(milk, null, null);
        equal(Arrays.asList("errand", "x"), store.reminder(milk).tags(), "no tags to add or remove");

        // Snoozing, and which reminders are due.
        String call = store.addReminder(new ReminderDraft("Call back").due(Instant.parse("2020-01-01T00:00:00Z")));
        String snoozed = store.addReminder(new ReminderDraft("Later").due(Instant.parse("2020-01-01T00:00:00Z")));
        Instant until = Instant.now().plus(1, ChronoUnit.HOURS).plusNanos(123_456_789);
        store.snoozeReminder(snoozed, until);
        equal(until.truncatedTo(ChronoUnit.MILLIS), store.reminder(snoozed).snoozedUntil(), "snoozed until");
        List<String> due2020 = ids(store.dueReminders(Instant.parse("2020-01-02T00:00:00Z")));
        check(due2020.contains(call), "a reminder due in 2020 is due then: " + due2020);
        check(!due2020.contains(snoozed), "a snoozed reminder is not due");
        check(!ids(store.dueReminders(Instant.parse("2019-12-31T00:00:00Z"))).contains(call), "not due before its time");
        check(ids(store.dueReminders(null)).contains(call), "due now");

        store.delete(call);
        equal(true, store.reminder(call).deleted(), "deleted");
        check(!ids(store.reminders(false)).contains(call), "a deleted reminder is not listed");
        check(ids(store.reminders(true)).contains(call), "a deleted reminder is listed with --all");
        fails(ConcordException.INVALID_CHANGE, "invalidChange", "is deleted; restore it first", "editing a deleted reminder",
                () -> store.editReminder(call, new ReminderPatch().title("x")));
        store.restore(call);
        equal(false, store.reminder(call).deleted(), "restored");

        // Ids by a unique prefix or suffix, as syncctl takes them.
        String suffix = milk.substring(24);
        if (unique(store, suffix)) equal(milk, store.reminder(suffix).id(), "a reminder by the suffix of its id");
    }

    private static void notes(ConcordStore store) {
        String ideas = store.addNote(new NoteDraft("Ideas").body("line one\nline two").pinned(true).tags(Arrays.asList("idea")));
        Note note = store.note(ideas);
        equal(ideas, note.id(), "note id");
        equal("Ideas", note.title(), "note title");
        equal("line one\nline two", note.body(), "note body");
        equal(true, note.pinned(), "pinned");
        equal(Arrays.asList("idea"), note.tags(), "note tags");
        equal(false, note.deleted(), "note deleted");
        equal(false, note.conflict(), "note conflict");
        equal("", store.note(store.addNote(new NoteDraft("Empty"))).body(), "a note without a body has an empty one");

        store.editNote(ideas, new NotePatch().pinned(false).body(""));
        equal(false, store.note(ideas).pinned(), "unpinned");
        equal("", store.note(ideas).body(), "body emptied");
        equal("Ideas", store.note(ideas).title(), "title unchanged");
        store.editNote(ideas, new NotePatch().title("More ideas"));
        equal("More ideas", store.note(ideas).title(), "note title edited");
        store.tag(ideas, Arrays.asList("later"), null);
        equal(Arrays.asList("idea", "later"), store.note(ideas).tags(), "note tagged");

        store.delete(ideas);
        check(!noteIds(store.notes(false)).contains(ideas), "a deleted note is not listed");
        check(noteIds(store.notes(true)).contains(ideas), "a deleted note is listed with deleted ones");
        store.restore(ideas);
        check(noteIds(store.notes(false)).contains(ideas), "a restored note is listed");
    }

    private static void unicode(ConcordStore store) {
        // Characters beyond U+FFFF (surrogate pairs in Java, four bytes in UTF-8), a ZWJ sequence,
        // C1 controls, U+2028, and control characters the JSON escapes.
        String title = "Café ☕ 😀 👩‍👩‍👧 𠀀 日本語 \u0085\u2028\uFFFD 🏳️‍🌈";
        String notes = "tab\there\nnew line \"quoted\" back\\slash \u0001 \u007f end";
        List<String> tags = Arrays.asList("😀", "école", "zebra", "Zebra");
        String id = store.addReminder(new ReminderDraft(title).notes(notes).tags(tags));
        Reminder read = store.reminder(id);
        equal(title, read.title(), "a title beyond the BMP round-trips");
        equal(notes, read.notes(), "notes with control characters round-trip");
        // By UTF-8 bytes: 'Z' 5A, 'z' 7A, 'é' C3 A9, '😀' F0 9F 98 80.
        equal(Arrays.asList("Zebra", "zebra", "école", "😀"), read.tags(), "unicode tags in byte order");
        Reminder listed = null;
        for (Reminder reminder : store.reminders(true)) {
            if (reminder.id().equals(id)) listed = reminder;
        }
        equal(read, listed, "the list reads the same reminder");
        check(store.dump().contains("Café ☕ 😀"), "the dump holds the emoji as UTF-8 text");

        String noteId = store.addNote(new NoteDraft("𝄞 music").body("🎵\r\n♪"));
        equal("𝄞 music", store.note(noteId).title(), "a note title beyond the BMP");
        equal("🎵\r\n♪", store.note(noteId).body(), "a note body with emoji and CR LF");
        store.editNote(noteId, new NotePatch().title("🎶"));
        equal("🎶", store.note(noteId).title(), "an edited title of one emoji");

        // U+0000 inside a title travels escaped in the JSON: the library keeps it (its JSON
        // escapes it too, SPEC.md §10), and it comes back.
        String withNul = store.addReminder(new ReminderDraft("before\u0000after"));
        equal("before\u0000after", store.reminder(withNul).title(), "a title holding U+0000 round-trips");
        // Where the C interface takes plain text, U+0000 would cut it short: the glue refuses it.
        fails(ConcordException.INVALID_INPUT, "invalidInput", "U+0000", "an id holding U+0000",
                () -> store.reminder(id + "\u0000ff"));
        // A surrogate without its pair has no UTF-8 form: refused, not replaced by '?'.
        fails(ConcordException.INVALID_INPUT, "invalidInput", "surrogate", "a title with a lone surrogate",
                () -> store.addReminder(new ReminderDraft("bad \uD83D title")));
        fails(ConcordException.INVALID_INPUT, "invalidInput", "surrogate", "an id with a lone surrogate",
                () -> store.completeReminder("\uDE00abcd"));
    }

    private static void refusals(ConcordStore store) {
        String reminder = store.addReminder(new ReminderDraft("a reminder"));
        String note = store.addNote(new NoteDraft("a note"));
        fails(ConcordException.NOT_FOUND, "notFound", "no reminder with id", "an unknown id",
                () -> store.editReminder(UNKNOWN_ID, new ReminderPatch().title("x")));
        fails(ConcordException.NOT_FOUND, "notFound", "no record with id", "showing an unknown id",
                () -> store.reminder(UNKNOWN_ID));
        fails(ConcordException.NOT_FOUND, "notFound", "is not a record id", "a malformed id", () -> store.delete("zz"));
        fails(ConcordException.NOT_FOUND, "notFound", "no reminder with id " + note, "a note read as a reminder",
                () -> store.reminder(note));
        fails(ConcordException.NOT_FOUND, "notFound", "no note with id " + reminder, "a reminder read as a note",
                () -> store.note(reminder));
        fails(ConcordException.NOT_FOUND, "notFound", "no reminder with id", "completing a note",
                () -> store.completeReminder(note));
        fails(ConcordException.INVALID_CHANGE, "invalidChange", "the title is empty", "an empty title",
                () -> store.addReminder(new ReminderDraft("")));
        fails(ConcordException.INVALID_CHANGE, "invalidChange", "the title is empty", "a title of white space",
                () -> store.addNote(new NoteDraft(" \t")));
        fails(ConcordException.INVALID_CHANGE, "invalidChange", "the title is empty", "editing to an empty title",
                () -> store.editReminder(reminder, new ReminderPatch().title("")));
        fails(ConcordException.INVALID_INPUT, "invalidInput", "title must be a string", "a draft without a title",
                () -> store.addReminder(new ReminderDraft(null)));
        fails(ConcordException.INVALID_INPUT, "invalidInput", "due must be an instant", "a due date after 9999",
                () -> store.addReminder(new ReminderDraft("x").due(Instant.parse("+10000-01-01T00:00:00Z"))));
        fails(ConcordException.INVALID_CHANGE, "invalidChange", "unknown repeat rule 'yearly'", "an unknown repeat rule",
                () -> store.addReminder(new ReminderDraft("x").repeat("yearly")));
        fails(ConcordException.INVALID_CHANGE, "invalidChange", "invalid tag", "an empty tag",
                () -> store.addReminder(new ReminderDraft("x").tags(Arrays.asList(""))));
        fails(ConcordException.INVALID_CHANGE, "invalidChange", "invalid tag", "a tag with a line feed",
                () -> store.tag(reminder, Arrays.asList("a\nb"), null));
        fails(ConcordException.INVALID_INPUT, "invalidInput", "must be a JSON array of strings", "a null tag",
                () -> store.tag(reminder, Arrays.asList((String) null), null));
        fails(ConcordException.INVALID_CHANGE, "invalidChange", "a snooze must end after now", "a snooze in the past",
                () -> store.snoozeReminder(reminder, Instant.now().minusSeconds(60)));
        fails(ConcordException.INVALID_CHANGE, "invalidChange", "a snooze must end after now", "a snooze 400 days ahead",
                () -> store.snoozeReminder(reminder, Instant.now().plus(400, ChronoUnit.DAYS)));
        fails(ConcordException.MISUSE, "misuse", "NULL", "a null id", () -> store.completeReminder(null));
        fails(ConcordException.MISUSE, "misuse", "NULL", "a null draft", () -> store.addReminder(null));
        fails(ConcordException.MISUSE, "misuse", "NULL", "a null snooze end", () -> store.snoozeReminder(reminder, null));
        fails(ConcordException.MISUSE, "misuse", "listener is null", "a null listener", () -> store.changes(null));

        // Ids that share their first 4 digits (ids begin with the time they were made) are
        // ambiguous by those 4.
        Map<String, Integer> prefixes = new HashMap<>();
        for (Reminder each : store.reminders(true)) prefixes.merge(each.id().substring(0, 4), 1, Integer::sum);
        prefixes.values().removeIf(count -> count < 2);
        if (!prefixes.isEmpty()) {
            String prefix = prefixes.keySet().iterator().next();
            fails(ConcordException.AMBIGUOUS, "ambiguous", "is ambiguous", "an ambiguous prefix", () -> store.reminder(prefix));
        }
    }

    private static void jsonReads(ConcordStore store) {
        equal("[]", store.conflictsJson(), "no conflicts");
        JsonObject status = JsonObject.parse(store.statusJson(), "the status");
        equal("jvm test", status.string("name"), "status name");
        equal(store.replicaId(), status.string("replica"), "status replica");
        check(status.value("versionVector") instanceof Map, "status has a version vector");
        String id = store.addReminder(new ReminderDraft("history"));
        store.editReminder(id, new ReminderPatch().title("history 2"));
        Object history = Json.parse(store.historyJson(id));
        check(history instanceof List && !((List<?>) history).isEmpty(), "history is a non-empty array");
        check(store.historyJson(id).contains("\"standing\":\"holds\"") && store.historyJson(id).contains("\"standing\":\"superseded\""),
                "history has standings: " + store.historyJson(id));
        JsonObject dump = JsonObject.parse(store.dump(), "the dump");
        equal("concord-dump", dump.string("format"), "dump format");
        equal(store.dump(), store.dump(), "the dump is stable");
    }

    // MARK: Listening

    private static void listening(ConcordStore store) throws Exception {
        RecordingListener listener = new RecordingListener();
        Thread main = Thread.currentThread();
        AtomicReference<String> id = new AtomicReference<>();
        Observation observation = store.changes(listener);
        try {
            Thread writer = new Thread(() -> id.set(store.addReminder(new ReminderDraft("from another thread"))), "writer");
            writer.start();
            writer.join();
            String record = "reminder:" + id.get();
            check(waitFor(5000, () -> listener.heard(record)), "the listener heard no change within 5 s");
            Change change = listener.changeNaming(record);
            if (change != null) {
                equal("local", change.origin(), "origin of a change written here");
                check(Json.parse(change.versionsJson()) instanceof Map, "versions is a JSON object: " + change.versionsJson());
                check(change.versionsJson().contains(store.replicaId()), "versions names this replica");
            }
            for (Thread thread : listener.threads()) {
                check(thread != main && thread != writer, "a change was heard on the caller's thread " + thread);
            }
        } finally {
            observation.close();
        }
        observation.close(); // again: nothing happens
        int heard = listener.changeCount();
        store.addReminder(new ReminderDraft("after the observation closed"));
        Thread.sleep(1000);
        equal(heard, listener.changeCount(), "changes heard after the observation closed");
        equal(0, listener.endCount(), "closing an observation does not call onEnd");
    }

    private static void throwingListener(ConcordStore store) throws Exception {
        AtomicInteger calls = new AtomicInteger();
        try (Observation observation = store.changes(change -> {
            calls.incrementAndGet();
            throw new IllegalStateException("a listener that always throws (expected in this test)");
        })) {
            for (int i = 1; i <= 3; i++) {
                int expected = i;
                store.addReminder(new ReminderDraft("heard by a throwing listener " + i));
                check(waitFor(5000, () -> calls.get() >= expected), "a throwing listener heard change " + i + " within 5 s");
            }
            equal((long) calls.get(), observation.listenerFailures(), "every failure of the listener is counted");
        }
    }

    private static void listenerMisuse(ConcordStore store) throws Exception {
        AtomicReference<Observation> self = new AtomicReference<>();
        ConcurrentLinkedQueue<Throwable> refusals = new ConcurrentLinkedQueue<>();
        AtomicInteger heard = new AtomicInteger();
        ChangeListener listener = change -> {
            heard.incrementAndGet();
            Observation observation = self.get();
            if (observation == null) return;
            try {
                observation.close();
            } catch (Throwable e) {
                refusals.add(e);
            }
            try {
                store.close();
            } catch (Throwable e) {
                refusals.add(e);
            }
        };
        try (Observation observation = store.changes(listener)) {
            self.set(observation);
            store.addReminder(new ReminderDraft("heard by a listener that misbehaves"));
            check(waitFor(5000, () -> refusals.size() >= 2), "the listener's calls came back within 5 s");
            List<Throwable> got = new ArrayList<>(refusals);
            for (Throwable refusal : got) {
                check(refusal instanceof ConcordException && ((ConcordException) refusal).code() == ConcordException.MISUSE,
                        "a listener closing its observation or store: " + refusal);
            }
            if (got.size() >= 2) {
                check(got.get(0).getMessage().contains("cannot cancel a subscription"), "the library's refusal: " + got.get(0));
                check(got.get(1).getMessage().contains("cannot close a store"), "the library's refusal: " + got.get(1));
            }
            // Still subscribed, and the store still open.
            self.set(null);
            int before = heard.get();
            store.addReminder(new ReminderDraft("still heard"));
            check(waitFor(5000, () -> heard.get() > before), "the observation still hears changes");
        }
    }

    private static void changesSince(ConcordStore store) throws Exception {
        String vector = Json.write(JsonObject.parse(store.statusJson(), "the status").value("versionVector"));
        String id = store.addReminder(new ReminderDraft("written before the subscription"));
        RecordingListener listener = new RecordingListener();
        Observation observation = store.changes(vector, listener);
        try {
            check(waitFor(5000, () -> listener.heard("reminder:" + id)), "a change since the version vector is heard");
        } finally {
            observation.close();
        }
        fails(ConcordException.NOT_A_VERSION_VECTOR, "notAVersionVector", "version vector", "a version vector that is an array",
                () -> store.changes("[1]", change -> { }));
        fails(ConcordException.INVALID_INPUT, "invalidInput", "is not a replica id", "a version vector of a bad key",
                () -> store.changes("{\"x\":1}", change -> { }));
    }

    private static void readOnly(ConcordStore store, String path) {
        try (ConcordStore reader = ConcordStore.openReadOnly(path)) {
            equal(store.dump(), reader.dump(), "the read-only store dumps the same");
            equal(ids(store.reminders(true)), ids(reader.reminders(true)), "the read-only store lists the same");
            fails(ConcordException.READ_ONLY, "readOnly", "read-only", "a write to a read-only store",
                    () -> reader.addReminder(new ReminderDraft("x")));
        }
    }

    // MARK: Many threads

    private static void stress(ConcordStore store) throws Exception {
        final int writers = 8;
        final int perWriter = 200;
        int before = store.reminders(true).size();
        Map<String, Integer> heard = new HashMap<>();
        ChangeListener counter = change -> {
            synchronized (heard) {
                for (String record : change.records()) heard.merge(record, 1, Integer::sum);
            }
        };
        List<String> written = Collections.synchronizedList(new ArrayList<>());
        ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        AtomicBoolean writing = new AtomicBoolean(true);
        AtomicInteger reads = new AtomicInteger();
        CountDownLatch start = new CountDownLatch(1);
        long began = System.nanoTime();
        try (Observation observation = store.changes(counter)) {
            List<Thread> threads = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                int number = w;
                threads.add(new Thread(() -> {
                    try {
                        start.await();
                        for (int i = 0; i < perWriter; i++) {
                            written.add(store.addReminder(new ReminderDraft("thread " + number + " reminder " + i)));
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }, "writer-" + w));
            }
            List<Thread> readers = new ArrayList<>();
            for (int r = 0; r < 2; r++) {
                readers.add(new Thread(() -> {
                    try {
                        start.await();
                        int last = 0;
                        while (writing.get()) {
                            int count = store.reminders(true).size();
                            if (count < last) failures.add(new AssertionError("the list shrank from " + last + " to " + count));
                            last = count;
                            store.notes(true);
                            reads.incrementAndGet();
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }, "reader-" + r));
            }
            for (Thread thread : threads) thread.start();
            for (Thread thread : readers) thread.start();
            start.countDown();
            for (Thread thread : threads) thread.join();
            writing.set(false);
            for (Thread thread : readers) thread.join();
            System.err.printf("   %d adds in %.1f s, %d list reads meanwhile%n", written.size(),
                    (System.nanoTime() - began) / 1e9, reads.get());
            for (Throwable failure : failures) check(false, "a thread failed: " + failure);
            equal(writers * perWriter, written.size(), "reminders added");
            equal(writers * perWriter, new HashSet<>(written).size(), "distinct ids");
            equal(before + writers * perWriter, store.reminders(true).size(), "reminders listed after the threads");
            check(reads.get() > 0, "the readers read");
            // Every new record heard, and once: nothing missed, nothing reported twice.
            check(waitFor(10000, () -> {
                synchronized (heard) {
                    for (String id : written) {
                        if (!heard.containsKey("reminder:" + id)) return false;
                    }
                    return true;
                }
            }), "the observer heard every new reminder within 10 s");
            synchronized (heard) {
                int twice = 0;
                for (String id : written) {
                    if (heard.getOrDefault("reminder:" + id, 0) > 1) twice++;
                }
                equal(0, twice, "reminders heard more than once");
            }
            equal(0L, observation.listenerFailures(), "the counting listener never threw");
        }
        String dump = store.dump();
        equal(dump, store.dump(), "the dump is stable");
        check(dump.contains("thread 7 reminder 199"), "the dump holds the last thread's last reminder");
    }

    // MARK: Closing

    private static void closing(ConcordStore store) throws Exception {
        RecordingListener listener = new RecordingListener();
        Observation leftOpen = store.changes(listener);
        store.close();
        store.close(); // again: nothing happens
        leftOpen.close(); // closed with the store: nothing happens
        fails(ConcordException.MISUSE, "misuse", "is closed", "replicaId after close", store::replicaId);
        fails(ConcordException.MISUSE, "misuse", "is closed", "a write after close", () -> store.addReminder(new ReminderDraft("x")));
        fails(ConcordException.MISUSE, "misuse", "is closed", "a list after close", () -> store.reminders(false));
        fails(ConcordException.MISUSE, "misuse", "is closed", "the dump after close", store::dump);
        fails(ConcordException.MISUSE, "misuse", "is closed", "observing after close", () -> store.changes(listener));
        Thread.sleep(300);
        equal(0, listener.endCount(), "closing the store does not call onEnd");
    }

    private static void deleteAll(String directory) {
        try (ConcordStore store = ConcordStore.create(directory + "/delete-all.db", null)) {
            String gone = store.addReminder(new ReminderDraft("deleted first"));
            store.addReminder(new ReminderDraft("one"));
            store.addReminder(new ReminderDraft("two"));
            store.addNote(new NoteDraft("note one"));
            store.addNote(new NoteDraft("note two"));
            store.delete(gone);
            equal(2L, store.deleteAllReminders(), "reminders deleted (the one deleted already is not counted)");
            equal(2L, store.deleteAllNotes(), "notes deleted");
            equal(0, store.reminders(false).size(), "no reminder left");
            equal(3, store.reminders(true).size(), "the tombstones are listed");
            equal(0L, store.deleteAllNotes(), "no note left to delete");
        }
    }

    private static void purges(String directory) throws Exception {
        Path path = Paths.get(directory, "purges.db");
        try (ConcordStore store = ConcordStore.create(path.toString(), null)) {
            String secret = store.addReminder(new ReminderDraft("secret-title-J1"));
            store.addReminder(new ReminderDraft("kept"));
            store.addNote(new NoteDraft("note-J1"));
            store.purge(secret);
            store.purge(secret);
            equal(1, store.reminders(true).size(), "the purged reminder is not listed, even with the deleted ones");
            fails(ConcordException.INVALID_CHANGE, "invalidChange", "was purged: its content is erased for good", "editing a purged reminder",
                    () -> store.editReminder(secret, new ReminderPatch().title("back")));
            equal(1L, store.purgeAllReminders(), "reminders purged");
            equal(1L, store.purgeAllNotes(), "notes purged");
            equal(0L, store.purgeAllNotes(), "no note left to purge");
        }
        byte[] bytes = Files.readAllBytes(path);
        check(!new String(bytes, java.nio.charset.StandardCharsets.ISO_8859_1).contains("secret-title-J1"),
                "the store file holds no byte of the purged title");
    }

    private static void replaced(String directory) throws Exception {
        Path path = Paths.get(directory, "replaced.db");
        RecordingListener listener = new RecordingListener();
        ConcordStore store = ConcordStore.create(path.toString(), null);
        try {
            Observation observation = store.changes(listener);
            store.addReminder(new ReminderDraft("before the move"));
            Files.move(path, Paths.get(directory, "moved-away.db"));
            check(waitFor(5000, () -> listener.endCount() > 0), "the stream ended within 5 s of the file's move");
            List<ConcordException> ends = listener.endErrors();
            check(ends.size() == 1 && ends.get(0).code() == ConcordException.REPLACED && ends.get(0).codeName().equals("replaced"),
                    "the stream ended with 'replaced': " + ends);
            equal(1, listener.endCount(), "onEnd is called once");
            observation.close();
        } finally {
            try {
                store.close();
            } catch (ConcordException e) {
                System.err.println("   closing the moved store: " + e);
            }
        }
    }

    /**
     * Subscriptions begun on other threads while the store closes: each either works until the
     * close, or fails with MISUSE; none outlives the store, and none hears an end (SPEC.md §17:
     * closing a store cancels its subscriptions, whose callbacks hear no end).
     */
    private static void subscribingWhileClosing(String directory) throws Exception {
        AtomicInteger endsOfMade = new AtomicInteger();
        AtomicInteger endsOfRefused = new AtomicInteger();
        int made = 0;
        int refused = 0;
        for (int round = 0; round < 20; round++) {
            ConcordStore store = ConcordStore.create(directory + "/closing-" + round + ".db", null);
            List<Observation> observations = Collections.synchronizedList(new ArrayList<>());
            ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
            AtomicInteger refusals = new AtomicInteger();
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                threads.add(new Thread(() -> {
                    try {
                        start.await();
                        for (int i = 0; i < 50; i++) {
                            // A listener of its own for each, to tell whose stream heard an end.
                            RecordingListener listener = new RecordingListener();
                            try {
                                observations.add(store.changes(listener));
                                if (listener.endCount() > 0) endsOfMade.incrementAndGet();
                            } catch (ConcordException e) {
                                if (e.code() != ConcordException.MISUSE) throw e;
                                refusals.incrementAndGet();
                                if (listener.endCount() > 0) endsOfRefused.incrementAndGet();
                            }
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }));
            }
            for (Thread thread : threads) thread.start();
            start.countDown();
            Thread.sleep(round % 5);
            store.close();
            for (Thread thread : threads) thread.join();
            for (Throwable failure : failures) check(false, "a subscribing thread failed: " + failure);
            for (Observation observation : observations) observation.close(); // all closed with the store: nothing happens
            made += observations.size();
            refused += refusals.get();
        }
        System.err.printf("   %d subscriptions made, %d refused as the store closed%n", made, refused);
        check(refused > 0, "some subscriptions came after the close");
        equal(0, endsOfMade.get(), "subscriptions made, then cancelled by the close, that heard an end");
        // The library's subscription task may follow the store into its close before
        // concord_observe sees the close and stops it: its callback then hears an end (event and
        // end NULL) during a call that fails.
        equal(0, endsOfRefused.get(), "subscriptions refused (misuse) as the store closed that heard an end all the same");
    }

    /**
     * Several threads close a store, and close its observation, at once, while a slow listener
     * runs: each close returns only once the store is closed and the listener is not running, and
     * the listener is not called afterwards.
     */
    private static void closingFromManyThreads(String directory) throws Exception {
        for (int round = 0; round < 10; round++) {
            ConcordStore store = ConcordStore.create(directory + "/many-closes-" + round + ".db", null);
            AtomicInteger running = new AtomicInteger();
            AtomicInteger callsAfterClose = new AtomicInteger();
            AtomicBoolean closed = new AtomicBoolean();
            CountDownLatch heard = new CountDownLatch(1);
            Observation observation = store.changes(new ChangeListener() {
                @Override
                public void onChange(Change change) {
                    if (closed.get()) callsAfterClose.incrementAndGet();
                    running.incrementAndGet();
                    heard.countDown();
                    try {
                        Thread.sleep(20);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    running.decrementAndGet();
                }

                @Override
                public void onEnd(ConcordException errorOrNull) {
                    callsAfterClose.incrementAndGet();
                }
            });
            for (int i = 0; i < 20; i++) store.addReminder(new ReminderDraft("reminder " + i));
            check(heard.await(5, TimeUnit.SECONDS), "the listener heard a change");
            ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                boolean closesTheObservation = t == 3;
                threads.add(new Thread(() -> {
                    try {
                        start.await();
                        if (closesTheObservation) {
                            observation.close();
                        } else {
                            store.close();
                            closed.set(true);
                            try {
                                store.replicaId();
                                failures.add("the store answered after a close returned");
                            } catch (ConcordException e) {
                                if (e.code() != ConcordException.MISUSE) failures.add("after a close: " + e);
                            }
                        }
                        if (running.get() != 0) failures.add("the listener ran after a close returned (" + (closesTheObservation ? "the observation's" : "the store's") + ")");
                    } catch (Throwable e) {
                        failures.add("a closing thread failed: " + e);
                    }
                }));
            }
            for (Thread thread : threads) thread.start();
            start.countDown();
            for (Thread thread : threads) thread.join();
            closed.set(true);
            Thread.sleep(50);
            for (String failure : failures) check(false, failure);
            equal(0, callsAfterClose.get(), "listener calls after a close returned, ends included");
        }
    }

    // MARK: Exchange

    private static void keys(String directory) {
        try (ConcordStore store = ConcordStore.create(directory + "/keys.db", null);
                ConcordStore other = ConcordStore.create(directory + "/keys-other.db", null)) {
            fails(ConcordException.NO_SYNC_KEY, "noSyncKey", "", "the key id of a store without a key", store::keyId);
            String key = store.generateKey(false);
            check(key.startsWith("concord-key-1-"), "a key's text: " + key);
            String id = store.keyId();
            check(id.matches("[0-9a-f]{16}"), "a key id: " + id);
            fails(ConcordException.EXISTS, "exists", "", "a second key generated without replace", () -> store.generateKey(false));
            equal(id, store.keyId(), "the refused generate changed nothing");
            fails(ConcordException.WRONG_PREFIX, "wrongPrefix", "", "a key's text without its prefix",
                    () -> other.setKey("not a key", false));
            fails(ConcordException.MISUSE, "misuse", "NULL", "a null key", () -> other.setKey(null, false));
            other.setKey(key, false);
            equal(id, other.keyId(), "the same key on another store has the same id");
            other.setKey(key, false); // the key it holds: nothing changes
            String replacement = store.generateKey(true);
            check(!replacement.equals(key) && !store.keyId().equals(id), "a replacing key is another");
            fails(ConcordException.EXISTS, "exists", "", "setting another key without replace", () -> other.setKey(replacement, false));
            other.setKey(replacement, true);
            equal(store.keyId(), other.keyId(), "the replaced key's id");
        }
    }

    private static void exportAndMerge(String directory) throws Exception {
        String bundle = directory + "/export.bundle";
        try (ConcordStore source = ConcordStore.create(directory + "/export-source.db", null);
                ConcordStore target = ConcordStore.create(directory + "/export-target.db", null)) {
            source.addReminder(new ReminderDraft("exported 😀").tags(Arrays.asList("bundle")));
            source.addNote(new NoteDraft("exported note"));
            long operations = JsonObject.parse(source.statusJson(), "the status").number("operations");
            Report summary = source.export(bundle, null, false);
            equal(operations, summary.number("operations"), "the bundle's operations");
            byte[] bytes = Files.readAllBytes(Paths.get(bundle));
            equal((long) bytes.length, summary.number("bytes"), "the bundle's size");
            equal(hex(MessageDigest.getInstance("SHA-256").digest(bytes)), summary.text("sha256"), "the bundle's SHA-256");
            equal(summary.json(), Json.write(Json.parse(summary.json())), "a report is canonical JSON");
            throwsA(IllegalArgumentException.class, "a number the report lacks", () -> summary.number("nothing"));
            throwsA(IllegalArgumentException.class, "a text that is a number", () -> summary.text("bytes"));
            equal(Collections.emptyList(), summary.warnings(), "a summary has no warnings");
            equal(null, summary.folder(), "a summary has no folder report");

            Report merged = target.merge(Arrays.asList(bundle));
            equal(operations, merged.number("newOperations"), "operations new to the target");
            equal(1L, merged.number("replicas"), "replicas they came from");
            equal(null, merged.text("farFuture"), "no timestamp far in the future");
            equal(source.dump(), target.dump(), "the target holds what the source exported");
            equal(0L, target.merge(Arrays.asList(bundle)).number("newOperations"), "a second merge brings nothing");

            // Since the target's version vector: nothing is left to send it.
            String vector = Json.write(JsonObject.parse(target.statusJson(), "the status").value("versionVector"));
            equal(0L, source.export(directory + "/nothing.bundle", vector, false).number("operations"), "an export since what the target holds");

            fails(ConcordException.NO_SYNC_KEY, "noSyncKey", "", "an encrypted export without a key",
                    () -> source.export(directory + "/encrypted.bundle", null, true));
            source.setKey(target.generateKey(false), false);
            source.addReminder(new ReminderDraft("sealed"));
            Report sealed = source.export(directory + "/encrypted.bundle", vector, true);
            equal(1L, target.merge(Arrays.asList(directory + "/encrypted.bundle")).number("replicas"), "an encrypted bundle merged with the key");
            equal(source.dump(), target.dump(), "the target holds the sealed reminder");
            check(sealed.number("operations") > 0, "the encrypted bundle's operations");

            fails(ConcordException.IO, "io", "no store or bundle at", "merging a missing file", () -> target.merge(Arrays.asList(directory + "/none.bundle")));
            fails(ConcordException.INVALID_INPUT, "invalidInput", "at least one", "merging nothing", () -> target.merge(Collections.emptyList()));
            fails(ConcordException.MISUSE, "misuse", "NULL", "merging null", () -> target.merge(null));
            fails(ConcordException.NOT_A_VERSION_VECTOR, "notAVersionVector", "", "an export since a bad vector",
                    () -> source.export(directory + "/bad.bundle", "[]", false));
        }
    }

    private static void folderSync(String directory) throws Exception {
        Path folder = Files.createDirectory(Paths.get(directory, "shared folder"));
        try (ConcordStore phone = ConcordStore.create(directory + "/folder-phone.db", "phone");
                ConcordStore laptop = ConcordStore.create(directory + "/folder-laptop.db", "laptop")) {
            laptop.setKey(phone.generateKey(false), false);
            phone.addReminder(new ReminderDraft("written on the phone"));
            laptop.addNote(new NoteDraft("written on the laptop"));
            Report published = phone.syncFolder(folder.toString());
            check(published.text("publishedFile") != null, "the phone published a file: " + published);
            check(published.number("publishedOperations") > 0, "the phone published operations");
            equal(Collections.emptyList(), published.warnings(), "no warnings");
            Report both = laptop.syncFolder(folder.toString());
            check(both.number("importedOperations") > 0 && both.number("importedFiles") == 1, "the laptop imported: " + both);
            check(both.number("publishedOperations") > 0, "the laptop published its own: " + both);
            Report back = phone.syncFolder(folder.toString());
            check(back.number("importedOperations") > 0, "the phone imported the laptop's: " + back);
            equal(phone.dump(), laptop.dump(), "both stores converged");

            // A file that is not a bundle is skipped with a warning, not an error.
            Path junk = folder.resolve("concord-v1").resolve("ffffffffffffffffffffffffffffffff-0000000001.cbundle");
            Files.write(junk, "not a bundle".getBytes(StandardCharsets.UTF_8));
            Report warned = laptop.syncFolder(folder.toString());
            equal(1, warned.warnings().size(), "one warning: " + warned);
            if (warned.warnings().size() == 1) {
                Warning warning = warned.warnings().get(0);
                check(ConcordException.codeOf(warning.code()) > 0, "a warning's code is a known one: " + warning);
                check(warning.message().contains("ffffffffffffffffffffffffffffffff-0000000001.cbundle"), "a warning names the file: " + warning);
            }
            fails(ConcordException.FOLDER, "folder", "", "a folder that is missing", () -> phone.syncFolder(directory + "/no folder"));
        }
    }

    private static void failedSyncs(String directory) {
        try (ConcordStore store = ConcordStore.create(directory + "/failed-syncs.db", null)) {
            fails(ConcordException.NO_SYNC_KEY, "noSyncKey", "", "a peer sync without a key", () -> store.syncPeer("127.0.0.1:1"));
            store.generateKey(false);
            fails(ConcordException.CLOSED, "closed", "", "a peer sync with no peer there", () -> store.syncPeer("127.0.0.1:1"));
            fails(ConcordException.INVALID_INPUT, "invalidInput", "is not HOST:PORT", "a peer address that is not one",
                    () -> store.syncPeer("not an address"));
            fails(ConcordException.INVALID_INPUT, "invalidInput", "", "a relay URL of another scheme", () -> store.syncRelay("ftp://x"));
            fails(ConcordException.RELAY, "relay", "", "a relay sync with no relay there", () -> store.syncRelay("http://127.0.0.1:1"));
            fails(ConcordException.MISUSE, "misuse", "NULL", "a null address", () -> store.syncPeer(null));
        }
    }

    /** A listener that keeps the events it hears, and the ends. */
    private static final class LiveRecorder implements LiveListener {
        final List<LiveEvent> events = Collections.synchronizedList(new ArrayList<>());
        final List<ConcordException> ends = Collections.synchronizedList(new ArrayList<>());
        final AtomicInteger endCount = new AtomicInteger();

        @Override
        public void onEvent(LiveEvent event) {
            events.add(event);
        }

        @Override
        public void onEnd(ConcordException errorOrNull) {
            endCount.incrementAndGet();
            if (errorOrNull != null) ends.add(errorOrNull);
        }

        LiveEvent first(String kind) {
            synchronized (events) {
                for (LiveEvent event : events) {
                    if (event.kind().equals(kind)) return event;
                }
                return null;
            }
        }
    }

    private static void liveSyncs(String directory) throws Exception {
        ConcordStore store = ConcordStore.create(directory + "/live.db", null);
        try {
            // No key: the live sync ends by itself, with the failure that would recur.
            LiveRecorder keyless = new LiveRecorder();
            Observation keylessSync = store.syncPeerLive("127.0.0.1:1", keyless);
            check(waitFor(5000, () -> keyless.endCount.get() > 0), "a live sync without a key ended within 5 s");
            check(keyless.ends.size() == 1 && keyless.ends.get(0).code() == ConcordException.NO_SYNC_KEY,
                    "it ended with noSyncKey: " + keyless.ends);
            equal(1, keyless.endCount.get(), "onEnd is called once");
            keylessSync.close(); // ended by itself: closing it frees its listener
            store.generateKey(false);

            // No peer there: "disconnected" events, each with its failure, and it tries again.
            LiveRecorder peer = new LiveRecorder();
            Observation peerSync = store.syncPeerLive("127.0.0.1:1", peer);
            check(waitFor(10000, () -> peer.events.size() >= 2), "two disconnections heard within 10 s: " + peer.events);
            LiveEvent disconnected = peer.first("disconnected");
            if (check(disconnected != null, "a disconnected event: " + peer.events)) {
                ConcordException failure = disconnected.failure();
                check(failure != null && failure.code() == ConcordException.CLOSED && failure.codeName().equals("closed"),
                        "its failure is closed: " + failure);
                check(disconnected.number("reconnectingInMilliseconds") > 0, "it reconnects later: " + disconnected);
                check(disconnected.json().startsWith("{\"event\":\"disconnected\""), "its JSON: " + disconnected.json());
                equal(null, disconnected.report(), "a peer's event has no report");
            }
            peerSync.close();
            int heard = peer.events.size();
            Thread.sleep(1500);
            equal(heard, peer.events.size(), "events heard after the live sync was closed");
            equal(0, peer.endCount.get(), "closing a live sync does not call onEnd");

            // A relay that is not there: "failed" events.
            LiveRecorder relay = new LiveRecorder();
            Observation relaySync = store.syncRelayLive("http://127.0.0.1:1", relay);
            try {
                check(waitFor(10000, () -> relay.first("failed") != null), "a failed relay sync heard within 10 s: " + relay.events);
                LiveEvent failed = relay.first("failed");
                if (failed != null) {
                    check(failed.failure() != null && failed.failure().code() == ConcordException.RELAY, "a relay's failure: " + failed.failure());
                    check(failed.number("retryingInMilliseconds") > 0, "it retries later: " + failed);
                }
            } finally {
                relaySync.close();
            }
            fails(ConcordException.INVALID_INPUT, "invalidInput", "", "a live relay sync of another scheme",
                    () -> store.syncRelayLive("ftp://x", relay));
            fails(ConcordException.INVALID_INPUT, "invalidInput", "is not HOST:PORT", "a live peer sync of a bad address",
                    () -> store.syncPeerLive("not an address", peer));
            fails(ConcordException.MISUSE, "misuse", "listener is null", "a null live listener", () -> store.syncPeerLive("127.0.0.1:1", null));

            // A listener that throws goes on hearing events; one that closes its store is refused.
            AtomicInteger calls = new AtomicInteger();
            ConcurrentLinkedQueue<Throwable> refusals = new ConcurrentLinkedQueue<>();
            try (Observation throwing = store.syncPeerLive("127.0.0.1:1", event -> {
                if (calls.incrementAndGet() == 1) {
                    try {
                        store.close();
                    } catch (Throwable e) {
                        refusals.add(e);
                    }
                }
                throw new IllegalStateException("a live listener that always throws (expected in this test)");
            })) {
                check(waitFor(10000, () -> calls.get() >= 2), "a throwing live listener heard two events within 10 s");
                equal((long) calls.get(), throwing.listenerFailures(), "every failure of the live listener is counted");
                Throwable refusal = refusals.peek();
                check(refusal instanceof ConcordException && ((ConcordException) refusal).code() == ConcordException.MISUSE,
                        "a live listener closing its store is refused: " + refusal);
            }
            store.replicaId(); // still open

            // Closing the store stops a live sync running, without an end.
            LiveRecorder running = new LiveRecorder();
            store.syncPeerLive("127.0.0.1:1", running);
            check(waitFor(5000, () -> !running.events.isEmpty()), "the last live sync heard an event");
        } finally {
            store.close();
        }
        fails(ConcordException.MISUSE, "misuse", "is closed", "a live sync after close", () -> store.syncPeerLive("127.0.0.1:1", event -> { }));
    }

    // MARK: Helpers

    private static String hex(byte[] bytes) {
        StringBuilder text = new StringBuilder();
        for (byte b : bytes) text.append(String.format("%02x", b & 0xff));
        return text.toString();
    }

    private static List<String> ids(List<Reminder> reminders) {
        List<String> ids = new ArrayList<>();
        for (Reminder reminder : reminders) ids.add(reminder.id());
        return ids;
    }

    private static List<String> noteIds(List<Note> notes) {
        List<String> ids = new ArrayList<>();
        for (Note note : notes) ids.add(note.id());
        return ids;
    }

    /** Whether {@code digits} is the prefix or suffix of exactly one record's id. */
    private static boolean unique(ConcordStore store, String digits) {
        Set<String> matches = new HashSet<>();
        for (Reminder reminder : store.reminders(true)) {
            if (reminder.id().startsWith(digits) || reminder.id().endsWith(digits)) matches.add(reminder.id());
        }
        for (Note note : store.notes(true)) {
            if (note.id().startsWith(digits) || note.id().endsWith(digits)) matches.add(note.id());
        }
        return matches.size() == 1;
    }
}
