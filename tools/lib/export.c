/* SPDX-License-Identifier: MIT */
/* Export: checkpoint (HF or ONNX) -> .smd package, streaming, with the
 * precision plan's storage types, INT8 quantisation and block pruning. */
#include <tx-internal/tx_fp8.h>
#include <tx-internal/tx_quant.h>
#include "export_chat_template.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include <tx/glm.h>
#include <tx-internal/tx_checkpoint.h>
#include <tx/tx_dtype.h>
#include <tx-internal/tx_export.h>
#include <tx/tx_tokenizer.h>

void tx_export_default_opts(struct tx_export_opts *o)
{
    memset(o, 0, sizeof(*o));
    tx_plan_golden(o->plan);
    o->sparsity = 0.5;
}

static enum tx_smd_layer layer_of(enum glm_tensor_class c)
{
    switch (c) {
    case GLM_TC_EMBEDDING:
        return TX_SMD_LAYER_EMBEDDING;
    case GLM_TC_ATTENTION:
        return TX_SMD_LAYER_ATTENTION;
    case GLM_TC_MLP:
        return TX_SMD_LAYER_MLP;
    case GLM_TC_EXPERT:
        return TX_SMD_LAYER_EXPERT;
    case GLM_TC_NORM:
        return TX_SMD_LAYER_NORM;
    case GLM_TC_OUTPUT:
        return TX_SMD_LAYER_OUTPUT;
    default:
        return TX_SMD_LAYER_ROUTER;
    }
}

static unsigned tx8_of_elem(enum tx_elem_type t)
{
    if (t == TX_ELEM_F8_E4M3)
        return TX8_DTYPE_F8_E4M3;
    return t == TX_ELEM_F16 ? TX8_DTYPE_F16 : t == TX_ELEM_BF16 ? TX8_DTYPE_BF16 : TX8_DTYPE_F32;
}

/* ---- one chunk of rows, in parallel ------------------------------------- */

#define CHUNK_ELEMS (4u << 20)
#define TASK_ELEMS (1u << 16)

struct chunk_job {
    const struct txq_spec *sp;
    const struct tx_tensor *src;
    uint64_t r0, n, rows_per_task;
    float *f32;
    void *data;
    float *scales;
    uint16_t *colblk;
    struct txq_acc *acc; /* per task */
    atomic_int failed;   /* the first failing task writes err */
    char err[TX_ERR_MAX];
};

static int chunk_task(void *ctx, uint64_t i)
{
    struct chunk_job *j = ctx;
    uint64_t a = i * j->rows_per_task;
    uint64_t n = j->n - a < j->rows_per_task ? j->n - a : j->rows_per_task;
    uint64_t C = j->sp->cols;
    float *w = j->f32 + a * C;
    char err[TX_ERR_MAX];
    int rc = tx_tensor_read_f32(j->src, (j->r0 + a) * C, n * C, w, err, sizeof(err));
    if (rc < 0) {
        if (atomic_exchange(&j->failed, 1) == 0)
            memcpy(j->err, err, sizeof(err));
        return rc;
    }
    /* a NaN or infinity would become a NaN scale, or garbage in F16/BF16 */
    for (uint64_t k = 0; k < n * C; k++)
        if (!isfinite(w[k])) {
            if (atomic_exchange(&j->failed, 1) == 0)
                snprintf(j->err, sizeof(j->err),
                         "%s: tensor %s: element [%" PRIu64 ", %" PRIu64 "] is %g: non-finite "
                         "weights cannot be exported",
                         j->src->file, j->src->name, j->r0 + a + k / C, k % C, (double)w[k]);
            return TX_EINVAL;
        }
    struct txq_scratch s;
    if (txq_scratch_init(&s, j->sp->cols) < 0)
        return TX_ENOMEM;
    txq_rows(j->sp, w, j->r0 + a, n, j->r0, &s, j->data, j->scales, j->colblk, &j->acc[i]);
    txq_scratch_free(&s);
    if (j->sp->dtype == TX8_DTYPE_I8) {
        /* finite weights give finite scales >= 0; check what is stored */
        uint64_t ng = j->sp->group_size ? C / j->sp->group_size : 1;
        const float *sc = j->scales + a * ng;
        for (uint64_t k = 0; k < n * ng; k++)
            if (!isfinite(sc[k]) || sc[k] < 0) {
                if (atomic_exchange(&j->failed, 1) == 0)
                    snprintf(j->err, sizeof(j->err),
                             "%s: tensor %s: INT8 scale of row %" PRIu64 " is %g (must be "
                             "finite and >= 0)",
                             j->src->file, j->src->name, j->r0 + a + k / ng, (double)sc[k]);
                return TX_EINVAL;
            }
    }
    return 0;
}

/* ---- progress ----------------------------------------------------------- */

struct progress {
    int on, tty;
    uint64_t total, done;
    int last;
    size_t ntensors;
};

static void progress_show(struct progress *p, size_t idx, const char *name)
{
    if (!p->on)
        return;
    int pct = p->total ? (int)(p->done * 100 / p->total) : 100;
    if (p->tty) {
        fprintf(stderr, "\rglm-export: %3d%% [%zu/%zu] %-60.60s", pct, idx, p->ntensors, name);
        if (idx == p->ntensors)
            fputc('\n', stderr);
    } else if (pct / 5 != p->last / 5 || idx == p->ntensors) {
        fprintf(stderr, "glm-export: %3d%% [%zu/%zu] %s\n", pct, idx, p->ntensors, name);
        p->last = pct;
    }
}

/* ---- export ------------------------------------------------------------- */

struct plan_choice {
    unsigned dtype, format;
    uint32_t group, keep;
    enum tx_smd_layer lt;
};

static void choose(const struct tx_export_opts *o, const struct tx_ckpt_tensor *ct,
                   struct plan_choice *pc)
{
    const struct glm_tensor_info *ti = &ct->info;
    pc->lt = layer_of(ti->cls);
    pc->dtype = TX8_DTYPE_F32;
    pc->format = TX8_WFMT_DENSE;
    pc->group = 0;
    pc->keep = 0;
    if (ti->ndim != 2 || pc->lt == TX_SMD_LAYER_ROUTER || pc->lt == TX_SMD_LAYER_NORM)
        return;
    const struct tx_smd_plan_entry *pe = &o->plan[pc->lt];
    uint32_t cols = (uint32_t)ti->shape[1];
    pc->dtype = tx_smd_precision_dtype(pe->precision);
    if (pc->dtype == TX8_DTYPE_F8_E4M3) { /* dense, 128 x 128 blocks */
        pc->group = TX8_FP8_BLOCK;
        return;
    }
    if (pc->dtype == TX8_DTYPE_I8 && pc->lt != TX_SMD_LAYER_EMBEDDING && pe->group_size &&
        cols % pe->group_size == 0)
        pc->group = pe->group_size;
    if ((pe->flags & TX_SMD_PLANF_SPARSE) &&
        (pc->lt == TX_SMD_LAYER_MLP || pc->lt == TX_SMD_LAYER_EXPERT) &&
        cols % TX8_SPARSE_BLOCK == 0 && cols / TX8_SPARSE_BLOCK >= 2 &&
        cols / TX8_SPARSE_BLOCK <= 65536) {
        pc->format = TX8_WFMT_BLOCK_SPARSE;
        pc->keep = tx_sparse_keep_blocks(cols, o->sparsity);
    }
}

static char *read_opt(const char *path, size_t *len, char *err, size_t errsz, int *rc)
{
    char *txt = NULL;
    *rc = txm_read_file(path, 1ull << 30, &txt, len, err, errsz);
    return txt;
}

static void add_num(struct json_object *o, const char *k, double v)
{
    json_object_object_add(o, k, json_object_new_double(v));
}
static void add_int(struct json_object *o, const char *k, int64_t v)
{
    json_object_object_add(o, k, json_object_new_int64(v));
}

/* CRC32C of the raw source bytes of elements [first, first + count) */
static uint32_t source_crc(uint32_t crc, const struct tx_tensor *t, uint64_t first, uint64_t count)
{
    size_t es = tx_elem_size(t->type);
    return tx_crc32c(crc, (const char *)t->data + first * es, (size_t)(count * es));
}

/*
 * An FP8 tensor of the package, by bands of 128 rows (one row of blocks):
 * an F8_E4M3 source with 128 x 128 block scales is stored bit for bit,
 * its scales exactly (the same layout); any other source is quantised the
 * Hugging Face way (txm_fp8_quantise_band). As many bands as CHUNK_ELEMS
 * holds are converted at once, one band per task on the export's threads
 * (x: their floats, q: their codes, scales: the tensor's
 * [ceil(rows/128)][ceil(cols/128)]); the chunk is then written and its
 * pages dropped, so the source streams as the other types do.
 */
struct fp8_job {
    const struct tx_tensor *src;
    uint64_t rows, cols, r0; /* r0: the chunk's first row */
    int same;                /* stored bit for bit */
    float *x, *scales;
    uint8_t *q;
    struct txq_acc *acc; /* per band */
    atomic_int failed;   /* the first failing band writes err */
    char err[TX_ERR_MAX];
};

static int fp8_band(void *ctx, uint64_t i)
{
    struct fp8_job *j = ctx;
    const uint64_t B = TX8_FP8_BLOCK, C = j->cols, sc = txm_fp8_grid(C, TX8_FP8_BLOCK);
    const uint64_t r = j->r0 + i * B, nr = j->rows - r < B ? j->rows - r : B, n = nr * C;
    float *x = j->x + i * B * C, *srow = j->scales + (r / B) * sc;
    uint8_t *q = j->q + i * B * C;
    char err[TX_ERR_MAX];
    int rc = tx_tensor_read_f32(j->src, r * C, n, x, err, sizeof(err));
    if (rc < 0) {
        if (atomic_exchange(&j->failed, 1) == 0)
            memcpy(j->err, err, sizeof(err));
        return rc;
    }
    for (uint64_t k = 0; k < n; k++)
        if (!isfinite(x[k])) {
            if (atomic_exchange(&j->failed, 1) == 0)
                snprintf(j->err, sizeof(j->err),
                         "%s: tensor %s: element [%" PRIu64 ", %" PRIu64
                         "] is %g: non-finite weights cannot be exported",
                         j->src->file, j->src->name, r + k / C, k % C, (double)x[k]);
            return TX_EINVAL;
        }
    if (j->same) {
        memcpy(q, (const uint8_t *)j->src->data + r * C, (size_t)n);
        for (uint64_t b = 0; b < sc; b++)
            srow[b] = txm_fp8_scale_at(j->src->scale_inv, (r / B) * sc + b);
    } else {
        txm_fp8_quantise_band(x, (uint32_t)nr, (uint32_t)C, TX8_FP8_BLOCK, q, srow);
    }
    struct txq_acc *acc = &j->acc[i];
    for (uint64_t k = 0; k < n; k++) {
        /* the dequantised value as tx_tensor_read_f32 and the device
         * form it (one f32 rounding): 0 for a stored FP8 source */
        float deq = tx_e4m3_to_f32(q[k]) * srow[(k % C) / B];
        double d = (double)deq - x[k];
        acc->sq_err += d * d;
        acc->sq_ref += (double)x[k] * x[k];
    }
    return 0;
}

static int fp8_tensor(struct tx_smd_writer *w, const struct tx_tensor *src, uint64_t rows,
                      uint64_t cols, float *x, uint8_t *q, float *scales, struct txq_acc *acc,
                      uint32_t *crc, struct progress *pg, int threads, const volatile int *cancel,
                      const char *output, char *err, size_t errsz)
{
    const uint64_t B = TX8_FP8_BLOCK;
    const uint64_t per_chunk = CHUNK_ELEMS / (B * cols) ? CHUNK_ELEMS / (B * cols) : 1;
    struct fp8_job j = {.src = src,
                        .rows = rows,
                        .cols = cols,
                        .same = src->type == TX_ELEM_F8_E4M3 && src->scale_inv &&
                                src->block_rows == B && src->block_cols == B,
                        .x = x,
                        .scales = scales,
                        .q = q};
    j.acc = calloc((size_t)per_chunk, sizeof(*j.acc));
    if (!j.acc)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    int rc = 0;
    for (uint64_t r0 = 0; r0 < rows && rc == 0; r0 += per_chunk * B) {
        if (cancel && *cancel) {
            rc = tx_errbuf(err, errsz, TX_ECANCELED, "%s: export cancelled", output);
            break;
        }
        uint64_t nb = (rows - r0 + B - 1) / B, n;
        nb = nb < per_chunk ? nb : per_chunk;
        n = (r0 + nb * B < rows ? nb * B : rows - r0) * cols;
        j.r0 = r0;
        memset(j.acc, 0, sizeof(*j.acc) * (size_t)nb);
        atomic_init(&j.failed, 0);
        rc = txm_parallel(nb > 1 ? threads : 1, nb, fp8_band, &j);
        if (rc < 0) {
            tx_errbuf(err, errsz, rc, "%s", j.err[0] ? j.err : "out of memory");
            break;
        }
        for (uint64_t b = 0; b < nb; b++) {
            acc->sq_err += j.acc[b].sq_err;
            acc->sq_ref += j.acc[b].sq_ref;
        }
        rc = tx_smd_writer_data(w, q, (size_t)n, err, errsz);
        if (rc < 0)
            break;
        *crc = source_crc(*crc, src, r0 * cols, n);
        tx_tensor_release_range(src, r0 * cols, n);
        pg->done += n * tx_elem_size(src->type);
    }
    free(j.acc);
    return rc;
}

/* where the package came from: the absolute path of the input and the
 * content hash of its tensors (tx_ckpt_source_hash), for --validate */
static void add_source(struct json_object *m, const char *input, const struct tx_export_stats *st)
{
    char *abs = realpath(input, NULL);
    json_object_object_add(m, "source_path", json_object_new_string(abs ? abs : input));
    free(abs);
    char h[32];
    snprintf(h, sizeof(h), "crc32c:%08" PRIx32, st->source_hash);
    json_object_object_add(m, "source_hash", json_object_new_string(h));
    add_int(m, "source_tensors", (int64_t)st->tensors);
}

static char *metadata_json(const char *input, const struct tx_ckpt *c,
                           const struct tx_export_opts *o, const struct tx_export_stats *st,
                           const struct glm_generation_config *gen)
{
    const struct glm_config *cfg = tx_ckpt_config(c);
    struct json_object *m = json_object_new_object();
    json_object_object_add(m, "producer", json_object_new_string("glm-export"));
    json_object_object_add(m, "producer_version", json_object_new_string("1.2"));
    const char *name = o->model_name;
    if (!name)
        name = glm_arch_family(cfg->arch);
    json_object_object_add(m, "model_name", json_object_new_string(name));
    json_object_object_add(m, "architecture", json_object_new_string(cfg->architecture));
    json_object_object_add(m, "model_type", json_object_new_string(cfg->model_type));
    json_object_object_add(m, "source", json_object_new_string(input));
    json_object_object_add(
        m, "source_format",
        json_object_new_string(tx_ckpt_format(c) == TX_CKPT_ONNX ? "onnx" : "hf"));
    add_source(m, input, st);
    /* SOURCE_DATE_EPOCH (reproducible-builds.org): a fixed "created", so
     * that the same export gives the same bytes */
    time_t now = time(NULL);
    const char *sde = getenv("SOURCE_DATE_EPOCH");
    if (sde && *sde) {
        char *end;
        errno = 0;
        long long v = strtoll(sde, &end, 10);
        if (!*end && !errno && v >= 0)
            now = (time_t)v;
    }
    struct tm tm;
    char ts[32];
    gmtime_r(&now, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object_object_add(m, "created", json_object_new_string(ts));
    json_object_object_add(m, "quant", json_object_new_string(o->quant ? o->quant : "default"));
    struct json_object *plan = json_object_new_object();
    int sparse = 0;
    for (unsigned l = 0; l < TX_SMD_LAYER_COUNT; l++) {
        struct json_object *e = json_object_new_object();
        json_object_object_add(e, "precision",
                               json_object_new_string(tx_smd_precision_name(o->plan[l].precision)));
        add_int(e, "group_size", o->plan[l].group_size);
        json_object_object_add(e, "sparse",
                               json_object_new_boolean(o->plan[l].flags & TX_SMD_PLANF_SPARSE));
        sparse |= (o->plan[l].flags & TX_SMD_PLANF_SPARSE) != 0;
        json_object_object_add(plan, tx_smd_layer_name(l), e);
    }
    json_object_object_add(m, "precision_plan", plan);
    json_object_object_add(m, "optimize", json_object_new_string(sparse ? "sparse" : "none"));
    if (sparse)
        add_num(m, "sparsity", o->sparsity);
    struct json_object *s = json_object_new_object();
    add_int(s, "tensors", (int64_t)st->tensors);
    add_int(s, "parameters", (int64_t)st->params);
    add_int(s, "input_bytes", (int64_t)st->input_bytes);
    add_int(s, "ignored_tensors", (int64_t)st->ignored);
    add_int(s, "pruned_elements", (int64_t)st->pruned_elems);
    add_num(s, "pruned_fraction", st->pruned_fraction);
    add_num(s, "ffn_mac_reduction", st->ffn_mac_reduction);
    add_num(s, "model_mac_reduction", st->model_mac_reduction);
    struct json_object *err = json_object_new_object();
    for (unsigned l = 0; l < TX_SMD_LAYER_COUNT; l++)
        if (st->elems[l])
            add_num(err, tx_smd_layer_name(l),
                    st->sq_ref[l] > 0 ? sqrt(st->sq_err[l] / st->sq_ref[l]) : 0.0);
    json_object_object_add(s, "relative_rms_error", err);
    json_object_object_add(m, "stats", s);
    /* generation_config.json, validated and normalised (docs/smd-format.md) */
    if (gen)
        json_object_object_add(m, "generation_config", txm_gen_config_to_object(gen));
    const char *txt = json_object_to_json_string_ext(
        m, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    char *r = strdup(txt);
    json_object_put(m);
    return r;
}

static int check_sections(const struct tx_ckpt *c, const char *tp, const char *tok, size_t toklen,
                          const char *tcp, const char *tokcfg, size_t tokcfglen, char *err,
                          size_t errsz)
{
    char sub[TX_ERR_MAX];
    size_t cjl;
    const char *cj = tx_ckpt_config_json(c, &cjl);
    struct glm_config cfg;
    /* the stored config text is parsed again by the loader */
    int rc = txm_smd_check_json("config.json", TX_SMD_SEC_CONFIG, cj, cjl, sub, sizeof(sub));
    if (rc == 0)
        rc = glm_config_from_json(cj, &cfg, sub, sizeof(sub));
    if (rc < 0)
        return tx_errbuf(err, errsz, rc, "%s; nothing written", sub);
    rc = txm_smd_check_json(tp, TX_SMD_SEC_TOKENIZER, tok, toklen, sub, sizeof(sub));
    if (rc < 0)
        return tx_errbuf(err, errsz, rc,
                         "tokenizer %s: not a valid JSON object (truncated, or not a "
                         "tokenizer.json); nothing written",
                         tp);
    struct tx_tokenizer *tk = NULL;
    rc = tx_tokenizer_load_buffer(tok, toklen, &tk, sub, sizeof(sub));
    tx_tokenizer_free(tk);
    if (rc != 0)
        return tx_errbuf(
            err, errsz, TX_EINVAL,
            "tokenizer %s: not a tokenizer glm-inference can load: %s; nothing written", tp, sub);
    if (tokcfg) {
        rc = txm_smd_check_json(tcp, TX_SMD_SEC_TOKENIZER_CONFIG, tokcfg, tokcfglen, sub,
                                sizeof(sub));
        if (rc < 0)
            return tx_errbuf(err, errsz, rc,
                             "tokenizer config %s: not a valid JSON object (truncated, or not a "
                             "tokenizer_config.json); nothing written",
                             tcp);
    }
    return 0;
}

int tx_export(const char *input, const char *output, const struct tx_export_opts *o,
              struct tx_export_stats *st_out, char *err, size_t errsz)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct tx_export_stats st;
    memset(&st, 0, sizeof(st));
    struct tx_ckpt *c = NULL;
    struct tx_smd_writer *w = NULL;
    char *tok = NULL, *tokcfg = NULL, *meta = NULL, *gencfg = NULL;
    struct glm_generation_config gen;
    int has_gen = 0;
    float *f32 = NULL, *scales = NULL;
    void *data = NULL;
    uint16_t *colblk = NULL;
    unsigned char *index = NULL;
    struct txq_acc *accs = NULL;
    size_t toklen = 0, tokcfglen = 0;
    int rc;
    char sub[TX_ERR_MAX];

    if (!(o->sparsity >= 0 && o->sparsity < 1))
        return tx_errbuf(err, errsz, TX_EINVAL, "sparsity %g outside [0, 1)", o->sparsity);
    for (unsigned l = 0; l < TX_SMD_LAYER_COUNT; l++)
        if (o->plan[l].layer != l || o->plan[l].precision >= TX_SMD_PREC_COUNT ||
            (o->plan[l].group_size % TX8_SPARSE_BLOCK))
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "plan entry %s invalid (group sizes must be multiples of %u)",
                             tx_smd_layer_name(l), TX8_SPARSE_BLOCK);
    rc = tx_ckpt_open(input, &c, err, errsz);
    if (rc < 0)
        return rc;
    const struct glm_config *cfg = tx_ckpt_config(c);
    const char *tp = o->tokenizer ? o->tokenizer : tx_ckpt_tokenizer_path(c);
    const char *tcp = o->tokenizer_config ? o->tokenizer_config : tx_ckpt_tokenizer_config_path(c);
    if (!tp) {
        rc =
            tx_errbuf(err, errsz, TX_ENOENT,
                      "%s: no tokenizer.json next to the model (give one with --tokenizer)", input);
        goto out;
    }
    tok = read_opt(tp, &toklen, err, errsz, &rc);
    if (rc < 0)
        goto out;
    if (tcp) {
        tokcfg = read_opt(tcp, &tokcfglen, err, errsz, &rc);
        if (rc < 0)
            goto out;
    }
    if (!o->tokenizer_config) {
        /* the checkpoint's chat_template.jinja (transformers prefers it) */
        rc = txe_merge_chat_template(tx_ckpt_path(c), &tokcfg, &tokcfglen, err, errsz);
        if (rc == 0) /* and the special tokens of special_tokens_map.json it lacks */
            rc = txe_merge_special_tokens(tx_ckpt_path(c), &tokcfg, &tokcfglen, err, errsz);
        if (rc < 0)
            goto out;
        if (tokcfg && !tcp)
            tcp = "chat_template.jinja";
    }
    const char *gcp = tx_ckpt_generation_config_path(c);
    if (gcp) {
        size_t gl = 0;
        rc = txm_read_file(gcp, TXM_GEN_CONFIG_MAX, &gencfg, &gl, err, errsz);
        if (rc < 0)
            goto out;
        /* ids bounded as config.json's eos_token_id (GLM_MAX_VOCAB) */
        rc = txm_gen_config_parse(gencfg, gl, gcp, 0, &gen, sub, sizeof(sub));
        if (rc < 0) {
            rc = tx_errbuf(err, errsz, rc, "%s; nothing written", sub);
            goto out;
        }
        has_gen = 1;
    }
    /* Every section is checked before anything is written, as tx_smd_open
     * and glm_model_load will check it: a package that exports is a package
     * that loads. */
    rc = check_sections(c, tp, tok, toklen, tcp, tokcfg, tokcfglen, err, errsz);
    if (rc < 0)
        goto out;
    rc = tx_smd_writer_open(output, &w, err, errsz);
    if (rc < 0)
        goto out;
    size_t cjl;
    const char *cj = tx_ckpt_config_json(c, &cjl);
    rc = tx_smd_writer_section(w, TX_SMD_SEC_CONFIG, cj, cjl, err, errsz);
    if (rc == 0)
        rc = tx_smd_writer_section(w, TX_SMD_SEC_TOKENIZER, tok, toklen, err, errsz);
    if (rc == 0 && tokcfg)
        rc = tx_smd_writer_section(w, TX_SMD_SEC_TOKENIZER_CONFIG, tokcfg, tokcfglen, err, errsz);
    if (rc == 0)
        rc = tx_smd_writer_plan(w, o->plan, err, errsz);
    if (rc < 0)
        goto out;

    int threads = o->threads > 0 ? o->threads : txm_ncpus();
    struct progress pg = {o->progress, isatty(2), tx_ckpt_bytes(c), 0, -5, tx_ckpt_count(c)};
    st.ignored = tx_ckpt_n_ignored(c);
    for (size_t i = 0; o->on_ignored && i < st.ignored; i++) {
        int mtp;
        const char *n = tx_ckpt_ignored(c, i, &mtp);
        o->on_ignored(o->ctx, n, mtp);
    }
    f32 = malloc((size_t)CHUNK_ELEMS * sizeof(float));
    data = malloc((size_t)CHUNK_ELEMS * sizeof(float));
    if (!f32 || !data) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto out;
    }
    const double expert_w =
        cfg->n_routed_experts > 0 ? (double)cfg->num_experts_per_tok / cfg->n_routed_experts : 0;
    /* the main model's tensors, then the MTP layer's unless left out */
    const size_t n_main = tx_ckpt_count(c), n_mtp = o->no_mtp ? 0 : tx_ckpt_mtp_count(c);
    for (size_t i = 0; o->no_mtp && o->on_ignored && i < tx_ckpt_mtp_count(c); i++)
        o->on_ignored(o->ctx, tx_ckpt_mtp_tensor(c, i)->info.name, 1);
    if (o->no_mtp)
        st.ignored += tx_ckpt_mtp_count(c);
    for (size_t ti = 0; ti < n_main + n_mtp; ti++) {
        const int is_mtp = ti >= n_main;
        const struct tx_ckpt_tensor *ct =
            is_mtp ? tx_ckpt_mtp_tensor(c, ti - n_main) : tx_ckpt_tensor(c, ti);
        const struct tx_tensor *src = ct->t;
        struct plan_choice pc;
        choose(o, ct, &pc);
        uint64_t rows = tx_tensor_rows(src), cols = tx_tensor_cols(src);
        if (rows > UINT32_MAX || cols > UINT32_MAX || rows == 0 || cols == 0) {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: unsupported size", src->file,
                           src->name);
            goto out;
        }
        struct txq_spec sp = {(uint32_t)rows, (uint32_t)cols, pc.dtype,
                              pc.format,      pc.group,       pc.keep};
        const int fp8 = pc.dtype == TX8_DTYPE_F8_E4M3;
        rc = fp8 ? 0 : txq_check_spec(&sp, sub, sizeof(sub));
        if (rc < 0) {
            tx_errbuf(err, errsz, rc, "tensor %s: %s", src->name, sub);
            goto out;
        }
        uint32_t nnz = pc.format == TX8_WFMT_BLOCK_SPARSE ? sp.rows * sp.keep_blocks : 0;
        struct tx_smd_tensor_desc d = {
            .name = src->name,
            .dtype = pc.dtype,
            .format = pc.format,
            .layer_type = pc.lt,
            .ndim = src->ndim,
            .group_size = pc.group,
            .nnz_blocks = nnz,
            .layer = ct->info.layer,
            .expert = ct->info.expert,
            .src_dtype = tx8_of_elem(src->type),
        };
        for (int k = 0; k < src->ndim; k++)
            d.shape[k] = src->shape[k];
        rc = tx_smd_writer_begin(w, &d, err, errsz);
        if (rc < 0)
            goto out;
        uint64_t ng = pc.group ? cols / pc.group : 1;
        size_t scales_len =
            pc.dtype == TX8_DTYPE_I8 ? (size_t)(rows * ng * 4)
            : fp8 ? (size_t)tx_smd_scales_size(pc.dtype, (uint32_t)rows, (uint32_t)cols, pc.group)
                  : 0;
        size_t index_len = (size_t)tx_smd_index_size(pc.format, (uint32_t)rows, nnz);
        free(scales);
        free(colblk);
        free(index);
        scales = NULL;
        colblk = NULL;
        index = NULL;
        if (scales_len && !(scales = malloc(scales_len))) {
            rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            goto out;
        }
        if (index_len) {
            colblk = malloc((size_t)nnz * 2 + 2);
            index = malloc(index_len);
            if (!colblk || !index) {
                rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
                goto out;
            }
        }
        size_t es = tx_dtype_size(pc.dtype);
        uint64_t row_out = pc.format == TX8_WFMT_BLOCK_SPARSE
                               ? (uint64_t)pc.keep * TX8_SPARSE_BLOCK * es
                               : cols * es;
        uint64_t chunk_rows = CHUNK_ELEMS / cols ? CHUNK_ELEMS / cols : 1;
        uint64_t rpt = TASK_ELEMS / cols ? TASK_ELEMS / cols : 1;
        if (cols > CHUNK_ELEMS) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: tensor %s: rows of %" PRIu64 " columns are too "
                           "long",
                           src->file, src->name, cols);
            goto out;
        }
        struct txq_acc tacc = {0};
        uint32_t src_crc = 0;
        if (fp8 && cols * TX8_FP8_BLOCK > CHUNK_ELEMS) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: tensor %s: rows of %" PRIu64 " columns are too long for FP8",
                           src->file, src->name, cols);
            goto out;
        }
        if (fp8) {
            rc = fp8_tensor(w, src, rows, cols, f32, data, scales, &tacc, &src_crc, &pg, threads,
                            o->cancel, output, err, errsz);
            if (rc < 0)
                goto out;
        }
        for (uint64_t r0 = 0; !fp8 && r0 < rows; r0 += chunk_rows) {
            uint64_t n = rows - r0 < chunk_rows ? rows - r0 : chunk_rows;
            if (o->cancel && *o->cancel) {
                rc = tx_errbuf(err, errsz, TX_ECANCELED, "%s: export cancelled", output);
                goto out;
            }
            uint64_t ntasks = (n + rpt - 1) / rpt;
            free(accs);
            accs = calloc(ntasks, sizeof(*accs));
            if (!accs) {
                rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
                goto out;
            }
            struct chunk_job j = {.sp = &sp,
                                  .src = src,
                                  .r0 = r0,
                                  .n = n,
                                  .rows_per_task = rpt,
                                  .f32 = f32,
                                  .data = data,
                                  .scales = scales ? scales + r0 * ng : NULL,
                                  .colblk = colblk ? colblk + r0 * pc.keep : NULL,
                                  .acc = accs};
            atomic_init(&j.failed, 0);
            rc = txm_parallel(ntasks > 1 ? threads : 1, ntasks, chunk_task, &j);
            if (rc < 0) {
                tx_errbuf(err, errsz, rc, "%s", j.err[0] ? j.err : "out of memory");
                goto out;
            }
            for (uint64_t k = 0; k < ntasks; k++) {
                tacc.pruned += accs[k].pruned;
                tacc.overflow += accs[k].overflow;
                tacc.sq_err += accs[k].sq_err;
                tacc.sq_ref += accs[k].sq_ref;
            }
            rc = tx_smd_writer_data(w, data, (size_t)(n * row_out), err, errsz);
            if (rc < 0)
                goto out;
            src_crc = source_crc(src_crc, src, r0 * cols, n * cols);
            /* stream: keep only the chunk being converted resident */
            tx_tensor_release_range(src, r0 * cols, n * cols);
            pg.done += n * cols * tx_elem_size(src->type);
        }
        if (tacc.overflow) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: tensor %s: %" PRIu64 " values exceed the FP16 range; use bf16 or "
                           "fp32 for %s",
                           src->file, src->name, tacc.overflow, tx_smd_layer_name(pc.lt));
            goto out;
        }
        if (index_len) {
            for (uint64_t r = 0; r <= rows; r++) {
                uint32_t v = (uint32_t)(r * pc.keep);
                memcpy(index + r * 4, &v, 4);
            }
            memcpy(index + (rows + 1) * 4, colblk, (size_t)nnz * 2);
        }
        rc = tx_smd_writer_end(w, scales, scales_len, index, index_len, err, errsz);
        if (rc < 0)
            goto out;
        /* statistics (the source hash and the MAC counts: the main model) */
        if (is_mtp) {
            st.mtp_tensors++;
        } else {
            st.source_hash = tx_ckpt_hash_tensor(st.source_hash, src, src_crc);
            if (src->scale_inv)
                st.source_hash = tx_ckpt_hash_scales(st.source_hash, src);
        }
        st.tensors++;
        st.params += src->nelem;
        st.input_bytes += src->nbytes;
        st.elems[pc.lt] += src->nelem;
        st.bytes[pc.lt] +=
            tx_smd_data_size(pc.dtype, pc.format, (uint32_t)rows, (uint32_t)cols, nnz) +
            scales_len + index_len;
        st.sq_err[pc.lt] += tacc.sq_err;
        st.sq_ref[pc.lt] += tacc.sq_ref;
        if (ct->info.ndim == 2 && pc.lt != TX_SMD_LAYER_EMBEDDING && !is_mtp) {
            double wgt = pc.lt == TX_SMD_LAYER_EXPERT ? expert_w : 1.0;
            double dense = (double)src->nelem * wgt;
            double kept = (double)(src->nelem - tacc.pruned) * wgt;
            st.model_macs_dense += dense;
            st.model_macs_sparse += kept;
            if (pc.lt == TX_SMD_LAYER_MLP || pc.lt == TX_SMD_LAYER_EXPERT) {
                st.ffn_macs_dense += dense;
                st.ffn_macs_sparse += kept;
            }
        }
        if (pc.format == TX8_WFMT_BLOCK_SPARSE) {
            st.sparse_tensors++;
            st.sparse_elems += src->nelem;
            st.pruned_elems += tacc.pruned;
        }
        progress_show(&pg, ti + 1, src->name);
    }
    st.pruned_fraction = st.sparse_elems ? (double)st.pruned_elems / st.sparse_elems : 0;
    st.ffn_mac_reduction = st.ffn_macs_dense > 0 ? 1 - st.ffn_macs_sparse / st.ffn_macs_dense : 0;
    st.model_mac_reduction =
        st.model_macs_dense > 0 ? 1 - st.model_macs_sparse / st.model_macs_dense : 0;
    meta = metadata_json(input, c, o, &st, has_gen ? &gen : NULL);
    if (!meta) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto out;
    }
    rc = tx_smd_writer_section(w, TX_SMD_SEC_METADATA, meta, strlen(meta), err, errsz);
    if (rc < 0)
        goto out;
    rc = tx_smd_writer_finish(w, err, errsz);
    w = NULL;
    if (rc < 0)
        goto out;
    struct stat sb;
    if (stat(output, &sb) == 0)
        st.output_bytes = (uint64_t)sb.st_size;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    st.seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (st_out)
        *st_out = st;
out:
    if (w)
        tx_smd_writer_abort(w);
    tx_ckpt_close(c);
    free(tok);
    free(tokcfg);
    free(gencfg);
    free(meta);
    free(f32);
    free(data);
    free(scales);
    free(colblk);
    free(index);
    free(accs);
    return rc;
}
