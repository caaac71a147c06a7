/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: the decode graph, built once and patched per token.
 *
 * Two decode passes of the same sessions under the same plan run the same
 * commands except for a few fields that follow each session's position:
 * where the new K/V or latent row goes in the cache (CONVERT/COPY dst),
 * how many keys ATTENTION and DSA_INDEX see (kv_len, q_pos0), SAMPLE's
 * counter and the length of its penalty history. So the first decode pass
 * of a session set is recorded while it is built: its jobs' command bytes
 * are kept in device memory (one BO per job) with their BO lists, and the
 * blocks note every position-dependent field (rt_dg_field). A later pass
 * with the same key (plan, rows, sessions' caches, sampling, activation
 * buffer) writes the new values into those fields through the mapping and
 * submits the same BOs with tx_submit_raw: no command is rebuilt and no
 * command byte is copied.
 *
 * A pass also depends on its positions through choices of structure (DSA:
 * whether a query sees more than index_topk keys). The blocks note these
 * as thresholds (rt_dg_threshold); a pass on the other side of one is
 * built again and recorded anew.
 *
 * The model keeps up to RT_DG_SLOTS graphs, most recently used first: the
 * passes of speculative decoding (runtime/spec.c) take turns -- the
 * one-token decode, the verify pass of k + 1 rows (one segment, each row
 * sampling the position after its own) and the MTP layer's passes -- and
 * each replays its own graph. Every field of a multi-row segment follows
 * its first position linearly (cache rows, kv_len, q_pos0, SAMPLE's
 * counter), so the same patching serves them. TX_DECODE_GRAPH=off builds every pass;
 * =verify builds every pass as well and compares it, byte for byte, with
 * the patched graph before submitting (tests/unit/test_decode_graph.c).
 */
#include "runtime/decode_graph.h"

#include "device/device_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_dtype.h>

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

/* graphs a model keeps: the decode step, and speculative decoding's verify
 * and MTP passes for each draft length */
#define RT_DG_SLOTS 12

struct dg_seg {
    uintptr_t kv_bo;
    uint64_t kv_addr, kv_size;
    int n_ctx;
    uint16_t dt[3];
    int row0, n;
    int pos0; /* position of the recorded pass */
};

/* A field of job `job` at byte `off`: width 4 or 8 bytes; its value is
 * v0 + coef * (pos0 - recorded pos0) of segment seg, or (clamp) min(pos0 +
 * coef, cap). */
struct dg_site {
    int job, seg;
    uint32_t off;
    uint8_t width, clamp;
    int64_t coef;
    uint64_t v0, cap;
};

struct dg_thr {
    int seg, thr, above;
};

struct dg_pairs {
    int seg, sel_k;
};

struct dg_job {
    tx_bo_t *bo;
    uint8_t *map;
    size_t len;
    struct tx_bo_use *uses;
    unsigned nuses;
};

struct rt_dgraph {
    struct rt_dgraph *next; /* the model's graphs, most recently used first */
    /* the key */
    glm_precision_plan_t plan;
    int T, lrow0, lrows, n_seg, n_sampling, n_ban;
    int mtp, mtp_tail, row_pos;
    int *row_seg; /* [lrows] when the pass names each row's segment */
    uint32_t submit_flags;
    uintptr_t act;
    uint64_t act_addr;
    struct dg_seg *seg;
    struct glm_sampling *sampling;
    int32_t *ban;
    /* what the pass runs */
    struct dg_job *jobs;
    int njobs, cap_jobs;
    struct dg_site *sites;
    int nsites, cap_sites;
    struct dg_thr *thr;
    int nthr, cap_thr;
    struct dg_pairs *pairs;
    int npairs, cap_pairs;
    unsigned total; /* commands */
    int bad;        /* recording failed (out of memory, a non-linear field) */
};

static void dg_free(struct rt_dgraph *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->njobs; i++) {
        if (d->jobs[i].bo)
            tx_bo_free(d->jobs[i].bo);
        free(d->jobs[i].uses);
    }
    free(d->jobs);
    free(d->sites);
    free(d->thr);
    free(d->pairs);
    free(d->seg);
    free(d->sampling);
    free(d->ban);
    free(d->row_seg);
    free(d);
}

void rt_dgraph_drop(glm_model_t *m)
{
    while (m->dg) {
        struct rt_dgraph *d = m->dg;
        m->dg = d->next;
        dg_free(d);
    }
}

static int grow(void **p, int *cap, int n, size_t elem)
{
    if (n < *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 64;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q)
        return TX_ENOMEM;
    *p = q;
    *cap = nc;
    return 0;
}

static int same_sampling(const struct glm_sampling *a, const struct glm_sampling *b)
{
    return a->temperature == b->temperature && a->top_k == b->top_k && a->top_p == b->top_p &&
           a->seed == b->seed && a->min_p == b->min_p && a->repeat_penalty == b->repeat_penalty &&
           a->presence_penalty == b->presence_penalty &&
           a->frequency_penalty == b->frequency_penalty && a->repeat_last_n == b->repeat_last_n &&
           a->order == b->order;
}

static void seg_key(const struct rt_seg *sg, struct dg_seg *k)
{
    const glm_session_t *s = sg->s;
    memset(k, 0, sizeof(*k));
    k->kv_bo = (uintptr_t)s->kv_bo;
    if (s->kv_bo)
        tx_bo_addr(s->kv_bo, &k->kv_addr);
    k->kv_size = s->kv_size;
    k->n_ctx = s->n_ctx;
    k->dt[0] = s->kv_dtype;
    k->dt[1] = s->v_dtype;
    k->dt[2] = s->ik_dtype;
    k->row0 = sg->row0;
    k->n = sg->n;
    k->pos0 = sg->pos0;
}

/* Whether graph d was recorded for pass g (its key, and every threshold on
 * the same side at the new positions). */
static int matches(const struct rt_dgraph *d, const struct gctx *g)
{
    const glm_model_t *m = g->m;
    const struct rt_fwd *f = g->f;
    if (memcmp(&d->plan, g->plan, sizeof(d->plan)) || d->T != f->T || d->lrow0 != f->lrow0 ||
        d->lrows != f->lrows || d->n_seg != f->n_seg || d->n_ban != f->n_ban ||
        d->submit_flags != m->submit_flags || d->act != (uintptr_t)g->act || d->mtp != f->mtp ||
        d->mtp_tail != f->mtp_tail || d->row_pos != f->row_pos || !d->row_seg != !f->row_seg)
        return 0;
    if (d->row_seg && memcmp(d->row_seg, f->row_seg, (size_t)d->lrows * sizeof(int)))
        return 0;
    uint64_t act_addr = 0;
    tx_bo_addr(g->act, &act_addr);
    if (act_addr != d->act_addr)
        return 0;
    int ns = f->sampling ? f->n_sampling : 0;
    if (ns != d->n_sampling)
        return 0;
    for (int i = 0; i < ns; i++)
        if (!same_sampling(&d->sampling[i], &f->sampling[i]))
            return 0;
    if (d->n_ban && memcmp(d->ban, f->ban, (size_t)d->n_ban * sizeof(*d->ban)))
        return 0;
    for (int i = 0; i < f->n_seg; i++) {
        /* the whole key but the position (seg_key zeroes the padding) */
        struct dg_seg k;
        seg_key(&f->seg[i], &k);
        k.pos0 = d->seg[i].pos0;
        if (memcmp(&k, &d->seg[i], sizeof(k)))
            return 0;
    }
    for (int i = 0; i < d->nthr; i++) {
        const struct rt_seg *sg = &f->seg[d->thr[i].seg];
        if ((sg->pos0 + sg->n > d->thr[i].thr) != d->thr[i].above)
            return 0;
    }
    return 1;
}

/* Write the fields of the graph for the positions of pass f. */
static void patch(struct rt_dgraph *d, const struct rt_fwd *f)
{
    for (int i = 0; i < d->nsites; i++) {
        const struct dg_site *s = &d->sites[i];
        int64_t pos = f->seg[s->seg].pos0;
        uint64_t v;
        if (s->clamp) {
            int64_t x = pos + s->coef;
            v = x < 0 ? 0 : (uint64_t)x < s->cap ? (uint64_t)x : s->cap;
        } else {
            v = s->v0 + (uint64_t)(s->coef * (pos - d->seg[s->seg].pos0));
        }
        uint8_t *p = d->jobs[s->job].map + s->off;
        if (s->width == 4) {
            uint32_t w = (uint32_t)v;
            memcpy(p, &w, 4);
        } else {
            memcpy(p, &v, 8);
        }
    }
}

/* Job j to the device: its BO as it stands (no copy) */
static int submit_job(glm_model_t *m, const struct dg_job *j, tx_job_t *job)
{
    struct tx_raw_job rj;
    memset(&rj, 0, sizeof(rj));
    rj.cmd_bo = j->bo;
    rj.cmd_size = (uint32_t)j->len;
    rj.num_bos = j->nuses;
    rj.bos = j->uses;
    rj.flags = m->submit_flags;
    return tx_submit_raw(m->dev, &rj, job);
}

int rt_dgraph_replay(struct gctx *g, int *replayed)
{
    glm_model_t *m = g->m;
    struct rt_dgraph *d = m->dg, *prev = NULL;
    *replayed = 0;
    while (d && !matches(d, g)) {
        prev = d;
        d = d->next;
    }
    if (!d)
        return TX_OK;
    if (prev) { /* most recently used first: rt_dgraph_submit runs m->dg */
        prev->next = d->next;
        d->next = m->dg;
        m->dg = d;
    }
    patch(d, g->f);
    if (m->dg_mode == RT_DG_VERIFY) {
        /* build the pass again into g->cb, comparing each job at its
         * flush (rt_dgraph_compare) instead of submitting it */
        g->dg_cmp = d;
        g->dg_cjob = 0;
        return TX_OK;
    }
    return rt_dgraph_submit(g, replayed);
}

int rt_dgraph_submit(struct gctx *g, int *replayed)
{
    glm_model_t *m = g->m;
    struct rt_dgraph *d = m->dg;
    struct rt_fwd *f = g->f;
    g->dg_cmp = NULL;
    for (int i = 0; i < d->njobs; i++) {
        tx_job_t *job = rt_graph_next_job(g);
        if (!job)
            return TX_ENOMEM;
        int rc = submit_job(m, &d->jobs[i], job);
        if (rc)
            return tx_error(rc, "forward: decode graph: submit job %d of %d: %s", i + 1, d->njobs,
                            tx_last_error());
        rt_graph_job_added(g);
    }
    g->total = d->total;
    /* the (query, key) pairs the recorded build counted, at the new
     * positions (a verifying build has counted them itself) */
    if (m->dg_mode != RT_DG_VERIFY)
        for (int i = 0; i < d->npairs; i++)
            rt_count_pairs(f, &f->seg[d->pairs[i].seg], d->pairs[i].sel_k, NULL, NULL);
    *replayed = 1;
    int decode = 1;
    for (int i = 0; i < f->n_seg; i++)
        decode &= f->seg[i].n == 1;
    (decode ? &m->dec : &m->pre)->replays++;
    return TX_OK;
}

int rt_dgraph_begin(struct gctx *g)
{
    glm_model_t *m = g->m;
    const struct rt_fwd *f = g->f;
    struct rt_dgraph *d = calloc(1, sizeof(*d));
    if (!d)
        return TX_OK; /* no graph: the pass is built as usual */
    d->plan = *g->plan;
    d->T = f->T;
    d->lrow0 = f->lrow0;
    d->lrows = f->lrows;
    d->n_seg = f->n_seg;
    d->n_ban = f->n_ban;
    d->mtp = f->mtp;
    d->mtp_tail = f->mtp_tail;
    d->row_pos = f->row_pos;
    d->submit_flags = m->submit_flags;
    d->act = (uintptr_t)g->act;
    tx_bo_addr(g->act, &d->act_addr);
    d->n_sampling = f->sampling ? f->n_sampling : 0;
    d->seg = calloc((size_t)f->n_seg, sizeof(*d->seg));
    d->sampling = calloc((size_t)(d->n_sampling ? d->n_sampling : 1), sizeof(*d->sampling));
    d->ban = calloc((size_t)(f->n_ban ? f->n_ban : 1), sizeof(*d->ban));
    if (f->row_seg && f->lrows > 0) {
        d->row_seg = malloc((size_t)f->lrows * sizeof(int));
        if (d->row_seg)
            memcpy(d->row_seg, f->row_seg, (size_t)f->lrows * sizeof(int));
    }
    if (!d->seg || !d->sampling || !d->ban || (f->row_seg && f->lrows > 0 && !d->row_seg)) {
        dg_free(d);
        return TX_OK;
    }
    for (int i = 0; i < f->n_seg; i++)
        seg_key(&f->seg[i], &d->seg[i]);
    if (d->n_sampling)
        memcpy(d->sampling, f->sampling, (size_t)d->n_sampling * sizeof(*d->sampling));
    if (f->n_ban)
        memcpy(d->ban, f->ban, (size_t)f->n_ban * sizeof(*d->ban));
    g->dg = d;
    return TX_OK;
}

void rt_dgraph_end(struct gctx *g, int ok)
{
    struct rt_dgraph *d = g->dg;
    g->dg = NULL;
    if (!d)
        return;
    if (!ok || d->bad || !d->njobs) {
        dg_free(d);
        return;
    }
    d->total = g->total;
    /* first in the model's list; the least recently used beyond
     * RT_DG_SLOTS is freed */
    glm_model_t *m = g->m;
    d->next = m->dg;
    m->dg = d;
    int n = 1;
    for (struct rt_dgraph *p = d; p->next; p = p->next)
        if (++n > RT_DG_SLOTS) {
            struct rt_dgraph *x = p->next;
            p->next = NULL;
            while (x) {
                struct rt_dgraph *nx = x->next;
                dg_free(x);
                x = nx;
            }
            break;
        }
}

int rt_dgraph_job(struct gctx *g, tx_job_t *job)
{
    struct rt_dgraph *d = g->dg;
    glm_model_t *m = g->m;
    size_t len = 0;
    tx_cmdbuf_size(g->cb, &len, NULL);
    if (grow((void **)&d->jobs, &d->cap_jobs, d->njobs, sizeof(*d->jobs)))
        return tx_error(TX_ENOMEM, "forward: decode graph: out of memory");
    struct dg_job *j = &d->jobs[d->njobs];
    memset(j, 0, sizeof(*j));
    int rc = tx_bo_alloc(m->dev, ALIGN_UP(len, 4096), 0, "decode graph", &j->bo);
    if (rc == TX_ENOSPC && m->dg) { /* the other graphs give their memory back */
        rt_dgraph_drop(m);
        rc = tx_bo_alloc(m->dev, ALIGN_UP(len, 4096), 0, "decode graph", &j->bo);
    }
    if (!rc)
        rc = tx_bo_map(j->bo, (void **)&j->map);
    if (!rc)
        rc = txd_cmdbuf_copy_out(g->cb, j->map, len, &j->len, &j->uses, &j->nuses);
    if (rc) {
        if (j->bo)
            tx_bo_free(j->bo);
        free(j->uses);
        return tx_error(rc, "forward: decode graph: %s", tx_last_error());
    }
    int ji = d->njobs++;
    /* each field of this job: its recorded value, and one that fits */
    for (int i = 0; i < d->nsites; i++) {
        struct dg_site *s = &d->sites[i];
        if (s->job != ji)
            continue;
        if ((size_t)s->off + s->width > j->len) {
            d->bad = 1;
            continue;
        }
        uint64_t v = 0;
        memcpy(&v, j->map + s->off, s->width);
        s->v0 = v;
    }
    rc = submit_job(m, j, job);
    if (rc)
        return tx_error(rc, "forward: submit: %s", tx_last_error());
    return TX_OK;
}

int rt_dgraph_compare(struct gctx *g)
{
    const struct rt_dgraph *d = g->dg_cmp;
    int ji = g->dg_cjob++;
    size_t len = 0;
    tx_cmdbuf_size(g->cb, &len, NULL);
    if (ji >= d->njobs)
        return tx_error(TX_EIO, "forward: decode graph: the fresh build has more than its %d jobs",
                        d->njobs);
    const struct dg_job *j = &d->jobs[ji];
    uint8_t *buf = malloc(len ? len : 1);
    struct tx_bo_use *uses = NULL;
    unsigned nuses = 0;
    if (!buf)
        return tx_error(TX_ENOMEM, "forward: decode graph: out of memory");
    int rc = txd_cmdbuf_copy_out(g->cb, buf, len, &len, &uses, &nuses);
    if (!rc && len != j->len)
        rc = tx_error(TX_EIO, "forward: decode graph: job %d is %zu bytes, a fresh build %zu",
                      ji + 1, j->len, len);
    for (size_t i = 0; !rc && i < len; i++)
        if (buf[i] != j->map[i])
            rc = tx_error(TX_EIO,
                          "forward: decode graph: patched job %d differs from a fresh build at "
                          "byte %zu (0x%02x, built 0x%02x)",
                          ji + 1, i, j->map[i], buf[i]);
    if (!rc && (nuses != j->nuses || memcmp(uses, j->uses, nuses * sizeof(*uses))))
        rc = tx_error(TX_EIO, "forward: decode graph: job %d uses other BOs than a fresh build",
                      ji + 1);
    free(buf);
    free(uses);
    return rc;
}

int rt_dgraph_compare_end(const struct gctx *g)
{
    if (g->dg_cjob != g->dg_cmp->njobs)
        return tx_error(TX_EIO, "forward: decode graph: %d jobs, a fresh build %d",
                        g->dg_cmp->njobs, g->dg_cjob);
    return TX_OK;
}

size_t rt_dg_mark(struct gctx *g)
{
    size_t len = 0;
    if (g->dg)
        tx_cmdbuf_size(g->cb, &len, NULL);
    return len;
}

static void add_site(struct gctx *g, const struct rt_seg *sg, size_t at, size_t field, int width,
                     int clamp, int64_t coef, uint64_t cap)
{
    struct rt_dgraph *d = g->dg;
    if (!d || g->rc)
        return;
    if (grow((void **)&d->sites, &d->cap_sites, d->nsites, sizeof(*d->sites))) {
        d->bad = 1;
        return;
    }
    struct dg_site *s = &d->sites[d->nsites++];
    memset(s, 0, sizeof(*s));
    s->job = d->njobs;
    s->seg = (int)(sg - g->f->seg);
    s->off = (uint32_t)(at + field);
    s->width = (uint8_t)width;
    s->clamp = (uint8_t)clamp;
    s->coef = coef;
    s->cap = cap;
}

void rt_dg_field(struct gctx *g, const struct rt_seg *sg, size_t at, size_t field, int width,
                 int64_t coef)
{
    add_site(g, sg, at, field, width, 0, coef, 0);
}

void rt_dg_clamped(struct gctx *g, const struct rt_seg *sg, size_t at, size_t field, int width,
                   int64_t add, uint64_t cap)
{
    add_site(g, sg, at, field, width, 1, add, cap);
}

void rt_dg_cache_row(struct gctx *g, const struct rt_seg *sg, size_t at, uint16_t dtype,
                     uint64_t cols)
{
    if (!g->dg)
        return;
    /* the row's address is linear in the position when a row is whole
     * blocks (every cache type and width here); otherwise no graph */
    uint64_t rb = tx_dtype_row_bytes(dtype, cols);
    uint64_t p = (uint64_t)sg->pos0;
    if (tx_dtype_row_bytes(dtype, p * cols) != p * rb ||
        tx_dtype_row_bytes(dtype, (p + 1) * cols) != (p + 1) * rb) {
        g->dg->bad = 1;
        return;
    }
    /* CONVERT and COPY both keep dst right after the header */
    rt_dg_field(g, sg, at, offsetof(struct tx8_cmd_convert, dst), 8, (int64_t)rb);
}

void rt_dg_threshold(struct gctx *g, const struct rt_seg *sg, int thr)
{
    struct rt_dgraph *d = g->dg;
    if (!d)
        return;
    int seg = (int)(sg - g->f->seg);
    for (int i = 0; i < d->nthr; i++)
        if (d->thr[i].seg == seg && d->thr[i].thr == thr)
            return; /* every layer notes the same one */
    if (grow((void **)&d->thr, &d->cap_thr, d->nthr, sizeof(*d->thr))) {
        d->bad = 1;
        return;
    }
    d->thr[d->nthr].seg = seg;
    d->thr[d->nthr].thr = thr;
    d->thr[d->nthr].above = sg->pos0 + sg->n > thr;
    d->nthr++;
}

void rt_dg_pairs(struct gctx *g, const struct rt_seg *sg, int sel_k)
{
    struct rt_dgraph *d = g->dg;
    if (!d)
        return;
    if (grow((void **)&d->pairs, &d->cap_pairs, d->npairs, sizeof(*d->pairs))) {
        d->bad = 1;
        return;
    }
    d->pairs[d->npairs].seg = (int)(sg - g->f->seg);
    d->pairs[d->npairs].sel_k = sel_k;
    d->npairs++;
}

void rt_dg_unpatchable(struct gctx *g)
{
    if (g->dg)
        g->dg->bad = 1;
}
