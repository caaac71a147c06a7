/* SPDX-License-Identifier: MIT */
/*
 * glm-server's /slots, as llama-server's:
 *
 *   GET  /slots                        every slot and its state
 *   GET  /slots?fail_on_no_slot=1      503 when no slot is idle
 *   POST /slots/{id}?action=save       {"filename": F}: the slot's KV cache to
 *                                      --slot-save-path/F
 *   POST /slots/{id}?action=restore    {"filename": F}: back into slot id
 *   POST /slots/{id}?action=erase      the slot's cache forgotten
 *
 * The actions need --slot-save-path (else 501, as llama-server) and an
 * idle slot (503 while it runs a request). A file name is one plain name
 * ([A-Za-z0-9._-], not starting with '.', at most 200 bytes): no path, so
 * nothing outside the directory is read or written. A save is written to a
 * temporary file in the directory, synced, and renamed over F: F is either
 * the old file or the whole new one, never a part. A restore checks that
 * the file is a slot file, of this model's package (its header CRC32C and
 * size), complete and undamaged (CRC32C), and that libtx accepts the state
 * (geometry, KV cache types, context); any failure is a 400 naming it and
 * leaves the slot as it was.
 *
 * The slot's session is read or written by the HTTP thread while the slot
 * is marked busy (struct slot.action): the scheduler gives it no request
 * meanwhile, and libtx's model lock orders it with the device passes.
 *
 * File: struct slot_file (below), then n_tokens int32 ids (the tokens whose
 * KV the slot holds: the prefix cache's record), then libtx's state blob
 * (glm_session_state_save).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tx-internal/tx_model.h>
#include <tx-internal/tx_smd.h>

#include "server.h"

#define SLOT_MAGIC "GLMSLOT\n"
#define SLOT_VERSION 1
#define SLOT_NAME_MAX 200

struct slot_file {
    char magic[8];
    uint32_t version;
    uint32_t pkg_crc;  /* the package's header_crc */
    uint64_t pkg_size; /* ... and file_size */
    char model[128];   /* the package's model name (for the messages) */
    int32_t n_tokens;
    uint32_t crc; /* CRC32C of what follows the header */
    uint64_t blob_size;
};

static int reply_error(char **reply, int status, const char *param, const char *msg)
{
    *reply = api_error_json_param(status, param, "%s", msg);
    return status;
}

/* The loaded package's identity: its header CRC and size (0, or -1) */
static int package_id(struct srv *S, uint32_t *crc, uint64_t *size)
{
    struct tx_smd_header h;
    FILE *f = fopen(S->o.checkpoint, "rb");
    int ok = f && fread(&h, sizeof(h), 1, f) == 1 && !memcmp(h.magic, TX_SMD_MAGIC, 8);
    if (f)
        fclose(f);
    if (!ok)
        return -1;
    *crc = h.header_crc;
    *size = h.file_size;
    return 0;
}

static int name_ok(const char *n)
{
    size_t l = strlen(n);
    if (!l || l > SLOT_NAME_MAX || n[0] == '.')
        return 0;
    for (size_t i = 0; i < l; i++)
        if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') ||
              (n[i] >= '0' && n[i] <= '9') || n[i] == '.' || n[i] == '_' || n[i] == '-'))
            return 0;
    return 1;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ---- GET /slots --------------------------------------------------------- */

static json_object *slot_json(struct srv *S, int i)
{
    const struct slot *sl = &S->slots[i];
    const struct request *r = sl->r;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_int(i));
    json_object_object_add(o, "id_task", r ? json_object_new_string(r->id) : NULL);
    json_object_object_add(o, "n_ctx", json_object_new_int(S->o.ctx_size));
    json_object_object_add(o, "speculative", json_object_new_boolean(0));
    json_object_object_add(o, "is_processing", json_object_new_boolean(r != NULL));
    const char *state = sl->action ? "busy (/slots action)"
                        : !r ? "idle"
                        : r->state == RQ_PREFILL ? "prefill"
                                                 : "decode";
    json_object_object_add(o, "state", json_object_new_string(state));
    json_object_object_add(o, "n_cached", json_object_new_int(sl->n_hist > 0 ? sl->n_hist : 0));
    if (r) {
        json_object *p = json_object_new_object();
        json_object_object_add(p, "temperature", json_object_new_double(r->smp.temperature));
        json_object_object_add(p, "top_k", json_object_new_int(r->smp.top_k));
        json_object_object_add(p, "top_p", json_object_new_double(r->smp.top_p));
        json_object_object_add(p, "min_p", json_object_new_double(r->smp.min_p));
        json_object_object_add(p, "seed", json_object_new_int64((int64_t)r->smp.seed));
        json_object_object_add(p, "n_predict", json_object_new_int(r->max_tokens));
        json_object_object_add(p, "stream", json_object_new_boolean(r->stream));
        json_object_object_add(o, "params", p);
        json_object *nt = json_object_new_object();
        json_object_object_add(nt, "has_next_token", json_object_new_boolean(r->state != RQ_DONE));
        json_object_object_add(nt, "n_decoded", json_object_new_int(r->n_completion));
        json_object_object_add(nt, "n_remain",
                               json_object_new_int(r->max_tokens - r->n_completion));
        json_object_object_add(o, "next_token", nt);
        json_object_object_add(o, "n_prompt_tokens", json_object_new_int(r->n_prompt));
        json_object_object_add(o, "n_prompt_tokens_processed", json_object_new_int(r->n_fed));
    }
    return o;
}

static int slots_list(struct srv *S, const char *fail_on_no_slot, char **reply)
{
    json_object *a = json_object_new_array();
    int idle = 0;
    pthread_mutex_lock(&S->mu);
    for (int i = 0; i < S->o.parallel; i++) {
        json_object_array_add(a, slot_json(S, i));
        idle += !S->slots[i].r && !S->slots[i].action;
    }
    pthread_mutex_unlock(&S->mu);
    if (fail_on_no_slot && strcmp(fail_on_no_slot, "0") && strcmp(fail_on_no_slot, "false") &&
        !idle) {
        json_object_put(a);
        return reply_error(reply, 503, NULL, "no slot available");
    }
    *reply = strdup(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN));
    json_object_put(a);
    return 200;
}

/* ---- the actions ---------------------------------------------------------- */

static int slot_save(struct srv *S, int id, const char *name, char **reply)
{
    struct slot *sl = &S->slots[id];
    struct slot_file h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, SLOT_MAGIC, 8);
    h.version = SLOT_VERSION;
    snprintf(h.model, sizeof(h.model), "%s", S->model_name);
    if (package_id(S, &h.pkg_crc, &h.pkg_size))
        return reply_error(reply, 500, NULL, "cannot read the package's header to name it");
    if (sl->n_hist < 0 || sl->n_hist != glm_session_pos(sl->s))
        return reply_error(reply, 500, NULL, "the slot's cache record is not usable; erase it");
    double t0 = srv_now();
    void *blob = NULL;
    size_t bsize = 0;
    if (glm_session_state_save(sl->s, &blob, &bsize)) {
        char msg[300];
        snprintf(msg, sizeof(msg), "cannot read the slot's state: %s", tx_last_error());
        return reply_error(reply, 500, NULL, msg);
    }
    h.n_tokens = sl->n_hist;
    h.blob_size = bsize;
    size_t tbytes = (size_t)h.n_tokens * sizeof(int32_t);
    h.crc = tx_crc32c(tx_crc32c(0, sl->hist ? (const void *)sl->hist : "", tbytes), blob, bsize);

    char path[PATH_MAX], tmp[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", S->o.slot_save_path, name);
    snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", S->o.slot_save_path, name);
    int fd = mkstemp(tmp), err = fd < 0;
    if (!err)
        err = write_all(fd, &h, sizeof(h)) || write_all(fd, sl->hist, tbytes) ||
              write_all(fd, blob, bsize) || fsync(fd);
    int e = errno;
    if (fd >= 0 && close(fd))
        err = 1;
    if (!err && rename(tmp, path)) {
        err = 1;
        e = errno;
    }
    free(blob);
    if (err) {
        if (fd >= 0)
            unlink(tmp); /* no partial file is left */
        char msg[PATH_MAX + 64];
        snprintf(msg, sizeof(msg), "cannot write %s: %s", path, strerror(e));
        return reply_error(reply, 500, NULL, msg);
    }
    int dfd = open(S->o.slot_save_path, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { /* the rename itself durable */
        fsync(dfd);
        close(dfd);
    }
    json_object *o = json_object_new_object(), *t = json_object_new_object();
    json_object_object_add(o, "id_slot", json_object_new_int(id));
    json_object_object_add(o, "filename", json_object_new_string(name));
    json_object_object_add(o, "n_saved", json_object_new_int(h.n_tokens));
    json_object_object_add(o, "n_written", json_object_new_int64((int64_t)(sizeof(h) + tbytes +
                                                                           bsize)));
    json_object_object_add(t, "save_ms", json_object_new_double((srv_now() - t0) * 1e3));
    json_object_object_add(o, "timings", t);
    *reply = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return 200;
}

/* The file's bytes (malloc()ed), or a status with *reply set */
static int read_slot_file(const char *path, const char *name, char **data, size_t *size,
                          char **reply)
{
    char msg[PATH_MAX + 96];
    int fd = open(path, O_RDONLY | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        snprintf(msg, sizeof(msg), "cannot read '%s' in --slot-save-path: %s", name,
                 fd >= 0 ? "not a regular file" : strerror(e));
        return reply_error(reply, fd < 0 && e == ENOENT ? 404 : 400, "filename", msg);
    }
    *size = (size_t)st.st_size;
    *data = malloc(*size ? *size : 1);
    size_t got = 0;
    while (*data && got < *size) {
        ssize_t n = read(fd, *data + got, *size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!*data || got != *size) {
        snprintf(msg, sizeof(msg), "cannot read '%s': %s", name,
                 *data ? "short read" : "out of memory");
        free(*data);
        *data = NULL;
        return reply_error(reply, 500, NULL, msg);
    }
    return 0;
}

static int slot_restore(struct srv *S, int id, const char *name, char **reply)
{
    struct slot *sl = &S->slots[id];
    char path[PATH_MAX], msg[PATH_MAX + 320] = "";
    snprintf(path, sizeof(path), "%s/%s", S->o.slot_save_path, name);
    double t0 = srv_now();
    char *data = NULL;
    size_t size = 0;
    int st = read_slot_file(path, name, &data, &size, reply);
    if (st)
        return st;
    struct slot_file h;
    memset(&h, 0, sizeof(h));
    if (size >= sizeof(h))
        memcpy(&h, data, sizeof(h));
    uint32_t crc = 0;
    uint64_t psize = 0;
    const char *why = NULL;
    if (size < sizeof(h) || memcmp(h.magic, SLOT_MAGIC, 8))
        why = "not a glm-server slot file (bad magic or too short)";
    else if (h.version != SLOT_VERSION)
        why = "a slot file of another version";
    else if (package_id(S, &crc, &psize))
        why = "the loaded package's header cannot be read to compare";
    else if (h.pkg_crc != crc || h.pkg_size != psize) {
        h.model[sizeof(h.model) - 1] = 0;
        snprintf(msg, sizeof(msg),
                 "'%s' was saved from another model: '%s' (package CRC32C %08x, %llu bytes); "
                 "this server serves '%s' (%08x, %llu bytes)",
                 name, h.model, h.pkg_crc, (unsigned long long)h.pkg_size, S->model_name, crc,
                 (unsigned long long)psize);
    } else if (h.n_tokens < 0 || h.n_tokens > S->o.ctx_size)
        why = "its token count is outside the slot's context";
    else if (h.blob_size != size - sizeof(h) - (size_t)h.n_tokens * sizeof(int32_t) ||
             size < sizeof(h) + (size_t)h.n_tokens * sizeof(int32_t))
        why = "its size is wrong: truncated or damaged";
    else if (tx_crc32c(0, data + sizeof(h), size - sizeof(h)) != h.crc)
        why = "its checksum does not match: damaged";
    if (why)
        snprintf(msg, sizeof(msg), "cannot restore '%s': %s", name, why);
    int32_t *hist = NULL;
    if (!why && !msg[0]) {
        hist = malloc(((size_t)h.n_tokens + 1) * sizeof(*hist));
        if (hist)
            memcpy(hist, data + sizeof(h), (size_t)h.n_tokens * sizeof(*hist));
        const char *blob = data + sizeof(h) + (size_t)h.n_tokens * sizeof(int32_t);
        if (!hist)
            snprintf(msg, sizeof(msg), "cannot restore '%s': out of memory", name);
        else if (glm_session_state_load(sl->s, blob, h.blob_size))
            snprintf(msg, sizeof(msg), "cannot restore '%s': %s", name, tx_last_error());
        else if (glm_session_pos(sl->s) != h.n_tokens)
            snprintf(msg, sizeof(msg), "cannot restore '%s': it holds %d positions for %d tokens",
                     name, glm_session_pos(sl->s), h.n_tokens);
    }
    free(data);
    if (msg[0] || why) {
        free(hist);
        return reply_error(reply, 400, "filename", msg);
    }
    free(sl->hist); /* the slot's cache record: the restored tokens */
    sl->hist = hist;
    sl->n_hist = h.n_tokens;
    sl->cap_hist = h.n_tokens + 1;
    json_object *o = json_object_new_object(), *t = json_object_new_object();
    json_object_object_add(o, "id_slot", json_object_new_int(id));
    json_object_object_add(o, "filename", json_object_new_string(name));
    json_object_object_add(o, "n_restored", json_object_new_int(h.n_tokens));
    json_object_object_add(o, "n_read", json_object_new_int64((int64_t)size));
    json_object_object_add(t, "restore_ms", json_object_new_double((srv_now() - t0) * 1e3));
    json_object_object_add(o, "timings", t);
    *reply = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return 200;
}

static int slot_erase(struct srv *S, int id, char **reply)
{
    struct slot *sl = &S->slots[id];
    int n = sl->n_hist > 0 ? sl->n_hist : 0;
    glm_session_reset(sl->s);
    sl->n_hist = 0;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id_slot", json_object_new_int(id));
    json_object_object_add(o, "n_erased", json_object_new_int(n));
    *reply = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return 200;
}

/* POST /slots/{id}?action=...: checks, then the action on the idle slot */
static int slot_action(struct srv *S, const char *idtext, const char *action, const char *body,
                       size_t len, char **reply)
{
    if (!S->o.slot_save_path)
        return reply_error(reply, 501, NULL,
                           "this server does not support slot actions: start it with "
                           "--slot-save-path DIR");
    char *end;
    long id = strtol(idtext, &end, 10);
    if (!*idtext || *end || id < 0 || id >= S->o.parallel) {
        char msg[160];
        snprintf(msg, sizeof(msg), "no slot '%.40s': slots are 0..%d", idtext, S->o.parallel - 1);
        return reply_error(reply, 400, "id_slot", msg);
    }
    int save = action && !strcmp(action, "save"), restore = action && !strcmp(action, "restore");
    if (!save && !restore && !(action && !strcmp(action, "erase")))
        return reply_error(reply, 400, "action", "'action' must be save, restore or erase");
    char name[SLOT_NAME_MAX + 1] = "";
    if (save || restore) {
        json_object *o = len && len < 65536 ? json_tokener_parse(body) : NULL, *f = NULL;
        int ok = o && json_object_object_get_ex(o, "filename", &f) &&
                 json_object_is_type(f, json_type_string) &&
                 name_ok(json_object_get_string(f));
        if (ok)
            snprintf(name, sizeof(name), "%s", json_object_get_string(f));
        json_object_put(o);
        if (!ok)
            return reply_error(reply, 400, "filename",
                               "the body must be {\"filename\": NAME}, NAME one file name of "
                               "letters, digits, '.', '_', '-' (not starting with '.', at most "
                               "200 bytes; no path)");
    }
    if (!dev_model_get(S))
        return reply_error(reply, 503, NULL, "the model is being reloaded; retry later");
    pthread_mutex_lock(&S->mu);
    struct slot *sl = &S->slots[id];
    int busy = sl->r != NULL || sl->action || S->dev_lost;
    if (!busy)
        sl->action = 1; /* the scheduler leaves it alone */
    pthread_mutex_unlock(&S->mu);
    int st;
    if (busy) {
        char msg[96];
        snprintf(msg, sizeof(msg), "slot %ld is busy; retry when it is idle", id);
        st = reply_error(reply, 503, NULL, msg);
    } else {
        st = save ? slot_save(S, (int)id, name, reply)
             : restore ? slot_restore(S, (int)id, name, reply)
                       : slot_erase(S, (int)id, reply);
        pthread_mutex_lock(&S->mu);
        sl->action = 0;
        pthread_cond_signal(&S->cv); /* a queued request may take it now */
        pthread_mutex_unlock(&S->mu);
    }
    dev_model_put(S);
    return st;
}

int api_slots(struct srv *S, const char *url, const char *method, const char *action,
              const char *fail_on_no_slot, const char *body, size_t len, char **reply)
{
    if (!strcmp(url, "/slots")) {
        if (strcmp(method, "GET"))
            return reply_error(reply, 405, NULL, "/slots: use GET");
        if (S->o.no_slots)
            return reply_error(reply, 501, NULL,
                               "this server does not support the slots endpoint (--no-slots)");
        return slots_list(S, fail_on_no_slot, reply);
    }
    if (strcmp(method, "POST"))
        return reply_error(reply, 405, NULL, "/slots/{id}: use POST with ?action=...");
    return slot_action(S, url + strlen("/slots/"), action, body, len, reply);
}
