/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: the settings of a load. Everything a load may be told
 * reaches it through struct glm_load_options (include/tx/glm.h); the
 * environment variables that also set some of them are read here, once per
 * load, into a copy of the caller's options -- the load itself
 * (runtime/model.c) reads no environment.
 *
 *   variable            values                     option
 *   TX_BATCH_INVARIANT  0 | 1                      1: GLM_LOAD_BATCH_INVARIANT (0: as given)
 *   TX_ATTENTION_BF16   0 | 1                      GLM_LOAD_NO_ATTENTION_BF16 set | cleared
 *   TX_MLA_FORM         absorbed|expanded|auto     GLM_LOAD_MLA_ABSORBED / _EXPANDED / neither
 *   TX_DECODE_GRAPH     on|1 | off|0 | verify      neither / GLM_LOAD_NO_DECODE_GRAPH /
 *                                                  GLM_LOAD_DECODE_GRAPH_VERIFY
 *   TX_GLM_LOAD_IO      pread | direct | buffered  GLM_LOAD_NO_URING / GLM_LOAD_DIRECT set /
 *                                                  GLM_LOAD_DIRECT cleared (debugging)
 *
 * An empty variable is unset; a value outside the list fails the load with
 * TX_EINVAL naming the variable (TX_GLM_LOAD_IO, a debugging aid, ignores
 * other values).
 */
#include "runtime/rt_internal.h"

#include <stdlib.h>
#include <string.h>

#define MLA_FLAGS (GLM_LOAD_MLA_ABSORBED | GLM_LOAD_MLA_EXPANDED)
#define DG_FLAGS (GLM_LOAD_NO_DECODE_GRAPH | GLM_LOAD_DECODE_GRAPH_VERIFY)

static int bad(const char *var, const char *v, const char *expected)
{
    return tx_error(TX_EINVAL, "glm_model_load: %s=%s: expected %s", var, v, expected);
}

/* The flags of `v` (one of names[], NULL-terminated, with set[]) replace
 * the `mask` bits of *flags; unset: unchanged. */
static int choose(const char *var, const char *expected, const char *const *names,
                  const unsigned *set, unsigned mask, unsigned *flags)
{
    const char *v = getenv(var);
    if (!v || !*v)
        return TX_OK;
    for (int i = 0; names[i]; i++)
        if (!strcmp(v, names[i])) {
            *flags = (*flags & ~mask) | set[i];
            return TX_OK;
        }
    return bad(var, v, expected);
}

int rt_load_options(const struct glm_load_options *opt, struct glm_load_options *o)
{
    memset(o, 0, sizeof(*o));
    if (opt)
        *o = *opt;
    static const char *const ab[] = {"0", "1", NULL};
    static const unsigned ab_set[] = {GLM_LOAD_NO_ATTENTION_BF16, 0};
    int rc = choose("TX_ATTENTION_BF16", "0 or 1", ab, ab_set, GLM_LOAD_NO_ATTENTION_BF16,
                    &o->flags);
    static const char *const mf[] = {"absorbed", "expanded", "auto", NULL};
    static const unsigned mf_set[] = {GLM_LOAD_MLA_ABSORBED, GLM_LOAD_MLA_EXPANDED, 0};
    if (!rc)
        rc = choose("TX_MLA_FORM", "absorbed, expanded or auto", mf, mf_set, MLA_FLAGS,
                    &o->flags);
    static const char *const dg[] = {"on", "1", "off", "0", "verify", NULL};
    static const unsigned dg_set[] = {0, 0, GLM_LOAD_NO_DECODE_GRAPH, GLM_LOAD_NO_DECODE_GRAPH,
                                      GLM_LOAD_DECODE_GRAPH_VERIFY};
    if (!rc)
        rc = choose("TX_DECODE_GRAPH", "on, off or verify", dg, dg_set, DG_FLAGS, &o->flags);
    static const char *const bi[] = {"0", "1", NULL};
    static const unsigned bi_set[] = {0, GLM_LOAD_BATCH_INVARIANT};
    /* 0: the flag as given (include/tx/glm.h) */
    if (!rc)
        rc = choose("TX_BATCH_INVARIANT", "0 or 1", bi, bi_set, 0, &o->flags);
    if (rc)
        return rc;
    const char *iov = getenv("TX_GLM_LOAD_IO"); /* debugging: pread | buffered | direct */
    if (iov && !strcmp(iov, "pread"))
        o->flags |= GLM_LOAD_NO_URING;
    else if (iov && !strcmp(iov, "direct"))
        o->flags |= GLM_LOAD_DIRECT;
    else if (iov && !strcmp(iov, "buffered"))
        o->flags &= ~GLM_LOAD_DIRECT;
    if ((o->flags & MLA_FLAGS) == MLA_FLAGS)
        return tx_error(TX_EINVAL, "glm_model_load: GLM_LOAD_MLA_ABSORBED and "
                                   "GLM_LOAD_MLA_EXPANDED together");
    if ((o->flags & DG_FLAGS) == DG_FLAGS)
        return tx_error(TX_EINVAL, "glm_model_load: GLM_LOAD_NO_DECODE_GRAPH and "
                                   "GLM_LOAD_DECODE_GRAPH_VERIFY together");
    return TX_OK;
}
