/* SPDX-License-Identifier: MIT */
/*
 * libtx's profiler: collects device command records and host spans while
 * $TX_PROFILE is set and writes them as Chrome Trace Event JSON (json-c).
 *
 * Tracks: process 1 "host" (one thread per host thread that recorded a
 * span), and per device a process "device <spec>" with one thread per
 * compute core ("core N": every command the core worked on), a "commands"
 * thread (each command once, cat "cmd", args bytes/MACs/cores) and a "jobs"
 * thread (each job, cat "job"). Counters: "device memory" (bytes used),
 * "busy %" (per job: core-time of its commands over cores x job time),
 * "expert cache hits" / "expert cache misses" (per job: the change of the
 * device's counters), on the host process "KV cache used" / "KV cache
 * allocated" (the GLM runtime, per pass) and whatever tx_profile_counter()
 * records. otherData.experts: per MoE model the (layer, expert) selections
 * and expert-cache hits / misses (profile/experts.c).
 *
 * Device times are mapped to host CLOCK_MONOTONIC with one offset per
 * device: the smallest (host time the job was seen done - device end time)
 * over the run, an upper bound of the true offset that is tight to the
 * completion latency (docs/hardware.md, "Profiling").
 */
#include "profile/profile_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include <tx-internal/tx_errors.h>
#include "common/settings.h"
#include <tx-internal/tx_file.h>

enum ev_kind { EV_SPAN, EV_CMD, EV_JOB, EV_COUNTER, EV_SETUP };

struct ev {
    uint8_t kind;
    uint8_t dev_clock; /* ts is device time of device `dev` */
    uint16_t opcode;
    int dev;  /* device index, -1 for host */
    int tid;  /* host thread id (spans) */
    uint64_t ts, dur;
    uint64_t core_mask, rd, wr, macs, job;
    uint64_t energy_pj; /* commands: the device's power model (interface 1.8);
                         * jobs with have_energy: their completion record's (1.9) */
    int have_energy;
    unsigned ncores;
    double value; /* counters */
    char *name;
    char *detail; /* commands: the runtime's parameters (may be NULL) */
};

struct pdev {
    char *spec;
    unsigned cores;
    int64_t offset; /* host = device + offset */
    int have_offset;
    int have_ec; /* ec_hits / ec_misses hold the device's previous reading */
    uint64_t ec_hits, ec_misses;
};

static pthread_mutex_t p_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t p_once = PTHREAD_ONCE_INIT;
static int p_enabled;
static char *p_path;
static struct ev *p_ev;
static size_t p_nev, p_capev;
static struct pdev p_dev[16];
static int p_ndev;
static uint64_t p_self_ns; /* atomic: txp_self_add */

void txp_self_add(uint64_t ns)
{
    __atomic_fetch_add(&p_self_ns, ns, __ATOMIC_RELAXED);
}

static const char *const op_names[TX8_OP_COUNT] = {
    "NOP",   "FILL",   "COPY",  "CONVERT", "MATMUL",    "RMSNORM", "LAYERNORM", "ROPE",
    "ATTENTION", "SWIGLU", "ADD", "EMBED", "MOE_ROUTE", "MOE_FFN", "DSA_INDEX", "SAMPLE",
};

static void at_exit_write(void)
{
    if (p_enabled && p_path && tx_profile_write(p_path) != TX_OK)
        fprintf(stderr, "libtx: TX_PROFILE=%s: %s\n", p_path, tx_last_error());
}

static const struct tx_setting profile_settings[] = {
    {"TX_PROFILE", TX_SETTING_TEXT, "a file path", 0, 0, "off", 0, NULL,
     "profile the process: host spans, device jobs and counters, written to this file as a "
     "Chrome trace at exit (docs/libtx-device.md)"},
};

const struct tx_setting_table tx_settings_profile = {"profile", "once per process",
                                                     profile_settings, 1};

static void p_init(void)
{
    struct tx_setting_val v;
    tx_settings_read(&tx_settings_profile, "libtx", &v);
    if (!v.set)
        return;
    p_path = strdup(v.text);
    if (!p_path)
        return;
    p_enabled = 1;
    atexit(at_exit_write);
}

TX_API int tx_profile_enabled(void)
{
    pthread_once(&p_once, p_init);
    return p_enabled;
}

TX_API uint64_t tx_profile_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Append an event (lock held); NULL when out of memory (the event is lost). */
static struct ev *ev_new(void)
{
    if (p_nev == p_capev) {
        size_t cap = p_capev ? p_capev * 2 : 4096;
        struct ev *n = realloc(p_ev, cap * sizeof(*n));
        if (!n)
            return NULL;
        p_ev = n;
        p_capev = cap;
    }
    struct ev *e = &p_ev[p_nev++];
    memset(e, 0, sizeof(*e));
    e->dev = -1;
    return e;
}

TX_API void tx_profile_span(const char *name, uint64_t start_ns, uint64_t end_ns)
{
    if (!tx_profile_enabled() || !name)
        return;
    char *n = strdup(name);
    if (!n)
        return;
    pthread_mutex_lock(&p_lock);
    struct ev *e = ev_new();
    if (e) {
        e->kind = EV_SPAN;
        e->tid = (int)syscall(SYS_gettid);
        e->ts = start_ns;
        e->dur = end_ns > start_ns ? end_ns - start_ns : 0;
        e->name = n;
        n = NULL;
    }
    pthread_mutex_unlock(&p_lock);
    free(n);
}

static void counter_locked(const char *name, int dev, uint64_t ts, int dev_clock, double v)
{
    char *n = strdup(name);
    struct ev *e = n ? ev_new() : NULL;
    if (!e) {
        free(n);
        return;
    }
    e->kind = EV_COUNTER;
    e->dev = dev;
    e->dev_clock = (uint8_t)dev_clock;
    e->ts = ts;
    e->value = v;
    e->name = n;
}

TX_API void tx_profile_counter(const char *name, double value)
{
    if (!tx_profile_enabled() || !name)
        return;
    pthread_mutex_lock(&p_lock);
    counter_locked(name, -1, tx_profile_now(), 0, value);
    pthread_mutex_unlock(&p_lock);
}

static int dev_index(const char *spec, unsigned cores)
{
    for (int i = 0; i < p_ndev; i++)
        if (!strcmp(p_dev[i].spec, spec))
            return i;
    if (p_ndev == (int)(sizeof(p_dev) / sizeof(p_dev[0])))
        return TX_NONE;
    char *s = strdup(spec);
    if (!s)
        return TX_NONE;
    p_dev[p_ndev].spec = s;
    p_dev[p_ndev].cores = cores;
    p_dev[p_ndev].have_offset = 0;
    p_dev[p_ndev].have_ec = 0;
    return p_ndev++;
}

void txp_device_base(const char *dev, uint64_t ec_hits, uint64_t ec_misses)
{
    if (!tx_profile_enabled())
        return;
    pthread_mutex_lock(&p_lock);
    int di = dev_index(dev, 0);
    if (di >= 0 && !p_dev[di].have_ec) {
        p_dev[di].have_ec = 1;
        p_dev[di].ec_hits = ec_hits;
        p_dev[di].ec_misses = ec_misses;
    }
    pthread_mutex_unlock(&p_lock);
}

void txp_device_job(const char *dev, const struct tx8_prof_header *h,
                    const struct tx8_prof_record *rec, unsigned n, char *const *names,
                    unsigned nnames, uint64_t job, uint64_t host_submit_ns, uint64_t host_done_ns,
                    const struct txp_job_counters *jc)
{
    (void)host_submit_ns;
    if (!tx_profile_enabled())
        return;
    pthread_mutex_lock(&p_lock);
    int di = dev_index(dev, h->cores);
    if (di < 0)
        goto out;
    struct pdev *pd = &p_dev[di];
    int64_t off = (int64_t)(host_done_ns - h->end_ns);
    if (!pd->have_offset || off < pd->offset) {
        pd->offset = off;
        pd->have_offset = 1;
    }
    if (h->cores > pd->cores)
        pd->cores = h->cores;
    char jn[48];
    snprintf(jn, sizeof(jn), "job %" PRIu64, job);
    char *jname = strdup(jn);
    struct ev *e = jname ? ev_new() : NULL;
    if (!e) {
        free(jname);
        goto out;
    }
    e->kind = EV_JOB;
    e->dev = di;
    e->dev_clock = 1;
    e->ts = h->start_ns;
    e->dur = h->end_ns > h->start_ns ? h->end_ns - h->start_ns : 0;
    e->job = job;
    e->name = jname;
    if (jc->have_energy) {
        e->have_energy = 1;
        e->energy_pj = jc->energy_pj;
    }
    if (h->setup_ns) {
        char *sn = strdup("job setup");
        e = sn ? ev_new() : NULL;
        if (!e) {
            free(sn);
        } else {
            e->kind = EV_SETUP;
            e->dev = di;
            e->dev_clock = 1;
            e->ts = h->start_ns;
            e->dur = h->setup_ns;
            e->job = job;
            e->name = sn;
        }
    }
    uint64_t core_time = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct tx8_prof_record *r = &rec[i];
        const char *op = r->opcode < TX8_OP_COUNT ? op_names[r->opcode] : "OP?";
        const char *tn = r->index < nnames && names ? names[r->index] : NULL;
        const char *tab = tn ? strchr(tn, '\t') : NULL;
        int tlen = tn ? (int)(tab ? (size_t)(tab - tn) : strlen(tn)) : 0;
        size_t len = strlen(op) + (size_t)tlen + 2;
        char *nm = malloc(len);
        if (!nm)
            break;
        snprintf(nm, len, "%s%s%.*s", op, tlen ? " " : "", tlen, tn ? tn : "");
        e = ev_new();
        if (!e) {
            free(nm);
            break;
        }
        e->kind = EV_CMD;
        e->dev = di;
        e->dev_clock = 1;
        e->opcode = r->opcode;
        e->ts = r->start_ns;
        e->dur = r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0;
        e->core_mask = r->core_mask;
        e->ncores = r->ncores;
        e->rd = r->bytes_read;
        e->wr = r->bytes_written;
        e->macs = r->macs;
        e->energy_pj = r->energy_pj;
        e->job = job;
        e->name = nm;
        e->detail = tab && tab[1] ? strdup(tab + 1) : NULL;
        core_time += e->dur * (r->ncores ? r->ncores : 1);
    }
    uint64_t jd = h->end_ns > h->start_ns ? h->end_ns - h->start_ns : 0;
    if (jd && pd->cores)
        counter_locked("busy %", di, h->end_ns, 1,
                       100.0 * (double)core_time / ((double)jd * pd->cores));
    counter_locked("device memory", di, h->end_ns, 1, (double)jc->mem_used);
    if (jc->have_ec) {
        /* the device-wide counters: every client's jobs count (docs/tuna.md).
         * Jobs harvested by two threads at once may hand in their readings
         * out of order: an older (smaller) reading adds nothing and leaves
         * the last one in place, so the sum over the trace stays exact. */
        uint64_t dh = 0, dm = 0;
        if (pd->have_ec) {
            dh = jc->ec_hits > pd->ec_hits ? jc->ec_hits - pd->ec_hits : 0;
            dm = jc->ec_misses > pd->ec_misses ? jc->ec_misses - pd->ec_misses : 0;
            counter_locked("expert cache hits", di, h->end_ns, 1, (double)dh);
            counter_locked("expert cache misses", di, h->end_ns, 1, (double)dm);
        }
        if (!pd->have_ec || jc->ec_hits > pd->ec_hits)
            pd->ec_hits = jc->ec_hits;
        if (!pd->have_ec || jc->ec_misses > pd->ec_misses)
            pd->ec_misses = jc->ec_misses;
        pd->have_ec = 1;
    }
out:
    pthread_mutex_unlock(&p_lock);
}

/* ---- writer ---------------------------------------------------------------- */

static json_object *meta(const char *what, int pid, int tid, const char *name)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "ph", json_object_new_string("M"));
    json_object_object_add(o, "name", json_object_new_string(what));
    json_object_object_add(o, "pid", json_object_new_int(pid));
    json_object_object_add(o, "tid", json_object_new_int(tid));
    json_object *a = json_object_new_object();
    json_object_object_add(a, "name", json_object_new_string(name));
    json_object_object_add(o, "args", a);
    return o;
}

#define DEV_PID(i) (100 + (i))
#define TID_CMDS 1000
#define TID_JOBS 1001

static double us_of(const struct ev *e, uint64_t t)
{
    int64_t v = (int64_t)t;
    if (e->dev_clock && e->dev >= 0)
        v += p_dev[e->dev].offset;
    return (double)v / 1000.0;
}

static json_object *x_event(const char *name, const char *cat, int pid, int tid, double ts,
                            double dur)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "ph", json_object_new_string("X"));
    json_object_object_add(o, "name", json_object_new_string(name));
    json_object_object_add(o, "cat", json_object_new_string(cat));
    json_object_object_add(o, "pid", json_object_new_int(pid));
    json_object_object_add(o, "tid", json_object_new_int(tid));
    json_object_object_add(o, "ts", json_object_new_double(ts));
    json_object_object_add(o, "dur", json_object_new_double(dur));
    return o;
}

static json_object *build_locked(void)
{
    json_object *root = json_object_new_object();
    json_object *evs = json_object_new_array();
    json_object_object_add(root, "traceEvents", evs);
    json_object_object_add(root, "displayTimeUnit", json_object_new_string("ns"));
    json_object *other = json_object_new_object();
    json_object_object_add(other, "generator", json_object_new_string("libtx (Tuna)"));
    json_object_object_add(other, "clock", json_object_new_string("CLOCK_MONOTONIC"));
    json_object *devs = json_object_new_array();
    for (int i = 0; i < p_ndev; i++) {
        json_object *d = json_object_new_object();
        json_object_object_add(d, "spec", json_object_new_string(p_dev[i].spec));
        json_object_object_add(d, "pid", json_object_new_int(DEV_PID(i)));
        json_object_object_add(d, "cores", json_object_new_int((int)p_dev[i].cores));
        json_object_object_add(d, "clock_offset_ns", json_object_new_int64(p_dev[i].offset));
        json_object_array_add(devs, d);
    }
    json_object_object_add(other, "devices", devs);
    json_object_object_add(
        other, "profiler_host_ns",
        json_object_new_int64((int64_t)__atomic_load_n(&p_self_ns, __ATOMIC_RELAXED)));
    json_object *experts = txp_experts_json();
    if (experts)
        json_object_object_add(other, "experts", experts);
    json_object_object_add(root, "otherData", other);

    json_object_array_add(evs, meta("process_name", 1, 0, "host"));
    for (int i = 0; i < p_ndev; i++) {
        char nm[300];
        snprintf(nm, sizeof(nm), "device %s", p_dev[i].spec);
        json_object_array_add(evs, meta("process_name", DEV_PID(i), 0, nm));
        for (unsigned c = 0; c < p_dev[i].cores && c < 64; c++) {
            snprintf(nm, sizeof(nm), "core %u", c);
            json_object_array_add(evs, meta("thread_name", DEV_PID(i), (int)c, nm));
        }
        json_object_array_add(evs, meta("thread_name", DEV_PID(i), TID_CMDS, "commands"));
        json_object_array_add(evs, meta("thread_name", DEV_PID(i), TID_JOBS, "jobs"));
    }
    /* host thread names: first seen */
    int seen[256], nseen = 0;
    for (size_t i = 0; i < p_nev; i++) {
        const struct ev *e = &p_ev[i];
        if (e->kind != EV_SPAN)
            continue;
        int k;
        for (k = 0; k < nseen && seen[k] != e->tid; k++)
            ;
        if (k < nseen || nseen == 256)
            continue;
        seen[nseen++] = e->tid;
        char nm[64];
        snprintf(nm, sizeof(nm), "host thread %d", e->tid);
        json_object_array_add(evs, meta("thread_name", 1, e->tid, nm));
    }

    for (size_t i = 0; i < p_nev; i++) {
        const struct ev *e = &p_ev[i];
        double ts = us_of(e, e->ts), dur = (double)e->dur / 1000.0;
        json_object *o, *a;
        switch (e->kind) {
        case EV_SPAN:
            json_object_array_add(evs, x_event(e->name, "host", 1, e->tid, ts, dur));
            break;
        case EV_JOB:
            o = x_event(e->name, "job", DEV_PID(e->dev), TID_JOBS, ts, dur);
            a = json_object_new_object();
            json_object_object_add(a, "job", json_object_new_int64((int64_t)e->job));
            if (e->have_energy)
                json_object_object_add(a, "energy_pj",
                                       json_object_new_int64((int64_t)e->energy_pj));
            json_object_object_add(o, "args", a);
            json_object_array_add(evs, o);
            break;
        case EV_SETUP:
            o = x_event(e->name, "setup", DEV_PID(e->dev), TID_CMDS, ts, dur);
            a = json_object_new_object();
            json_object_object_add(a, "job", json_object_new_int64((int64_t)e->job));
            json_object_object_add(o, "args", a);
            json_object_array_add(evs, o);
            break;
        case EV_CMD:
            o = x_event(e->name, "cmd", DEV_PID(e->dev), TID_CMDS, ts, dur);
            a = json_object_new_object();
            json_object_object_add(a, "op", json_object_new_string(
                                                e->opcode < TX8_OP_COUNT ? op_names[e->opcode] : "?"));
            json_object_object_add(a, "job", json_object_new_int64((int64_t)e->job));
            json_object_object_add(a, "cores", json_object_new_int((int)e->ncores));
            json_object_object_add(a, "core_mask", json_object_new_int64((int64_t)e->core_mask));
            json_object_object_add(a, "bytes_read", json_object_new_int64((int64_t)e->rd));
            json_object_object_add(a, "bytes_written", json_object_new_int64((int64_t)e->wr));
            json_object_object_add(a, "macs", json_object_new_int64((int64_t)e->macs));
            json_object_object_add(a, "energy_pj", json_object_new_int64((int64_t)e->energy_pj));
            if (e->detail)
                json_object_object_add(a, "detail", json_object_new_string(e->detail));
            json_object_object_add(o, "args", a);
            json_object_array_add(evs, o);
            for (unsigned c = 0; c < 64; c++)
                if (e->core_mask & (1ull << c))
                    json_object_array_add(evs,
                                          x_event(e->name, "core", DEV_PID(e->dev), (int)c, ts, dur));
            break;
        case EV_COUNTER:
            o = json_object_new_object();
            json_object_object_add(o, "ph", json_object_new_string("C"));
            json_object_object_add(o, "name", json_object_new_string(e->name));
            json_object_object_add(o, "pid", json_object_new_int(e->dev >= 0 ? DEV_PID(e->dev) : 1));
            json_object_object_add(o, "ts", json_object_new_double(ts));
            a = json_object_new_object();
            json_object_object_add(a, "value", json_object_new_double(e->value));
            json_object_object_add(o, "args", a);
            json_object_array_add(evs, o);
            break;
        }
    }
    return root;
}

TX_API int tx_profile_write(const char *path)
{
    if (!tx_profile_enabled())
        return tx_error(TX_EINVAL, "tx_profile_write: profiling is off (TX_PROFILE is not set)");
    if (!path)
        path = p_path;
    if (!path || !*path)
        return tx_error(TX_EINVAL, "tx_profile_write: no path");
    pthread_mutex_lock(&p_lock);
    json_object *root = build_locked();
    pthread_mutex_unlock(&p_lock);
    size_t len = strlen(path) + 32;
    char *tmp = malloc(len);
    if (!tmp) {
        json_object_put(root);
        return tx_error(TX_ENOMEM, "tx_profile_write: out of memory");
    }
    snprintf(tmp, len, "%s.tmp.%d", path, (int)getpid());
    int rc = TX_OK;
    if (json_object_to_file_ext(tmp, root, JSON_C_TO_STRING_PLAIN) != 0) {
        rc = tx_error(TX_EIO, "tx_profile_write: cannot write %s: %s", tmp, strerror(errno));
        unlink(tmp);
    } else if (tx_file_check_target(path, NULL, 0) < 0) {
        rc = tx_error(TX_EINVAL, "tx_profile_write: %s: exists and is not a regular file", path);
        unlink(tmp);
    } else if (rename(tmp, path) != 0) {
        rc = tx_error(TX_EIO, "tx_profile_write: cannot rename %s to %s: %s", tmp, path,
                      strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    json_object_put(root);
    return rc;
}
