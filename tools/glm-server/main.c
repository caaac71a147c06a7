/* SPDX-License-Identifier: MIT */
/*
 * glm-server: OpenAI-compatible serving of a GLM .smd package on a TX8 with
 * continuous batching. Options use llama-server's names where it has them.
 * docs/glm-server.md.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <tx/tx.h>

#include "common/cli.h"
#include "common/device_list.h"
#include "server.h"

static const char *prog = "glm-server";

double srv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void srv_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms % 1000 * 1000000L;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

uint64_t srv_random64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v)) { /* not expected on Linux >= 3.17 */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
            ((uint64_t)getpid() << 32);
        v *= 0x9E3779B97F4A7C15ull;
    }
    return v;
}

void srv_log(const struct srv *S, const char *fmt, ...)
{
    (void)S;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glm-server --checkpoint MODEL.smd [options]\n"
            "\n"
            "OpenAI-compatible HTTP server (POST /v1/completions, /v1/chat/completions,\n"
            "GET /v1/models, /health, /metrics, POST /tokenize, /detokenize) with\n"
            "continuous batching on a TX8 (docs/glm-server.md).\n"
            "\n"
            "  -m, --checkpoint PATH    the .smd package (required)\n"
            "      --device SPEC[,SPEC] device (emu:/path.sock, /dev/accel/accelN; default\n"
            "                           $TX_DEVICE, else the first TX8); a list puts one\n"
            "                           model on several devices (docs/multi-device.md)\n"
            "      --ep-rebalance N     several devices: place the experts again by the live\n"
            "                           load counters every N device passes (0: off)\n"
            "      --host ADDR          address to listen on (default 127.0.0.1)\n"
            "      --port N             port (default 8080; 0 = any free port, printed)\n"
            "  -np, --parallel N        slots: requests decoded together (1..%d, default 4)\n"
            "  -c, --ctx-size N         context of each slot in tokens (default 4096, at most\n"
            "                           the model's max_position_embeddings)\n"
            "  -b, --batch-size N       tokens per device pass: decode rows + one prefill\n"
            "                           chunk (default 64, >= 2)\n"
            "      --api-key KEY        require 'Authorization: Bearer KEY' (not on /health,\n"
            "                           /metrics)\n"
            "      --metrics-key KEY    require 'Authorization: Bearer KEY' on /metrics\n"
            "      --cors-origin LIST   origins a browser may call from: '*' (default), a\n"
            "                           comma-separated list, or 'none'\n"
            "      --max-connections N  open connections (default 256); at the limit the\n"
            "                           longest-waiting idle one is closed for a new one\n"
            "      --idle-timeout S     close a connection idle for S s (default 15)\n"
            "      --header-timeout S   a request's headers must arrive within S s of its\n"
            "                           request line (default 10)\n"
            "      --body-timeout S     its body within S s of its headers (default 60)\n"
            "      --no-prefix-cache    forget a slot's KV when its request ends (default:\n"
            "                           a new request reuses the slot sharing the longest\n"
            "                           prompt prefix; a request's \"cache_prompt\": false too)\n"
            "      --exit-on-device-loss  exit with status 3 when the device is lost (for a\n"
            "                           supervisor) instead of reopening it once a second\n"
            "      --precision PLAN     precision plan (golden, fp32, mlp=int8,...; default\n"
            "                           golden)\n"
            "      --cache-type-k T     KV cache K type: f32, f16, bf16, q8_0, q4_0 (for MLA\n"
            "                           models: the latent cache; default: the plan's)\n"
            "      --cache-type-v T     KV cache V type (GQA models; ignored for MLA)\n"
            "  -a, --alias NAME         model id in the API (default: the package's name)\n"
            "      --chat-format F      glm4, glm4.5, glm4.7, glm5 (default: from the package)\n"
            "      --body-limit BYTES   largest request body (default 1048576; 413 beyond)\n"
            "      --queue-limit N      requests waiting for a slot (default 64; 503 beyond)\n"
            "      --shutdown-timeout S on SIGTERM, seconds to let running requests finish\n"
            "                           before they are stopped (default 5)\n"
            "      --batch-invariant    batch-invariant device jobs: each request's logits\n"
            "                           are bit-identical whatever the batch (slower\n"
            "                           single-token decode; docs/libtx-glm.md)\n"
            "  -v, --verbose            log every request and libmicrohttpd's errors\n"
            "\n"
            "Signals: SIGTERM/SIGINT finish the running requests and exit; SIGHUP reopens\n"
            "the device and reloads the package.\n"
            "  -h, --help               this text\n",
            SRV_MAX_PARALLEL);
}

static struct srv g;

int main(int argc, char **argv)
{
    struct srv *S = &g;
    struct srv_opts *o = &S->o;
    o->host = "127.0.0.1";
    o->port = 8080;
    o->parallel = 4;
    o->ctx_size = 0;
    o->batch_size = 64;
    o->body_limit = 1 << 20;
    o->queue_limit = 64;
    o->shutdown_grace_ms = 5000;
    o->max_connections = 256;
    o->idle_timeout_s = 15;
    o->header_timeout_s = 10;
    o->body_timeout_s = 60;
    o->cors_origin = "*";
    const char *ctk = NULL, *ctv = NULL;

    /* llama-server's two-letter short option -np */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-np"))
            argv[i] = "--parallel";

    enum {
        O_DEVICE = 256,
        O_HOST,
        O_PORT,
        O_KEY,
        O_PREC,
        O_CTK,
        O_CTV,
        O_FMT,
        O_BODY,
        O_QUEUE,
        O_GRACE,
        O_BATCH_INV,
        O_EPREB,
        O_MKEY,
        O_CORS,
        O_MAXCONN,
        O_IDLE,
        O_HDR,
        O_BODYT,
        O_EXITLOSS,
        O_NOPC
    };
    static const struct option lo[] = {{"checkpoint", required_argument, 0, 'm'},
                                       {"model", required_argument, 0, 'm'},
                                       {"device", required_argument, 0, O_DEVICE},
                                       {"host", required_argument, 0, O_HOST},
                                       {"port", required_argument, 0, O_PORT},
                                       {"parallel", required_argument, 0, 'P'},
                                       {"ctx-size", required_argument, 0, 'c'},
                                       {"batch-size", required_argument, 0, 'b'},
                                       {"api-key", required_argument, 0, O_KEY},
                                       {"precision", required_argument, 0, O_PREC},
                                       {"cache-type-k", required_argument, 0, O_CTK},
                                       {"cache-type-v", required_argument, 0, O_CTV},
                                       {"alias", required_argument, 0, 'a'},
                                       {"chat-format", required_argument, 0, O_FMT},
                                       {"body-limit", required_argument, 0, O_BODY},
                                       {"queue-limit", required_argument, 0, O_QUEUE},
                                       {"shutdown-timeout", required_argument, 0, O_GRACE},
                                       {"batch-invariant", no_argument, 0, O_BATCH_INV},
                                       {"ep-rebalance", required_argument, 0, O_EPREB},
                                       {"metrics-key", required_argument, 0, O_MKEY},
                                       {"cors-origin", required_argument, 0, O_CORS},
                                       {"max-connections", required_argument, 0, O_MAXCONN},
                                       {"idle-timeout", required_argument, 0, O_IDLE},
                                       {"header-timeout", required_argument, 0, O_HDR},
                                       {"body-timeout", required_argument, 0, O_BODYT},
                                       {"exit-on-device-loss", no_argument, 0, O_EXITLOSS},
                                       {"no-prefix-cache", no_argument, 0, O_NOPC},
                                       {"verbose", no_argument, 0, 'v'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int c;
    long long ll;
    int iv;
    while ((c = getopt_long(argc, argv, "m:c:b:a:vh", lo, NULL)) != -1) {
        switch (c) {
        case 'm':
            o->checkpoint = optarg;
            break;
        case O_DEVICE:
            o->device = optarg;
            break;
        case O_HOST:
            o->host = optarg;
            break;
        case O_EPREB:
            if (txc_opt_int(prog, "--ep-rebalance", optarg, 0, INT32_MAX, "0 = off",
                            &o->ep_rebalance))
                return 2;
            break;
        case O_PORT:
            if (txc_opt_int(prog, "--port", optarg, 0, 65535, "0 = any free port", &o->port))
                return 2;
            break;
        case 'P':
            if (txc_opt_int(prog, "--parallel", optarg, 1, SRV_MAX_PARALLEL, NULL, &o->parallel))
                return 2;
            break;
        case 'c':
            if (txc_opt_int(prog, "--ctx-size", optarg, 0, 1 << 20, "0 = 4096 or the model's",
                            &o->ctx_size))
                return 2;
            break;
        case 'b':
            if (txc_opt_int(prog, "--batch-size", optarg, 2, 8192, NULL, &o->batch_size))
                return 2;
            break;
        case O_KEY:
            if (!*optarg)
                return txc_usage_error(prog, usage, "--api-key: the key is empty");
            o->api_key = optarg;
            break;
        case O_PREC:
            o->precision = optarg;
            break;
        case O_CTK:
            ctk = optarg;
            break;
        case O_CTV:
            ctv = optarg;
            break;
        case O_BATCH_INV:
            o->batch_invariant = 1;
            break;
        case 'a':
            o->alias = optarg;
            break;
        case O_FMT:
            o->chat_format = optarg;
            break;
        case O_BODY:
            if (txc_opt_long(prog, "--body-limit", optarg, 64, 1LL << 30, NULL, &ll))
                return 2;
            o->body_limit = (size_t)ll;
            break;
        case O_QUEUE:
            if (txc_opt_int(prog, "--queue-limit", optarg, 0, 4096, NULL, &o->queue_limit))
                return 2;
            break;
        case O_GRACE:
            if (txc_opt_int(prog, "--shutdown-timeout", optarg, 0, 3600, NULL, &iv))
                return 2;
            o->shutdown_grace_ms = iv * 1000;
            break;
        case O_MKEY:
            if (!*optarg)
                return txc_usage_error(prog, usage, "--metrics-key: the key is empty");
            o->metrics_key = optarg;
            break;
        case O_CORS:
            if (!*optarg)
                return txc_usage_error(prog, usage, "--cors-origin: empty (use 'none')");
            o->cors_origin = optarg;
            break;
        case O_MAXCONN:
            if (txc_opt_int(prog, "--max-connections", optarg, 8, 65536, NULL,
                            &o->max_connections))
                return 2;
            break;
        case O_IDLE:
        case O_HDR:
        case O_BODYT: {
            const char *nm = c == O_IDLE ? "--idle-timeout"
                             : c == O_HDR ? "--header-timeout"
                                          : "--body-timeout";
            if (txc_opt_int(prog, nm, optarg, 1, 86400, NULL, &iv))
                return 2;
            *(c == O_IDLE ? &o->idle_timeout_s
              : c == O_HDR ? &o->header_timeout_s
                           : &o->body_timeout_s) = iv;
            break;
        }
        case O_EXITLOSS:
            o->exit_on_device_loss = 1;
            break;
        case O_NOPC:
            o->no_prefix_cache = 1;
            break;
        case 'v':
            o->verbose = 1;
            break;
        default:
            return txc_help_or_usage(c, usage);
        }
    }
    if (optind < argc)
        return txc_usage_error(prog, usage, "unexpected argument '%s'", argv[optind]);
    if (!o->checkpoint)
        return txc_usage_error(prog, usage, "--checkpoint MODEL.smd is required");
    int cache_k = GLM_CACHE_DEFAULT, cache_v = GLM_CACHE_DEFAULT;
    if (ctk && (cache_k = glm_cache_type_parse(ctk)) < 0)
        return txc_usage_error(prog, usage,
                               "--cache-type-k: '%s' is not f32, f16, bf16, q8_0 or q4_0", ctk);
    if (ctv && (cache_v = glm_cache_type_parse(ctv)) < 0)
        return txc_usage_error(prog, usage,
                               "--cache-type-v: '%s' is not f32, f16, bf16, q8_0 or q4_0", ctv);
    int fmt = 0;
    if (o->chat_format && (fmt = tx_chat_format_from_name(o->chat_format)) < 0)
        return txc_usage_error(
            prog, usage, "--chat-format: '%s' is not glm4, glm4.5, glm4.7 or glm5", o->chat_format);

    o->cache_k = cache_k;
    o->cache_v = cache_v;
    o->chat_fmt = fmt;
    o->plan = o->precision;
    if (o->precision) { /* checked before anything is opened */
        glm_precision_plan_t plan;
        if (glm_plan_parse(o->precision, &plan)) {
            fprintf(stderr, "%s: --precision: %s\n", prog, tx_last_error());
            return 2;
        }
    }
    /* requests answered at once are bounded by the slots and the queue:
     * keep room beside them for /health, /metrics and new clients */
    int busy_max = o->parallel + o->queue_limit;
    if (o->max_connections < busy_max + 16)
        return txc_usage_error(prog, usage,
                               "--max-connections %d: at least --parallel + --queue-limit + 16 "
                               "(%d) are needed",
                               o->max_connections, busy_max + 16);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)o->max_connections + 128) {
        rlim_t want = (rlim_t)o->max_connections + 128;
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < want)
            return txc_usage_error(prog, usage,
                                   "--max-connections %d: the open-file limit is %llu (ulimit -n)",
                                   o->max_connections, (unsigned long long)rl.rlim_cur);
    }

    /* signals: handled by sigwait in this thread only; every thread started
     * from here on inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1); /* the scheduler: device lost, --exit-on-device-loss */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    S->main_thread = pthread_self();
    pthread_mutex_init(&S->mu, NULL);
    pthread_cond_init(&S->cv, NULL);
    pthread_rwlock_init(&S->model_lock, NULL);

    double t0 = srv_now();
    if (dev_up(S, 1))
        return 1;
    const struct glm_config *cfg = glm_model_config(S->m);
    S->mx.started_wall = (long long)time(NULL);
    int rc = 1;
    if (sched_start(S))
        goto out;
    if (http_start(S)) {
        sched_stop(S);
        goto out;
    }
    {
        struct glm_model_info mi;
        glm_model_info(S->m, &mi);
        char pb[200];
        glm_precision_plan_t plan;
        glm_plan_golden(&plan);
        if (o->precision)
            glm_plan_parse(o->precision, &plan);
        fprintf(stderr,
                "%s: model %s (%s) loaded in %.0f ms; plan %s; %d slots x %d tokens of context "
                "(KV %.1f MiB); batch %d tokens per pass\n",
                prog, S->model_id, glm_arch_name(cfg->arch), (srv_now() - t0) * 1e3,
                glm_plan_format(&plan, pb, sizeof(pb)), o->parallel, o->ctx_size,
                mi.kv_bytes / 1048576.0, o->batch_size);
        fprintf(stderr, "%s: listening on http://%s:%d (pid %d)%s\n", prog, o->host, o->port,
                (int)getpid(), o->api_key ? ", API key required" : "");
    }
    int sig = 0;
    for (;;) {
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            fprintf(stderr, "%s: SIGHUP: reopening the device and reloading %s\n", prog,
                    o->checkpoint);
            pthread_mutex_lock(&S->mu);
            S->reload_requested = 1;
            pthread_cond_signal(&S->cv);
            pthread_mutex_unlock(&S->mu);
            continue;
        }
        break;
    }
    if (sig == SIGUSR1)
        fprintf(stderr, "%s: device lost (--exit-on-device-loss): exiting with status 3\n",
                prog);
    else
        fprintf(stderr,
                "%s: %s: no new connections; finishing the running requests (at most %d s)\n",
                prog, sig == SIGTERM ? "SIGTERM" : "SIGINT", o->shutdown_grace_ms / 1000);
    http_quiesce(S);
    sched_stop(S); /* every request done */
    http_stop(S);
    fprintf(stderr, "%s: %llu requests served (%llu tokens generated); device released\n", prog,
            (unsigned long long)S->mx.requests_ok, (unsigned long long)S->mx.completion_tokens);
    rc = sig == SIGUSR1 ? 3 : 0;
out:
    if (S->m)
        mdev_print_stats(prog, S->m);
    dev_down(S);
    return rc;
}
