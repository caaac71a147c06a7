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
            "      --api-key KEY        require 'Authorization: Bearer KEY' (not on /health)\n"
            "      --precision PLAN     precision plan (golden, fp32, mlp=int8,...; default\n"
            "                           golden)\n"
            "      --cache-type-k T     KV cache K type: f32, f16, bf16, q8_0, q4_0 (for MLA\n"
            "                           models: the latent cache; default: the plan's)\n"
            "      --cache-type-v T     KV cache V type (GQA models; ignored for MLA)\n"
            "  -a, --alias NAME         model id in the API (default: the package's name)\n"
            "      --chat-format F      render with libtx's C format F (glm4, glm4.5, glm4.7,\n"
            "                           glm5, qwen3, deepseek3, deepseek3.1) instead of the\n"
            "                           package's chat_template (the default)\n"
            "      --chat-template NAME the same as --chat-format NAME (llama.cpp's option)\n"
            "      --chat-template-file FILE  render with this Jinja chat template (a .jinja,\n"
            "                           or a tokenizer_config.json) instead of the package's\n"
            "      --body-limit BYTES   largest request body (default 1048576; 413 beyond)\n"
            "      --queue-limit N      requests waiting for a slot (default 64; 503 beyond)\n"
            "      --shutdown-timeout S on SIGTERM, seconds to let running requests finish\n"
            "                           before they are stopped (default 5)\n"
            "      --batch-invariant    batch-invariant device jobs: each request's logits\n"
            "                           are bit-identical whatever the batch (slower\n"
            "                           single-token decode; docs/libtx-glm.md)\n"
            "  -v, --verbose            log every request and libmicrohttpd's errors\n"
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
        O_TMPLFILE,
        O_BODY,
        O_QUEUE,
        O_GRACE,
        O_BATCH_INV,
        O_EPREB
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
                                       {"chat-template", required_argument, 0, O_FMT},
                                       {"chat-template-file", required_argument, 0, O_TMPLFILE},
                                       {"body-limit", required_argument, 0, O_BODY},
                                       {"queue-limit", required_argument, 0, O_QUEUE},
                                       {"shutdown-timeout", required_argument, 0, O_GRACE},
                                       {"batch-invariant", no_argument, 0, O_BATCH_INV},
                                       {"ep-rebalance", required_argument, 0, O_EPREB},
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
        case O_TMPLFILE:
            o->chat_template_file = optarg;
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
            prog, usage,
            "--chat-format: '%s' is not glm4, glm4.5, glm4.7, glm5, qwen3, deepseek3 or deepseek3.1",
            o->chat_format);
    if (o->chat_format && o->chat_template_file)
        return txc_usage_error(prog, usage,
                               "--chat-format and --chat-template-file: give one of them");

    /* signals: handled by sigwait in this thread only; every thread started
     * from here on inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    int rc = 1;
    if (mdev_open(prog, o->device, S->devs, GLM_EP_MAX_DEVICES, &S->n_devs))
        return 1;
    S->dev = S->devs[0];
    glm_precision_plan_t plan;
    glm_plan_golden(&plan);
    if (o->precision && glm_plan_parse(o->precision, &plan)) {
        fprintf(stderr, "%s: --precision: %s\n", prog, tx_last_error());
        mdev_close(S->devs, S->n_devs);
        return 2;
    }
    for (int i = 0; i < S->n_devs; i++)
        if (glm_plan_set(S->devs[i], &plan)) {
            fprintf(stderr, "%s: precision: %s\n", prog, tx_last_error());
            goto out;
        }
    double t0 = srv_now();
    struct glm_load_options lopt;
    memset(&lopt, 0, sizeof(lopt));
    if (o->batch_invariant)
        lopt.flags |= GLM_LOAD_BATCH_INVARIANT;
    /* several devices: every expert its own group, balanced by size */
    /* device 0 keeps room for every slot's KV cache (allocated after the load) */
    uint64_t kv_reserve =
        S->n_devs > 1 ? mdev_kv_reserve(o->checkpoint, o->parallel, o->ctx_size, cache_k, cache_v)
                      : 0;
    if (mdev_load(S->devs, S->n_devs, o->checkpoint, &lopt, 0, kv_reserve, &S->m)) {
        fprintf(stderr, "%s: cannot load %s: %s\n", prog, o->checkpoint, tx_last_error());
        goto out;
    }
    const struct glm_config *cfg = glm_model_config(S->m);
    S->tok = glm_model_tokenizer(S->m);
    if (!S->tok) {
        fprintf(stderr, "%s: %s has no usable tokenizer; the server needs one\n", prog,
                o->checkpoint);
        goto out;
    }
    if ((cache_k || cache_v) &&
        glm_model_set_cache_types(S->m, (glm_cache_type_t)cache_k, (glm_cache_type_t)cache_v)) {
        fprintf(stderr, "%s: --cache-type-k/-v: %s\n", prog, tx_last_error());
        rc = 2;
        goto out_model;
    }
    if (fmt)
        glm_model_set_chat_format(S->m, fmt);
    else if (srv_chat_template_load(S, prog))
        goto out_model;
    S->vocab = cfg->vocab_size;
    S->sample_vocab = glm_model_sample_vocab(S->m);
    S->n_stop_ids = glm_model_stop_tokens(S->m, S->stop_ids, 16);
    if (S->n_stop_ids > 16)
        S->n_stop_ids = 16;
    struct tx_device_info di;
    S->max_topk = tx_device_info(S->dev, &di) == 0 && di.max_topk ? (int)di.max_topk : 4096;
    int max_ctx = cfg->max_position_embeddings > 0 ? cfg->max_position_embeddings : 4096;
    if (!o->ctx_size)
        o->ctx_size = max_ctx < 4096 ? max_ctx : 4096;
    if (o->ctx_size > max_ctx) {
        fprintf(stderr, "%s: --ctx-size %d exceeds the model's max_position_embeddings %d\n", prog,
                o->ctx_size, max_ctx);
        rc = 2;
        goto out;
    }
    snprintf(S->model_id, sizeof(S->model_id), "%s", o->alias ? o->alias : glm_model_name(S->m));
    pthread_mutex_init(&S->mu, NULL);
    pthread_cond_init(&S->cv, NULL);
    S->mx.started_wall = (long long)time(NULL);
    if (sched_start(S))
        goto out_sessions;
    if (http_start(S)) {
        sched_stop(S);
        goto out_model;
    }
    {
        struct glm_model_info mi;
        glm_model_info(S->m, &mi);
        char pb[200];
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
    while (sigwait(&set, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
        ;
    fprintf(stderr, "%s: %s: no new connections; finishing the running requests (at most %d s)\n",
            prog, sig == SIGTERM ? "SIGTERM" : "SIGINT", o->shutdown_grace_ms / 1000);
    http_quiesce(S);
    sched_stop(S); /* every request done, sessions freed */
    http_stop(S);
    fprintf(stderr, "%s: %llu requests served (%llu tokens generated); device released\n", prog,
            (unsigned long long)S->mx.requests_ok, (unsigned long long)S->mx.completion_tokens);
    rc = 0;
    goto out_model;
out_sessions:
    for (int i = 0; i < o->parallel; i++)
        if (S->slots[i].s)
            glm_session_free(S->slots[i].s);
out_model:
    txc_chat_template_free(S->ct);
    S->ct = NULL;
    mdev_print_stats(prog, S->m);
    glm_model_free(S->m);
    S->m = NULL;
out:
    if (S->m)
        glm_model_free(S->m);
    mdev_close(S->devs, S->n_devs);
    return rc;
}
