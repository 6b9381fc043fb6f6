/*
 * The C interface's exchanges (concord.h, "Exchange" and "Keys"), as an app in another language
 * uses them: CInterfaceTests compiles this program against the built libConcordC and runs it
 * beside `syncctl serve`. It makes a store, sets the sync key it is given, merges a bundle that
 * syncctl exported, syncs with the peer, publishes to a shared folder and exports a bundle of
 * its own, and prints its store's dump last.
 *
 * Usage: exchange_test DIRECTORY PEER_ADDRESS KEY FOLDER BUNDLE
 */
#include "concord.h"

#include <stdlib.h>

#include "check.h"

/* The number after "KEY": in a report, or -1. */
static long long number(const char *json, const char *key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *at = json ? strstr(json, pattern) : NULL;
    return at ? atoll(at + strlen(pattern)) : -1;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: exchange_test DIRECTORY PEER_ADDRESS KEY FOLDER BUNDLE\n");
        return 64;
    }
    const char *address = argv[2], *key = argv[3], *folder = argv[4], *bundle = argv[5];
    char path[4096], out[4096], paths[4200];
    snprintf(path, sizeof path, "%s/c.db", argv[1]);
    snprintf(out, sizeof out, "%s/c.cbundle", argv[1]);

    concord_store store = 0;
    OK(concord_store_create(path, "c", &store, error));
    char *text = NULL, *report = NULL;

    /* Keys. */
    FAILS(concord_key_id(store, &text, error), CONCORD_NO_SYNC_KEY, "noSyncKey", "has no sync key");
    FAILS(concord_sync_peer(store, address, &report, error), CONCORD_NO_SYNC_KEY, "noSyncKey", "has no sync key");
    FAILS(concord_key_set(store, "not a key", 0, error), CONCORD_WRONG_PREFIX, "wrongPrefix", "concord-key-");
    OK(concord_key_set(store, key, 0, error));
    OK(concord_key_set(store, key, 0, error)); /* the key it holds: nothing changes */
    OK(concord_key_id(store, &text, error));
    CHECK(text && strlen(text) == 16, "key id '%s'", text ? text : "(null)");
    concord_free(text);
    text = NULL;
    FAILS(concord_key_generate(store, 0, &text, error), CONCORD_EXISTS, "exists", "already holds another sync key");

    OK(concord_reminder_add(store, "{\"title\":\"from c\",\"tags\":[\"c\"]}", &text, error));
    concord_free(text);
    text = NULL;

    /* A bundle that syncctl exported from another store. */
    snprintf(paths, sizeof paths, "[\"%s\"]", bundle);
    OK(concord_merge(store, paths, &report, error));
    CHECK(number(report, "newOperations") > 0 && number(report, "replicas") == 1 && strstr(report, "\"farFuture\":null"),
          "merge report %s", report);
    concord_free(report);
    report = NULL;
    OK(concord_merge(store, paths, &report, error));
    CHECK(number(report, "newOperations") == 0, "a second merge of the bundle: %s", report);
    concord_free(report);
    report = NULL;
    FAILS(concord_merge(store, "[]", &report, error), CONCORD_INVALID_INPUT, "invalidInput", "at least one");
    FAILS(concord_merge(store, "\"x\"", &report, error), CONCORD_INVALID_INPUT, "invalidInput", "JSON array of strings");
    snprintf(paths, sizeof paths, "[\"%s\"]", folder);
    FAILS(concord_merge(store, paths, &report, error), CONCORD_INVALID_INPUT, "invalidInput", "is a directory, not a Concord store or bundle");

    /* The peer: it gets what this store holds, and this store what it holds. */
    OK(concord_sync_peer(store, address, &report, error));
    CHECK(number(report, "operationsReceived") > 0 && number(report, "operationsSent") > 0 && number(report, "milliseconds") >= 0,
          "peer report %s", report);
    concord_free(report);
    report = NULL;
    OK(concord_sync_peer(store, address, &report, error));
    CHECK(number(report, "operationsReceived") == 0 && number(report, "operationsSent") == 0, "a second session: %s", report);
    concord_free(report);
    report = NULL;
    FAILS(concord_sync_peer(store, "no port here:", &report, error), CONCORD_INVALID_INPUT, "invalidInput", "is not HOST:PORT");
    FAILS(concord_sync_peer(store, "127.0.0.1:1", &report, error), CONCORD_CLOSED, "closed", "cannot connect to 127.0.0.1:1");

    /* The shared folder, encrypted with the key. */
    OK(concord_sync_folder(store, folder, &report, error));
    CHECK(number(report, "publishedOperations") > 0 && strstr(report, "\"warnings\":[]") && !strstr(report, "\"publishedFile\":null"),
          "folder report %s", report);
    concord_free(report);
    report = NULL;
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/none", folder);
    FAILS(concord_sync_folder(store, missing, &report, error), CONCORD_FOLDER, "folder", "does not exist");

    /* A bundle of its own, encrypted. */
    OK(concord_export(store, out, "{}", CONCORD_EXPORT_ENCRYPTED, &report, error));
    CHECK(number(report, "operations") > 0 && number(report, "bytes") > 0 && strstr(report, "\"sha256\":\""), "export summary %s", report);
    concord_free(report);
    report = NULL;
    FAILS(concord_export(store, out, "[1]", 0, &report, error), CONCORD_NOT_A_VERSION_VECTOR, "notAVersionVector", "version vector");
    FAILS(concord_export(store, out, NULL, 4, &report, error), CONCORD_MISUSE, "misuse", "unknown flags");

    char *dump = NULL;
    OK(concord_dump(store, &dump, error));
    OK(concord_store_close(store, error));
    if (dump) printf("%s\n", dump);
    concord_free(dump);
    if (failures) fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
