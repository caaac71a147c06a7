/* SPDX-License-Identifier: MIT */
/*
 * glm-inference's options: the usage text, the defaults, the command line
 * into struct opts, and the checks that need no device
 * (docs/glm-inference.md).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tx-internal/tx_analyze.h>

#include "common/cli.h"
#include "common/llama_flags.h"
#include "bench_output.h"
#include "glm_inference.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: %s --checkpoint MODEL.smd [options]\n"
        "\n"
        "Generation (llama.cpp-style):\n"
        "  -p, --prompt TEXT        prompt text\n"
        "  -f, --file FILE          read the prompt from FILE\n"
        "      --tokens 1,2,3       prompt as raw token ids\n"
        "  -n, --n-predict N        tokens to generate (default 128, -1 = until a stop "
        "token)\n"
        "  -c, --ctx-size N         context size (default 4096 or the model's maximum)\n"
        "  -b, --batch-size N       most tokens per device pass (default 512)\n"
        "  -s, --seed N             sampling seed (default -1 = from the OS, printed)\n"
        "      --temp T             temperature (default 0.8 or the package's\n"
        "                           generation_config.json; 0 = greedy)\n"
        "      --top-k N            top-k (default 40 or generation_config.json's, 0 = off)\n"
        "      --top-p P            top-p (default 0.95 or generation_config.json's, 1 = off)\n"
        "      --min-p P            min-p (default 0.05, 0 = off)\n"
        "      --repeat-penalty R   repetition penalty (default 1.0 = off)\n"
        "      --presence-penalty P presence penalty (default 0.0 = off)\n"
        "      --frequency-penalty F frequency penalty (default 0.0 = off)\n"
        "      --repeat-last-n N    ids the penalties look back (default 64; 0 = off,\n"
        "                           -1 = the context up to 4096)\n"
        "      --samplers LIST      sampler order, llama.cpp's names separated by ';':\n"
        "                           top_k;top_p;min_p;temperature (default, llama.cpp) or\n"
        "                           temperature;top_k;top_p;min_p (transformers);\n"
        "                           penalties always come first\n"
        "      --sampler-order NAME llama (default) or temp-first, the same two orders\n"
        "      --chat               apply the GLM chat template to the prompt (a user "
        "turn)\n"
        "      --system TEXT        with --chat: a system message\n"
        "      --chat-template-format NAME  (or --chat-template NAME) the chat format:\n"
        "                           glm4, glm4.5 (= glm4.6), glm4.7 (= glm5, glm5.1),\n"
        "                           qwen3 (= chatml), deepseek3, deepseek3.1;\n"
        "                           default: the package's own chat_template (Jinja)\n"
        "      --chat-template-file FILE  render with this Jinja template (a .jinja, or a\n"
        "                           tokenizer_config.json) instead of the package's\n"
        "      --no-think           with --chat: thinking disabled\n"
        "      --ignore-eos         never sample the stop tokens (-inf logit bias)\n"
        "      --spec-type mtp      speculative decoding with the package's MTP layer\n"
        "      --draft-max N        tokens drafted per step (1..8, default 3 with --spec-type)\n"
        "      --draft-p-min P      drop a draft the MTP layer gives a probability below P\n"
        "                           and end the step's drafts (default 0.1, 0 = off)\n"
        "      --spec-test MODE     test drafts: perfect (the model's own choice), wrong\n"
        "      --bench-spec LIST    tg with --spec-type mtp at each draft size of LIST vs\n"
        "                           without, side by side, at --bench-depth (default 0,2048)\n"
        "                           on the text of -f/-p, --bench-tg tokens, --bench-reps\n"
        "      --grammar GBNF       constrain the text to a GBNF grammar (llama.cpp's)\n"
        "      --grammar-file FILE  ... read from FILE\n"
        "      --attn-mask FILE     custom attention mask of the prompt (JSON: spans, table\n"
        "                           cells or rows of token ranges; docs/glm-inference.md)\n"
        "  -j, --json-schema JSON   constrain the text to JSON valid for this schema\n"
        "      --json-schema-file FILE  ... read from FILE\n"
        "      --no-display-prompt  do not echo the prompt\n"
        "  -i, --interactive        chat (llama-cli's -cnv): on a terminal, or one message a\n"
        "                           line from a pipe ('\\' at the end continues the line);\n"
        "                           /exit, /regen, /clear; Ctrl-C stops a reply\n"
        "  -t, --threads N          host threads (reference, bandwidth probe)\n"
        "\n"
        "Device and precision:\n"
        "      --device SPEC        device (emu:/path.sock, /dev/accel/accelN; default "
        "$TX_DEVICE)\n"
        "                           SPEC,SPEC,...: one model on several devices, the routed\n"
        "                           experts split across them (docs/multi-device.md)\n"
        "      --ep-rebalance N     several devices: place the experts again by the live\n"
        "                           load counters every N generated tokens (0: off)\n"
        "      --precision PLAN     e.g. golden, fp32, mlp=int8,attention=fp16 (default "
        "golden)\n"
        "      --moe-config FILE    expert parallel YAML (default "
        "config/expert_parallel.yaml if present)\n"
        "      --no-moe-config      do not read the default YAML\n"
        "      --load-balance MODE  off, on or auto (expert load penalty)\n"
        "      --lambda X           load penalty factor (default 0.2)\n"
        "      --name NAME          model name for device memory labels\n"
        "      --stream             stream the layers through device-side slots with "
        "prefetch\n"
        "      --max-weight-mem SIZE  stream the layers when the weights exceed SIZE "
        "(e.g. 512M)\n"
        "      --no-verify          skip the per-tensor CRC32C checks at load\n"
        "      --expert-cache SIZE  routed experts in an expert cache of SIZE (default when\n"
        "                           the model does not fit: free memory less a reserve)\n"
        "      --expert-policy P    lrfu (frequency + recency, default) or lru\n"
        "      --no-prefetch        no predicted expert prefetch\n"
        "      --bench-cache        expert cache vs resident vs --stream decode (tg rows)\n"
        "      --bench-cache-frac F cache size as a fraction of the routed experts (0.25)\n"
        "                           ($TX_BENCH_CACHE_MODES: a subset of resident,layers,lru,lrfu)\n"
        "      --batch-invariant    batch-invariant device jobs: a session's logits are\n"
        "                           bit-identical whatever the batch (slower single-token\n"
        "                           decode; also TX_BATCH_INVARIANT=1)\n"
        "\n"
        "Outputs and checks:\n"
        "      --verify             check every checksum of the package and exit (no "
        "device)\n"
        "      --logits FILE        write the prompt's logits (float32 LE [T x vocab])\n"
        "      --validate           100 random inputs vs the original model (FP32 reference)\n"
        "      --validate-inputs N  inputs (default 100)\n"
        "      --validate-tokens N  tokens per input (default 8)\n"
        "      --validate-seed N    input seed\n"
        "      --validate-file FILE the inputs from this text instead of random ids:\n"
        "                           consecutive windows of --validate-tokens tokens\n"
        "      --original DIR|FILE  the original checkpoint to validate against (default:\n"
        "                           the source the package records, if its hash matches)\n"
        "      --no-original        measure the device arithmetic only\n"
        "      --bench              llama-bench: for each plan and depth, a prefill of each\n"
        "                           -p size, -n decode passes, each -pg pair, -r times;\n"
        "                           with --bench, -p LIST and -n LIST are llama-bench's\n"
        "                           (default 512 and 128; 0 = none)\n"
        "      -pg PP,TG            (--bench-pg) a prefill then TG decode passes, timed\n"
        "                           together (repeatable)\n"
        "  -r, --repetitions N      --bench samples per test (default 5): mean +- sd\n"
        "  -o, --bench-output F     --bench rows as md (default), csv, json or jsonl with\n"
        "                           llama-bench's field names\n"
        "      --bench-plans LIST   plans separated by ';' (default golden;fp32;fp16;int8)\n"
        "      --bench-pp N         = -p N under --bench\n"
        "      --bench-tg N         = -n N under --bench\n"
        "  -d, --bench-depth LIST   with --bench: every test after LIST cached tokens\n"
        "                           (llama-bench -d); without it, the depth table:\n"
        "                           pp/tg rows after LIST cached tokens (e.g. 0,2048,8192)\n"
        "                           under --precision; KV bytes/token\n"
        "      --bench-reps N       -r; for the depth table alone: rounds (default 1), each\n"
        "                           running every depth in turn; medians, ratio ranges\n"
        "      --cache-type-k T     (--ctk) KV cache K type: f32, f16, bf16, q8_0 (int8),\n"
        "                           q4_0 (4-bit); default from the plan; MLA: the latent\n"
        "      --cache-type-v T     (--ctv) V type (GQA; MLA has no V cache: ignored)\n"
        "      --expert-stats       per-expert load histogram and utilisation std\n"
        "      --memory-view        print the device's memory view while loaded\n"
        "  -v, --verbose            more logs\n"
        "  -h, --help\n"
        "\n"
        "TX_DEBUG=1 prints every device command and per-layer statistics to stderr.\n",
        prog);
    fprintf(f, "\nArchitectures (config.json architectures[0], model_type):\n%s",
            glm_arch_supported());
}

/* llama-cli's and llama-bench's spellings of glm-inference's options, and
 * what glm-inference alone ignores (common/llama_flags.h has the rest;
 * docs/llama-cpp-flags.md the table) */
static const struct txc_llama_flag gi_llama[] = {
    {"-sys|--system-prompt", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--system"},
    {"-cnv|--conversation", TXC_LLAMA_ALIAS, TXC_LLAMA_NONE, "--interactive"},
    {"-st|--single-turn", TXC_LLAMA_ALIAS, TXC_LLAMA_NONE, "--chat"},
    {"-ctk", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--cache-type-k"},
    {"-ctv", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--cache-type-v"},
    {"--predict", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--n-predict"},
    {"-dev", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--device"},
    {"--verbose-prompt", TXC_LLAMA_ALIAS, TXC_LLAMA_NONE, "--verbose"},
    {"-r", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--repetitions"},
    {"-d|--n-depth", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--bench-depth"},
    {"-o|--output", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--bench-output"},
    {"-pg", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--bench-pg"},
    {"--n-prompt", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--prompt"},
    {"--n-gen", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--n-predict"},
    {"-embd", TXC_LLAMA_NOOP, TXC_LLAMA_REQUIRED,
     "llama-bench's embeddings mode: tests run as text generation"},
    {"-oe|--output-err", TXC_LLAMA_UNSUPPORTED, TXC_LLAMA_REQUIRED,
     "one format, on stdout (-o); the diagnostics go to stderr"},
    {"-no-cnv|--no-conversation", TXC_LLAMA_NOOP, TXC_LLAMA_NONE,
     "no conversation unless -i or -cnv"},
    {"-np|--parallel|-ns|--sequences", TXC_LLAMA_NOOP, TXC_LLAMA_REQUIRED,
     "glm-inference runs one sequence (glm-server -np serves several)"},
    {NULL, 0, 0, NULL},
};

#define OPTSTRING "m:p:f:n:c:b:s:t:j:ivh"

int parse_token_ids(const char *s, int32_t **ids, size_t *n)
{
    size_t cap = 64, k = 0;
    int32_t *v = malloc(cap * sizeof(*v));
    if (!v)
        return TX_ENOMEM;
    while (*s) {
        while (*s == ',' || *s == ' ' || *s == '\n' || *s == '\t')
            s++;
        if (!*s)
            break;
        char *end;
        errno = 0;
        long x = strtol(s, &end, 10);
        if (end == s || errno || x < 0 || x > 0x7fffffff) {
            free(v);
            return TX_EINVAL;
        }
        if (k == cap) {
            int32_t *y = realloc(v, cap * 2 * sizeof(*v));
            if (!y) {
                free(v);
                return TX_ENOMEM;
            }
            v = y;
            cap *= 2;
        }
        v[k++] = (int32_t)x;
        s = end;
    }
    *ids = v;
    *n = k;
    return 0;
}

/*
 * -p and -n: with --bench, llama-bench's lists of prompt and generation
 * sizes (default 512 and 128, or --bench-pp / --bench-tg); otherwise the
 * prompt and the count of tokens to generate. -r defaults to llama-bench's
 * 5 under --bench. -1: go on; else the exit status.
 */
static int bench_lists(struct opts *o)
{
    char e[200];
    if (!o->bench) {
        if (o->n_arg &&
            txc_opt_int(prog, "-n", o->n_arg, -1, INT_MAX,
                        "-1 = until a stop token or the context is full", &o->n_predict) < 0)
            return 2;
        return -1;
    }
    if (o->prompt) {
        if (bench_list_parse("-p", "prompt sizes >= 0 (llama-bench's -p under --bench)", o->prompt,
                             0, 1 << 20, o->bench_p, BENCH_LIST_MAX, &o->n_bench_p, e,
                             sizeof(e)) < 0) {
            fprintf(stderr, "%s: %s; try --help\n", prog, e);
            return 2;
        }
        o->prompt = NULL;
    } else {
        o->bench_p[0] = o->bench_pp;
        o->n_bench_p = 1;
    }
    if (o->n_arg) {
        if (bench_list_parse("-n", "generation sizes >= 0 (llama-bench's -n under --bench)",
                             o->n_arg, 0, 1 << 20, o->bench_n, BENCH_LIST_MAX, &o->n_bench_n, e,
                             sizeof(e)) < 0) {
            fprintf(stderr, "%s: %s; try --help\n", prog, e);
            return 2;
        }
    } else {
        o->bench_n[0] = o->bench_tg;
        o->n_bench_n = 1;
    }
    if (!o->bench_reps_set)
        o->bench_reps = 5;
    int any = o->n_bench_pg;
    for (int i = 0; i < o->n_bench_p; i++)
        any |= o->bench_p[i];
    for (int i = 0; i < o->n_bench_n; i++)
        any |= o->bench_n[i];
    if (!any) {
        fprintf(stderr, "%s: --bench: every -p and -n is 0 and no -pg: nothing to run; try --help\n", prog);
        return 2;
    }
    /* the first sizes for --bench-cache and --bench-depth's single values */
    for (int i = 0; i < o->n_bench_p; i++)
        if (o->bench_p[i]) {
            o->bench_pp = o->bench_p[i];
            break;
        }
    for (int i = 0; i < o->n_bench_n; i++)
        if (o->bench_n[i]) {
            o->bench_tg = o->bench_n[i];
            break;
        }
    return -1;
}

int bench_span(const struct opts *o)
{
    int span = 1, maxd = 0;
    for (int i = 0; i < o->n_bench_p; i++)
        span = o->bench_p[i] > span ? o->bench_p[i] : span;
    for (int i = 0; i < o->n_bench_n; i++)
        span = o->bench_n[i] > span ? o->bench_n[i] : span;
    for (int i = 0; i < o->n_bench_pg; i++)
        span = o->bench_pg[i][0] + o->bench_pg[i][1] > span ? o->bench_pg[i][0] + o->bench_pg[i][1]
                                                            : span;
    for (int i = 0; i < o->n_bench_depth; i++)
        maxd = o->bench_depth[i] > maxd ? o->bench_depth[i] : maxd;
    return maxd + span;
}

/*
 * What can be checked before a device is opened or the model loaded: the
 * package's config (-c against its max_position_embeddings), the prompt
 * (-f read now, an empty -p or file refused, --tokens parsed), the
 * precision plan, the MoE settings file and --load-balance. -1: go on;
 * else the exit status (2: a usage error, 1: a file that cannot be read).
 */
static int opts_check(struct opts *o)
{
    struct glm_config cfg;
    const char *fmt = NULL;
    char err[512];
    if (tx_analyze_load_config(o->checkpoint, &cfg, &fmt, err, sizeof(err))) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    if (cfg.max_position_embeddings > 0 && o->n_ctx > cfg.max_position_embeddings) {
        fprintf(stderr, "%s: -c %d: the model's context is at most %d (max_position_embeddings); try --help\n",
                prog, o->n_ctx, cfg.max_position_embeddings);
        return 2;
    }
    if (o->bench && cfg.max_position_embeddings > 0 &&
        bench_span(o) + 1 > cfg.max_position_embeddings) {
        fprintf(stderr,
                "%s: --bench: the deepest -d plus the largest test is %d positions; the model has "
                "%d (max_position_embeddings); try --help\n",
                prog, bench_span(o), cfg.max_position_embeddings);
        return 2;
    }
    int generates = !o->bench && !o->validate && !o->n_bench_depth && !o->bench_cache;
    if (generates && !o->prompt && !o->file && !o->tokens && !o->interactive &&
        isatty(STDIN_FILENO)) {
        fprintf(stderr, "%s: no prompt (-p, -f, --tokens, stdin or -i); try --help\n", prog);
        return 2;
    }
    if (o->prompt && !*o->prompt) {
        fprintf(stderr, "%s: -p: the prompt is empty; try --help\n", prog);
        return 2;
    }
    if (o->file) {
        if (txc_read_path(o->file, &o->file_text, NULL)) {
            fprintf(stderr, "%s: %s\n", prog, tx_last_error());
            return 1;
        }
        if (!*o->file_text) {
            fprintf(stderr, "%s: -f %s: the prompt is empty; try --help\n", prog, o->file);
            return 2;
        }
    }
    if (o->tokens) {
        int32_t *ids = NULL;
        size_t n = 0;
        int bad = parse_token_ids(o->tokens, &ids, &n) || !n;
        free(ids);
        if (bad) {
            fprintf(stderr, "%s: --tokens: expected comma-separated token ids; try --help\n", prog);
            return 2;
        }
    }
    glm_plan_golden(&o->plan);
    if (o->precision && glm_plan_parse(o->precision, &o->plan)) {
        fprintf(stderr, "%s: --precision: %s; try --help\n", prog, tx_last_error());
        return 2;
    }
    if (o->load_balance && strcmp(o->load_balance, "on") && strcmp(o->load_balance, "off") &&
        strcmp(o->load_balance, "auto")) {
        fprintf(stderr, "%s: --load-balance: expected on, off or auto; try --help\n", prog);
        return 2;
    }
    if (o->ep_rebalance > 0 && !glm_mpi_launched()) {
        const char *list = o->device ? o->device : getenv("TX_DEVICE");
        if (!list || !strchr(list, ',')) {
            fprintf(stderr, "%s: --ep-rebalance needs several devices (--device A,B,...); try --help\n", prog);
            return 2;
        }
    }
    struct glm_moe_options mo;
    glm_moe_defaults(&mo);
    if (o->moe_config && glm_moe_config_load(o->moe_config, &mo)) {
        fprintf(stderr, "%s: moe config: %s\n", prog, tx_last_error());
        return 1;
    }
    return -1;
}

enum {
    O_TOKENS = 1000,
    O_TEMP,
    O_TOPK,
    O_TOPP,
    O_CHAT,
    O_SYSTEM,
    O_NOTHINK,
    O_IGNEOS,
    O_SPECTYPE,
    O_DRAFTMAX,
    O_DRAFTPMIN,
    O_SPECTEST,
    O_BSPEC,
    O_GRAMMAR,
    O_GRAMMAR_FILE,
    O_ATTN_MASK,
    O_JSON_SCHEMA_FILE,
    O_NODISP,
    O_DEVICE,
    O_PREC,
    O_MOECFG,
    O_NOMOECFG,
    O_LB,
    O_LAMBDA,
    O_NAME,
    O_LOGITS,
    O_VALIDATE,
    O_VIN,
    O_VTOK,
    O_VSEED,
    O_VFILE,
    O_ORIGINAL,
    O_NOORIGINAL,
    O_BENCH,
    O_BPLANS,
    O_BPP,
    O_BTG,
    O_BDEPTH,
    O_BREPS,
    O_REPS,
    O_BOUT,
    O_BPG,
    O_CTK,
    O_CTV,
    O_ESTATS,
    O_MEMVIEW,
    O_CKPT,
    O_STREAM,
    O_MAXW,
    O_XCACHE,
    O_XPOLICY,
    O_NOPF,
    O_BCACHE,
    O_BCFRAC,
    O_VERIFY,
    O_NOVERIFY,
    O_BATCH_INVARIANT,
    O_MINP,
    O_REPPEN,
    O_PRESPEN,
    O_FREQPEN,
    O_REPLASTN,
    O_SAMPLERS,
    O_SORDER,
    O_CHATFMT,
    O_EPREB,
    O_TMPLFILE,
};

static const struct option lo[] = {
    {"ep-rebalance", required_argument, NULL, O_EPREB},
    {"checkpoint", required_argument, NULL, O_CKPT},
    {"model", required_argument, NULL, 'm'},
    {"prompt", required_argument, NULL, 'p'},
    {"file", required_argument, NULL, 'f'},
    {"tokens", required_argument, NULL, O_TOKENS},
    {"n-predict", required_argument, NULL, 'n'},
    {"ctx-size", required_argument, NULL, 'c'},
    {"batch-size", required_argument, NULL, 'b'},
    {"seed", required_argument, NULL, 's'},
    {"threads", required_argument, NULL, 't'},
    {"temp", required_argument, NULL, O_TEMP},
    {"top-k", required_argument, NULL, O_TOPK},
    {"top-p", required_argument, NULL, O_TOPP},
    {"min-p", required_argument, NULL, O_MINP},
    {"repeat-penalty", required_argument, NULL, O_REPPEN},
    {"presence-penalty", required_argument, NULL, O_PRESPEN},
    {"frequency-penalty", required_argument, NULL, O_FREQPEN},
    {"repeat-last-n", required_argument, NULL, O_REPLASTN},
    {"samplers", required_argument, NULL, O_SAMPLERS},
    {"sampler-order", required_argument, NULL, O_SORDER},
    {"chat", no_argument, NULL, O_CHAT},
    {"chat-template-format", required_argument, NULL, O_CHATFMT},
    {"chat-template", required_argument, NULL, O_CHATFMT},
    {"chat-template-file", required_argument, NULL, O_TMPLFILE},
    {"system", required_argument, NULL, O_SYSTEM},
    {"no-think", no_argument, NULL, O_NOTHINK},
    {"ignore-eos", no_argument, NULL, O_IGNEOS},
    {"spec-type", required_argument, NULL, O_SPECTYPE},
    {"draft-max", required_argument, NULL, O_DRAFTMAX},
    {"draft", required_argument, NULL, O_DRAFTMAX},
    {"draft-n", required_argument, NULL, O_DRAFTMAX},
    {"draft-p-min", required_argument, NULL, O_DRAFTPMIN},
    {"spec-test", required_argument, NULL, O_SPECTEST},
    {"bench-spec", required_argument, NULL, O_BSPEC},
    {"grammar", required_argument, NULL, O_GRAMMAR},
    {"grammar-file", required_argument, NULL, O_GRAMMAR_FILE},
    {"attn-mask", required_argument, NULL, O_ATTN_MASK},
    {"json-schema", required_argument, NULL, 'j'},
    {"json-schema-file", required_argument, NULL, O_JSON_SCHEMA_FILE},
    {"no-display-prompt", no_argument, NULL, O_NODISP},
    {"interactive", no_argument, NULL, 'i'},
    {"device", required_argument, NULL, O_DEVICE},
    {"precision", required_argument, NULL, O_PREC},
    {"moe-config", required_argument, NULL, O_MOECFG},
    {"no-moe-config", no_argument, NULL, O_NOMOECFG},
    {"load-balance", required_argument, NULL, O_LB},
    {"lambda", required_argument, NULL, O_LAMBDA},
    {"name", required_argument, NULL, O_NAME},
    {"logits", required_argument, NULL, O_LOGITS},
    {"validate", no_argument, NULL, O_VALIDATE},
    {"validate-inputs", required_argument, NULL, O_VIN},
    {"validate-tokens", required_argument, NULL, O_VTOK},
    {"validate-seed", required_argument, NULL, O_VSEED},
    {"validate-file", required_argument, NULL, O_VFILE},
    {"original", required_argument, NULL, O_ORIGINAL},
    {"no-original", no_argument, NULL, O_NOORIGINAL},
    {"bench", no_argument, NULL, O_BENCH},
    {"bench-plans", required_argument, NULL, O_BPLANS},
    {"bench-pp", required_argument, NULL, O_BPP},
    {"bench-tg", required_argument, NULL, O_BTG},
    {"bench-depth", required_argument, NULL, O_BDEPTH},
    {"bench-reps", required_argument, NULL, O_BREPS},
    {"repetitions", required_argument, NULL, O_REPS},
    {"bench-output", required_argument, NULL, O_BOUT},
    {"bench-pg", required_argument, NULL, O_BPG},
    {"cache-type-k", required_argument, NULL, O_CTK},
    {"ctk", required_argument, NULL, O_CTK},
    {"cache-type-v", required_argument, NULL, O_CTV},
    {"ctv", required_argument, NULL, O_CTV},
    {"expert-stats", no_argument, NULL, O_ESTATS},
    {"memory-view", no_argument, NULL, O_MEMVIEW},
    {"stream", no_argument, NULL, O_STREAM},
    {"expert-cache", required_argument, NULL, O_XCACHE},
    {"expert-policy", required_argument, NULL, O_XPOLICY},
    {"no-prefetch", no_argument, NULL, O_NOPF},
    {"bench-cache", no_argument, NULL, O_BCACHE},
    {"bench-cache-frac", required_argument, NULL, O_BCFRAC},
    {"max-weight-mem", required_argument, NULL, O_MAXW},
    {"verify", no_argument, NULL, O_VERIFY},
    {"no-verify", no_argument, NULL, O_NOVERIFY},
    {"batch-invariant", no_argument, NULL, O_BATCH_INVARIANT},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* every numeric option: its name and accepted range on error (common/cli.h) */
#define OPT(call)                                                                                  \
    do {                                                                                           \
        if ((call) < 0)                                                                            \
            return -1;                                                                             \
    } while (0)

/* The generation options: the prompt, sampling, chat. 1: taken, 0: not one of them, -1: a bad value
 * (said) */
static int opt_generation(struct opts *o, int ch)
{
    switch (ch) {
    case O_CKPT:
    case 'm':
        o->checkpoint = optarg;
        return 1;
    case 'p':
        o->prompt = optarg;
        return 1;
    case 'f':
        o->file = optarg;
        return 1;
    case O_TOKENS:
        o->tokens = optarg;
        return 1;
    case 'n': /* a count, or with --bench a list: parsed after the loop */
        o->n_arg = optarg;
        o->n_predict_set = 1;
        return 1;
    case 'c':
        OPT(txc_opt_int(prog, "-c", optarg, 0, INT_MAX, "0 = the default", &o->n_ctx));
        return 1;
    case 'b':
        OPT(txc_opt_int(prog, "-b", optarg, 0, INT_MAX, "0 = the default", &o->n_batch));
        return 1;
    case 's':
        OPT(txc_opt_long(prog, "-s", optarg, -1, LLONG_MAX, "-1 = from the OS", &o->seed));
        return 1;
    case 't':
        OPT(txc_opt_int(prog, "-t", optarg, 0, 4096, "0 = all cores", &o->threads));
        return 1;
    case O_TEMP:
        OPT(txc_opt_float(prog, "--temp", optarg, 0, 100, 0, &o->temp));
        o->set_temp = 1;
        return 1;
    case O_TOPK:
        OPT(txc_opt_int(prog, "--top-k", optarg, 0, INT_MAX, "0 = off", &o->top_k));
        o->set_top_k = 1;
        return 1;
    case O_TOPP:
        OPT(txc_opt_float(prog, "--top-p", optarg, 0, 1, TXC_LO_OPEN, &o->top_p));
        o->set_top_p = 1;
        return 1;
    case O_MINP:
        OPT(txc_opt_float(prog, "--min-p", optarg, 0, 1, 0, &o->min_p));
        return 1;
    case O_REPPEN:
        OPT(txc_opt_float(prog, "--repeat-penalty", optarg, 0, 100, 0, &o->repeat_penalty));
        return 1;
    case O_PRESPEN:
        OPT(txc_opt_float(prog, "--presence-penalty", optarg, -100, 100, 0, &o->presence_penalty));
        return 1;
    case O_FREQPEN:
        OPT(txc_opt_float(prog, "--frequency-penalty", optarg, -100, 100, 0,
                          &o->frequency_penalty));
        return 1;
    case O_REPLASTN:
        OPT(txc_opt_int(prog, "--repeat-last-n", optarg, -1, GLM_MAX_REPEAT_LAST_N,
                        "-1 = the context", &o->repeat_last_n));
        return 1;
    case O_SAMPLERS: {
        /* llama.cpp's names; the device has two orders */
        char norm[256];
        size_t k = 0;
        for (const char *q = optarg; *q && k + 1 < sizeof(norm); q++)
            norm[k++] = *q == ',' ? ';' : *q;
        norm[k] = 0;
        const char *body = norm;
        if (!strncmp(body, "penalties;", 10))
            body += 10;
        if (!strcmp(body, "top_k;top_p;min_p;temperature")) {
            o->sampler_order = GLM_SAMPLER_ORDER_LLAMA;
        } else if (!strcmp(body, "temperature;top_k;top_p;min_p")) {
            o->sampler_order = GLM_SAMPLER_ORDER_TEMP_FIRST;
        } else {
            fprintf(stderr,
                    "%s: --samplers: '%s' is not an order the device has; use "
                    "top_k;top_p;min_p;temperature (llama.cpp) or "
                    "temperature;top_k;top_p;min_p (transformers), optionally after "
                    "penalties;; try --help\n",
                    prog, optarg);
            return -1;
        }
        return 1;
    }
    case O_SORDER:
        if (!strcmp(optarg, "llama")) {
            o->sampler_order = GLM_SAMPLER_ORDER_LLAMA;
        } else if (!strcmp(optarg, "temp-first")) {
            o->sampler_order = GLM_SAMPLER_ORDER_TEMP_FIRST;
        } else {
            fprintf(stderr, "%s: --sampler-order: '%s' is not llama or temp-first; try --help\n", prog, optarg);
            return -1;
        }
        return 1;
    case O_CHAT:
        o->chat = 1;
        return 1;
    case O_CHATFMT: {
        int f = tx_chat_format_from_name(optarg);
        if (f < 0) {
            fprintf(stderr, "%s: --chat-template-format: %s; try --help\n", prog, tx_last_error());
            return -1;
        }
        o->chat_format = f;
        return 1;
    }
    case O_TMPLFILE:
        o->chat_template_file = optarg;
        return 1;
    case O_SYSTEM:
        o->system = optarg;
        return 1;
    case O_NOTHINK:
        o->no_think = 1;
        return 1;
    case O_IGNEOS:
        o->ignore_eos = 1;
        return 1;
    case O_SPECTYPE:
        if (strcmp(optarg, "mtp") && strcmp(optarg, "draft-mtp") && strcmp(optarg, "none")) {
            fprintf(stderr, "%s: --spec-type: '%s' is not mtp (or draft-mtp) or none; try --help\n",
                    prog, optarg);
            return -1;
        }
        o->spec_mtp = strcmp(optarg, "none") != 0;
        return 1;
    case O_DRAFTMAX:
        if (txc_opt_int(prog, "--draft-max", optarg, 1, GLM_SPEC_MAX_DRAFT, NULL, &o->draft_max) < 0)
            return -1;
        return 1;
    case O_DRAFTPMIN: {
        float pm = 0;
        if (txc_opt_float(prog, "--draft-p-min", optarg, 0, 1, 0, &pm) < 0)
            return -1;
        o->draft_p_min = pm > 0 ? pm : -1.0f; /* glm_generate_params: < 0 = off */
        return 1;
    }
    case O_BSPEC: {
        char e[160];
        if (bench_list_parse("--bench-spec", "draft sizes in [1, 8]", optarg, 1, GLM_SPEC_MAX_DRAFT,
                             o->bench_spec, 8, &o->n_bench_spec, e, sizeof(e)) < 0) {
            fprintf(stderr, "%s: %s; try --help\n", prog, e);
            return -1;
        }
        return 1;
    }
    case O_SPECTEST:
        if (!strcmp(optarg, "perfect"))
            o->spec_mode = GLM_SPEC_PERFECT;
        else if (!strcmp(optarg, "wrong"))
            o->spec_mode = GLM_SPEC_WRONG;
        else {
            fprintf(stderr, "%s: --spec-test: '%s' is not perfect or wrong; try --help\n", prog,
                    optarg);
            return -1;
        }
        return 1;
    case O_GRAMMAR:
        o->grammar = optarg;
        return 1;
    case O_GRAMMAR_FILE:
        o->grammar_file = optarg;
        return 1;
    case O_ATTN_MASK:
        o->attn_mask = optarg;
        return 1;
    case 'j':
        o->json_schema = optarg;
        return 1;
    case O_JSON_SCHEMA_FILE:
        o->json_schema_file = optarg;
        return 1;
    case O_NODISP:
        o->no_display = 1;
        return 1;
    case 'i':
        o->interactive = 1;
        return 1;
    case 'v':
        verbose = 1;
        return 1;
    default:
        return 0;
    }
}

/* The device, the load and the MoE options. 1: taken, 0: not one of them, -1: a bad value (said) */
static int opt_device(struct opts *o, int ch)
{
    switch (ch) {
    case O_DEVICE:
        o->device = optarg;
        return 1;
    case O_PREC:
        o->precision = optarg;
        return 1;
    case O_MOECFG:
        o->moe_config = optarg;
        return 1;
    case O_EPREB:
        OPT(txc_opt_long(prog, "--ep-rebalance", optarg, 0, INT32_MAX, NULL, &o->ep_rebalance));
        return 1;
    case O_NOMOECFG:
        o->no_moe_config = 1;
        return 1;
    case O_LB:
        o->load_balance = optarg;
        return 1;
    case O_LAMBDA:
        OPT(txc_opt_float(prog, "--lambda", optarg, 0, 100, 0, &o->lambda));
        o->lambda_set = 1;
        return 1;
    case O_NAME:
        o->name = optarg;
        return 1;
    case O_CTK:
    case O_CTV: {
        int t = glm_cache_type_parse(optarg);
        if (t < 0) {
            fprintf(stderr,
                    "%s: --cache-type-%c %s: expected f32, f16, bf16, q8_0 (int8) or "
                    "q4_0 (int4); try --help\n",
                    prog, ch == O_CTK ? 'k' : 'v', optarg);
            return -1;
        }
        *(ch == O_CTK ? &o->cache_k : &o->cache_v) = t;
        return 1;
    }
    case O_STREAM:
        o->stream = 1;
        return 1;
    case O_XCACHE: {
        int64_t v = tx_parse_size(optarg);
        if (v <= 0) {
            fprintf(stderr, "%s: --expert-cache: '%s' is not a size > 0 (bytes, or with K, M, G); try --help\n",
                    prog, optarg);
            return -1;
        }
        o->expert_cache = (unsigned long long)v;
        return 1;
    }
    case O_XPOLICY:
        if (strcmp(optarg, "lru") && strcmp(optarg, "lrfu")) {
            fprintf(stderr, "%s: --expert-policy: '%s' is not lrfu or lru; try --help\n", prog, optarg);
            return -1;
        }
        o->expert_lru = !strcmp(optarg, "lru");
        return 1;
    case O_NOPF:
        o->no_prefetch = 1;
        return 1;
    case O_MAXW: {
        int64_t v = tx_parse_size(optarg);
        if (v <= 0) {
            fprintf(stderr,
                    "%s: --max-weight-mem: '%s' is not a size > 0 (bytes, or with K, M, G); try --help\n", prog,
                    optarg);
            return -1;
        }
        o->max_weight_mem = (unsigned long long)v;
        return 1;
    }
    case O_BATCH_INVARIANT:
        o->batch_invariant = 1;
        return 1;
    case O_NOVERIFY:
        o->no_verify = 1;
        return 1;
    default:
        return 0;
    }
}

/* The outputs and checks: --logits, --validate, --bench*, diagnostics. 1: taken, 0: not one of
 * them, -1: a bad value (said) */
static int opt_outputs(struct opts *o, int ch)
{
    switch (ch) {
    case O_LOGITS:
        o->logits = optarg;
        return 1;
    case O_VALIDATE:
        o->validate = 1;
        return 1;
    case O_VIN:
        OPT(txc_opt_int(prog, "--validate-inputs", optarg, 1, 1000000, NULL, &o->v_inputs));
        return 1;
    case O_VTOK:
        OPT(txc_opt_int(prog, "--validate-tokens", optarg, 1, 1 << 20, NULL, &o->v_tokens));
        return 1;
    case O_VSEED:
        OPT(txc_opt_u64(prog, "--validate-seed", optarg, &o->v_seed));
        return 1;
    case O_VFILE:
        o->v_file = optarg;
        return 1;
    case O_ORIGINAL:
        o->original = optarg;
        return 1;
    case O_NOORIGINAL:
        o->no_original = 1;
        return 1;
    case O_BENCH:
        o->bench = 1;
        return 1;
    case O_BPLANS:
        o->bench_plans = optarg;
        return 1;
    case O_BPP:
        OPT(txc_opt_int(prog, "--bench-pp", optarg, 1, 1 << 20, NULL, &o->bench_pp));
        return 1;
    case O_BTG:
        OPT(txc_opt_int(prog, "--bench-tg", optarg, 1, 1 << 20, NULL, &o->bench_tg));
        return 1;
    case O_BOUT:
        if ((o->bench_output = bench_format_parse(optarg)) < 0) {
            fprintf(stderr, "%s: -o: '%s' is not md, csv, json or jsonl; try --help\n", prog, optarg);
            return -1;
        }
        return 1;
    case O_BPG: {
        int pg[2], npg = 0;
        char e[200];
        if (bench_list_parse("-pg", "pp,tg", optarg, 1, 1 << 20, pg, 2, &npg, e, sizeof(e)) < 0 ||
            npg != 2) {
            fprintf(stderr, "%s: -pg: '%s': expected pp,tg (two counts >= 1); try --help\n", prog, optarg);
            return -1;
        }
        if (o->n_bench_pg == BENCH_LIST_MAX) {
            fprintf(stderr, "%s: -pg: at most %d pairs; try --help\n", prog, BENCH_LIST_MAX);
            return -1;
        }
        o->bench_pg[o->n_bench_pg][0] = pg[0];
        o->bench_pg[o->n_bench_pg++][1] = pg[1];
        return 1;
    }
    case O_REPS: /* -r: llama-bench's repetitions, not llama-cli's reverse prompt */
        if (txc_parse_long(optarg, 1, BENCH_REPS_MAX, &(long){0})) {
            fprintf(stderr,
                    "%s: -r '%s': llama-cli's reverse prompt is not supported here (the chat "
                    "template ends the turns); -r N is llama-bench's repetitions, N in [1, "
                    "%d]; try --help\n",
                    prog, optarg, BENCH_REPS_MAX);
            return -1;
        }
        /* fall through */
    case O_BREPS:
        OPT(txc_opt_int(prog, "--bench-reps", optarg, 1, BENCH_REPS_MAX, NULL, &o->bench_reps));
        o->bench_reps_set = 1;
        return 1;
    case O_BDEPTH: {
        char e[160];
        if (bench_depth_parse(optarg, o->bench_depth, BENCH_DEPTH_MAX, &o->n_bench_depth, e,
                              sizeof(e)) < 0) {
            fprintf(stderr, "%s: %s; try --help\n", prog, e);
            return -1;
        }
        return 1;
    }
    case O_ESTATS:
        o->expert_stats = 1;
        return 1;
    case O_MEMVIEW:
        o->memory_view = 1;
        return 1;
    case O_BCACHE:
        o->bench_cache = 1;
        return 1;
    case O_BCFRAC: {
        char *e2;
        o->bench_cache_frac = strtod(optarg, &e2);
        if (e2 == optarg || *e2 || !(o->bench_cache_frac > 0 && o->bench_cache_frac <= 1)) {
            fprintf(stderr, "%s: --bench-cache-frac: '%s' is not a number in (0, 1]; try --help\n", prog,
                    optarg);
            return -1;
        }
        return 1;
    }
    case O_VERIFY:
        o->verify = 1;
        return 1;
    default:
        return 0;
    }
}

int opts_parse(struct opts *o, int *argc, char **argv)
{
    memset(o, 0, sizeof(*o));
    o->n_predict = 128;
    o->seed = -1;
    o->temp = 0.8f;
    o->top_k = 40;
    o->top_p = 0.95f;
    o->min_p = 0.05f;
    o->repeat_penalty = 1.0f;
    o->repeat_last_n = 64;
    o->sampler_order = GLM_SAMPLER_ORDER_LLAMA;
    o->lambda = 0.2f;
    o->v_inputs = 100;
    o->v_tokens = 8;
    o->bench_pp = 512;
    o->bench_tg = 128;
    o->bench_reps = 1;
    int ch = txc_llama_flags(prog, argc, argv, OPTSTRING, lo, gi_llama);
    if (ch >= 0)
        return ch;
    while ((ch = txc_getopt(prog, *argc, argv, OPTSTRING, lo)) != -1) {
        int r = opt_generation(o, ch);
        if (!r)
            r = opt_device(o, ch);
        if (!r)
            r = opt_outputs(o, ch);
        if (r < 0)
            return 2;
        if (!r) /* --help, --version, or an option txc_getopt has reported */
            return txc_help_or_usage(ch, usage);
    }
    int lrc = bench_lists(o);
    if (lrc >= 0)
        return lrc;
    if (optind < *argc)
        return txc_usage_error(prog, usage, "unexpected argument '%s'", argv[optind]);
    if (!o->checkpoint)
        return txc_usage_error(prog, usage, "--checkpoint MODEL.smd is required");
    if (o->chat_format && o->chat_template_file)
        return txc_usage_error(prog, usage,
                               "--chat-template NAME and --chat-template-file: give one of them");
    if (o->verify)
        return txc_verify_package(prog, o->checkpoint);
    int n_sources = !!o->prompt + !!o->file + !!o->tokens;
    if (n_sources > 1) {
        fprintf(stderr, "%s: give only one of -p, -f and --tokens; try --help\n", prog);
        return 2;
    }
    if ((o->original || o->no_original) && !o->validate)
        return txc_usage_error(prog, usage, "--original and --no-original need --validate");
    if (o->v_file && !o->validate)
        return txc_usage_error(prog, usage, "--validate-file needs --validate");
    if (o->original && o->no_original)
        return txc_usage_error(prog, usage, "give only one of --original and --no-original");
    int prc = opts_check(o);
    if (prc >= 0)
        return prc;

    return -1;
}
