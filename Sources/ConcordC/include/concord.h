/*
 * concord.h: the C interface of Concord, an offline-first store of reminders and notes that
 * replicas keep in sync (SPEC.md §17 specifies it; this header is its reference).
 *
 * Conventions, for every function below:
 * - Text, in and out, is UTF-8 ending in NUL. Text that is not valid UTF-8 is refused with
 *   CONCORD_INVALID_INPUT.
 * - A function that can fail returns a status: CONCORD_OK (0), or the code of the error. When it
 *   fails and `error` is not NULL, *error is set to a new concord_error, which the caller frees
 *   with concord_error_free; on success *error is left as it was. Out parameters are written only
 *   on success.
 * - Text returned through a `char **` is the caller's: free it with concord_free.
 * - Nothing here aborts the process for bad input: a NULL where a value is required, a closed
 *   handle, a wrong JSON shape, each fail with their status.
 * - A concord_store may be used from any number of threads at once; each call blocks its thread
 *   until done (a write may wait for another process's turn, up to 30 s; SPEC.md §9).
 *
 * JSON given and returned is in the forms of SPEC.md §10: reminder and note objects, instants as
 * "YYYY-MM-DDTHH:MM:SS.sssZ" (UTC), ids as 32 lower-case hex digits.
 */
#ifndef CONCORD_H
#define CONCORD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this interface. A later version only adds functions and codes: version 2 added
 * concord_record_purge and concord_purge_all. */
#define CONCORD_ABI_VERSION 2

/* The version of the interface the library implements (CONCORD_ABI_VERSION when it was built). */
int32_t concord_abi_version(void);

/* MARK: Status codes
 *
 * The codes of SPEC.md §12.1, numbered once and for all (new codes are added at the end), and
 * CONCORD_MISUSE for a call that breaks this header's rules. */
#define CONCORD_OK 0
#define CONCORD_MISSING 1
#define CONCORD_EXISTS 2
#define CONCORD_NOT_A_STORE 3
#define CONCORD_NEWER_SCHEMA 4
#define CONCORD_CORRUPT 5
#define CONCORD_READ_ONLY 6
#define CONCORD_INVALID_CHANGE 7
#define CONCORD_INVALID_INPUT 8
#define CONCORD_NOT_FOUND 9
#define CONCORD_AMBIGUOUS 10
#define CONCORD_IO 11
#define CONCORD_COPIED 12
#define CONCORD_FORKED 13
#define CONCORD_REPLACED 14
#define CONCORD_CLASH 15
#define CONCORD_KEY_REPLACED 16
#define CONCORD_FOLDER 17
#define CONCORD_ENCRYPTED_BUNDLE 18
#define CONCORD_NO_SYNC_KEY 19
#define CONCORD_NOT_A_VERSION_VECTOR 20
#define CONCORD_WRONG_PREFIX 21
#define CONCORD_UNSUPPORTED_FORMAT 22
#define CONCORD_BAD_CHARACTER 23
#define CONCORD_WRONG_LENGTH 24
#define CONCORD_CHECKSUM_MISMATCH 25
#define CONCORD_NOT_A_PEER 26
#define CONCORD_VERSION_MISMATCH 27
#define CONCORD_WRONG_KEY 28
#define CONCORD_FRAME_TOO_LARGE 29
#define CONCORD_AUTHENTICATION_FAILED 30
#define CONCORD_PROTOCOL_VIOLATION 31
#define CONCORD_SAME_REPLICA 32
#define CONCORD_PEER_ERROR 33
#define CONCORD_TRUNCATED 34
#define CONCORD_CLOSED 35
#define CONCORD_OPERATION_TOO_LARGE 36
#define CONCORD_COUNTER_EXHAUSTED 37
#define CONCORD_TIMED_OUT 38
#define CONCORD_LOCAL 39
#define CONCORD_RELAY 40
/* The store's replica was retired by another replica: it neither writes nor syncs until forked. */
#define CONCORD_RETIRED 41
/* A NULL where a value is required, a handle that is closed or was never one. */
#define CONCORD_MISUSE 100

/* MARK: Errors */

typedef struct concord_error concord_error;

/* The error's status code (never CONCORD_OK). */
int32_t concord_error_code(const concord_error *error);
/* The code's stable name, as SPEC.md §12.1 gives it ("notFound"; "misuse" for CONCORD_MISUSE). */
const char *concord_error_name(const concord_error *error);
/* One line: what went wrong. Both texts live as long as the error. */
const char *concord_error_message(const concord_error *error);
void concord_error_free(concord_error *error);

/* Frees text that a function returned. NULL is ignored. */
void concord_free(char *text);

/* MARK: Stores
 *
 * A store is named by a handle: a number that is never reused in the process, so that a handle
 * used after concord_store_close fails with CONCORD_MISUSE. 0 is never a handle. */
typedef uint64_t concord_store;

/* Opens the store at `path` read-only: reads work, writes fail with CONCORD_READ_ONLY. */
#define CONCORD_OPEN_READ_ONLY 1u

/* Opens the existing store at `path` (flags: 0 or CONCORD_OPEN_READ_ONLY). */
int32_t concord_store_open(const char *path, uint32_t flags, concord_store *store, concord_error **error);
/* Creates a store at `path` with a new replica id; `name` (may be NULL) is shown by status. */
int32_t concord_store_create(const char *path, const char *name, concord_store *store, concord_error **error);
/* Closes the store: the handle is no longer one, and calls under way on other threads end with
 * an error. The handle is taken out first, then its subscriptions are cancelled, then the store
 * is closed. It returns once no callback of the store's subscriptions is under way and none will
 * come, even of one that another thread's concord_cancel is stopping. */
int32_t concord_store_close(concord_store store, concord_error **error);
/* This replica's id (32 hex digits). */
int32_t concord_store_replica_id(concord_store store, char **id, concord_error **error);

/* MARK: Local writes
 *
 * `id` is a record's id, or a unique prefix or suffix of at least 4 of its digits. Every write is
 * one transaction, durable when the call returns. */

/* Adds a reminder. `draft` is a JSON object: "title" (required), and optionally "notes",
 * "due" (an instant), "priority" ("none", "low", "medium", "high", or an integer), "tags" (an
 * array of strings), "repeat" ("hourly", "daily", "weekly", "monthly"); "notes", "due" and
 * "repeat" may be null, for none. Returns its new id. */
int32_t concord_reminder_add(concord_store store, const char *draft, char **id, concord_error **error);
/* Changes a reminder's fields. `patch` is a JSON object of the fields to change, from "title",
 * "notes", "due", "priority" and "repeat"; null removes "notes", "due" or "repeat". */
int32_t concord_reminder_edit(concord_store store, const char *id, const char *patch, concord_error **error);
/* Completes a reminder; a repeating one moves to its next occurrence instead. */
int32_t concord_reminder_complete(concord_store store, const char *id, concord_error **error);
int32_t concord_reminder_reopen(concord_store store, const char *id, concord_error **error);
/* Snoozes a reminder until `until`, an instant after now and at most 366 days ahead. */
int32_t concord_reminder_snooze(concord_store store, const char *id, const char *until, concord_error **error);
/* Adds a note. `draft` is a JSON object: "title" (required), and optionally "body", "pinned"
 * (a boolean), "tags". Returns its new id. */
int32_t concord_note_add(concord_store store, const char *draft, char **id, concord_error **error);
/* Changes a note's fields: `patch` holds any of "title", "body" and "pinned". */
int32_t concord_note_edit(concord_store store, const char *id, const char *patch, concord_error **error);
/* Adds and removes tags: `add` and `remove` are JSON arrays of strings, or NULL for none. */
int32_t concord_record_tag(concord_store store, const char *id, const char *add, const char *remove, concord_error **error);
/* Deletes a record (a tombstone: concord_record_restore brings it back). */
int32_t concord_record_delete(concord_store store, const char *id, concord_error **error);
int32_t concord_record_restore(concord_store store, const char *id, concord_error **error);

#define CONCORD_REMINDERS 0
#define CONCORD_NOTES 1
/* Deletes every record of `kind` (CONCORD_REMINDERS or CONCORD_NOTES) the store holds; the
 * deletes reach every replica. Sets *count to how many were deleted, when count is not NULL. */
int32_t concord_delete_all(concord_store store, int32_t kind, int64_t *count, concord_error **error);
/* Purges a record: erases its content (every value, title, text and tag) on every replica, for
 * good (SPEC.md §5.7); it cannot be restored, edited or created again. Purging a purged record
 * (named by its full id) changes nothing. Since ABI version 2. */
int32_t concord_record_purge(concord_store store, const char *id, concord_error **error);
/* Purges every record of `kind` the store holds, deleted ones too, in one transaction. Sets
 * *count to how many were purged, when count is not NULL. Since ABI version 2. */
int32_t concord_purge_all(concord_store store, int32_t kind, int64_t *count, concord_error **error);

/* MARK: Reads
 *
 * Each returns JSON text, as `syncctl ... --json` prints it (SPEC.md §10, §11). Reads never wait
 * behind a write or a merge. */

/* Include completed reminders (concord_reminders), deleted records (both lists). */
#define CONCORD_INCLUDE_COMPLETED 1u
#define CONCORD_INCLUDE_DELETED 2u

/* An array of reminder objects, in the order of `reminder list`. */
int32_t concord_reminders(concord_store store, uint32_t flags, char **json, concord_error **error);
/* The reminders that should alert at `at` (an instant; NULL: now), as `reminder due`. */
int32_t concord_due_reminders(concord_store store, const char *at, char **json, concord_error **error);
/* An array of note objects, as `note list`. */
int32_t concord_notes(concord_store store, uint32_t flags, char **json, concord_error **error);
/* One record's object, as `show --json`. */
int32_t concord_show(concord_store store, const char *id, char **json, concord_error **error);
/* The fields in conflict, as `conflicts --json`. */
int32_t concord_conflicts(concord_store store, char **json, concord_error **error);
/* Every write to one record, as `history --json`. */
int32_t concord_history(concord_store store, const char *id, char **json, concord_error **error);
/* The replica, its counts and its version vector, as `status --json`. */
int32_t concord_status(concord_store store, char **json, concord_error **error);
/* The whole replicated state, as `dump` (SPEC.md §10): equal on replicas that hold the same
 * operations. */
int32_t concord_dump(concord_store store, char **json, concord_error **error);

/* MARK: Exchange
 *
 * Each returns a report as a JSON object (SPEC.md §17, "Exchange"). "farFuture" is the instant of
 * a timestamp more than a day ahead of this machine's clock that was taken in (SPEC.md §3), or
 * null. */

/* Merges the stores and bundles of `paths`, a JSON array of paths, as `syncctl merge`: each told
 * apart by its content, every one read and checked whole before anything is merged. Returns
 * {"farFuture","newOperations","replicas"}. */
int32_t concord_merge(concord_store store, const char *paths, char **report, concord_error **error);

/* Encrypt the bundle with the store's sync key. */
#define CONCORD_EXPORT_ENCRYPTED 1u

/* Writes a bundle at `path` (replaced if it exists) of the operations a replica that holds
 * `since` (a JSON version vector; NULL: nothing) lacks, as `syncctl export`. Returns
 * {"bytes","operations","sha256"}. */
int32_t concord_export(concord_store store, const char *path, const char *since, uint32_t flags, char **summary,
                       concord_error **error);

/* One sync with the shared folder `folder`, as `syncctl sync --folder`: imports what the store
 * lacks, publishes what the folder lacks. A bad file in the folder is skipped with a warning in
 * the report, not an error. Returns {"coalescedFiles","farFuture","importedFiles",
 * "importedOperations","publishedFile","publishedOperations","republishedOperations",
 * "warnings":[{"code","message"}]}. */
int32_t concord_sync_folder(concord_store store, const char *folder, char **report, concord_error **error);

/* One two-way session with a peer that `syncctl serve` serves at `address` ("HOST:PORT"; port
 * 7420 when left out), as `syncctl sync --peer`; both stores hold the same sync key. Returns
 * {"bytesReceived","bytesSent","farFuture","milliseconds","newOperations","operationsReceived",
 * "operationsSent"}. A session that fails keeps the operations it received before the failure. */
int32_t concord_sync_peer(concord_store store, const char *address, char **report, concord_error **error);

/* MARK: Keys (SPEC.md §15.1) */

/* Replace another key the store holds (its peers then need the new one). */
#define CONCORD_KEY_REPLACE 1u

/* Makes a new random sync key for the store and returns its text, to set on the other stores. */
int32_t concord_key_generate(concord_store store, uint32_t flags, char **key, concord_error **error);
/* Sets the store's sync key to `key`, the text of one made on another store. */
int32_t concord_key_set(concord_store store, const char *key, uint32_t flags, concord_error **error);
/* The id of the store's sync key (16 hex digits): it names the key without revealing it. */
int32_t concord_key_id(concord_store store, char **id, concord_error **error);

/* MARK: Subscriptions
 *
 * A subscription delivers a stream of events to a callback: a store's changes (concord_observe),
 * a live sync's events (concord_sync_peer_live, concord_sync_relay_live). Each event is a JSON
 * object, given as `event`, which lives until the callback returns. */

typedef uint64_t concord_subscription;

/* Called on a thread of the library's, never the caller's, one call at a time per subscription,
 * in the order of the events; `context` is handed back as it was given. When the stream ends by
 * itself, the callback is called once more with `event` NULL and `end` the error that ended it,
 * or NULL when it ended without one (a relay's live sync after the store was forked); `end` lives
 * until the callback returns. A callback cannot cancel a subscription nor close a store
 * (CONCORD_MISUSE): either waits for callbacks to return, its own or one that waits for it. */
typedef void (*concord_event_callback)(void *context, const char *event, const concord_error *end);

/* Follows the store's commits, by this process or any other: each change is an event
 * {"origin","records","versions"}, as `changes --json` prints a line (SPEC.md §7.1), from the
 * versions `since` (a JSON version vector, as status's "versionVector"; NULL: from now). It ends
 * by itself with CONCORD_REPLACED when the store's path names another file. Closing the store
 * cancels its subscriptions: their callbacks hear no end. */
int32_t concord_observe(concord_store store, const char *since, concord_event_callback callback, void *context,
                        concord_subscription *subscription, concord_error **error);
/* Stops a subscription. Returns once no call of its callback is under way, and none will come. */
int32_t concord_cancel(concord_subscription subscription, concord_error **error);

/* MARK: Live sync */

/* Keeps a live session with the peer at `address`, as `syncctl sync --peer --live`: it connects
 * again by itself after a drop. Events: {"event":"live",…} once a session is live, and
 * {"event":"progress",…}, both with "bytesReceived","bytesSent","operationsReceived",
 * "operationsSent"; {"event":"disconnected","failure","reconnectingInMilliseconds"}, "failure"
 * null or {"code","message"}. It ends by itself with a failure that would recur (no sync key, a
 * clash, a newer peer). */
int32_t concord_sync_peer_live(concord_store store, const char *address, concord_event_callback callback, void *context,
                               concord_subscription *subscription, concord_error **error);

/* One sync through the relay at `url` (http://HOST:PORT or https://), as `syncctl sync --relay`.
 * Returns {"deletedFiles","downloadedFiles","folder","uploadedFiles","warnings"}, "folder" a
 * report of concord_sync_folder. */
int32_t concord_sync_relay(concord_store store, const char *url, char **report, concord_error **error);

/* Keeps the store and the relay at `url` in step, as `syncctl sync --relay URL --live`. Events:
 * {"event":"synced","report"} (the report of concord_sync_relay), {"event":"failed","failure",
 * "retryingInMilliseconds"}, and {"event":"forked","replica"} (another process forked the store:
 * the stream then ends; open the store again to go on as that replica). */
int32_t concord_sync_relay_live(concord_store store, const char *url, concord_event_callback callback, void *context,
                                concord_subscription *subscription, concord_error **error);

#ifdef __cplusplus
}
#endif

#endif /* CONCORD_H */
