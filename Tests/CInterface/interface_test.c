/*
 * A C program over concord.h, as an app in another language uses it: CInterfaceTests compiles it
 * against the built libConcordC and runs it. It checks each call's results and refusals, and
 * prints the store's dump last, which the test compares with `syncctl dump` of the same store.
 *
 * Usage: interface_test DIRECTORY
 */
#define _DEFAULT_SOURCE
#include "concord.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* What the observer heard. */
static atomic_int changes_heard = 0;
static atomic_int heard_on_callers_thread = 0;
static pthread_t main_thread;
static char last_change[4096];

static void on_change(void *context, const char *change, const concord_error *end) {
    CHECK(context == (void *)&changes_heard, "the callback got another context");
    if (pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&heard_on_callers_thread, 1);
    if (change == NULL) {
        fprintf(stderr, "observing ended: %s\n", end ? concord_error_message(end) : "the store closed");
        return;
    }
    snprintf(last_change, sizeof last_change, "%s", change);
    atomic_fetch_add(&changes_heard, 1);
}

/* Waits up to 5 s for the observer to have heard `count` changes. */
static int wait_for_changes(int count) {
    for (int i = 0; i < 500; i++) {
        if (atomic_load(&changes_heard) >= count) return 1;
        usleep(10 * 1000);
    }
    return 0;
}

/* A callback that tries what a callback must not: cancel its own subscription, close its store. */
struct misbehaving {
    concord_store store;
    _Atomic concord_subscription subscription;
    atomic_int calls;
    atomic_int cancel_status;
    atomic_int close_status;
};

static void on_change_misbehaving(void *context, const char *change, const concord_error *end) {
    (void)end;
    struct misbehaving *m = context;
    if (change == NULL || atomic_load(&m->calls) > 0) return;
    concord_error *err = NULL;
    atomic_store(&m->cancel_status, concord_cancel(atomic_load(&m->subscription), &err));
    concord_error_free(err);
    err = NULL;
    atomic_store(&m->close_status, concord_store_close(m->store, &err));
    concord_error_free(err);
    atomic_fetch_add(&m->calls, 1);
}

struct writer { concord_store store; int number; int failed; };

static void *write_reminders(void *argument) {
    struct writer *writer = argument;
    for (int i = 0; i < 25; i++) {
        char draft[128];
        snprintf(draft, sizeof draft, "{\"title\":\"thread %d reminder %d\"}", writer->number, i);
        char *id = NULL;
        concord_error *err = NULL;
        if (concord_reminder_add(writer->store, draft, &id, &err) != CONCORD_OK) {
            fprintf(stderr, "thread %d: %s\n", writer->number, concord_error_message(err));
            concord_error_free(err);
            writer->failed++;
        }
        concord_free(id);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: interface_test DIRECTORY\n");
        return 64;
    }
    main_thread = pthread_self();
    char path[4096], missing[4096];
    snprintf(path, sizeof path, "%s/store.db", argv[1]);
    snprintf(missing, sizeof missing, "%s/none.db", argv[1]);

    CHECK(concord_abi_version() == CONCORD_ABI_VERSION, "ABI version %d", concord_abi_version());

    /* Opening and creating. */
    concord_store store = 0;
    FAILS(concord_store_open(missing, 0, &store, error), CONCORD_MISSING, "missing", "no store at");
    FAILS(concord_store_open(NULL, 0, &store, error), CONCORD_MISUSE, "misuse", "path is NULL");
    FAILS(concord_store_open(path, 8, &store, error), CONCORD_MISUSE, "misuse", "unknown flags");
    OK(concord_store_create(path, "c program", &store, error));
    CHECK(store != 0, "no handle");
    FAILS(concord_store_create(path, NULL, &store, error), CONCORD_EXISTS, "exists", "already exists");
    char *replica = NULL;
    OK(concord_store_replica_id(store, &replica, error));
    CHECK(replica != NULL && strlen(replica) == 32, "replica id '%s'", replica ? replica : "(null)");

    /* Observing, from before the first write. */
    concord_subscription observer = 0;
    OK(concord_observe(store, NULL, on_change, &changes_heard, &observer, error));

    /* Writes. */
    char *milk = NULL, *note = NULL;
    OK(concord_reminder_add(store, "{\"title\":\"Buy milk\",\"due\":\"2026-12-01T09:30:00.000Z\",\"priority\":\"high\",\"tags\":[\"home\"]}",
                            &milk, error));
    CHECK(milk != NULL && strlen(milk) == 32, "id '%s'", milk ? milk : "(null)");
    CHECK(wait_for_changes(1), "the observer heard no change in 5 s");
    CHECK(strstr(last_change, "\"origin\":\"local\"") != NULL, "change %s", last_change);
    CHECK(strstr(last_change, milk) != NULL, "change %s lacks %s", last_change, milk);
    CHECK(atomic_load(&heard_on_callers_thread) == 0, "a change was delivered on the caller's thread");

    OK(concord_reminder_edit(store, milk, "{\"title\":\"Buy oat milk\",\"notes\":\"the big one\",\"due\":null}", error));
    OK(concord_reminder_complete(store, milk, error));
    OK(concord_reminder_reopen(store, milk, error));
    OK(concord_record_tag(store, milk, "[\"errand\"]", "[\"home\"]", error));
    OK(concord_note_add(store, "{\"title\":\"Ideas\",\"body\":\"line one\\nline two\",\"pinned\":true}", &note, error));
    OK(concord_note_edit(store, note, "{\"pinned\":false}", error));
    char *snoozed = NULL;
    OK(concord_reminder_add(store, "{\"title\":\"Call back\"}", &snoozed, error));
    time_t soon = time(NULL) + 3600;
    char until[64];
    strftime(until, sizeof until, "%Y-%m-%dT%H:%M:%S.000Z", gmtime(&soon));
    OK(concord_reminder_snooze(store, snoozed, until, error));
    OK(concord_record_delete(store, snoozed, error));
    OK(concord_record_restore(store, snoozed, error));

    /* Reads. */
    char *json = NULL;
    OK(concord_reminders(store, 0, &json, error));
    CHECK(json && strstr(json, "\"title\":\"Buy oat milk\"") && strstr(json, "\"tags\":[\"errand\"]") && strstr(json, "\"notes\":\"the big one\""),
          "reminders %s", json);
    concord_free(json);
    json = NULL;
    OK(concord_show(store, note, &json, error));
    CHECK(json && strstr(json, "\"body\":\"line one\\u000aline two\"") && strstr(json, "\"pinned\":false"), "note %s", json);
    concord_free(json);
    json = NULL;
    OK(concord_history(store, milk, &json, error));
    CHECK(json && strstr(json, "\"standing\":\"holds\""), "history %s", json);
    concord_free(json);
    json = NULL;
    OK(concord_conflicts(store, &json, error));
    CHECK(json && strcmp(json, "[]") == 0, "conflicts %s", json);
    concord_free(json);
    json = NULL;
    OK(concord_status(store, &json, error));
    CHECK(json && strstr(json, "\"name\":\"c program\"") && strstr(json, replica), "status %s", json);
    concord_free(json);
    json = NULL;
    OK(concord_due_reminders(store, "2026-12-02T00:00:00.000Z", &json, error));
    CHECK(json && strcmp(json, "[]") == 0, "due %s", json);
    concord_free(json);
    json = NULL;

    /* Refusals, which change nothing. */
    FAILS(concord_reminder_add(store, "{\"title\":\"\"}", &json, error), CONCORD_INVALID_CHANGE, "invalidChange", "the title is empty");
    FAILS(concord_reminder_add(store, "{\"titel\":\"x\"}", &json, error), CONCORD_INVALID_INPUT, "invalidInput", "unknown field 'titel'");
    FAILS(concord_reminder_add(store, "{\"title\":\"x\",\"title\":\"y\"}", &json, error), CONCORD_INVALID_INPUT, "invalidInput", "title is given twice");
    FAILS(concord_reminder_add(store, "[\"title\"]", &json, error), CONCORD_INVALID_INPUT, "invalidInput", "must be a JSON object");
    FAILS(concord_reminder_add(store, "{\"title\":", &json, error), CONCORD_INVALID_INPUT, "invalidInput", "is not JSON");
    FAILS(concord_reminder_add(store, "{\"title\":\"x\"} {}", &json, error), CONCORD_INVALID_INPUT, "invalidInput", "more than one JSON value");
    FAILS(concord_reminder_add(store, "{\"title\":\"x\",\"due\":\"tomorrow\"}", &json, error), CONCORD_INVALID_INPUT, "invalidInput", "due must be an instant");
    FAILS(concord_reminder_add(store, "{\"title\":\"x\",\"tags\":[1]}", &json, error), CONCORD_INVALID_INPUT, "invalidInput", "array of strings");
    FAILS(concord_reminder_add(store, "{\"title\":\"caf\xe9\"}", &json, error), CONCORD_INVALID_INPUT, "invalidInput", "not valid UTF-8");
    FAILS(concord_reminder_add(store, NULL, &json, error), CONCORD_MISUSE, "misuse", "is NULL");
    FAILS(concord_reminder_add(store, "{\"title\":\"x\"}", NULL, error), CONCORD_MISUSE, "misuse", "is NULL");
    FAILS(concord_reminder_edit(store, "0123456789abcdef0123456789abcdef", "{\"title\":\"x\"}", error), CONCORD_NOT_FOUND, "notFound", "no reminder with id");
    FAILS(concord_reminder_edit(store, "zz", "{\"title\":\"x\"}", error), CONCORD_NOT_FOUND, "notFound", "is not a record id");
    FAILS(concord_reminder_complete(store, note, error), CONCORD_NOT_FOUND, "notFound", "no reminder with id");
    FAILS(concord_delete_all(store, 7, NULL, error), CONCORD_MISUSE, "misuse", "CONCORD_REMINDERS");
    FAILS(concord_reminders(store, 0, NULL, error), CONCORD_MISUSE, "misuse", "NULL");
    FAILS(concord_observe(store, NULL, NULL, NULL, &observer, error), CONCORD_MISUSE, "misuse", "callback is NULL");
    FAILS(concord_observe(store, "[1]", on_change, NULL, &observer, error), CONCORD_NOT_A_VERSION_VECTOR, "notAVersionVector", "version vector");
    FAILS(concord_observe(store, "{\"x\":1}", on_change, NULL, &observer, error), CONCORD_INVALID_INPUT, "invalidInput", "is not a replica id");
    /* A NULL error pointer: the status alone. */
    CHECK(concord_reminder_add(store, "{}", &json, NULL) == CONCORD_INVALID_INPUT, "status without an error object");

    /* Many threads at once on one handle. */
    pthread_t threads[4];
    struct writer writers[4];
    for (int i = 0; i < 4; i++) {
        writers[i] = (struct writer){ .store = store, .number = i, .failed = 0 };
        pthread_create(&threads[i], NULL, write_reminders, &writers[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        CHECK(writers[i].failed == 0, "thread %d: %d writes failed", i, writers[i].failed);
    }
    OK(concord_reminders(store, CONCORD_INCLUDE_COMPLETED | CONCORD_INCLUDE_DELETED, &json, error));
    int listed = 0;
    for (const char *at = json; at && (at = strstr(at, "\"kind\":\"reminder\"")); at++) listed++;
    CHECK(listed == 102, "%d reminders listed, expected 102", listed);
    concord_free(json);
    json = NULL;

    /* A callback cannot cancel a subscription or close a store: it would wait for itself. */
    struct misbehaving misbehaving = { .store = store };
    concord_subscription misbehaving_subscription = 0;
    OK(concord_observe(store, NULL, on_change_misbehaving, &misbehaving, &misbehaving_subscription, error));
    atomic_store(&misbehaving.subscription, misbehaving_subscription);
    OK(concord_reminder_add(store, "{\"title\":\"heard by a misbehaving callback\"}", &json, error));
    concord_free(json);
    json = NULL;
    for (int i = 0; i < 500 && atomic_load(&misbehaving.calls) == 0; i++) usleep(10 * 1000);
    CHECK(atomic_load(&misbehaving.calls) == 1, "the misbehaving callback was not called");
    CHECK(atomic_load(&misbehaving.cancel_status) == CONCORD_MISUSE, "cancel from its callback: %d", atomic_load(&misbehaving.cancel_status));
    CHECK(atomic_load(&misbehaving.close_status) == CONCORD_MISUSE, "close from a callback: %d", atomic_load(&misbehaving.close_status));
    OK(concord_cancel(misbehaving_subscription, error));

    /* Cancelling: no call of the callback after it returns. */
    OK(concord_cancel(observer, error));
    int heard = atomic_load(&changes_heard);
    CHECK(heard >= 2, "the observer heard %d changes", heard);
    OK(concord_reminder_add(store, "{\"title\":\"unheard\"}", &json, error));
    concord_free(json);
    json = NULL;
    usleep(300 * 1000);
    CHECK(atomic_load(&changes_heard) == heard, "a change was heard after the observer was cancelled");
    FAILS(concord_cancel(observer, error), CONCORD_MISUSE, "misuse", "is closed");

    int64_t count = -1;
    OK(concord_delete_all(store, CONCORD_NOTES, &count, error));
    CHECK(count == 1, "deleted %lld notes", (long long)count);

    /* Purges: a purged record refuses changes; purging it again, or all of a kind, is counted. */
    char *purged = NULL;
    OK(concord_reminder_add(store, "{\"title\":\"to purge\"}", &purged, error));
    OK(concord_record_purge(store, purged, error));
    OK(concord_record_purge(store, purged, error));
    FAILS(concord_reminder_edit(store, purged, "{\"title\":\"back\"}", error), CONCORD_INVALID_CHANGE, "invalidChange", "was purged");
    concord_free(purged);
    count = -1;
    OK(concord_purge_all(store, CONCORD_NOTES, &count, error));
    CHECK(count == 1, "purged %lld notes (the deleted one)", (long long)count);
    FAILS(concord_purge_all(store, 7, NULL, error), CONCORD_MISUSE, "misuse", "CONCORD_REMINDERS");

    char *dump = NULL;
    OK(concord_dump(store, &dump, error));

    /* A second observer, left running: closing the store cancels it. */
    OK(concord_observe(store, NULL, on_change, &changes_heard, &observer, error));
    OK(concord_store_close(store, error));
    FAILS(concord_reminders(store, 0, &json, error), CONCORD_MISUSE, "misuse", "is closed");
    FAILS(concord_store_close(store, error), CONCORD_MISUSE, "misuse", "is closed");
    FAILS(concord_cancel(observer, error), CONCORD_MISUSE, "misuse", "is closed");
    FAILS(concord_status(0, &json, error), CONCORD_MISUSE, "misuse", "0 is not a store handle");

    /* Read-only: reads work, writes are refused. */
    concord_store reader = 0;
    OK(concord_store_open(path, CONCORD_OPEN_READ_ONLY, &reader, error));
    char *again = NULL;
    OK(concord_dump(reader, &again, error));
    CHECK(again && dump && strcmp(again, dump) == 0, "the read-only store dumps otherwise");
    FAILS(concord_reminder_add(reader, "{\"title\":\"x\"}", &json, error), CONCORD_READ_ONLY, "readOnly", "read-only");
    OK(concord_store_close(reader, error));

    concord_free(replica);
    concord_free(milk);
    concord_free(note);
    concord_free(snoozed);
    concord_free(again);
    if (dump) printf("%s\n", dump);
    concord_free(dump);
    if (failures) fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
