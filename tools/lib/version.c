/* SPDX-License-Identifier: MIT */
/*
 * --version of every tool: the release, the git commit the binary was built
 * from (the Makefile passes it; "unknown" outside a git tree) and the TX8
 * hardware interface the tool speaks (include/tx8/tx8_hw.h).
 */
#include "common/cli.h"

#include <tx8/tx8_hw.h>

#ifndef TXC_VERSION
#define TXC_VERSION "unknown"
#endif
#ifndef TXC_GIT_COMMIT
#define TXC_GIT_COMMIT "unknown"
#endif

const char *txc_git_commit(void)
{
    return TXC_GIT_COMMIT;
}

const char *txc_version(void)
{
    return TXC_VERSION;
}

void txc_print_version(const char *prog)
{
    printf("%s %s (git commit %s, TX8 hardware interface %d.%d)\n", prog, TXC_VERSION,
           TXC_GIT_COMMIT, TX8_IF_VERSION_MAJOR, TX8_IF_VERSION_MINOR);
}
