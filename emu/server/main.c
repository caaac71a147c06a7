/* SPDX-License-Identifier: MIT */
/*
 * tx8-emu: the TX8 device model.
 *
 * The command line, signals and the 10 ms timer; the ivshmem server is
 * transport.c, the device device.c. See docs/tx8-emu.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <numa.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef TX8_EMU_VERSION /* the Makefile passes the release and the commit */
#define TX8_EMU_VERSION "unknown"
#endif
#ifndef TX8_EMU_GIT_COMMIT
#define TX8_EMU_GIT_COMMIT "unknown"
#endif

#include <tx8/tx8_hw.h>

#include "device.h"
#include "engine/power.h"
#include "engine/tx8_engine.h"
#include "log.h"
#include "transport.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tx8-emu --socket PATH --memory SIZE [options]\n"
            "\n"
            "The TX8 device model: an ivshmem server for QEMU's ivshmem-doorbell\n"
            "device (vectors=%d) and libtx's emu backend.\n"
            "\n"
            "  -s, --socket PATH        UNIX socket to listen on\n"
            "  -m, --memory SIZE        device memory, a power of two >= 16M (e.g. 256M, 4G)\n"
            "  -c, --cores N            compute cores (worker threads; default: all CPUs)\n"
            "  -n, --numa-node N        place device memory and workers on NUMA node N\n"
            "  -e, --expert-cache SIZE  accepted, ignored: the expert cache counters count the\n"
            "                           host's expert cache (interface 1.6)\n"
            "  -i, --inject FAULT[:ARG] hang | error | slow:MS | crash-after:N (repeatable)\n"
            "  -p, --power NAME=VALUE   set a power-model parameter (repeatable); --power help\n"
            "                           lists them with their defaults (docs/hardware.md 7)\n"
            "      --power-cap MW       board power limit in mW (0 = none): the modelled clock\n"
            "                           is lowered so that a command's power fits under it\n"
            "  -v, --verbose            log every peer, mailbox request and failed job\n"
            "  -h, --help\n"
            "      --version            the release, the git commit, the TX8 interface\n",
            TX8_NUM_VECTORS);
}

/* "256M", "4G", "65536", "1k": binary suffixes K, M, G, T. */
static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;

    if (!s || !*s || *s == '-')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    switch (*end) {
    case 0:
        break;
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    default:
        return -1;
    }
    if (*end) {
        end++;
        if (*end == 'i' && end[1] == 'B')
            end += 2;
        else if (*end == 'B')
            end++;
    }
    if (*end)
        return -1;
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    char *end;
    unsigned long v;

    if (!s || !*s || *s == '-')
        return -1;
    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || *end || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_inject(const char *s, struct emu_faults *f)
{
    const char *arg = strchr(s, ':');
    size_t n = arg ? (size_t)(arg - s) : strlen(s);
    unsigned long v = 0;

    if (arg)
        arg++;
    if (n == 4 && !strncmp(s, "hang", 4) && !arg) {
        f->hang++;
        return 0;
    }
    if (n == 5 && !strncmp(s, "error", 5) && !arg) {
        f->error++;
        return 0;
    }
    if (n == 4 && !strncmp(s, "slow", 4) && arg && !parse_uint(arg, 600000, &v) && v > 0) {
        f->slow_ms = (unsigned)v;
        return 0;
    }
    if (n == 11 && !strncmp(s, "crash-after", 11) && arg && !parse_uint(arg, 1ul << 40, &v)) {
        f->crash_after = (int64_t)v;
        return 0;
    }
    return -1;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"memory", required_argument, NULL, 'm'},
        {"cores", required_argument, NULL, 'c'},
        {"numa-node", required_argument, NULL, 'n'},
        {"inject", required_argument, NULL, 'i'},
        {"expert-cache", required_argument, NULL, 'e'},
        {"power", required_argument, NULL, 'p'},
        {"power-cap", required_argument, NULL, 'P'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    struct emu_dev_config cfg;
    struct emu_server s;
    const char *mem_arg = NULL;
    sigset_t sigs;
    int sfd = -1, tfd = -1, opt, status = 1;
    unsigned long ul;
    bool running = true;

    memset(&cfg, 0, sizeof(cfg));
    srv_init(&s, NULL, 0);
    cfg.numa_node = -1;
    cfg.faults.crash_after = -1;
    tx8_power_defaults(&cfg.power);

    while ((opt = getopt_long(argc, argv, "s:m:c:n:i:e:p:P:vh", opts, NULL)) != -1) {
        switch (opt) {
        case 's':
            s.path = optarg;
            break;
        case 'm':
            mem_arg = optarg;
            break;
        case 'c':
            if (parse_uint(optarg, TX8_MAX_CORES, &ul) || ul == 0) {
                fprintf(stderr, "tx8-emu: --cores must be 1..%d, not '%s'\n", TX8_MAX_CORES,
                        optarg);
                return 2;
            }
            cfg.cores = (unsigned)ul;
            break;
        case 'n':
            if (parse_uint(optarg, INT_MAX, &ul)) {
                fprintf(stderr, "tx8-emu: bad --numa-node '%s'\n", optarg);
                return 2;
            }
            cfg.numa_node = (int)ul;
            break;
        case 'i':
            if (parse_inject(optarg, &cfg.faults)) {
                fprintf(stderr,
                        "tx8-emu: bad --inject '%s' (hang, error, slow:MS with MS 1..600000, "
                        "crash-after:N)\n",
                        optarg);
                return 2;
            }
            break;
        case 'e':
            if (parse_size(optarg, &cfg.expert_cache_bytes)) {
                fprintf(stderr, "tx8-emu: bad --expert-cache size '%s'\n", optarg);
                return 2;
            }
            break;
        case 'p':
        case 'P': {
            char err[160], buf[64];
            const char *a = optarg;

            if (opt == 'p' && !strcmp(optarg, "help")) {
                printf("power-model parameters (NAME=VALUE, defaults):\n");
                tx8_power_print_params(&cfg.power, stdout);
                return 0;
            }
            if (opt == 'P') {
                snprintf(buf, sizeof(buf), "cap-mw=%s", optarg);
                a = buf;
            }
            if (tx8_power_set(&cfg.power, a, err, sizeof(err))) {
                fprintf(stderr, "tx8-emu: bad --power%s: %s\n", opt == 'P' ? "-cap" : "", err);
                return 2;
            }
            break;
        }
        case 'v':
            emu_verbose = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V': /* as every tool's --version (tools/lib/version.c) */
            printf("tx8-emu %s (git commit %s, TX8 hardware interface %d.%d)\n", TX8_EMU_VERSION,
                   TX8_EMU_GIT_COMMIT, TX8_IF_VERSION_MAJOR, TX8_IF_VERSION_MINOR);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tx8-emu: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (!s.path || !*s.path || !mem_arg) {
        fprintf(stderr, "tx8-emu: --socket and --memory are required\n");
        usage(stderr);
        return 2;
    }
    if (parse_size(mem_arg, &s.mem_size) || s.mem_size < TX8_MIN_MEMORY ||
        s.mem_size > TX8_MAX_MEMORY || (s.mem_size & (s.mem_size - 1))) {
        fprintf(stderr,
                "tx8-emu: bad --memory '%s': must be a power of two from 16M to 64G "
                "(e.g. 256M, 4G)\n",
                mem_arg);
        return 2;
    }
    if (cfg.numa_node >= 0 &&
        (numa_available() < 0 || cfg.numa_node > numa_max_node() ||
         !numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned)cfg.numa_node))) {
        fprintf(stderr, "tx8-emu: NUMA node %d does not exist on this machine\n", cfg.numa_node);
        return 2;
    }

    /* Signals are read from a signalfd; block them before any thread. */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    if (srv_make_shm(&s, cfg.numa_node) < 0)
        goto out;
    cfg.mem = s.mem;
    cfg.mem_fd = s.shm_fd;
    cfg.mem_size = s.mem_size;
    cfg.verbose = emu_verbose;
    {
        int rc = dev_create(&s.dev, &cfg);

        if (rc < 0) {
            const char *isa = tx8_engine_setting_env("TX8_ENGINE_ISA");
            unsigned v;

            if (isa && *isa && tx8_engine_isa_parse(isa, &v))
                emu_log("cannot start the device: TX8_ENGINE_ISA=%s is not one of auto, "
                        "portable, avx2, avx512, amx",
                        isa);
            else if (isa && *isa && rc == -ENOTSUP && tx8_engine_isa_why(v))
                emu_log("cannot start the device: TX8_ENGINE_ISA=%s: %s", isa,
                        tx8_engine_isa_why(v));
            else
                emu_log("cannot start the device: %s", strerror(-rc));
            goto out;
        }
    }
    if (srv_listen(&s) < 0)
        goto out;

    sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (sfd < 0 || tfd < 0) {
        emu_log("signalfd/timerfd: %s", strerror(errno));
        goto out;
    }
    {
        struct itimerspec its = {{0, 10000000}, {0, 10000000}};

        timerfd_settime(tfd, 0, &its, NULL);
    }
    srv_ep_add(&s, sfd, EP_TAG(EP_SIGNAL, 0));
    srv_ep_add(&s, tfd, EP_TAG(EP_TIMER, 0));

    emu_log("listening on %s: %llu MiB device memory, %u cores, numa node %d, %d vectors", s.path,
            (unsigned long long)(s.mem_size >> 20), dev_cores(s.dev), cfg.numa_node,
            TX8_NUM_VECTORS);

    while (running) {
        struct epoll_event evs[16];
        int n = epoll_wait(s.epfd, evs, 16, -1);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            emu_log("epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            uint64_t val;

            switch (srv_handle(&s, &evs[i])) {
            case EP_SIGNAL: {
                struct signalfd_siginfo si;

                if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                    emu_log("signal %u: shutting down", si.ssi_signo);
                    running = false;
                }
                break;
            }
            case EP_TIMER:
                if (read(tfd, &val, sizeof(val)) == (ssize_t)sizeof(val))
                    dev_tick(s.dev);
                break;
            }
        }
    }
    status = 0;

out:
    srv_close(&s);
    if (sfd >= 0)
        close(sfd);
    if (tfd >= 0)
        close(tfd);
    if (status == 0)
        emu_log("stopped");
    return status;
}
