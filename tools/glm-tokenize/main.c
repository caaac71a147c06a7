/* SPDX-License-Identifier: MIT */
/*
 * glm-tokenize: Hugging Face tokenizer.json on the command line.
 *
 *   glm-tokenize --tokenizer tokenizer.json [--no-special] [--add-special]
 *       text on stdin -> comma-separated ids on stdout
 *   glm-tokenize --tokenizer tokenizer.json --decode [--skip-special]
 *       ids on stdin (separated by commas and/or white space) -> text
 *   glm-tokenize --tokenizer tokenizer.json --chat FORMAT [--system TEXT]
 *       stdin is one user message; prints the ids of the rendered prompt
 *   glm-tokenize --package PKG.smd --chat-render CONV.json [--chat FORMAT]
 *       libtx's rendering (text) of a JSON conversation (chat_render.c)
 *   glm-tokenize --package PKG.smd --print-tokenizer-config
 *   glm-tokenize --chat-template-file FILE --chat-render CONV.json
 *       [--chat-kwargs JSON] [--tokenizer-config TOKENIZER_CONFIG.json]
 *       the template's rendering by libtx's Jinja renderer (chat_jinja.c)
 *
 * Exit status: 0 on success, 1 on an error (message on stderr), 2 on a usage
 * error.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tx/tx_tokenizer.h>

#include "chat_render.h"
#include "common/cli.h"

static const char *prog = "glm-tokenize";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s --tokenizer FILE [--decode] [--no-special] [--add-special]\n"
            "          [--skip-special] [--chat FORMAT [--system TEXT] [--no-think]]\n"
            "  Encodes UTF-8 text read from stdin and prints the token ids, comma-separated.\n"
            "  --tokenizer FILE  Hugging Face tokenizer.json\n"
            "  --decode          read ids (comma/space separated) from stdin, print the text\n"
            "  --no-special      treat special-token strings in the text as plain text\n"
            "  --add-special     add the post-processor's tokens (HF add_special_tokens)\n"
            "  --skip-special    with --decode: leave special tokens out\n"
            "  --chat FORMAT     stdin is a user message: apply the chat template\n"
            "                    (glm4, glm4.5, glm4.7/glm5, qwen3, deepseek3,\n"
            "                    deepseek3.1) with the generation prompt\n"
            "  --system TEXT     with --chat: a system message first\n"
            "  --no-think        with --chat: thinking disabled (enable_thinking=false)\n"
            "  --show-tokens     also print each token string on stderr\n"
            "  --stats           print bytes, tokens, time and tokens/s on stderr\n"
            "  --package PKG.smd      with --chat-render / --print-tokenizer-config: the\n"
            "                         package whose chat_template picks the format\n"
            "  --chat-render CONV.json  print libtx's rendering (text) of the JSON\n"
            "                         conversation {\"messages\": [...],\n"
            "                         \"add_generation_prompt\", \"enable_thinking\"};\n"
            "                         the format: --chat, else the package's\n"
            "  --print-tokenizer-config  print the package's tokenizer_config.json\n"
            "  --recognise-chat-template FILE  print the chat format libtx recognises in\n"
            "                         a chat template (a chat_template.jinja, or a\n"
            "                         tokenizer_config.json's chat_template); exit 1 if none\n"
            "  --chat-template-file FILE  with --chat-render: render with this Jinja chat\n"
            "                         template (a .jinja, or a tokenizer_config.json) by\n"
            "                         libtx's Jinja renderer, as apply_chat_template does\n"
            "  --chat-kwargs JSON     with --chat-template-file: template kwargs (an object,\n"
            "                         e.g. '{\"enable_thinking\": false}')\n"
            "  --tokenizer-config FILE  with --chat-template-file: the special tokens\n"
            "                         (bos_token, eos_token...) of this tokenizer_config.json\n"
            "  (tools/chat-template-check compares --chat-render with Jinja2)\n",
            prog);
}

/* Parses "1, 2,3\n4" into ids. */
static int parse_ids(const char *s, size_t n, int32_t **ids, size_t *count, char *err, size_t errsz)
{
    size_t cap = 256, k = 0;
    int32_t *v = malloc(cap * sizeof(*v));
    if (!v) {
        snprintf(err, errsz, "out of memory");
        return TX_ENOMEM;
    }
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            i++;
            continue;
        }
        if (c < '0' || c > '9') {
            snprintf(err, errsz, "invalid character '%c' at byte %zu of the id list", c, i);
            free(v);
            return TX_EINVAL;
        }
        long long x = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            x = x * 10 + (s[i] - '0');
            if (x > INT32_MAX) {
                snprintf(err, errsz, "token id too large at byte %zu", i);
                free(v);
                return TX_EINVAL;
            }
            i++;
        }
        if (k == cap) {
            int32_t *nv = realloc(v, cap * 2 * sizeof(*v));
            if (!nv) {
                free(v);
                snprintf(err, errsz, "out of memory");
                return TX_ENOMEM;
            }
            v = nv;
            cap *= 2;
        }
        v[k++] = (int32_t)x;
    }
    *ids = v;
    *count = k;
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = NULL, *chat = NULL, *system_text = NULL, *pkg = NULL, *render = NULL,
               *recognise = NULL, *tmpl_file = NULL, *chat_kwargs = NULL, *tokcfg = NULL;
    int print_tokcfg = 0;
    int decode = 0, no_special = 0, add_special = 0, skip_special = 0, no_think = 0, show = 0;
    int stats = 0;
    enum {
        O_TOK = 256,
        O_DECODE,
        O_NOSPECIAL,
        O_ADDSPECIAL,
        O_SKIPSPECIAL,
        O_CHAT,
        O_SYSTEM,
        O_NOTHINK,
        O_SHOW,
        O_STATS,
        O_PACKAGE,
        O_RENDER,
        O_PRINTCFG,
        O_RECOGNISE,
        O_TMPLFILE,
        O_KWARGS,
        O_TOKCFG
    };
    static const struct option opts[] = {
        {"tokenizer", required_argument, NULL, O_TOK},
        {"decode", no_argument, NULL, O_DECODE},
        {"no-special", no_argument, NULL, O_NOSPECIAL},
        {"add-special", no_argument, NULL, O_ADDSPECIAL},
        {"skip-special", no_argument, NULL, O_SKIPSPECIAL},
        {"chat", required_argument, NULL, O_CHAT},
        {"system", required_argument, NULL, O_SYSTEM},
        {"no-think", no_argument, NULL, O_NOTHINK},
        {"show-tokens", no_argument, NULL, O_SHOW},
        {"stats", no_argument, NULL, O_STATS},
        {"package", required_argument, NULL, O_PACKAGE},
        {"chat-render", required_argument, NULL, O_RENDER},
        {"print-tokenizer-config", no_argument, NULL, O_PRINTCFG},
        {"recognise-chat-template", required_argument, NULL, O_RECOGNISE},
        {"chat-template-file", required_argument, NULL, O_TMPLFILE},
        {"chat-kwargs", required_argument, NULL, O_KWARGS},
        {"tokenizer-config", required_argument, NULL, O_TOKCFG},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = txc_getopt(prog, argc, argv, "h", opts)) != -1) {
        switch (c) {
        case O_TOK:
            path = optarg;
            break;
        case O_DECODE:
            decode = 1;
            break;
        case O_NOSPECIAL:
            no_special = 1;
            break;
        case O_ADDSPECIAL:
            add_special = 1;
            break;
        case O_SKIPSPECIAL:
            skip_special = 1;
            break;
        case O_CHAT:
            chat = optarg;
            break;
        case O_SYSTEM:
            system_text = optarg;
            break;
        case O_NOTHINK:
            no_think = 1;
            break;
        case O_SHOW:
            show = 1;
            break;
        case O_STATS:
            stats = 1;
            break;
        case O_PACKAGE:
            pkg = optarg;
            break;
        case O_RENDER:
            render = optarg;
            break;
        case O_PRINTCFG:
            print_tokcfg = 1;
            break;
        case O_RECOGNISE:
            recognise = optarg;
            break;
        case O_TMPLFILE:
            tmpl_file = optarg;
            break;
        case O_KWARGS:
            chat_kwargs = optarg;
            break;
        case O_TOKCFG:
            tokcfg = optarg;
            break;
        default: /* --help, or an option getopt_long has reported */
            return txc_help_or_usage(c, usage);
        }
    }
    if (optind < argc)
        return txc_usage_error(prog, usage, "unexpected argument '%s'", argv[optind]);
    if (tmpl_file || chat_kwargs || tokcfg) {
        if (!tmpl_file || !render || path || decode || system_text || no_think || no_special ||
            add_special || show || stats || print_tokcfg || chat || pkg || recognise)
            return txc_usage_error(prog, usage,
                                   "--chat-template-file FILE --chat-render CONV.json take only "
                                   "--chat-kwargs and --tokenizer-config");
        return gt_chat_render_jinja(prog, tmpl_file, render, chat_kwargs, tokcfg);
    }
    if (recognise) {
        if (path || decode || system_text || no_think || no_special || add_special || show ||
            stats || print_tokcfg || render || chat || pkg)
            return txc_usage_error(prog, usage, "--recognise-chat-template takes no other option");
        return gt_recognise_template(prog, recognise);
    }
    if (print_tokcfg || render) {
        if (path || decode || system_text || no_think || no_special || add_special || show ||
            stats || (print_tokcfg && (render || chat)))
            return txc_usage_error(prog, usage,
                                   "--chat-render and --print-tokenizer-config take only "
                                   "--package (and --chat with --chat-render)");
        if (!pkg && (print_tokcfg || !chat))
            return txc_usage_error(prog, usage, "--package PKG.smd is required here");
        return print_tokcfg ? gt_print_tokenizer_config(prog, pkg)
                            : gt_chat_render(prog, pkg, render, chat);
    }
    if (pkg)
        return txc_usage_error(prog, usage,
                               "--package goes with --chat-render or --print-tokenizer-config");
    if (!path)
        return txc_usage_error(prog, usage, "--tokenizer FILE is required");
    if (decode && (chat || no_special || add_special)) {
        fprintf(stderr,
                "%s: --decode cannot be combined with --chat, --no-special or "
                "--add-special\n",
                prog);
        return 2;
    }
    int fmt = 0;
    if (chat && (fmt = tx_chat_format_from_name(chat)) < 0) {
        fprintf(stderr, "%s: unknown chat format '%s' (glm4, glm4.5, glm5)\n", prog, chat);
        return 2;
    }
    if (!chat && (system_text || no_think)) {
        fprintf(stderr, "%s: --system and --no-think need --chat\n", prog);
        return 2;
    }

    char err[512];
    struct tx_tokenizer *tok;
    int rc = tx_tokenizer_load_file(path, &tok, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "%s: cannot load tokenizer: %s\n", prog, err);
        return 1;
    }
    char *in;
    size_t in_len;
    if ((rc = txc_read_stream(stdin, &in, &in_len))) {
        fprintf(stderr, "%s: cannot read stdin: %s\n", prog, tx_strerror(rc));
        tx_tokenizer_free(tok);
        return 1;
    }

    int status = 0;
    int32_t *ids = NULL;
    size_t n = 0;
    if (decode) {
        rc = parse_ids(in, in_len, &ids, &n, err, sizeof(err));
        char *text = NULL;
        size_t tl = 0;
        if (!rc)
            rc = tx_tokenizer_decode(tok, ids, n, skip_special ? TX_TOKENIZER_SKIP_SPECIAL : 0,
                                     &text, &tl, err, sizeof(err));
        if (rc) {
            fprintf(stderr, "%s: %s\n", prog, err);
            status = 1;
        } else if (fwrite(text, 1, tl, stdout) != tl) {
            status = 1;
        }
        free(text);
    } else {
        if (chat) {
            if (strlen(in) != in_len) { /* txc_read_stream NUL-terminates */
                fprintf(stderr, "%s: --chat input contains a NUL byte\n", prog);
                rc = TX_EINVAL;
            } else {
                struct tx_chat_message msgs[2];
                size_t nm = 0;
                if (system_text)
                    msgs[nm++] = (struct tx_chat_message){"system", system_text, NULL};
                msgs[nm++] = (struct tx_chat_message){"user", in, NULL};
                unsigned fl = TX_CHAT_ADD_GENERATION_PROMPT | (no_think ? TX_CHAT_NO_THINKING : 0) |
                              (no_special ? TX_CHAT_LITERAL_CONTENT : 0);
                rc = tx_tokenizer_chat_encode(tok, (enum tx_chat_format)fmt, msgs, nm, fl, &ids, &n,
                                              err, sizeof(err));
                if (rc)
                    fprintf(stderr, "%s: %s\n", prog, err);
            }
        } else {
            unsigned fl = (no_special ? TX_TOKENIZER_NO_SPECIAL : 0) |
                          (add_special ? TX_TOKENIZER_ADD_SPECIAL : 0);
            struct timespec t0, t1, c0, c1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
            rc = tx_tokenizer_encode(tok, in, in_len, fl, &ids, &n, err, sizeof(err));
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            if (rc) {
                fprintf(stderr, "%s: %s\n", prog, err);
            } else if (stats) {
                double w =
                    (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
                double c =
                    (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
                fprintf(stderr,
                        "%s: %zu bytes -> %zu tokens in %.3f s (CPU %.3f s): %.0f tokens/s, "
                        "%.0f tokens/CPU-s, %.2f MB/s\n",
                        prog, in_len, n, w, c, w > 0 ? (double)n / w : 0.0,
                        c > 0 ? (double)n / c : 0.0, w > 0 ? (double)in_len / w / 1e6 : 0.0);
            }
        }
        if (rc) {
            status = 1;
        } else {
            for (size_t i = 0; i < n; i++) {
                printf(i ? ",%d" : "%d", ids[i]);
                if (show) {
                    const char *t = tx_tokenizer_id_to_token(tok, ids[i]);
                    fprintf(stderr, "%d\t%s\n", ids[i], t ? t : "?");
                }
            }
            printf("\n");
        }
    }
    free(ids);
    free(in);
    tx_tokenizer_free(tok);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: write error on stdout\n", prog);
        status = 1;
    }
    return status;
}
