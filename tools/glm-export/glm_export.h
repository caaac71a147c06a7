/* SPDX-License-Identifier: MIT */
/* glm-export's command line (options.c) and the export it runs (main.c). */
#ifndef GLM_EXPORT_H
#define GLM_EXPORT_H

#include <tx-internal/tx_export.h>

struct export_cli {
    struct tx_export_opts o; /* the plan applied (--quant, --precision, ...) */
    const char *in, *out, *quant, *verify;
    int sparse, quiet;
};

/* The defaults, then the command line, checked. -1: export; else the exit
 * status (0 for --help, or the --verify result when it was given alone). */
int export_parse(struct export_cli *c, int argc, char **argv);

#endif
