// SPDX-License-Identifier: MIT
/*
 * tx-top against a live tx8-emu under a known load.
 *
 * A child process (the "workload") opens the device through libtx,
 * allocates labelled buffer objects of known sizes, routes tokens with
 * MOE_ROUTE on the device and publishes the device's per-expert counts
 * through the telemetry channel, then keeps the device busy with MATMUL
 * jobs at a known duty cycle while measuring the busy time of its jobs.
 * `tx-top --json -d emu:SOCK` must report utilisation and memory within
 * tolerance of what the workload did, the workload's process row, and its
 * model with the right expert load.
 *
 * The same program is the workload of the screen test
 * (tests/txtop/screen-test.sh):
 *     test_txtop_live --workload SPEC SECONDS DUTY [sawtooth]
 * runs it until SECONDS passed or SIGTERM; with "sawtooth" it also grows a
 * 2 MiB-per-step cache every 0.2 s and drops it when 16 MiB are reached.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include <tx/tx_device.h>
#include <tx/tx_telemetry.h>

#include "tx_test_emu.h"

/* The workload's buffers (sizes are page multiples: exact in the views). */
#define W_K 512
#define W_N 512
#define W_T 256
#define W_EXPERTS 16
#define W_LAYERS 6 /* 2 dense + 4 MoE */
#define W_FIRST_MOE 2
#define W_TOPK 2
#define SZ_WEIGHTS ((uint64_t)W_N * W_K * 4)     /* 1 MiB */
#define SZ_ACT ((uint64_t)W_T * (W_K + W_N) * 4) /* 1 MiB */
#define SZ_KV (3ull << 20)                       /* 3 MiB, never touched */
#define SZ_ROUTER (64ull << 10)                  /* logits, ids, weights, counts */
#define MODEL_NAME "txtop-test"
#define W_SLOTS 4                  /* screen test: per-slot KV buffers */
#define SZ_SLOT (512ull << 10)     /* 512 KiB each */

static volatile sig_atomic_t w_stop;

static void w_on_term(int sig)
{
    (void)sig;
    w_stop = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !w_stop)
        ;
}

struct wl_result {
    int ok;
    double duty; /* busy time of our jobs / wall time of the load phase */
    uint64_t jobs;
    uint64_t counts[W_LAYERS][W_EXPERTS];
};

static int wl_fail(const char *what)
{
    fprintf(stderr, "workload: %s: %s\n", what, tx_last_error());
    return -1;
}

/*
 * Run the workload on spec for `seconds` at `duty` (0..1]. report (if not
 * NULL) gets "ready\n" once the buffers, the routing and the publication are
 * done, and the result at the end.
 */
static int run_workload(const char *spec, double seconds, double duty, bool sawtooth,
                        uint64_t extra, FILE *report)
{
    tx_bo_t *grow[8], *slots[W_SLOTS];
    int ngrow = 0;
    uint64_t next_grow = 0;
    tx_device_t *dev;
    tx_bo_t *w, *act, *kv, *router, *more = NULL;
    tx_cmdbuf_t *cb;
    tx_telemetry_pub_t *pub = NULL;
    struct wl_result r;
    float *wp, *ap, *lp;
    uint64_t *cp;
    void *p;
    uint64_t rng = 42, busy = 0, t0, t_end, reps = 1;

    memset(&r, 0, sizeof(r));
    if (tx_device_open(spec, &dev) < 0)
        return wl_fail("open");
    if (tx_bo_alloc(dev, SZ_WEIGHTS, 0, MODEL_NAME "_Weights", &w) < 0 ||
        tx_bo_alloc(dev, SZ_ACT, 0, MODEL_NAME "_Activations", &act) < 0 ||
        tx_bo_alloc(dev, SZ_KV, 0, MODEL_NAME "_KVCache", &kv) < 0 ||
        tx_bo_alloc(dev, SZ_ROUTER, 0, MODEL_NAME "_Router", &router) < 0 ||
        (extra && tx_bo_alloc(dev, extra, 0, MODEL_NAME "_Extra", &more) < 0))
        return wl_fail("bo_alloc");
    /* the screen test's workload also has a KV cache per slot, labelled as
     * glm-server labels them (<model>_KV_slotN) */
    for (int i = 0; sawtooth && i < W_SLOTS; i++) {
        char label[48];

        snprintf(label, sizeof(label), "%s_KV_slot%d", MODEL_NAME, i);
        if (tx_bo_alloc(dev, SZ_SLOT, 0, label, &slots[i]) < 0)
            return wl_fail("bo_alloc slot");
    }
    if (tx_bo_map(w, &p) < 0)
        return wl_fail("map");
    wp = p;
    if (tx_bo_map(act, &p) < 0)
        return wl_fail("map");
    ap = p;
    if (tx_bo_map(router, &p) < 0)
        return wl_fail("map");
    lp = p;
    for (size_t i = 0; i < (size_t)W_N * W_K; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        wp[i] = (float)((int)(rng >> 40) % 2001 - 1000) / 1000.0f;
    }
    for (size_t i = 0; i < (size_t)W_T * W_K; i++)
        ap[i] = (float)(i % 17) / 17.0f;
    if (tx_cmdbuf_create(dev, &cb) < 0)
        return wl_fail("cmdbuf");

    /* Routing on the device: per MoE layer, skewed logits; the device
     * counts the selections (MOE_ROUTE COUNT) into counts[layer][expert]. */
    {
        size_t logits_off = 0, ids_off = 16384, wts_off = 24576, counts_off = 32768;
        tx_job_t job;

        cp = (uint64_t *)((char *)lp + counts_off);
        memset(cp, 0, W_LAYERS * W_EXPERTS * sizeof(uint64_t));
        for (int l = W_FIRST_MOE; l < W_LAYERS; l++) {
            struct tx_moe_route_args ra;

            for (int t = 0; t < W_T; t++)
                for (int e = 0; e < W_EXPERTS; e++) {
                    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                    /* expert (3 l) % E is hot, the rest noise */
                    lp[t * W_EXPERTS + e] = (float)((int)(rng >> 40) % 1000) / 500.0f +
                                            (e == (3 * l) % W_EXPERTS ? 1.5f : 0.0f) +
                                            (float)e * 0.02f * (float)l;
                }
            memset(&ra, 0, sizeof(ra));
            ra.out_ids = tx_ref(router, ids_off);
            ra.out_w = tx_ref(router, wts_off);
            ra.logits = tx_ref(router, logits_off);
            ra.counts = tx_ref(router, counts_off + (uint64_t)l * W_EXPERTS * 8);
            ra.tokens = W_T;
            ra.experts = W_EXPERTS;
            ra.top_k = W_TOPK;
            ra.n_group = 1;
            ra.topk_group = 1;
            ra.scaling = 1.0f;
            ra.flags = TX8_ROUTE_F_COUNT | TX8_ROUTE_F_NORM_TOPK;
            tx_cmdbuf_reset(cb);
            if (tx_cmd_moe_route(cb, &ra) < 0 || tx_submit(dev, cb, &job) < 0 ||
                tx_wait(dev, job, -1, NULL) < 0)
                return wl_fail("moe_route");
        }
        if (tx_telemetry_open_publisher(MODEL_NAME, spec, W_LAYERS, W_EXPERTS, &pub) < 0)
            return wl_fail("telemetry");
        for (int l = W_FIRST_MOE; l < W_LAYERS; l++) {
            memcpy(r.counts[l], cp + l * W_EXPERTS, sizeof(r.counts[l]));
            if (tx_telemetry_update_experts(pub, (uint32_t)l, r.counts[l], W_EXPERTS) < 0)
                return wl_fail("telemetry update");
        }
    }

    /* One job = `reps` MATMULs; calibrated to last about 20 ms. */
    for (int cal = 0; cal < 4; cal++) {
        struct tx_job_result res;
        tx_job_t job;

        tx_cmdbuf_reset(cb);
        for (uint64_t i = 0; i < reps; i++) {
            struct tx_matmul_args m;

            memset(&m, 0, sizeof(m));
            m.y = tx_ref(act, (uint64_t)W_T * W_K * 4);
            m.x = tx_ref(act, 0);
            m.w.data = tx_ref(w, 0);
            m.w.rows = W_N;
            m.w.cols = W_K;
            m.w.dtype = TX8_DTYPE_F32;
            m.w.format = TX8_WFMT_DENSE;
            m.tokens = W_T;
            m.ld_x = W_K;
            m.ld_y = W_N;
            m.act_dtype = TX8_DTYPE_F32;
            if (tx_cmd_matmul(cb, &m) < 0)
                return wl_fail("matmul");
        }
        if (tx_submit(dev, cb, &job) < 0 || tx_wait(dev, job, -1, &res) < 0)
            return wl_fail("calibration job");
        {
            uint64_t d = res.end_ns > res.start_ns ? res.end_ns - res.start_ns : 1;
            uint64_t want = reps * 20000000ull / d;

            if (want < 1)
                want = 1;
            if (want > 256)
                want = 256;
            if (want == reps)
                break;
            reps = want;
        }
    }
    if (report) {
        fprintf(report, "ready\n");
        fflush(report);
    }

    /* The load: jobs back to back with pauses that make the duty cycle. */
    t0 = now_ns();
    t_end = t0 + (uint64_t)(seconds * 1e9);
    while (!w_stop && now_ns() < t_end) {
        struct tx_job_result res;
        tx_job_t job;
        uint64_t d, s0 = now_ns();

        if (tx_submit(dev, cb, &job) < 0 || tx_wait(dev, job, -1, &res) < 0)
            return wl_fail("load job");
        /* a growing cache dropped when full: the memory sawtooth */
        if (sawtooth && s0 >= next_grow) {
            next_grow = s0 + 200000000ull;
            if (ngrow == 8) {
                while (ngrow)
                    tx_bo_free(grow[--ngrow]);
            } else if (tx_bo_alloc(dev, 2ull << 20, 0, MODEL_NAME "_KVGrow", &grow[ngrow]) == 0) {
                ngrow++;
            }
        }
        d = res.end_ns > res.start_ns ? res.end_ns - res.start_ns : 0;
        busy += d;
        r.jobs++;
        if (duty < 0.999) {
            uint64_t wall = now_ns() - s0;
            /* pause so that busy / (busy + idle) = duty */
            double idle = (double)d / duty - (double)wall;

            if (idle > 0)
                sleep_ns((uint64_t)idle);
        }
    }
    r.duty = (double)busy / (double)(now_ns() - t0);
    r.ok = 1;
    if (report) {
        fprintf(report, "result %.6f %llu\n", r.duty, (unsigned long long)r.jobs);
        for (int l = 0; l < W_LAYERS; l++) {
            fprintf(report, "counts");
            for (int e = 0; e < W_EXPERTS; e++)
                fprintf(report, " %llu", (unsigned long long)r.counts[l][e]);
            fprintf(report, "\n");
        }
        fflush(report);
    }
    tx_telemetry_close(pub);
    tx_cmdbuf_destroy(cb);
    if (more)
        tx_bo_free(more);
    tx_device_close(dev);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Test helpers                                                              */
/* ------------------------------------------------------------------------ */

static struct tx_test_emu emu;
static char shm_dir[64];

static void emu_up(void)
{
    snprintf(shm_dir, sizeof(shm_dir), "/tmp/txtop-shm-XXXXXX");
    if (!mkdtemp(shm_dir)) {
        perror("mkdtemp");
        exit(1);
    }
    chmod(shm_dir, 0777 | S_ISVTX); /* other users publish and read here too */
    setenv("TX_TELEMETRY_DIR", shm_dir, 1);
    if (tx_test_emu_start(&emu, "128M", "--cores", "2", NULL) < 0)
        exit(1);
}

static void emu_down(void)
{
    tx_test_emu_stop(&emu);
    tx_test_rmtree(shm_dir);
}

/* Run tx-top with args (NULL terminated); stdout into *out (malloc()ed).
 * uid >= 0: as that user. Returns the exit status (or -1). */
static int run_txtop(char **out, int uid, ...)
{
    const char *argv[32];
    char bin[256];
    int argc = 0, pfd[2], status;
    size_t cap = 65536, n = 0;
    const char *a;
    va_list ap;
    pid_t pid;

    argv[argc++] = tx_test_bin("tx-top", bin, sizeof(bin));
    va_start(ap, uid);
    while ((a = va_arg(ap, const char *)) && argc < 31)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    *out = calloc(1, cap);
    ck_assert_ptr_nonnull(*out);
    ck_assert_int_eq(pipe(pfd), 0);
    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(pfd[1], STDOUT_FILENO);
        close(pfd[0]);
        close(pfd[1]);
        if (uid >= 0 && (setgid((gid_t)uid) < 0 || setuid((uid_t)uid) < 0))
            _exit(126);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    for (;;) {
        ssize_t r;

        if (n + 1 >= cap) {
            cap *= 2;
            *out = realloc(*out, cap);
            ck_assert_ptr_nonnull(*out);
        }
        r = read(pfd[0], *out + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    (*out)[n] = 0;
    close(pfd[0]);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;

    ck_assert_msg(json_object_object_get_ex(o, key, &v), "no key '%s' in %s", key,
                  json_object_to_json_string(o));
    return v;
}

static double num(json_object *o, const char *key)
{
    json_object *v = get(o, key);

    ck_assert_msg(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int),
                  "'%s' is not a number: %s", key, json_object_to_json_string(v));
    return json_object_get_double(v);
}

static int is_null(json_object *o, const char *key)
{
    return get(o, key) == NULL;
}

struct workload {
    pid_t pid;
    FILE *report;
};

static void workload_start_ex(struct workload *wl, double seconds, double duty, uint64_t extra)
{
    int pfd[2];
    char line[64];

    ck_assert_int_eq(pipe(pfd), 0);
    fflush(NULL);
    wl->pid = fork();
    ck_assert_int_ge(wl->pid, 0);
    if (wl->pid == 0) {
        FILE *f;

        close(pfd[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        f = fdopen(pfd[1], "w");
        _exit(run_workload(emu.spec, seconds, duty, false, extra, f) == 0 ? 0 : 1);
    }
    close(pfd[1]);
    wl->report = fdopen(pfd[0], "r");
    ck_assert_ptr_nonnull(wl->report);
    ck_assert_msg(fgets(line, sizeof(line), wl->report) != NULL && !strcmp(line, "ready\n"),
                  "the workload did not start");
}

static void workload_start(struct workload *wl, double seconds, double duty)
{
    workload_start_ex(wl, seconds, duty, 0);
}

/*
 * The utilisation checks compare tx-top with the duty cycle the workload
 * paces on the wall clock. On a host whose CPUs are oversubscribed by other
 * work (load average above 2 jobs per CPU) the emulator's threads and the
 * workload's pauses are descheduled at random and that comparison measures
 * the host, not tx-top: those assertions are then skipped with a message
 * (everything else is still checked).
 */
static int host_overloaded(void)
{
    double la[1];
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    if (getloadavg(la, 1) != 1 || n < 1 || la[0] <= 2.0 * (double)n)
        return 0;
    fprintf(stderr, "test_txtop_live: host load %.1f on %ld CPUs: wall-clock utilisation "
            "checks skipped\n", la[0], n);
    return 1;
}

static void workload_finish(struct workload *wl, double *duty, uint64_t counts[W_LAYERS][W_EXPERTS])
{
    unsigned long long jobs;
    int status;

    ck_assert_int_eq(fscanf(wl->report, "result %lf %llu\n", duty, &jobs), 2);
    if (!host_overloaded())
        ck_assert_uint_gt(jobs, 5);
    for (int l = 0; l < W_LAYERS; l++) {
        ck_assert_int_eq(fscanf(wl->report, "counts"), 0);
        for (int e = 0; e < W_EXPERTS; e++) {
            unsigned long long c;

            ck_assert_int_eq(fscanf(wl->report, " %llu", &c), 1);
            counts[l][e] = c;
        }
        ck_assert_int_eq(fscanf(wl->report, "\n"), 0);
    }
    fclose(wl->report);
    ck_assert_int_eq(waitpid(wl->pid, &status, 0), wl->pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "workload status %d", status);
}

static json_object *find_label(json_object *dev, const char *name)
{
    json_object *labels = get(get(dev, "memory"), "labels");

    for (size_t i = 0; i < json_object_array_length(labels); i++) {
        json_object *l = json_object_array_get_idx(labels, i);

        if (!strcmp(json_object_get_string(get(l, "label")), name))
            return l;
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

/* The load: 50% duty cycle. The snapshot covers one second in its middle. */
START_TEST(json_under_load)
{
    uint64_t counts[W_LAYERS][W_EXPERTS], sum[W_EXPERTS] = {0}, total = 0;
    const double duty_target = 0.5;
    json_object *root, *dev, *procs, *row = NULL, *models, *m = NULL, *mem, *l;
    struct workload wl;
    double duty, util;
    char *out;
    int rc;

    workload_start(&wl, 3.0, duty_target);
    tx_test_emu_sleep_ms(700); /* into the steady state */
    rc = run_txtop(&out, -1, "--json", "-d", emu.spec, "-d", "10", NULL);
    workload_finish(&wl, &duty, counts);
    ck_assert_msg(rc == 0, "tx-top exit %d:\n%s", rc, out);
    /* the workload did what it meant to */
    int paced = !host_overloaded();
    if (paced)
        ck_assert_msg(fabs(duty - duty_target) < 0.1, "workload duty %.3f", duty);

    root = json_tokener_parse(out);
    ck_assert_msg(root != NULL, "not JSON:\n%s", out);
    ck_assert_str_eq(json_object_get_string(get(root, "schema")), "tx-top/1");
    ck_assert_double_eq_tol(num(root, "interval"), 1.0, 1e-9);
    ck_assert_int_eq(json_object_array_length(get(root, "devices")), 1);
    dev = json_object_array_get_idx(get(root, "devices"), 0);
    ck_assert_str_eq(json_object_get_string(get(dev, "status")), "ok");
    ck_assert_str_eq(json_object_get_string(get(dev, "backend")), "emu");
    ck_assert_str_eq(json_object_get_string(get(dev, "socket")), emu.sock);
    ck_assert(is_null(dev, "pci_address"));
    ck_assert_int_eq((int)num(dev, "cores"), 2);
    ck_assert_int_eq((int)num(dev, "interface_version_major"), TX8_IF_VERSION_MAJOR);
    ck_assert_str_eq(json_object_get_string(get(dev, "utilization_unit")), "%");

    /* utilisation: what the workload measured, within 15 points */
    util = num(dev, "utilization");
    if (paced)
        ck_assert_msg(fabs(util - 100.0 * duty) < 15.0, "tx-top %.1f%%, workload %.1f%%", util,
                      100.0 * duty);
    ck_assert_int_eq(json_object_array_length(get(dev, "core_utilization")), 2);

    /* memory: the labelled buffers exactly, the total at least their sum */
    mem = get(dev, "memory");
    ck_assert_str_eq(json_object_get_string(get(mem, "unit")), "B");
    ck_assert_uint_eq((uint64_t)num(mem, "total"), (128ull << 20) - (2ull << 20));
    ck_assert_uint_ge((uint64_t)num(mem, "used"), SZ_WEIGHTS + SZ_ACT + SZ_KV + SZ_ROUTER);
    ck_assert_uint_eq((uint64_t)num(mem, "free"),
                      (uint64_t)num(mem, "total") - (uint64_t)num(mem, "used"));
    l = find_label(dev, MODEL_NAME "_Weights");
    ck_assert_ptr_nonnull(l);
    ck_assert_uint_eq((uint64_t)num(l, "size"), SZ_WEIGHTS);
    ck_assert_uint_eq((uint64_t)num(find_label(dev, MODEL_NAME "_KVCache"), "size"), SZ_KV);
    ck_assert_uint_eq((uint64_t)num(find_label(dev, MODEL_NAME "_Activations"), "size"), SZ_ACT);
    ck_assert_uint_eq((uint64_t)num(find_label(dev, MODEL_NAME "_Router"), "size"), SZ_ROUTER);
    if (paced)
        ck_assert_uint_gt((uint64_t)num(dev, "jobs"), 5);
    ck_assert_uint_eq((uint64_t)num(dev, "jobs_failed"), 0);
    ck_assert(is_null(dev, "page_faults")); /* no kernel: N/A, not 0 */

    /* the workload's process row (tx-top's own attachment is not listed) */
    procs = get(dev, "processes");
    ck_assert_int_eq(json_object_array_length(procs), 1);
    row = json_object_array_get_idx(procs, 0);
    ck_assert_int_eq((int)num(row, "pid"), (int)wl.pid);
    ck_assert_msg(strstr(json_object_get_string(get(row, "command")), "test_txtop_live"),
                  "command %s", json_object_get_string(get(row, "command")));
    if (paced)
        ck_assert_msg(fabs(num(row, "utilization") - 100.0 * duty) < 15.0, "process %.1f%%",
                      num(row, "utilization"));
    ck_assert_uint_ge((uint64_t)num(row, "device_memory"), SZ_WEIGHTS + SZ_ACT + SZ_KV + SZ_ROUTER);
    ck_assert_uint_gt((uint64_t)num(row, "host_memory"), 1u << 20);
    ck_assert_int_eq(json_object_get_boolean(get(row, "readable")), 1);
    /* its memory by label: the same buffers, exactly, on its own row */
    {
        json_object *pl = get(row, "memory_labels");
        uint64_t want[4] = {SZ_WEIGHTS, SZ_ACT, SZ_KV, SZ_ROUTER}, seen = 0;
        const char *names[4] = {MODEL_NAME "_Weights", MODEL_NAME "_Activations",
                                MODEL_NAME "_KVCache", MODEL_NAME "_Router"};

        ck_assert_ptr_nonnull(pl);
        for (size_t i = 0; i < json_object_array_length(pl); i++) {
            json_object *x = json_object_array_get_idx(pl, i);

            for (int k = 0; k < 4; k++)
                if (!strcmp(json_object_get_string(get(x, "label")), names[k])) {
                    ck_assert_uint_eq((uint64_t)num(x, "size"), want[k]);
                    seen |= 1u << k;
                }
        }
        ck_assert_uint_eq(seen, 15);
    }

    /* the model it published: the device's routing counts */
    models = get(root, "models");
    for (size_t i = 0; i < json_object_array_length(models); i++) {
        json_object *x = json_object_array_get_idx(models, i);

        if ((int)num(x, "pid") == (int)wl.pid)
            m = x;
    }
    ck_assert_msg(m != NULL, "model not listed: %s", out);
    ck_assert_str_eq(json_object_get_string(get(m, "model")), MODEL_NAME);
    ck_assert_int_eq((int)num(m, "device_index"), 0);
    ck_assert_int_eq((int)num(m, "layers"), W_LAYERS);
    ck_assert_int_eq((int)num(m, "experts"), W_EXPERTS);
    ck_assert_int_eq((int)num(m, "moe_layers"), W_LAYERS - W_FIRST_MOE);
    for (int li = 0; li < W_LAYERS; li++)
        for (int e = 0; e < W_EXPERTS; e++) {
            sum[e] += counts[li][e];
            total += counts[li][e];
        }
    ck_assert_uint_eq(total, (uint64_t)(W_LAYERS - W_FIRST_MOE) * W_T * W_TOPK);
    ck_assert_uint_eq((uint64_t)num(m, "selections"), total);
    for (int e = 0; e < W_EXPERTS; e++)
        ck_assert_uint_eq(
            (uint64_t)json_object_get_int64(json_object_array_get_idx(get(m, "expert_load"), e)),
            sum[e]);
    {
        /* the std tx-top shows is the one of the published counts */
        uint8_t valid[W_LAYERS] = {0, 0, 1, 1, 1, 1};
        struct tx_telemetry_model tm;
        struct tx_telemetry_stats st;

        memset(&tm, 0, sizeof(tm));
        tm.layers = W_LAYERS;
        tm.experts = W_EXPERTS;
        tm.layer_valid = valid;
        tm.counts = &counts[0][0];
        ck_assert_int_eq(tx_telemetry_model_stats(&tm, &st), TX_OK);
        ck_assert_double_eq_tol(num(m, "expert_util_std"), st.overall_std, 0.01);
        ck_assert_int_eq((int)num(m, "max_layer"), st.max_layer);
        ck_assert_uint_gt((uint64_t)(st.overall_std * 100), 100); /* skewed on purpose */
        ck_assert(json_object_array_get_idx(get(m, "layer_util_std"), 0) == NULL); /* dense */
    }
    json_object_put(root);
    free(out);
}
END_TEST

/* Nothing running: 0% and no process; tx-top's own attachment is excluded. */
START_TEST(json_idle)
{
    json_object *root, *dev;
    char *out;

    ck_assert_int_eq(run_txtop(&out, -1, "--json", "-d", emu.spec, "-d", "3", NULL), 0);
    root = json_tokener_parse(out);
    ck_assert_ptr_nonnull(root);
    dev = json_object_array_get_idx(get(root, "devices"), 0);
    ck_assert_double_eq_tol(num(dev, "utilization"), 0.0, 1e-9);
    ck_assert_int_eq(json_object_array_length(get(dev, "processes")), 0);
    ck_assert_int_eq(json_object_array_length(get(root, "models")), 0);
    json_object_put(root);
    free(out);
}
END_TEST

/* --json -l -n 3: three objects, one per line. */
START_TEST(json_loop)
{
    char *out, *line, *save = NULL;
    int n = 0;
    double prev = 0;

    ck_assert_int_eq(
        run_txtop(&out, -1, "--json", "-l", "-n", "3", "-d", "2", "-d", emu.spec, NULL), 0);
    for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_object *o = json_tokener_parse(line);

        ck_assert_msg(o != NULL, "line %d is not JSON: %s", n, line);
        ck_assert(num(o, "timestamp") > prev);
        prev = num(o, "timestamp");
        ck_assert_int_eq(json_object_array_length(get(o, "devices")), 1);
        json_object_put(o);
        n++;
    }
    ck_assert_int_eq(n, 3);
    free(out);
}
END_TEST

/* nvidia-smi style: --query=power.draw,energy,util,memory.used
 * --format=csv,noheader -l 1: one CSV row per refresh with units, the power
 * of the device's model (>= its static power), energy that grows. */
START_TEST(query_power_csv)
{
    char *out, *line, *save = NULL;
    double w, j, u, mib, prev_j = -1;
    int n = 0;

    ck_assert_int_eq(run_txtop(&out, -1, "--query=power.draw,energy,util,memory.used",
                               "--format=csv,noheader", "-l", "1", "-n", "2", "-d", emu.spec,
                               NULL),
                     0);
    for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        ck_assert_msg(sscanf(line, "%lf W, %lf J, %lf %%, %lf MiB", &w, &j, &u, &mib) == 4,
                      "row %d: '%s'", n, line);
        ck_assert_msg(w >= 1.5 - 1e-9, "power %.3f W below the static 1.5 W", w);
        ck_assert(j > prev_j);
        ck_assert(u >= 0 && u <= 100 && mib >= 0);
        prev_j = j;
        n++;
    }
    ck_assert_int_eq(n, 2);
    free(out);
    /* the header with units; bad fields and formats are usage errors */
    ck_assert_int_eq(run_txtop(&out, -1, "--query=index,power.draw,power.limit", "-d", "2", "-d",
                               emu.spec, NULL),
                     0);
    ck_assert_msg(!strncmp(out, "index, power.draw [W], power.limit [W]\n0, ", 41), "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "W, N/A\n"));
    free(out);
    ck_assert_int_eq(run_txtop(&out, -1, "--query=power.drw", NULL), 2);
    free(out);
    ck_assert_int_eq(run_txtop(&out, -1, "--query=util", "--format=tsv", NULL), 2);
    free(out);
}
END_TEST

START_TEST(list_and_errors)
{
    char *out;

    ck_assert_int_eq(run_txtop(&out, -1, "-L", "-d", emu.spec, NULL), 0);
    ck_assert_msg(strstr(out, "Device 0: TX8") && strstr(out, emu.sock) && strstr(out, "2 cores") &&
                      strstr(out, "interface 1."),
                  "%s", out);
    ck_assert_ptr_null(strchr(strchr(out, '\n') + 1, '\n')); /* one line */
    free(out);
    /* the same device twice is listed once */
    ck_assert_int_eq(run_txtop(&out, -1, "-L", "-d", emu.spec, "-d", emu.spec, NULL), 0);
    ck_assert_ptr_null(strchr(strchr(out, '\n') + 1, '\n'));
    free(out);
    /* -i selects among the listed devices */
    ck_assert_int_eq(run_txtop(&out, -1, "-L", "-d", emu.spec, "-i", "0", NULL), 0);
    free(out);
    ck_assert_int_eq(run_txtop(&out, -1, "-L", "-d", emu.spec, "-i", "1", NULL), 1);
    free(out);
    /* no emulator behind the socket: reported, exit 1 */
    ck_assert_int_eq(
        run_txtop(&out, -1, "--json", "-d", "emu:/nonexistent/tx8.sock", "-d", "1", NULL), 1);
    {
        json_object *root = json_tokener_parse(out);
        json_object *dev;

        ck_assert_ptr_nonnull(root);
        dev = json_object_array_get_idx(get(root, "devices"), 0);
        ck_assert_str_eq(json_object_get_string(get(dev, "status")), "unavailable");
        ck_assert(!is_null(dev, "error"));
        ck_assert(is_null(dev, "utilization"));
        ck_assert(is_null(get(dev, "memory"), "used"));
        json_object_put(root);
    }
    free(out);
    /* bad usage: exit 2 */
    ck_assert_int_eq(run_txtop(&out, -1, "-x", NULL), 2);
    free(out);
    ck_assert_int_eq(run_txtop(&out, -1, "-n", "0", "--json", NULL), 2);
    free(out);
    ck_assert_int_eq(run_txtop(&out, -1, "-l", NULL), 2);
    free(out);
    ck_assert_int_eq(run_txtop(&out, -1, "-i", "a", NULL), 2);
    free(out);
    ck_assert_int_eq(run_txtop(&out, -1, "-d", "0", NULL), 2);
    free(out);
    ck_assert_int_eq(run_txtop(&out, -1, "-d", "no-such-device", "-L", NULL), 1);
    free(out);
    /* not a terminal: the screen refuses, pointing to --json */
    ck_assert_int_eq(run_txtop(&out, -1, "-d", emu.spec, NULL), 1);
    free(out);
}
END_TEST

/* Without root: device-wide figures, N/A for the process it cannot read. */
START_TEST(json_not_root)
{
    uint64_t counts[W_LAYERS][W_EXPERTS];
    json_object *root, *dev, *row;
    struct workload wl;
    double duty;
    char *out;
    int rc;

    if (geteuid() != 0)
        return; /* the test switches to "nobody" */
    /* let nobody reach the emulator's socket */
    chmod(emu.dir, 0755);
    chmod(emu.sock, 0666);
    workload_start(&wl, 2.0, 0.5);
    tx_test_emu_sleep_ms(300);
    rc = run_txtop(&out, 65534, "--json", "-d", emu.spec, "-d", "5", NULL);
    workload_finish(&wl, &duty, counts);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    root = json_tokener_parse(out);
    ck_assert_ptr_nonnull(root);
    ck_assert_int_ge((int)num(root, "processes_unreadable"), 1);
    dev = json_object_array_get_idx(get(root, "devices"), 0);
    ck_assert_str_eq(json_object_get_string(get(dev, "status")), "ok");
    ck_assert(!is_null(dev, "utilization"));
    ck_assert_int_eq(json_object_array_length(get(dev, "processes")), 1);
    row = json_object_array_get_idx(get(dev, "processes"), 0);
    /* its sockets cannot be read, but the device names the queue's process
     * (interface 1.1, owner_pid) and /proc/PID/status is world-readable */
    ck_assert(!is_null(row, "peer"));
    ck_assert_int_eq((int)num(row, "pid"), (int)wl.pid);
    ck_assert_str_eq(json_object_get_string(get(row, "user")), "root");
    ck_assert(!is_null(row, "utilization"));
    ck_assert_uint_ge((uint64_t)num(row, "device_memory"), SZ_WEIGHTS + SZ_KV);
    ck_assert_uint_gt((uint64_t)num(row, "host_memory"), 0);
    json_object_put(root);
    free(out);
}
END_TEST

/* Two client processes on one emulator: each gets its own row with its PID
 * (the device's owner_pid: with several clients the socket scan alone
 * cannot tell which queue is whose). The first holds 8 MiB more than the
 * second, so a swapped mapping would show. */
START_TEST(json_two_clients)
{
    uint64_t counts[W_LAYERS][W_EXPERTS];
    const uint64_t extra = 8ull << 20;
    json_object *root, *dev, *procs, *r1 = NULL, *r2 = NULL;
    struct workload a, b;
    double duty;
    char *out;
    int rc;

    workload_start_ex(&a, 2.5, 0.3, extra);
    workload_start_ex(&b, 2.5, 0.3, 0);
    tx_test_emu_sleep_ms(300);
    rc = run_txtop(&out, -1, "--json", "-d", emu.spec, "-d", "5", NULL);
    workload_finish(&a, &duty, counts);
    workload_finish(&b, &duty, counts);
    ck_assert_msg(rc == 0, "tx-top exit %d:\n%s", rc, out);
    root = json_tokener_parse(out);
    ck_assert_msg(root != NULL, "not JSON:\n%s", out);
    dev = json_object_array_get_idx(get(root, "devices"), 0);
    ck_assert_int_eq((int)num(dev, "interface_version_minor"), TX8_IF_VERSION_MINOR);
    procs = get(dev, "processes");
    ck_assert_msg(json_object_array_length(procs) == 2, "%s", out);
    for (size_t i = 0; i < 2; i++) {
        json_object *r = json_object_array_get_idx(procs, i);

        ck_assert_msg(!is_null(r, "pid"), "a row without PID: %s", json_object_to_json_string(r));
        if ((int)num(r, "pid") == (int)a.pid)
            r1 = r;
        else if ((int)num(r, "pid") == (int)b.pid)
            r2 = r;
        ck_assert_msg(strstr(json_object_get_string(get(r, "command")), "test_txtop_live"),
                      "command %s", json_object_get_string(get(r, "command")));
        ck_assert_int_eq((int)num(r, "clients"), 1);
    }
    ck_assert_msg(r1 && r2, "rows are not the two workloads (%d, %d): %s", (int)a.pid, (int)b.pid,
                  out);
    ck_assert_int_ne((int)num(r1, "peer"), (int)num(r2, "peer"));
    ck_assert_uint_ge((uint64_t)num(r1, "device_memory"),
                      SZ_WEIGHTS + SZ_ACT + SZ_KV + SZ_ROUTER + extra);
    ck_assert_uint_ge((uint64_t)num(r2, "device_memory"), SZ_WEIGHTS + SZ_ACT + SZ_KV + SZ_ROUTER);
    ck_assert_uint_lt((uint64_t)num(r2, "device_memory"),
                      SZ_WEIGHTS + SZ_ACT + SZ_KV + SZ_ROUTER + extra);
    ck_assert_uint_ge((uint64_t)num(r1, "device_memory"),
                      (uint64_t)num(r2, "device_memory") + extra);
    json_object_put(root);
    free(out);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("txtop_live");
    TCase *tc = tcase_create("live");

    tcase_add_unchecked_fixture(tc, emu_up, emu_down);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, json_idle);
    tcase_add_test(tc, json_under_load);
    tcase_add_test(tc, json_loop);
    tcase_add_test(tc, list_and_errors);
    tcase_add_test(tc, query_power_csv);
    tcase_add_test(tc, json_not_root);
    tcase_add_test(tc, json_two_clients);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    SRunner *sr;
    int failed;

    if (argc >= 2 && !strcmp(argv[1], "--workload")) {
        struct sigaction sa;

        if (argc != 5 && !(argc == 6 && !strcmp(argv[5], "sawtooth"))) {
            fprintf(stderr, "usage: %s --workload SPEC SECONDS DUTY [sawtooth]\n", argv[0]);
            return 2;
        }
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = w_on_term;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        return run_workload(argv[2], atof(argv[3]), atof(argv[4]), argc == 6, 0, stdout) == 0 ? 0
                                                                                              : 1;
    }
    sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
