/* SPDX-License-Identifier: MIT */
/*
 * glm-inference --bench's rows in llama-bench's formats
 * (docs/glm-inference.md, "--bench"). The field names are llama-bench's
 * (build_commit, model_type, n_prompt, n_gen, n_depth, avg_ts, stddev_ts,
 * samples_ns, ...); TX8's own fields follow them (precision_plan,
 * weights_per_token, read_gbs). md is llama-bench's table with the plan
 * and the bandwidth columns added.
 */
#include "bench_output.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int bench_format_parse(const char *s)
{
    static const char *const names[] = {"md", "csv", "json", "jsonl"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

/* mean and sample standard deviation (0 for one sample), as llama-bench */
static void stats(const double *v, int n, double *avg, double *sd)
{
    double s = 0, q = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    *avg = n ? s / n : 0;
    for (int i = 0; i < n; i++)
        q += (v[i] - *avg) * (v[i] - *avg);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

struct row_stats {
    double ts[BENCH_SAMPLES_MAX];
    double avg_ns, sd_ns, avg_ts, sd_ts;
};

static void row_stats(const struct bench_row *r, struct row_stats *st)
{
    int tokens = r->n_prompt + r->n_gen;
    for (int i = 0; i < r->reps; i++)
        st->ts[i] = r->ns[i] > 0 ? tokens * 1e9 / r->ns[i] : 0;
    stats(r->ns, r->reps, &st->avg_ns, &st->sd_ns);
    stats(st->ts, r->reps, &st->avg_ts, &st->sd_ts);
}

/* llama-bench's test name: pp512, tg128, pp512+tg128, then " @ d1024" */
static void test_name(const struct bench_row *r, char *buf, size_t sz)
{
    int k;
    if (r->n_prompt && r->n_gen)
        k = snprintf(buf, sz, "pp%d+tg%d", r->n_prompt, r->n_gen);
    else if (r->n_prompt)
        k = snprintf(buf, sz, "pp%d", r->n_prompt);
    else
        k = snprintf(buf, sz, "tg%d", r->n_gen);
    if (r->n_depth && k > 0 && (size_t)k < sz)
        snprintf(buf + k, sz - (size_t)k, " @ d%d", r->n_depth);
}

static const char *const csv_fields =
    "build_commit,build_number,cpu_info,gpu_info,backends,model_filename,model_type,model_size,"
    "model_n_params,n_batch,n_ubatch,n_threads,type_k,type_v,n_prompt,n_gen,n_depth,test_time,"
    "avg_ns,stddev_ns,avg_ts,stddev_ts,samples_ns,samples_ts,precision_plan,weights_per_token,"
    "read_gbs,mj_per_token,tokens_per_j";

void bench_print_begin(enum bench_format f)
{
    if (f == BENCH_MD) {
        printf("| model | size | params | backend | plan | test | t/s | weights/token | GB/s | "
               "%% of BW | mJ/token | tokens/J |\n");
        printf("| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
               "|\n");
    } else if (f == BENCH_CSV) {
        printf("%s\n", csv_fields);
    } else if (f == BENCH_JSON) {
        printf("[\n");
    }
    fflush(stdout);
}

static json_object *row_json(const struct bench_run_info *ri, const struct bench_row *r,
                             const struct row_stats *st)
{
    json_object *o = json_object_new_object();
#define S(k, v) json_object_object_add(o, k, json_object_new_string(v))
#define I(k, v) json_object_object_add(o, k, json_object_new_int64((int64_t)(v)))
#define D(k, v) json_object_object_add(o, k, json_object_new_double(v))
    S("build_commit", ri->build_commit);
    I("build_number", 0);
    S("cpu_info", ri->cpu_info);
    S("gpu_info", ri->gpu_info);
    char be[64];
    snprintf(be, sizeof(be), "TX8 %s", ri->backend);
    S("backends", be);
    S("model_filename", ri->model_filename);
    S("model_type", ri->model_type);
    I("model_size", ri->model_size);
    I("model_n_params", ri->model_n_params);
    I("n_batch", ri->n_batch);
    I("n_ubatch", ri->n_batch);
    I("n_threads", ri->n_threads);
    S("type_k", r->type_k);
    S("type_v", r->type_v);
    I("n_prompt", r->n_prompt);
    I("n_gen", r->n_gen);
    I("n_depth", r->n_depth);
    S("test_time", r->test_time);
    I("avg_ns", llround(st->avg_ns));
    I("stddev_ns", llround(st->sd_ns));
    D("avg_ts", st->avg_ts);
    D("stddev_ts", st->sd_ts);
    json_object *ns = json_object_new_array(), *ts = json_object_new_array();
    for (int i = 0; i < r->reps; i++) {
        json_object_array_add(ns, json_object_new_int64(llround(r->ns[i])));
        json_object_array_add(ts, json_object_new_double(st->ts[i]));
    }
    json_object_object_add(o, "samples_ns", ns);
    json_object_object_add(o, "samples_ts", ts);
    S("precision_plan", r->plan);
    I("weights_per_token", llround(r->bytes_per_token));
    D("read_gbs", r->read_gbs);
    if (r->have_energy) { /* the device's power model (interface >= 1.8) */
        D("mj_per_token", r->mj_per_token);
        D("tokens_per_j", r->tokens_per_j);
    }
#undef S
#undef I
#undef D
    return o;
}

/* a CSV field: quoted, inner quotes doubled */
static void csv_str(const char *s, int last)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"')
            putchar('"');
        putchar(*s);
    }
    putchar('"');
    putchar(last ? '\n' : ',');
}

static void print_csv(const struct bench_run_info *ri, const struct bench_row *r,
                      const struct row_stats *st)
{
    char be[64];
    snprintf(be, sizeof(be), "TX8 %s", ri->backend);
    csv_str(ri->build_commit, 0);
    printf("0,");
    csv_str(ri->cpu_info, 0);
    csv_str(ri->gpu_info, 0);
    csv_str(be, 0);
    csv_str(ri->model_filename, 0);
    csv_str(ri->model_type, 0);
    printf("%llu,%llu,%d,%d,%d,", (unsigned long long)ri->model_size,
           (unsigned long long)ri->model_n_params, ri->n_batch, ri->n_batch, ri->n_threads);
    csv_str(r->type_k, 0);
    csv_str(r->type_v, 0);
    printf("%d,%d,%d,", r->n_prompt, r->n_gen, r->n_depth);
    csv_str(r->test_time, 0);
    printf("%lld,%lld,%f,%f,\"", llround(st->avg_ns), llround(st->sd_ns), st->avg_ts, st->sd_ts);
    for (int i = 0; i < r->reps; i++)
        printf("%s%lld", i ? ";" : "", llround(r->ns[i]));
    printf("\",\"");
    for (int i = 0; i < r->reps; i++)
        printf("%s%f", i ? ";" : "", st->ts[i]);
    printf("\",");
    csv_str(r->plan, 0);
    printf("%lld,%f,", llround(r->bytes_per_token), r->read_gbs);
    if (r->have_energy)
        printf("%f,%f\n", r->mj_per_token, r->tokens_per_j);
    else
        printf(",\n");
}

void bench_print_row(enum bench_format f, const struct bench_run_info *ri,
                     const struct bench_row *r, int first)
{
    struct row_stats st;
    row_stats(r, &st);
    if (f == BENCH_MD) {
        char test[64], gbs[32] = "-", pct[16] = "-";
        test_name(r, test, sizeof(test));
        /* the weight bytes a pass reads per token: decode reads them all
         * for each token; a prefill of n tokens reads them once */
        if (!r->n_prompt || !r->n_gen) {
            snprintf(gbs, sizeof(gbs), "%.2f", r->bytes_per_token * st.avg_ts / 1e9);
            if (!r->n_prompt && r->read_gbs > 0)
                snprintf(pct, sizeof(pct), "%.1f%%",
                         100.0 * r->bytes_per_token * st.avg_ts / 1e9 / r->read_gbs);
        }
        char mjt[32] = "-", tpj[32] = "-";
        if (r->have_energy) {
            snprintf(mjt, sizeof(mjt), "%.4f", r->mj_per_token);
            snprintf(tpj, sizeof(tpj), "%.1f", r->tokens_per_j);
        }
        printf("| %s | %.2f GiB | %.3f B | TX8 %s | %s | %s | %.2f ± %.2f | %.1f MB | %s | %s | %s "
               "| %s |\n",
               ri->model_type, (double)ri->model_size / (1 << 30), ri->model_n_params / 1e9,
               ri->backend, r->plan, test, st.avg_ts, st.sd_ts, r->bytes_per_token / 1e6, gbs, pct,
               mjt, tpj);
    } else if (f == BENCH_CSV) {
        print_csv(ri, r, &st);
    } else {
        json_object *o = row_json(ri, r, &st);
        if (f == BENCH_JSON)
            printf("%s  %s", first ? "" : ",\n",
                   json_object_to_json_string_ext(o, JSON_C_TO_STRING_SPACED));
        else
            printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
    }
    fflush(stdout);
}

void bench_print_end(enum bench_format f)
{
    if (f == BENCH_JSON)
        printf("\n]\n");
    fflush(stdout);
}
