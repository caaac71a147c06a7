/* SPDX-License-Identifier: MIT */
/*
 * The Jinja renderer's internals (libtx/tokenizer/jinja_*.c): tokens, the
 * syntax tree, values and the render state shared by the lexer, the parser,
 * the evaluator and the filters / tests / methods. The public interface is
 * include/tx/tx_jinja.h; docs/chat-template.md describes the language
 * subset and the limits.
 *
 * Memory: everything a compile or a render allocates comes from one arena
 * (struct jarena), freed at once; the arena counts its bytes against the
 * render's memory limit, so an untrusted template cannot allocate without
 * bound. Values are small structs passed by value; strings, lists and
 * dicts live in the arena and are immutable once built, except a
 * namespace()'s attributes (JV_NS), which `set ns.attr = ...` changes.
 */
#ifndef TX_JINJA_INTERNAL_H
#define TX_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- arena ---- */

struct jarena_chunk;
struct jarena {
    struct jarena_chunk *head;
    size_t used;  /* bytes handed out (all chunks) */
    size_t limit; /* 0: none */
};

/* NULL when the limit or malloc refuses (the caller raises). */
void *jarena_alloc(struct jarena *a, size_t n);
void jarena_free(struct jarena *a);

/* ---- tokens (jinja_lex.c) ---- */

enum jtok {
    JT_EOF,
    JT_DATA,       /* template text outside tags (s, n) */
    JT_VAR_BEGIN,  /* {{ */
    JT_VAR_END,    /* }} */
    JT_BLOCK_BEGIN, /* {% */
    JT_BLOCK_END,  /* %} */
    JT_NAME,
    JT_STRING, /* s, n: the decoded literal */
    JT_INT,
    JT_FLOAT,
    JT_OP, /* s, n: the operator text ("==", "(", "|", ...) */
};

struct jtoken {
    enum jtok t;
    const char *s;
    size_t n;
    int64_t i;
    double f;
    int line, col;
};

/* The tokens of src (already newline-normalised by the caller), in the
 * arena; -1 with err set (line and column) on a lexical error. */
int jinja_lex(struct jarena *a, const char *src, size_t len, struct jtoken **out, size_t *n,
              char *err, size_t errsz);

/* ---- syntax tree (jinja_parse.c) ---- */

enum jnode_kind {
    /* statements */
    JN_BODY, /* kids[0..n) */
    JN_DATA, /* s, n */
    JN_OUTPUT, /* a */
    JN_IF,     /* a: test, b: then, c: else (JN_IF for elif or JN_BODY or NULL) */
    JN_FOR,    /* targets (names), a: iterable, b: body, c: else, d: filter */
    JN_SET,    /* targets or a: JN_ATTR target (namespace), b: value */
    JN_SET_BLOCK, /* targets[0], b: body */
    JN_MACRO,  /* s: name, params (names), kids: defaults (NULL = none), b: body */
    JN_BREAK,
    JN_CONTINUE,
    JN_WITH, /* params / kids: assignments, b: body */
    JN_FILTER_BLOCK, /* a: filter chain applied to the body's text (a JN_FILTER whose a is NULL) */
    /* expressions */
    JN_CONST, /* v */
    JN_NAME,  /* s */
    JN_LIST,  /* kids */
    JN_TUPLE, /* kids */
    JN_DICT,  /* kids: key, value, key, value ... */
    JN_ATTR,  /* a: object, s: name */
    JN_ITEM,  /* a: object, b: key */
    JN_SLICE, /* a: object, b, c, d: start, stop, step (NULL: absent) */
    JN_CALL,  /* a: callee, kids: args, params: kwarg names (NULL for positional) */
    JN_FILTER, /* a: operand, s: filter name, kids/params: args */
    JN_TEST,   /* a: operand, s: test name, kids/params: args, neg */
    JN_UNARY,  /* op, a */
    JN_BINARY, /* op, a, b */
    JN_COMPARE, /* a, kids: operands, ops */
    JN_AND,
    JN_OR,
    JN_NOT,
    JN_COND, /* a: test, b: then, c: else (NULL: undefined) */
};

struct jv;
struct jnode;

enum jop {
    JO_ADD,
    JO_SUB,
    JO_MUL,
    JO_DIV,
    JO_FLOORDIV,
    JO_MOD,
    JO_POW,
    JO_CONCAT,
    JO_NEG,
    JO_POS,
    JO_EQ,
    JO_NE,
    JO_LT,
    JO_LE,
    JO_GT,
    JO_GE,
    JO_IN,
    JO_NOTIN,
};

/* ---- values (jinja_value.c) ---- */

enum jv_type {
    JV_UNDEF,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_TUPLE,
    JV_DICT,
    JV_NS,     /* namespace(): a dict whose entries `set ns.x` changes */
    JV_MACRO,  /* u.m */
    JV_FUNC,   /* a global function: u.fn (enum jfunc) */
    JV_METHOD, /* a bound method: u.bm */
    JV_LOOP,   /* u.d: the loop object's attributes (plus cycle) */
};

struct jlist;
struct jdict;
struct jbound;

struct jv {
    enum jv_type t;
    size_t n; /* JV_STR: bytes; JV_UNDEF: name length */
    union {
        bool b;
        int64_t i;
        double f;
        const char *s; /* JV_STR (not NUL-terminated); JV_UNDEF: the name or NULL */
        struct jlist *l;
        struct jdict *d;
        const struct jnode *m;
        int fn;
        struct jbound *bm;
    } u;
};

struct jlist {
    size_t n, cap;
    struct jv *v;
};

struct jdict {
    size_t n, cap;
    struct jv *k; /* keys (strings, or numbers / None / bools) */
    struct jv *v;
};

struct jbound {
    struct jv self;
    const char *name;
};

struct jnode {
    enum jnode_kind kind;
    int line, col;
    int op;
    bool neg;
    const char *s;
    size_t n;
    struct jnode *a, *b, *c, *d;
    struct jnode **kids;
    size_t nkids;
    const char **params; /* names: for targets, macro params, kwarg names */
    size_t nparams;
    int *ops; /* JN_COMPARE */
    struct jv v;
};

struct jnode *jinja_parse(struct jarena *a, const struct jtoken *toks, size_t ntoks, char *err,
                          size_t errsz);

/* ---- render state (jinja_eval.c) ---- */

struct jframe {
    struct jframe *parent;
    struct jdict vars;
};

struct jrender {
    struct jarena *arena;
    jmp_buf fail;
    char *err;
    size_t errsz;
    int status; /* the tx_status of the failure */
    int raised; /* the failure is the template's raise_exception (err: its message) */
    uint64_t steps, max_steps;
    size_t out_max;
    int depth, max_depth;
    struct jframe *root;
    /* output of the innermost capture (a macro call or a set block nests) */
    char *out;
    size_t out_n, out_cap;
    long long now; /* strftime_now's time (seconds since the epoch) */
};

/* Run root with globals as the root frame: 0, or the failure's status
 * with r->err set. */
int jinja_run(struct jrender *r, const struct jnode *root, struct jframe *globals);

/* Raise an error at node (NULL: no position): longjmps out of the render. */
_Noreturn void jr_fail(struct jrender *r, const struct jnode *at, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void *jr_alloc(struct jrender *r, size_t n);
void jr_step(struct jrender *r, const struct jnode *at);

/* values */
struct jv jv_undef(const char *name, size_t n);
struct jv jv_none(void);
struct jv jv_bool(bool b);
struct jv jv_int(int64_t i);
struct jv jv_float(double f);
struct jv jv_str(struct jrender *r, const char *s, size_t n); /* copies */
struct jv jv_str_ref(const char *s, size_t n);                /* no copy (arena / static) */
struct jv jv_cstr(const char *s);                             /* static text */
struct jv jv_list_new(struct jrender *r, size_t cap);
struct jv jv_dict_new(struct jrender *r, size_t cap);
void jv_list_push(struct jrender *r, struct jv list, struct jv x);
void jv_dict_set(struct jrender *r, struct jdict *d, struct jv k, struct jv v);
/* the entry's value or NULL */
struct jv *jv_dict_get(const struct jdict *d, struct jv k);
struct jv *jv_dict_gets(const struct jdict *d, const char *k, size_t n);
bool jv_truthy(struct jv v);
/* int, float or bool (Python's numbers), and their value as a double / an integer */
bool jv_is_num(struct jv v);
double jv_num_f(struct jv v);
int64_t jv_num_i(struct jv v);
bool jv_equal(struct jv a, struct jv b);
/* Python's a < b ordering; fails on incomparable types */
int jv_compare(struct jrender *r, const struct jnode *at, struct jv a, struct jv b);
const char *jv_type_name(struct jv v);
bool jv_is_str(struct jv v);
bool jv_is_seq(struct jv v); /* list or tuple */
bool jv_is_mapping(struct jv v);

/* text building */
struct jbuf {
    char *p;
    size_t n, cap;
};
void jb_put(struct jrender *r, struct jbuf *b, const char *s, size_t n);
void jb_puts(struct jrender *r, struct jbuf *b, const char *s);
void jb_putc(struct jrender *r, struct jbuf *b, char c);
struct jv jb_value(struct jbuf *b);

/* str(v) and repr(v) as Python prints them */
void jv_str_append(struct jrender *r, struct jbuf *b, struct jv v);
void jv_repr_append(struct jrender *r, struct jbuf *b, struct jv v);
struct jv jv_to_str(struct jrender *r, struct jv v);
void jv_float_repr(double f, char *buf, size_t sz);

/* json.dumps(v, ensure_ascii, indent (<0: none), separators, sort_keys) */
struct jjson_opts {
    bool ensure_ascii;
    int indent; /* < 0: on one line */
    const char *item_sep, *key_sep;
    size_t item_sep_n, key_sep_n;
    bool sort_keys;
};
void jv_json_append(struct jrender *r, const struct jnode *at, struct jbuf *b, struct jv v,
                    const struct jjson_opts *o, int level);

/* UTF-8 helpers */
size_t ju_len(const char *s, size_t n); /* code points */
/* byte offset of code point index cp (clamped to n) */
size_t ju_offset(const char *s, size_t n, size_t cp);
bool ju_isspace(uint32_t c);
/* decode one code point at s (n > 0), setting *len; invalid bytes: the byte */
uint32_t ju_decode(const char *s, size_t n, size_t *len);

/* ---- evaluator pieces used by the filters (jinja_eval.c) ---- */

struct jargs {
    size_t n;
    struct jv *v;
    const char **names; /* NULL entries: positional */
};
/* the argument named name, else positional index pos, else NULL */
struct jv *jargs_get(struct jargs *a, size_t pos, const char *name);
struct jv jr_call(struct jrender *r, const struct jnode *at, struct jv callee, struct jargs *args);
struct jv jr_getattr(struct jrender *r, const struct jnode *at, struct jv obj, const char *name,
                     size_t n);
struct jv jr_getitem(struct jrender *r, const struct jnode *at, struct jv obj, struct jv key);
/* the elements of an iterable (list, tuple, dict keys, string characters,
 * undefined: none) as a list value */
struct jv jr_iterate(struct jrender *r, const struct jnode *at, struct jv v);

/* ---- filters, tests, methods and globals (jinja_filters.c, jinja_methods.c) ---- */

/* Python's str.upper() / lower() of s (per code point) */
struct jv ju_case(struct jrender *r, struct jv s, bool upper);
/* Python's str.strip(chars) (chars NULL: white space); which: 1 left, 2 right, 3 both */
struct jv ju_strip(struct jrender *r, struct jv s, const struct jv *chars, int which);

struct jv jinja_filter(struct jrender *r, const struct jnode *at, const char *name, struct jv x,
                       struct jargs *args);
bool jinja_test(struct jrender *r, const struct jnode *at, const char *name, struct jv x,
                struct jargs *args);
bool jinja_has_filter(const char *name);
bool jinja_has_test(const char *name);

enum jfunc {
    JF_RANGE,
    JF_NAMESPACE,
    JF_RAISE,
    JF_STRFTIME_NOW,
    JF_DICT,
    JF_LOOP_CYCLE,
};
/* a global function by name, -1 if none */
int jinja_global_func(const char *name, size_t n);
struct jv jinja_call_func(struct jrender *r, const struct jnode *at, int fn, struct jargs *args,
                          struct jv self);
/* obj.name when obj's type has a method name (a bound method), else undefined */
bool jinja_has_method(struct jv obj, const char *name, size_t n);
/* a list's or dict's mutating method (append, pop, update...): refused */
bool jinja_is_unsafe_method(struct jv obj, const char *name, size_t n);
struct jv jinja_call_method(struct jrender *r, const struct jnode *at, struct jbound *bm,
                            struct jargs *args);

#endif
