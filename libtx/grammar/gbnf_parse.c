/* SPDX-License-Identifier: MIT */
/*
 * GBNF (llama.cpp's grammar format) parsed into struct txg_grammar: rules
 * of alternatives, each a sequence of code-point classes and rule
 * references. Repetitions become generated right-recursive rules, literals
 * sequences of one-code-point classes. Undefined rules and left recursion
 * are errors (the matcher could not terminate). docs/grammar.md.
 */
#include <tx-internal/tx_errors.h>
#include "grammar/grammar_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ELEMS (1u << 22) /* a grammar larger than this is refused */
#define MAX_REPEAT 10000     /* m and n of {m,n} */
#define MAX_DEPTH 200        /* nested groups */

/* a rule while parsing: its alternatives as element lists */
struct seq {
    struct txg_elem *e;
    size_t n, cap;
};

struct brule {
    char *name;
    int defined;
    size_t def_line, def_col; /* first reference, for "undefined" errors */
    struct seq *alts;
    size_t n_alts, cap_alts;
};

struct parser {
    const char *s, *p;
    struct brule *rules;
    size_t n_rules, cap_rules;
    uint32_t *rng;
    size_t n_rng, cap_rng;
    size_t total; /* elements so far */
    int depth;
    char *err;
    size_t errsz;
    int failed;
};

static void where(const struct parser *ps, const char *at, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (const char *q = ps->s; q < at && *q; q++) {
        if (*q == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

__attribute__((format(printf, 3, 4))) static void fail(struct parser *ps, const char *at,
                                                       const char *fmt, ...)
{
    if (ps->failed)
        return;
    ps->failed = 1;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (at) {
        size_t line, col;
        where(ps, at, &line, &col);
        snprintf(ps->err, ps->errsz, "grammar: line %zu, column %zu: %s", line, col, msg);
    } else {
        snprintf(ps->err, ps->errsz, "grammar: %s", msg);
    }
}

static int seq_push(struct parser *ps, struct seq *q, struct txg_elem e)
{
    if (++ps->total > MAX_ELEMS) {
        fail(ps, NULL, "more than %u elements (repetitions too large)", MAX_ELEMS);
        return TX_EINVAL;
    }
    if (txg_grow((void **)&q->e, &q->cap, q->n + 1, sizeof(*q->e))) {
        fail(ps, NULL, "out of memory");
        return TX_ENOMEM;
    }
    q->e[q->n++] = e;
    return 0;
}

static int rule_index(struct parser *ps, const char *name, size_t len, const char *at)
{
    for (size_t i = 0; i < ps->n_rules; i++)
        if (strlen(ps->rules[i].name) == len && !memcmp(ps->rules[i].name, name, len))
            return (int)i;
    if (txg_grow((void **)&ps->rules, &ps->cap_rules, ps->n_rules + 1, sizeof(*ps->rules))) {
        fail(ps, NULL, "out of memory");
        return TX_ENOMEM;
    }
    struct brule *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof(*r));
    r->name = strndup(name, len);
    if (!r->name) {
        fail(ps, NULL, "out of memory");
        return TX_ENOMEM;
    }
    if (at)
        where(ps, at, &r->def_line, &r->def_col);
    return (int)ps->n_rules++;
}

/* a generated rule (groups, repetitions) named after its parent */
static int new_rule(struct parser *ps, const char *base)
{
    char name[160];
    snprintf(name, sizeof(name), "%.120s-%zu", base, ps->n_rules);
    int r = rule_index(ps, name, strlen(name), NULL);
    if (r >= 0)
        ps->rules[r].defined = 1;
    return r;
}

static struct seq *add_alt(struct parser *ps, int rule)
{
    struct brule *r = &ps->rules[rule];
    if (txg_grow((void **)&r->alts, &r->cap_alts, r->n_alts + 1, sizeof(*r->alts))) {
        fail(ps, NULL, "out of memory");
        return NULL;
    }
    struct seq *q = &r->alts[r->n_alts++];
    memset(q, 0, sizeof(*q));
    return q;
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

/* white space and comments; newlines only when nl */
static void skip_space(struct parser *ps, int nl)
{
    for (;;) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || c == '\r' || (nl && c == '\n')) {
            ps->p++;
        } else if (c == '#') {
            while (*ps->p && *ps->p != '\n')
                ps->p++;
        } else {
            return;
        }
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return TX_NONE;
}

/* one UTF-8 code point at p (advanced); -1 on invalid UTF-8 */
static long utf8_next(const char **pp)
{
    const unsigned char *p = (const unsigned char *)*pp;
    unsigned c = p[0];
    int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (n < 0)
        return TX_NONE;
    long cp = n == 0 ? c : n == 1 ? c & 0x1F : n == 2 ? c & 0x0F : c & 0x07;
    for (int i = 1; i <= n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return TX_NONE;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    *pp += n + 1;
    return cp;
}

/* a character of a literal or class: an escape or a UTF-8 code point */
static long parse_char(struct parser *ps)
{
    const char *at = ps->p;
    if (*ps->p == '\\') {
        ps->p++;
        char c = *ps->p++;
        int nhex = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (nhex) {
            long v = 0;
            for (int i = 0; i < nhex; i++) {
                int h = hexval(*ps->p);
                if (h < 0) {
                    fail(ps, at, "\\%c needs %d hex digits", c, nhex);
                    return TX_EINVAL;
                }
                v = v * 16 + h;
                ps->p++;
            }
            if (v > 0x10FFFF) {
                fail(ps, at, "code point U+%lX is out of range", v);
                return TX_EINVAL;
            }
            return v;
        }
        switch (c) {
        case 'n':
            return '\n';
        case 't':
            return '\t';
        case 'r':
            return '\r';
        case '0':
            return 0;
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
            return (unsigned char)c;
        default:
            fail(ps, at, "unknown escape '\\%c'", c ? c : '0');
            return TX_EINVAL;
        }
    }
    long cp = utf8_next(&ps->p);
    if (cp < 0)
        fail(ps, at, "invalid UTF-8");
    return cp;
}

static int add_range(struct parser *ps, uint32_t lo, uint32_t hi)
{
    if (txg_grow((void **)&ps->rng, &ps->cap_rng, ps->n_rng + 2, sizeof(*ps->rng))) {
        fail(ps, NULL, "out of memory");
        return TX_ENOMEM;
    }
    ps->rng[ps->n_rng++] = lo;
    ps->rng[ps->n_rng++] = hi;
    return 0;
}

static int parse_alternates(struct parser *ps, int rule, int nested);

/* {m}, {m,}, {m,n}: *m, *n (-1: unbounded); 0 or TX_EINVAL */
static int parse_braces(struct parser *ps, long *m, long *n)
{
    const char *at = ps->p;
    ps->p++;
    skip_space(ps, 1);
    char *end;
    *m = strtol(ps->p, &end, 10);
    if (end == ps->p || *m < 0) {
        fail(ps, at, "expected a count in {m,n}");
        return TX_EINVAL;
    }
    ps->p = end;
    skip_space(ps, 1);
    *n = *m;
    if (*ps->p == ',') {
        ps->p++;
        skip_space(ps, 1);
        if (*ps->p == '}') {
            *n = -1;
        } else {
            *n = strtol(ps->p, &end, 10);
            if (end == ps->p) {
                fail(ps, at, "expected a count after ',' in {m,n}");
                return TX_EINVAL;
            }
            ps->p = end;
            skip_space(ps, 1);
        }
    }
    if (*ps->p != '}') {
        fail(ps, at, "expected '}'");
        return TX_EINVAL;
    }
    ps->p++;
    if (*m > MAX_REPEAT || *n > MAX_REPEAT || (*n >= 0 && *n < *m)) {
        fail(ps, at, "bad repetition {%ld,%ld}", *m, *n);
        return TX_EINVAL;
    }
    return 0;
}

/* Replace the last item (elements [start, q->n) of q) by its repetition
 * {m,n} (n -1: unbounded). q belongs to rule `rule`. */
static int repeat_last(struct parser *ps, int rule, int alt, size_t start, long m, long n)
{
    struct seq *q = &ps->rules[rule].alts[alt];
    size_t len = q->n - start;
    struct txg_elem *item = malloc((len ? len : 1) * sizeof(*item));
    if (!item) {
        fail(ps, NULL, "out of memory");
        return TX_ENOMEM;
    }
    if (len) /* an empty item may have no elements at all (q->e NULL) */
        memcpy(item, q->e + start, len * sizeof(*item));
    q->n = start;
    int rc = 0;
    char base[128];
    snprintf(base, sizeof(base), "%s", ps->rules[rule].name);
    for (long i = 0; i < m && !rc; i++)
        for (size_t k = 0; k < len && !rc; k++)
            rc = seq_push(ps, &ps->rules[rule].alts[alt], item[k]);
    if (!rc && n < 0) {
        /* R ::= item R | (empty) */
        int r = new_rule(ps, base);
        struct seq *a = r < 0 ? NULL : add_alt(ps, r);
        rc = a ? 0 : -1;
        for (size_t k = 0; k < len && !rc; k++)
            rc = seq_push(ps, &ps->rules[r].alts[0], item[k]);
        if (!rc)
            rc = seq_push(ps, &ps->rules[r].alts[0], (struct txg_elem){TXG_REF, 0, (uint32_t)r, 0});
        if (!rc && !add_alt(ps, r))
            rc = -1;
        if (!rc)
            rc = seq_push(ps, &ps->rules[rule].alts[alt],
                          (struct txg_elem){TXG_REF, 0, (uint32_t)r, 0});
    } else if (!rc && n > m) {
        /* O1 ::= item | (empty); Ok ::= item O(k-1) | (empty) */
        int prev = -1;
        for (long k = 0; k < n - m && !rc; k++) {
            int r = new_rule(ps, base);
            if (r < 0 || !add_alt(ps, r)) {
                rc = -1;
                break;
            }
            for (size_t j = 0; j < len && !rc; j++)
                rc = seq_push(ps, &ps->rules[r].alts[0], item[j]);
            if (!rc && prev >= 0)
                rc = seq_push(ps, &ps->rules[r].alts[0],
                              (struct txg_elem){TXG_REF, 0, (uint32_t)prev, 0});
            if (!rc && !add_alt(ps, r))
                rc = -1;
            prev = r;
        }
        if (!rc)
            rc = seq_push(ps, &ps->rules[rule].alts[alt],
                          (struct txg_elem){TXG_REF, 0, (uint32_t)prev, 0});
    }
    free(item);
    return rc;
}

/* One sequence into alternative `alt` of `rule`. */
static int parse_sequence(struct parser *ps, int rule, int alt, int nested)
{
    size_t last = (size_t)-1;
    for (;;) {
        skip_space(ps, nested);
        char c = *ps->p;
        const char *at = ps->p;
        size_t start = ps->rules[rule].alts[alt].n;
        if (c == '"') {
            ps->p++;
            while (*ps->p && *ps->p != '"' && !ps->failed) {
                if (*ps->p == '\n') {
                    fail(ps, at, "unterminated literal");
                    return TX_EINVAL;
                }
                long cp = parse_char(ps);
                if (cp < 0)
                    return TX_EINVAL;
                uint32_t ri = (uint32_t)ps->n_rng;
                if (add_range(ps, (uint32_t)cp, (uint32_t)cp) ||
                    seq_push(ps, &ps->rules[rule].alts[alt],
                             (struct txg_elem){TXG_CHARS, 0, ri, 1}))
                    return TX_EINVAL;
            }
            if (*ps->p != '"') {
                fail(ps, at, "unterminated literal");
                return TX_EINVAL;
            }
            ps->p++;
            last = start;
        } else if (c == '[') {
            ps->p++;
            int neg = 0;
            if (*ps->p == '^') {
                neg = 1;
                ps->p++;
            }
            uint32_t ri = (uint32_t)ps->n_rng;
            while (*ps->p && *ps->p != ']') {
                long lo = parse_char(ps), hi = lo;
                if (lo < 0)
                    return TX_EINVAL;
                if (*ps->p == '-' && ps->p[1] && ps->p[1] != ']') {
                    ps->p++;
                    hi = parse_char(ps);
                    if (hi < 0)
                        return TX_EINVAL;
                    if (hi < lo) {
                        fail(ps, at, "character range is backwards");
                        return TX_EINVAL;
                    }
                }
                if (add_range(ps, (uint32_t)lo, (uint32_t)hi))
                    return TX_EINVAL;
            }
            if (*ps->p != ']') {
                fail(ps, at, "unterminated character class");
                return TX_EINVAL;
            }
            ps->p++;
            if (!neg && ps->n_rng == ri) {
                fail(ps, at, "empty character class");
                return TX_EINVAL;
            }
            if (seq_push(ps, &ps->rules[rule].alts[alt],
                         (struct txg_elem){TXG_CHARS, (uint8_t)neg, ri,
                                           (uint32_t)(ps->n_rng - ri) / 2}))
                return TX_EINVAL;
            last = start;
        } else if (c == '.') {
            ps->p++;
            if (seq_push(ps, &ps->rules[rule].alts[alt],
                         (struct txg_elem){TXG_CHARS, 1, (uint32_t)ps->n_rng, 0}))
                return TX_EINVAL;
            last = start;
        } else if (is_name_char(c)) {
            const char *b = ps->p;
            while (is_name_char(*ps->p))
                ps->p++;
            /* "name ::=" starts the next rule: this sequence ends here */
            const char *save = ps->p;
            skip_space(ps, 0);
            if (!nested && !strncmp(ps->p, "::=", 3)) {
                ps->p = b;
                return 0;
            }
            ps->p = save;
            int r = rule_index(ps, b, (size_t)(ps->p - b), b);
            if (r < 0 || seq_push(ps, &ps->rules[rule].alts[alt],
                                  (struct txg_elem){TXG_REF, 0, (uint32_t)r, 0}))
                return TX_EINVAL;
            last = start;
        } else if (c == '(') {
            ps->p++;
            if (++ps->depth > MAX_DEPTH) {
                fail(ps, at, "groups nested deeper than %d", MAX_DEPTH);
                return TX_EINVAL;
            }
            int r = new_rule(ps, ps->rules[rule].name);
            if (r < 0 || parse_alternates(ps, r, 1))
                return TX_EINVAL;
            ps->depth--;
            skip_space(ps, 1);
            if (*ps->p != ')') {
                fail(ps, at, "expected ')' to close this group");
                return TX_EINVAL;
            }
            ps->p++;
            if (seq_push(ps, &ps->rules[rule].alts[alt],
                         (struct txg_elem){TXG_REF, 0, (uint32_t)r, 0}))
                return TX_EINVAL;
            last = start;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last == (size_t)-1) {
                fail(ps, at, "'%c' follows nothing", c);
                return TX_EINVAL;
            }
            long m = 0, n = -1;
            if (c == '{') {
                if (parse_braces(ps, &m, &n))
                    return TX_EINVAL;
            } else {
                ps->p++;
                m = c == '+' ? 1 : 0;
                n = c == '?' ? 1 : -1;
            }
            if (repeat_last(ps, rule, alt, last, m, n))
                return TX_EINVAL;
            last = (size_t)-1;
        } else {
            return 0; /* '|', ')', end of line or text: the caller decides */
        }
        if (ps->failed)
            return TX_EINVAL;
    }
}

static int parse_alternates(struct parser *ps, int rule, int nested)
{
    for (;;) {
        struct seq *q = add_alt(ps, rule);
        if (!q)
            return TX_EINVAL;
        int alt = (int)ps->rules[rule].n_alts - 1;
        if (parse_sequence(ps, rule, alt, nested))
            return TX_EINVAL;
        if (!nested) {
            /* an alternative may continue on the next line with '|' */
            const char *save = ps->p;
            skip_space(ps, 1);
            if (*ps->p != '|')
                ps->p = save;
        }
        if (*ps->p != '|')
            return 0;
        ps->p++;
        skip_space(ps, 1);
    }
}

static int parse_rule(struct parser *ps)
{
    const char *at = ps->p;
    const char *b = ps->p;
    while (is_name_char(*ps->p))
        ps->p++;
    if (ps->p == b) {
        fail(ps, at, "expected a rule name, found '%c'", *ps->p);
        return TX_EINVAL;
    }
    size_t len = (size_t)(ps->p - b);
    skip_space(ps, 0);
    if (strncmp(ps->p, "::=", 3)) {
        fail(ps, ps->p, "expected '::=' after the rule name '%.*s'", (int)len, b);
        return TX_EINVAL;
    }
    ps->p += 3;
    skip_space(ps, 1);
    int r = rule_index(ps, b, len, b);
    if (r < 0)
        return TX_EINVAL;
    if (ps->rules[r].defined) {
        fail(ps, at, "rule '%.*s' is defined twice", (int)len, b);
        return TX_EINVAL;
    }
    ps->rules[r].defined = 1;
    if (parse_alternates(ps, r, 0))
        return TX_EINVAL;
    skip_space(ps, 0);
    /* a name here starts the next rule (parse_sequence stopped at "name ::=") */
    if (*ps->p && *ps->p != '\n' && !is_name_char(*ps->p)) {
        fail(ps, ps->p, "unexpected '%c'", *ps->p);
        return TX_EINVAL;
    }
    return 0;
}

/* ---- checks ------------------------------------------------------------- */

static int *nullable_rules(const struct txg_grammar *g)
{
    int *nul = calloc(g->n_rules ? g->n_rules : 1, sizeof(*nul));
    if (!nul)
        return NULL;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t r = 0; r < g->n_rules; r++) {
            if (nul[r])
                continue;
            const struct txg_rule *ru = &g->rules[r];
            for (uint32_t a = 0; a < ru->n_alts && !nul[r]; a++) {
                const struct txg_elem *e = &g->el[g->alts[ru->first_alt + a]];
                while (e->type == TXG_REF && nul[e->a])
                    e++;
                if (e->type == TXG_END) {
                    nul[r] = 1;
                    changed = 1;
                }
            }
        }
    }
    return nul;
}

/* DFS over "may start with" edges: 1 if rule r reaches itself */
static int left_rec(const struct txg_grammar *g, const int *nul, uint32_t r, uint8_t *state,
                    uint32_t *cycle)
{
    state[r] = 1; /* on the path */
    const struct txg_rule *ru = &g->rules[r];
    for (uint32_t a = 0; a < ru->n_alts; a++) {
        for (const struct txg_elem *e = &g->el[g->alts[ru->first_alt + a]]; e->type == TXG_REF;
             e++) {
            if (state[e->a] == 1) {
                *cycle = e->a;
                return 1;
            }
            if (!state[e->a] && left_rec(g, nul, e->a, state, cycle))
                return 1;
            if (!nul[e->a])
                break;
        }
    }
    state[r] = 2;
    return 0;
}

void txg_grammar_free(struct txg_grammar *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_rules; i++)
        free(g->rules[i].name);
    free(g->rules);
    free(g->el);
    free(g->rng);
    free(g->alts);
    free(g);
}

static void parser_free(struct parser *ps)
{
    for (size_t i = 0; i < ps->n_rules; i++) {
        free(ps->rules[i].name);
        for (size_t a = 0; a < ps->rules[i].n_alts; a++)
            free(ps->rules[i].alts[a].e);
        free(ps->rules[i].alts);
    }
    free(ps->rules);
    free(ps->rng);
}

/* the parsed rules flattened into g */
static struct txg_grammar *flatten(struct parser *ps)
{
    struct txg_grammar *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    size_t nel = 0, nalt = 0;
    for (size_t i = 0; i < ps->n_rules; i++) {
        nalt += ps->rules[i].n_alts;
        for (size_t a = 0; a < ps->rules[i].n_alts; a++)
            nel += ps->rules[i].alts[a].n + 1;
    }
    g->el = malloc((nel ? nel : 1) * sizeof(*g->el));
    g->alts = malloc((nalt ? nalt : 1) * sizeof(*g->alts));
    g->rules = calloc(ps->n_rules ? ps->n_rules : 1, sizeof(*g->rules));
    if (!g->el || !g->alts || !g->rules) {
        txg_grammar_free(g);
        return NULL;
    }
    g->n_rules = ps->n_rules;
    for (size_t i = 0; i < ps->n_rules; i++) {
        struct brule *b = &ps->rules[i];
        g->rules[i].name = b->name;
        b->name = NULL;
        g->rules[i].first_alt = (uint32_t)g->n_alts;
        g->rules[i].n_alts = (uint32_t)b->n_alts;
        for (size_t a = 0; a < b->n_alts; a++) {
            g->alts[g->n_alts++] = (uint32_t)g->n_el;
            if (b->alts[a].n) /* an empty alternative has no elements */
                memcpy(g->el + g->n_el, b->alts[a].e, b->alts[a].n * sizeof(*g->el));
            g->n_el += b->alts[a].n;
            g->el[g->n_el++] = (struct txg_elem){TXG_END, 0, 0, 0};
        }
    }
    g->rng = ps->rng;
    g->n_rng = ps->n_rng;
    ps->rng = NULL;
    return g;
}

struct txg_grammar *txg_grammar_parse(const char *text, char *err, size_t errsz)
{
    struct parser ps;
    memset(&ps, 0, sizeof(ps));
    char dummy[8];
    ps.err = err && errsz ? err : dummy;
    ps.errsz = err && errsz ? errsz : sizeof(dummy);
    ps.s = ps.p = text ? text : "";
    for (;;) {
        skip_space(&ps, 1);
        if (!*ps.p)
            break;
        if (parse_rule(&ps))
            break;
    }
    struct txg_grammar *g = NULL;
    if (!ps.failed) {
        int root = -1;
        for (size_t i = 0; i < ps.n_rules; i++) {
            if (!ps.rules[i].defined) {
                snprintf(ps.err, ps.errsz, "grammar: line %zu, column %zu: rule '%s' is not defined",
                         ps.rules[i].def_line, ps.rules[i].def_col, ps.rules[i].name);
                ps.failed = 1;
                break;
            }
            if (!strcmp(ps.rules[i].name, "root"))
                root = (int)i;
        }
        if (!ps.failed && root < 0) {
            snprintf(ps.err, ps.errsz, "grammar: no rule 'root' (the start rule)");
            ps.failed = 1;
        }
        if (!ps.failed) {
            g = flatten(&ps);
            if (!g) {
                snprintf(ps.err, ps.errsz, "grammar: out of memory");
                ps.failed = 1;
            } else {
                g->root = (uint32_t)root;
            }
        }
    }
    if (g) {
        int *nul = nullable_rules(g);
        uint8_t *state = calloc(g->n_rules, 1);
        uint32_t cyc = 0;
        int bad = !nul || !state;
        for (size_t r = 0; !bad && r < g->n_rules; r++)
            if (!state[r] && left_rec(g, nul, (uint32_t)r, state, &cyc))
                bad = 2;
        if (bad == 2)
            snprintf(ps.err, ps.errsz, "grammar: rule '%s' is left-recursive", g->rules[cyc].name);
        else if (bad)
            snprintf(ps.err, ps.errsz, "grammar: out of memory");
        free(nul);
        free(state);
        if (bad) {
            txg_grammar_free(g);
            g = NULL;
        }
    }
    parser_free(&ps);
    return g;
}
