/*
 * The C interface's live syncs (concord.h, "Live sync"): CInterfaceTests compiles this program
 * against the built libConcordC and runs it beside `syncctl serve` and `syncctl relay`. It keeps
 * a live session with the peer and sees its writes reach the served store, syncs through the
 * relay once and then live, and prints its store's dump last.
 *
 * Usage: live_test DIRECTORY PEER_ADDRESS KEY SERVED_STORE RELAY_URL
 */
#define _DEFAULT_SOURCE
#include "concord.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

/* The events one subscription heard, kept under a lock: the callback runs on a library thread. */
struct heard {
    pthread_mutex_t lock;
    int events;
    int live;
    int synced_uploads;
    int ended;
    char last[8192];
};

static void on_event(void *context, const char *event, const concord_error *end) {
    struct heard *heard = context;
    pthread_mutex_lock(&heard->lock);
    if (event == NULL) {
        heard->ended++;
        fprintf(stderr, "a live sync ended by itself: %s\n", end ? concord_error_message(end) : "(no error)");
    } else {
        heard->events++;
        snprintf(heard->last, sizeof heard->last, "%s", event);
        if (strstr(event, "\"event\":\"live\"")) heard->live++;
        if (strstr(event, "\"event\":\"synced\"") && !strstr(event, "\"uploadedFiles\":0")) heard->synced_uploads++;
    }
    pthread_mutex_unlock(&heard->lock);
}

/* Reads one counter of `heard` under its lock. */
static int count(struct heard *heard, const int *counter) {
    pthread_mutex_lock(&heard->lock);
    int value = *counter;
    pthread_mutex_unlock(&heard->lock);
    return value;
}

/* Waits up to 20 s for `counter` to reach `least`. */
static int wait_for(struct heard *heard, const int *counter, int least) {
    for (int i = 0; i < 2000; i++) {
        if (count(heard, counter) >= least) return 1;
        usleep(10 * 1000);
    }
    return 0;
}

/* Waits up to 20 s for a reminder titled `title` in `store`. */
static int wait_for_reminder(concord_store store, const char *title) {
    char pattern[256];
    snprintf(pattern, sizeof pattern, "\"title\":\"%s\"", title);
    for (int i = 0; i < 400; i++) {
        char *json = NULL;
        concord_error *err = NULL;
        if (concord_reminders(store, 0, &json, &err) == CONCORD_OK) {
            int found = strstr(json, pattern) != NULL;
            concord_free(json);
            if (found) return 1;
        } else {
            concord_error_free(err);
        }
        usleep(50 * 1000);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: live_test DIRECTORY PEER_ADDRESS KEY SERVED_STORE RELAY_URL\n");
        return 64;
    }
    const char *address = argv[2], *key = argv[3], *served_path = argv[4], *url = argv[5];
    char path[4096];
    snprintf(path, sizeof path, "%s/l.db", argv[1]);

    concord_store store = 0, served = 0;
    OK(concord_store_create(path, "l", &store, error));
    OK(concord_key_set(store, key, 0, error));
    /* The served store, read beside `syncctl serve`, which writes it. */
    OK(concord_store_open(served_path, CONCORD_OPEN_READ_ONLY, &served, error));
    char *id = NULL, *report = NULL;

    /* A live session: what this store commits reaches the peer as it lands. */
    struct heard peer = { .lock = PTHREAD_MUTEX_INITIALIZER };
    concord_subscription live = 0;
    FAILS(concord_sync_peer_live(store, "nowhere:", on_event, &peer, &live, error), CONCORD_INVALID_INPUT, "invalidInput", "is not HOST:PORT");
    OK(concord_sync_peer_live(store, address, on_event, &peer, &live, error));
    CHECK(wait_for(&peer, &peer.live, 1), "no live event in 20 s; last: %s", peer.last);
    OK(concord_reminder_add(store, "{\"title\":\"live from l\"}", &id, error));
    concord_free(id);
    id = NULL;
    CHECK(wait_for_reminder(served, "live from l"), "the served store did not get the live write in 20 s");
    OK(concord_cancel(live, error));
    int events = count(&peer, &peer.events);
    OK(concord_reminder_add(store, "{\"title\":\"after the live session\"}", &id, error));
    concord_free(id);
    id = NULL;
    usleep(300 * 1000);
    CHECK(count(&peer, &peer.events) == events, "an event after the live session was cancelled");
    CHECK(count(&peer, &peer.ended) == 0, "the live session ended by itself");

    /* The relay: once, then live. */
    FAILS(concord_sync_relay(store, "ftp://x", &report, error), CONCORD_INVALID_INPUT, "invalidInput", "ftp://x");
    OK(concord_sync_relay(store, url, &report, error));
    CHECK(report && strstr(report, "\"uploadedFiles\":1") && strstr(report, "\"folder\":{"), "relay report %s", report);
    concord_free(report);
    report = NULL;
    struct heard relay = { .lock = PTHREAD_MUTEX_INITIALIZER };
    OK(concord_sync_relay_live(store, url, on_event, &relay, &live, error));
    OK(concord_reminder_add(store, "{\"title\":\"through the relay\"}", &id, error));
    concord_free(id);
    id = NULL;
    CHECK(wait_for(&relay, &relay.synced_uploads, 1), "no sync that uploaded in 20 s; last: %s", relay.last);
    OK(concord_cancel(live, error));
    CHECK(count(&relay, &relay.ended) == 0, "the relay's live sync ended by itself");

    char *dump = NULL;
    OK(concord_dump(store, &dump, error));
    OK(concord_store_close(store, error));
    OK(concord_store_close(served, error));
    if (dump) printf("%s\n", dump);
    concord_free(dump);
    if (failures) fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
