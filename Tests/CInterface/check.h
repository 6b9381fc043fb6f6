/*
 * Checks for the C programs over concord.h that CInterfaceTests runs: each failed check prints
 * its line and counts, and the program exits 1 if any failed.
 */
#ifndef CHECK_H
#define CHECK_H

#include "concord.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define CHECK(condition, ...)                                                  \
    do {                                                                       \
        if (!(condition)) {                                                    \
            failures++;                                                        \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #condition); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
        }                                                                      \
    } while (0)

/* Calls that must succeed: on failure, says why and counts it. */
#define OK(call)                                                               \
    do {                                                                       \
        concord_error *ok_error = NULL;                                        \
        int32_t ok_status = call_with(&ok_error, call);                        \
        CHECK(ok_status == CONCORD_OK, "%s -> %d %s: %s", #call, ok_status,    \
              ok_error ? concord_error_name(ok_error) : "?",                   \
              ok_error ? concord_error_message(ok_error) : "(no error)");      \
        concord_error_free(ok_error);                                          \
    } while (0)
#define call_with(error_pointer, call) ((void)(error = (error_pointer)), (call))

/* `error` is what the calls under test write their error through. */
static concord_error **error;

/* Expects the call to fail with `status` and a message holding `fragment`. */
static void expect_failure(const char *what, int32_t got, concord_error *err, int32_t status, const char *name,
                           const char *fragment) {
    CHECK(got == status, "%s: status %d, expected %d", what, got, status);
    CHECK(err != NULL, "%s: no error object", what);
    if (err == NULL) return;
    CHECK(concord_error_code(err) == status, "%s: error code %d", what, concord_error_code(err));
    CHECK(strcmp(concord_error_name(err), name) == 0, "%s: error name %s, expected %s", what, concord_error_name(err), name);
    CHECK(strstr(concord_error_message(err), fragment) != NULL, "%s: message '%s' lacks '%s'", what,
          concord_error_message(err), fragment);
    concord_error_free(err);
}
#define FAILS(call, status, name, fragment)                                    \
    do {                                                                       \
        concord_error *fail_error = NULL;                                      \
        int32_t fail_status = call_with(&fail_error, call);                    \
        expect_failure(#call, fail_status, fail_error, status, name, fragment); \
    } while (0)

#endif /* CHECK_H */
