/* SPDX-License-Identifier: MIT */
/*
 * glm-inference: energy per token from the device's power-model counters
 * (docs/hardware.md section 7, interface 1.8).
 */
#ifndef GLM_INFERENCE_ENERGY_H
#define GLM_INFERENCE_ENERGY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <tx/tx_device.h>

/* A reading of the device's energy counters. */
struct gi_energy {
    bool have;          /* the device reports energy (interface >= 1.8) */
    uint64_t active_uj; /* the commands' energy (energy_active_uj) */
    uint64_t board_uj;  /* the board's, static power included (energy_uj) */
};

void gi_energy_read(tx_device_t *dev, struct gi_energy *e);

/* Energy between two readings per token: mJ/token and tokens/J of the
 * commands' energy. False when the device has no energy counters or no
 * token ran. */
bool gi_energy_per_token(const struct gi_energy *a, const struct gi_energy *b, int tokens,
                         double *mj_per_token, double *tokens_per_j);

/* The timings' energy line ("glm_perf: energy = ..."), after print_perf. */
void gi_energy_print(FILE *f, const struct gi_energy *a, const struct gi_energy *b, int n_prompt,
                     int n_eval);

#endif /* GLM_INFERENCE_ENERGY_H */
