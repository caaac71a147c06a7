/* SPDX-License-Identifier: MIT */
/*
 * glm-inference's parts (tools/glm-inference/): the options (options.c),
 * the devices and the model of one run (run.c), one file per mode
 * (generate.c, chat.c, validate.c, bench.c with its llama-bench formats
 * in bench_output.c, bench_depth.c, bench_cache.c) and the reports they
 * share (report.c); under mpirun the tools' MPI transport
 * (common/mpi_transport.h, tools/lib/mpi_transport.c). main.c strings
 * them together. llama.cpp's spellings are sorted out first by the tools'
 * library (common/llama_flags.h).
 */
#ifndef GLM_INFERENCE_H
#define GLM_INFERENCE_H

#include <signal.h>
#include <stdio.h>

#include <tx/glm.h>
#include <tx/tx_device.h>

#include "bench_depth.h"

#define BENCH_LIST_MAX 16 /* values of one --bench list (-p, -n, -pg) */
#include "common/mpi_transport.h"

/* the name messages start with ("glm-inference", or "glm-inference: rank
 * R of N" under mpirun) and -v */
extern const char *prog;
extern int verbose;

/* ---- options.c ------------------------------------------------------------ */

struct opts {
    const char *checkpoint, *prompt, *file, *tokens, *device, *precision, *moe_config;
    const char *logits, *system, *name, *bench_plans, *load_balance;
    int n_predict, n_predict_set, n_ctx, n_batch, threads;
    long long seed;
    float temp, top_p, lambda;
    int top_k;
    int set_temp, set_top_k, set_top_p; /* given on the command line */
    float min_p, repeat_penalty, presence_penalty, frequency_penalty;
    int repeat_last_n, sampler_order;
    int chat_format;
    const char *chat_template_file; /* --chat-template-file: a .jinja or tokenizer_config.json */
    int spec_mtp, draft_max, spec_mode; /* --spec-type mtp, --draft-max, --spec-test */
    float draft_p_min;                   /* --draft-p-min (0: the default, < 0: off) */
    int bench_spec[8], n_bench_spec;     /* --bench-spec (bench_spec.c) */
    int chat, no_think, ignore_eos, no_display, interactive, no_moe_config, lambda_set;
    long long ep_rebalance;
    int validate, v_inputs, v_tokens;
    unsigned long long v_seed;
    const char *v_file; /* --validate-file: inputs from this text */
    const char *original;
    int no_original;
    int bench, bench_pp, bench_tg;
    int bench_depth[BENCH_DEPTH_MAX], n_bench_depth; /* --bench-depth (bench_depth.c) */
    int bench_reps;                                  /* --bench-reps, -r */
    int bench_reps_set;
    /* --bench as llama-bench: -p, -n lists, -pg pairs, -o (bench_output.h) */
    int bench_p[BENCH_LIST_MAX], n_bench_p;
    int bench_n[BENCH_LIST_MAX], n_bench_n;
    int bench_pg[BENCH_LIST_MAX][2], n_bench_pg;
    int bench_output;
    const char *n_arg;    /* -n as given: a count, or with --bench a list */
    int cache_k, cache_v; /* --cache-type-k / -v (enum glm_cache_type) */
    int expert_stats, memory_view, stream;
    int verify, no_verify, batch_invariant;
    unsigned long long max_weight_mem;
    unsigned long long expert_cache; /* --expert-cache */
    int expert_lru, no_prefetch, bench_cache;
    double bench_cache_frac;
    /* --grammar, --grammar-file, -j, --json-schema-file (grammar.c) */
    const char *grammar, *grammar_file, *json_schema, *json_schema_file;
    const char *attn_mask; /* --attn-mask FILE */
    char *file_text;           /* -f's contents, read by opts_parse */
    glm_precision_plan_t plan; /* --precision, parsed */
};

/* The defaults, then the command line, then the checks that need no
 * device (llama.cpp's spellings sorted out first: argv and *argc are
 * rewritten). -1: go on; otherwise the exit status (the message printed; 0 for
 * --help or after --verify). */
int opts_parse(struct opts *o, int *argc, char **argv);
/* --bench: the most positions one test uses (deepest context + the
 * largest test) */
int bench_span(const struct opts *o);

/* "1,2,3" (commas or blanks between) into a malloc'd array; 0, TX_EINVAL or
 * TX_ENOMEM */
int parse_token_ids(const char *s, int32_t **ids, size_t *n);

/* ---- run.c: the devices and the model of this run ------------------------ */

struct gi_run {
    struct glm_mpi_run mr;
    int mpi_agreed; /* every rank got to the load */
    tx_device_t *devs[GLM_EP_MAX_DEVICES];
    int n_devs;
    tx_device_t *dev; /* devs[0] */
    glm_precision_plan_t plan;
    glm_model_t *m;
    glm_session_t *s; /* the generation's session (generate.c) */
};

/* MPI (under mpirun) and the devices. -1: go on; else the exit status
 * (nothing left to close). */
int gi_open(struct gi_run *g, struct opts *o, int *argc, char ***argv);
/* The precision plan on every device. -1: go on; else the exit status. */
int gi_set_plan(struct gi_run *g, const struct opts *o);
/* The model, its KV cache types and MoE settings; an expert-parallel
 * worker rank serves here until rank 0 is done. -1: go on; else the exit
 * status. */
int gi_load(struct gi_run *g, const struct opts *o);
/* The multi-device reports, then everything freed and closed. */
void gi_close(struct gi_run *g);

/* ---- the modes ------------------------------------------------------------ */

int run_validate(glm_model_t *m, const struct opts *o);                /* validate.c */
int run_bench(glm_model_t *m, tx_device_t *dev, const struct opts *o); /* bench.c */
int run_generate(struct gi_run *g, struct opts *o);                    /* generate.c */
int run_chat(glm_model_t *m, glm_session_t *s, const struct opts *o,   /* chat.c */
             struct glm_sampling *smp);

/* ---- generate.c: what generation and chat share --------------------------- */

/* SIGINT, SIGTERM, SIGHUP: the signal, once caught (catch_signals) */
extern volatile sig_atomic_t interrupted;
/* stdout's reader went away (EPIPE): generation stopped, exit 0 */
extern volatile sig_atomic_t stdout_closed;
void catch_signals(void);
/* SIGINT, SIGTERM and SIGHUP to handler, with sigaction's flags */
void set_signals(void (*handler)(int), int flags);
/* glm_generate's on_token: the piece to stdout; --ep-rebalance; the grammar */
int on_token(void *user, int32_t tok, const char *piece, size_t len);

/* ---- grammar.c: --grammar, --grammar-file, --json-schema -------------------- */
/* The session's token mask from the grammar (none given: nothing); 0, or -1
 * with the message printed. token: a generated token advances it (-1: the
 * mask could not be set); end: the mask and the grammar go. */
int gi_grammar_start(const struct opts *o, glm_model_t *m, glm_session_t *s);
int gi_grammar_token(int32_t tok);
void gi_grammar_end(void);

/* ---- report.c ------------------------------------------------------------- */

double now_ms(void);
/* "prog: what: <tx_last_error()>" on stderr */
void log_err(const char *what);
/* the same, or a lost device's own one line */
void log_rc(const char *what, int rc);
/* llama.cpp's llama_perf_context_print lines on stderr */
void print_perf(const struct glm_timings *t);
void print_ttft(const struct glm_timings *t, const struct glm_decode_times *a,
                const struct glm_decode_times *b);
void print_memory_view(tx_device_t *dev); /* --memory-view */
void print_expert_stats(glm_model_t *m);  /* --expert-stats */

#endif
