/* The floor Concord's merge is measured against: SQLite inserting each operation as
 * one row of a table without an index, through one prepared statement in one transaction, WAL
 * and synchronous = FULL as Concord's stores. It reads the operations file operations.py writes
 * (not timed), then times the inserts and the COMMIT, and prints one line:
 *
 *     sqlite-insert OPS operations in SECONDS s: RATE operations/s
 *
 * Usage: sqlite-insert OPERATIONS.tsv DATABASE   (DATABASE must not exist)
 * Build: cc -O2 -o sqlite-insert sqlite_insert.c -lsqlite3 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct operation { char *replica, *record, *field, *value; long long seq, integer; char type; };

static void fail(const char *what, sqlite3 *db) {
    fprintf(stderr, "sqlite-insert: %s: %s\n", what, db ? sqlite3_errmsg(db) : "");
    exit(1);
}

/* Undoes operations.py's escapes in place. */
static void unescape(char *text) {
    char *out = text;
    for (char *in = text; *in; in++) {
        if (*in == '\\' && in[1]) {
            in++;
            *out++ = *in == 't' ? '\t' : *in == 'n' ? '\n' : *in;
        } else {
            *out++ = *in;
        }
    }
    *out = 0;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: sqlite-insert OPERATIONS.tsv DATABASE\n"); return 64; }
    FILE *input = fopen(argv[1], "r");
    if (!input) { perror(argv[1]); return 1; }
    size_t count = 0, capacity = 1 << 20;
    struct operation *ops = malloc(capacity * sizeof *ops);
    char *line = NULL;
    size_t length = 0;
    while (getline(&line, &length, input) > 0) {
        line[strcspn(line, "\n")] = 0;
        char *fields[6];
        char *rest = line;
        for (int i = 0; i < 6; i++) fields[i] = strsep(&rest, "\t");
        if (!fields[5]) { fprintf(stderr, "sqlite-insert: line %zu has fewer than 6 fields\n", count + 1); return 1; }
        if (count == capacity) ops = realloc(ops, (capacity *= 2) * sizeof *ops);
        unescape(fields[5]);
        ops[count++] = (struct operation){
            strdup(fields[0]), strdup(fields[2]), strdup(fields[3]), strdup(fields[5]), atoll(fields[1]), atoll(fields[5]), fields[4][0]};
    }
    fclose(input);

    sqlite3 *db;
    if (sqlite3_open(argv[2], &db) != SQLITE_OK) fail("open", db);
    if (sqlite3_exec(db,
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
            "CREATE TABLE oplog (replica TEXT, seq INTEGER, record TEXT, field TEXT, value)",
            NULL, NULL, NULL) != SQLITE_OK) fail("create", db);
    sqlite3_stmt *insert;
    if (sqlite3_prepare_v2(db, "INSERT INTO oplog VALUES (?, ?, ?, ?, ?)", -1, &insert, NULL) != SQLITE_OK) fail("prepare", db);

    double start = now();
    if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) fail("begin", db);
    for (size_t i = 0; i < count; i++) {
        struct operation *op = &ops[i];
        sqlite3_bind_text(insert, 1, op->replica, -1, SQLITE_STATIC);
        sqlite3_bind_int64(insert, 2, op->seq);
        sqlite3_bind_text(insert, 3, op->record, -1, SQLITE_STATIC);
        sqlite3_bind_text(insert, 4, op->field, -1, SQLITE_STATIC);
        if (op->type == 'i') sqlite3_bind_int64(insert, 5, op->integer);
        else if (op->type == 's') sqlite3_bind_text(insert, 5, op->value, -1, SQLITE_STATIC);
        else sqlite3_bind_null(insert, 5);
        if (sqlite3_step(insert) != SQLITE_DONE) fail("insert", db);
        sqlite3_reset(insert);
    }
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) fail("commit", db);
    double seconds = now() - start;
    printf("sqlite-insert %zu operations in %.3f s: %.0f operations/s\n", count, seconds, count / seconds);
    sqlite3_finalize(insert);
    sqlite3_close(db);
    return 0;
}
