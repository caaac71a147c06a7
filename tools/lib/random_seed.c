/* SPDX-License-Identifier: MIT */
/*
 * The default sampling seed (--seed -1): drawn from the OS, as llama.cpp
 * does, so that two processes started in the same second sample
 * differently. The caller prints it, so that --seed N reproduces the run.
 */
#include "common/cli.h"

#include <errno.h>
#include <stdint.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

unsigned long long txc_random_seed(void)
{
    uint64_t s = 0;
    ssize_t n;
    do
        n = getrandom(&s, sizeof(s), 0);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(s)) {
        /* no getrandom (a kernel before 3.17): the clock's nanoseconds and
         * the pid, mixed (splitmix64's finaliser) */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
            ((uint64_t)getpid() << 32);
        s = (s ^ (s >> 30)) * 0xbf58476d1ce4e5b9ull;
        s = (s ^ (s >> 27)) * 0x94d049bb133111ebull;
        s ^= s >> 31;
    }
    return s & 0x7fffffffffffffffull; /* a value --seed accepts */
}
