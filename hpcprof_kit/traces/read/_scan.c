/* The trace table's columns straight from chrome-trace JSON text, for the plain case.
 *
 * scan(buf, start, stop, raw_keys, new_key) reads the comma-separated JSON objects in
 * buf[start:stop] (one slice of traceEvents, cut by stream.py at the end of an event) and
 * returns their columns. Whenever a slice holds anything outside the plain case (a field of
 * an unexpected type, an exponent or more than 3 decimals in "ts", an id that is not an
 * integer, an empty {} event, text that is not valid JSON or not UTF-8, a repeated field...)
 * it returns None and the reader decodes that slice with msgspec instead, so the two paths
 * always give the same table (tests/test_traces_scan.py compares them on real and random
 * traces).
 *
 * Kept rows (ph X, i, I) get: a key code for (ph, cat, name, pid, tid), looked up in
 * raw_keys by the raw JSON text of those five values (new_key(raw) decodes a new one and
 * returns its code, or None to fall back); ts in integer ns read from its digits; dur in ns
 * as rint(dur * 1000) of the correctly rounded double; and the integer ids of args
 * (correlation, External id, device, stream, or sycl queue where there is no stream).
 * M events come back as (start, stop) offsets for the reader to decode. The last item says
 * which argument keys the kept rows' args hold at their top level, bit i for ARG_KEYS[i] of
 * events.py ("bytes", "size", "Collective name", "Input Dims", "grid").
 *
 * Given a dict texts, a sixth item holds the arguments the rules read (kept_args.py), so no
 * file is read twice: for each kept event whose args hold one of the keys in anchors (bits as
 * above) and a byte count, a collective's name or input types, a row of rule columns (ints;
 * -1 where absent; kept_args.SCANNED), each text a code in texts (its raw JSON -> code, shared
 * by a file's slices), and the (row, start, stop) of every such
 * event holding a value outside the plain case (a size as text, a negative or repeated one, an
 * escaped name), which the reader decodes itself.
 *
 * Given memory=1 as well, a seventh item holds the args of every "[memory]" instant event (ph
 * i or I, that name as plain text: the allocations and frees of profile_memory=True), so the
 * memory pane reads no file a second time either: a row of memory columns each (the event's key
 * code and ts, then Bytes, Total Allocated, Total Reserved, Device Type, Device Id and Addr,
 * 0 where absent, and a bit each for which were numbers; memory_events.scanned), and the
 * (row, start, stop) of every such event holding a value outside the plain case (a float, a
 * string, a repeated key), which the reader decodes itself. Without it both are empty.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define FALLBACK 1
#define MAX_DEPTH 64
#define MAX_US 9.2e15                   /* |µs| from here on overflows int64 ns */
#define MAX_WHOLE_US 9007199254740992LL /* 2**53: beyond it µs are not exact in a double */

typedef struct {
    const unsigned char *p, *end;
} Cur;

typedef struct {
    const unsigned char *s; /* raw JSON text of a value (quotes included); NULL: absent */
    Py_ssize_t n;
} Span;

typedef struct {
    int64_t *v;
    Py_ssize_t len, cap;
} Col;

enum { C_KEY, C_TS, C_DUR, C_CORR, C_EXT, C_DEV, C_STREAM, N_COLS };

static int push(Col *c, int64_t x)
{
    if (c->len == c->cap) {
        Py_ssize_t cap = c->cap ? 2 * c->cap : 1024;
        int64_t *v = PyMem_Realloc(c->v, (size_t)cap * sizeof(int64_t));
        if (!v)
            return -1;
        c->v = v;
        c->cap = cap;
    }
    c->v[c->len++] = x;
    return 0;
}

static inline void ws(Cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

static inline int is_digit(unsigned char ch) { return ch >= '0' && ch <= '9'; }

static int hex4(const unsigned char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char ch = p[i];
        v <<= 4;
        if (is_digit(ch))
            v |= ch - '0';
        else if (ch >= 'a' && ch <= 'f')
            v |= ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F')
            v |= ch - 'A' + 10;
        else
            return FALLBACK;
    }
    *out = v;
    return 0;
}

/* Length of the valid UTF-8 sequence at p (first byte >= 0x80), or 0 when it is not one. */
static int utf8_len(const unsigned char *p, const unsigned char *end)
{
    unsigned char b = p[0];
    int n;
    unsigned lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF)
        n = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        if (b == 0xE0)
            lo = 0xA0;
        if (b == 0xED)
            hi = 0x9F; /* no surrogates */
    }
    else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        if (b == 0xF0)
            lo = 0x90;
        if (b == 0xF4)
            hi = 0x8F;
    }
    else
        return 0;
    if (end - p < n)
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

/* Bytes that stand for themselves inside a JSON string (not '"', '\\', control or non-ASCII). */
static unsigned char PLAIN[256];

static void init_plain(void)
{
    for (int b = 0x20; b < 0x80; b++)
        PLAIN[b] = b != '"' && b != '\\';
}

/* A JSON string at c->p: its raw text (quotes included) in *out, *escaped when it has a
 * backslash. FALLBACK for an unterminated string, a raw control character, a bad escape or
 * a lone surrogate, or bytes that are not UTF-8. */
static int string(Cur *c, Span *out, int *escaped)
{
    const unsigned char *s = c->p, *p, *end = c->end;
    int esc = 0;
    if (s >= end || *s != '"')
        return FALLBACK;
    p = s + 1;
    for (;;) {
        while (p < end && PLAIN[*p])
            p++;
        if (p >= end || *p < 0x20)
            return FALLBACK;
        if (*p == '"')
            break;
        if (*p >= 0x80) {
            int n = utf8_len(p, end);
            if (!n)
                return FALLBACK;
            p += n;
            continue;
        }
        esc = 1; /* a backslash */
        if (++p >= end)
            return FALLBACK;
        switch (*p) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p++;
            break;
        case 'u': {
            unsigned v, low;
            if (end - p < 5 || hex4(p + 1, &v) || (v >= 0xDC00 && v <= 0xDFFF))
                return FALLBACK; /* not hex, or a low surrogate first */
            p += 5;
            if (v >= 0xD800 && v <= 0xDBFF) { /* a high surrogate: its low one must follow */
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &low) ||
                    low < 0xDC00 || low > 0xDFFF)
                    return FALLBACK;
                p += 6;
            }
            break;
        }
        default:
            return FALLBACK;
        }
    }
    out->s = s;
    out->n = p + 1 - s;
    c->p = p + 1;
    if (escaped)
        *escaped = esc;
    return 0;
}

typedef struct {
    int neg, int_digits, frac_digits, has_exp;
    const unsigned char *int_s, *frac_s;
} Num;

/* A JSON number at c->p, by the JSON grammar (no leading zeros, digits after a point). */
static int number(Cur *c, Span *out, Num *num)
{
    const unsigned char *p = c->p, *end = c->end, *s = p;
    memset(num, 0, sizeof(*num));
    if (p < end && *p == '-') {
        num->neg = 1;
        p++;
    }
    if (p >= end || !is_digit(*p))
        return FALLBACK;
    num->int_s = p;
    if (*p == '0')
        p++;
    else
        while (p < end && is_digit(*p))
            p++;
    num->int_digits = (int)(p - num->int_s);
    if (p < end && *p == '.') {
        num->frac_s = ++p;
        while (p < end && is_digit(*p))
            p++;
        num->frac_digits = (int)(p - num->frac_s);
        if (!num->frac_digits)
            return FALLBACK;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        const unsigned char *d;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        d = p;
        while (p < end && is_digit(*p))
            p++;
        if (p == d)
            return FALLBACK;
        num->has_exp = 1;
    }
    if (p < end && (is_digit(*p) || *p == '.')) /* "01", "1.2.3" */
        return FALLBACK;
    out->s = s;
    out->n = p - s;
    c->p = p;
    return 0;
}

static int literal(Cur *c, const char *word, Py_ssize_t n)
{
    if (c->end - c->p < n || memcmp(c->p, word, (size_t)n) != 0)
        return FALLBACK;
    c->p += n;
    return 0;
}

static int value(Cur *c, int depth);

#define CLOSED 2 /* an object or array ended (see open_container, after_member) */

/* Step into the object or array at c->p: 0 with a first member to read, CLOSED when it is
 * empty, FALLBACK when c->p is not at its opening bracket. */
static int open_container(Cur *c, unsigned char open, unsigned char close)
{
    if (c->p >= c->end || *c->p != open)
        return FALLBACK;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return CLOSED;
    }
    return 0;
}

/* A member's key and its colon; *escaped when the key has a backslash. */
static int member_key(Cur *c, Span *key, int *escaped)
{
    if (string(c, key, escaped))
        return FALLBACK;
    ws(c);
    if (c->p >= c->end || *c->p != ':')
        return FALLBACK;
    c->p++;
    ws(c);
    return 0;
}

/* After a member's value: 0 at the next member (past the comma), CLOSED past the closing
 * bracket, FALLBACK for anything else. */
static int after_member(Cur *c, unsigned char close)
{
    ws(c);
    if (c->p >= c->end)
        return FALLBACK;
    if (*c->p == ',') {
        c->p++;
        ws(c);
        return 0;
    }
    if (*c->p == close) {
        c->p++;
        return CLOSED;
    }
    return FALLBACK;
}

static int container(Cur *c, int depth, unsigned char open, unsigned char close)
{
    int at;
    if (depth >= MAX_DEPTH)
        return FALLBACK;
    for (at = open_container(c, open, close); at == 0; at = after_member(c, close)) {
        Span key;
        if (close == '}' && member_key(c, &key, NULL))
            return FALLBACK;
        if (value(c, depth + 1))
            return FALLBACK;
    }
    return at == CLOSED ? 0 : FALLBACK;
}

/* Check and step over any JSON value. */
static int value(Cur *c, int depth)
{
    Span sp;
    Num num;
    if (c->p >= c->end)
        return FALLBACK;
    switch (*c->p) {
    case '"':
        return string(c, &sp, NULL);
    case '{':
        return container(c, depth, '{', '}');
    case '[':
        return container(c, depth, '[', ']');
    case 't':
        return literal(c, "true", 4);
    case 'f':
        return literal(c, "false", 5);
    case 'n':
        return literal(c, "null", 4);
    default:
        return number(c, &sp, &num);
    }
}

/* A plain integer of at most 18 digits (fits int64 whatever its digits). */
static int integer(Cur *c, int64_t *out)
{
    Span sp;
    Num num;
    int64_t v = 0;
    if (number(c, &sp, &num) || num.frac_s || num.has_exp || num.int_digits > 18)
        return FALLBACK;
    for (int i = 0; i < num.int_digits; i++)
        v = v * 10 + (num.int_s[i] - '0');
    *out = num.neg ? -v : v;
    return 0;
}

/* "ts" in ns from its digits: at most 3 decimals, no exponent, below 2**53 µs. Sets
 * *exact_needed when float64 µs could not hold its ns (the reader's _NEEDS_EXACT). */
static int time_ns(Cur *c, int64_t *out, int *exact_needed)
{
    Span sp;
    Num num;
    int64_t whole = 0, frac = 0;
    int nonzero = 0;
    if (number(c, &sp, &num) || num.has_exp || num.frac_digits > 3 || num.int_digits > 16)
        return FALLBACK;
    for (int i = 0; i < num.int_digits; i++)
        whole = whole * 10 + (num.int_s[i] - '0');
    if (whole >= MAX_WHOLE_US)
        return FALLBACK;
    for (int i = 0; i < 3; i++) {
        int d = i < num.frac_digits ? num.frac_s[i] - '0' : 0;
        nonzero |= d;
        frac = frac * 10 + d;
    }
    if (nonzero && (num.int_digits >= 14 || (num.int_digits == 13 && num.int_s[0] >= '8')))
        *exact_needed = 1;
    *out = num.neg ? -(whole * 1000 + frac) : whole * 1000 + frac;
    return 0;
}

/* "dur" in ns: rint(dur * 1000) of the correctly rounded double, as NumPy does. */
static int duration_ns(Cur *c, int64_t *out)
{
    Span sp;
    Num num;
    char text[64];
    double d;
    if (number(c, &sp, &num) || sp.n >= (Py_ssize_t)sizeof(text))
        return FALLBACK;
    memcpy(text, sp.s, (size_t)sp.n);
    text[sp.n] = '\0';
    d = PyOS_string_to_double(text, NULL, NULL);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return FALLBACK;
    }
    if (!(fabs(d) < MAX_US))
        return FALLBACK;
    *out = (int64_t)nearbyint(d * 1000.0);
    return 0;
}

#define IS(s, n, word) ((n) == (Py_ssize_t)sizeof(word) - 1 && !memcmp((s), (word), (n)))

enum { A_CORR, A_EXT, A_DEV, A_STREAM, A_QUEUE, A_NAME };
/* argument keys only noted as present (bit K_BYTES - K_FIRST...), in stream.ARG_KEYS order */
enum { K_FIRST = 8, K_BYTES = K_FIRST, K_SIZE, K_COLL, K_DIMS, K_GRID };

/* Which of the args the table reads a key names (its text without quotes); -1: none. */
static int arg_of(const unsigned char *s, Py_ssize_t n)
{
    if (IS(s, n, "correlation"))
        return A_CORR;
    if (IS(s, n, "External id"))
        return A_EXT;
    if (IS(s, n, "device"))
        return A_DEV;
    if (IS(s, n, "stream"))
        return A_STREAM;
    if (IS(s, n, "sycl queue"))
        return A_QUEUE;
    if (IS(s, n, "name"))
        return A_NAME;
    if (IS(s, n, "bytes"))
        return K_BYTES;
    if (IS(s, n, "size"))
        return K_SIZE;
    if (IS(s, n, "grid"))
        return K_GRID;
    if (IS(s, n, "Input Dims"))
        return K_DIMS;
    if (IS(s, n, "Collective name"))
        return K_COLL;
    return -1;
}

/* The arguments the rules read, of one event: whole numbers and texts (raw JSON spans). */
enum { R_BYTES, R_ELEMS, R_GROUP, N_NUMS };
enum { T_COLL, T_DTYPE, T_TYPES, N_TEXTS };
typedef struct {
    int64_t num[N_NUMS]; /* -1: absent (or null) */
    Span text[N_TEXTS];  /* s == NULL: absent (or null, for the names) */
    unsigned seen;       /* which were read: a repeat is odd */
    int odd;             /* a value outside the plain case: the reader decodes the event */
} Rule;

/* The args of a [memory] event, in memory_events.RAW_ARGS order. */
enum { M_BYTES, M_ALLOCATED, M_RESERVED, M_TYPE, M_ID, M_ADDR, N_MEM };
typedef struct {
    int64_t num[N_MEM]; /* 0: absent (or null) */
    unsigned present;   /* bit i: num[i] was a number */
    unsigned seen;      /* which were read: a repeat is odd */
    int odd;            /* a value outside the plain case: the reader decodes the event */
} Mem;

/* Which [memory] argument a key names (M_*); -1: none. */
static int mem_of(const unsigned char *s, Py_ssize_t n)
{
    if (IS(s, n, "Bytes"))
        return M_BYTES;
    if (IS(s, n, "Total Allocated"))
        return M_ALLOCATED;
    if (IS(s, n, "Total Reserved"))
        return M_RESERVED;
    if (IS(s, n, "Device Type"))
        return M_TYPE;
    if (IS(s, n, "Device Id"))
        return M_ID;
    if (IS(s, n, "Addr"))
        return M_ADDR;
    return -1;
}

/* Read one [memory] argument's value into m: a whole number of up to 18 digits (negative
 * ones too) or null; anything else (a float, more digits, text) makes the event odd. */
static int mem_value(Cur *c, Mem *m, int slot)
{
    const unsigned char *from = c->p;
    Span sp;
    Num num;
    if (m->seen & (1u << slot))
        m->odd = 1; /* a repeated key */
    m->seen |= 1u << slot;
    if (c->p < c->end && *c->p == 'n') /* null: absent, as the reader takes it */
        return literal(c, "null", 4);
    if (!number(c, &sp, &num) && !num.frac_s && !num.has_exp && num.int_digits <= 18) {
        int64_t v = 0;
        for (int i = 0; i < num.int_digits; i++)
            v = v * 10 + (num.int_s[i] - '0');
        m->num[slot] = num.neg ? -v : v;
        m->present |= 1u << slot;
        return 0;
    }
    c->p = from;
    m->odd = 1;
    return value(c, 1);
}

/* Which rule argument a key names: 0..2 a number (R_*), 3..5 a text (3 + T_*); -1: none. */
static int rule_of(const unsigned char *s, Py_ssize_t n)
{
    if (IS(s, n, "bytes"))
        return R_BYTES;
    if (IS(s, n, "In msg nelems"))
        return R_ELEMS;
    if (IS(s, n, "Group size"))
        return R_GROUP;
    if (IS(s, n, "Collective name"))
        return N_NUMS + T_COLL;
    if (IS(s, n, "dtype"))
        return N_NUMS + T_DTYPE;
    if (IS(s, n, "Input type"))
        return N_NUMS + T_TYPES;
    return -1;
}

/* Read one rule argument's value into r; anything but a plain non-negative integer (numbers),
 * a string without escapes (names) or any value (input types) makes the event odd. */
static int rule_value(Cur *c, Rule *r, int slot)
{
    const unsigned char *from = c->p;
    Span sp;
    Num num;
    int escaped = 0;
    if (r->seen & (1u << slot))
        r->odd = 1; /* a repeated key */
    r->seen |= 1u << slot;
    if (slot == N_NUMS + T_TYPES) {
        if (value(c, 1))
            return FALLBACK;
        r->text[T_TYPES].s = from;
        r->text[T_TYPES].n = c->p - from;
        return 0;
    }
    if (c->p < c->end && *c->p == 'n') /* null: absent, as the reader takes it */
        return literal(c, "null", 4);
    if (slot < N_NUMS) {
        if (!number(c, &sp, &num) && !num.neg && !num.frac_s && !num.has_exp &&
            num.int_digits <= 18) {
            int64_t v = 0;
            for (int i = 0; i < num.int_digits; i++)
                v = v * 10 + (num.int_s[i] - '0');
            r->num[slot] = v;
            return 0;
        }
    }
    else if (c->p < c->end && *c->p == '"') {
        if (string(c, &r->text[slot - N_NUMS], &escaped))
            return FALLBACK;
        r->odd |= escaped;
        return 0;
    }
    c->p = from;
    r->odd = 1;
    return value(c, 1);
}

static int args_object(Cur *c, int64_t ids[5], unsigned *keys, Rule *rule, Mem *mem)
{
    unsigned seen = 0;
    int at;
    for (int i = 0; i < 5; i++)
        ids[i] = -1;
    for (at = open_container(c, '{', '}'); at == 0; at = after_member(c, '}')) {
        Span key;
        int escaped, which, slot, mslot, bad;
        if (member_key(c, &key, &escaped) || escaped)
            return FALLBACK;
        which = arg_of(key.s + 1, key.n - 2);
        slot = rule ? rule_of(key.s + 1, key.n - 2) : -1;
        mslot = mem && slot < 0 ? mem_of(key.s + 1, key.n - 2) : -1;
        if (which >= K_FIRST) { /* present is all that is noted; a repeat changes nothing */
            *keys |= 1u << (which - K_FIRST);
            which = -1;
        }
        if (which >= 0) {
            if (seen & (1u << which))
                return FALLBACK; /* a repeated field */
            seen |= 1u << which;
        }
        if (slot >= 0)
            bad = rule_value(c, rule, slot);
        else if (mslot >= 0)
            bad = mem_value(c, mem, mslot);
        else
            bad = which >= 0 && which < A_NAME ? integer(c, &ids[which]) : value(c, 1);
        if (bad)
            return FALLBACK;
    }
    return at == CLOSED ? 0 : FALLBACK;
}

typedef struct {
    Span ph, cat, name, pid, tid; /* s == NULL: absent */
    int64_t ts, dur, ids[5];
    unsigned keys; /* argument keys in args (bits, see K_FIRST) */
    Rule rule;     /* read only when the reader asks for the rules' arguments */
    Mem mem;       /* read only when the reader asks for the [memory] events' */
} Event;

enum { F_PH, F_CAT, F_NAME, F_PID, F_TID, F_TS, F_DUR, F_ARGS };

/* Which field of the table a key of an event names (its text without quotes); -1: none. */
static int field_of(const unsigned char *s, Py_ssize_t n)
{
    switch (n) {
    case 2:
        return IS(s, n, "ph") ? F_PH : IS(s, n, "ts") ? F_TS : -1;
    case 3:
        return IS(s, n, "cat")   ? F_CAT
               : IS(s, n, "pid") ? F_PID
               : IS(s, n, "tid") ? F_TID
               : IS(s, n, "dur") ? F_DUR
                                 : -1;
    case 4:
        return IS(s, n, "name") ? F_NAME : IS(s, n, "args") ? F_ARGS : -1;
    default:
        return -1;
    }
}

/* A string or null (cat, name). */
static int text_or_null(Cur *c, Span *out)
{
    if (c->p < c->end && *c->p == 'n') {
        out->s = c->p;
        if (literal(c, "null", 4))
            return FALLBACK;
        out->n = 4;
        return 0;
    }
    return string(c, out, NULL);
}

/* A string, a number or null (pid, tid). */
static int scalar(Cur *c, Span *out)
{
    Num num;
    if (c->p < c->end && (*c->p == '"' || *c->p == 'n'))
        return text_or_null(c, out);
    if (number(c, out, &num) || num.int_digits > 18 || num.has_exp)
        return FALLBACK;
    return 0;
}

static int event(Cur *c, Event *ev, int *exact_needed, int rules, int memory)
{
    unsigned seen = 0;
    int at;
    memset(ev, 0, sizeof(*ev));
    for (int i = 0; i < 5; i++)
        ev->ids[i] = -1;
    for (int i = 0; i < N_NUMS; i++)
        ev->rule.num[i] = -1;
    at = open_container(c, '{', '}');
    if (at == CLOSED)
        return FALLBACK; /* {}: the reader counts empty events */
    for (; at == 0; at = after_member(c, '}')) {
        Span key;
        int escaped, which, bad;
        if (member_key(c, &key, &escaped) || escaped)
            return FALLBACK;
        which = field_of(key.s + 1, key.n - 2);
        if (which >= 0) {
            if (seen & (1u << which))
                return FALLBACK;
            seen |= 1u << which;
        }
        switch (which) {
        case F_PH:
            bad = string(c, &ev->ph, &escaped) || escaped;
            break;
        case F_CAT:
            bad = text_or_null(c, &ev->cat);
            break;
        case F_NAME:
            bad = text_or_null(c, &ev->name);
            break;
        case F_PID:
            bad = scalar(c, &ev->pid);
            break;
        case F_TID:
            bad = scalar(c, &ev->tid);
            break;
        case F_TS:
            bad = time_ns(c, &ev->ts, exact_needed);
            break;
        case F_DUR:
            bad = duration_ns(c, &ev->dur);
            break;
        case F_ARGS:
            bad = args_object(c, ev->ids, &ev->keys, rules ? &ev->rule : NULL,
                              memory ? &ev->mem : NULL);
            break;
        default:
            bad = value(c, 1);
        }
        if (bad)
            return FALLBACK;
    }
    if (at != CLOSED)
        return FALLBACK;
    /* a phase written as plain text; "" (or none) is left to the reader */
    return ev->ph.s && ev->ph.n > 2 ? 0 : FALLBACK;
}

/* The code of the event's (ph, cat, name, pid, tid); -1: fall back; -2: an error is set. */
static long key_code(const Event *ev, PyObject *raw_keys, PyObject *new_key, char **scratch,
                     Py_ssize_t *scratch_size)
{
    const Span *parts[5] = {&ev->ph, &ev->cat, &ev->name, &ev->pid, &ev->tid};
    Py_ssize_t n = 4;
    char *w;
    PyObject *raw, *found;
    long code;
    for (int i = 0; i < 5; i++)
        n += parts[i]->s ? parts[i]->n : 0;
    if (n > *scratch_size) {
        char *grown = PyMem_Realloc(*scratch, (size_t)n * 2);
        if (!grown) {
            PyErr_NoMemory();
            return -2;
        }
        *scratch = grown;
        *scratch_size = n * 2;
    }
    w = *scratch;
    for (int i = 0; i < 5; i++) {
        const Span *s = parts[i];
        Py_ssize_t len = s->s ? s->n : 0;
        const unsigned char *from = s->s;
        if (i == 0) { /* ph: its text without the quotes */
            from++;
            len -= 2;
        }
        if (i)
            *w++ = '\0';
        if (len > 0)
            memcpy(w, from, (size_t)len);
        w += len;
    }
    raw = PyBytes_FromStringAndSize(*scratch, w - *scratch);
    if (!raw)
        return -2;
    found = PyDict_GetItemWithError(raw_keys, raw);
    if (found) {
        Py_DECREF(raw);
        return PyLong_AsLong(found);
    }
    if (PyErr_Occurred()) {
        Py_DECREF(raw);
        return -2;
    }
    found = PyObject_CallOneArg(new_key, raw);
    Py_DECREF(raw);
    if (!found)
        return -2;
    code = found == Py_None ? -1 : PyLong_AsLong(found);
    Py_DECREF(found);
    if (code == -1 && PyErr_Occurred())
        return -2;
    return code;
}

/* Append (start, stop), the offsets of buf[at:end], to a list; -1 with an error set. */
static int add_span(PyObject *list, const void *buf, const unsigned char *at,
                    const unsigned char *end)
{
    const unsigned char *base = buf;
    PyObject *span = Py_BuildValue("(nn)", (Py_ssize_t)(at - base), (Py_ssize_t)(end - base));
    int bad = !span || PyList_Append(list, span) < 0;
    Py_XDECREF(span);
    return bad ? -1 : 0;
}

/* The rule columns of scan()'s sixth item, in kept_args.SCANNED order. */
enum { RC_CORR, RC_EXT, RC_BYTES, RC_ELEMS, RC_GROUP, RC_COLL, RC_DTYPE, RC_TYPES, N_RULE };

/* The last text of one column and its code: consecutive events often repeat it. */
typedef struct {
    Span text;
    int64_t code;
} Last;

/* A text's code in texts (its raw JSON -> code, a new one numbered on); -1 when absent. */
static int64_t text_code(PyObject *texts, const Span *sp, Last *last)
{
    PyObject *raw, *found;
    int64_t code;
    if (!sp->s)
        return -1;
    if (last->text.s && last->text.n == sp->n && !memcmp(last->text.s, sp->s, (size_t)sp->n))
        return last->code;
    raw = PyBytes_FromStringAndSize((const char *)sp->s, sp->n);
    if (!raw)
        return -2;
    found = PyDict_GetItemWithError(texts, raw);
    if (found)
        code = PyLong_AsLongLong(found);
    else if (PyErr_Occurred())
        code = -2;
    else {
        PyObject *next = PyLong_FromSsize_t(PyDict_Size(texts));
        code = next && PyDict_SetItem(texts, raw, next) == 0 ? PyDict_Size(texts) - 1 : -2;
        Py_XDECREF(next);
    }
    Py_DECREF(raw);
    if (code == -1 && PyErr_Occurred())
        return -2;
    if (code >= 0) {
        last->text = *sp;
        last->code = code;
    }
    return code;
}

/* Note an event holding a value outside the plain case: (row, start, stop) in odd, for the
 * reader to decode; -1: an error. */
static int note_odd(PyObject *odd, Py_ssize_t row, const void *buf, const unsigned char *at,
                    const unsigned char *end)
{
    const unsigned char *base = buf;
    PyObject *note =
        Py_BuildValue("(nnn)", row, (Py_ssize_t)(at - base), (Py_ssize_t)(end - base));
    int bad = !note || PyList_Append(odd, note) < 0;
    Py_XDECREF(note);
    return bad ? -1 : 0;
}

/* Append one row to n columns; -1: out of memory (the error is set). */
static int push_row(Col *cols, const int64_t *row, int n)
{
    for (int i = 0; i < n; i++)
        if (push(&cols[i], row[i]) < 0) {
            PyErr_NoMemory();
            return -1;
        }
    return 0;
}

/* A row of the rule columns for a kept event holding a byte count, a collective's name or
 * input types (or an odd value, noted in odd with its span for the reader); -1: an error. */
static int add_rule_row(Col *rcols, const Event *ev, unsigned anchors, PyObject *texts,
                        Last *last, PyObject *odd, const void *buf, const unsigned char *at,
                        const unsigned char *end)
{
    const Rule *r = &ev->rule;
    int64_t row[N_RULE];
    if (!(ev->keys & anchors)) /* the rules look only at events holding one of these keys */
        return 0;
    if (!r->odd && r->num[R_BYTES] < 0 && !r->text[T_COLL].s && !r->text[T_TYPES].s)
        return 0;
    row[RC_CORR] = ev->ids[A_CORR];
    row[RC_EXT] = ev->ids[A_EXT];
    row[RC_BYTES] = r->num[R_BYTES];
    row[RC_ELEMS] = r->num[R_ELEMS];
    row[RC_GROUP] = r->num[R_GROUP];
    for (int t = 0; t < N_TEXTS; t++)
        if ((row[RC_COLL + t] = text_code(texts, &r->text[t], &last[t])) == -2)
            return -1;
    if (r->odd && note_odd(odd, rcols[0].len, buf, at, end) < 0)
        return -1;
    return push_row(rcols, row, N_RULE);
}

/* The memory columns of scan()'s seventh item (memory_events.scanned reads them). */
enum { MC_KEY, MC_TS, MC_ARGS, MC_PRESENT = MC_ARGS + N_MEM, N_MEMCOL };

/* A row of the memory columns for a [memory] instant event (an odd one noted in odd with its
 * span for the reader); -1: an error. */
static int add_memory_row(Col *mcols, const Event *ev, long code, PyObject *odd, const void *buf,
                          const unsigned char *at, const unsigned char *end)
{
    int64_t row[N_MEMCOL];
    row[MC_KEY] = code;
    row[MC_TS] = ev->ts;
    for (int i = 0; i < N_MEM; i++)
        row[MC_ARGS + i] = ev->mem.num[i];
    row[MC_PRESENT] = ev->mem.present;
    if (ev->mem.odd && note_odd(odd, mcols[0].len, buf, at, end) < 0)
        return -1;
    return push_row(mcols, row, N_MEMCOL);
}

/* Columns as a tuple of bytes (native int64), for NumPy to read. */
static PyObject *columns_bytes(const Col *cols, int n)
{
    PyObject *out = PyTuple_New(n);
    if (!out)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)cols[i].v,
                                                cols[i].len * (Py_ssize_t)sizeof(int64_t));
        if (!b) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, b);
    }
    return out;
}

static PyObject *scan(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, stop, items = 0;
    PyObject *raw_keys, *new_key, *texts = Py_None, *result = NULL, *meta = NULL, *odd = NULL;
    PyObject *mem_odd = NULL;
    Col cols[N_COLS], rcols[N_RULE], mcols[N_MEMCOL];
    Last last[N_TEXTS];
    char *scratch = NULL;
    Py_ssize_t scratch_size = 0;
    int exact_needed = 0, ok = 0, rules, memory = 0;
    unsigned keys = 0, anchors = 0;
    Cur c;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnO!O|OIp", &view, &start, &stop, &PyDict_Type, &raw_keys,
                          &new_key, &texts, &anchors, &memory))
        return NULL;
    memset(cols, 0, sizeof(cols));
    memset(rcols, 0, sizeof(rcols));
    memset(mcols, 0, sizeof(mcols));
    memset(last, 0, sizeof(last));
    rules = PyDict_Check(texts);
    if (start < 0 || stop > view.len || start >= stop)
        goto fallback;
    meta = PyList_New(0);
    odd = PyList_New(0);
    mem_odd = PyList_New(0);
    if (!meta || !odd || !mem_odd)
        goto error;
    c.p = (const unsigned char *)view.buf + start;
    c.end = (const unsigned char *)view.buf + stop;
    for (;;) {
        Event ev;
        const unsigned char *at = c.p;
        char ph;
        if (event(&c, &ev, &exact_needed, rules, memory))
            goto fallback;
        items++;
        ph = ev.ph.n == 3 ? (char)ev.ph.s[1] : '\0';
        if (ph == 'M' && add_span(meta, view.buf, at, c.p) < 0)
            goto error;
        else if (ph == 'X' || ph == 'i' || ph == 'I') {
            long code = key_code(&ev, raw_keys, new_key, &scratch, &scratch_size);
            int64_t row[N_COLS];
            if (code == -2)
                goto error;
            if (code < 0)
                goto fallback;
            keys |= ev.keys;
            if (rules &&
                add_rule_row(rcols, &ev, anchors, texts, last, odd, view.buf, at, c.p) < 0)
                goto error;
            if (memory && ph != 'X' && ev.name.s && ev.name.n == 10 &&
                memcmp(ev.name.s, "\"[memory]\"", 10) == 0 &&
                add_memory_row(mcols, &ev, code, mem_odd, view.buf, at, c.p) < 0)
                goto error;
            row[C_KEY] = code;
            row[C_TS] = ev.ts;
            row[C_DUR] = ev.dur;
            row[C_CORR] = ev.ids[A_CORR];
            row[C_EXT] = ev.ids[A_EXT];
            row[C_DEV] = ev.ids[A_DEV];
            row[C_STREAM] = ev.ids[A_STREAM] >= 0 ? ev.ids[A_STREAM] : ev.ids[A_QUEUE];
            if (push_row(cols, row, N_COLS) < 0)
                goto error;
        }
        ws(&c);
        if (c.p >= c.end)
            break;
        if (*c.p != ',')
            goto fallback;
        c.p++;
        ws(&c);
    }
    ok = 1;
fallback:
    if (ok) {
        PyObject *arrays = columns_bytes(cols, N_COLS);
        if (!arrays)
            goto error;
        PyObject *rule_arrays = rules ? columns_bytes(rcols, N_RULE) : Py_NewRef(Py_None);
        PyObject *mem_arrays = rule_arrays ? columns_bytes(mcols, N_MEMCOL) : NULL;
        if (!mem_arrays) {
            Py_DECREF(arrays);
            Py_XDECREF(rule_arrays);
            goto error;
        }
        result = Py_BuildValue("(nNOOI(NO)(NO))", items, arrays, meta,
                               exact_needed ? Py_True : Py_False, keys, rule_arrays, odd,
                               mem_arrays, mem_odd);
    }
    else {
        result = Py_NewRef(Py_None);
    }
error:
    for (int i = 0; i < N_COLS; i++)
        PyMem_Free(cols[i].v);
    for (int i = 0; i < N_RULE; i++)
        PyMem_Free(rcols[i].v);
    for (int i = 0; i < N_MEMCOL; i++)
        PyMem_Free(mcols[i].v);
    PyMem_Free(scratch);
    Py_XDECREF(meta);
    Py_XDECREF(odd);
    Py_XDECREF(mem_odd);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef METHODS[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buf, start, stop, raw_keys, new_key, texts=None, anchors=0, memory=0) -> (items,"
     " columns, meta spans, exact needed, argument keys, (rule columns or None, odd rows),"
     " ([memory] columns, odd rows)) or None: the trace-table columns of the events in"
     " buf[start:stop]."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_scan",
                                    "Chrome-trace events to columns, for the plain case.", -1,
                                    METHODS, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__scan(void)
{
    PyObject *module;
    init_plain();
    module = PyModule_Create(&MODULE);
    /* scan() takes texts and returns the rules' arguments (readers check for this) */
    if (module && PyModule_AddIntConstant(module, "RULE_ARGS", 1) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    /* scan() takes memory=1 and returns the [memory] events' args */
    if (module && PyModule_AddIntConstant(module, "MEMORY_ARGS", 1) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
