/* SPDX-License-Identifier: MIT */
/* glm-inference --bench-depth (bench_depth.c) */
#ifndef GLM_INFERENCE_BENCH_DEPTH_H
#define GLM_INFERENCE_BENCH_DEPTH_H

#include <stddef.h>

#include <tx/glm.h>
#include <tx/tx_device.h>

#define BENCH_DEPTH_MAX 16
#define BENCH_REPS_MAX 100 /* --bench-reps */

/* "32,64,128" into v[<= max], each in [lo, hi]; -1 with err set on bad
 * input, naming opt and what was expected ("depths >= 0") */
int bench_list_parse(const char *opt, const char *what, const char *s, int lo, int hi, int *v,
                     int max, int *n, char *err, size_t errsz);
/* "0,2048,8192" into depths[<= max]; -1 with err set on bad input */
int bench_depth_parse(const char *s, int *depths, int max, int *n, char *err, size_t errsz);
/* the pp / tg rows at each depth under the device's current plan, over
 * reps rounds (each running every depth in turn; reps 1: one depth's
 * session at a time); 0 or 1 */
int bench_depth_run(glm_model_t *m, tx_device_t *dev, const int *depths, int nd, int pp, int tg,
                    int reps, int n_batch, int threads, const char *prog);

#endif
