/* SPDX-License-Identifier: MIT */
/*
 * glm-inference --bench's rows in llama-bench's formats (bench_output.c):
 * -o md (the table), csv, json (one array) and jsonl (one object a line),
 * with llama-bench's field names and TX8's own columns beside them.
 */
#ifndef GLM_INFERENCE_BENCH_OUTPUT_H
#define GLM_INFERENCE_BENCH_OUTPUT_H

#include <stdint.h>

enum bench_format { BENCH_MD, BENCH_CSV, BENCH_JSON, BENCH_JSONL };

/* "md", "csv", "json", "jsonl" -> enum bench_format; -1 for anything else */
int bench_format_parse(const char *s);

#define BENCH_SAMPLES_MAX 100

/* what every row of one run shares */
struct bench_run_info {
    const char *build_commit;
    char cpu_info[128];
    const char *gpu_info, *backend; /* the device's name, its backend */
    const char *model_filename, *model_type;
    uint64_t model_size, model_n_params;
    int n_batch, n_threads;
};

/* one test: n_prompt tokens of prefill, then n_gen single-token decode
 * passes, after n_depth cached tokens; reps samples */
struct bench_row {
    const char *plan, *type_k, *type_v;
    int n_prompt, n_gen, n_depth;
    char test_time[32]; /* ISO 8601, UTC, when the test started */
    int reps;
    double ns[BENCH_SAMPLES_MAX]; /* each sample's wall time */
    double bytes_per_token;       /* weight bytes one decode step reads */
    double read_gbs;              /* the host's read bandwidth (0: not measured) */
    /* the device's power model over the timed passes (interface >= 1.8) */
    int have_energy;
    double mj_per_token, tokens_per_j;
};

void bench_print_begin(enum bench_format f);
void bench_print_row(enum bench_format f, const struct bench_run_info *ri,
                     const struct bench_row *r, int first);
void bench_print_end(enum bench_format f);

#endif
