/*
 * concord_jni.c: the JNI glue between dev.concord.Native (bindings/jvm/src) and concord.h.
 *
 * Each native method converts its Java arguments to what the C call takes, makes the call, and
 * turns the result back into Java values:
 * - Text crosses as real UTF-8 (concord.h's rule), converted here by hand from and to UTF-16.
 *   JNI's own GetStringUTFChars and NewStringUTF use "modified UTF-8", which writes U+0000 and
 *   characters beyond U+FFFF differently, so an emoji would reach the library as invalid text.
 * - A failure status becomes a thrown dev.concord.ConcordException (code, name, message), and the
 *   concord_error is freed. Text the library returned is freed with concord_free.
 * - Handles are passed through as they are: the library itself refuses a closed or unknown handle
 *   with CONCORD_MISUSE, which becomes the exception like any other failure.
 *
 * Subscriptions (a store's changes, a live sync): the context the library hands back to the
 * callback is a JNI global reference to a dev.concord.EventDispatcher, made by Native.newContext
 * and deleted by Native.deleteContext (the Java side deletes it only once no callback can run).
 * The callback runs on a thread of the library's, which is attached to the JVM as a daemon the
 * first time and detached when it exits.
 *
 * The file stands alone (concord.h and jni.h only), so that an Android build compiles it as it is.
 */
#include <jni.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "concord.h"

/* MARK: What JNI_OnLoad caches
 *
 * Classes and methods are looked up once, when the library is loaded, on a thread that can see the
 * app's classes. A library thread attached later finds only the system classes through FindClass
 * (on Android especially), so the callback must never look a class up itself. */

static JavaVM *java_vm;
static jclass exception_class;          /* dev.concord.ConcordException */
static jmethodID exception_constructor; /* ConcordException(int code, String name, String message) */
static jclass dispatcher_class;         /* dev.concord.EventDispatcher */
static jmethodID dispatcher_deliver;    /* void deliver(String eventJson) */
static jmethodID dispatcher_end;        /* void end(int code, String name, String message) */
static jclass out_of_memory_class;      /* java.lang.OutOfMemoryError */

/* Holds, on each library thread this file attached, the JavaVM, so that the thread is detached
 * when it exits (the key's destructor runs then). */
static pthread_key_t attached_thread_key;

static void detach_exiting_thread(void *vm) {
    (*(JavaVM *)vm)->DetachCurrentThread((JavaVM *)vm);
}

/* A global reference to the class `name`, or NULL with an exception pending. */
static jclass global_class(JNIEnv *env, const char *name) {
    jclass local = (*env)->FindClass(env, name);
    if (local == NULL) return NULL;
    jclass global = (*env)->NewGlobalRef(env, local);
    (*env)->DeleteLocalRef(env, local);
    return global;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    (void)reserved;
    JNIEnv *env;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
    java_vm = vm;
    /* Each looked up only if the one before was found: no JNI call with an exception pending. */
    if ((exception_class = global_class(env, "dev/concord/ConcordException")) == NULL) return JNI_ERR;
    if ((dispatcher_class = global_class(env, "dev/concord/EventDispatcher")) == NULL) return JNI_ERR;
    if ((out_of_memory_class = global_class(env, "java/lang/OutOfMemoryError")) == NULL) return JNI_ERR;
    exception_constructor =
        (*env)->GetMethodID(env, exception_class, "<init>", "(ILjava/lang/String;Ljava/lang/String;)V");
    dispatcher_deliver = (*env)->GetMethodID(env, dispatcher_class, "deliver", "(Ljava/lang/String;)V");
    dispatcher_end = (*env)->GetMethodID(env, dispatcher_class, "end", "(ILjava/lang/String;Ljava/lang/String;)V");
    if (exception_constructor == NULL || dispatcher_deliver == NULL || dispatcher_end == NULL) return JNI_ERR;
    if (pthread_key_create(&attached_thread_key, detach_exiting_thread) != 0) return JNI_ERR;
    return JNI_VERSION_1_6;
}

/* MARK: Text */

/* A Java String of the UTF-8 text `text`, or NULL for NULL (and NULL with an OutOfMemoryError
 * pending if it cannot be made). The library's text is valid UTF-8; a byte that is not would
 * become U+FFFD rather than be dropped. */
static jstring java_string(JNIEnv *env, const char *text) {
    if (text == NULL) return NULL;
    const unsigned char *bytes = (const unsigned char *)text;
    size_t length = strlen(text);
    /* A UTF-8 byte never makes more than one UTF-16 unit, and four bytes make at most two. */
    jchar *units = malloc((length + 1) * sizeof(jchar));
    if (units == NULL) {
        (*env)->ThrowNew(env, out_of_memory_class, "no memory for a text of the library");
        return NULL;
    }
    size_t count = 0;
    for (size_t i = 0; i < length;) {
        uint32_t lead = bytes[i];
        uint32_t code_point = 0xFFFD;
        size_t size = 1;
        if (lead < 0x80) {
            code_point = lead;
        } else if (lead >= 0xC2 && lead <= 0xF4) {
            size_t needed = lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
            uint32_t value = lead & (needed == 2 ? 0x1F : needed == 3 ? 0x0F : 0x07);
            size_t taken = 1;
            while (taken < needed && i + taken < length && (bytes[i + taken] & 0xC0) == 0x80) {
                value = (value << 6) | (bytes[i + taken] & 0x3F);
                taken++;
            }
            uint32_t smallest = needed == 2 ? 0x80 : needed == 3 ? 0x800 : 0x10000;
            if (taken == needed && value >= smallest && value <= 0x10FFFF && (value < 0xD800 || value > 0xDFFF)) {
                code_point = value;
                size = needed;
            }
        }
        if (code_point >= 0x10000) {
            code_point -= 0x10000;
            units[count++] = (jchar)(0xD800 + (code_point >> 10));
            units[count++] = (jchar)(0xDC00 + (code_point & 0x3FF));
        } else {
            units[count++] = (jchar)code_point;
        }
        i += size;
    }
    jstring string = (*env)->NewString(env, units, (jsize)count);
    free(units);
    return string;
}

/* Throws a ConcordException with the library's code, name and message. */
static void throw_concord_exception(JNIEnv *env, int32_t code, const char *name, const char *message) {
    jstring java_name = java_string(env, name);
    if (java_name == NULL) return;
    jstring java_message = java_string(env, message);
    if (java_message == NULL) return;
    jobject exception = (*env)->NewObject(env, exception_class, exception_constructor, (jint)code, java_name, java_message);
    if (exception != NULL) (*env)->Throw(env, (jthrowable)exception);
}

/* Refuses text the library could not be given, as the library refuses text that is not UTF-8. */
static void throw_not_text(JNIEnv *env, const char *what, const char *problem, jsize index) {
    char message[256];
    snprintf(message, sizeof message, "%s %s at index %d", what, problem, (int)index);
    throw_concord_exception(env, CONCORD_INVALID_INPUT, "invalidInput", message);
}

/* Converts `string` to a new NUL-terminated UTF-8 text in *out (NULL for a null string), which the
 * caller frees with free(). Returns 0 with an exception pending when it cannot: a U+0000, which
 * would cut the C text short (a JSON text never holds one raw: Json escapes it), or a surrogate
 * without its pair, which no UTF-8 can encode. `what` names the text in the message. */
static int utf8_text(JNIEnv *env, jstring string, const char *what, char **out) {
    *out = NULL;
    if (string == NULL) return 1;
    jsize length = (*env)->GetStringLength(env, string);
    const jchar *units = (*env)->GetStringChars(env, string, NULL);
    if (units == NULL) return 0;
    /* One UTF-16 unit makes at most three bytes; a surrogate pair, two units, makes four. */
    unsigned char *bytes = malloc((size_t)length * 3 + 1);
    if (bytes == NULL) {
        (*env)->ReleaseStringChars(env, string, units);
        (*env)->ThrowNew(env, out_of_memory_class, "no memory to convert a text to UTF-8");
        return 0;
    }
    size_t count = 0;
    for (jsize i = 0; i < length; i++) {
        uint32_t code_point = units[i];
        if (code_point == 0) {
            throw_not_text(env, what, "holds U+0000, which C text cannot carry,", i);
            goto refused;
        }
        if (code_point >= 0xD800 && code_point <= 0xDBFF && i + 1 < length && units[i + 1] >= 0xDC00 &&
            units[i + 1] <= 0xDFFF) {
            code_point = 0x10000 + ((code_point - 0xD800) << 10) + (units[i + 1] - 0xDC00u);
            i++;
        } else if (code_point >= 0xD800 && code_point <= 0xDFFF) {
            throw_not_text(env, what, "is not valid Unicode: it has a surrogate without its pair", i);
            goto refused;
        }
        if (code_point < 0x80) {
            bytes[count++] = (unsigned char)code_point;
        } else if (code_point < 0x800) {
            bytes[count++] = (unsigned char)(0xC0 | (code_point >> 6));
            bytes[count++] = (unsigned char)(0x80 | (code_point & 0x3F));
        } else if (code_point < 0x10000) {
            bytes[count++] = (unsigned char)(0xE0 | (code_point >> 12));
            bytes[count++] = (unsigned char)(0x80 | ((code_point >> 6) & 0x3F));
            bytes[count++] = (unsigned char)(0x80 | (code_point & 0x3F));
        } else {
            bytes[count++] = (unsigned char)(0xF0 | (code_point >> 18));
            bytes[count++] = (unsigned char)(0x80 | ((code_point >> 12) & 0x3F));
            bytes[count++] = (unsigned char)(0x80 | ((code_point >> 6) & 0x3F));
            bytes[count++] = (unsigned char)(0x80 | (code_point & 0x3F));
        }
    }
    (*env)->ReleaseStringChars(env, string, units);
    bytes[count] = 0;
    *out = (char *)bytes;
    return 1;

refused:
    (*env)->ReleaseStringChars(env, string, units);
    free(bytes);
    return 0;
}

/* MARK: Results */

/* Returns 1 when `status` is CONCORD_OK; otherwise throws the error as a ConcordException, frees
 * it, and returns 0. */
static int succeeded(JNIEnv *env, int32_t status, concord_error *error) {
    if (status == CONCORD_OK) return 1;
    if (error != NULL) {
        throw_concord_exception(env, concord_error_code(error), concord_error_name(error), concord_error_message(error));
        concord_error_free(error);
    } else {
        /* concord.h always sets the error when it is asked for one; this only guards against a
         * library that would not. */
        throw_concord_exception(env, status, "unknown", "the library failed without an error");
    }
    return 0;
}

/* The Java String of text the library returned, which is freed; NULL when the call failed. */
static jstring text_result(JNIEnv *env, int32_t status, concord_error *error, char *text) {
    if (!succeeded(env, status, error)) return NULL;
    jstring string = java_string(env, text);
    concord_free(text);
    return string;
}

/* MARK: Stores */

JNIEXPORT jint JNICALL Java_dev_concord_Native_abiVersion(JNIEnv *env, jclass type) {
    (void)env, (void)type;
    return concord_abi_version();
}

JNIEXPORT jlong JNICALL Java_dev_concord_Native_storeOpen(JNIEnv *env, jclass type, jstring path, jint flags) {
    (void)type;
    char *path_text;
    if (!utf8_text(env, path, "the path", &path_text)) return 0;
    concord_store store = 0;
    concord_error *error = NULL;
    int32_t status = concord_store_open(path_text, (uint32_t)flags, &store, &error);
    free(path_text);
    return succeeded(env, status, error) ? (jlong)store : 0;
}

JNIEXPORT jlong JNICALL Java_dev_concord_Native_storeCreate(JNIEnv *env, jclass type, jstring path, jstring name) {
    (void)type;
    char *path_text, *name_text;
    if (!utf8_text(env, path, "the path", &path_text)) return 0;
    if (!utf8_text(env, name, "the name", &name_text)) {
        free(path_text);
        return 0;
    }
    concord_store store = 0;
    concord_error *error = NULL;
    int32_t status = concord_store_create(path_text, name_text, &store, &error);
    free(path_text);
    free(name_text);
    return succeeded(env, status, error) ? (jlong)store : 0;
}

JNIEXPORT void JNICALL Java_dev_concord_Native_storeClose(JNIEnv *env, jclass type, jlong store) {
    (void)type;
    concord_error *error = NULL;
    succeeded(env, concord_store_close((concord_store)store, &error), error);
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_replicaId(JNIEnv *env, jclass type, jlong store) {
    (void)type;
    char *id = NULL;
    concord_error *error = NULL;
    int32_t status = concord_store_replica_id((concord_store)store, &id, &error);
    return text_result(env, status, error, id);
}

/* MARK: Writes
 *
 * Most writes take one record id and maybe one more text; these two helpers make their calls. */

typedef int32_t (*id_call)(concord_store, const char *, concord_error **);
typedef int32_t (*id_text_call)(concord_store, const char *, const char *, concord_error **);

static void call_with_id(JNIEnv *env, id_call call, jlong store, jstring id) {
    char *id_text;
    if (!utf8_text(env, id, "the id", &id_text)) return;
    concord_error *error = NULL;
    int32_t status = call((concord_store)store, id_text, &error);
    free(id_text);
    succeeded(env, status, error);
}

static void call_with_id_and_text(JNIEnv *env, id_text_call call, jlong store, jstring id, jstring text,
                                  const char *what) {
    char *id_text, *other_text;
    if (!utf8_text(env, id, "the id", &id_text)) return;
    if (!utf8_text(env, text, what, &other_text)) {
        free(id_text);
        return;
    }
    concord_error *error = NULL;
    int32_t status = call((concord_store)store, id_text, other_text, &error);
    free(id_text);
    free(other_text);
    succeeded(env, status, error);
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_reminderAdd(JNIEnv *env, jclass type, jlong store, jstring draft) {
    (void)type;
    char *draft_text;
    if (!utf8_text(env, draft, "the reminder", &draft_text)) return NULL;
    char *id = NULL;
    concord_error *error = NULL;
    int32_t status = concord_reminder_add((concord_store)store, draft_text, &id, &error);
    free(draft_text);
    return text_result(env, status, error, id);
}

JNIEXPORT void JNICALL Java_dev_concord_Native_reminderEdit(JNIEnv *env, jclass type, jlong store, jstring id,
                                                            jstring patch) {
    (void)type;
    call_with_id_and_text(env, concord_reminder_edit, store, id, patch, "the patch");
}

JNIEXPORT void JNICALL Java_dev_concord_Native_reminderComplete(JNIEnv *env, jclass type, jlong store, jstring id) {
    (void)type;
    call_with_id(env, concord_reminder_complete, store, id);
}

JNIEXPORT void JNICALL Java_dev_concord_Native_reminderReopen(JNIEnv *env, jclass type, jlong store, jstring id) {
    (void)type;
    call_with_id(env, concord_reminder_reopen, store, id);
}

JNIEXPORT void JNICALL Java_dev_concord_Native_reminderSnooze(JNIEnv *env, jclass type, jlong store, jstring id,
                                                              jstring until) {
    (void)type;
    call_with_id_and_text(env, concord_reminder_snooze, store, id, until, "the end of the snooze");
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_noteAdd(JNIEnv *env, jclass type, jlong store, jstring draft) {
    (void)type;
    char *draft_text;
    if (!utf8_text(env, draft, "the note", &draft_text)) return NULL;
    char *id = NULL;
    concord_error *error = NULL;
    int32_t status = concord_note_add((concord_store)store, draft_text, &id, &error);
    free(draft_text);
    return text_result(env, status, error, id);
}

JNIEXPORT void JNICALL Java_dev_concord_Native_noteEdit(JNIEnv *env, jclass type, jlong store, jstring id,
                                                        jstring patch) {
    (void)type;
    call_with_id_and_text(env, concord_note_edit, store, id, patch, "the patch");
}

JNIEXPORT void JNICALL Java_dev_concord_Native_recordTag(JNIEnv *env, jclass type, jlong store, jstring id,
                                                         jstring add, jstring remove) {
    (void)type;
    char *id_text, *add_text, *remove_text;
    if (!utf8_text(env, id, "the id", &id_text)) return;
    if (!utf8_text(env, add, "the tags to add", &add_text)) {
        free(id_text);
        return;
    }
    if (!utf8_text(env, remove, "the tags to remove", &remove_text)) {
        free(id_text);
        free(add_text);
        return;
    }
    concord_error *error = NULL;
    int32_t status = concord_record_tag((concord_store)store, id_text, add_text, remove_text, &error);
    free(id_text);
    free(add_text);
    free(remove_text);
    succeeded(env, status, error);
}

JNIEXPORT void JNICALL Java_dev_concord_Native_recordDelete(JNIEnv *env, jclass type, jlong store, jstring id) {
    (void)type;
    call_with_id(env, concord_record_delete, store, id);
}

JNIEXPORT void JNICALL Java_dev_concord_Native_recordRestore(JNIEnv *env, jclass type, jlong store, jstring id) {
    (void)type;
    call_with_id(env, concord_record_restore, store, id);
}

/* A call on every record of a kind, which counts them. */
typedef int32_t (*kind_call)(concord_store, int32_t, int64_t *, concord_error **);

static jlong call_with_kind(JNIEnv *env, kind_call call, jlong store, jint kind) {
    int64_t count = 0;
    concord_error *error = NULL;
    int32_t status = call((concord_store)store, kind, &count, &error);
    return succeeded(env, status, error) ? (jlong)count : 0;
}

JNIEXPORT jlong JNICALL Java_dev_concord_Native_deleteAll(JNIEnv *env, jclass type, jlong store, jint kind) {
    (void)type;
    return call_with_kind(env, concord_delete_all, store, kind);
}

JNIEXPORT void JNICALL Java_dev_concord_Native_recordPurge(JNIEnv *env, jclass type, jlong store, jstring id) {
    (void)type;
    call_with_id(env, concord_record_purge, store, id);
}

JNIEXPORT jlong JNICALL Java_dev_concord_Native_purgeAll(JNIEnv *env, jclass type, jlong store, jint kind) {
    (void)type;
    return call_with_kind(env, concord_purge_all, store, kind);
}

/* MARK: Reads */

JNIEXPORT jstring JNICALL Java_dev_concord_Native_reminders(JNIEnv *env, jclass type, jlong store, jint flags) {
    (void)type;
    char *json = NULL;
    concord_error *error = NULL;
    int32_t status = concord_reminders((concord_store)store, (uint32_t)flags, &json, &error);
    return text_result(env, status, error, json);
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_dueReminders(JNIEnv *env, jclass type, jlong store, jstring at) {
    (void)type;
    char *at_text;
    if (!utf8_text(env, at, "the time", &at_text)) return NULL;
    char *json = NULL;
    concord_error *error = NULL;
    int32_t status = concord_due_reminders((concord_store)store, at_text, &json, &error);
    free(at_text);
    return text_result(env, status, error, json);
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_notes(JNIEnv *env, jclass type, jlong store, jint flags) {
    (void)type;
    char *json = NULL;
    concord_error *error = NULL;
    int32_t status = concord_notes((concord_store)store, (uint32_t)flags, &json, &error);
    return text_result(env, status, error, json);
}

/* The reads that take one record id. */
typedef int32_t (*id_read)(concord_store, const char *, char **, concord_error **);

static jstring read_with_id(JNIEnv *env, id_read read, jlong store, jstring id) {
    char *id_text;
    if (!utf8_text(env, id, "the id", &id_text)) return NULL;
    char *json = NULL;
    concord_error *error = NULL;
    int32_t status = read((concord_store)store, id_text, &json, &error);
    free(id_text);
    return text_result(env, status, error, json);
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_show(JNIEnv *env, jclass type, jlong store, jstring id) {
    (void)type;
    return read_with_id(env, concord_show, store, id);
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_history(JNIEnv *env, jclass type, jlong store, jstring id) {
    (void)type;
    return read_with_id(env, concord_history, store, id);
}

/* The reads of the whole store. */
typedef int32_t (*store_read)(concord_store, char **, concord_error **);

static jstring read_store(JNIEnv *env, store_read read, jlong store) {
    char *json = NULL;
    concord_error *error = NULL;
    int32_t status = read((concord_store)store, &json, &error);
    return text_result(env, status, error, json);
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_conflicts(JNIEnv *env, jclass type, jlong store) {
    (void)type;
    return read_store(env, concord_conflicts, store);
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_status(JNIEnv *env, jclass type, jlong store) {
    (void)type;
    return read_store(env, concord_status, store);
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_dump(JNIEnv *env, jclass type, jlong store) {
    (void)type;
    return read_store(env, concord_dump, store);
}

/* MARK: Exchange
 *
 * Each takes the store and one text, and returns a report's JSON text. */

typedef int32_t (*text_exchange)(concord_store, const char *, char **, concord_error **);

static jstring exchange_with_text(JNIEnv *env, text_exchange call, jlong store, jstring text, const char *what) {
    char *text_utf8;
    if (!utf8_text(env, text, what, &text_utf8)) return NULL;
    char *report = NULL;
    concord_error *error = NULL;
    int32_t status = call((concord_store)store, text_utf8, &report, &error);
    free(text_utf8);
    return text_result(env, status, error, report);
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_merge(JNIEnv *env, jclass type, jlong store, jstring paths) {
    (void)type;
    return exchange_with_text(env, concord_merge, store, paths, "the paths");
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_export(JNIEnv *env, jclass type, jlong store, jstring path,
                                                         jstring since, jint flags) {
    (void)type;
    char *path_text, *since_text;
    if (!utf8_text(env, path, "the path", &path_text)) return NULL;
    if (!utf8_text(env, since, "the version vector", &since_text)) {
        free(path_text);
        return NULL;
    }
    char *summary = NULL;
    concord_error *error = NULL;
    int32_t status = concord_export((concord_store)store, path_text, since_text, (uint32_t)flags, &summary, &error);
    free(path_text);
    free(since_text);
    return text_result(env, status, error, summary);
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_syncFolder(JNIEnv *env, jclass type, jlong store, jstring folder) {
    (void)type;
    return exchange_with_text(env, concord_sync_folder, store, folder, "the folder");
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_syncPeer(JNIEnv *env, jclass type, jlong store, jstring address) {
    (void)type;
    return exchange_with_text(env, concord_sync_peer, store, address, "the address");
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_syncRelay(JNIEnv *env, jclass type, jlong store, jstring url) {
    (void)type;
    return exchange_with_text(env, concord_sync_relay, store, url, "the URL");
}

/* MARK: Keys */

JNIEXPORT jstring JNICALL Java_dev_concord_Native_keyGenerate(JNIEnv *env, jclass type, jlong store, jint flags) {
    (void)type;
    char *key = NULL;
    concord_error *error = NULL;
    int32_t status = concord_key_generate((concord_store)store, (uint32_t)flags, &key, &error);
    return text_result(env, status, error, key);
}

JNIEXPORT void JNICALL Java_dev_concord_Native_keySet(JNIEnv *env, jclass type, jlong store, jstring key, jint flags) {
    (void)type;
    char *key_text;
    if (!utf8_text(env, key, "the key", &key_text)) return;
    concord_error *error = NULL;
    int32_t status = concord_key_set((concord_store)store, key_text, (uint32_t)flags, &error);
    free(key_text);
    succeeded(env, status, error);
}

JNIEXPORT jstring JNICALL Java_dev_concord_Native_keyId(JNIEnv *env, jclass type, jlong store) {
    (void)type;
    return read_store(env, concord_key_id, store);
}

/* MARK: Subscriptions */

/* The JNIEnv of the calling library thread, attaching it to the JVM the first time (as a daemon,
 * so that it never keeps the JVM from exiting); NULL if it cannot be attached. */
static JNIEnv *attached_env(void) {
    JNIEnv *env = NULL;
    jint got = (*java_vm)->GetEnv(java_vm, (void **)&env, JNI_VERSION_1_6);
    if (got == JNI_OK) return env;
    if (got != JNI_EDETACHED) return NULL;
    JavaVMAttachArgs arguments = {JNI_VERSION_1_6, "concord-callback", NULL};
    /* `(void *)&env`: OpenJDK's jni.h takes a void **, Android's a JNIEnv **. */
    if ((*java_vm)->AttachCurrentThreadAsDaemon(java_vm, (void *)&env, &arguments) != JNI_OK) return NULL;
    pthread_setspecific(attached_thread_key, java_vm);
    return env;
}

/* The concord_event_callback of every subscription: hands the event, or the end of the stream, to
 * the EventDispatcher that `context` refers to. */
static void on_event(void *context, const char *event, const concord_error *end) {
    JNIEnv *env = attached_env();
    if (env == NULL) {
        fprintf(stderr, "concord_jni: a library thread could not attach to the JVM; an event was not delivered\n");
        return;
    }
    /* This thread never returns to Java, which would free the local references made here: the
     * frame frees them when the callback is done. */
    if ((*env)->PushLocalFrame(env, 8) != JNI_OK) {
        (*env)->ExceptionClear(env);
        return;
    }
    jobject dispatcher = (jobject)context;
    if (event != NULL) {
        jstring json = java_string(env, event);
        if (json != NULL) (*env)->CallVoidMethod(env, dispatcher, dispatcher_deliver, json);
    } else if (end == NULL) {
        (*env)->CallVoidMethod(env, dispatcher, dispatcher_end, (jint)CONCORD_OK, NULL, NULL);
    } else {
        jstring name = java_string(env, concord_error_name(end));
        jstring message = name ? java_string(env, concord_error_message(end)) : NULL;
        if (message != NULL) {
            (*env)->CallVoidMethod(env, dispatcher, dispatcher_end, (jint)concord_error_code(end), name, message);
        }
    }
    /* EventDispatcher catches what a listener throws; what is left here is the dispatcher's own
     * failure (no memory, say). It must not stay pending on a thread Java never returns to, nor
     * end the process: it is printed and cleared. */
    if ((*env)->ExceptionCheck(env)) {
        fprintf(stderr, "concord_jni: delivering an event failed:\n");
        (*env)->ExceptionDescribe(env);
        (*env)->ExceptionClear(env);
    }
    (*env)->PopLocalFrame(env, NULL);
}

JNIEXPORT jlong JNICALL Java_dev_concord_Native_newContext(JNIEnv *env, jclass type, jobject dispatcher) {
    (void)type;
    jobject global = (*env)->NewGlobalRef(env, dispatcher);
    if (global == NULL && !(*env)->ExceptionCheck(env)) {
        (*env)->ThrowNew(env, out_of_memory_class, "no memory for a JNI global reference");
    }
    return (jlong)(intptr_t)global;
}

JNIEXPORT void JNICALL Java_dev_concord_Native_deleteContext(JNIEnv *env, jclass type, jlong context) {
    (void)type;
    if (context != 0) (*env)->DeleteGlobalRef(env, (jobject)(intptr_t)context);
}

/* The calls that subscribe with one text (a version vector, an address, a URL) and the callback. */
typedef int32_t (*subscribe_call)(concord_store, const char *, concord_event_callback, void *, concord_subscription *,
                                  concord_error **);

static jlong subscribe_with_text(JNIEnv *env, subscribe_call call, jlong store, jstring text, const char *what,
                                 jlong context) {
    char *text_utf8;
    if (!utf8_text(env, text, what, &text_utf8)) return 0;
    concord_subscription subscription = 0;
    concord_error *error = NULL;
    int32_t status = call((concord_store)store, text_utf8, on_event, (void *)(intptr_t)context, &subscription, &error);
    free(text_utf8);
    return succeeded(env, status, error) ? (jlong)subscription : 0;
}

JNIEXPORT jlong JNICALL Java_dev_concord_Native_observe(JNIEnv *env, jclass type, jlong store, jstring since,
                                                        jlong context) {
    (void)type;
    return subscribe_with_text(env, concord_observe, store, since, "the version vector", context);
}

JNIEXPORT jlong JNICALL Java_dev_concord_Native_syncPeerLive(JNIEnv *env, jclass type, jlong store, jstring address,
                                                             jlong context) {
    (void)type;
    return subscribe_with_text(env, concord_sync_peer_live, store, address, "the address", context);
}

JNIEXPORT jlong JNICALL Java_dev_concord_Native_syncRelayLive(JNIEnv *env, jclass type, jlong store, jstring url,
                                                              jlong context) {
    (void)type;
    return subscribe_with_text(env, concord_sync_relay_live, store, url, "the URL", context);
}

JNIEXPORT void JNICALL Java_dev_concord_Native_cancel(JNIEnv *env, jclass type, jlong subscription) {
    (void)type;
    concord_error *error = NULL;
    succeeded(env, concord_cancel((concord_subscription)subscription, &error), error);
}
