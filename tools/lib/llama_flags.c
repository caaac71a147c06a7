/* SPDX-License-Identifier: MIT */
/*
 * llama.cpp's spellings on the tools' command lines (common/llama_flags.h):
 * argv rewritten before getopt_long, and the flags every tool treats alike.
 * docs/llama-cpp-flags.md is the user's table of the same.
 */
#include "common/llama_flags.h"

#include <stdio.h>
#include <string.h>

/* no-ops: what llama.cpp's CPU builds also accept and ignore, and what has
 * no meaning on a TX8 */
#define GPU_LAYERS "the whole model runs on the TX8"
#define SPLIT "one device holds the model; --device A,B splits the routed experts"
#define HOST_MEM "the weights live in device memory, read once from the package"
#define HOST_THREADS "host threads only prepare device commands"
#define LOGS "the logs go to stderr as plain text"
#define SAMPLERS "the device samples with penalties, top-k, top-p, min-p and temperature only"

const struct txc_llama_flag txc_llama_common[] = {
    {"-ngl|--n-gpu-layers|--gpu-layers", TXC_LLAMA_NOOP, TXC_LLAMA_REQUIRED, GPU_LAYERS},
    {"-fa|--flash-attn", TXC_LLAMA_NOOP, TXC_LLAMA_OPTIONAL,
     "attention is always the device's fused kernel"},
    {"-sm|--split-mode|-mg|--main-gpu|-ts|--tensor-split", TXC_LLAMA_NOOP, TXC_LLAMA_REQUIRED,
     SPLIT},
    {"-nkvo|--no-kv-offload|-kvo|--kv-offload", TXC_LLAMA_NOOP, TXC_LLAMA_NONE,
     "the KV cache is always in device memory"},
    {"--mlock|--no-mmap|--mmap|--check-tensors", TXC_LLAMA_NOOP, TXC_LLAMA_NONE, HOST_MEM},
    {"-mmp", TXC_LLAMA_NOOP, TXC_LLAMA_REQUIRED, HOST_MEM},
    {"--numa", TXC_LLAMA_NOOP, TXC_LLAMA_REQUIRED, HOST_THREADS},
    {"-tb|--threads-batch|-C|--cpu-mask|-Cr|--cpu-range|-Cb|--cpu-mask-batch|-Crb|"
     "--cpu-range-batch|--cpu-strict|--cpu-strict-batch|--prio|--prio-batch|--poll|--poll-batch",
     TXC_LLAMA_NOOP, TXC_LLAMA_REQUIRED, HOST_THREADS},
    {"-ub|--ubatch-size", TXC_LLAMA_NOOP, TXC_LLAMA_REQUIRED,
     "-b is the most tokens of one device pass"},
    {"-co|--color|--log-colors", TXC_LLAMA_NOOP, TXC_LLAMA_OPTIONAL, LOGS},
    {"--log-prefix|--log-timestamps|--simple-io|--no-perf|--perf", TXC_LLAMA_NOOP, TXC_LLAMA_NONE,
     LOGS},
    {"--log-file|-lv|--verbosity|--log-verbosity", TXC_LLAMA_NOOP, TXC_LLAMA_REQUIRED, LOGS},
    {"--log-disable", TXC_LLAMA_QUIET, TXC_LLAMA_NONE, LOGS},
    {"--jinja|--no-jinja", TXC_LLAMA_NOOP, TXC_LLAMA_NONE,
     "the chat template is the package's own (or the format --chat-template names)"},
    {"--reasoning-format", TXC_LLAMA_NOOP, TXC_LLAMA_REQUIRED,
     "the reply is returned as generated, thinking included"},
    {"--warmup|--no-warmup", TXC_LLAMA_NOOP, TXC_LLAMA_NONE,
     "nothing is run before the request (--bench warms up itself)"},
    {"-dt|--defrag-thold", TXC_LLAMA_NOOP, TXC_LLAMA_REQUIRED,
     "the KV cache is one contiguous span per session"},
    {"--swa-full|-kvu|--kv-unified|--no-kv-unified|--context-shift|--no-context-shift|-cb|"
     "--cont-batching|-nocb|--no-cont-batching|-e|--escape|--no-escape",
     TXC_LLAMA_NOOP, TXC_LLAMA_NONE, "fixed here: docs/llama-cpp-flags.md says how"},
    {"--progress|--delay", TXC_LLAMA_NOOP, TXC_LLAMA_OPTIONAL,
     "llama-bench's progress display; the rows are printed as they finish"},

    {"-hf|-hfr|--hf-repo|-hff|--hf-file|-hft|--hf-token|-mu|--model-url|-hfd|-hfrd|"
     "--hf-repo-draft",
     TXC_LLAMA_UNSUPPORTED, TXC_LLAMA_REQUIRED,
     "models are .smd packages made by glm-export (--checkpoint)"},
    {"--lora|--lora-scaled|--control-vector|--control-vector-scaled|"
     "--control-vector-layer-range",
     TXC_LLAMA_UNSUPPORTED, TXC_LLAMA_REQUIRED, "adapters are not applied to a package"},
    {"--mmproj|--mmproj-url|--image|--audio", TXC_LLAMA_UNSUPPORTED, TXC_LLAMA_REQUIRED,
     "text models only"},
    {"--mirostat|--mirostat-lr|--mirostat-ent|--typical|--dynatemp-range|--dynatemp-exp|"
     "--xtc-probability|--xtc-threshold|--dry-multiplier|--dry-base|--dry-allowed-length|"
     "--dry-penalty-last-n|--dry-sequence-breaker|--top-nsigma|-l|--logit-bias",
     TXC_LLAMA_UNSUPPORTED, TXC_LLAMA_REQUIRED, SAMPLERS},
    {"--rope-scaling|--rope-scale|--rope-freq-base|--rope-freq-scale|--yarn-orig-ctx|"
     "--yarn-ext-factor|--yarn-attn-factor|--yarn-beta-slow|--yarn-beta-fast",
     TXC_LLAMA_UNSUPPORTED, TXC_LLAMA_REQUIRED, "RoPE comes from the package's config.json"},
    {"-md|--model-draft|--draft-min|-cd|"
     "--ctx-size-draft|-ngld|--n-gpu-layers-draft|-devd|--device-draft",
     TXC_LLAMA_UNSUPPORTED, TXC_LLAMA_REQUIRED,
     "no draft model: speculative decoding is --spec-type mtp --draft-max N (the model's MTP layer)"},
    {"--override-kv|-ot|--override-tensor", TXC_LLAMA_UNSUPPORTED, TXC_LLAMA_REQUIRED,
     "a package has no GGUF metadata or tensor placement to override"},
    {"--prompt-cache|--keep|-r|--reverse-prompt|--in-prefix|--in-suffix|-bf|--binary-file|"
     "--chat-template-kwargs|--pooling|--override-tensor-draft",
     TXC_LLAMA_UNSUPPORTED, TXC_LLAMA_REQUIRED, "not implemented: docs/llama-cpp-flags.md"},
    {"--prompt-cache-all|--prompt-cache-ro|--in-prefix-bos|--embedding|--embeddings|"
     "--reranking|--rerank|-mli|--multiline-input",
     TXC_LLAMA_UNSUPPORTED, TXC_LLAMA_NONE, "not implemented: docs/llama-cpp-flags.md"},
    {NULL, 0, 0, NULL},
};

/* names is "a|b|c": arg (up to len) is one of them */
static int has_name(const char *names, const char *arg, size_t len)
{
    for (const char *p = names; *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && !strncmp(p, arg, len))
            return 1;
        p += n + (bar != NULL);
    }
    return 0;
}

static const struct txc_llama_flag *find(const struct txc_llama_flag *tab, const char *arg,
                                         size_t len)
{
    for (int t = 0; t < 2; t++)
        for (const struct txc_llama_flag *f = t ? txc_llama_common : tab; f && f->names; f++)
            if (has_name(f->names, arg, len))
                return f;
    return NULL;
}

/* the tool's own option arg takes the next argument as its value */
static int takes_next(const char *arg, const char *optstring, const struct option *lo)
{
    if (arg[0] != '-' || !arg[1])
        return 0;
    if (arg[1] == '-') {
        if (strchr(arg, '='))
            return 0;
        for (const struct option *o = lo; o && o->name; o++)
            if (!strcmp(o->name, arg + 2))
                return o->has_arg == required_argument;
        return 0;
    }
    /* -x VALUE, or a cluster -abx VALUE whose last letter takes one */
    for (const char *c = arg + 1; *c; c++) {
        const char *p = strchr(optstring, *c);
        if (!p || *c == ':')
            return 0;
        if (p[1] == ':')
            return c[1] == 0; /* -xVALUE carries its value */
    }
    return 0;
}

static int optional_word(const char *s)
{
    static const char *const w[] = {"on",   "off",   "auto", "enabled", "disabled",
                                    "true", "false", "1",    "0",       NULL};
    for (int i = 0; w[i]; i++)
        if (!strcmp(s, w[i]))
            return 1;
    return 0;
}

int txc_llama_flags(const char *prog, int *argc, char **argv, const char *optstring,
                    const struct option *lo, const struct txc_llama_flag *tab)
{
    static char rewritten[32][256]; /* ALIAS=VALUE spellings (argv points here) */
    int n_rewritten = 0;
    const struct txc_llama_flag *noted[64];
    int n_noted = 0;
    int out = 1, i = 1;
    while (i < *argc) {
        char *a = argv[i];
        if (!strcmp(a, "--")) {
            while (i < *argc)
                argv[out++] = argv[i++];
            break;
        }
        const char *eq = a[0] == '-' ? strchr(a, '=') : NULL;
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const struct txc_llama_flag *f = a[0] == '-' ? find(tab, a, len) : NULL;
        if (!f) {
            argv[out++] = a;
            if (takes_next(a, optstring, lo) && i + 1 < *argc)
                argv[out++] = argv[++i];
            i++;
            continue;
        }
        if (f->kind == TXC_LLAMA_UNSUPPORTED) {
            fprintf(stderr, "%s: %.*s: not supported here: %s; try --help\n", prog, (int)len, a,
                    f->what);
            return 2;
        }
        /* the value, when it is the next argument */
        int has_next = !eq && f->value != TXC_LLAMA_NONE && i + 1 < *argc &&
                       (f->value == TXC_LLAMA_REQUIRED || optional_word(argv[i + 1]));
        if (!eq && f->value == TXC_LLAMA_REQUIRED && !has_next) {
            fprintf(stderr, "%s: %s: needs a value; try --help\n", prog, a);
            return 2;
        }
        if (eq && f->value == TXC_LLAMA_NONE) {
            fprintf(stderr, "%s: %.*s: takes no value; try --help\n", prog, (int)len, a);
            return 2;
        }
        if (f->kind == TXC_LLAMA_ALIAS) {
            if (eq) {
                if (n_rewritten == 32 ||
                    snprintf(rewritten[n_rewritten], sizeof(rewritten[0]), "%s%s", f->what, eq) >=
                        (int)sizeof(rewritten[0])) {
                    fprintf(stderr, "%s: %.40s...: too long; try --help\n", prog, a);
                    return 2;
                }
                argv[out++] = rewritten[n_rewritten++];
            } else {
                argv[out++] = (char *)f->what;
                if (has_next)
                    argv[out++] = argv[++i];
            }
            i++;
            continue;
        }
        /* NOOP, QUIET: dropped with the value; a NOOP said once */
        int seen = 0;
        for (int k = 0; k < n_noted; k++)
            seen |= noted[k] == f;
        if (!seen && f->kind == TXC_LLAMA_NOOP) {
            fprintf(stderr, "%s: note: %.*s: no effect here: %s\n", prog, (int)len, a, f->what);
            if (n_noted < 64)
                noted[n_noted++] = f;
        }
        i += 1 + has_next;
    }
    argv[out] = NULL;
    *argc = out;
    return -1;
}
