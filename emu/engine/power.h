/* SPDX-License-Identifier: MIT */
/*
 * The TX8 power model (docs/hardware.md section 7): what a command costs in
 * energy and in modelled device time, and the board's static power.
 *
 * A command's energy is
 *   dynamic = macs x pJ/MAC(datapath precision) + bytes x pJ/byte(memory)
 *             + link bytes x pJ/byte(host link)
 *   energy  = dynamic + static power x modelled time
 * where the modelled time is the command's roofline time at the modelled
 * clock: max(macs / (MACs per cycle x clock), bytes / memory bandwidth).
 * MACs the sparse engine skips are not executed and cost nothing. Under a
 * power cap the modelled clock is lowered until the command's power
 * (static + dynamic / time) fits under the cap; time grows by the same
 * factor, the dynamic energy per operation stays.
 */
#ifndef TX8_ENGINE_POWER_H
#define TX8_ENGINE_POWER_H

#include <stdint.h>
#include <stdio.h>

#include <tx8/tx8_hw.h>

/* Lowest modelled clock a power cap can ask for, per mille of nominal. */
#define TX8_POWER_MIN_CLOCK_PERMILLE 1

struct tx8_power_model {
    double static_mw;                        /* board static (= idle) power */
    double pj_per_mac[TX8_DTYPE_COUNT];      /* by weight dtype (MAC datapath) */
    double pj_per_mac_fp8;                   /* FP8 datapath, once a dtype names it */
    double pj_per_mem_byte;                  /* device memory traffic */
    double pj_per_link_byte;                 /* host link (PCIe) traffic */
    double macs_per_cycle[TX8_DTYPE_COUNT];  /* peak of each datapath */
    double clock_mhz;                        /* nominal modelled clock */
    double mem_gbps;                         /* device memory bandwidth, GB/s */
    double cap_mw;                           /* board power limit, 0 = none */
};

/* What one command costs. */
struct tx8_power_cost {
    double dynamic_pj;
    double energy_pj;   /* dynamic + static x time */
    double time_ns;     /* modelled time at the (throttled) clock */
    double clock_scale; /* modelled clock / nominal, (0, 1] */
};

/* The documented defaults (docs/hardware.md, section 7 table). */
void tx8_power_defaults(struct tx8_power_model *m);

/* Set one parameter from "NAME=VALUE" (names: tx8_power_print_params).
 * Returns 0, or -1 with a message naming what was wrong in err. */
int tx8_power_set(struct tx8_power_model *m, const char *assignment, char *err, size_t errlen);

/* Print the parameter table (name, value, unit, meaning) to f. */
void tx8_power_print_params(const struct tx8_power_model *m, FILE *f);

/* The cost of a command of `macs` MACs on the datapath of `dtype` (enum
 * tx8_dtype; others cost as F16), `mem_bytes` of device-memory traffic and
 * `link_bytes` over the host link. */
void tx8_power_command(const struct tx8_power_model *m, uint64_t macs, unsigned dtype,
                       uint64_t mem_bytes, uint64_t link_bytes, struct tx8_power_cost *out);

#endif /* TX8_ENGINE_POWER_H */
