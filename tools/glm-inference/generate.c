/* SPDX-License-Identifier: MIT */
/*
 * glm-inference's generation: the prompt (-p, -f, --tokens or stdin,
 * through the chat template with --chat), --logits, the sampling settings,
 * one generation with llama.cpp's timings, then -i's chat if asked
 * (docs/glm-inference.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/attn_mask_file.h"
#include "common/cli.h"
#include "chat_template.h"
#include "energy.h"
#include "glm_inference.h"

/* Ctrl-C (SIGINT), SIGTERM, SIGHUP during generation: stop after the current
 * token, print the timings as llama.cpp does and exit 130 through the normal
 * clean-up (the model's telemetry file in /dev/shm is removed). A second
 * signal terminates at once. */
volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
    signal(sig, SIG_DFL);
}

void set_signals(void (*handler)(int), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

void catch_signals(void)
{
    set_signals(on_signal, SA_RESTART);
}

volatile sig_atomic_t stdout_closed;

/* --ep-rebalance N: the model, N, tokens so far */
glm_model_t *reb_model;
long long reb_every;
static long long reb_tokens;

int on_token(void *user, int32_t tok, const char *piece, size_t len)
{
    (void)user;
    if (gi_grammar_token(tok))
        return 1;
    if ((len && fwrite(piece, 1, len, stdout) != len) || fflush(stdout)) {
        /* the reader is gone (| head -1: EPIPE, SIGPIPE being ignored):
         * stop, and leave through the normal clean-up */
        stdout_closed = 1;
        return 1;
    }
    if (reb_model && reb_every > 0 && ++reb_tokens % reb_every == 0 &&
        glm_model_ep_rebalance(reb_model, 0)) {
        fprintf(stderr, "\nglm-inference: --ep-rebalance: %s\n", tx_last_error());
        return 1;
    }
    return interrupted != 0;
}

/*
 * The package's generation_config.json (glm_model_generation_config) gives
 * the defaults of --temp, --top-k and --top-p that the command line leaves
 * unset: do_sample false means greedy (temperature 0), else its
 * temperature / top_k / top_p where present. Says where the values came
 * from on stderr.
 */
static void sampling_defaults(const glm_model_t *m, struct opts *o)
{
    struct glm_generation_config g;
    if (glm_model_generation_config(m, &g) != 1) {
        fprintf(stderr,
                "%s: sampling defaults: glm-inference's own (the package has no "
                "generation_config.json)\n",
                prog);
        return;
    }
    char used[160] = "", *p = used;
    size_t left = sizeof(used);
#define USED(...)                                                                                  \
    do {                                                                                           \
        int k_ = snprintf(p, left, __VA_ARGS__);                                                   \
        if (k_ > 0 && (size_t)k_ < left) {                                                         \
            p += k_;                                                                               \
            left -= (size_t)k_;                                                                    \
        }                                                                                          \
    } while (0)
    if ((g.has & GLM_GEN_HAS_DO_SAMPLE) && !g.do_sample) {
        if (!o->set_temp) {
            o->temp = 0.0f;
            USED("%sdo_sample false (greedy)", *used ? ", " : "");
        }
    } else if ((g.has & GLM_GEN_HAS_TEMPERATURE) && !o->set_temp) {
        o->temp = g.temperature;
        USED("%stemperature %.2f", *used ? ", " : "", (double)g.temperature);
    }
    if ((g.has & GLM_GEN_HAS_TOP_K) && !o->set_top_k) {
        o->top_k = g.top_k;
        USED("%stop_k %d", *used ? ", " : "", g.top_k);
    }
    if ((g.has & GLM_GEN_HAS_TOP_P) && !o->set_top_p) {
        o->top_p = g.top_p;
        USED("%stop_p %.2f", *used ? ", " : "", (double)g.top_p);
    }
#undef USED
    if (*used)
        fprintf(stderr,
                "%s: sampling defaults from the package's generation_config.json: %s (the rest: "
                "glm-inference's own; the command line overrides)\n",
                prog, used);
    else
        fprintf(stderr,
                "%s: sampling defaults: glm-inference's own (the package's "
                "generation_config.json sets none that the command line leaves open)\n",
                prog);
}

/* the chat format: the option, else the package's own chat_template
 * (Jinja, or --chat-template-file), else libtx's C format recognised from
 * it; -1 or the exit status */
static int chat_format(glm_model_t *m, const struct opts *o)
{
    char why[256];
    int jinja = 0;
    if (!o->chat_format &&
        (jinja = gi_chat_template_init(prog, o->checkpoint, o->chat_template_file)) < 0)
        return 1;
    if (jinja)
        return -1;
    if (o->chat_format)
        glm_model_set_chat_format(m, o->chat_format);
    if (glm_model_chat_format(m, why, sizeof(why)) < 0) {
        log_err("chat format");
        return 1;
    }
    fprintf(stderr, "%s: chat format %s\n", prog, why);
    return -1;
}

/* The prompt's token ids (*ids NULL: none, -i without a prompt) and its
 * text (*text, for the echo): --tokens, -f, -p or stdin, through the chat
 * template with --chat. -1: go on; else the exit status. */
static int prompt_ids(glm_model_t *m, struct opts *o, int32_t **ids, size_t *n_ids, char **text)
{
    if (o->tokens) {
        if (parse_token_ids(o->tokens, ids, n_ids) || !*n_ids) {
            fprintf(stderr, "%s: --tokens: expected comma-separated token ids\n", prog);
            return 2;
        }
        return -1;
    }
    if (o->file) {
        *text = o->file_text; /* read by opts_parse */
        o->file_text = NULL;
    } else if (o->prompt) {
        *text = strdup(o->prompt);
    } else if (!o->interactive && !isatty(STDIN_FILENO)) {
        /* (with -i, stdin is the conversation: chat.c); a signal while
         * waiting for the prompt ends the process, as before the load */
        set_signals(SIG_DFL, 0);
        int r = txc_read_stream(stdin, text, NULL);
        if (r) {
            fprintf(stderr, "%s: stdin: %s\n", prog, tx_strerror(r));
            return 1;
        }
    } else if (!o->interactive) {
        fprintf(stderr, "%s: no prompt (-p, -f, --tokens, stdin or -i on a terminal)\n", prog);
        return 2;
    }
    if (!*text)
        return -1;
    int r;
    if (o->chat) {
        struct tx_chat_message msgs[2];
        size_t nm = 0;
        if (o->system)
            msgs[nm++] = (struct tx_chat_message){"system", o->system, NULL};
        msgs[nm++] = (struct tx_chat_message){"user", *text, NULL};
        r = gi_chat_encode(m, msgs, nm, o->no_think ? TX_CHAT_NO_THINKING : 0, ids, n_ids);
    } else {
        r = glm_tokenize(m, *text, ids, n_ids);
    }
    if (r) {
        log_err("prompt");
        return 1;
    }
    if (!*n_ids) {
        fprintf(stderr, "%s: the prompt is empty\n", prog);
        return 2;
    }
    return -1;
}

/* --logits FILE: the prompt's logits, every position (float32 LE); then
 * the session reset for generation. -1: go on (generate); else the exit
 * status (0: done, nothing to generate without -n) */
static int write_logits(struct gi_run *g, const struct opts *o, const int32_t *ids, size_t n_ids)
{
    const struct glm_config *c = glm_model_config(g->m);
    float *lg = malloc(sizeof(float) * n_ids * (size_t)c->vocab_size);
    if (!lg) {
        fprintf(stderr, "%s: out of memory for the logits\n", prog);
        return 1;
    }
    double a = now_ms();
    int erc = glm_eval(g->s, ids, (int)n_ids, GLM_EVAL_ALL_LOGITS, lg);
    if (erc) {
        log_rc("eval", erc);
        free(lg);
        return 1;
    }
    double b = now_ms();
    FILE *f = fopen(o->logits, "wb");
    int bad = !f;
    if (f) {
        /* little-endian float32: the host order on every supported host */
        bad = fwrite(lg, sizeof(float), n_ids * (size_t)c->vocab_size, f) !=
              n_ids * (size_t)c->vocab_size;
        bad |= fclose(f) != 0;
    }
    free(lg);
    if (bad) {
        fprintf(stderr, "%s: %s: %s\n", prog, o->logits, strerror(errno));
        return 1;
    }
    fprintf(stderr, "%s: wrote logits [%zu x %d] to %s (prompt eval %.2f ms)\n", prog, n_ids,
            c->vocab_size, o->logits, b - a);
    if (!o->n_predict_set) {
        if (o->expert_stats)
            print_expert_stats(g->m);
        if (o->memory_view)
            print_memory_view(g->dev);
        return 0;
    }
    glm_session_reset(g->s);
    return -1;
}

/* the sampling settings (the package's generation_config.json for what
 * the command line leaves open), said on stderr with the seed */
static void sampling_of(const glm_model_t *m, struct opts *o, struct glm_sampling *smp)
{
    sampling_defaults(m, o);
    glm_sampling_default(smp);
    smp->temperature = o->temp;
    smp->top_k = o->top_k;
    smp->top_p = o->top_p;
    smp->min_p = o->min_p;
    smp->repeat_penalty = o->repeat_penalty;
    smp->presence_penalty = o->presence_penalty;
    smp->frequency_penalty = o->frequency_penalty;
    smp->repeat_last_n = o->repeat_last_n;
    smp->order = o->sampler_order;
    smp->seed = o->seed < 0 ? txc_random_seed() : (uint64_t)o->seed; /* printed below */
    fprintf(stderr,
            "%s: sampling on the device: %s; temp %.2f, top-k %d, top-p %.2f, min-p %.2f, "
            "repeat-penalty %.2f, presence %.2f, frequency %.2f, last-n %d, seed %llu\n",
            prog,
            smp->order == GLM_SAMPLER_ORDER_LLAMA ? "penalties;top_k;top_p;min_p;temperature"
                                                  : "penalties;temperature;top_k;top_p;min_p",
            (double)smp->temperature, smp->top_k, (double)smp->top_p, (double)smp->min_p,
            (double)smp->repeat_penalty, (double)smp->presence_penalty,
            (double)smp->frequency_penalty, smp->repeat_last_n, (unsigned long long)smp->seed);
}

/* One generation from the prompt (echoed unless --no-display-prompt or
 * --chat), the timing lines, the diagnostics; then -i's chat. */
/* speculative decoding's figures of one generate call (--spec-type) */
static void print_spec(const struct glm_spec_stats *a, const struct glm_spec_stats *b)
{
    uint64_t rounds = b->rounds - a->rounds, drafted = b->drafted - a->drafted;
    uint64_t acc = b->accepted - a->accepted, emitted = b->emitted - a->emitted;
    fprintf(stderr,
            "%s: speculative decoding: %llu verify passes, %llu drafted, %llu accepted "
            "(acceptance %.1f%%), mean accepted length %.2f tokens per pass; %llu plain steps "
            "(drafting switched off %llu times for low acceptance)\n",
            prog, (unsigned long long)rounds, (unsigned long long)drafted,
            (unsigned long long)acc, drafted ? 100.0 * (double)acc / (double)drafted : 0.0,
            rounds ? (double)emitted / (double)rounds : 0.0,
            (unsigned long long)(b->plain_steps - a->plain_steps),
            (unsigned long long)(b->off_switches - a->off_switches));
}

static int generate_once(struct gi_run *g, const struct opts *o, const int32_t *ids, size_t n_ids,
                         const char *text, struct glm_sampling *smp)
{
    if (!o->no_display && text && !o->chat) {
        fputs(text, stdout);
        fflush(stdout);
    }
    struct glm_generate_params gp;
    memset(&gp, 0, sizeof(gp));
    gp.prompt = ids;
    gp.n_prompt = (int)n_ids;
    gp.n_predict = o->n_predict;
    gp.sampling = *smp;
    gp.on_token = on_token;
    if (o->ignore_eos)
        gp.flags |= GLM_GEN_IGNORE_EOS; /* -inf bias on the stop tokens */
    if (o->spec_mtp) {
        gp.spec_draft_max = o->draft_max ? o->draft_max : 3;
        gp.spec_mode = o->spec_mode;
        gp.spec_p_min = o->draft_p_min;
    }
    struct glm_spec_stats sp0, sp1;
    glm_session_spec_stats(g->s, &sp0);
    struct glm_timings t;
    int n_out = 0;
    struct gi_energy e0, e1;
    if (gi_grammar_start(o, g->m, g->s))
        return 1;
    gi_energy_read(g->dev, &e0);
    struct glm_decode_times pa, pb;
    int prc = glm_model_prefill_times(g->m, &pa);
    int grc = glm_generate(g->s, &gp, NULL, 0, &n_out, &t);
    if (!prc)
        prc = glm_model_prefill_times(g->m, &pb);
    gi_energy_read(g->dev, &e1);
    gi_grammar_end();
    putchar('\n');
    fflush(stdout);
    if (grc) {
        log_rc("generate", grc);
        return 1;
    }
    static const char *why[] = {"", "stop token", "length", "context full", "callback"};
    if (stdout_closed) {
        /* as head(1) wanted: the text's reader stopped reading */
        fprintf(stderr, "%s: stdout was closed: stopped after %d tokens\n", prog, n_out);
        return 0;
    }
    fprintf(stderr, "%s: generated %d tokens (%s)\n", prog, n_out,
            interrupted            ? "interrupted"
            : (unsigned)t.stop < 5 ? why[t.stop]
                                   : "?");
    print_perf(&t);
    glm_session_spec_stats(g->s, &sp1);
    if (o->spec_mtp)
        print_spec(&sp0, &sp1);
    if (!prc)
        print_ttft(&t, &pa, &pb);
    gi_energy_print(stderr, &e0, &e1, t.n_prompt, t.n_eval);
    if (interrupted)
        return 130;
    if (o->expert_stats)
        print_expert_stats(g->m);
    if (o->memory_view)
        print_memory_view(g->dev);
    return o->interactive ? run_chat(g->m, g->s, o, smp) : 0;
}

/* -v: each prompt token as llama.cpp's --verbose-prompt lists it, after its
 * index (the token indices of an --attn-mask file) */
static void print_prompt_pieces(glm_model_t *m, const int32_t *ids, size_t n_ids)
{
    const struct tx_tokenizer *tok = glm_model_tokenizer(m);
    for (size_t i = 0; tok && i < n_ids; i++) {
        const char *b = NULL;
        int n = tx_tokenizer_token_bytes(tok, ids[i], &b);
        fprintf(stderr, "%6zu: %6d -> '", i, ids[i]);
        for (int k = 0; k < n; k++) {
            unsigned char c = (unsigned char)b[k];
            if (c == '\n')
                fputs("\\n", stderr);
            else if (c < 0x20 || c == 0x7f)
                fprintf(stderr, "\\x%02x", c);
            else
                fputc(c, stderr);
        }
        fputs("'\n", stderr);
    }
}

/* --attn-mask FILE: the custom attention mask of the prompt's tokens */
static int set_attn_mask(struct gi_run *g, const struct opts *o, const int32_t *ids, size_t n_ids)
{
    if (!ids || !n_ids) {
        fprintf(stderr, "%s: --attn-mask needs a prompt (-p, -f or --tokens)\n", prog);
        return 1;
    }
    struct txc_attn_mask am;
    char err[512];
    if (txc_attn_mask_load(o->attn_mask, (int)n_ids, &am, err, sizeof(err))) {
        fprintf(stderr, "%s: --attn-mask %s\n", prog, err);
        return 1;
    }
    int rc = glm_session_set_attn_mask(g->s, &am.m);
    txc_attn_mask_free(&am);
    if (rc) {
        fprintf(stderr, "%s: --attn-mask %s: %s\n", prog, o->attn_mask, tx_last_error());
        return 1;
    }
    if (verbose)
        fprintf(stderr, "%s: custom attention mask of %zu prompt tokens from %s\n", prog, n_ids,
                o->attn_mask);
    return 0;
}

int run_generate(struct gi_run *g, struct opts *o)
{
    int32_t *ids = NULL;
    size_t n_ids = 0;
    char *text = NULL;
    int rc = o->chat || o->interactive ? chat_format(g->m, o) : -1;
    if (rc < 0)
        rc = prompt_ids(g->m, o, &ids, &n_ids, &text);
    if (rc >= 0)
        goto out;
    if (verbose && ids) {
        fprintf(stderr, "%s: prompt tokens (%zu):", prog, n_ids);
        for (size_t i = 0; i < n_ids; i++)
            fprintf(stderr, "%s%d", i ? "," : " ", ids[i]);
        fputc('\n', stderr);
        print_prompt_pieces(g->m, ids, n_ids);
    }
    struct glm_session_options so = {.n_ctx = o->n_ctx, .n_batch = o->n_batch};
    rc = 1;
    if (glm_session_create(g->m, &so, &g->s)) {
        log_err("session");
        goto out;
    }
    if (ids && (int)n_ids >= glm_session_n_ctx(g->s)) {
        fprintf(stderr, "%s: the prompt (%zu tokens) does not fit the context of %d\n", prog, n_ids,
                glm_session_n_ctx(g->s));
        goto out;
    }
    if (o->attn_mask && set_attn_mask(g, o, ids, n_ids))
        goto out;
    if (o->logits && ids && (rc = write_logits(g, o, ids, n_ids)) >= 0)
        goto out;
    struct glm_sampling smp;
    sampling_of(g->m, o, &smp);
    catch_signals();
    if (!ids && o->interactive)
        rc = run_chat(g->m, g->s, o, &smp);
    else
        rc = generate_once(g, o, ids, n_ids, text, &smp);
out:
    free(ids);
    free(text);
    gi_chat_template_free();
    return rc;
}
