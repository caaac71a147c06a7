/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: the settings of a load. Everything a load may be told
 * reaches it through struct glm_load_options (include/tx/glm.h); the
 * environment variables that also set some of them are read here, once per
 * load, into a copy of the caller's options -- the load itself
 * (runtime/model.c) reads no environment.
 *
 * The variables are a settings table (common/settings.h, docs/settings.md:
 * names, values, defaults); load_flags says what each value does to the
 * flags. An empty variable is unset; a value outside the list fails the
 * load with TX_EINVAL naming the variable (TX_GLM_LOAD_IO, a debugging aid,
 * and TX_DSA_QUERY_Q8, whose values but 0 always meant 8-bit, ignore other
 * values).
 */
#include "runtime/rt_internal.h"

#include "common/settings.h"

#include <string.h>

#define MLA_FLAGS (GLM_LOAD_MLA_ABSORBED | GLM_LOAD_MLA_EXPANDED)
#define DG_FLAGS (GLM_LOAD_NO_DECODE_GRAPH | GLM_LOAD_DECODE_GRAPH_VERIFY)

static const struct tx_setting load_settings[] = {
    {"TX_ATTENTION_BF16", TX_SETTING_WORD, "0|1", 0, 0, "1", 1, "0 or 1",
     "0: ATTENTION's products in f32 (GLM_LOAD_NO_ATTENTION_BF16); 1: BF16 where the device "
     "offers them (interface >= 1.7)"},
    {"TX_MLA_FORM", TX_SETTING_WORD, "absorbed|expanded|auto", 0, 0, "auto", 1,
     "absorbed, expanded or auto",
     "MLA's attention form for every pass (GLM_LOAD_MLA_ABSORBED / _EXPANDED); auto: per pass"},
    {"TX_DECODE_GRAPH", TX_SETTING_WORD, "on|1|off|0|verify", 0, 0, "on", 1, "on, off or verify",
     "the decode graph: off (GLM_LOAD_NO_DECODE_GRAPH), verify every replay against a built "
     "pass (GLM_LOAD_DECODE_GRAPH_VERIFY)"},
    {"TX_BATCH_INVARIANT", TX_SETTING_WORD, "0|1", 0, 0, "0", 1, "0 or 1",
     "1: batch-invariant jobs (GLM_LOAD_BATCH_INVARIANT); 0: the flag as given"},
    {"TX_GLM_LOAD_IO", TX_SETTING_WORD, "pread|direct|buffered", 0, 0, "the flags", 0, NULL,
     "debugging: pread (GLM_LOAD_NO_URING), direct (GLM_LOAD_DIRECT) or buffered (no "
     "GLM_LOAD_DIRECT) reads of the extents"},
    {"TX_DSA_QUERY_Q8", TX_SETTING_WORD, "0|1", 0, 0, "1", 0, NULL,
     "0: the DSA indexer's f32 products over a Q8_0 indexer key cache "
     "(GLM_LOAD_NO_DSA_QUERY_Q8); otherwise, on a device of interface >= 1.9, 8-bit products "
     "(TX8_DSA_F_QUERY_Q8)"},
};

const struct tx_setting_table tx_settings_load = {
    "runtime: model load", "at every glm_model_load, into its glm_load_options", load_settings,
    sizeof(load_settings) / sizeof(load_settings[0])};

/* What each word of load_settings[i] does to the flags: clears, then sets. */
static const struct {
    unsigned clear, set;
} load_flags[][5] = {
    {{0, GLM_LOAD_NO_ATTENTION_BF16}, {GLM_LOAD_NO_ATTENTION_BF16, 0}},
    {{MLA_FLAGS, GLM_LOAD_MLA_ABSORBED}, {MLA_FLAGS, GLM_LOAD_MLA_EXPANDED}, {MLA_FLAGS, 0}},
    {{DG_FLAGS, 0},
     {DG_FLAGS, 0},
     {DG_FLAGS, GLM_LOAD_NO_DECODE_GRAPH},
     {DG_FLAGS, GLM_LOAD_NO_DECODE_GRAPH},
     {DG_FLAGS, GLM_LOAD_DECODE_GRAPH_VERIFY}},
    {{0, 0}, {0, GLM_LOAD_BATCH_INVARIANT}}, /* 0: the flag as given (glm.h) */
    {{0, GLM_LOAD_NO_URING}, {0, GLM_LOAD_DIRECT}, {GLM_LOAD_DIRECT, 0}},
    {{0, GLM_LOAD_NO_DSA_QUERY_Q8}, {GLM_LOAD_NO_DSA_QUERY_Q8, 0}},
};

int rt_load_options(const struct glm_load_options *opt, struct glm_load_options *o)
{
    memset(o, 0, sizeof(*o));
    if (opt)
        *o = *opt;
    struct tx_setting_val v[sizeof(load_settings) / sizeof(load_settings[0])];
    int rc = tx_settings_read(&tx_settings_load, "glm_model_load", v);
    if (rc)
        return rc;
    for (size_t i = 0; i < tx_settings_load.n; i++) {
        if (!v[i].set)
            continue;
        o->flags = (o->flags & ~load_flags[i][v[i].word].clear) | load_flags[i][v[i].word].set;
    }
    if ((o->flags & MLA_FLAGS) == MLA_FLAGS)
        return tx_error(TX_EINVAL, "glm_model_load: GLM_LOAD_MLA_ABSORBED and "
                                   "GLM_LOAD_MLA_EXPANDED together");
    if ((o->flags & DG_FLAGS) == DG_FLAGS)
        return tx_error(TX_EINVAL, "glm_model_load: GLM_LOAD_NO_DECODE_GRAPH and "
                                   "GLM_LOAD_DECODE_GRAPH_VERIFY together");
    return TX_OK;
}
