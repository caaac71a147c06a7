/* SPDX-License-Identifier: MIT */
/*
 * glm-synth --config-set: "KEY=VALUE[,KEY=VALUE...]" applied to a
 * config.json text (tools/lib/synth.c). Internal to the tools library;
 * declared here so the fuzz target tests/fuzz/fuzz_config.c can drive it.
 */
#ifndef TX_TOOLS_CONFIG_SET_H
#define TX_TOOLS_CONFIG_SET_H

#include <stddef.h>

/* At most this many bytes of KEY=VALUE list (a real one is < 200). */
#define TX_SYNTH_CONFIG_SET_MAX 4096

/* Sets each KEY (which must already be a field of the JSON object cj) to
 * VALUE: an integer, a finite number, true/false, null, else a string.
 * On success *out is the new config text (malloc'd) and 0 is returned;
 * otherwise a negative TX_E* code with a message naming the item, and
 * *out is NULL. */
int tx_synth_apply_config_set(const char *cj, const char *set, char **out, char *err, size_t errsz);

#endif
