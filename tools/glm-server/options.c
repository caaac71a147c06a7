/* SPDX-License-Identifier: MIT */
/*
 * glm-server's options: the usage text, the command line into struct
 * srv_opts (llama-server's spellings, common/llama_flags.h) and the checks
 * that need no device, the package's config included (docs/glm-server.md).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tx/tx.h>
#include <tx-internal/tx_analyze.h>

#include "common/cli.h"
#include "common/llama_flags.h"
#include "server.h"

static const char *prog = "glm-server";

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
            "      --spec-type mtp      speculative decoding with the package's MTP layer:\n"
            "                           each slot drafts, one pass verifies every slot\n"
            "      --draft-max N        tokens drafted per slot and pass (1..8, default 3)\n"
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
            "      --no-prefix-cache    no prefix reuse: a slot's KV is forgotten when its\n"
            "                           request ends and no KV block is stored (default: a\n"
            "                           new request reuses the slot sharing the longest\n"
            "                           prompt prefix and the stored blocks of its prompt;\n"
            "                           a request's \"cache_prompt\": false for that request)\n"
            "  -cram, --cache-ram MIB   host memory for the prefix cache's KV blocks, least\n"
            "                           recently used evicted (default 8192; -1: no limit;\n"
            "                           0: no blocks, slot reuse only)\n"
            "      --slot-save-path DIR POST /slots/{id}?action=save|restore|erase: slots'\n"
            "                           KV caches to and from files in DIR (default: off)\n"
            "      --no-slots           GET /slots answers 501\n"
            "      --exit-on-device-loss  exit with status 3 when the device is lost (for a\n"
            "                           supervisor) instead of reopening it once a second\n"
            "      --rank-timeout S     under mpirun: a device pass waiting longer than S s\n"
            "                           for the other ranks ends the job (status 3); 0 =\n"
            "                           wait forever (default 300)\n"
            "      --precision PLAN     precision plan (golden, fp32, mlp=int8,...; default\n"
            "                           golden)\n"
            "      --cache-type-k T     KV cache K type: f32, f16, bf16, q8_0, q4_0 (for MLA\n"
            "                           models: the latent cache; default: the plan's)\n"
            "      --cache-type-v T     KV cache V type (GQA models; ignored for MLA)\n"
            "  -a, --alias NAME[,NAME]  model id in the API (default: the package's name);\n"
            "                           requests naming another model get a 404\n"
            "      --chat-format F      render with libtx's C format F (glm4, glm4.5, glm4.7,\n"
            "                           glm5, qwen3, deepseek3, deepseek3.1) instead of the\n"
            "                           package's chat_template (the default)\n"
            "      --chat-template NAME the same as --chat-format NAME (llama.cpp's option)\n"
            "      --chat-template-file FILE  render with this Jinja chat template (a .jinja,\n"
            "                           or a tokenizer_config.json) instead of the package's\n"            "      --body-limit BYTES   largest request body (default 1048576; 413 beyond)\n"
            "      --queue-limit N      requests waiting for a slot (default 64; 503 beyond)\n"
            "      --shutdown-timeout S on SIGTERM, seconds to let running requests finish\n"
            "                           before they are stopped (default 5)\n"
            "      --batch-invariant    batch-invariant device jobs: each request's logits\n"
            "                           are bit-identical whatever the batch (slower\n"
            "                           single-token decode; docs/libtx-glm.md)\n"
            "  -v, --verbose            log every request and libmicrohttpd's errors\n"
            "  -h, --help               this text\n"
            "\n"
            "Signals: SIGTERM/SIGINT finish the running requests and exit; SIGHUP reopens\n"
            "the device and reloads the package.\n",
            SRV_MAX_PARALLEL);
}

int srv_parse_options(struct srv_opts *o, int *cache_k, int *cache_v, int *fmt, int argc,
                      char **argv)
{
    o->host = "127.0.0.1";
    o->port = 8080;
    o->rank_timeout_s = 300;
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
    o->cache_ram_mib = 8192;
    const char *ctk = NULL, *ctv = NULL;

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
        O_RANKTMO,
        O_NOPC,
        O_TMPLFILE,
        O_SLOTPATH,
        O_NOSLOTS,
        O_SPEC,
        O_DRAFT,
        O_CRAM
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
                                       {"spec-type", required_argument, 0, O_SPEC},
                                       {"draft-max", required_argument, 0, O_DRAFT},
                                       {"metrics-key", required_argument, 0, O_MKEY},
                                       {"cors-origin", required_argument, 0, O_CORS},
                                       {"max-connections", required_argument, 0, O_MAXCONN},
                                       {"idle-timeout", required_argument, 0, O_IDLE},
                                       {"header-timeout", required_argument, 0, O_HDR},
                                       {"body-timeout", required_argument, 0, O_BODYT},
                                       {"exit-on-device-loss", no_argument, 0, O_EXITLOSS},
                                       {"rank-timeout", required_argument, 0, O_RANKTMO},
                                       {"no-prefix-cache", no_argument, 0, O_NOPC},
                                       {"cache-ram", required_argument, 0, O_CRAM},
                                       {"chat-template-file", required_argument, 0, O_TMPLFILE},
                                       {"slot-save-path", required_argument, 0, O_SLOTPATH},
                                       {"no-slots", no_argument, 0, O_NOSLOTS},
                                       {"verbose", no_argument, 0, 'v'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    /* llama-server's spellings (-np, -ctk, ...) and its no-ops (-ngl, -fa, ...) */
    static const struct txc_llama_flag srv_llama[] = {
        {"-np", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--parallel"},
        {"-ctk", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--cache-type-k"},
        {"-ctv", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--cache-type-v"},
        {"-dev", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--device"},
        {"-cram", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--cache-ram"},
        {"--chat-template", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--chat-format"},
        {"-t|--threads|-s|--seed|-n|--n-predict|--predict", TXC_LLAMA_NOOP, TXC_LLAMA_REQUIRED,
         "each request's own fields decide (seed, max_tokens); host threads only prepare "
         "device commands"},
        {"--metrics|--slots|--props|--no-webui", TXC_LLAMA_NOOP, TXC_LLAMA_NONE,
         "/metrics, /slots and /health are served by default; there is no web UI"},
        {"--threads-http|-sps|--slot-prompt-similarity", TXC_LLAMA_NOOP, TXC_LLAMA_REQUIRED,
         "libmicrohttpd's threads serve HTTP; slots take requests in order"},
        {"--draft-p-min", TXC_LLAMA_UNSUPPORTED, TXC_LLAMA_REQUIRED,
         "the batched drafts of --spec-type mtp are not cut by probability (glm-inference's "
         "are)"},
        {NULL, 0, 0, NULL},
    };
    int c = txc_llama_flags(prog, &argc, argv, "m:c:b:a:vh", lo, srv_llama);
    if (c >= 0)
        return c;
    long long ll;
    int iv;
    while ((c = txc_getopt(prog, argc, argv, "m:c:b:a:vh", lo)) != -1) {
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
        case O_SPEC:
            if (strcmp(optarg, "mtp") && strcmp(optarg, "draft-mtp") && strcmp(optarg, "none"))
                return txc_usage_error(prog, usage, "--spec-type: '%s' is not mtp or none",
                                       optarg);
            o->spec_mtp = strcmp(optarg, "none") != 0;
            break;
        case O_DRAFT:
            if (txc_opt_int(prog, "--draft-max", optarg, 1, GLM_SPEC_MAX_DRAFT, NULL,
                            &o->draft_max))
                return 2;
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
            const char *nm = c == O_IDLE  ? "--idle-timeout"
                             : c == O_HDR ? "--header-timeout"
                                          : "--body-timeout";
            if (txc_opt_int(prog, nm, optarg, 1, 86400, NULL, &iv))
                return 2;
            *(c == O_IDLE  ? &o->idle_timeout_s
              : c == O_HDR ? &o->header_timeout_s
                           : &o->body_timeout_s) = iv;
            break;
        }
        case O_EXITLOSS:
            o->exit_on_device_loss = 1;
            break;
        case O_RANKTMO:
            if (txc_opt_int(prog, "--rank-timeout", optarg, 0, 86400, "0 = wait forever",
                            &o->rank_timeout_s))
                return 2;
            break;
        case O_NOPC:
            o->no_prefix_cache = 1;
            break;
        case O_CRAM:
            if (txc_opt_long(prog, "--cache-ram", optarg, -1, 1LL << 40, NULL, &ll))
                return 2;
            o->cache_ram_mib = ll;
            break;
        case O_TMPLFILE:
            o->chat_template_file = optarg;
            break;
        case O_SLOTPATH: {
            struct stat st;
            if (stat(optarg, &st) || !S_ISDIR(st.st_mode) || access(optarg, W_OK | R_OK))
                return txc_usage_error(prog, usage,
                                       "--slot-save-path %s: not a readable, writable directory",
                                       optarg);
            o->slot_save_path = optarg;
            break;
        }
        case O_NOSLOTS:
            o->no_slots = 1;
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
    *cache_k = GLM_CACHE_DEFAULT;
    *cache_v = GLM_CACHE_DEFAULT;
    if (ctk && (*cache_k = glm_cache_type_parse(ctk)) < 0)
        return txc_usage_error(prog, usage,
                               "--cache-type-k: '%s' is not f32, f16, bf16, q8_0 or q4_0", ctk);
    if (ctv && (*cache_v = glm_cache_type_parse(ctv)) < 0)
        return txc_usage_error(prog, usage,
                               "--cache-type-v: '%s' is not f32, f16, bf16, q8_0 or q4_0", ctv);
    *fmt = 0;
    if (o->chat_format && (*fmt = tx_chat_format_from_name(o->chat_format)) < 0)
        return txc_usage_error(
            prog, usage,
            "--chat-format: '%s' is not glm4, glm4.5, glm4.7, glm5, qwen3, deepseek3 or deepseek3.1",
            o->chat_format);
    if (o->chat_format && o->chat_template_file)
        return txc_usage_error(prog, usage,
                               "--chat-format and --chat-template-file: give one of them");

    if (o->precision) {
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

    /* before the device and the load: the package's config (--ctx-size
     * against its max_position_embeddings) */
    {
        struct glm_config pc;
        const char *pfmt = NULL;
        char perr[512];
        if (tx_analyze_load_config(o->checkpoint, &pc, &pfmt, perr, sizeof(perr))) {
            fprintf(stderr, "%s: cannot load the package: %s\n", prog, perr);
            return 1;
        }
        if (pc.max_position_embeddings > 0 && o->ctx_size > pc.max_position_embeddings) {
            fprintf(stderr, "%s: --ctx-size %d exceeds the model's max_position_embeddings %d\n",
                    prog, o->ctx_size, pc.max_position_embeddings);
            return 2;
        }
    }
    return -1;
}
