/* SPDX-License-Identifier: MIT */
/* glm-inference --bench-spec (bench_spec.c) */
#ifndef GLM_INFERENCE_BENCH_SPEC_H
#define GLM_INFERENCE_BENCH_SPEC_H

#include <tx/glm.h>

#define BENCH_SPEC_MAX 8

/* tg with MTP speculative decoding at draft sizes ks[0..nk) against
 * non-speculative decoding, side by side in one run: at each depth of
 * depths[0..nd), the text's first depth + 32 tokens are the prompt and tg
 * greedy tokens are generated (stop tokens banned), reps rounds
 * alternating the modes; the median t/s of each, the device's busy time
 * and the passes per token; p_min: glm_generate_params.spec_p_min. 0, or 1
 * on an error. */
int bench_spec_run(glm_model_t *m, const char *text, const int *ks, int nk, const int *depths,
                   int nd, int tg, int reps, float p_min, const char *prog);

#endif
