/* SPDX-License-Identifier: MIT */
/*
 * glm-server and a device that restarts under it: the kernel driver revokes
 * every mapping of the device's memory (tx8.ko: "the memory may be another
 * peer's now"), so libtx's next touch of a mapped buffer -- a command
 * buffer, the activations, a KV cache -- raises SIGBUS, which would kill
 * the server before it could see the loss and recover.
 *
 * The handler puts an anonymous zero page over the faulting page
 * (MAP_FIXED), so the access completes on scratch memory, and records the
 * fault; the device's next job then fails (EIO: TX_EDEVICE_LOST) and the
 * scheduler, seeing srv_sigbus_seen(), marks the device lost with the
 * reason; the buffers are freed (munmap) when the model is reloaded. Only
 * SIGBUS of a shared mapping's object (BUS_ADRERR) is handled so; any other
 * SIGBUS keeps its default action (the process dies with a core).
 */
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "server.h"

static volatile sig_atomic_t g_faults;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    long pg = sysconf(_SC_PAGESIZE);
    void *page = (void *)((uintptr_t)si->si_addr & ~(uintptr_t)(pg - 1));
    if (si->si_code == BUS_ADRERR && si->si_addr &&
        mmap(page, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
             0) != MAP_FAILED) {
        if (!g_faults) {
            static const char m[] = "glm-server: SIGBUS on device memory: its mapping was "
                                    "revoked (the device restarted?)\n";
            (void)!write(2, m, sizeof(m) - 1);
        }
        g_faults++;
        return;
    }
    signal(sig, SIG_DFL); /* not ours: die as without the handler */
    raise(sig);
}

void srv_sigbus_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

int srv_sigbus_seen(void)
{
    return g_faults != 0;
}

void srv_sigbus_clear(void)
{
    g_faults = 0;
}
