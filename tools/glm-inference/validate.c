/* SPDX-License-Identifier: MIT */
/*
 * glm-inference --validate: random inputs through the device and the FP32
 * reference (glm_validate), the per-layer tables and where the error comes
 * from (docs/glm-inference.md, "Validation").
 */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "glm_inference.h"

static void v_progress(void *user, int done, int total, double cs)
{
    (void)user;
    printf("input %3d/%d  cosine %.6f%s\n", done, total, cs, isfinite(cs) ? "" : "  NON-FINITE");
    fflush(stdout);
}

static const char *type_label(int t)
{
    return t >= 0 && t < GLM_LAYER_TYPE_COUNT ? glm_layer_type_name((glm_layer_type_t)t) : "-";
}

/* what a decoder layer holds, for the per-layer tables */
static const char *layer_kind(const struct glm_config *c, int l)
{
    if (l == c->num_hidden_layers)
        return "norm";
    return c->n_routed_experts > 0 && l >= c->first_k_dense_replace ? "attn+experts" : "attn+mlp";
}

static void print_layers(const struct glm_config *c, const struct glm_layer_stats *ls, int nl,
                         const char *title, const char *a, const char *b)
{
    printf("\n%s\n", title);
    printf("%5s %-12s %12s %11s %11s %12s %11s %11s %10s %10s %8s %8s\n", "layer", "holds", a,
           "std", "max|x|", b, "std", "max|err|", "cos min", "cos mean", "route!=", "dsa!=");
    for (int l = 0; l < nl; l++) {
        const struct glm_layer_stats *s = &ls[l];
        char name[16];
        if (l == c->num_hidden_layers)
            snprintf(name, sizeof(name), "norm");
        else
            snprintf(name, sizeof(name), "%d", l);
        char ra[16] = "-", da[16] = "-";
        if (s->route_mismatch >= 0)
            snprintf(ra, sizeof(ra), "%.2f%%", 100 * s->route_mismatch);
        if (s->dsa_mismatch >= 0)
            snprintf(da, sizeof(da), "%.2f%%", 100 * s->dsa_mismatch);
        printf("%5s %-12s %+12.6f %11.6f %11.5f %+12.6f %11.6f %11.6f %10.6f %10.6f %8s %8s\n",
               name, layer_kind(c, l), s->mean, s->std, s->max_abs, s->ref_mean, s->ref_std,
               s->max_abs_err, s->cosine_min, s->cosine_mean, ra, da);
    }
}

/* the layer whose minimum cosine drops most below the previous one's */
static int worst_drop(const struct glm_layer_stats *ls, int nl, double *cs)
{
    int w = 0;
    double best = -1, prev = 1;
    for (int l = 0; l < nl; l++) {
        double c = ls[l].cosine_min;
        if (isnan(c)) {
            *cs = c;
            return l;
        }
        if (prev - c > best) {
            best = prev - c;
            w = l;
        }
        prev = c;
    }
    *cs = ls[w].cosine_min;
    return w;
}

static void print_alone(const char *what, const double *alone, int blame)
{
    printf("%s", what);
    int any = 0;
    for (int t = 0; t < GLM_LAYER_TYPE_COUNT; t++)
        if (alone[t] >= -1 || isnan(alone[t])) {
            printf("%s %s %.6f", any ? "," : "", type_label(t), alone[t]);
            any = 1;
        }
    if (!any)
        printf(" nothing to measure\n");
    else
        printf("  -> %s\n", type_label(blame));
}

int run_validate(glm_model_t *m, const struct opts *o)
{
    struct glm_validate_options vo;
    memset(&vo, 0, sizeof(vo));
    vo.n_inputs = o->v_inputs;
    vo.n_tokens = o->v_tokens;
    vo.seed = o->v_seed;
    vo.ref_threads = o->threads;
    vo.progress = v_progress;
    vo.original = o->original;
    vo.use_original = o->no_original ? GLM_VALIDATE_ORIGINAL_NONE : GLM_VALIDATE_ORIGINAL_AUTO;
    struct glm_validate_report *r;
    char plan[200];
    glm_precision_plan_t p;
    glm_plan_get(glm_model_device(m), &p);
    fprintf(stderr,
            "%s: validating %s (plan %s) against the FP32 reference on the %s; the per-input "
            "figure is device vs %s\n",
            prog, glm_model_name(m), glm_plan_format(&p, plan, sizeof(plan)),
            o->no_original ? "package's own weights"
                           : "original model's weights if found (float64 for an FP8 original)",
            o->no_original ? "package" : "original (if found)");
    int vrc;
    if (o->v_file) { /* held-out text: consecutive windows of its tokens */
        char *text = NULL;
        int32_t *ids = NULL;
        size_t n_ids = 0;
        vrc = txc_read_path(o->v_file, &text, NULL);
        if (vrc) {
            fprintf(stderr, "%s: --validate-file: %s\n", prog, tx_last_error());
            return 1;
        }
        vrc = glm_tokenize(m, text, &ids, &n_ids);
        free(text);
        if (!vrc) {
            fprintf(stderr, "%s: inputs: %d windows of %d tokens of %s (%zu tokens)\n", prog,
                    vo.n_inputs ? vo.n_inputs : 100, vo.n_tokens ? vo.n_tokens : 8, o->v_file,
                    n_ids);
            vrc = glm_validate_tokens(m, &vo, ids, n_ids, &r);
        }
        free(ids);
    } else {
        vrc = glm_validate(m, &vo, &r);
    }
    if (vrc) {
        log_rc("validate", vrc);
        return 1;
    }
    const struct glm_config *c = glm_model_config(m);
    if (r->original)
        printf("\noriginal model: %s (%s)\n", r->original_path,
               r->source_hash[0] ? r->source_hash : "hash not recorded");
    if (r->original_note)
        printf("%s%s\n", r->original ? "note: " : "\nno original model: ", r->original_note);
    if (!r->original)
        printf("measuring the device arithmetic only (device vs the package's own weights in "
               "FP32): the quantisation error of the export is NOT included\n");
    print_layers(c, r->layers, r->n_layers,
                 "per-layer statistics, device arithmetic (residual stream after each layer, "
                 "device vs package reference)",
                 "mean", "pkg mean");
    if (r->quant_layers)
        print_layers(c, r->quant_layers, r->n_layers,
                     "per-layer statistics, quantisation (package reference vs original "
                     "reference)",
                     "pkg mean", "orig mean");
    double dcs, qcs = 1;
    int dl = worst_drop(r->layers, r->n_layers, &dcs), ql = -1;
    if (r->quant_layers)
        ql = worst_drop(r->quant_layers, r->n_layers, &qcs);
    printf("\nlogits, cosine per input over all %d positions, %d inputs:\n", r->n_tokens,
           r->n_inputs);
    printf("  device arithmetic (device vs package reference): min %.6f, mean %.6f\n",
           r->device_min_cosine, r->device_mean_cosine);
    if (r->original)
        printf("  quantisation      (package vs original reference): min %.6f, mean %.6f\n",
               r->quant_min_cosine, r->quant_mean_cosine);
    printf("  %s: min %.6f (input %d), mean %.6f, max relative error %.3e\n",
           r->original ? "device vs original" : "device vs package ", r->min_cosine, r->worst_input,
           r->mean_cosine, r->max_rel_err);
    printf("  worst single position: cosine %.6f (input %d, position %d)\n", r->min_position_cosine,
           r->worst_position_input, r->worst_position);
    if (r->n_nonfinite)
        printf("  NON-FINITE outputs in %d of %d inputs\n", r->n_nonfinite, r->n_inputs);
    printf("\nwhere the error comes from (worst input %d):\n", r->worst_input);
    printf("  device arithmetic: largest drop at layer %d (%s), cosine %.6f\n", dl,
           layer_kind(c, dl), dcs);
    print_alone("    only this type at its plan precision, rest FP32:", r->device_alone,
                r->device_blame);
    if (r->original) {
        printf("  quantisation: largest drop at layer %d (%s), cosine %.6f\n", ql,
               layer_kind(c, ql), qcs);
        print_alone("    only this type's weights quantised, rest original:", r->quant_alone,
                    r->quant_blame);
    }
    if (r->n_nonfinite)
        printf("validation FAILED: non-finite output in %d of %d inputs (first: input %d)\n",
               r->n_nonfinite, r->n_inputs, r->worst_input);
    else
        printf("validation %s: min cosine %.6f %s %.2f against the %s (device %.0f ms, "
               "reference %.0f ms)\n",
               r->passed ? "PASSED" : "FAILED", r->min_cosine, r->passed ? ">=" : "<", r->threshold,
               r->original ? "original model" : "package (device arithmetic only)", r->device_ms,
               r->reference_ms);
    int ok = r->passed;
    glm_validate_report_free(r);
    return ok ? 0 : 1;
}
