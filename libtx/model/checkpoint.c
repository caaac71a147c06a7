/* SPDX-License-Identifier: MIT */
/* GLM checkpoints on disk (Hugging Face directory or ONNX), validated
 * against the architecture's tensor list. */
#include <tx-internal/tx_fp8.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx-internal/tx_checkpoint.h>
#include <tx-internal/tx_onnx.h>
#include <tx-internal/tx_safetensors.h>

struct tx_ckpt {
    enum tx_ckpt_format format;
    char *path;
    char *config_path; /* or "metadata_props[config]" */
    char *config_json;
    size_t config_len;
    struct glm_config cfg;
    char *tok_path, *tokcfg_path, *gencfg_path;
    struct tx_st_set *st;
    struct tx_onnx *onnx;
    struct tx_ckpt_tensor *t;
    size_t n, cap;
    const struct tx_ckpt_tensor **sorted;
    char **ignored;
    int *ignored_mtp;
    size_t nignored;
    struct tx_ckpt_tensor *mtp; /* the MTP layer's tensors, when complete */
    size_t nmtp;
    uint64_t bytes;
    struct txm_quant_config quant;
    struct tx_tensor *fp8; /* copies of the F8_E4M3 weights with their scales bound */
    struct tx_ckpt_storage storage;
};

enum tx_ckpt_format tx_ckpt_format(const struct tx_ckpt *c)
{
    return c->format;
}
const char *tx_ckpt_path(const struct tx_ckpt *c)
{
    return c->path;
}
const struct glm_config *tx_ckpt_config(const struct tx_ckpt *c)
{
    return &c->cfg;
}
const char *tx_ckpt_config_json(const struct tx_ckpt *c, size_t *len)
{
    if (len)
        *len = c->config_len;
    return c->config_json;
}
const char *tx_ckpt_tokenizer_path(const struct tx_ckpt *c)
{
    return c->tok_path;
}
const char *tx_ckpt_tokenizer_config_path(const struct tx_ckpt *c)
{
    return c->tokcfg_path;
}
const char *tx_ckpt_generation_config_path(const struct tx_ckpt *c)
{
    return c->gencfg_path;
}
size_t tx_ckpt_count(const struct tx_ckpt *c)
{
    return c->n;
}
const struct tx_ckpt_tensor *tx_ckpt_tensor(const struct tx_ckpt *c, size_t i)
{
    return i < c->n ? &c->t[i] : NULL;
}
uint64_t tx_ckpt_bytes(const struct tx_ckpt *c)
{
    return c->bytes;
}
const struct tx_ckpt_storage *tx_ckpt_storage(const struct tx_ckpt *c)
{
    return &c->storage;
}
size_t tx_ckpt_n_ignored(const struct tx_ckpt *c)
{
    return c->nignored;
}
const char *tx_ckpt_ignored(const struct tx_ckpt *c, size_t i, int *is_mtp)
{
    if (i >= c->nignored)
        return NULL;
    if (is_mtp)
        *is_mtp = c->ignored_mtp[i];
    return c->ignored[i];
}

size_t tx_ckpt_mtp_count(const struct tx_ckpt *c)
{
    return c->nmtp;
}
const struct tx_ckpt_tensor *tx_ckpt_mtp_tensor(const struct tx_ckpt *c, size_t i)
{
    return i < c->nmtp ? &c->mtp[i] : NULL;
}

const struct tx_ckpt_tensor *tx_ckpt_find(const struct tx_ckpt *c, const char *name)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = strcmp(c->sorted[mid]->info.name, name);
        if (r == 0)
            return c->sorted[mid];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void tx_ckpt_close(struct tx_ckpt *c)
{
    if (!c)
        return;
    tx_st_set_close(c->st);
    tx_onnx_close(c->onnx);
    for (size_t i = 0; i < c->nignored; i++)
        free(c->ignored[i]);
    free(c->ignored);
    free(c->ignored_mtp);
    free(c->mtp);
    free(c->t);
    free(c->fp8);
    free(c->sorted);
    free(c->path);
    free(c->config_path);
    free(c->config_json);
    free(c->tok_path);
    free(c->tokcfg_path);
    free(c->gencfg_path);
    free(c);
}

static int collect_cb(void *ctx, const struct glm_tensor_info *ti)
{
    struct tx_ckpt *c = ctx;
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 256;
        struct tx_ckpt_tensor *n = realloc(c->t, nc * sizeof(*n));
        if (!n)
            return TX_ENOMEM;
        c->t = n;
        c->cap = nc;
    }
    c->t[c->n].info = *ti;
    c->t[c->n].t = NULL;
    c->n++;
    return 0;
}

struct missing_ctx {
    const struct tx_ckpt *c;
    int found;
    struct glm_tensor_info t;
};

static const struct tx_tensor *src_find(const struct tx_ckpt *c, const char *name);

/* stops the tensor list at the first expected tensor the files lack */
static int missing_cb(void *ctx, const struct glm_tensor_info *ti)
{
    struct missing_ctx *m = ctx;
    if (src_find(m->c, ti->name))
        return 0;
    m->found = 1;
    m->t = *ti;
    return 1;
}

static int cmp_ct(const void *a, const void *b)
{
    return strcmp((*(const struct tx_ckpt_tensor *const *)a)->info.name,
                  (*(const struct tx_ckpt_tensor *const *)b)->info.name);
}

static const struct tx_tensor *src_find(const struct tx_ckpt *c, const char *name)
{
    return c->st ? tx_st_set_find(c->st, name) : tx_onnx_find(c->onnx, name);
}

static size_t src_count(const struct tx_ckpt *c)
{
    return c->st ? tx_st_set_count(c->st) : tx_onnx_count(c->onnx);
}

static const struct tx_tensor *src_at(const struct tx_ckpt *c, size_t i)
{
    return c->st ? tx_st_set_tensor(c->st, i) : tx_onnx_tensor(c->onnx, i);
}

static char *opt_file(const char *dir, const char *name)
{
    char *p = txm_path_join(dir, name);
    if (p && !txm_file_exists(p)) {
        free(p);
        p = NULL;
    }
    return p;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Non-parameter buffers older exports save beside the weights, ignored by
 * transformers on load (_keys_to_ignore_on_load_unexpected). */
static int is_buffer(const char *name)
{
    return ends_with(name, ".rotary_emb.inv_freq");
}

/* Whether MTP layer L carries its own projection (model.layers.L.eh_proj):
 * what tells a real next-n layer from a decoder layer past a lowered
 * num_hidden_layers. */
static int has_mtp_proj(const struct tx_ckpt *c, int layer)
{
    char name[64];
    snprintf(name, sizeof(name), "model.layers.%d.eh_proj.weight", layer);
    return src_find(c, name) != NULL;
}

/* ---- the MTP layer (issue 39) ---------------------------------------- */

struct mtp_bind {
    struct tx_ckpt *c;
    int missing;
};

/* one tensor of the MTP layer's catalogue: present with its shape and a
 * dtype the writers take (BF16, F16, F32), else the layer is not kept */
static int mtp_bind_cb(void *ctx, const struct glm_tensor_info *ti)
{
    struct mtp_bind *b = ctx;
    const struct tx_tensor *t = src_find(b->c, ti->name);
    int ok = t && t->ndim == ti->ndim && tx_elem_supported(t->type) &&
             t->type != TX_ELEM_F8_E4M3 && t->type != TX_ELEM_F8_E5M2;
    for (int d = 0; ok && d < t->ndim; d++)
        ok = t->shape[d] == (uint64_t)ti->shape[d];
    if (!ok) {
        b->missing = 1;
        return 1;
    }
    struct tx_ckpt_tensor *ct = &b->c->mtp[b->c->nmtp++];
    ct->info = *ti;
    ct->t = t;
    return 0;
}

/* The MTP (NextN) layer model.layers.{num_hidden_layers}: kept (tx_ckpt_mtp_*)
 * when every tensor of its catalogue is present in a 16/32-bit float type,
 * and then no longer listed as ignored; otherwise (an FP8 checkpoint, a
 * synthetic checkpoint with only the MTP projections) it stays ignored. */
static int bind_mtp(struct tx_ckpt *c, char *err, size_t errsz)
{
    if (c->cfg.num_nextn_predict_layers < 1 || !has_mtp_proj(c, c->cfg.num_hidden_layers))
        return 0;
    size_t ns = src_count(c);
    c->mtp = calloc(ns + 1, sizeof(*c->mtp));
    if (!c->mtp)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    struct mtp_bind b = {c, 0};
    txm_mtp_tensor_list(&c->cfg, mtp_bind_cb, &b);
    if (b.missing) {
        c->nmtp = 0;
        return 0;
    }
    /* the kept ones are no longer ignored */
    size_t k = 0;
    for (size_t i = 0; i < c->nignored; i++) {
        int kept = 0;
        for (size_t j = 0; j < c->nmtp && !kept; j++)
            kept = !strcmp(c->ignored[i], c->mtp[j].info.name);
        if (kept) {
            free(c->ignored[i]);
            continue;
        }
        c->ignored[k] = c->ignored[i];
        c->ignored_mtp[k++] = c->ignored_mtp[i];
    }
    c->nignored = k;
    return 0;
}

/* The F8_E4M3 weight i of an FP8 checkpoint: finds and checks its
 * <name>_scale_inv and binds it to a copy of the tensor. */
static int bind_fp8(struct tx_ckpt *c, size_t i, const struct tx_tensor *t, char *err, size_t errsz)
{
    struct tx_ckpt_tensor *ct = &c->t[i];
    char sname[GLM_TENSOR_NAME_MAX + sizeof(TXM_FP8_SCALE_SUFFIX)];
    snprintf(sname, sizeof(sname), "%s%s", t->name, TXM_FP8_SCALE_SUFFIX);
    const struct tx_tensor *s = src_find(c, sname);
    if (!s) {
        char s1[96];
        uint64_t g[2] = {txm_fp8_grid(t->shape[0], c->quant.block_rows),
                         t->ndim > 1 ? txm_fp8_grid(t->shape[1], c->quant.block_cols) : 1};
        return tx_errbuf(err, errsz, TX_ENOENT,
                         "%s: tensor %s (F32 %s, the block scales of the F8_E4M3 tensor %s) is "
                         "missing",
                         t->file, sname, tx_shape_str(g, 2, s1, sizeof(s1)), t->name);
    }
    int rc = txm_fp8_bind(t, s, &c->quant, &c->fp8[i], err, errsz);
    if (rc < 0)
        return rc;
    ct->t = &c->fp8[i];
    c->bytes += t->nbytes;
    c->storage.bytes[t->type] += t->nbytes;
    c->storage.tensors[t->type]++;
    c->storage.scale_tensors++;
    c->storage.scale_bytes += s->nbytes;
    return 0;
}

/* A "<name>_scale_inv" tensor of an FP8 checkpoint that is not among the
 * expected tensors: 1 if it is bound to its weight; else 0 with *lr and
 * *ti of its weight's lookup (an MTP weight's scales are ignored with it),
 * or an error naming it. */
static int unbound_scale(const struct tx_ckpt *c, const struct tx_tensor *t, int *lr,
                         struct glm_tensor_info *ti, char *err, size_t errsz)
{
    char base[GLM_TENSOR_NAME_MAX + sizeof(TXM_FP8_SCALE_SUFFIX)];
    size_t bl = strlen(t->name) - strlen(TXM_FP8_SCALE_SUFFIX);
    if (bl >= sizeof(base))
        bl = sizeof(base) - 1;
    memcpy(base, t->name, bl);
    base[bl] = 0;
    const struct tx_ckpt_tensor *w = tx_ckpt_find(c, base);
    if (w && w->t->scale_inv == t)
        return 1;
    const struct tx_tensor *wt = src_find(c, base);
    if (w || (wt && wt->type != TX_ELEM_F8_E4M3))
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: block scales of %s, which is stored as %s, not F8_E4M3",
                         t->file, t->name, base, tx_elem_name((w ? w->t : wt)->type));
    char sub[TX_ERR_MAX];
    *lr = glm_config_tensor_lookup(&c->cfg, base, ti, sub, sizeof(sub));
    if (*lr < 0 || !wt)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: block scales of %s, which %s; %s does not expect it",
                         t->file, t->name, base,
                         wt ? "is not a tensor of this model" : "is missing", c->config_path);
    return 0;
}

int tx_ckpt_open(const char *path, struct tx_ckpt **out, char *err, size_t errsz)
{
    *out = NULL;
    struct tx_ckpt *c = calloc(1, sizeof(*c));
    if (!c)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    int rc;
    char *dir = NULL, *where_buf = NULL;
    char sub[TX_ERR_MAX];
    c->path = strdup(path);
    if (!c->path) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto fail;
    }
    if (txm_is_dir(path)) {
        c->format = TX_CKPT_HF;
        dir = strdup(path);
    } else if (txm_file_exists(path)) {
        if (!ends_with(path, ".onnx") && !ends_with(path, ".ONNX")) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: not a checkpoint directory or an .onnx file (a .smd package is "
                           "already exported)",
                           path);
            goto fail;
        }
        c->format = TX_CKPT_ONNX;
        dir = txm_dirname(path);
    } else {
        rc = tx_errbuf(err, errsz, TX_ENOENT, "%s: no such file or directory", path);
        goto fail;
    }
    if (!dir) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto fail;
    }
    /* tensors first for ONNX (the config may be in its metadata) */
    if (c->format == TX_CKPT_ONNX) {
        rc = tx_onnx_open(path, &c->onnx, err, errsz);
        if (rc < 0)
            goto fail;
        const char *mc = tx_onnx_metadata(c->onnx, "config");
        if (mc) {
            c->config_json = strdup(mc);
            c->config_len = strlen(mc);
            c->config_path = malloc(strlen(path) + 32);
            if (c->config_path)
                sprintf(c->config_path, "%s (metadata_props \"config\")", path);
            if (!c->config_json || !c->config_path) {
                rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
                goto fail;
            }
        }
    }
    if (!c->config_json) {
        c->config_path = txm_path_join(dir, "config.json");
        if (!c->config_path) {
            rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            goto fail;
        }
        if (!txm_file_exists(c->config_path)) {
            rc = tx_errbuf(err, errsz, TX_ENOENT, "%s: missing%s", c->config_path,
                           c->format == TX_CKPT_ONNX
                               ? " (and the ONNX model has no metadata_props \"config\")"
                               : "");
            goto fail;
        }
        rc = txm_read_file(c->config_path, 64u << 20, &c->config_json, &c->config_len, err, errsz);
        if (rc < 0)
            goto fail;
    }
    rc = glm_config_from_json(c->config_json, &c->cfg, sub, sizeof(sub));
    if (rc < 0) {
        /* "config.json: field: ..." -> "PATH: field: ..." */
        tx_errbuf(err, errsz, rc, "%s: %s", c->config_path,
                  strncmp(sub, "config.json: ", 13) ? sub : sub + 13);
        goto fail;
    }
    rc = txm_quant_config_parse(c->config_json, c->config_path, &c->quant, err, errsz);
    if (rc < 0)
        goto fail;
    c->storage.quant_fp8 = c->quant.fp8;
    c->storage.block_rows = c->quant.block_rows;
    c->storage.block_cols = c->quant.block_cols;
    c->tok_path = opt_file(dir, "tokenizer.json");
    c->tokcfg_path = opt_file(dir, "tokenizer_config.json");
    c->gencfg_path = opt_file(dir, "generation_config.json");
    if (c->format == TX_CKPT_HF) {
        rc = tx_st_set_open(dir, &c->st, err, errsz);
        if (rc < 0)
            goto fail;
    }
    /* where a missing tensor should have been: the .onnx, the single
     * safetensors file, the shard index, or the directory */
    const char *where = c->format == TX_CKPT_ONNX ? path : dir;
    if (c->st && tx_st_set_nfiles(c->st) == 1) {
        where = tx_st_set_file(c->st, 0);
    } else if (c->st) {
        where_buf = txm_path_join(dir, "model.safetensors.index.json");
        if (where_buf && txm_file_exists(where_buf))
            where = where_buf;
    }
    /* Compare the config with what is on disk before building anything per
     * tensor: if the config expects more tensors than the files hold (its
     * counts are bounded by glm_config_validate), name the first missing
     * one without allocating. */
    int64_t want = glm_config_tensor_count(&c->cfg);
    if (want < 0) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: cannot count the expected tensors",
                       c->config_path);
        goto fail;
    }
    if ((uint64_t)want > src_count(c)) {
        struct missing_ctx m = {.c = c};
        glm_config_tensor_list(&c->cfg, missing_cb, &m);
        char s1[96];
        uint64_t ws[2] = {(uint64_t)m.t.shape[0], (uint64_t)m.t.shape[1]};
        rc = tx_errbuf(err, errsz, TX_ENOENT,
                       "%s: tensor %s (shape %s) is missing; %s expects it (it expects %lld "
                       "tensors: num_hidden_layers %d, n_routed_experts %d; the files hold %zu)",
                       where, m.found ? m.t.name : "?",
                       m.found ? tx_shape_str(ws, m.t.ndim, s1, sizeof(s1)) : "?", c->config_path,
                       (long long)want, c->cfg.num_hidden_layers, c->cfg.n_routed_experts,
                       src_count(c));
        goto fail;
    }
    rc = glm_config_tensor_list(&c->cfg, collect_cb, c);
    if (rc < 0) {
        rc = tx_errbuf(err, errsz, rc, "%s: cannot list the expected tensors", c->config_path);
        goto fail;
    }
    c->sorted = calloc(c->n + 1, sizeof(*c->sorted));
    if (c->quant.fp8)
        c->fp8 = calloc(c->n + 1, sizeof(*c->fp8));
    if (!c->sorted || (c->quant.fp8 && !c->fp8)) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < c->n; i++) {
        struct tx_ckpt_tensor *ct = &c->t[i];
        c->sorted[i] = ct;
        const struct tx_tensor *t = src_find(c, ct->info.name);
        uint64_t want[2] = {(uint64_t)ct->info.shape[0], (uint64_t)ct->info.shape[1]};
        char s1[96], s2[96];
        if (!t) {
            rc = tx_errbuf(
                err, errsz, TX_ENOENT, "%s: tensor %s (shape %s) is missing; %s expects it", where,
                ct->info.name, tx_shape_str(want, ct->info.ndim, s1, sizeof(s1)), c->config_path);
            goto fail;
        }
        int same = t->ndim == ct->info.ndim;
        for (int d = 0; same && d < t->ndim; d++)
            same = t->shape[d] == want[d];
        if (!same) {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s has shape %s but %s expects %s",
                           t->file, ct->info.name, tx_shape_str(t->shape, t->ndim, s1, sizeof(s1)),
                           c->config_path, tx_shape_str(want, ct->info.ndim, s2, sizeof(s2)));
            goto fail;
        }
        if (t->type == TX_ELEM_F8_E4M3 && c->quant.fp8) {
            rc = bind_fp8(c, i, t, err, errsz);
            if (rc < 0)
                goto fail;
            continue;
        }
        if (t->type == TX_ELEM_F8_E4M3 || t->type == TX_ELEM_F8_E5M2) {
            rc = tx_errbuf(err, errsz, TX_ENOTSUP,
                           "%s: tensor %s has dtype %s but %s has no quantization_config (an FP8 "
                           "checkpoint needs quant_method \"fp8\", fmt \"e4m3\", "
                           "weight_block_size [128, 128] and <weight>_scale_inv block scales)",
                           t->file, ct->info.name, tx_elem_name(t->type), c->config_path);
            goto fail;
        }
        if (!tx_elem_supported(t->type)) {
            rc = tx_errbuf(err, errsz, TX_ENOTSUP,
                           "%s: tensor %s has dtype %s; only BF16, F16 and F32 are supported",
                           t->file, ct->info.name, tx_elem_name(t->type));
            goto fail;
        }
        ct->t = t;
        c->bytes += t->nbytes;
        c->storage.bytes[t->type] += t->nbytes;
        c->storage.tensors[t->type]++;
    }
    free(where_buf);
    where_buf = NULL;
    qsort(c->sorted, c->n, sizeof(*c->sorted), cmp_ct);
    size_t ns = src_count(c);
    c->ignored = calloc(ns + 1, sizeof(char *));
    c->ignored_mtp = calloc(ns + 1, sizeof(int));
    if (!c->ignored || !c->ignored_mtp) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto fail;
    }
    /* Tensors the model does not use: the MTP (next-n) layers' and known
     * non-parameter buffers are ignored, anything else is an error naming
     * it (a renamed parameter, or a decoder layer beyond num_hidden_layers
     * that would otherwise be dropped silently). */
    for (size_t i = 0; i < ns; i++) {
        const struct tx_tensor *t = src_at(c, i);
        if (tx_ckpt_find(c, t->name))
            continue;
        struct glm_tensor_info ti;
        char sub[TX_ERR_MAX];
        int lr = -1;
        if (c->quant.fp8 && ends_with(t->name, TXM_FP8_SCALE_SUFFIX)) {
            rc = unbound_scale(c, t, &lr, &ti, err, errsz);
            if (rc < 0)
                goto fail;
            if (rc == 1)
                continue; /* the scales of a model weight */
        } else {
            lr = glm_config_tensor_lookup(&c->cfg, t->name, &ti, sub, sizeof(sub));
        }
        if (lr < 0 && !is_buffer(t->name)) {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: %s; %s does not expect it", t->file, sub,
                           c->config_path);
            goto fail;
        }
        if (lr == 1 && !has_mtp_proj(c, ti.layer)) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: tensor %s: layer %d is counted as an MTP layer "
                           "(num_hidden_layers %d, num_nextn_predict_layers %d) but has no "
                           "eh_proj: a decoder layer that %s does not count?",
                           t->file, t->name, ti.layer, c->cfg.num_hidden_layers,
                           c->cfg.num_nextn_predict_layers, c->config_path);
            goto fail;
        }
        c->ignored[c->nignored] = strdup(t->name);
        if (!c->ignored[c->nignored]) {
            rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            goto fail;
        }
        c->ignored_mtp[c->nignored++] = lr == 1;
    }
    rc = bind_mtp(c, err, errsz);
    if (rc < 0)
        goto fail;
    free(dir);
    *out = c;
    return 0;
fail:
    free(where_buf);
    free(dir);
    tx_ckpt_close(c);
    return rc;
}

/* ---- source hash (docs/smd-format.md, "Source of a package") ------------ */

uint32_t tx_ckpt_hash_tensor(uint32_t h, const struct tx_tensor *t, uint32_t data_crc)
{
    unsigned char rec[4 + 4 + 8 * TX_TENSOR_MAX_DIMS + 4];
    size_t n = 0;
    uint32_t ty = (uint32_t)t->type, nd = (uint32_t)t->ndim;
    for (int b = 0; b < 4; b++)
        rec[n++] = (unsigned char)(ty >> (8 * b));
    for (int b = 0; b < 4; b++)
        rec[n++] = (unsigned char)(nd >> (8 * b));
    for (int d = 0; d < t->ndim && d < TX_TENSOR_MAX_DIMS; d++)
        for (int b = 0; b < 8; b++)
            rec[n++] = (unsigned char)(t->shape[d] >> (8 * b));
    for (int b = 0; b < 4; b++)
        rec[n++] = (unsigned char)(data_crc >> (8 * b));
    h = tx_crc32c(h, t->name, strlen(t->name) + 1);
    return tx_crc32c(h, rec, n);
}

uint32_t tx_ckpt_hash_scales(uint32_t h, const struct tx_tensor *t)
{
    const struct tx_tensor *s = t->scale_inv;
    uint32_t dc = tx_crc32c(0, s->data, (size_t)s->nbytes);
    return tx_ckpt_hash_tensor(h, s, dc);
}

int tx_ckpt_source_hash(const struct tx_ckpt *c, uint32_t *hash, char *err, size_t errsz)
{
    if (!c || !hash)
        return tx_errbuf(err, errsz, TX_EINVAL, "tx_ckpt_source_hash: NULL argument");
    uint32_t h = 0;
    for (size_t i = 0; i < c->n; i++) {
        const struct tx_tensor *t = c->t[i].t;
        uint32_t dc = 0;
        /* in pieces, dropping each from memory once hashed (streams a
         * checkpoint larger than RAM) */
        const uint64_t piece = 64ull << 20;
        for (uint64_t off = 0; off < t->nbytes; off += piece) {
            uint64_t len = t->nbytes - off < piece ? t->nbytes - off : piece;
            dc = tx_crc32c(dc, (const char *)t->data + off, (size_t)len);
        }
        tx_tensor_release(t);
        h = tx_ckpt_hash_tensor(h, t, dc);
        if (t->scale_inv)
            h = tx_ckpt_hash_scales(h, t);
    }
    *hash = h;
    return 0;
}
