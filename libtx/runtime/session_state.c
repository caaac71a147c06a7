/* SPDX-License-Identifier: MIT */
/*
 * A session's state as bytes (glm_session_state_save / _load, libtx 2.7):
 * its token ids and the KV cache of positions [0, pos) -- every layer's K,
 * V and key-selector rows, in the cache's own element types, read from and
 * written to the cache buffer through its host mapping -- so that a
 * session of the same model and cache types continues exactly where the
 * saved one stood (glm-server's POST /slots/{id}?action=save|restore).
 *
 * Blob: a header (struct state_hdr, little-endian), then pos int32 ids,
 * then for each layer its K, V and key-selector bytes. The header names the
 * model's geometry and the cache types; a blob of another geometry or
 * types, a truncated or overlong one, is refused with the reason.
 */
#include "runtime/rt_internal.h"

#include <tx-internal/tx_arch.h>

#include <stdlib.h>
#include <string.h>

#include <tx/tx_dtype.h>

#define STATE_MAGIC "TXKVST\r\n"
#define STATE_VERSION 1

struct state_hdr {
    char magic[8];
    uint32_t version;
    uint32_t arch;
    uint32_t layers, hidden, vocab, heads;
    uint16_t dtype[3]; /* K, V, key selector */
    uint16_t rsvd0;
    int32_t pos;
    uint32_t rsvd1;
    uint64_t payload; /* bytes after the header */
};

/* The bytes of layer l's three regions for n positions */
static void layer_bytes(const glm_session_t *s, int l, uint64_t n, uint64_t b[3])
{
    const struct glm_config *c = &s->m->cfg;
    struct tx_arch_kv kv;
    tx_arch_get(c->arch)->kv_geometry(c, l, &kv);
    b[0] = tx_dtype_row_bytes(s->kv_dtype, n * kv.k);
    b[1] = tx_dtype_row_bytes(s->v_dtype, n * kv.v);
    b[2] = kv.ik && s->ik_off[l] != UINT64_MAX ? tx_dtype_row_bytes(s->ik_dtype, n * kv.ik) : 0;
}

static uint64_t payload_of(const glm_session_t *s, int pos)
{
    uint64_t n = (uint64_t)pos * sizeof(int32_t);
    for (int l = 0; l < s->m->cfg.num_hidden_layers; l++) {
        uint64_t b[3];
        layer_bytes(s, l, (uint64_t)pos, b);
        n += b[0] + b[1] + b[2];
    }
    return n;
}

static void header_of(const glm_session_t *s, struct state_hdr *h)
{
    const struct glm_config *c = &s->m->cfg;
    memset(h, 0, sizeof(*h));
    memcpy(h->magic, STATE_MAGIC, 8);
    h->version = STATE_VERSION;
    h->arch = (uint32_t)c->arch;
    h->layers = (uint32_t)c->num_hidden_layers;
    h->hidden = (uint32_t)c->hidden_size;
    h->vocab = (uint32_t)c->vocab_size;
    h->heads = (uint32_t)c->num_attention_heads;
    h->dtype[0] = s->kv_dtype;
    h->dtype[1] = s->v_dtype;
    h->dtype[2] = s->ik_dtype;
    h->pos = s->pos;
}

TX_API int glm_session_state_save(glm_session_t *s, void **blob, size_t *size)
{
    if (!s || !blob || !size)
        return tx_error(TX_EINVAL, "glm_session_state_save: NULL argument");
    *blob = NULL;
    *size = 0;
    pthread_mutex_lock(&s->m->lock);
    struct state_hdr h;
    header_of(s, &h);
    h.payload = payload_of(s, s->pos);
    uint8_t *b = malloc(sizeof(h) + h.payload);
    if (!b) {
        pthread_mutex_unlock(&s->m->lock);
        return tx_error(TX_ENOMEM, "glm_session_state_save: %llu bytes: out of host memory",
                        (unsigned long long)(sizeof(h) + h.payload));
    }
    memcpy(b, &h, sizeof(h));
    uint8_t *p = b + sizeof(h);
    memcpy(p, s->toks, (size_t)s->pos * sizeof(int32_t));
    p += (size_t)s->pos * sizeof(int32_t);
    for (int l = 0; l < s->m->cfg.num_hidden_layers; l++) {
        uint64_t n[3], off[3] = {s->k_off[l], s->v_off[l], s->ik_off[l]};
        layer_bytes(s, l, (uint64_t)s->pos, n);
        for (int k = 0; k < 3; k++) {
            if (n[k])
                memcpy(p, (const uint8_t *)s->kv_map + off[k], n[k]);
            p += n[k];
        }
    }
    pthread_mutex_unlock(&s->m->lock);
    *blob = b;
    *size = sizeof(h) + h.payload;
    return TX_OK;
}

TX_API int glm_session_state_load(glm_session_t *s, const void *blob, size_t size)
{
    const char *who = "glm_session_state_load";
    if (!s || (!blob && size))
        return tx_error(TX_EINVAL, "%s: NULL argument", who);
    struct state_hdr h, mine;
    if (size < sizeof(h))
        return tx_error(TX_EINVAL, "%s: %zu bytes is shorter than a session state's header (%zu)",
                        who, size, sizeof(h));
    memcpy(&h, blob, sizeof(h));
    if (memcmp(h.magic, STATE_MAGIC, 8))
        return tx_error(TX_EINVAL, "%s: not a session state (bad magic)", who);
    if (h.version != STATE_VERSION)
        return tx_error(TX_EINVAL, "%s: session state version %u; this libtx reads version %d",
                        who, h.version, STATE_VERSION);
    pthread_mutex_lock(&s->m->lock);
    header_of(s, &mine);
    int rc = TX_OK;
    if (h.arch != mine.arch || h.layers != mine.layers || h.hidden != mine.hidden ||
        h.vocab != mine.vocab || h.heads != mine.heads)
        rc = tx_error(TX_EINVAL,
                      "%s: the state is of another model (architecture %u, %u layers, hidden "
                      "%u, vocabulary %u; this session's model: %u, %u, %u, %u)",
                      who, h.arch, h.layers, h.hidden, h.vocab, mine.arch, mine.layers,
                      mine.hidden, mine.vocab);
    else if (memcmp(h.dtype, mine.dtype, sizeof(h.dtype)))
        rc = tx_error(TX_EINVAL,
                      "%s: the state's KV cache types (K %s, V %s, key selector %s) differ from "
                      "this session's (K %s, V %s, key selector %s)",
                      who, tx_dtype_name(h.dtype[0]), tx_dtype_name(h.dtype[1]),
                      tx_dtype_name(h.dtype[2]), tx_dtype_name(mine.dtype[0]),
                      tx_dtype_name(mine.dtype[1]), tx_dtype_name(mine.dtype[2]));
    else if (h.pos < 0 || h.pos > s->n_ctx)
        rc = tx_error(TX_EINVAL, "%s: the state holds %d positions; this session's context is %d",
                      who, h.pos, s->n_ctx);
    else if (h.payload != payload_of(s, h.pos) || size - sizeof(h) != h.payload)
        rc = tx_error(TX_EINVAL,
                      "%s: the state's size is wrong (%zu bytes after the header, %llu "
                      "recorded, %llu expected for %d positions): truncated or not a state",
                      who, size - sizeof(h), (unsigned long long)h.payload,
                      (unsigned long long)payload_of(s, h.pos), h.pos);
    const uint8_t *p = (const uint8_t *)blob + sizeof(h);
    for (int i = 0; !rc && i < h.pos; i++) {
        int32_t id;
        memcpy(&id, p + (size_t)i * sizeof(id), sizeof(id));
        if (id < 0 || id >= (int32_t)mine.vocab)
            rc = tx_error(TX_EINVAL, "%s: token %d at position %d is outside the vocabulary", who,
                          id, i);
    }
    if (!rc) {
        memcpy(s->toks, p, (size_t)h.pos * sizeof(int32_t));
        p += (size_t)h.pos * sizeof(int32_t);
        for (int l = 0; l < s->m->cfg.num_hidden_layers; l++) {
            uint64_t n[3], off[3] = {s->k_off[l], s->v_off[l], s->ik_off[l]};
            layer_bytes(s, l, (uint64_t)h.pos, n);
            for (int k = 0; k < 3; k++) {
                if (n[k])
                    memcpy((uint8_t *)s->kv_map + off[k], p, n[k]);
                p += n[k];
            }
        }
        s->pos = h.pos;
    }
    pthread_mutex_unlock(&s->m->lock);
    return rc;
}

/*
 * A range of a session's KV rows as bytes (glm_session_kv_read / _write,
 * libtx 2.9): positions [pos, pos + n) of every layer's caches (the MTP
 * layer's included), copied through the cache's host mapping in the
 * cache's own types -- no conversion, so rows written back are the bits
 * the pass wrote. glm-server's block prefix cache.
 *
 * Bytes: for each layer (rt_layers), its K rows, V rows and key-selector
 * rows of the n positions. A row of a block type (Q8_0, Q4_0) is whole
 * blocks (the cache types' check: runs of 32 elements), so a position's
 * bytes are the same for every position.
 */
static void range_bytes(const glm_session_t *s, int l, uint64_t b[3])
{
    const struct glm_config *c = &s->m->cfg;
    struct tx_arch_kv kv;
    tx_arch_get(c->arch)->kv_geometry(c, l, &kv);
    b[0] = tx_dtype_row_bytes(s->kv_dtype, kv.k);
    b[1] = tx_dtype_row_bytes(s->v_dtype, kv.v);
    b[2] = kv.ik && s->ik_off[l] != UINT64_MAX ? tx_dtype_row_bytes(s->ik_dtype, kv.ik) : 0;
}

TX_API uint64_t glm_session_kv_bytes(const glm_session_t *s, int n)
{
    if (!s || n <= 0)
        return 0;
    uint64_t per = 0;
    for (int l = 0; l < rt_layers(s->m); l++) {
        uint64_t b[3];
        range_bytes(s, l, b);
        per += b[0] + b[1] + b[2];
    }
    return per * (uint64_t)n;
}

/* The range's checks (model lock held); 0 or the error */
static int range_check(const glm_session_t *s, const char *who, int pos, int n, int end_max,
                       size_t size)
{
    if (pos < 0 || n <= 0 || pos > end_max - n)
        return tx_error(TX_EINVAL, "%s: positions [%d, %d + %d) are outside [0, %d)", who, pos,
                        pos, n, end_max);
    uint64_t need = glm_session_kv_bytes(s, n);
    if (size < need)
        return tx_error(TX_EINVAL, "%s: %zu bytes for %d positions; they take %llu", who, size,
                        n, (unsigned long long)need);
    return TX_OK;
}

/* Copy positions [pos, pos + n) from the cache to out, or (out NULL) from
 * in into the cache */
static void range_copy(glm_session_t *s, int pos, int n, uint8_t *out, const uint8_t *in)
{
    for (int l = 0; l < rt_layers(s->m); l++) {
        uint64_t b[3], off[3] = {s->k_off[l], s->v_off[l], s->ik_off[l]};
        range_bytes(s, l, b);
        for (int k = 0; k < 3; k++) {
            if (!b[k])
                continue;
            uint8_t *c = (uint8_t *)s->kv_map + off[k] + b[k] * (uint64_t)pos;
            size_t len = (size_t)(b[k] * (uint64_t)n);
            if (out) {
                memcpy(out, c, len);
                out += len;
            } else {
                memcpy(c, in, len);
                in += len;
            }
        }
    }
}

TX_API int glm_session_kv_read(glm_session_t *s, int pos, int n, void *buf, size_t size)
{
    const char *who = "glm_session_kv_read";
    if (!s || !buf)
        return tx_error(TX_EINVAL, "%s: NULL argument", who);
    pthread_mutex_lock(&s->m->lock);
    int rc = range_check(s, who, pos, n, s->pos, size);
    if (!rc)
        range_copy(s, pos, n, buf, NULL);
    pthread_mutex_unlock(&s->m->lock);
    return rc;
}

TX_API int glm_session_kv_write(glm_session_t *s, int pos, const int32_t *ids, int n,
                                const void *buf, size_t size)
{
    const char *who = "glm_session_kv_write";
    if (!s || !buf || !ids)
        return tx_error(TX_EINVAL, "%s: NULL argument", who);
    pthread_mutex_lock(&s->m->lock);
    int rc = TX_OK;
    if (pos > s->pos)
        rc = tx_error(TX_EINVAL, "%s: position %d is past the session's position %d (a gap)",
                      who, pos, s->pos);
    if (!rc)
        rc = range_check(s, who, pos, n, s->n_ctx, size);
    for (int i = 0; !rc && i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->m->cfg.vocab_size)
            rc = tx_error(TX_EINVAL, "%s: token %d at position %d is outside the vocabulary", who,
                          ids[i], pos + i);
    if (!rc) {
        range_copy(s, pos, n, NULL, buf);
        memcpy(s->toks + pos, ids, (size_t)n * sizeof(int32_t));
        s->pos = pos + n;
    }
    pthread_mutex_unlock(&s->m->lock);
    return rc;
}
