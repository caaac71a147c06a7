/* SPDX-License-Identifier: MIT */
/*
 * The TX8 power model: parameters, their defaults, and a command's cost.
 * See power.h and docs/hardware.md section 7 (the table of parameters and
 * where each value comes from).
 */
#include "power.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void tx8_power_defaults(struct tx8_power_model *m)
{
    memset(m, 0, sizeof(*m));
    m->static_mw = 1500.0;
    m->pj_per_mac[TX8_DTYPE_F32] = 1.15;
    m->pj_per_mac[TX8_DTYPE_F16] = 0.375;
    m->pj_per_mac[TX8_DTYPE_BF16] = 0.375;
    m->pj_per_mac[TX8_DTYPE_I8] = 0.075;
    m->pj_per_mac[TX8_DTYPE_I32] = 0.8;
    m->pj_per_mac_fp8 = 0.19;
    m->pj_per_mem_byte = 32.0;
    m->pj_per_link_byte = 40.0;
    m->macs_per_cycle[TX8_DTYPE_F32] = 8192;
    m->macs_per_cycle[TX8_DTYPE_F16] = 65536;
    m->macs_per_cycle[TX8_DTYPE_BF16] = 65536;
    m->macs_per_cycle[TX8_DTYPE_I8] = 262144;
    m->macs_per_cycle[TX8_DTYPE_I32] = 8192;
    m->clock_mhz = 1000.0;
    m->mem_gbps = 409.6;
    m->cap_mw = 0;
}

struct param {
    const char *name;
    size_t off;
    double min, max;
    const char *unit, *what;
};

#define P(field) offsetof(struct tx8_power_model, field)
static const struct param params[] = {
    {"static-mw", P(static_mw), 0, 1e6, "mW", "static (idle) board power"},
    {"fp32-pj-per-mac", P(pj_per_mac[TX8_DTYPE_F32]), 0, 1e3, "pJ", "FP32 MAC"},
    {"fp16-pj-per-mac", P(pj_per_mac[TX8_DTYPE_F16]), 0, 1e3, "pJ", "FP16 MAC"},
    {"bf16-pj-per-mac", P(pj_per_mac[TX8_DTYPE_BF16]), 0, 1e3, "pJ", "BF16 MAC"},
    {"int8-pj-per-mac", P(pj_per_mac[TX8_DTYPE_I8]), 0, 1e3, "pJ", "INT8 MAC (int32 accumulate)"},
    {"int32-pj-per-mac", P(pj_per_mac[TX8_DTYPE_I32]), 0, 1e3, "pJ", "INT32 MAC"},
    {"fp8-pj-per-mac", P(pj_per_mac_fp8), 0, 1e3, "pJ", "FP8 MAC (when the FP8 dtype is present)"},
    {"mem-pj-per-byte", P(pj_per_mem_byte), 0, 1e4, "pJ", "device-memory byte read or written"},
    {"link-pj-per-byte", P(pj_per_link_byte), 0, 1e4, "pJ", "host-link byte"},
    {"fp32-macs-per-cycle", P(macs_per_cycle[TX8_DTYPE_F32]), 1, 1e9, "", "FP32 datapath peak"},
    {"fp16-macs-per-cycle", P(macs_per_cycle[TX8_DTYPE_F16]), 1, 1e9, "", "FP16 datapath peak"},
    {"bf16-macs-per-cycle", P(macs_per_cycle[TX8_DTYPE_BF16]), 1, 1e9, "", "BF16 datapath peak"},
    {"int8-macs-per-cycle", P(macs_per_cycle[TX8_DTYPE_I8]), 1, 1e9, "", "INT8 datapath peak"},
    {"int32-macs-per-cycle", P(macs_per_cycle[TX8_DTYPE_I32]), 1, 1e9, "", "INT32 datapath peak"},
    {"clock-mhz", P(clock_mhz), 1, 1e5, "MHz", "nominal modelled clock"},
    {"mem-gbps", P(mem_gbps), 0.001, 1e6, "GB/s", "device-memory bandwidth"},
    {"cap-mw", P(cap_mw), 0, 1e6, "mW", "board power limit (0 = none)"},
};
#undef P

static double *field(struct tx8_power_model *m, const struct param *p)
{
    return (double *)((char *)m + p->off);
}

int tx8_power_set(struct tx8_power_model *m, const char *a, char *err, size_t errlen)
{
    const char *eq = a ? strchr(a, '=') : NULL;
    char *end;
    double v;

    if (!eq) {
        snprintf(err, errlen, "'%s' is not NAME=VALUE", a ? a : "");
        return -1;
    }
    for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
        const struct param *p = &params[i];

        if (strlen(p->name) != (size_t)(eq - a) || strncmp(p->name, a, (size_t)(eq - a)))
            continue;
        errno = 0;
        v = strtod(eq + 1, &end);
        if (errno || end == eq + 1 || *end || !isfinite(v) || v < p->min || v > p->max) {
            snprintf(err, errlen, "%s: '%s' is not a number from %g to %g", p->name, eq + 1,
                     p->min, p->max);
            return -1;
        }
        *field(m, p) = v;
        return 0;
    }
    snprintf(err, errlen, "unknown power-model parameter '%.*s' (tx8-emu --power help lists them)",
             (int)(eq - a), a);
    return -1;
}

void tx8_power_print_params(const struct tx8_power_model *m, FILE *f)
{
    for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
        const struct param *p = &params[i];

        fprintf(f, "  %-22s %12g %-5s %s\n", p->name,
                *field((struct tx8_power_model *)m, p), p->unit, p->what);
    }
}

void tx8_power_command(const struct tx8_power_model *m, uint64_t macs, unsigned dtype,
                       uint64_t mem_bytes, uint64_t link_bytes, struct tx8_power_cost *out)
{
    /* FP8 weights (not one of the dtypes[] the arrays cover): their own
     * energy per MAC, at the INT8 datapath's rate (the same bytes, a
     * dequantise in registers) */
    int fp8 = dtype == TX8_DTYPE_F8_E4M3;
    unsigned dt = fp8 ? TX8_DTYPE_I8 : dtype < TX8_DTYPE_COUNT ? dtype : TX8_DTYPE_F16;
    double pj_mac = fp8 ? m->pj_per_mac_fp8 : m->pj_per_mac[dt];
    double dyn = (double)macs * pj_mac + (double)mem_bytes * m->pj_per_mem_byte +
                 (double)link_bytes * m->pj_per_link_byte;
    double rate = m->macs_per_cycle[dt] * m->clock_mhz * 1e-3; /* MACs per ns */
    double t_mac = rate > 0 ? (double)macs / rate : 0;            /* ns */
    double t_mem = m->mem_gbps > 0 ? (double)mem_bytes / m->mem_gbps : 0;
    double t = t_mac > t_mem ? t_mac : t_mem;
    double scale = 1.0;

    /* pJ / ns = mW: the command's power at the nominal clock */
    if (m->cap_mw > 0 && t > 0 && m->static_mw + dyn / t > m->cap_mw) {
        double room = m->cap_mw - m->static_mw;
        double lo = TX8_POWER_MIN_CLOCK_PERMILLE / 1000.0;

        scale = room > 0 ? room * t / dyn : lo;
        if (scale < lo)
            scale = lo;
    }
    out->dynamic_pj = dyn;
    out->time_ns = t / scale;
    out->clock_scale = scale;
    out->energy_pj = dyn + m->static_mw * out->time_ns;
}
