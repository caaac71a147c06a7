/* SPDX-License-Identifier: MIT */
/*
 * glm-inference: energy per token (see energy.h). The device's commands'
 * energy (energy_active_uj) is the work at the modelled clock, what the
 * article's mJ/token measures; the board energy also holds the static
 * power over the wall time, which on the emulator is the host's slowness.
 */
#include "energy.h"

#include <string.h>

#include <tx8/tx8_hw.h>

void gi_energy_read(tx_device_t *dev, struct gi_energy *e)
{
    struct tx_device_info di;
    struct tx_device_counters c;

    memset(e, 0, sizeof(*e));
    if (!dev || tx_device_info(dev, &di) || TX8_IF_MINOR(di.if_version) < 8 ||
        tx_device_counters(dev, &c))
        return;
    e->have = true;
    e->active_uj = c.dev.energy_active_uj;
    e->board_uj = c.dev.energy_uj;
}

bool gi_energy_per_token(const struct gi_energy *a, const struct gi_energy *b, int tokens,
                         double *mj_per_token, double *tokens_per_j)
{
    double mj;

    if (!a->have || !b->have || tokens <= 0 || b->active_uj < a->active_uj)
        return false;
    mj = (double)(b->active_uj - a->active_uj) / 1e3;
    *mj_per_token = mj / tokens;
    *tokens_per_j = mj > 0 ? tokens / (mj / 1e3) : 0;
    return true;
}

void gi_energy_print(FILE *f, const struct gi_energy *a, const struct gi_energy *b, int n_prompt,
                     int n_eval)
{
    int n = n_prompt + n_eval;
    double mjt, tpj;

    if (!gi_energy_per_token(a, b, n, &mjt, &tpj)) {
        fprintf(f, "glm_perf: energy = not reported by the device (interface < 1.8)\n");
        return;
    }
    fprintf(f,
            "glm_perf: energy = %.3f mJ / %d tokens (%.4f mJ/token, %.1f tokens/J; device power "
            "model), board %.1f mJ with static power over the wall time\n",
            (double)(b->active_uj - a->active_uj) / 1e3, n, mjt, tpj,
            (double)(b->board_uj - a->board_uj) / 1e3);
}
