/* gcfkit._speedups: the optional C accelerator of the generic-profile codec.
 *
 * Shaped like the stdlib's _json: the pure-Python modules (generic/encoder.py and
 * generic/decoder.py) are the reference, and this module only ever answers for the cases it
 * is sure about. Each entry point does a whole document and either returns the answer or
 * says "fall back" (encode() returns None, decode() returns None instead of a 1-tuple), and
 * the caller then runs the pure-Python codec from the start. Every error, every value
 * outside the plain JSON model (subclasses, default= hooks), every non-canonical spelling
 * and every extension goes that way, so error codes, messages and lines always come from
 * the reference implementation, and what this module accepts it must decode or encode
 * exactly as the reference does (tests/test_speedups.py checks that differentially).
 *
 * Nothing here calls back into Python code: values are checked with exact-type tests, so
 * no __eq__, __hash__ or __iter__ of a user type can run while a document is processed.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Return codes of the internal functions. */
#define RC_OK 0
#define RC_ERR (-1)      /* a Python exception is set (MemoryError): it propagates */
#define RC_FALLBACK (-2) /* let the pure-Python codec do the whole document */
#define RC_CONFLICT (-3) /* encoder: the table is withdrawn (generic/encoder.py _Conflict) */
#define RC_NESTED 1      /* encoder: a cell holds a container (generic/encoder.py _Nested) */

/* Deeper than this, the pure-Python codec decides (its own limit, MAX_DEPTH, is 256). */
#define C_MAX_DEPTH 100

#define IS_SURROGATE(c) ((c) >= 0xD800 && (c) <= 0xDFFF)

/* Before 3.12 a str made through the legacy wchar_t API may not be "ready" yet. */
#if PY_VERSION_HEX < 0x030C0000
#define STR_READY(s) (PyUnicode_READY(s) == 0)
#else
#define STR_READY(s) 1
#endif

/* ======================================================================================
 * A growing text buffer whose storage widens (1, 2, 4 bytes per character) on demand,
 * like the str it becomes.
 * ====================================================================================== */

typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
    int kind;
    /* A dense-profile encode (docs/extensions/dense.md D9), else all zero: */
    int dense;          /* $-quoting (D4.3) */
    int lists;          /* arrays of primitives as list cells (D5.2) */
    PyObject *refs;     /* defined string -> "$name" (D4.2), or NULL */
    int used;           /* U_* bits: the constructs written */
    Py_ssize_t *rec;    /* while a dense table row is written: each cell's start */
    Py_ssize_t nrec, maxrec;
} Writer;

/* The dense constructs an encode used (gcfkit.dense.CONSTRUCTS). */
#define U_DEFS 1
#define U_LISTS 2
#define U_CONSTANTS 4
#define U_SHORT 8

static int
w_init(Writer *w, Py_ssize_t cap)
{
    w->kind = 1;
    w->len = 0;
    w->dense = w->lists = w->used = 0;
    w->refs = NULL;
    w->rec = NULL;
    w->nrec = w->maxrec = 0;
    w->cap = cap < 64 ? 64 : cap;
    w->data = PyMem_Malloc((size_t)w->cap);
    if (w->data == NULL) {
        PyErr_NoMemory();
        return RC_ERR;
    }
    return RC_OK;
}

static void
w_free(Writer *w)
{
    PyMem_Free(w->data);
    w->data = NULL;
}

static int
w_grow(Writer *w, Py_ssize_t extra)
{
    Py_ssize_t need = w->len + extra;
    Py_ssize_t cap = w->cap;
    while (cap < need) {
        if (cap > PY_SSIZE_T_MAX / 8) {
            PyErr_NoMemory();
            return RC_ERR;
        }
        cap *= 2;
    }
    char *p = PyMem_Realloc(w->data, (size_t)cap * (size_t)w->kind);
    if (p == NULL) {
        PyErr_NoMemory();
        return RC_ERR;
    }
    w->data = p;
    w->cap = cap;
    return RC_OK;
}

#define W_RESERVE(w, n) (((w)->len + (n) <= (w)->cap) ? RC_OK : w_grow((w), (n)))

static int
w_widen(Writer *w, int kind)
{
    if (kind <= w->kind)
        return RC_OK;
    char *p = PyMem_Realloc(w->data, (size_t)w->cap * (size_t)kind);
    if (p == NULL) {
        PyErr_NoMemory();
        return RC_ERR;
    }
    w->data = p;
    /* In place, from the end: every wider slot lies at or past the narrower one. */
    Py_ssize_t i = w->len;
    if (w->kind == 1 && kind == 2) {
        Py_UCS1 *s = (Py_UCS1 *)p;
        Py_UCS2 *d = (Py_UCS2 *)p;
        while (i-- > 0) {
            Py_UCS2 c = s[i];
            d[i] = c;
        }
    }
    else if (w->kind == 1 && kind == 4) {
        Py_UCS1 *s = (Py_UCS1 *)p;
        Py_UCS4 *d = (Py_UCS4 *)p;
        while (i-- > 0) {
            Py_UCS4 c = s[i];
            d[i] = c;
        }
    }
    else {
        Py_UCS2 *s = (Py_UCS2 *)p;
        Py_UCS4 *d = (Py_UCS4 *)p;
        while (i-- > 0) {
            Py_UCS4 c = s[i];
            d[i] = c;
        }
    }
    w->kind = kind;
    return RC_OK;
}

static int
w_ascii(Writer *w, const char *s, Py_ssize_t n)
{
    if (W_RESERVE(w, n) < 0)
        return RC_ERR;
    Py_ssize_t i;
    switch (w->kind) {
    case 1:
        memcpy(w->data + w->len, s, (size_t)n);
        break;
    case 2: {
        Py_UCS2 *d = (Py_UCS2 *)w->data + w->len;
        for (i = 0; i < n; i++)
            d[i] = (unsigned char)s[i];
        break;
    }
    default: {
        Py_UCS4 *d = (Py_UCS4 *)w->data + w->len;
        for (i = 0; i < n; i++)
            d[i] = (unsigned char)s[i];
        break;
    }
    }
    w->len += n;
    return RC_OK;
}

static inline int
w_char(Writer *w, Py_UCS4 c)
{
    if (W_RESERVE(w, 1) < 0)
        return RC_ERR;
    switch (w->kind) {
    case 1:
        ((Py_UCS1 *)w->data)[w->len++] = (Py_UCS1)c;
        break;
    case 2:
        ((Py_UCS2 *)w->data)[w->len++] = (Py_UCS2)c;
        break;
    default:
        ((Py_UCS4 *)w->data)[w->len++] = c;
        break;
    }
    return RC_OK;
}

static int
w_spaces(Writer *w, Py_ssize_t n)
{
    if (W_RESERVE(w, n) < 0)
        return RC_ERR;
    Py_ssize_t i;
    for (i = 0; i < n; i++)
        PyUnicode_WRITE(w->kind, w->data, w->len + i, ' ');
    w->len += n;
    return RC_OK;
}

/* Characters [start, end) of a str with the given kind and data. */
static int
w_span(Writer *w, int kind, const void *data, Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t n = end - start;
    if (n <= 0)
        return RC_OK;
    if (kind > w->kind && w_widen(w, kind) < 0)
        return RC_ERR;
    if (W_RESERVE(w, n) < 0)
        return RC_ERR;
    if (kind == w->kind) {
        memcpy(w->data + w->len * kind, (const char *)data + start * kind,
               (size_t)n * (size_t)kind);
    }
    else {
        Py_ssize_t i;
        for (i = 0; i < n; i++)
            PyUnicode_WRITE(w->kind, w->data, w->len + i,
                            PyUnicode_READ(kind, data, start + i));
    }
    w->len += n;
    return RC_OK;
}

static int
w_str(Writer *w, PyObject *s)
{
    return w_span(w, PyUnicode_KIND(s), PyUnicode_DATA(s), 0, PyUnicode_GET_LENGTH(s));
}

/* Decimal text of x into buf (at least 21 bytes); its length. */
static inline int
fmt_int(char *buf, long long x)
{
    char tmp[24];
    int n = 0, o = 0;
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    do {
        tmp[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    if (x < 0)
        buf[o++] = '-';
    while (n)
        buf[o++] = tmp[--n];
    return o;
}

/* "@N " into buf (at least 24 bytes); its length. */
static inline int
fmt_item_id(char *buf, Py_ssize_t n)
{
    buf[0] = '@';
    int m = 1 + fmt_int(buf + 1, (long long)n);
    buf[m++] = ' ';
    return m;
}

static int
w_ssize(Writer *w, Py_ssize_t v)
{
    char buf[24];
    return w_ascii(w, buf, fmt_int(buf, (long long)v));
}

/* Insert ASCII text at position pos (the "@N " prefix of a row that turned out to have
 * attachments). */
static int
w_insert_ascii(Writer *w, Py_ssize_t pos, const char *s, Py_ssize_t n)
{
    if (W_RESERVE(w, n) < 0)
        return RC_ERR;
    int k = w->kind;
    memmove(w->data + (pos + n) * k, w->data + pos * k, (size_t)(w->len - pos) * (size_t)k);
    Py_ssize_t i;
    for (i = 0; i < n; i++)
        PyUnicode_WRITE(k, w->data, pos + i, (unsigned char)s[i]);
    w->len += n;
    return RC_OK;
}

static PyObject *
w_finish(Writer *w)
{
    /* FromKindAndData picks the narrowest kind that holds the text, as every str must. */
    return PyUnicode_FromKindAndData(w->kind, w->data, w->len);
}

/* The writer's text (rc == RC_OK), None (the reference decides: any other code but
 * RC_ERR) or NULL (RC_ERR: an exception is set); the writer is freed either way. */
static PyObject *
w_result(Writer *w, int rc)
{
    PyObject *r = NULL;
    if (rc == RC_OK)
        r = w_finish(w);
    else if (rc != RC_ERR)
        r = Py_NewRef(Py_None);
    w_free(w);
    return r;
}

/* ======================================================================================
 * Scalars (scalar.py: needs_quote, format_scalar, quote_string, format_number)
 * ====================================================================================== */

static inline int
is_digit(Py_UCS4 c)
{
    return c >= '0' && c <= '9';
}

/* The JSON number grammar of §2.3 over the whole of [0, n), ASCII digits only. */
static int
number_full(int kind, const void *d, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    if (i < n && PyUnicode_READ(kind, d, i) == '-')
        i++;
    if (i >= n)
        return 0;
    Py_UCS4 c = PyUnicode_READ(kind, d, i);
    if (c == '0')
        i++;
    else if (c >= '1' && c <= '9') {
        while (i < n && is_digit(PyUnicode_READ(kind, d, i)))
            i++;
    }
    else
        return 0;
    if (i < n && PyUnicode_READ(kind, d, i) == '.') {
        i++;
        if (i >= n || !is_digit(PyUnicode_READ(kind, d, i)))
            return 0;
        while (i < n && is_digit(PyUnicode_READ(kind, d, i)))
            i++;
    }
    if (i < n && (PyUnicode_READ(kind, d, i) | 0x20) == 'e') {
        i++;
        if (i < n && (PyUnicode_READ(kind, d, i) == '+' || PyUnicode_READ(kind, d, i) == '-'))
            i++;
        if (i >= n || !is_digit(PyUnicode_READ(kind, d, i)))
            return 0;
        while (i < n && is_digit(PyUnicode_READ(kind, d, i)))
            i++;
    }
    return i == n;
}

/* scalar.py _NUMERIC_LIKE_RE at the start: [+-]\.?[0-9] | \.[0-9] | 0[0-9] */
static int
numeric_like(int kind, const void *d, Py_ssize_t n)
{
    Py_UCS4 c0 = PyUnicode_READ(kind, d, 0);
    Py_UCS4 c1 = n > 1 ? PyUnicode_READ(kind, d, 1) : 0;
    if (c0 == '+' || c0 == '-') {
        if (is_digit(c1))
            return 1;
        return c1 == '.' && n > 2 && is_digit(PyUnicode_READ(kind, d, 2));
    }
    if (c0 == '.' || c0 == '0')
        return is_digit(c1);
    return 0;
}

/* The "always quote" class of scalar.py _ALWAYS_QUOTE_CHARS, plus both delimiters, which
 * canonical output quotes in every context (scalar.format_scalar). */
static inline int
forces_quote(Py_UCS4 c)
{
    if (c < 0x20 || c == '"' || c == '\\' || c == '|' || c == ',')
        return 1;
    if (c < 0x80)
        return 0;
    return c <= 0x9f || c == 0xa0 || c == 0x2028 || c == 0x2029 || c == 0xfeff ||
           Py_UNICODE_ISSPACE(c);
}

/* Per one-byte character: 1 forces quoting (forces_quote), 2 is '[', 3 is ']'. */
static unsigned char BYTE_CLASS[256];
/* Per one-byte character: 1 when a quoted string escapes it (§2.2). */
static unsigned char BYTE_ESCAPE[256];

static void
init_tables(void)
{
    int c;
    for (c = 0; c < 256; c++) {
        BYTE_CLASS[c] = forces_quote((Py_UCS4)c) ? 1 : c == '[' ? 2 : c == ']' ? 3 : 0;
        BYTE_ESCAPE[c] = c < 0x20 || c == '"' || c == '\\';
    }
}

/* 0: bare, 1: quoted, RC_FALLBACK: a surrogate (the reference raises invalid_surrogate). */
static int
str_needs_quote(PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *d = PyUnicode_DATA(s);
    int quote = 0;
    if (n == 0)
        return 1;
    Py_UCS4 c0 = PyUnicode_READ(kind, d, 0);
    Py_UCS4 cl = PyUnicode_READ(kind, d, n - 1);
    if (n == 1 && (c0 == '-' || c0 == '~' || c0 == '^'))
        quote = 1;
    else if (c0 == '#' || c0 == '@' || c0 == '.' || Py_UNICODE_ISSPACE(c0) ||
             Py_UNICODE_ISSPACE(cl))
        quote = 1;
    else if (c0 == '^' && n >= 3 && PyUnicode_READ(kind, d, 1) == '{' && cl == '}')
        quote = 1; /* every ^{...} token, as scalar.needs_quote */
    else if (c0 == 't' && n == 4 && PyUnicode_CompareWithASCIIString(s, "true") == 0)
        quote = 1;
    else if (c0 == 'f' && n == 5 && PyUnicode_CompareWithASCIIString(s, "false") == 0)
        quote = 1;
    else if ((c0 == '-' || is_digit(c0)) && number_full(kind, d, n))
        quote = 1;
    else if (numeric_like(kind, d, n))
        quote = 1;
    if (quote && kind == PyUnicode_1BYTE_KIND)
        return 1;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)d;
        int open = 0;
        Py_ssize_t i;
        for (i = 0; i < n; i++) {
            unsigned char k = BYTE_CLASS[p[i]];
            if (k == 0)
                continue;
            if (k == 1)
                return 1;
            if (k == 2)
                open = 1;
            else {
                if (open && i + 1 < n && p[i + 1] == ':')
                    return 1;
                open = 0;
            }
        }
        return 0;
    }
    /* One pass for the character classes, the inline-array lookalike \[[^\]]*\]: and, in
     * wide strings, surrogates (which must be looked for even once quoting is decided). */
    int open = 0;
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, d, i);
        if (IS_SURROGATE(c))
            return RC_FALLBACK;
        if (quote)
            continue;
        if (forces_quote(c)) {
            quote = 1;
            if (kind == PyUnicode_1BYTE_KIND)
                return 1;
        }
        else if (c == '[')
            open = 1;
        else if (c == ']') {
            if (open && i + 1 < n && PyUnicode_READ(kind, d, i + 1) == ':') {
                quote = 1;
                if (kind == PyUnicode_1BYTE_KIND)
                    return 1;
            }
            open = 0;
        }
    }
    return quote;
}

static const char HEX[] = "0123456789abcdef";

/* '"' + the canonical JSON escapes of §2.2 + '"' (scalar.quote_string). */
static int
w_quoted(Writer *w, PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *d = PyUnicode_DATA(s);
    if (w_char(w, '"') < 0)
        return RC_ERR;
    Py_ssize_t run = 0, i;
    for (i = 0; i < n; i++) {
        Py_UCS4 c;
        if (kind == PyUnicode_1BYTE_KIND) {
            c = ((const Py_UCS1 *)d)[i];
            if (!BYTE_ESCAPE[c])
                continue;
        }
        else
            c = PyUnicode_READ(kind, d, i);
        if (c >= 0x20 && c != '"' && c != '\\') {
            if (IS_SURROGATE(c))
                return RC_FALLBACK;
            continue;
        }
        if (w_span(w, kind, d, run, i) < 0)
            return RC_ERR;
        run = i + 1;
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        Py_ssize_t m = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\t': esc[1] = 't'; break;
        case '\n': esc[1] = 'n'; break;
        case '\f': esc[1] = 'f'; break;
        case '\r': esc[1] = 'r'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = HEX[(c >> 4) & 0xf];
            esc[5] = HEX[c & 0xf];
            m = 6;
        }
        if (w_ascii(w, esc, m) < 0)
            return RC_ERR;
    }
    if (w_span(w, kind, d, run, n) < 0)
        return RC_ERR;
    return w_char(w, '"');
}

static int
w_scalar_str(Writer *w, PyObject *s)
{
    if (!STR_READY(s))
        return RC_ERR;
    int q = str_needs_quote(s);
    if (q < 0)
        return q;
    return q ? w_quoted(w, s) : w_str(w, s);
}

/* repr(v) for a double whose shortest round-trip text has at most 15 significant digits
 * and plain notation (1e-4 <= |v| < 1e15, or zero): the text PyOS_double_to_string(v, 'r',
 * 0, flags) writes, without its dtoa (a tenth of the cost), or -1 for any other double
 * (then the caller asks dtoa). With Py_DTSF_ADD_DOT_0 in ``flags`` an integral value ends
 * in ".0", as repr() writes it.
 *
 * Why it is exact: for the smallest k in 0..15 such that n = round(|v| * 10**k) < 10**15
 * and n / 10**k == |v| (both operands exact doubles, the quotient correctly rounded: the
 * decimal n * 10**-k reads back as v), that decimal is repr's. Two different decimals of
 * at most 15 significant digits never round to the same double, so no shorter text reads
 * back as v; and the computed product is within 0.07 of the exact |v| * 10**k below 10**15,
 * so rounding it finds the one integer that can work. tests/test_speedups.py and
 * tests/test_speedups_jsonio.py compare it with repr() on random short decimals. */
static Py_ssize_t
short_repr(double v, char *buf, int flags)
{
    static const double pow10[16] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
    int neg = signbit(v) != 0;
    double a = fabs(v);
    Py_ssize_t o = 0;
    if (neg)
        buf[o++] = '-';
    if (a == 0) {
        buf[o++] = '0';
        if (flags & Py_DTSF_ADD_DOT_0) {
            buf[o++] = '.';
            buf[o++] = '0';
        }
        return o;
    }
    if (!(a >= 1e-4 && a < 1e15))
        return -1;
    for (int k = 0; k < 16; k++) {
        double m = a * pow10[k];
        if (m >= 1e15)
            return -1;
        double r = nearbyint(m);
        if (r / pow10[k] != a)
            continue;
        uint64_t n = (uint64_t)r;
        char digits[24];
        int nd = 0;
        do {
            digits[nd++] = (char)('0' + n % 10);
            n /= 10;
        } while (n);
        /* digits[] holds n backwards; k of them are the fraction. */
        if (nd <= k) {
            buf[o++] = '0';
            buf[o++] = '.';
            for (int z = nd; z < k; z++)
                buf[o++] = '0';
            while (nd > 0)
                buf[o++] = digits[--nd];
            return o;
        }
        while (nd > k)
            buf[o++] = digits[--nd];
        if (k == 0) {
            if (flags & Py_DTSF_ADD_DOT_0) {
                buf[o++] = '.';
                buf[o++] = '0';
            }
            return o;
        }
        buf[o++] = '.';
        while (nd > 0)
            buf[o++] = digits[--nd];
        return o;
    }
    return -1;
}

/* Canonical number text of a finite double (scalar.format_number), into buf. Returns the
 * length, or RC_FALLBACK (not finite: out_of_range), or RC_ERR. */
static Py_ssize_t
format_double(double v, char *buf, size_t size)
{
    if (!isfinite(v))
        return RC_FALLBACK;
    double mag = fabs(v);
    if (v == 0) {
        buf[0] = '0';
        return 1;
    }
    /* repr() without the ".0" it adds to integral values: the shortest round-trip text. */
    if (size >= 32) {
        Py_ssize_t fast = short_repr(v, buf, 0);
        if (fast >= 0)
            return fast; /* (plain notation: the range below, which copies repr as is) */
    }
    char *r = PyOS_double_to_string(v, 'r', 0, 0, NULL);
    if (r == NULL)
        return RC_ERR;
    size_t rn = strlen(r);
    if (mag >= 1e-4 && mag < 9007199254740992.0) {
        /* Plain notation in this range already (repr switches at 1e-4 and 1e16). */
        if (rn + 1 > size) {
            PyMem_Free(r);
            return RC_FALLBACK;
        }
        memcpy(buf, r, rn);
        PyMem_Free(r);
        return (Py_ssize_t)rn;
    }
    /* value = 0.<digits> * 10**point, as scalar.format_number reads Decimal(repr(v)). */
    char digits[40];
    int nd = 0, point = 0, seen_point = 0, neg = 0, exp = 0;
    const char *p = r;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    for (; *p && *p != 'e' && *p != 'E'; p++) {
        if (*p == '.') {
            seen_point = 1;
            continue;
        }
        if (nd >= (int)sizeof digits - 1) {
            PyMem_Free(r);
            return RC_FALLBACK;
        }
        digits[nd++] = *p;
        if (!seen_point)
            point++;
    }
    if (*p == 'e' || *p == 'E')
        exp = atoi(p + 1);
    PyMem_Free(r);
    point += exp;
    int lead = 0;
    while (lead < nd && digits[lead] == '0') {
        lead++;
        point--;
    }
    int end = nd;
    while (end > lead && digits[end - 1] == '0')
        end--;
    const char *ds = digits + lead;
    int len = end - lead;
    if (len == 0)
        return RC_FALLBACK; /* not reached: v != 0 */
    int o = 0;
    char *out = buf;
    if (size < 64)
        return RC_FALLBACK;
    if (neg)
        out[o++] = '-';
    if (mag >= 1e-6 && mag < 9007199254740992.0) {
        if (point <= 0) {
            out[o++] = '0';
            out[o++] = '.';
            int z;
            for (z = 0; z < -point; z++)
                out[o++] = '0';
            memcpy(out + o, ds, (size_t)len);
            o += len;
        }
        else if (point >= len) {
            memcpy(out + o, ds, (size_t)len);
            o += len;
            int z;
            for (z = 0; z < point - len; z++)
                out[o++] = '0';
        }
        else {
            memcpy(out + o, ds, (size_t)point);
            o += point;
            out[o++] = '.';
            memcpy(out + o, ds + point, (size_t)(len - point));
            o += len - point;
        }
        return o;
    }
    int e = point - 1;
    out[o++] = ds[0];
    if (len > 1) {
        out[o++] = '.';
        memcpy(out + o, ds + 1, (size_t)(len - 1));
        o += len - 1;
    }
    o += snprintf(out + o, size - (size_t)o, "e%c%d", e >= 0 ? '+' : '-', e >= 0 ? e : -e);
    return o;
}

/* One scalar or tabular cell (generic/encoder.py _cell / _scalar). RC_NESTED for a
 * container, written nothing then. */
static int w_list_cell(Writer *w, PyObject *v);

/* A string in a dense payload (definitions.spelling plus D4.2): its reference when it is
 * defined (refs_ok; never for a keyed map's key), else quoted when it begins with $. */
static int
w_dense_str(Writer *w, PyObject *s, int refs_ok)
{
    if (refs_ok && w->refs != NULL) {
        PyObject *ref = PyDict_GetItemWithError(w->refs, s);
        if (ref != NULL)
            return w_str(w, ref);
        if (PyErr_Occurred())
            return RC_ERR;
    }
    if (!STR_READY(s))
        return RC_ERR;
    if (PyUnicode_GET_LENGTH(s) && PyUnicode_READ_CHAR(s, 0) == '$') {
        int q = str_needs_quote(s); /* only for its surrogate check */
        return q < 0 ? q : w_quoted(w, s);
    }
    return w_scalar_str(w, s);
}

static int
w_cell(Writer *w, PyObject *v)
{
    if (PyUnicode_CheckExact(v))
        return w->dense ? w_dense_str(w, v, 1) : w_scalar_str(w, v);
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow)
            return RC_FALLBACK; /* out_of_range */
        if (x == -1 && PyErr_Occurred())
            return RC_ERR;
        char buf[24];
        return w_ascii(w, buf, fmt_int(buf, x));
    }
    if (PyFloat_CheckExact(v)) {
        char buf[128];
        Py_ssize_t n = format_double(PyFloat_AS_DOUBLE(v), buf, sizeof buf);
        if (n < 0)
            return (int)n;
        return w_ascii(w, buf, n);
    }
    if (v == Py_None)
        return w_char(w, '-');
    if (v == Py_True)
        return w_ascii(w, "true", 4);
    if (v == Py_False)
        return w_ascii(w, "false", 5);
    if (w->lists && (PyList_CheckExact(v) || PyTuple_CheckExact(v)))
        return w_list_cell(w, v);
    if (PyDict_CheckExact(v) || PyList_CheckExact(v) || PyTuple_CheckExact(v))
        return RC_NESTED;
    /* Subclasses, other types, default= hooks: the reference decides. */
    return RC_FALLBACK;
}

/* scalar.is_bare_key: [A-Za-z_][A-Za-z0-9_]* */
static int
is_bare_key(PyObject *k)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(k);
    if (n == 0 || !PyUnicode_IS_ASCII(k))
        return 0;
    const Py_UCS1 *d = PyUnicode_1BYTE_DATA(k);
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        Py_UCS1 c = d[i];
        int alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
            return 0;
    }
    return 1;
}

/* scalar.format_key (only exact str reaches it). */
static int
w_key(Writer *w, PyObject *k)
{
    if (!STR_READY(k))
        return RC_ERR;
    if (is_bare_key(k))
        return w_str(w, k);
    return w_quoted(w, k);
}

/* ======================================================================================
 * The encoder (generic/encoder.py, function by function)
 * ====================================================================================== */

/* An edit of the written text, applied once at the end: the declarations a shared schema
 * omits, and in a dense encode the cells constant columns and short rows leave out and the
 * declarations that name the constants. */
typedef struct {
    Py_ssize_t pos, len;
    PyObject *repl; /* owned; NULL for a plain cut */
} Splice;

typedef struct {
    Writer w;
    int flatten, shared, inline_;
    int dense, constants, short_rows; /* a dense encode and its D9.4 switches */
    Splice *sp;
    Py_ssize_t nsp, capsp;
} Enc;

/* A line prefix: what generic/encoder.py passes around as bpre / ipre / head strings. */
enum { PRE_HASH, PRE_KEY, PRE_ITEM, PRE_DOT };
typedef struct {
    int type;
    Py_ssize_t ind;
    PyObject *key; /* PRE_HASH (may be NULL at the root), PRE_KEY, PRE_DOT */
    Py_ssize_t num; /* PRE_ITEM */
} Pre;

static int
w_pre(Writer *w, const Pre *p)
{
    if (w_spaces(w, p->ind) < 0)
        return RC_ERR;
    int rc;
    switch (p->type) {
    case PRE_HASH:
        if (w_ascii(w, "## ", 3) < 0)
            return RC_ERR;
        if (p->key != NULL) {
            if ((rc = w_key(w, p->key)) < 0)
                return rc;
            return w_char(w, ' ');
        }
        return RC_OK;
    case PRE_KEY:
        return w_key(w, p->key);
    case PRE_ITEM:
        if (w_char(w, '@') < 0 || w_ssize(w, p->num) < 0)
            return RC_ERR;
        return w_char(w, ' ');
    default:
        if (w_char(w, '.') < 0)
            return RC_ERR;
        if ((rc = w_key(w, p->key)) < 0)
            return rc;
        return w_char(w, ' ');
    }
}

/* Replace [pos, pos + len) with repl (a new reference, stolen; NULL: cut it out). */
static int
add_splice(Enc *e, Py_ssize_t pos, Py_ssize_t len, PyObject *repl)
{
    if (e->nsp == e->capsp) {
        Py_ssize_t cap = e->capsp ? e->capsp * 2 : 32;
        Splice *p = PyMem_Realloc(e->sp, (size_t)cap * sizeof(Splice));
        if (p == NULL) {
            Py_XDECREF(repl);
            PyErr_NoMemory();
            return RC_ERR;
        }
        e->sp = p;
        e->capsp = cap;
    }
    e->sp[e->nsp].pos = pos;
    e->sp[e->nsp].len = len;
    e->sp[e->nsp].repl = repl;
    e->nsp++;
    return RC_OK;
}

static int
add_cut(Enc *e, Py_ssize_t pos, Py_ssize_t len)
{
    return len > 0 ? add_splice(e, pos, len, NULL) : RC_OK;
}

/* del out[mark:] */
static void
rollback(Enc *e, Py_ssize_t mark)
{
    e->w.len = mark;
    Py_ssize_t i, j = 0;
    for (i = 0; i < e->nsp; i++) {
        if (e->sp[i].pos < mark)
            e->sp[j++] = e->sp[i];
        else
            Py_XDECREF(e->sp[i].repl);
    }
    e->nsp = j;
}

/* -- the key and form helpers -------------------------------------------------------- */

static inline int
has_gt(PyObject *s)
{
    if (PyUnicode_KIND(s) == PyUnicode_1BYTE_KIND)
        return memchr(PyUnicode_1BYTE_DATA(s), '>', (size_t)PyUnicode_GET_LENGTH(s)) != NULL;
    return PyUnicode_FindChar(s, '>', 0, PyUnicode_GET_LENGTH(s), 1) >= 0;
}

enum { F_EMPTY, F_INLINE, F_OBJECTS, F_EXPANDED };

/* _array_form, or RC_FALLBACK on a container subclass. */
static int
array_form(PyObject **items, Py_ssize_t n)
{
    if (n == 0)
        return F_EMPTY;
    int prim = 1, objs = 1;
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        PyObject *x = items[i];
        if (PyDict_CheckExact(x))
            prim = 0;
        else if (PyList_CheckExact(x) || PyTuple_CheckExact(x))
            return F_EXPANDED;
        else if (PyDict_Check(x) || PyList_Check(x) || PyTuple_Check(x))
            return RC_FALLBACK;
        else
            objs = 0;
        if (!prim && !objs)
            return F_EXPANDED;
    }
    return prim ? F_INLINE : F_OBJECTS;
}

/* A dense list cell "[N]: a,b" (D5.2), or RC_NESTED when the array holds a container. */
static int
w_list_cell(Writer *w, PyObject *v)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(v), i;
    PyObject **items = PySequence_Fast_ITEMS(v);
    int form = array_form(items, n), rc;
    if (form < 0)
        return form;
    if (form != F_EMPTY && form != F_INLINE)
        return RC_NESTED;
    w->used |= U_LISTS;
    if (n == 0)
        return w_ascii(w, "[0]:", 4);
    if (w_char(w, '[') < 0 || w_ssize(w, n) < 0 || w_ascii(w, "]: ", 3) < 0)
        return RC_ERR;
    for (i = 0; i < n; i++) {
        if (i && w_char(w, ',') < 0)
            return RC_ERR;
        if ((rc = w_cell(w, items[i])) != RC_OK)
            return rc == RC_NESTED ? RC_FALLBACK : rc;
    }
    return RC_OK;
}

static inline int
keys_equal(PyObject *a, PyObject *b)
{
    /* Exact str only: no user code runs. */
    return a == b || PyUnicode_Compare(a, b) == 0;
}

/* _union: the ordered field union of dicts (all exact dicts, exact str keys, else
 * RC_FALLBACK). A new list in *out. */
static int
field_union(PyObject **objs, Py_ssize_t n, PyObject **out)
{
    *out = NULL;
    PyObject *fields = PyList_New(0), *seen = NULL;
    if (fields == NULL)
        return RC_ERR;
    Py_ssize_t i, pos;
    PyObject *k, *v;
    for (i = 0; i < n; i++) {
        PyObject *o = objs[i];
        if (seen == NULL) {
            /* While every object has the first one's keys in its order (the common
             * uniform table), the union is those keys: no set is needed. */
            Py_ssize_t j = 0, nf = PyList_GET_SIZE(fields);
            pos = 0;
            if (i == 0 || PyDict_GET_SIZE(o) == nf) {
                while (PyDict_Next(o, &pos, &k, &v)) {
                    if (!PyUnicode_CheckExact(k)) {
                        Py_DECREF(fields);
                        return RC_FALLBACK;
                    }
                    if (i == 0) {
                        if (PyList_Append(fields, k) < 0) {
                            Py_DECREF(fields);
                            return RC_ERR;
                        }
                    }
                    else if (PyList_GET_ITEM(fields, j) != k &&
                             !keys_equal(PyList_GET_ITEM(fields, j), k))
                        break;
                    j++;
                }
                if (i == 0 || j == nf)
                    continue;
            }
            seen = PySet_New(fields);
            if (seen == NULL) {
                Py_DECREF(fields);
                return RC_ERR;
            }
        }
        pos = 0;
        while (PyDict_Next(o, &pos, &k, &v)) {
            if (!PyUnicode_CheckExact(k)) {
                Py_DECREF(seen);
                Py_DECREF(fields);
                return RC_FALLBACK;
            }
            int c = PySet_Contains(seen, k);
            if (c < 0 || (!c && (PySet_Add(seen, k) < 0 || PyList_Append(fields, k) < 0))) {
                Py_DECREF(seen);
                Py_DECREF(fields);
                return RC_ERR;
            }
        }
    }
    Py_XDECREF(seen);
    *out = fields;
    return RC_OK;
}

/* "{" + ",".join(map(_key, names)) + "}" as a str. */
static PyObject *
make_decl(PyObject *names, Py_ssize_t start, int *rc)
{
    Writer w;
    *rc = RC_OK;
    if (w_init(&w, 64) < 0) {
        *rc = RC_ERR;
        return NULL;
    }
    Py_ssize_t i, n = PyList_GET_SIZE(names);
    int r = w_char(&w, '{');
    for (i = start; i < n && r >= 0; i++) {
        if (i > start)
            r = w_char(&w, ',');
        if (r >= 0)
            r = w_key(&w, PyList_GET_ITEM(names, i));
    }
    if (r >= 0)
        r = w_char(&w, '}');
    if (r < 0) {
        w_free(&w);
        *rc = r;
        return NULL;
    }
    PyObject *s = w_finish(&w);
    w_free(&w);
    if (s == NULL)
        *rc = RC_ERR;
    return s;
}

/* -- flattening trees (_flat_tree, _all_null, _tree_paths, _tree_cells) --------------- */

typedef struct Tree Tree;
typedef struct {
    PyObject *key; /* borrowed from the input */
    Tree *sub;     /* NULL for a scalar leaf */
} TreeNode;
struct Tree {
    Py_ssize_t n;
    Py_ssize_t width;
    TreeNode nodes[1];
};

static void
tree_free(Tree *t)
{
    if (t == NULL)
        return;
    Py_ssize_t i;
    for (i = 0; i < t->n; i++)
        tree_free(t->nodes[i].sub);
    PyMem_Free(t);
}


/* _flat_tree(values, allow_null, depth): *out is NULL when flattening is not lossless. */
static int
flat_tree(PyObject **values, Py_ssize_t nv, int allow_null, int depth, Tree **out)
{
    *out = NULL;
    if (depth > C_MAX_DEPTH)
        return RC_FALLBACK;
    PyObject *first = NULL;
    Py_ssize_t nkeys = 0;
    PyObject **objs = PyMem_Malloc(sizeof(PyObject *) * (size_t)(nv ? nv : 1));
    if (objs == NULL) {
        PyErr_NoMemory();
        return RC_ERR;
    }
    Py_ssize_t no = 0, i;
    int rc = RC_OK;
    for (i = 0; i < nv; i++) {
        PyObject *v = values[i];
        if (v == Py_None && allow_null)
            continue;
        if (!PyDict_CheckExact(v)) {
            rc = PyDict_Check(v) ? RC_FALLBACK : RC_OK;
            goto done; /* not flattenable */
        }
        if (first == NULL) {
            first = v;
            nkeys = PyDict_GET_SIZE(v);
            if (nkeys == 0)
                goto done;
            Py_ssize_t pos = 0;
            PyObject *k, *x;
            while (PyDict_Next(v, &pos, &k, &x)) {
                if (!PyUnicode_CheckExact(k)) {
                    rc = RC_FALLBACK;
                    goto done;
                }
                if (PyUnicode_GET_LENGTH(k) == 0 || has_gt(k))
                    goto done;
            }
        }
        else {
            if (PyDict_GET_SIZE(v) != nkeys)
                goto done;
            Py_ssize_t p1 = 0, p2 = 0;
            PyObject *k1, *k2, *x;
            while (PyDict_Next(first, &p1, &k1, &x)) {
                PyDict_Next(v, &p2, &k2, &x);
                if (!PyUnicode_CheckExact(k2)) {
                    rc = RC_FALLBACK;
                    goto done;
                }
                if (!keys_equal(k1, k2))
                    goto done;
            }
        }
        objs[no++] = v;
    }
    if (first == NULL)
        goto done;
    {
        Tree *t = PyMem_Malloc(sizeof(Tree) + sizeof(TreeNode) * (size_t)nkeys);
        if (t == NULL) {
            PyErr_NoMemory();
            rc = RC_ERR;
            goto done;
        }
        t->n = 0;
        t->width = 0;
        PyObject **sub = PyMem_Malloc(sizeof(PyObject *) * (size_t)no);
        if (sub == NULL) {
            PyMem_Free(t);
            PyErr_NoMemory();
            rc = RC_ERR;
            goto done;
        }
        Py_ssize_t pos = 0;
        PyObject *k, *x;
        while (PyDict_Next(first, &pos, &k, &x)) {
            Py_ssize_t j;
            int any_container = 0, all_dict = 1;
            for (j = 0; j < no; j++) {
                PyObject *y = PyDict_GetItemWithError(objs[j], k);
                if (y == NULL) { /* not reached: the keys were checked */
                    rc = PyErr_Occurred() ? RC_ERR : RC_FALLBACK;
                    break;
                }
                sub[j] = y;
                if (PyDict_CheckExact(y))
                    any_container = 1;
                else if (PyList_CheckExact(y) || PyTuple_CheckExact(y)) {
                    any_container = 1;
                    all_dict = 0;
                }
                else if (PyDict_Check(y) || PyList_Check(y) || PyTuple_Check(y)) {
                    rc = RC_FALLBACK;
                    break;
                }
                else
                    all_dict = 0;
            }
            if (rc != RC_OK)
                break;
            TreeNode *node = &t->nodes[t->n];
            node->key = k;
            node->sub = NULL;
            if (any_container) {
                if (!all_dict) {
                    tree_free(t);
                    t = NULL;
                    break;
                }
                Tree *child = NULL;
                rc = flat_tree(sub, no, 0, depth + 1, &child);
                if (rc != RC_OK || child == NULL) {
                    tree_free(t);
                    t = NULL;
                    break;
                }
                node->sub = child;
                t->width += child->width;
            }
            else
                t->width += 1;
            t->n++;
        }
        PyMem_Free(sub);
        if (rc != RC_OK) {
            tree_free(t);
            t = NULL;
        }
        *out = t;
    }
done:
    PyMem_Free(objs);
    if (rc != RC_OK && *out != NULL) {
        tree_free(*out);
        *out = NULL;
    }
    return rc;
}

static int
all_null(PyObject *obj, Tree *t)
{
    int every = 1;
    Py_ssize_t i;
    for (i = 0; i < t->n; i++) {
        PyObject *v = PyDict_GetItemWithError(obj, t->nodes[i].key);
        if (v == NULL)
            return 0; /* not reached */
        if (t->nodes[i].sub == NULL) {
            if (v != Py_None)
                every = 0;
        }
        else {
            if (all_null(v, t->nodes[i].sub))
                return 1;
            every = 0;
        }
    }
    return every;
}

static int
tree_paths(PyObject *prefix, Tree *t, PyObject *columns)
{
    Py_ssize_t i;
    for (i = 0; i < t->n; i++) {
        PyObject *path = PyUnicode_FromFormat("%U>%U", prefix, t->nodes[i].key);
        if (path == NULL)
            return RC_ERR;
        int rc;
        if (t->nodes[i].sub == NULL)
            rc = PyList_Append(columns, path) < 0 ? RC_ERR : RC_OK;
        else
            rc = tree_paths(path, t->nodes[i].sub, columns);
        Py_DECREF(path);
        if (rc < 0)
            return rc;
    }
    return RC_OK;
}

/* -- plans (_plan, _inline_schema) --------------------------------------------------- */

enum { S_SCALAR, S_FLAT, S_GT, S_INLINE };
typedef struct {
    int kind;
    PyObject *field;       /* borrowed (a key of the input) */
    Tree *tree;            /* S_FLAT */
    PyObject *inline_cell; /* S_INLINE: the "^{...}" text (owned) */
} Slot;

typedef struct {
    Py_ssize_t n;
    Slot *slots;
    PyObject *decl;    /* owned */
    PyObject *columns; /* owned: the declared names, in cell order */
} Plan;

static void
plan_free(Plan *p)
{
    Py_ssize_t i;
    for (i = 0; i < p->n; i++) {
        tree_free(p->slots[i].tree);
        Py_XDECREF(p->slots[i].inline_cell);
    }
    PyMem_Free(p->slots);
    Py_XDECREF(p->decl);
    Py_XDECREF(p->columns);
    p->slots = NULL;
    p->decl = NULL;
    p->columns = NULL;
    p->n = 0;
}

/* _inline_schema: a new list of the schema's keys in *out, or NULL. */
static int
inline_schema(PyObject **values, Py_ssize_t nv, PyObject **out)
{
    *out = NULL;
    PyObject *first = NULL;
    Py_ssize_t nkeys = 0, i;
    for (i = 0; i < nv; i++) {
        PyObject *v = values[i];
        if (!PyDict_CheckExact(v))
            return PyDict_Check(v) ? RC_FALLBACK : RC_OK;
        Py_ssize_t pos = 0;
        PyObject *k, *x;
        if (first == NULL) {
            first = v;
            nkeys = PyDict_GET_SIZE(v);
            if (nkeys < 3)
                return RC_OK;
            while (PyDict_Next(v, &pos, &k, &x)) {
                if (!PyUnicode_CheckExact(k))
                    return RC_FALLBACK;
                if (PyUnicode_FindChar(k, '|', 0, PyUnicode_GET_LENGTH(k), 1) >= 0)
                    return RC_OK;
            }
        }
        else {
            if (PyDict_GET_SIZE(v) != nkeys)
                return RC_OK;
            Py_ssize_t p1 = 0, p2 = 0;
            PyObject *k1, *k2, *y;
            while (PyDict_Next(first, &p1, &k1, &y)) {
                PyDict_Next(v, &p2, &k2, &y);
                if (!PyUnicode_CheckExact(k2))
                    return RC_FALLBACK;
                if (!keys_equal(k1, k2))
                    return RC_OK;
            }
        }
        pos = 0;
        while (PyDict_Next(v, &pos, &k, &x)) {
            if (PyDict_CheckExact(x) || PyList_CheckExact(x) || PyTuple_CheckExact(x))
                return RC_OK;
            if (PyDict_Check(x) || PyList_Check(x) || PyTuple_Check(x))
                return RC_FALLBACK;
        }
    }
    if (first == NULL)
        return RC_OK;
    *out = PyDict_Keys(first);
    return *out == NULL ? RC_ERR : RC_OK;
}

/* _plan(objs, opts, depth). plan->n == 0 (and no decl) when it is not tabular. */
static int
make_plan(Enc *e, PyObject **objs, Py_ssize_t n, int depth, Plan *plan)
{
    plan->n = 0;
    plan->slots = NULL;
    plan->decl = NULL;
    plan->columns = NULL;
    PyObject *fields = NULL, *columns = NULL;
    PyObject **present = NULL;
    int rc = field_union(objs, n, &fields);
    if (rc != RC_OK)
        return rc;
    Py_ssize_t nf = PyList_GET_SIZE(fields), i, j;
    plan->slots = PyMem_Calloc((size_t)(nf ? nf : 1), sizeof(Slot));
    present = PyMem_Malloc(sizeof(PyObject *) * (size_t)(n ? n : 1));
    columns = PyList_New(0);
    if (plan->slots == NULL || present == NULL || columns == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        rc = RC_ERR;
        goto fail;
    }
    for (i = 0; i < nf; i++) {
        PyObject *f = PyList_GET_ITEM(fields, i);
        Slot *s = &plan->slots[plan->n];
        s->field = f;
        s->tree = NULL;
        s->inline_cell = NULL;
        if (has_gt(f)) {
            s->kind = S_GT;
            plan->n++;
            continue;
        }
        Py_ssize_t np = 0;
        int have_present = e->flatten || e->inline_;
        if (have_present) {
            for (j = 0; j < n; j++) {
                PyObject *v = PyDict_GetItemWithError(objs[j], f);
                if (v != NULL)
                    present[np++] = v;
                else if (PyErr_Occurred()) {
                    rc = RC_ERR;
                    goto fail;
                }
            }
        }
        if (e->flatten && PyUnicode_GET_LENGTH(f) > 0 && have_present) {
            Tree *t = NULL;
            rc = flat_tree(present, np, 1, depth + 1, &t);
            if (rc != RC_OK)
                goto fail;
            if (t != NULL) {
                int blocked = 0;
                for (j = 0; j < np && !blocked; j++)
                    if (present[j] != Py_None && all_null(present[j], t))
                        blocked = 1;
                if (!blocked) {
                    s->kind = S_FLAT;
                    s->tree = t;
                    plan->n++;
                    if ((rc = tree_paths(f, t, columns)) < 0)
                        goto fail;
                    continue;
                }
                tree_free(t);
            }
        }
        if (e->inline_ && have_present) {
            PyObject *v0 = PyDict_GetItemWithError(objs[0], f);
            if (v0 == NULL && PyErr_Occurred()) {
                rc = RC_ERR;
                goto fail;
            }
            if (v0 != NULL && !PyDict_CheckExact(v0) && PyDict_Check(v0)) {
                rc = RC_FALLBACK;
                goto fail;
            }
            if (v0 != NULL && PyDict_CheckExact(v0)) {
                PyObject *schema = NULL;
                rc = inline_schema(present, np, &schema);
                if (rc != RC_OK)
                    goto fail;
                if (schema != NULL) {
                    PyObject *decl = make_decl(schema, 0, &rc);
                    Py_DECREF(schema);
                    if (decl == NULL)
                        goto fail;
                    s->inline_cell = PyUnicode_FromFormat("^%U", decl);
                    Py_DECREF(decl);
                    if (s->inline_cell == NULL) {
                        rc = RC_ERR;
                        goto fail;
                    }
                    s->kind = S_INLINE;
                    plan->n++;
                    if (PyList_Append(columns, f) < 0) {
                        rc = RC_ERR;
                        goto fail;
                    }
                    continue;
                }
            }
        }
        s->kind = S_SCALAR;
        plan->n++;
        if (PyList_Append(columns, f) < 0) {
            rc = RC_ERR;
            goto fail;
        }
    }
    if (PyList_GET_SIZE(columns) == 0) {
        plan_free(plan);
        Py_DECREF(columns);
    }
    else {
        plan->decl = make_decl(columns, 0, &rc);
        if (plan->decl == NULL)
            goto fail;
        plan->columns = columns;
    }
    PyMem_Free(present);
    /* The slots borrow their field names from `fields`, whose items are input keys. */
    Py_DECREF(fields);
    return RC_OK;
fail:
    plan_free(plan);
    PyMem_Free(present);
    Py_XDECREF(columns);
    Py_XDECREF(fields);
    return rc;
}

/* -- shared array schemas (_Share) --------------------------------------------------- */

/* The recorded cells of a dense table's rows (dense_rows.py works on the same): per row,
 * the start of each of its `width` cells and the row's end, as positions in the text. */
typedef struct {
    Py_ssize_t *pos;
    Py_ssize_t rows, width, cap;
} Cells;

static int
cells_init(Cells *c, Py_ssize_t width, Py_ssize_t rows)
{
    c->width = width;
    c->rows = 0;
    c->cap = (width + 1) * (rows > 0 ? rows : 1);
    c->pos = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)c->cap);
    if (c->pos == NULL) {
        PyErr_NoMemory();
        return RC_ERR;
    }
    return RC_OK;
}

/* Room for the next row's positions (the row counts once cells->rows is raised). */
static Py_ssize_t *
cells_row(Cells *c)
{
    Py_ssize_t need = (c->rows + 1) * (c->width + 1);
    if (need > c->cap) {
        Py_ssize_t cap = need * 2;
        Py_ssize_t *p = PyMem_Realloc(c->pos, sizeof(Py_ssize_t) * (size_t)cap);
        if (p == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        c->pos = p;
        c->cap = cap;
    }
    return c->pos + c->rows * (c->width + 1);
}

/* A dense all-scalar attachment table whose constant columns wait until its containing
 * table knows which fields share a schema (generic/encoder.py _Share.pending). */
typedef struct {
    PyObject *field; /* borrowed: an input key */
    PyObject *names; /* owned: the field names */
    Py_ssize_t decl_at, decl_len;
    Cells cells;
} Pending;

typedef struct {
    int enabled;
    PyObject *schemas; /* field -> decl (the first tabular attachment of each field) */
    PyObject *decls;   /* field -> decl of its all-scalar tables */
    PyObject *flat;    /* field -> list of declaration positions */
    PyObject *spoiled; /* fields with any other kind of attachment */
    PyObject *shared;  /* the fields whose repeats omit their declaration */
    Pending *pend;
    Py_ssize_t npend, cappend;
} Share;

static int
share_init(Share *s, int enabled)
{
    s->enabled = enabled;
    s->schemas = PyDict_New();
    s->decls = PyDict_New();
    s->flat = PyDict_New();
    s->spoiled = PySet_New(NULL);
    s->shared = PySet_New(NULL);
    s->pend = NULL;
    s->npend = s->cappend = 0;
    if (!s->schemas || !s->decls || !s->flat || !s->spoiled || !s->shared)
        return RC_ERR;
    return RC_OK;
}

static void
share_clear(Share *s)
{
    Py_ssize_t i;
    Py_XDECREF(s->schemas);
    Py_XDECREF(s->decls);
    Py_XDECREF(s->flat);
    Py_XDECREF(s->spoiled);
    Py_XDECREF(s->shared);
    for (i = 0; i < s->npend; i++) {
        Py_DECREF(s->pend[i].names);
        PyMem_Free(s->pend[i].cells.pos);
    }
    PyMem_Free(s->pend);
}

/* Keep a pending table; takes over cells (names gets a new reference). */
static int
share_pending(Share *s, PyObject *field, PyObject *names, Py_ssize_t decl_at,
              Py_ssize_t decl_len, Cells *cells)
{
    if (s->npend == s->cappend) {
        Py_ssize_t cap = s->cappend ? s->cappend * 2 : 8;
        Pending *p = PyMem_Realloc(s->pend, sizeof(Pending) * (size_t)cap);
        if (p == NULL) {
            PyErr_NoMemory();
            return RC_ERR;
        }
        s->pend = p;
        s->cappend = cap;
    }
    Pending *p = &s->pend[s->npend++];
    p->field = field;
    Py_INCREF(names);
    p->names = names;
    p->decl_at = decl_at;
    p->decl_len = decl_len;
    p->cells = *cells;
    cells->pos = NULL;
    return RC_OK;
}

static int
share_table(Share *s, PyObject *field, PyObject *decl)
{
    if (PyDict_SetDefault(s->schemas, field, decl) == NULL)
        return RC_ERR;
    return PySet_Add(s->spoiled, field) < 0 ? RC_ERR : RC_OK;
}

static int
share_flat_table(Share *s, PyObject *field, PyObject *decl, Py_ssize_t pos)
{
    if (PyDict_SetDefault(s->schemas, field, decl) == NULL)
        return RC_ERR;
    PyObject *known = PyDict_SetDefault(s->decls, field, decl);
    if (known == NULL)
        return RC_ERR;
    if (known != decl) {
        int ne = PyObject_RichCompareBool(known, decl, Py_NE);
        if (ne < 0)
            return RC_ERR;
        if (ne && PySet_Add(s->spoiled, field) < 0)
            return RC_ERR;
    }
    PyObject *lst = PyDict_GetItemWithError(s->flat, field);
    if (lst == NULL) {
        if (PyErr_Occurred())
            return RC_ERR;
        lst = PyList_New(0);
        if (lst == NULL)
            return RC_ERR;
        int r = PyDict_SetItem(s->flat, field, lst);
        Py_DECREF(lst);
        if (r < 0)
            return RC_ERR;
    }
    PyObject *p = PyLong_FromSsize_t(pos);
    if (p == NULL)
        return RC_ERR;
    int r = PyList_Append(lst, p);
    Py_DECREF(p);
    return r < 0 ? RC_ERR : RC_OK;
}

static int
share_omit_repeats(Enc *e, Share *s, PyObject **objs, Py_ssize_t n)
{
    Py_ssize_t pos = 0;
    PyObject *field, *lst;
    while (PyDict_Next(s->flat, &pos, &field, &lst)) {
        Py_ssize_t m = PyList_GET_SIZE(lst), i;
        if (m < 2)
            continue;
        int c = PySet_Contains(s->spoiled, field);
        if (c < 0)
            return RC_ERR;
        if (c)
            continue;
        c = PyDict_Contains(objs[0], field);
        if (c < 0)
            return RC_ERR;
        if (!c)
            continue;
        Py_ssize_t holders = 0;
        for (i = 0; i < n; i++) {
            c = PyDict_Contains(objs[i], field);
            if (c < 0)
                return RC_ERR;
            holders += c;
        }
        if (holders != m)
            continue;
        if (PySet_Add(s->shared, field) < 0)
            return RC_ERR;
        PyObject *decl = PyDict_GetItemWithError(s->decls, field);
        if (decl == NULL)
            return PyErr_Occurred() ? RC_ERR : RC_FALLBACK;
        Py_ssize_t cut = PyUnicode_GET_LENGTH(decl);
        for (i = 1; i < m; i++) {
            Py_ssize_t at = PyLong_AsSsize_t(PyList_GET_ITEM(lst, i));
            if (at == -1 && PyErr_Occurred())
                return RC_ERR;
            if (add_cut(e, at, cut) < 0)
                return RC_ERR;
        }
    }
    return RC_OK;
}

/* -- dense tables (generic/dense_rows.py) --------------------------------------------- */

#define W_AT(w, i) PyUnicode_READ((w)->kind, (w)->data, (i))
/* Cell j of a recorded row P (W cells): [P[j], CELL_END(P, j, W)). */
#define CELL_END(P, j, W) ((j) + 1 < (W) ? (P)[(j) + 1] - 1 : (P)[W])

static inline int
span_is(Writer *w, Py_ssize_t a, Py_ssize_t b, Py_UCS4 c)
{
    return b - a == 1 && W_AT(w, a) == c;
}

static inline int
spans_equal(Writer *w, Py_ssize_t a, Py_ssize_t b, Py_ssize_t a2, Py_ssize_t b2)
{
    return b - a == b2 - a2 &&
           memcmp(w->data + a * w->kind, w->data + a2 * w->kind, (size_t)(b - a) * w->kind) == 0;
}

/* grammar.LIST_HEAD at a: "[" [^\]|]* "]:" */
static int
span_list_head(Writer *w, Py_ssize_t a, Py_ssize_t b)
{
    if (b - a < 3 || W_AT(w, a) != '[')
        return 0;
    Py_ssize_t i = a + 1;
    while (i < b && W_AT(w, i) != ']' && W_AT(w, i) != '|')
        i++;
    return i + 1 < b && W_AT(w, i) == ']' && W_AT(w, i + 1) == ':';
}

/* dense_rows.constant_columns: mask[j] = 1 for each constant column; their number. */
static Py_ssize_t
dense_constants(Enc *e, Cells *c, Py_ssize_t start, char *mask)
{
    Py_ssize_t W = c->width, r, j, found = 0;
    Writer *w = &e->w;
    memset(mask, 0, (size_t)W);
    if (!e->constants || c->rows < 2)
        return 0;
    Py_ssize_t *P0 = c->pos;
    for (j = start; j < W; j++) {
        Py_ssize_t a = P0[j], b = CELL_END(P0, j, W);
        if (span_is(w, a, b, '~') || (b > a && W_AT(w, a) == '^') || span_list_head(w, a, b))
            continue;
        for (r = 1; r < c->rows; r++) {
            Py_ssize_t *P = P0 + r * (W + 1);
            if (!spans_equal(w, a, b, P[j], CELL_END(P, j, W)))
                break;
        }
        if (r == c->rows) {
            mask[j] = 1;
            found++;
        }
    }
    if (found && found == W - start) {
        mask[start] = 0; /* a row keeps a value cell */
        found--;
    }
    if (found)
        w->used |= U_CONSTANTS;
    return found;
}

/* dense_rows.join for every recorded row: the cuts that leave out the constant cells (mask,
 * or NULL) and, with short rows, the trailing ~ cells down to min(2, width) (D7). With
 * emit == 0 only *trimmed is told (whether a row would be shortened). */
static int
dense_rows(Enc *e, Cells *c, const char *mask, int emit, int *trimmed)
{
    Py_ssize_t W = c->width, r, j, i;
    Writer *w = &e->w;
    Py_ssize_t *kept = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(W + 1));
    if (kept == NULL) {
        PyErr_NoMemory();
        return RC_ERR;
    }
    int rc = RC_OK;
    for (r = 0; r < c->rows && rc == RC_OK; r++) {
        Py_ssize_t *P = c->pos + r * (W + 1), k = 0;
        for (j = 0; j < W; j++)
            if (mask == NULL || !mask[j])
                kept[k++] = j;
        if (e->short_rows && k > 2 && span_is(w, P[kept[k - 1]], CELL_END(P, kept[k - 1], W), '~')) {
            while (k > 2 && span_is(w, P[kept[k - 1]], CELL_END(P, kept[k - 1], W), '~'))
                k--;
            *trimmed = 1;
        }
        if (!emit || k == 0)
            continue;
        if (kept[0] > 0)
            rc = add_cut(e, P[0], P[kept[0]] - P[0]);
        for (i = 1; i < k && rc == RC_OK; i++)
            if (kept[i] > kept[i - 1] + 1)
                rc = add_cut(e, P[kept[i - 1] + 1], P[kept[i]] - P[kept[i - 1] + 1]);
        Py_ssize_t last = kept[k - 1];
        if (rc == RC_OK && last < W - 1)
            rc = add_cut(e, P[last + 1] - 1, P[W] - (P[last + 1] - 1));
    }
    PyMem_Free(kept);
    return rc;
}

/* dense_rows.declaration over (label +) names, each constant written name=token (the
 * token of row 0; a bare one holding '}' quoted). */
static PyObject *
dense_decl(Enc *e, PyObject *label, PyObject *names, Cells *c, const char *mask)
{
    Writer out, *w = &e->w;
    if (w_init(&out, 64) < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(names), j, off = label != NULL, W = c->width;
    int rc = w_char(&out, '{');
    for (j = 0; j < n + off && rc >= 0; j++) {
        if (j && (rc = w_char(&out, ',')) < 0)
            break;
        rc = w_key(&out, j < off ? label : PyList_GET_ITEM(names, j - off));
        if (rc < 0 || !mask[j])
            continue;
        Py_ssize_t a = c->pos[j], b = CELL_END(c->pos, j, W), i;
        if ((rc = w_char(&out, '=')) < 0)
            break;
        int brace = 0;
        for (i = a; i < b; i++)
            if (W_AT(w, i) == '}')
                brace = 1;
        if (brace && W_AT(w, a) != '"') {
            PyObject *tok = PyUnicode_FromKindAndData(w->kind, w->data + a * w->kind, b - a);
            rc = tok == NULL ? RC_ERR : w_quoted(&out, tok);
            Py_XDECREF(tok);
        }
        else
            rc = w_span(&out, w->kind, w->data, a, b);
    }
    if (rc >= 0)
        rc = w_char(&out, '}');
    PyObject *r = rc >= 0 ? w_finish(&out) : NULL;
    w_free(&out);
    if (r == NULL && rc != RC_ERR && !PyErr_Occurred())
        PyErr_SetString(PyExc_SystemError, "gcfkit._speedups: a declaration failed");
    return r;
}

/* A finished dense table (dense_rows' whole job): its constant columns from cell `start`
 * (D6.2) named in its declaration [decl_at, decl_at + decl_len), and its rows without
 * their constant cells and, when short rows are on, their trailing ~ cells (D7).
 * `pending` is a table whose short rows were already decided once without constants
 * (generic/encoder.py joins those twice), and `constants` whether it may have any. */
static int
dense_table(Enc *e, Cells *c, PyObject *label, PyObject *names, Py_ssize_t decl_at,
            Py_ssize_t decl_len, Py_ssize_t start, int constants, int pending)
{
    int trimmed = 0, rc = RC_OK;
    char *mask = PyMem_Malloc((size_t)c->width + 1);
    if (mask == NULL) {
        PyErr_NoMemory();
        return RC_ERR;
    }
    if (pending)
        rc = dense_rows(e, c, NULL, 0, &trimmed);
    Py_ssize_t found = 0;
    if (rc == RC_OK && constants)
        found = dense_constants(e, c, start, mask);
    if (rc == RC_OK && found) {
        PyObject *decl = dense_decl(e, label, names, c, mask);
        rc = decl == NULL ? RC_ERR : add_splice(e, decl_at, decl_len, decl);
    }
    if (rc == RC_OK)
        rc = dense_rows(e, c, found ? mask : NULL, 1, &trimmed);
    if (trimmed)
        e->w.used |= U_SHORT;
    PyMem_Free(mask);
    return rc;
}

/* The pending attachment tables of a finished containing table: constants for those whose
 * field does not share its schema (D6.2). */
static int
dense_pending(Enc *e, Share *s)
{
    Py_ssize_t i;
    for (i = 0; i < s->npend; i++) {
        Pending *p = &s->pend[i];
        int shared = PySet_Contains(s->shared, p->field);
        if (shared < 0)
            return RC_ERR;
        int rc = dense_table(e, &p->cells, NULL, p->names, p->decl_at, p->decl_len, 0, !shared, 1);
        if (rc != RC_OK)
            return rc;
    }
    return RC_OK;
}

/* -- the walk -------------------------------------------------------------------------- */

static int enc_members(Enc *e, PyObject *obj, Py_ssize_t ind, int depth);
static int enc_array(Enc *e, PyObject *arr, const Pre *bpre, const Pre *ipre, Py_ssize_t ind,
                     int depth);
static int enc_keyed(Enc *e, PyObject *obj, const Pre *bpre, Py_ssize_t ind, int depth,
                     int *done);
static int enc_tabular(Enc *e, PyObject **objs, Py_ssize_t n, const Pre *bpre,
                       Py_ssize_t ind, int depth, Share *share, PyObject *field, int *done);

static inline int
is_container_exact(PyObject *v)
{
    return PyDict_CheckExact(v) || PyList_CheckExact(v) || PyTuple_CheckExact(v);
}

static inline int
is_container_sub(PyObject *v)
{
    return !is_container_exact(v) && (PyDict_Check(v) || PyList_Check(v) || PyTuple_Check(v));
}

static int
enc_line_scalar(Enc *e, const Pre *p, const char *mid, PyObject *v)
{
    /* "{p}{mid}{scalar}" */
    int rc;
    if ((rc = w_pre(&e->w, p)) < 0)
        return rc;
    if (w_ascii(&e->w, mid, (Py_ssize_t)strlen(mid)) < 0)
        return RC_ERR;
    rc = w_cell(&e->w, v);
    if (rc == RC_NESTED)
        return RC_FALLBACK;
    if (rc < 0)
        return rc;
    return w_char(&e->w, '\n');
}

static int
enc_members(Enc *e, PyObject *obj, Py_ssize_t ind, int depth)
{
    if (depth > C_MAX_DEPTH)
        return RC_FALLBACK;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int rc;
    while (PyDict_Next(obj, &pos, &k, &v)) {
        if (!PyUnicode_CheckExact(k) || is_container_sub(v))
            return RC_FALLBACK;
        if (PyDict_CheckExact(v)) {
            Pre bpre = {PRE_HASH, ind, k, 0};
            int done = 0;
            if ((rc = enc_keyed(e, v, &bpre, ind, depth + 1, &done)) < 0)
                return rc;
            if (!done) {
                /* "{ind}## {key}" */
                if (w_spaces(&e->w, ind) < 0 || w_ascii(&e->w, "## ", 3) < 0)
                    return RC_ERR;
                if ((rc = w_key(&e->w, k)) < 0)
                    return rc;
                if (w_char(&e->w, '\n') < 0)
                    return RC_ERR;
                if (PyDict_GET_SIZE(v) && (rc = enc_members(e, v, ind + 2, depth + 1)) < 0)
                    return rc;
            }
        }
        else if (PyList_CheckExact(v) || PyTuple_CheckExact(v)) {
            Pre bpre = {PRE_HASH, ind, k, 0};
            Pre ipre = {PRE_KEY, ind, k, 0};
            if ((rc = enc_array(e, v, &bpre, &ipre, ind, depth + 1)) < 0)
                return rc;
        }
        else {
            Pre p = {PRE_KEY, ind, k, 0};
            if ((rc = enc_line_scalar(e, &p, "=", v)) < 0)
                return rc;
        }
    }
    return RC_OK;
}

static int
enc_item(Enc *e, Py_ssize_t i, PyObject *x, Py_ssize_t ind, int depth)
{
    Pre p = {PRE_ITEM, ind, NULL, i};
    Py_ssize_t inner = ind + 2;
    int rc;
    if (is_container_sub(x))
        return RC_FALLBACK;
    if (PyDict_CheckExact(x)) {
        int done = 0;
        if ((rc = enc_keyed(e, x, &p, inner, depth, &done)) < 0)
            return rc;
        if (!done) {
            if ((rc = w_pre(&e->w, &p)) < 0)
                return rc;
            if (w_ascii(&e->w, "{}\n", 3) < 0)
                return RC_ERR;
            if (PyDict_GET_SIZE(x) && (rc = enc_members(e, x, inner, depth)) < 0)
                return rc;
        }
        return RC_OK;
    }
    if (PyList_CheckExact(x) || PyTuple_CheckExact(x))
        return enc_array(e, x, &p, &p, inner, depth);
    return enc_line_scalar(e, &p, "=", x);
}

static int
enc_array(Enc *e, PyObject *arr, const Pre *bpre, const Pre *ipre, Py_ssize_t ind,
          int depth)
{
    if (depth > C_MAX_DEPTH)
        return RC_FALLBACK;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(arr), i;
    PyObject **items = PySequence_Fast_ITEMS(arr);
    int form = array_form(items, n), rc;
    if (form < 0)
        return form;
    Writer *w = &e->w;
    if (form == F_EMPTY) {
        if ((rc = w_pre(w, bpre)) < 0)
            return rc;
        return w_ascii(w, "[0]\n", 4);
    }
    if (form == F_INLINE) {
        if ((rc = w_pre(w, ipre)) < 0)
            return rc;
        if (w_char(w, '[') < 0 || w_ssize(w, n) < 0 || w_ascii(w, "]: ", 3) < 0)
            return RC_ERR;
        for (i = 0; i < n; i++) {
            if (i && w_char(w, ',') < 0)
                return RC_ERR;
            rc = w_cell(w, items[i]);
            if (rc == RC_NESTED)
                return RC_FALLBACK;
            if (rc < 0)
                return rc;
        }
        return w_char(w, '\n');
    }
    if (form == F_OBJECTS) {
        int done = 0;
        if ((rc = enc_tabular(e, items, n, bpre, ind, depth, NULL, NULL, &done)) < 0)
            return rc;
        if (done)
            return RC_OK;
    }
    if ((rc = w_pre(w, bpre)) < 0)
        return rc;
    if (w_char(w, '[') < 0 || w_ssize(w, n) < 0 || w_ascii(w, "]\n", 2) < 0)
        return RC_ERR;
    for (i = 0; i < n; i++)
        if ((rc = enc_item(e, i, items[i], ind, depth + 1)) < 0)
            return rc;
    return RC_OK;
}

/* _flat_rows (and a dense table's _cell_rows, whose cells go to `cells` when not NULL):
 * RC_OK, or RC_NESTED as soon as a cell holds a container. */
static int
flat_rows(Enc *e, PyObject **objs, Py_ssize_t n, PyObject *fields, Py_ssize_t ind,
          Cells *cells)
{
    Writer *w = &e->w;
    Py_ssize_t width = PyList_GET_SIZE(fields), i, j;
    PyObject **names = &PyList_GET_ITEM(fields, 0);
    Py_ssize_t *P = NULL;
    int rc;
    for (i = 0; i < n; i++) {
        PyObject *o = objs[i];
        if (ind && w_spaces(w, ind) < 0)
            return RC_ERR;
        if (cells != NULL && (P = cells_row(cells)) == NULL)
            return RC_ERR;
        /* Values in order while the row's keys are the columns' (the common uniform row);
         * from the first difference on, by lookup. Both give the cells of
         * "|".join("~" if absent else cell(v) for each field). */
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        j = 0;
        while (j < width && PyDict_Next(o, &pos, &k, &v) && keys_equal(k, names[j])) {
            if (j && w_char(w, '|') < 0)
                return RC_ERR;
            if (P != NULL)
                P[j] = w->len;
            if ((rc = w_cell(w, v)) != RC_OK)
                return rc;
            j++;
        }
        for (; j < width; j++) {
            if (j && w_char(w, '|') < 0)
                return RC_ERR;
            if (P != NULL)
                P[j] = w->len;
            v = PyDict_GetItemWithError(o, names[j]);
            if (v == NULL) {
                if (PyErr_Occurred())
                    return RC_ERR;
                if (w_char(w, '~') < 0)
                    return RC_ERR;
            }
            else if ((rc = w_cell(w, v)) != RC_OK)
                return rc;
        }
        if (P != NULL) {
            P[width] = w->len;
            cells->rows++;
        }
        if (w_char(w, '\n') < 0)
            return RC_ERR;
    }
    return RC_OK;
}

static int
w_sep(Writer *w, Py_ssize_t *ncells)
{
    if ((*ncells)++ && w_char(w, '|') < 0)
        return RC_ERR;
    if (w->rec != NULL) {
        /* A dense row: where this cell starts (past the last slot: noticed by the row). */
        if (w->nrec < w->maxrec)
            w->rec[w->nrec] = w->len;
        w->nrec++;
    }
    return RC_OK;
}

static int
tree_cells(Writer *w, PyObject *obj, Tree *t, Py_ssize_t *ncells)
{
    Py_ssize_t i;
    int rc;
    for (i = 0; i < t->n; i++) {
        PyObject *v = PyDict_GetItemWithError(obj, t->nodes[i].key);
        if (v == NULL)
            return PyErr_Occurred() ? RC_ERR : RC_FALLBACK;
        if (t->nodes[i].sub == NULL) {
            if (w_sep(w, ncells) < 0)
                return RC_ERR;
            rc = w_cell(w, v);
            if (rc == RC_NESTED)
                return RC_FALLBACK;
            if (rc < 0)
                return rc;
        }
        else {
            if (!PyDict_CheckExact(v))
                return RC_FALLBACK;
            if ((rc = tree_cells(w, v, t->nodes[i].sub, ncells)) < 0)
                return rc;
        }
    }
    return RC_OK;
}

static int
w_repeat_cells(Writer *w, char c, Py_ssize_t count, Py_ssize_t *ncells)
{
    Py_ssize_t i;
    for (i = 0; i < count; i++) {
        if (w_sep(w, ncells) < 0 || w_char(w, c) < 0)
            return RC_ERR;
    }
    return RC_OK;
}

static int enc_attachment(Enc *e, PyObject *f, PyObject *v, Py_ssize_t ind, Py_ssize_t body,
                          Share *share, int depth);

typedef struct {
    Slot *slot;
    PyObject *value;
    int inline_body;
} Att;

/* _Encoder.rows: keys (a keyed map's member keys) or NULL. The declaration, for a dense
 * table's constant columns, is [decl_at, decl_at + decl_len) with the key column `label`
 * first in a keyed map. */
static int
enc_rows(Enc *e, Plan *plan, PyObject **objs, PyObject **keys, Py_ssize_t n,
         Py_ssize_t ind, int depth, Py_ssize_t decl_at, Py_ssize_t decl_len, PyObject *label)
{
    if (depth > C_MAX_DEPTH)
        return RC_FALLBACK;
    Writer *w = &e->w;
    Share share;
    memset(&share, 0, sizeof share);
    int share_ready = 0;
    char *inline_seen = PyMem_Calloc((size_t)plan->n + 1, 1);
    Att *atts = PyMem_Malloc(sizeof(Att) * (size_t)(2 * plan->n + 1));
    Cells cells = {NULL, 0, 0, 0};
    Py_ssize_t width = PyList_GET_SIZE(plan->columns) + (keys != NULL);
    int rc = RC_OK;
    if (inline_seen == NULL || atts == NULL) {
        PyErr_NoMemory();
        rc = RC_ERR;
        goto out;
    }
    if (e->dense && (rc = cells_init(&cells, width, n)) != RC_OK)
        goto out;
    Py_ssize_t body = ind + 4, i, s;
    for (i = 0; i < n; i++) {
        PyObject *obj = objs[i];
        Py_ssize_t ncells = 0, natt = 0, nlate = 0, ninline = 0;
        if (w_spaces(w, ind) < 0) {
            rc = RC_ERR;
            goto out;
        }
        Py_ssize_t cells_at = w->len;
        if (e->dense) {
            if ((w->rec = cells_row(&cells)) == NULL) {
                rc = RC_ERR;
                goto out;
            }
            w->nrec = 0;
            w->maxrec = width;
        }
        if (keys != NULL) {
            ncells = 1;
            if (w->rec != NULL)
                w->rec[w->nrec++] = w->len;
            rc = e->dense ? w_dense_str(w, keys[i], 0) : w_scalar_str(w, keys[i]);
            if (rc < 0)
                goto out;
        }
        for (s = 0; s < plan->n; s++) {
            Slot *slot = &plan->slots[s];
            PyObject *v = PyDict_GetItemWithError(obj, slot->field);
            if (v == NULL && PyErr_Occurred()) {
                rc = RC_ERR;
                goto out;
            }
            switch (slot->kind) {
            case S_SCALAR:
                if (w_sep(w, &ncells) < 0) {
                    rc = RC_ERR;
                    goto out;
                }
                if (v == NULL) {
                    rc = w_char(w, '~');
                }
                else {
                    rc = w_cell(w, v);
                    if (rc == RC_NESTED) {
                        rc = w_char(w, '^');
                        atts[natt].slot = slot;
                        atts[natt].value = v;
                        atts[natt].inline_body = 0;
                        natt++;
                    }
                }
                if (rc < 0)
                    goto out;
                break;
            case S_FLAT:
                if (v == NULL)
                    rc = w_repeat_cells(w, '~', slot->tree->width, &ncells);
                else if (v == Py_None)
                    rc = w_repeat_cells(w, '-', slot->tree->width, &ncells);
                else if (!PyDict_CheckExact(v))
                    rc = RC_FALLBACK;
                else
                    rc = tree_cells(w, v, slot->tree, &ncells);
                if (rc < 0)
                    goto out;
                break;
            case S_GT:
                if (v != NULL) {
                    /* After the column attachments, as the reference (its `late` list). */
                    Att *late = &atts[plan->n + nlate++];
                    late->slot = slot;
                    late->value = v;
                    late->inline_body = 0;
                }
                break;
            default: /* S_INLINE */
                if (w_sep(w, &ncells) < 0) {
                    rc = RC_ERR;
                    goto out;
                }
                if (v == NULL)
                    rc = w_char(w, '~');
                else {
                    if (inline_seen[s])
                        rc = w_char(w, '^');
                    else {
                        inline_seen[s] = 1;
                        rc = w_str(w, slot->inline_cell);
                    }
                    if (!PyDict_CheckExact(v))
                        rc = RC_FALLBACK;
                    atts[natt].slot = slot;
                    atts[natt].value = v;
                    atts[natt].inline_body = 1;
                    natt++;
                    ninline++;
                }
                if (rc < 0)
                    goto out;
                break;
            }
        }
        Py_ssize_t a;
        for (a = 0; a < nlate; a++)
            atts[natt++] = atts[plan->n + a];
        Py_ssize_t *P = w->rec;
        if (P != NULL) {
            w->rec = NULL;
            if (w->nrec != width) {
                rc = RC_FALLBACK; /* cannot happen: the plan's columns are the cells */
                goto out;
            }
            P[width] = w->len;
            cells.rows++;
        }
        /* A dense row carries @N only before a positional body (D8). */
        if (natt && (!e->dense || ninline)) {
            char prefix[32];
            int m = fmt_item_id(prefix, i);
            if (w_insert_ascii(w, cells_at, prefix, m) < 0) {
                rc = RC_ERR;
                goto out;
            }
            if (P != NULL)
                for (a = 0; a <= width; a++)
                    P[a] += m;
        }
        if (w_char(w, '\n') < 0) {
            rc = RC_ERR;
            goto out;
        }
        if (natt == 0)
            continue;
        for (a = 0; a < natt; a++) {
            Att *at = &atts[a];
            if (at->inline_body) {
                Py_ssize_t pos = 0, c = 0;
                PyObject *k, *x;
                if (w_spaces(w, ind) < 0) {
                    rc = RC_ERR;
                    goto out;
                }
                while (PyDict_Next(at->value, &pos, &k, &x)) {
                    if (c++ && w_char(w, '|') < 0) {
                        rc = RC_ERR;
                        goto out;
                    }
                    rc = w_cell(w, x);
                    if (rc == RC_NESTED)
                        rc = RC_FALLBACK;
                    if (rc < 0)
                        goto out;
                }
                if (w_char(w, '\n') < 0) {
                    rc = RC_ERR;
                    goto out;
                }
            }
            else {
                if (!share_ready) {
                    if (share_init(&share, e->shared) < 0) {
                        rc = RC_ERR;
                        goto out;
                    }
                    share_ready = 1;
                }
                rc = enc_attachment(e, at->slot->field, at->value, ind, body, &share,
                                    depth + 1);
                if (rc < 0)
                    goto out;
            }
        }
    }
    if (share_ready && share.enabled && PyDict_GET_SIZE(share.flat))
        rc = share_omit_repeats(e, &share, objs, n);
    if (rc == RC_OK && e->dense) {
        if (share_ready)
            rc = dense_pending(e, &share);
        if (rc == RC_OK)
            rc = dense_table(e, &cells, label, plan->columns, decl_at, decl_len,
                             keys != NULL, 1, 0);
    }
out:
    w->rec = NULL;
    if (share_ready)
        share_clear(&share);
    PyMem_Free(inline_seen);
    PyMem_Free(atts);
    PyMem_Free(cells.pos);
    return rc;
}

static int
enc_tabular(Enc *e, PyObject **objs, Py_ssize_t n, const Pre *bpre, Py_ssize_t ind,
            int depth, Share *share, PyObject *field, int *done)
{
    *done = 0;
    if (depth >= C_MAX_DEPTH)
        return RC_FALLBACK;
    Writer *w = &e->w;
    PyObject *fields = NULL;
    int rc = field_union(objs, n, &fields);
    if (rc != RC_OK)
        return rc;
    Py_ssize_t nf = PyList_GET_SIZE(fields), i;
    int any_gt = 0;
    for (i = 0; i < nf; i++)
        if (has_gt(PyList_GET_ITEM(fields, i)))
            any_gt = 1;
    if (nf && !any_gt) {
        PyObject *decl = make_decl(fields, 0, &rc);
        if (decl == NULL) {
            Py_DECREF(fields);
            return rc;
        }
        Py_ssize_t mark = w->len;
        if ((rc = w_pre(w, bpre)) < 0 || w_char(w, '[') < 0 || w_ssize(w, n) < 0 ||
            w_char(w, ']') < 0) {
            Py_DECREF(decl);
            Py_DECREF(fields);
            return rc < 0 ? rc : RC_ERR;
        }
        Py_ssize_t decl_at = w->len, decl_len = PyUnicode_GET_LENGTH(decl);
        if (w_str(w, decl) < 0 || w_char(w, '\n') < 0) {
            Py_DECREF(decl);
            Py_DECREF(fields);
            return RC_ERR;
        }
        Cells cells = {NULL, 0, 0, 0};
        if (e->dense && cells_init(&cells, nf, n) < 0) {
            Py_DECREF(decl);
            Py_DECREF(fields);
            return RC_ERR;
        }
        rc = flat_rows(e, objs, n, fields, ind, e->dense ? &cells : NULL);
        if (rc == RC_OK) {
            if (share != NULL)
                rc = share_flat_table(share, field, decl, decl_at);
            /* A dense table's constants and short rows (D6.2, D7); in an attachment, once
             * the containing table knows which fields share their schema. */
            if (rc == RC_OK && e->dense) {
                if (share != NULL)
                    rc = share_pending(share, field, fields, decl_at, decl_len, &cells);
                else
                    rc = dense_table(e, &cells, NULL, fields, decl_at, decl_len, 0, 1, 0);
            }
            PyMem_Free(cells.pos);
            Py_DECREF(decl);
            Py_DECREF(fields);
            if (rc == RC_OK)
                *done = 1;
            return rc;
        }
        PyMem_Free(cells.pos);
        Py_DECREF(decl);
        if (rc != RC_NESTED) {
            Py_DECREF(fields);
            return rc;
        }
        rollback(e, mark);
    }
    Py_DECREF(fields);
    Plan plan;
    if ((rc = make_plan(e, objs, n, depth + 1, &plan)) < 0)
        return rc;
    if (plan.n == 0)
        return RC_OK;
    Py_ssize_t mark = w->len, decl_at = 0;
    if ((rc = w_pre(w, bpre)) < 0 || w_char(w, '[') < 0 || w_ssize(w, n) < 0 ||
        w_char(w, ']') < 0 || (decl_at = w->len, w_str(w, plan.decl) < 0) ||
        w_char(w, '\n') < 0) {
        plan_free(&plan);
        return rc < 0 ? rc : RC_ERR;
    }
    rc = enc_rows(e, &plan, objs, NULL, n, ind, depth + 1, decl_at,
                  PyUnicode_GET_LENGTH(plan.decl), NULL);
    if (rc == RC_CONFLICT) {
        rollback(e, mark);
        plan_free(&plan);
        return RC_OK;
    }
    if (rc == RC_OK && share != NULL)
        rc = share_table(share, field, plan.decl);
    plan_free(&plan);
    if (rc == RC_OK)
        *done = 1;
    return rc;
}

static int
enc_keyed(Enc *e, PyObject *obj, const Pre *bpre, Py_ssize_t ind, int depth, int *done)
{
    *done = 0;
    Py_ssize_t n = PyDict_GET_SIZE(obj), i = 0;
    if (n < 2)
        return RC_OK;
    PyObject **keys = PyMem_Malloc(sizeof(PyObject *) * (size_t)n * 2);
    if (keys == NULL) {
        PyErr_NoMemory();
        return RC_ERR;
    }
    PyObject **values = keys + n;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int rc = RC_OK;
    while (PyDict_Next(obj, &pos, &k, &v)) {
        if (!PyDict_CheckExact(v)) {
            rc = PyDict_Check(v) ? RC_FALLBACK : RC_OK;
            goto out; /* not keyed */
        }
        keys[i] = k;
        values[i++] = v;
    }
    /* _has_column: some value field without '>' */
    {
        PyObject *fields = NULL;
        rc = field_union(values, n, &fields);
        if (rc != RC_OK)
            goto out;
        Py_ssize_t nf = PyList_GET_SIZE(fields), j;
        int any = 0;
        for (j = 0; j < nf && !any; j++)
            if (!has_gt(PyList_GET_ITEM(fields, j)))
                any = 1;
        Py_DECREF(fields);
        if (!any)
            goto out;
    }
    if (depth > C_MAX_DEPTH) {
        rc = RC_FALLBACK;
        goto out;
    }
    for (i = 0; i < n; i++) {
        if (!PyUnicode_CheckExact(keys[i])) {
            rc = RC_FALLBACK;
            goto out;
        }
    }
    {
        Plan plan;
        if ((rc = make_plan(e, values, n, depth + 1, &plan)) < 0)
            goto out;
        if (plan.n == 0)
            goto out;
        /* _key_label: "key", with "_" in front while a value field has that name. */
        PyObject *label = PyUnicode_FromString("key");
        while (label != NULL) {
            int clash = 0;
            Py_ssize_t s;
            for (s = 0; s < plan.n && !clash; s++)
                clash = keys_equal(plan.slots[s].field, label);
            if (!clash)
                break;
            PyObject *longer = PyUnicode_FromFormat("_%U", label);
            Py_DECREF(label);
            label = longer;
        }
        if (label == NULL) {
            plan_free(&plan);
            rc = RC_ERR;
            goto out;
        }
        Writer *w = &e->w;
        Py_ssize_t mark = w->len, decl_at = 0, decl_len = 0;
        rc = w_pre(w, bpre);
        if (rc >= 0) {
            if (w_char(w, '[') < 0 || w_ssize(w, n) < 0 || w_ascii(w, ":]", 2) < 0)
                rc = RC_ERR;
            decl_at = w->len;
            if (rc >= 0 && w_char(w, '{') < 0)
                rc = RC_ERR;
        }
        if (rc >= 0)
            rc = w_key(w, label);
        if (rc >= 0) {
            if (w_char(w, ',') < 0 ||
                w_span(w, PyUnicode_KIND(plan.decl), PyUnicode_DATA(plan.decl), 1,
                       PyUnicode_GET_LENGTH(plan.decl)) < 0)
                rc = RC_ERR;
            decl_len = w->len - decl_at;
            if (rc >= 0 && w_char(w, '\n') < 0)
                rc = RC_ERR;
        }
        if (rc >= 0)
            rc = enc_rows(e, &plan, values, keys, n, ind, depth + 1, decl_at, decl_len, label);
        Py_DECREF(label);
        plan_free(&plan);
        if (rc == RC_CONFLICT) {
            rollback(e, mark);
            rc = RC_OK;
            goto out;
        }
        if (rc == RC_OK)
            *done = 1;
    }
out:
    PyMem_Free(keys);
    return rc;
}

static int
enc_attachment(Enc *e, PyObject *f, PyObject *v, Py_ssize_t ind, Py_ssize_t body,
               Share *share, int depth)
{
    Pre pre = {PRE_DOT, ind, f, 0};
    Writer *w = &e->w;
    int rc;
    if (is_container_sub(v))
        return RC_FALLBACK;
    if (PyDict_CheckExact(v)) {
        if (PySet_Add(share->spoiled, f) < 0)
            return RC_ERR;
        int done = 0;
        if ((rc = enc_keyed(e, v, &pre, body, depth, &done)) < 0)
            return rc;
        if (done)
            return RC_OK;
        if ((rc = w_pre(w, &pre)) < 0)
            return rc;
        if (w_ascii(w, "{}\n", 3) < 0)
            return RC_ERR;
        if (PyDict_GET_SIZE(v))
            return enc_members(e, v, body, depth);
        return RC_OK;
    }
    if (!PyList_CheckExact(v) && !PyTuple_CheckExact(v)) {
        if (PySet_Add(share->spoiled, f) < 0)
            return RC_ERR;
        return enc_line_scalar(e, &pre, "=", v);
    }
    if (depth > C_MAX_DEPTH)
        return RC_FALLBACK;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
    PyObject **items = PySequence_Fast_ITEMS(v);
    int form = array_form(items, n);
    if (form < 0)
        return form;
    if (form == F_OBJECTS) {
        int done = 0;
        if ((rc = enc_tabular(e, items, n, &pre, body, depth, share, f, &done)) < 0)
            return rc;
        if (done)
            return RC_OK;
    }
    if (PySet_Add(share->spoiled, f) < 0)
        return RC_ERR;
    if (form != F_EMPTY && form != F_INLINE) {
        int c = PyDict_Contains(share->schemas, f);
        if (c < 0)
            return RC_ERR;
        if (c)
            return RC_CONFLICT;
    }
    return enc_array(e, v, &pre, &pre, body, depth);
}

static int
enc_root(Enc *e, PyObject *v)
{
    int rc;
    if (is_container_sub(v))
        return RC_FALLBACK;
    if (PyDict_CheckExact(v)) {
        Pre bpre = {PRE_HASH, 0, NULL, 0};
        int done = 0;
        if ((rc = enc_keyed(e, v, &bpre, 0, 1, &done)) < 0)
            return rc;
        if (done)
            return RC_OK;
        return enc_members(e, v, 0, 1);
    }
    if (PyList_CheckExact(v) || PyTuple_CheckExact(v)) {
        Pre bpre = {PRE_HASH, 0, NULL, 0};
        return enc_array(e, v, &bpre, &bpre, 0, 1);
    }
    if (w_char(&e->w, '=') < 0)
        return RC_ERR;
    rc = w_cell(&e->w, v);
    if (rc == RC_NESTED)
        return RC_FALLBACK;
    if (rc < 0)
        return rc;
    return w_char(&e->w, '\n');
}

static int
cmp_splices(const void *a, const void *b)
{
    Py_ssize_t x = ((const Splice *)a)->pos, y = ((const Splice *)b)->pos;
    return (x > y) - (x < y);
}

/* The text with every splice applied (they never overlap), as a str. */
static PyObject *
enc_finish(Enc *e)
{
    Writer *w = &e->w;
    if (e->nsp == 0)
        return w_finish(w);
    qsort(e->sp, (size_t)e->nsp, sizeof(Splice), cmp_splices);
    Py_ssize_t c, grow = 0;
    int k = w->kind;
    for (c = 0; c < e->nsp; c++)
        if (e->sp[c].repl != NULL)
            grow = 1;
    if (!grow) {
        /* Cuts only, in one pass in place. */
        Py_ssize_t dst = e->sp[0].pos, src;
        for (c = 0; c < e->nsp; c++) {
            src = e->sp[c].pos + e->sp[c].len;
            Py_ssize_t next = c + 1 < e->nsp ? e->sp[c + 1].pos : w->len;
            memmove(w->data + dst * k, w->data + src * k, (size_t)(next - src) * k);
            dst += next - src;
        }
        w->len = dst;
        return w_finish(w);
    }
    Writer out;
    if (w_init(&out, w->len + 64) < 0)
        return NULL;
    Py_ssize_t at = 0;
    for (c = 0; c < e->nsp; c++) {
        Splice *s = &e->sp[c];
        if (w_span(&out, k, w->data, at, s->pos) < 0 ||
            (s->repl != NULL && w_str(&out, s->repl) < 0)) {
            w_free(&out);
            return NULL;
        }
        at = s->pos + s->len;
    }
    PyObject *r = NULL;
    if (w_span(&out, k, w->data, at, w->len) == 0)
        r = w_finish(&out);
    w_free(&out);
    return r;
}

static void
enc_free(Enc *e)
{
    Py_ssize_t i;
    w_free(&e->w);
    for (i = 0; i < e->nsp; i++)
        Py_XDECREF(e->sp[i].repl);
    PyMem_Free(e->sp);
}

static void
enc_init(Enc *e, int flatten, int shared, int inline_)
{
    memset(e, 0, sizeof *e);
    e->flatten = flatten;
    e->shared = shared;
    e->inline_ = inline_;
}

/* encode(value, header, flatten, shared_schemas, inline_schemas) -> str | None */
static PyObject *
sp_encode(PyObject *self, PyObject *args)
{
    PyObject *value, *header;
    int flatten, shared, inline_;
    if (!PyArg_ParseTuple(args, "OUppp:encode", &value, &header, &flatten, &shared, &inline_))
        return NULL;
    Enc e;
    enc_init(&e, flatten, shared, inline_);
    if (w_init(&e.w, 4096) < 0)
        return NULL;
    int rc = w_str(&e.w, header);
    if (rc == RC_OK)
        rc = w_char(&e.w, '\n');
    if (rc == RC_OK)
        rc = enc_root(&e, value);
    PyObject *result = NULL;
    if (rc == RC_OK)
        result = enc_finish(&e);
    else if (rc == RC_FALLBACK || rc == RC_CONFLICT || rc == RC_NESTED) {
        result = Py_None;
        Py_INCREF(result);
    }
    enc_free(&e);
    return result;
}

/* encode_dense(value, header, defs, lists, constants, short_rows) -> (str, int) | None:
 * the dense payload of value with the definitions defs (string -> name, in name order)
 * and the U_* bits of the constructs it used. */
static PyObject *
sp_encode_dense(PyObject *self, PyObject *args)
{
    PyObject *value, *header, *defs;
    int lists, constants, short_rows;
    if (!PyArg_ParseTuple(args, "OUO!ppp:encode_dense", &value, &header, &PyDict_Type, &defs,
                          &lists, &constants, &short_rows))
        return NULL;
    Enc e;
    enc_init(&e, 1, 1, 1);
    e.dense = 1;
    e.constants = constants;
    e.short_rows = short_rows;
    if (w_init(&e.w, 4096) < 0)
        return NULL;
    e.w.dense = 1;
    e.w.lists = lists;
    PyObject *result = NULL;
    int rc = w_str(&e.w, header);
    if (rc == RC_OK)
        rc = w_char(&e.w, '\n');
    /* The definition lines "$name=spelling" (D9.1), and the references they give. */
    if (rc == RC_OK && PyDict_GET_SIZE(defs)) {
        e.w.used |= U_DEFS;
        e.w.refs = PyDict_New();
        if (e.w.refs == NULL)
            rc = RC_ERR;
        Py_ssize_t pos = 0;
        PyObject *str, *name;
        while (rc == RC_OK && PyDict_Next(defs, &pos, &str, &name)) {
            if (!PyUnicode_CheckExact(str) || !PyUnicode_CheckExact(name)) {
                rc = RC_FALLBACK;
                break;
            }
            PyObject *ref = PyUnicode_FromFormat("$%U", name);
            if (ref == NULL || PyDict_SetItem(e.w.refs, str, ref) < 0)
                rc = RC_ERR;
            Py_XDECREF(ref);
            if (rc == RC_OK && (w_char(&e.w, '$') < 0 || w_str(&e.w, name) < 0 ||
                                w_char(&e.w, '=') < 0))
                rc = RC_ERR;
            if (rc == RC_OK)
                rc = w_dense_str(&e.w, str, 0);
            if (rc == RC_OK)
                rc = w_char(&e.w, '\n');
        }
    }
    if (rc == RC_OK)
        rc = enc_root(&e, value);
    if (rc == RC_OK) {
        PyObject *text = enc_finish(&e);
        if (text != NULL)
            result = Py_BuildValue("(Ni)", text, e.w.used);
    }
    else if (rc == RC_FALLBACK || rc == RC_CONFLICT || rc == RC_NESTED) {
        result = Py_None;
        Py_INCREF(result);
    }
    Py_XDECREF(e.w.refs);
    enc_free(&e);
    return result;
}

/* format_number(x) -> str | None: canonical text of an exact int or float, for tests. */
static PyObject *
sp_format_number(PyObject *self, PyObject *v)
{
    if (!PyLong_CheckExact(v) && !PyFloat_CheckExact(v))
        Py_RETURN_NONE;
    Writer w;
    if (w_init(&w, 64) < 0)
        return NULL;
    int rc = w_cell(&w, v);
    PyObject *r = NULL;
    if (rc == RC_OK)
        r = w_finish(&w);
    else if (rc == RC_FALLBACK) {
        r = Py_None;
        Py_INCREF(r);
    }
    w_free(&w);
    return r;
}

/* format_scalar(x) -> str | None: the cell text of a scalar, None when the reference
 * decides (containers, errors, subclasses), for tests. */
static PyObject *
sp_format_scalar(PyObject *self, PyObject *v)
{
    Writer w;
    if (w_init(&w, 64) < 0)
        return NULL;
    int rc = w_cell(&w, v);
    return w_result(&w, rc);
}

/* spelling(s) -> str | None: definitions.spelling(s), the wire spelling of a string as a
 * dense row cell, or None when the reference decides (a subclass, a lone surrogate). */
static PyObject *
sp_spelling(PyObject *self, PyObject *s)
{
    if (!PyUnicode_CheckExact(s))
        Py_RETURN_NONE;
    Writer w;
    if (w_init(&w, PyUnicode_GET_LENGTH(s) + 8) < 0)
        return NULL;
    w.dense = 1;
    int rc = w_dense_str(&w, s, 0);
    return w_result(&w, rc);
}

/* ======================================================================================
 * The decoder (generic/decoder.py), for the canonical spellings: what dumps() writes,
 * read with every check of the reference. Anything else (comments, blank lines, extra
 * blanks, tabs, CR, [?] counts, summaries, id fields, any error at all) is handed back.
 * ====================================================================================== */

/* The stand-ins for ~ and ^ cells (never stored in a result). */
static PyObject MISSING_CELL_OBJ, ATTACH_CELL_OBJ;
#define MISSING_CELL (&MISSING_CELL_OBJ)
#define ATTACH_CELL (&ATTACH_CELL_OBJ)

#define MAX_LINE (8 * 1024 * 1024)

#define CACHE_SIZE 4096 /* the most slots; a power of two */
#define CACHE_MAX_LEN 24

typedef struct {
    Py_hash_t h;
    Py_ssize_t off, len;
    PyObject *value; /* owned */
} CacheEntry;

/* A parsed field declaration and its plan (generic/decoder.py _Schema and _plan). */
typedef struct PNode PNode;
typedef struct {
    int group;       /* 0: a column, 1: a flattened path group (§7.4.6.2) */
    PyObject *name;  /* owned */
    Py_ssize_t ref;  /* column: its cell index */
    PNode *sub;      /* group: its slots */
} PSlot;
struct PNode {
    Py_ssize_t n, cap;
    PSlot *slots;
};

typedef struct {
    PyObject *fields; /* list of names (owned) */
    Py_ssize_t width;
    int keyed;
    int simple; /* no path groups */
    PNode plan; /* over the value fields (cell indices from 1 in a keyed map) */
    /* dense (D6): per field its constant value (owned) or NULL, and the cells of a row */
    PyObject **consts;
    Py_ssize_t row_width;
} Schema;

typedef struct {
    PyObject *text;
    int kind;
    const void *data;
    Py_ssize_t n;
    /* the current line: [pos, end) with its indentation; cs is its first non-blank */
    Py_ssize_t pos, end, ind, cs;
    int eof;
    int depth;
    CacheEntry *cache; /* repeated tokens, direct-mapped */
    size_t cache_mask;
    PyObject *schemas; /* (decl text, keyed) -> capsule(Schema) */
    Py_UCS4 *tmp;      /* unescaped text of quoted strings */
    Py_ssize_t tmpcap;
    /* A dense payload (docs/extensions/dense.md): its definitions, "$a", "$b"... in order */
    int dense;
    PyObject **defs;
    Py_ssize_t ndefs, capdefs;
    int split_lists; /* while a dense row is split: list cells are cells (D5.1) */
} Dec;

#define CH(d, i) PyUnicode_READ((d)->kind, (d)->data, (i))
/* The hot scanners are written once with the text's kind as a parameter and compiled once
 * per kind (the kind is a constant in each copy, so reads are plain array loads). */
#define CK(i) PyUnicode_READ(kind, d->data, (i))
#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define ALWAYS_INLINE __forceinline
#else
#define ALWAYS_INLINE inline
#endif

static void
pnode_clear(PNode *p)
{
    Py_ssize_t i;
    for (i = 0; i < p->n; i++) {
        Py_XDECREF(p->slots[i].name);
        if (p->slots[i].sub != NULL) {
            pnode_clear(p->slots[i].sub);
            PyMem_Free(p->slots[i].sub);
        }
    }
    PyMem_Free(p->slots);
    p->slots = NULL;
    p->n = p->cap = 0;
}

static PSlot *
pnode_add(PNode *p)
{
    if (p->n == p->cap) {
        Py_ssize_t cap = p->cap ? p->cap * 2 : 8;
        PSlot *s = PyMem_Realloc(p->slots, sizeof(PSlot) * (size_t)cap);
        if (s == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        p->slots = s;
        p->cap = cap;
    }
    PSlot *s = &p->slots[p->n++];
    s->group = 0;
    s->name = NULL;
    s->ref = 0;
    s->sub = NULL;
    return s;
}

static void
schema_free(Schema *s)
{
    Py_ssize_t i;
    if (s->consts != NULL) {
        for (i = 0; i < s->width; i++)
            Py_XDECREF(s->consts[i]);
        PyMem_Free(s->consts);
    }
    Py_XDECREF(s->fields);
    pnode_clear(&s->plan);
    PyMem_Free(s);
}

static void
schema_capsule_free(PyObject *cap)
{
    schema_free(PyCapsule_GetPointer(cap, "gcfkit.schema"));
}

/* -- lines ------------------------------------------------------------------------------ */

static Py_ssize_t
find_newline(Dec *d, Py_ssize_t from)
{
    if (d->kind == PyUnicode_1BYTE_KIND) {
        const char *p = (const char *)d->data;
        const char *hit = memchr(p + from, '\n', (size_t)(d->n - from));
        return hit ? hit - p : d->n;
    }
    Py_ssize_t i;
    for (i = from; i < d->n; i++)
        if (CH(d, i) == '\n')
            return i;
    return d->n;
}

/* Load the line that starts at d->pos. Only canonical lines pass: not empty (except the
 * end of the text), no tab or blank-only indentation, even indentation, no trailing
 * blank. */
static ALWAYS_INLINE int
load_line_k(Dec *d, const int kind)

{
    if (d->pos >= d->n) {
        d->eof = 1;
        d->ind = -1;
        return RC_OK;
    }
    d->end = find_newline(d, d->pos);
    if (d->end - d->pos > MAX_LINE)
        return RC_FALLBACK;
    Py_ssize_t i = d->pos;
    while (i < d->end && CK(i) == ' ')
        i++;
    if (i == d->end)
        return RC_FALLBACK; /* empty or blank line */
    Py_UCS4 last = CK(d->end - 1);
    if (CK(i) == '\t' || last == ' ' || last == '\t' || ((i - d->pos) & 1))
        return RC_FALLBACK;
    d->ind = i - d->pos;
    d->cs = i;
    /* '#' lines: "## ..." are sections; comments and summaries go to the reference. */
    if (CK(i) == '#' && (i + 1 >= d->end || CK(i + 1) != '#' || i + 2 >= d->end ||
                            CK(i + 2) != ' '))
        return RC_FALLBACK;
    return RC_OK;
}

static int
load_line(Dec *d)
{
    switch (d->kind) {
    case PyUnicode_1BYTE_KIND:
        return load_line_k(d, PyUnicode_1BYTE_KIND);
    case PyUnicode_2BYTE_KIND:
        return load_line_k(d, PyUnicode_2BYTE_KIND);
    default:
        return load_line_k(d, PyUnicode_4BYTE_KIND);
    }
}

static int
advance(Dec *d)
{
    d->pos = d->end + 1;
    return load_line(d);
}

/* -- scalars ---------------------------------------------------------------------------- */

static int
tmp_reserve(Dec *d, Py_ssize_t n)
{
    if (n <= d->tmpcap)
        return RC_OK;
    Py_ssize_t cap = d->tmpcap ? d->tmpcap : 256;
    while (cap < n)
        cap *= 2;
    Py_UCS4 *p = PyMem_Realloc(d->tmp, sizeof(Py_UCS4) * (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return RC_ERR;
    }
    d->tmp = p;
    d->tmpcap = cap;
    return RC_OK;
}

static int
hexval(Py_UCS4 c)
{
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return (int)(c - 'a' + 10);
    return -1;
}

static int
read_hex4(Dec *d, Py_ssize_t i, Py_ssize_t stop, Py_UCS4 *out)
{
    if (i + 4 > stop)
        return RC_FALLBACK;
    Py_UCS4 v = 0;
    int k;
    for (k = 0; k < 4; k++) {
        int h = hexval(CH(d, i + k));
        if (h < 0)
            return RC_FALLBACK;
        v = (v << 4) | (Py_UCS4)h;
    }
    *out = v;
    return RC_OK;
}

/* The quoted string (§2.2) at d[i] == '"', within [i, stop). *out is a new str and *next
 * the index after the closing quote. Escapes, control characters and surrogates follow
 * scalar.parse_quoted_at; whatever it would reject (or join from literal surrogates) is
 * handed back. */
static ALWAYS_INLINE int
parse_quoted_k(Dec *d, const int kind, Py_ssize_t i, Py_ssize_t stop, PyObject **out, Py_ssize_t *next)

{
    Py_ssize_t j = i + 1, start = i + 1;
    int escapes = 0;
    Py_UCS4 maxc = 0;
    for (;;) {
        if (j >= stop)
            return RC_FALLBACK; /* unterminated */
        Py_UCS4 c = CK(j);
        if (c == '"')
            break;
        if (c < 0x20 || IS_SURROGATE(c))
            return RC_FALLBACK;
        if (c == '\\') {
            escapes = 1;
            j += 2;
            continue;
        }
        if (c > maxc)
            maxc = c;
        j++;
    }
    *next = j + 1;
    if (!escapes) {
        if (kind == PyUnicode_1BYTE_KIND && maxc < 0x80) {
            PyObject *s = PyUnicode_New(j - start, 127);
            if (s == NULL)
                return RC_ERR;
            memcpy(PyUnicode_1BYTE_DATA(s), (const char *)d->data + start, (size_t)(j - start));
            *out = s;
        }
        else {
            *out = PyUnicode_Substring(d->text, start, j);
            if (*out == NULL)
                return RC_ERR;
        }
        return RC_OK;
    }
    if (tmp_reserve(d, j - start) < 0)
        return RC_ERR;
    Py_ssize_t o = 0, k = start;
    while (k < j) {
        Py_UCS4 c = CK(k);
        if (c != '\\') {
            d->tmp[o++] = c;
            k++;
            continue;
        }
        Py_UCS4 e = CK(k + 1); /* k + 1 < j: the loop above skipped in pairs */
        k += 2;
        switch (e) {
        case '"': d->tmp[o++] = '"'; break;
        case '\\': d->tmp[o++] = '\\'; break;
        case '/': d->tmp[o++] = '/'; break;
        case 'b': d->tmp[o++] = '\b'; break;
        case 'f': d->tmp[o++] = '\f'; break;
        case 'n': d->tmp[o++] = '\n'; break;
        case 'r': d->tmp[o++] = '\r'; break;
        case 't': d->tmp[o++] = '\t'; break;
        case 'u': {
            Py_UCS4 u;
            if (read_hex4(d, k, j, &u) < 0)
                return RC_FALLBACK;
            k += 4;
            if (0xDC00 <= u && u <= 0xDFFF)
                return RC_FALLBACK;
            if (0xD800 <= u && u <= 0xDBFF) {
                Py_UCS4 lo;
                if (k + 6 > j || CK(k) != '\\' || CK(k + 1) != 'u' ||
                    read_hex4(d, k + 2, j, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
                    return RC_FALLBACK;
                k += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
            d->tmp[o++] = u;
            break;
        }
        default:
            return RC_FALLBACK; /* invalid_escape */
        }
    }
    *out = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, d->tmp, o);
    return *out == NULL ? RC_ERR : RC_OK;
}

static int
parse_quoted(Dec *d, Py_ssize_t i, Py_ssize_t stop, PyObject **out, Py_ssize_t *next)
{
    switch (d->kind) {
    case PyUnicode_1BYTE_KIND:
        return parse_quoted_k(d, PyUnicode_1BYTE_KIND, i, stop, out, next);
    case PyUnicode_2BYTE_KIND:
        return parse_quoted_k(d, PyUnicode_2BYTE_KIND, i, stop, out, next);
    default:
        return parse_quoted_k(d, PyUnicode_4BYTE_KIND, i, stop, out, next);
    }
}

static Py_hash_t
span_hash(Dec *d, Py_ssize_t a, Py_ssize_t b)
{
    Py_uhash_t h = 1469598103934665603ULL;
    Py_ssize_t i;
    if (d->kind == PyUnicode_1BYTE_KIND) {
        /* Eight characters at a time; the cache compares the texts anyway. */
        const unsigned char *p = (const unsigned char *)d->data;
        for (i = a; i + 8 <= b; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
            h ^= h >> 29;
        }
        for (; i < b; i++)
            h = (h ^ p[i]) * 1099511628211ULL;
    }
    else {
        for (i = a; i < b; i++)
            h = (h ^ CH(d, i)) * 1099511628211ULL;
    }
    return (Py_hash_t)(h ^ (Py_uhash_t)(b - a));
}

/* The JSON number grammar of §2.3 over [a, b); *is_float when it has a fraction or an
 * exponent. */
static ALWAYS_INLINE int
span_number_k(Dec *d, const int kind, Py_ssize_t a, Py_ssize_t b, int *is_float)

{
    Py_ssize_t i = a;
    *is_float = 0;
    if (CK(i) == '-')
        i++;
    if (i >= b)
        return 0;
    Py_UCS4 c = CK(i);
    if (c == '0')
        i++;
    else if (c >= '1' && c <= '9') {
        while (i < b && is_digit(CK(i)))
            i++;
    }
    else
        return 0;
    if (i < b && CK(i) == '.') {
        *is_float = 1;
        i++;
        if (i >= b || !is_digit(CK(i)))
            return 0;
        while (i < b && is_digit(CK(i)))
            i++;
    }
    if (i < b && (CK(i) | 0x20) == 'e') {
        *is_float = 1;
        i++;
        if (i < b && (CK(i) == '+' || CK(i) == '-'))
            i++;
        if (i >= b || !is_digit(CK(i)))
            return 0;
        while (i < b && is_digit(CK(i)))
            i++;
    }
    return i == b;
}


static ALWAYS_INLINE int
make_number_k(Dec *d, const int kind, Py_ssize_t a, Py_ssize_t b, int is_float, PyObject **out)

{
    if (!is_float) {
        /* int64 only (§2.3.2); larger integers are the reference's out_of_range. */
        Py_ssize_t i = a;
        int neg = 0;
        if (CK(i) == '-') {
            neg = 1;
            i++;
        }
        if (b - i > 19)
            return RC_FALLBACK;
        uint64_t v = 0;
        for (; i < b; i++) {
            uint64_t digit = CK(i) - '0';
            if (v > (UINT64_MAX - digit) / 10)
                return RC_FALLBACK;
            v = v * 10 + digit;
        }
        if (neg) {
            if (v > (uint64_t)INT64_MAX + 1)
                return RC_FALLBACK;
            *out = PyLong_FromLongLong(v == (uint64_t)INT64_MAX + 1 ? INT64_MIN
                                                                     : -(long long)v);
        }
        else {
            if (v > (uint64_t)INT64_MAX)
                return RC_FALLBACK;
            *out = PyLong_FromLongLong((long long)v);
        }
        return *out == NULL ? RC_ERR : RC_OK;
    }
    char small[64];
    char *buf = small;
    Py_ssize_t len = b - a, i;
    if (len <= 0)
        return RC_FALLBACK;
    if (len >= (Py_ssize_t)sizeof small) {
        buf = PyMem_Malloc((size_t)len + 1);
        if (buf == NULL) {
            PyErr_NoMemory();
            return RC_ERR;
        }
    }
    for (i = 0; i < len; i++)
        buf[i] = (char)CK(a + i);
    buf[len] = 0;
    char *endp = NULL;
    double v = PyOS_string_to_double(buf, &endp, NULL);
    int bad = endp != buf + len;
    if (buf != small)
        PyMem_Free(buf);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return RC_FALLBACK;
    }
    if (bad || !isfinite(v))
        return RC_FALLBACK; /* out_of_range */
    *out = PyFloat_FromDouble(v);
    return *out == NULL ? RC_ERR : RC_OK;
}


/* A bare string [a, b): no control character (those, and blanks at either end, only
 * reach the reference), no surrogate (invalid_surrogate). */
static ALWAYS_INLINE int
make_bare_k(Dec *d, const int kind, Py_ssize_t a, Py_ssize_t b, PyObject **out)

{
    Py_ssize_t i;
    Py_UCS4 maxc = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const unsigned char *p = (const unsigned char *)d->data;
        for (i = a; i < b; i++) {
            if (p[i] < 0x20)
                return RC_FALLBACK;
            maxc |= p[i];
        }
        if (maxc < 0x80) {
            PyObject *s = PyUnicode_New(b - a, 127);
            if (s == NULL)
                return RC_ERR;
            memcpy(PyUnicode_1BYTE_DATA(s), p + a, (size_t)(b - a));
            *out = s;
            return RC_OK;
        }
    }
    else {
        for (i = a; i < b; i++) {
            Py_UCS4 c = CK(i);
            if (c < 0x20 || IS_SURROGATE(c))
                return RC_FALLBACK;
        }
    }
    *out = PyUnicode_Substring(d->text, a, b);
    return *out == NULL ? RC_ERR : RC_OK;
}

static int
make_bare(Dec *d, Py_ssize_t a, Py_ssize_t b, PyObject **out)
{
    switch (d->kind) {
    case PyUnicode_1BYTE_KIND:
        return make_bare_k(d, PyUnicode_1BYTE_KIND, a, b, out);
    case PyUnicode_2BYTE_KIND:
        return make_bare_k(d, PyUnicode_2BYTE_KIND, a, b, out);
    default:
        return make_bare_k(d, PyUnicode_4BYTE_KIND, a, b, out);
    }
}

/* One unquoted scalar token [a, b) by the precedence of §2.1 (scalar.parse_scalar). In a
 * row cell (in_row), ~ and ^ give the stand-ins; elsewhere they are the reference's
 * errors. A ^{...} cell is left to the caller (*out == ATTACH_CELL with *decl_at > 0). */
static ALWAYS_INLINE int
parse_token_k(Dec *d, const int kind, Py_ssize_t a, Py_ssize_t b, int in_row, PyObject **out)

{
    Py_ssize_t len = b - a;
    if (len == 0)
        return RC_FALLBACK;
    Py_UCS4 c0 = CK(a);
    Py_UCS4 cl = CK(b - 1);
    if (c0 == ' ' || cl == ' ')
        return RC_FALLBACK;
    if (c0 == '$' && d->dense) {
        /* A reference (D4.2), by its canonical name: a..z, aa.. in definition order. */
        Py_ssize_t i, idx = 0;
        if (len < 2 || len > 7)
            return RC_FALLBACK;
        for (i = a + 1; i < b; i++) {
            Py_UCS4 c = CK(i);
            if (c < 'a' || c > 'z')
                return RC_FALLBACK;
            idx = idx * 26 + (Py_ssize_t)(c - 'a' + 1);
        }
        if (idx - 1 >= d->ndefs)
            return RC_FALLBACK; /* undefined_reference */
        *out = d->defs[idx - 1];
        Py_INCREF(*out);
        return RC_OK;
    }
    if (len == 1) {
        if (c0 == '-') {
            Py_INCREF(Py_None);
            *out = Py_None;
            return RC_OK;
        }
        if (c0 == '~' || c0 == '^') {
            if (!in_row)
                return RC_FALLBACK;
            *out = c0 == '~' ? MISSING_CELL : ATTACH_CELL;
            return RC_OK;
        }
    }
    if (c0 == '^' && len > 1 && CK(a + 1) == '{' && cl == '}')
        return RC_FALLBACK; /* a row reads ^{...} itself; elsewhere it is an error */
    if (c0 == 't' && len == 4 && CK(a + 1) == 'r' && CK(a + 2) == 'u' && cl == 'e') {
        Py_INCREF(Py_True);
        *out = Py_True;
        return RC_OK;
    }
    if (c0 == 'f' && len == 5 && CK(a + 1) == 'a' && CK(a + 2) == 'l' &&
        CK(a + 3) == 's' && cl == 'e') {
        Py_INCREF(Py_False);
        *out = Py_False;
        return RC_OK;
    }
    /* Repeated tokens (enums, flags, small numbers) share one object, as the reference's
     * memo makes them do, and skip the parse. */
    CacheEntry *slot = NULL;
    Py_hash_t h = 0;
    if (len <= CACHE_MAX_LEN) {
        h = span_hash(d, a, b);
        slot = &d->cache[(size_t)h & d->cache_mask];
        if (slot->value != NULL && slot->h == h && slot->len == len &&
            memcmp((const char *)d->data + slot->off * kind,
                   (const char *)d->data + a * kind, (size_t)(len * kind)) == 0) {
            Py_INCREF(slot->value);
            *out = slot->value;
            return RC_OK;
        }
    }
    int rc, is_float;
    if ((c0 == '-' || is_digit(c0)) && span_number_k(d, kind, a, b, &is_float))
        rc = make_number_k(d, kind, a, b, is_float, out);
    else
        rc = make_bare_k(d, kind, a, b, out);
    if (rc != RC_OK)
        return rc;
    if (slot != NULL) {
        Py_XDECREF(slot->value);
        Py_INCREF(*out);
        slot->value = *out;
        slot->h = h;
        slot->off = a;
        slot->len = len;
    }
    return RC_OK;
}

static int
parse_token(Dec *d, Py_ssize_t a, Py_ssize_t b, int in_row, PyObject **out)
{
    switch (d->kind) {
    case PyUnicode_1BYTE_KIND:
        return parse_token_k(d, PyUnicode_1BYTE_KIND, a, b, in_row, out);
    case PyUnicode_2BYTE_KIND:
        return parse_token_k(d, PyUnicode_2BYTE_KIND, a, b, in_row, out);
    default:
        return parse_token_k(d, PyUnicode_4BYTE_KIND, a, b, in_row, out);
    }
}

/* A whole value token [a, b) (key=value, @N =value, =root): quoted or unquoted. */
static int
parse_value(Dec *d, Py_ssize_t a, Py_ssize_t b, PyObject **out)
{
    *out = NULL;
    if (a < b && CH(d, a) == '"') {
        Py_ssize_t next;
        int rc = parse_quoted(d, a, b, out, &next);
        if (rc != RC_OK)
            return rc;
        if (next != b) {
            Py_CLEAR(*out);
            return RC_FALLBACK; /* trailing_characters */
        }
        return RC_OK;
    }
    return parse_token(d, a, b, 0, out);
}

static int parse_inline_decl(Dec *d, Py_ssize_t a, Py_ssize_t b, PyObject **out,
                             Py_ssize_t *end);

/* grammar.LIST_HEAD at i: "[" [^\]|]* "]:" (the head of a dense list cell). */
static ALWAYS_INLINE int
list_head_k(Dec *d, const int kind, Py_ssize_t i, Py_ssize_t b)
{
    Py_ssize_t j = i + 1;
    while (j < b && CK(j) != ']' && CK(j) != '|')
        j++;
    return j + 1 < b && CK(j) == ']' && CK(j + 1) == ':';
}

/* Split [a, b) on delim outside quoted cells (scalar.split_cells for canonical text):
 * each cell's [start, end) goes to spans, quoted cells with their quotes. Returns the
 * count, or RC_FALLBACK when a quoted cell does not end at a delimiter (or the line). */
static ALWAYS_INLINE Py_ssize_t
split_cells_k(Dec *d, const int kind, Py_ssize_t a, Py_ssize_t b, Py_UCS4 delim, Py_ssize_t *spans,
            Py_ssize_t max)

{
    Py_ssize_t count = 0, i = a;
    for (;;) {
        if (count >= max)
            return RC_FALLBACK; /* wider than the caller allows: width mismatch */
        Py_ssize_t j;
        if (i < b && CK(i) == '"') {
            j = i + 1;
            for (;;) {
                if (j >= b)
                    return RC_FALLBACK;
                Py_UCS4 c = CK(j);
                if (c == '"')
                    break;
                j += c == '\\' ? 2 : 1;
            }
            j++;
            if (j < b && CK(j) != delim)
                return RC_FALLBACK; /* trailing characters after a closing quote */
        }
        else if (d->split_lists && i < b && CK(i) == '[' && list_head_k(d, kind, i, b)) {
            /* A list cell (D5.1): its quoted elements may hold the delimiter. */
            j = i;
            while (j < b && CK(j) != delim) {
                if (CK(j) == '"') {
                    j++;
                    while (j < b && CK(j) != '"')
                        j += CK(j) == '\\' ? 2 : 1;
                    if (j >= b)
                        return RC_FALLBACK;
                }
                j++;
            }
        }
        else if (kind == PyUnicode_1BYTE_KIND) {
            const char *p = (const char *)d->data;
            const char *hit = memchr(p + i, (int)delim, (size_t)(b - i));
            j = hit ? hit - p : b;
        }
        else {
            j = i;
            while (j < b && CK(j) != delim)
                j++;
        }
        Py_UCS4 k0 = i + 2 < b ? CK(i + 2) : 0;
        if (j - i > 1 && CK(i) == '^' && CK(i + 1) == '{' &&
            (k0 == '"' || k0 == '_' || (k0 >= 'A' && k0 <= 'Z') || (k0 >= 'a' && k0 <= 'z'))) {
            /* scalar.split_cells reads a ^{...} cell's declaration (when the text has a
             * quote), whose quoted names may hold the delimiter, and whose names hold ','
             * in inline arrays. Without a key after "^{" that reading fails at once and
             * the cell ends at the delimiter, as here. */
            Py_ssize_t k, from = delim == ',' ? a : i, to = delim == ',' ? b : j;
            for (k = from; k < to; k++)
                if (CK(k) == '"')
                    break;
            if (k < to) {
                PyObject *names;
                Py_ssize_t e;
                if (delim == ',')
                    return RC_FALLBACK;
                int rc = parse_inline_decl(d, i, b, &names, &e);
                if (rc != RC_OK)
                    return rc;
                Py_DECREF(names);
                if (e < b && CK(e) != delim)
                    return RC_FALLBACK;
                j = e;
            }
        }
        spans[2 * count] = i;
        spans[2 * count + 1] = j;
        count++;
        if (j >= b)
            return count;
        i = j + 1;
    }
}

static Py_ssize_t
split_cells(Dec *d, Py_ssize_t a, Py_ssize_t b, Py_UCS4 delim, Py_ssize_t *spans,
            Py_ssize_t max)
{
    switch (d->kind) {
    case PyUnicode_1BYTE_KIND:
        return split_cells_k(d, PyUnicode_1BYTE_KIND, a, b, delim, spans, max);
    case PyUnicode_2BYTE_KIND:
        return split_cells_k(d, PyUnicode_2BYTE_KIND, a, b, delim, spans, max);
    default:
        return split_cells_k(d, PyUnicode_4BYTE_KIND, a, b, delim, spans, max);
    }
}

static int parse_inline_values(Dec *d, Py_ssize_t a, Py_ssize_t b, Py_ssize_t count,
                               PyObject **out);

static int
list_head(Dec *d, Py_ssize_t i, Py_ssize_t b)
{
    switch (d->kind) {
    case PyUnicode_1BYTE_KIND:
        return list_head_k(d, PyUnicode_1BYTE_KIND, i, b);
    case PyUnicode_2BYTE_KIND:
        return list_head_k(d, PyUnicode_2BYTE_KIND, i, b);
    default:
        return list_head_k(d, PyUnicode_4BYTE_KIND, i, b);
    }
}

/* A dense list cell "[N]: a,b" or "[0]:" at [a, b) (D5.1): its list. */
static int
parse_list_cell(Dec *d, Py_ssize_t a, Py_ssize_t b, PyObject **out)
{
    Py_ssize_t q = a + 1, count = 0;
    if (CH(d, q) == '0')
        q++;
    else {
        while (q < b && is_digit(CH(d, q)) && q - a <= 9) {
            count = count * 10 + (Py_ssize_t)(CH(d, q) - '0');
            q++;
        }
        if (q == a + 1 || CH(d, a + 1) == '0')
            return RC_FALLBACK; /* invalid_count */
    }
    if (q + 1 >= b || CH(d, q) != ']' || CH(d, q + 1) != ':')
        return RC_FALLBACK;
    q += 2;
    if (q == b) {
        if (count)
            return RC_FALLBACK; /* count_mismatch */
        *out = PyList_New(0);
        return *out == NULL ? RC_ERR : RC_OK;
    }
    if (CH(d, q) != ' ' || count == 0 || count > b - q)
        return RC_FALLBACK;
    return parse_inline_values(d, q, b, count, out);
}

/* A cell given its span: quoted string or token (in a dense row, also a list cell). */
static int
parse_cell(Dec *d, Py_ssize_t a, Py_ssize_t b, int in_row, PyObject **out)
{
    if (a < b && CH(d, a) == '"') {
        Py_ssize_t next;
        return parse_quoted(d, a, b, out, &next); /* split_cells checked the end */
    }
    if (in_row && d->dense && a < b && CH(d, a) == '[' && list_head(d, a, b))
        return parse_list_cell(d, a, b, out);
    return parse_token(d, a, b, in_row, out);
}

/* _scalar_list: the values of an inline array, text [a, b) after its ':'. */
static int
parse_inline_values(Dec *d, Py_ssize_t a, Py_ssize_t b, Py_ssize_t count, PyObject **out)
{
    if (a < b && CH(d, a) == ' ')
        a++; /* the one blank of "key[N]: v" */
    if (a >= b || count == 0)
        return RC_FALLBACK; /* "key[0]:" is not canonical; "[N]:" with no values errs */
    Py_ssize_t *spans = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)count);
    if (spans == NULL) {
        PyErr_NoMemory();
        return RC_ERR;
    }
    Py_ssize_t got = split_cells(d, a, b, ',', spans, count), i;
    int rc = RC_OK;
    PyObject *list = NULL;
    if (got != count) {
        rc = got < 0 ? (int)got : RC_FALLBACK; /* count_mismatch */
        goto done;
    }
    list = PyList_New(count);
    if (list == NULL) {
        rc = RC_ERR;
        goto done;
    }
    for (i = 0; i < count; i++) {
        PyObject *v;
        if ((rc = parse_cell(d, spans[2 * i], spans[2 * i + 1], 0, &v)) != RC_OK)
            goto done;
        PyList_SET_ITEM(list, i, v);
    }
done:
    PyMem_Free(spans);
    if (rc != RC_OK) {
        Py_XDECREF(list);
        return rc;
    }
    *out = list;
    return RC_OK;
}

/* -- keys and declarations -------------------------------------------------------------- */

/* A bare ([A-Za-z_][A-Za-z0-9_]*) or quoted key at i; *next after it. */
static int
parse_key(Dec *d, Py_ssize_t i, Py_ssize_t stop, PyObject **out, Py_ssize_t *next)
{
    if (i < stop && CH(d, i) == '"')
        return parse_quoted(d, i, stop, out, next);
    Py_ssize_t j = i;
    while (j < stop) {
        Py_UCS4 c = CH(d, j);
        int alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        if (!alpha && !(j > i && is_digit(c)))
            break;
        j++;
    }
    if (j == i)
        return RC_FALLBACK; /* invalid_key */
    *next = j;
    return make_bare(d, i, j, out);
}

/* generic/decoder.py _plan: plain columns and flattened path groups, with every collision
 * it rejects handed back. */
static int
build_plan(Schema *s, Py_ssize_t offset)
{
    PyObject *fields = s->fields;
    Py_ssize_t nf = PyList_GET_SIZE(fields), i;
    int rc = RC_OK;
    PyObject *top = PySet_New(NULL), *leaves = PySet_New(NULL), *groups = PyDict_New();
    PNode **nodes = NULL;
    Py_ssize_t nnodes = 0, capnodes = 0;
    if (top == NULL || leaves == NULL || groups == NULL) {
        rc = RC_ERR;
        goto done;
    }
    for (i = offset; i < nf; i++) {
        PyObject *name = PyList_GET_ITEM(fields, i);
        PyObject *segs = NULL;
        Py_ssize_t nseg = 0, k;
        if (has_gt(name)) {
            PyObject *gt = PyUnicode_FromString(">");
            if (gt == NULL) {
                rc = RC_ERR;
                goto done;
            }
            segs = PyUnicode_Split(name, gt, -1);
            Py_DECREF(gt);
            if (segs == NULL) {
                rc = RC_ERR;
                goto done;
            }
            nseg = PyList_GET_SIZE(segs);
            for (k = 0; k < nseg; k++)
                if (PyUnicode_GET_LENGTH(PyList_GET_ITEM(segs, k)) == 0)
                    break;
            if (k < nseg) {
                Py_DECREF(segs);
                segs = NULL; /* an empty segment: a literal name */
            }
        }
        if (segs == NULL) {
            int c = PySet_Contains(top, name);
            if (c != 0) {
                rc = c < 0 ? RC_ERR : RC_FALLBACK;
                goto done;
            }
            if (PySet_Add(top, name) < 0) {
                rc = RC_ERR;
                goto done;
            }
            PSlot *slot = pnode_add(&s->plan);
            if (slot == NULL) {
                rc = RC_ERR;
                goto done;
            }
            Py_INCREF(name);
            slot->name = name;
            slot->ref = i;
            continue;
        }
        s->simple = 0;
        if (nseg > C_MAX_DEPTH) {
            Py_DECREF(segs);
            rc = RC_FALLBACK;
            goto done;
        }
        PNode *level = &s->plan;
        for (k = 0; k < nseg - 1 && rc == RC_OK; k++) {
            PyObject *path = PyList_GetSlice(segs, 0, k + 1);
            PyObject *key = path ? PyList_AsTuple(path) : NULL;
            Py_XDECREF(path);
            if (key == NULL) {
                rc = RC_ERR;
                break;
            }
            int c = PySet_Contains(leaves, key);
            if (c != 0) {
                rc = c < 0 ? RC_ERR : RC_FALLBACK;
                Py_DECREF(key);
                break;
            }
            PyObject *idx = PyDict_GetItemWithError(groups, key);
            if (idx == NULL && PyErr_Occurred()) {
                rc = RC_ERR;
                Py_DECREF(key);
                break;
            }
            if (idx == NULL) {
                PyObject *seg0 = PyList_GET_ITEM(segs, 0);
                if (k == 0) {
                    c = PySet_Contains(top, seg0);
                    if (c != 0 || PySet_Add(top, seg0) < 0) {
                        rc = c > 0 ? RC_FALLBACK : RC_ERR;
                        Py_DECREF(key);
                        break;
                    }
                }
                PNode *sub = PyMem_Calloc(1, sizeof(PNode));
                PSlot *slot = sub ? pnode_add(level) : NULL;
                if (nnodes == capnodes) {
                    capnodes = capnodes ? capnodes * 2 : 8;
                    PNode **p = PyMem_Realloc(nodes, sizeof(PNode *) * (size_t)capnodes);
                    if (p == NULL)
                        slot = NULL;
                    else
                        nodes = p;
                }
                PyObject *pidx = slot ? PyLong_FromSsize_t(nnodes) : NULL;
                if (pidx == NULL || PyDict_SetItem(groups, key, pidx) < 0) {
                    Py_XDECREF(pidx);
                    PyMem_Free(sub);
                    if (slot != NULL)
                        level->n--;
                    if (!PyErr_Occurred())
                        PyErr_NoMemory();
                    rc = RC_ERR;
                    Py_DECREF(key);
                    break;
                }
                Py_DECREF(pidx);
                slot->group = 1;
                slot->name = PyList_GET_ITEM(segs, k);
                Py_INCREF(slot->name);
                slot->sub = sub;
                nodes[nnodes++] = sub;
                level = sub;
            }
            else {
                level = nodes[PyLong_AsSsize_t(idx)];
            }
            Py_DECREF(key);
        }
        if (rc == RC_OK) {
            PyObject *key = PyList_AsTuple(segs);
            if (key == NULL)
                rc = RC_ERR;
            else {
                int c1 = PySet_Contains(leaves, key);
                int c2 = PyDict_Contains(groups, key);
                if (c1 != 0 || c2 != 0)
                    rc = (c1 < 0 || c2 < 0) ? RC_ERR : RC_FALLBACK;
                else if (PySet_Add(leaves, key) < 0)
                    rc = RC_ERR;
                Py_DECREF(key);
            }
        }
        if (rc == RC_OK) {
            PSlot *slot = pnode_add(level);
            if (slot == NULL)
                rc = RC_ERR;
            else {
                slot->name = PyList_GET_ITEM(segs, nseg - 1);
                Py_INCREF(slot->name);
                slot->ref = i;
            }
        }
        Py_DECREF(segs);
        if (rc != RC_OK)
            goto done;
    }
done:
    PyMem_Free(nodes);
    Py_XDECREF(top);
    Py_XDECREF(leaves);
    Py_XDECREF(groups);
    return rc;
}

/* The declaration {...} at i, which must end the line; the schema is cached by its text. */
static int
get_schema(Dec *d, Py_ssize_t i, int keyed, Schema **out, PyObject **capsule)
{
    PyObject *text = PyUnicode_Substring(d->text, i, d->end);
    if (text == NULL)
        return RC_ERR;
    PyObject *key = Py_BuildValue("(Ni)", text, keyed);
    if (key == NULL)
        return RC_ERR;
    PyObject *cap = PyDict_GetItemWithError(d->schemas, key);
    if (cap != NULL) {
        Py_DECREF(key);
        *out = PyCapsule_GetPointer(cap, "gcfkit.schema");
        *capsule = cap;
        return RC_OK;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        return RC_ERR;
    }
    Schema *s = PyMem_Calloc(1, sizeof(Schema));
    PyObject *seen = PySet_New(NULL);
    int rc = RC_OK;
    if (s == NULL || seen == NULL) {
        PyMem_Free(s);
        Py_XDECREF(seen);
        Py_DECREF(key);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return RC_ERR;
    }
    s->keyed = keyed;
    s->simple = 1;
    s->fields = PyList_New(0);
    if (s->fields == NULL) {
        rc = RC_ERR;
        goto fail;
    }
    PyObject **consts = NULL; /* dense constant columns (D6), by field index */
    Py_ssize_t nconst = 0, capconst = 0;
    Py_ssize_t p = i + 1;
    for (;;) {
        PyObject *name;
        Py_ssize_t next;
        if ((rc = parse_key(d, p, d->end, &name, &next)) != RC_OK)
            goto fail_consts;
        int c = PySet_Contains(seen, name);
        if (c != 0 || PySet_Add(seen, name) < 0 || PyList_Append(s->fields, name) < 0) {
            Py_DECREF(name);
            rc = c > 0 ? RC_FALLBACK : RC_ERR; /* duplicate_field_name */
            goto fail_consts;
        }
        Py_DECREF(name);
        if (next >= d->end) {
            rc = RC_FALLBACK;
            goto fail_consts;
        }
        Py_UCS4 ch = CH(d, next);
        if (ch == '=' && d->dense) {
            /* name=value: one scalar token, quoted, or bare up to the next ',' or '}' */
            Py_ssize_t f = PyList_GET_SIZE(s->fields) - 1, a = next + 1, e = a;
            PyObject *v = NULL;
            if (a < d->end && CH(d, a) == '"')
                rc = parse_quoted(d, a, d->end, &v, &e);
            else {
                while (e < d->end && CH(d, e) != ',' && CH(d, e) != '}')
                    e++;
                /* empty, ~, ^, ^{...} and list cells are invalid_constant */
                rc = e > a && CH(d, a) == '[' && list_head(d, a, e) ? RC_FALLBACK
                                                                   : parse_token(d, a, e, 0, &v);
            }
            if (rc != RC_OK)
                goto fail_consts;
            if (f >= capconst) {
                Py_ssize_t cap = (f + 1) * 2, k;
                PyObject **grown = PyMem_Realloc(consts, sizeof(PyObject *) * (size_t)cap);
                if (grown == NULL) {
                    Py_DECREF(v);
                    PyErr_NoMemory();
                    rc = RC_ERR;
                    goto fail_consts;
                }
                for (k = capconst; k < cap; k++)
                    grown[k] = NULL;
                consts = grown;
                capconst = cap;
            }
            consts[f] = v;
            nconst++;
            next = e;
            if (next >= d->end) {
                rc = RC_FALLBACK;
                goto fail_consts;
            }
            ch = CH(d, next);
        }
        p = next + 1;
        if (ch == '}')
            break;
        if (ch != ',') {
            rc = RC_FALLBACK;
            goto fail_consts;
        }
    }
    if (p != d->end) {
        rc = RC_FALLBACK;
        goto fail_consts;
    }
    s->width = PyList_GET_SIZE(s->fields);
    s->row_width = s->width - nconst;
    if (nconst) {
        /* A keyed map's key, or every value column, constant: invalid_constant. */
        if ((keyed && consts[0] != NULL) || nconst == s->width - keyed) {
            rc = RC_FALLBACK;
            goto fail_consts;
        }
        if (capconst < s->width) {
            PyObject **grown = PyMem_Realloc(consts, sizeof(PyObject *) * (size_t)s->width);
            if (grown == NULL) {
                PyErr_NoMemory();
                rc = RC_ERR;
                goto fail_consts;
            }
            for (; capconst < s->width; capconst++)
                grown[capconst] = NULL;
            consts = grown;
        }
        s->consts = consts;
        consts = NULL;
    }
    if ((rc = build_plan(s, keyed ? 1 : 0)) != RC_OK)
        goto fail;
    cap = PyCapsule_New(s, "gcfkit.schema", schema_capsule_free);
    if (cap == NULL) {
        rc = RC_ERR;
        goto fail;
    }
    Py_DECREF(seen);
    if (PyDict_SetItem(d->schemas, key, cap) < 0) {
        Py_DECREF(cap);
        Py_DECREF(key);
        return RC_ERR;
    }
    Py_DECREF(cap); /* d->schemas holds it for the whole document */
    Py_DECREF(key);
    *out = s;
    *capsule = cap;
    return RC_OK;
fail_consts:
    if (consts != NULL) {
        Py_ssize_t k;
        for (k = 0; k < capconst; k++)
            Py_XDECREF(consts[k]);
        PyMem_Free(consts);
    }
fail:
    Py_DECREF(seen);
    Py_DECREF(key);
    schema_free(s);
    return rc;
}

/* The declaration of a ^{...} cell at a (d[a] == '^'), within [a, b): its names (a new
 * list) and *end, the index after its '}'. */
static int
parse_inline_decl(Dec *d, Py_ssize_t a, Py_ssize_t b, PyObject **out, Py_ssize_t *end)
{
    if (b - a < 3 || CH(d, a + 1) != '{')
        return RC_FALLBACK;
    PyObject *names = PyList_New(0);
    PyObject *seen = PySet_New(NULL);
    int rc = RC_OK;
    if (names == NULL || seen == NULL) {
        rc = RC_ERR;
        goto done;
    }
    Py_ssize_t p = a + 2;
    for (;;) {
        PyObject *name;
        Py_ssize_t next;
        if ((rc = parse_key(d, p, b, &name, &next)) != RC_OK)
            goto done;
        int c = PySet_Contains(seen, name);
        if (c != 0 || PySet_Add(seen, name) < 0 || PyList_Append(names, name) < 0) {
            Py_DECREF(name);
            rc = c > 0 ? RC_FALLBACK : RC_ERR;
            goto done;
        }
        Py_DECREF(name);
        if (next >= b) {
            rc = RC_FALLBACK;
            goto done;
        }
        Py_UCS4 ch = CH(d, next);
        p = next + 1;
        if (ch == '}')
            break;
        if (ch != ',') {
            rc = RC_FALLBACK;
            goto done;
        }
    }
    *end = p;
done:
    Py_XDECREF(seen);
    if (rc != RC_OK) {
        Py_XDECREF(names);
        return rc;
    }
    *out = names;
    return RC_OK;
}

/* -- containers ------------------------------------------------------------------------- */

static int dec_object(Dec *d, PyObject *obj, Py_ssize_t indent);
static int dec_array_head(Dec *d, Py_ssize_t p, Py_ssize_t body, int member_ctx, int inline_ok,
                          PyObject *field, PyObject **shared, PyObject **out);

/* The per-row state of one ^ cell (generic/decoder.py _Marker). */
typedef struct {
    int active, filled, explicit_;
    PyObject *schema; /* borrowed: the table's inline schema of the field, or NULL */
} Marker;

/* One tabular array or keyed map being read (generic/decoder.py _TabFrame). */
typedef struct {
    Schema *schema;
    PyObject *out;    /* list (preallocated to count) or dict */
    Py_ssize_t count, n, indent;
    PyObject *row;    /* the current row (borrowed from out) */
    Marker *markers;  /* per top-level plan slot */
    int pending;      /* markers still to fill in the current row */
    PyObject **inline_schemas; /* per top-level plan slot, owned */
    PyObject *shared; /* field -> capsule(Schema): shared array schemas (§7.4.5.3) */
} Table;

static int
enter(Dec *d)
{
    if (++d->depth > C_MAX_DEPTH)
        return RC_FALLBACK;
    return RC_OK;
}

/* _group: a flattened object from its leaf cells; *out is NULL for "absent". */
static int
build_group(PNode *node, PyObject **vals, PyObject **out)
{
    PyObject *obj = PyDict_New();
    if (obj == NULL)
        return RC_ERR;
    int all_missing = 1, all_null = 1;
    Py_ssize_t i;
    for (i = 0; i < node->n; i++) {
        PSlot *s = &node->slots[i];
        PyObject *v;
        if (!s->group) {
            v = vals[s->ref];
            if (v == MISSING_CELL) {
                all_null = 0;
                continue;
            }
            if (v == ATTACH_CELL) {
                Py_DECREF(obj);
                return RC_FALLBACK; /* invalid_attachment_marker */
            }
            Py_INCREF(v);
        }
        else {
            int rc = build_group(s->sub, vals, &v);
            if (rc != RC_OK) {
                Py_DECREF(obj);
                return rc;
            }
            if (v == NULL) {
                all_null = 0;
                continue;
            }
        }
        all_missing = 0;
        if (v != Py_None)
            all_null = 0;
        int r = PyDict_SetItem(obj, s->name, v);
        Py_DECREF(v);
        if (r < 0) {
            Py_DECREF(obj);
            return RC_ERR;
        }
    }
    if (all_missing) {
        Py_DECREF(obj);
        *out = NULL;
        return RC_OK;
    }
    if (all_null) {
        Py_DECREF(obj);
        Py_INCREF(Py_None);
        *out = Py_None;
        return RC_OK;
    }
    *out = obj;
    return RC_OK;
}

/* One row at d's current line (generic/decoder.py _row and _slow_row). */
static int
dec_row(Dec *d, Table *t, PyObject **vals, PyObject **decls, Py_ssize_t *spans)
{
    Schema *s = t->schema;
    Py_ssize_t a = d->cs, b = d->end, i;
    int has_id = 0, rc = RC_OK;
    if (CH(d, a) == '@') {
        /* "@N " with N the row's index: anything else is invalid_item_id. */
        char want[32];
        int m = fmt_item_id(want, t->n);
        if (b - a < m)
            return RC_FALLBACK;
        for (i = 0; i < m; i++)
            if (CH(d, a + i) != (Py_UCS4)(unsigned char)want[i])
                return RC_FALLBACK;
        a += m;
        has_id = 1;
    }
    /* A dense row holds the cells of the columns that are not constant, or fewer down to
     * min(2, that width): its last cells are then absent (D6, D7). */
    Py_ssize_t rw = d->dense ? s->row_width : s->width;
    d->split_lists = d->dense;
    Py_ssize_t got = split_cells(d, a, b, '|', spans, rw);
    d->split_lists = 0;
    if (got < 0)
        return (int)got;
    if (got != rw && (!d->dense || got < (rw > 1 ? 2 : rw)))
        return RC_FALLBACK; /* row_width_mismatch */
    Py_ssize_t nv = 0, cell = 0;
    for (i = 0; i < s->width; i++) {
        decls[i] = NULL;
        if (s->consts != NULL && s->consts[i] != NULL) {
            vals[i] = s->consts[i];
            Py_INCREF(vals[i]);
            nv = i + 1;
            continue;
        }
        if (cell >= got) {
            vals[i] = MISSING_CELL;
            nv = i + 1;
            continue;
        }
        Py_ssize_t ca = spans[2 * cell], cb = spans[2 * cell + 1];
        cell++;
        if (cb - ca > 1 && CH(d, ca) == '^' && CH(d, ca + 1) == '{' && CH(d, cb - 1) == '}') {
            /* ^{...}: an inline-schema attachment reference (§7.4.5.1) */
            Py_ssize_t e;
            if ((rc = parse_inline_decl(d, ca, cb, &decls[i], &e)) != RC_OK)
                goto fail;
            vals[i] = ATTACH_CELL;
            nv = i + 1;
            if (e != cb) {
                rc = RC_FALLBACK;
                goto fail;
            }
        }
        else if ((rc = parse_cell(d, ca, cb, 1, &vals[i])) != RC_OK)
            goto fail;
        nv = i + 1;
    }
    PyObject *row = PyDict_New();
    if (row == NULL) {
        rc = RC_ERR;
        goto fail;
    }
    t->pending = 0;
    for (i = 0; i < s->plan.n; i++) {
        PSlot *slot = &s->plan.slots[i];
        Marker *mk = &t->markers[i];
        mk->active = 0;
        PyObject *v;
        if (slot->group) {
            if ((rc = build_group(slot->sub, vals, &v)) != RC_OK) {
                Py_DECREF(row);
                goto fail;
            }
            if (v == NULL)
                continue;
        }
        else {
            v = vals[slot->ref];
            if (v == MISSING_CELL)
                continue;
            if (v == ATTACH_CELL) {
                /* A row with ^ cells carries its @N prefix; a dense one only when a
                 * positional body follows (D8). */
                if (!has_id && (!d->dense || decls[slot->ref] != NULL ||
                                t->inline_schemas[i] != NULL)) {
                    Py_DECREF(row);
                    rc = RC_FALLBACK;
                    goto fail;
                }
                mk->active = 1;
                mk->filled = 0;
                PyObject *decl = decls[slot->ref];
                if (decl != NULL) {
                    Py_XSETREF(t->inline_schemas[i], decl);
                    decls[slot->ref] = NULL;
                    mk->explicit_ = 1;
                }
                else
                    mk->explicit_ = 0;
                mk->schema = t->inline_schemas[i];
                t->pending++;
                v = Py_None; /* a placeholder keeping the field's position */
            }
            /* v is borrowed: vals keeps its reference until the end of the row. */
            if (PyDict_SetItem(row, slot->name, v) < 0) {
                Py_DECREF(row);
                rc = RC_ERR;
                goto fail;
            }
            continue;
        }
        int r = PyDict_SetItem(row, slot->name, v);
        Py_DECREF(v);
        if (r < 0) {
            Py_DECREF(row);
            rc = RC_ERR;
            goto fail;
        }
    }
    if (s->keyed) {
        PyObject *key = vals[0];
        if (key == MISSING_CELL || key == ATTACH_CELL || !PyUnicode_CheckExact(key)) {
            Py_DECREF(row);
            rc = RC_FALLBACK; /* invalid_keyed_map */
            goto fail;
        }
        int c = PyDict_Contains(t->out, key);
        if (c != 0 || PyDict_SetItem(t->out, key, row) < 0) {
            Py_DECREF(row);
            rc = c > 0 ? RC_FALLBACK : RC_ERR; /* duplicate_key */
            goto fail;
        }
        Py_DECREF(row);
    }
    else
        PyList_SET_ITEM(t->out, t->n, row);
    t->row = row;
    t->n++;
fail: /* and the way out: the cells' own references go */
    for (i = 0; i < nv; i++) {
        if (vals[i] != MISSING_CELL && vals[i] != ATTACH_CELL)
            Py_DECREF(vals[i]);
        Py_XDECREF(decls[i]);
    }
    return rc;
}

/* The positional body of the current row's first waiting inline schema (§7.4.5.2). */
static int
dec_inline_body(Dec *d, Table *t, Py_ssize_t *spans)
{
    Py_ssize_t i, k;
    for (i = 0; i < t->schema->plan.n; i++) {
        Marker *mk = &t->markers[i];
        if (mk->active && !mk->filled && mk->schema != NULL)
            break;
    }
    Marker *mk = &t->markers[i];
    PyObject *names = mk->schema;
    Py_ssize_t w = PyList_GET_SIZE(names);
    Py_ssize_t *sp = spans;
    if (w > t->schema->width) {
        sp = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)w);
        if (sp == NULL) {
            PyErr_NoMemory();
            return RC_ERR;
        }
    }
    int rc = RC_OK;
    Py_ssize_t got = split_cells(d, d->cs, d->end, '|', sp, w);
    PyObject *obj = NULL;
    if (got != w) {
        rc = got < 0 ? (int)got : RC_FALLBACK; /* inline_width_mismatch */
        goto done;
    }
    obj = PyDict_New();
    if (obj == NULL) {
        rc = RC_ERR;
        goto done;
    }
    for (k = 0; k < w; k++) {
        PyObject *v;
        if ((rc = parse_cell(d, sp[2 * k], sp[2 * k + 1], 0, &v)) != RC_OK)
            goto done;
        int r = PyDict_SetItem(obj, PyList_GET_ITEM(names, k), v);
        Py_DECREF(v);
        if (r < 0) {
            rc = RC_ERR;
            goto done;
        }
    }
    if (PyDict_SetItem(t->row, t->schema->plan.slots[i].name, obj) < 0) {
        rc = RC_ERR;
        goto done;
    }
    mk->filled = 1;
    t->pending--;
    rc = advance(d);
done:
    Py_XDECREF(obj);
    if (sp != spans)
        PyMem_Free(sp);
    return rc;
}

/* A '.field ...' attachment of the current row (generic/decoder.py _attachment). */
static int
dec_attachment(Dec *d, Table *t)
{
    Py_ssize_t a = d->cs + 1, b = d->end, p, i;
    PyObject *name;
    int rc = parse_key(d, a, b, &name, &p);
    if (rc != RC_OK)
        return rc;
    Schema *s = t->schema;
    Py_ssize_t slot = -1;
    for (i = 0; i < s->plan.n; i++) {
        if (t->markers[i].active && !s->plan.slots[i].group &&
            PyUnicode_Compare(s->plan.slots[i].name, name) == 0) {
            slot = i;
            break;
        }
    }
    if (slot >= 0) {
        if (t->markers[slot].filled || t->markers[slot].explicit_) {
            Py_DECREF(name);
            return RC_FALLBACK; /* duplicate_attachment / orphan_attachment */
        }
    }
    else {
        /* Only a '>'-named field travels as an attachment without a ^ cell. */
        int c = has_gt(name) ? PyDict_Contains(t->row, name) : 1;
        if (c != 0) {
            Py_DECREF(name);
            return c < 0 ? RC_ERR : RC_FALLBACK;
        }
    }
    if (p + 1 >= b || CH(d, p) != ' ') {
        Py_DECREF(name);
        return RC_FALLBACK;
    }
    p++;
    Py_UCS4 c = CH(d, p);
    Py_ssize_t body = t->indent + 4;
    PyObject *value = NULL;
    if (c == '{') {
        if (p + 2 != b || CH(d, p + 1) != '}') {
            Py_DECREF(name);
            return RC_FALLBACK;
        }
        value = PyDict_New();
        if (value == NULL) {
            Py_DECREF(name);
            return RC_ERR;
        }
        rc = advance(d);
        if (rc == RC_OK)
            rc = dec_object(d, value, body);
    }
    else if (c == '[') {
        rc = dec_array_head(d, p, body, 0, 1, name, &t->shared, &value);
    }
    else if (c == '=' && slot < 0) {
        rc = parse_value(d, p + 1, b, &value);
        if (rc == RC_OK)
            rc = advance(d);
    }
    else
        rc = RC_FALLBACK;
    if (rc == RC_OK && PyDict_SetItem(t->row, name, value) < 0)
        rc = RC_ERR;
    if (rc == RC_OK && slot >= 0) {
        t->markers[slot].filled = 1;
        t->pending--;
    }
    Py_XDECREF(value);
    Py_DECREF(name);
    return rc;
}

static int
waiting_inline(Table *t)
{
    Py_ssize_t i;
    for (i = 0; i < t->schema->plan.n; i++)
        if (t->markers[i].active && !t->markers[i].filled && t->markers[i].schema != NULL)
            return 1;
    return 0;
}

/* The rows (each with its attachments) of a tabular array or keyed map whose header line
 * has been consumed. */
static int
dec_table(Dec *d, Schema *s, Py_ssize_t count, Py_ssize_t indent, PyObject *out)
{
    Table t;
    int rc = RC_OK;
    t.schema = s;
    t.out = out;
    t.count = count;
    t.n = 0;
    t.indent = indent;
    t.row = NULL;
    t.pending = 0;
    t.shared = NULL;
    Py_ssize_t np = s->plan.n > 0 ? s->plan.n : 1, i;
    t.markers = PyMem_Calloc((size_t)np, sizeof(Marker));
    t.inline_schemas = PyMem_Calloc((size_t)np, sizeof(PyObject *));
    PyObject **vals = PyMem_Malloc(sizeof(PyObject *) * 2 * (size_t)s->width);
    Py_ssize_t *spans = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)s->width);
    if (t.markers == NULL || t.inline_schemas == NULL || vals == NULL || spans == NULL) {
        PyErr_NoMemory();
        rc = RC_ERR;
        goto done;
    }
    if ((rc = enter(d)) != RC_OK)
        goto done;
    while (t.n < count) {
        if (d->eof || d->ind != indent) {
            rc = RC_FALLBACK; /* count_mismatch, or not canonical */
            goto done;
        }
        Py_UCS4 c = CH(d, d->cs);
        if (c == '.' || c == '#') {
            rc = RC_FALLBACK;
            goto done;
        }
        if ((rc = dec_row(d, &t, vals, vals + s->width, spans)) != RC_OK)
            goto done;
        if ((rc = advance(d)) != RC_OK)
            goto done;
        /* This row's attachments and positional bodies. */
        while (!d->eof && d->ind == indent) {
            c = CH(d, d->cs);
            if (c == '.') {
                if ((rc = dec_attachment(d, &t)) != RC_OK)
                    goto done;
            }
            else if (c != '@' && c != '#' && t.pending && waiting_inline(&t)) {
                if ((rc = dec_inline_body(d, &t, spans)) != RC_OK)
                    goto done;
            }
            else
                break;
        }
        if (t.pending) {
            rc = RC_FALLBACK; /* missing_attachment */
            goto done;
        }
        if (!d->eof && d->ind > indent) {
            rc = RC_FALLBACK;
            goto done;
        }
    }
    d->depth--;
done:
    if (t.inline_schemas != NULL)
        for (i = 0; i < np; i++)
            Py_XDECREF(t.inline_schemas[i]);
    PyMem_Free(t.inline_schemas);
    PyMem_Free(t.markers);
    PyMem_Free(vals);
    PyMem_Free(spans);
    Py_XDECREF(t.shared);
    return rc;
}

/* The @N items of an expanded array (§7.6) whose header line has been consumed. */
static int
dec_expanded(Dec *d, Py_ssize_t count, Py_ssize_t indent, PyObject *items)
{
    int rc;
    if ((rc = enter(d)) != RC_OK)
        return rc;
    Py_ssize_t k;
    for (k = 0; k < count; k++) {
        if (d->eof || d->ind != indent)
            return RC_FALLBACK;
        char want[32];
        int m = fmt_item_id(want, k);
        Py_ssize_t a = d->cs, b = d->end, i;
        if (b - a <= m)
            return RC_FALLBACK;
        for (i = 0; i < m; i++)
            if (CH(d, a + i) != (Py_UCS4)(unsigned char)want[i])
                return RC_FALLBACK;
        Py_ssize_t p = a + m;
        Py_UCS4 c = CH(d, p);
        PyObject *v = NULL;
        if (c == '=') {
            rc = parse_value(d, p + 1, b, &v);
            if (rc == RC_OK)
                rc = advance(d);
        }
        else if (c == '{') {
            if (p + 2 != b || CH(d, p + 1) != '}')
                return RC_FALLBACK;
            v = PyDict_New();
            if (v == NULL)
                return RC_ERR;
            rc = advance(d);
            if (rc == RC_OK)
                rc = dec_object(d, v, indent + 2);
        }
        else if (c == '[')
            rc = dec_array_head(d, p, indent + 2, 0, 1, NULL, NULL, &v);
        else
            return RC_FALLBACK;
        if (rc != RC_OK) {
            Py_XDECREF(v);
            return rc;
        }
        PyList_SET_ITEM(items, k, v);
        if (!d->eof && d->ind > indent)
            return RC_FALLBACK;
    }
    d->depth--;
    return RC_OK;
}

/* _array_head: "[N]..." at p on the current line; consumes the line and the body. field
 * and shared are the attachment field and its table's shared schemas, or NULL. */
static int
dec_array_head(Dec *d, Py_ssize_t p, Py_ssize_t body, int member_ctx, int inline_ok,
               PyObject *field, PyObject **shared, PyObject **out)
{
    Py_ssize_t b = d->end, q = p + 1;
    Py_ssize_t count = 0;
    int keyed = 0, rc;
    (void)member_ctx;
    /* [N] or [N:], N as "0|[1-9][0-9]{0,8}" */
    if (q >= b)
        return RC_FALLBACK;
    if (CH(d, q) == '0')
        q++;
    else {
        Py_ssize_t start = q;
        while (q < b && is_digit(CH(d, q)) && q - start < 9) {
            count = count * 10 + (Py_ssize_t)(CH(d, q) - '0');
            q++;
        }
        if (q == start || CH(d, start) == '0')
            return RC_FALLBACK;
    }
    if (q < b && CH(d, q) == ':') {
        keyed = 1;
        q++;
    }
    if (q >= b || CH(d, q) != ']')
        return RC_FALLBACK;
    q++;
    /* Every row or item takes a line of at least two characters: a count past that is
     * wrong, and must not size an allocation. */
    if (count > (d->n - d->pos) / 2 + 1)
        return RC_FALLBACK;
    if (q < b && CH(d, q) == '{') {
        Schema *s;
        PyObject *cap;
        if ((rc = get_schema(d, q, keyed, &s, &cap)) != RC_OK)
            return rc;
        if (keyed && (s->width < 2 || count == 0))
            return RC_FALLBACK; /* invalid_keyed_map */
        if (!keyed && shared != NULL) {
            /* The first tabular attachment of a field establishes its schema. */
            if (*shared == NULL && (*shared = PyDict_New()) == NULL)
                return RC_ERR;
            if (PyDict_SetDefault(*shared, field, cap) == NULL)
                return RC_ERR;
        }
        PyObject *container = keyed ? PyDict_New() : PyList_New(count);
        if (container == NULL)
            return RC_ERR;
        rc = advance(d);
        if (rc == RC_OK)
            rc = dec_table(d, s, count, body, container);
        if (rc != RC_OK) {
            Py_DECREF(container);
            return rc;
        }
        *out = container;
        return RC_OK;
    }
    if (keyed)
        return RC_FALLBACK;
    if (q < b) {
        if (CH(d, q) != ':' || !inline_ok)
            return RC_FALLBACK;
        if ((rc = parse_inline_values(d, q + 1, b, count, out)) != RC_OK)
            return rc;
        rc = advance(d);
        if (rc != RC_OK)
            Py_CLEAR(*out);
        return rc;
    }
    if (shared != NULL && *shared != NULL) {
        PyObject *cap = PyDict_GetItemWithError(*shared, field);
        if (cap == NULL && PyErr_Occurred())
            return RC_ERR;
        if (cap != NULL) {
            Schema *s = PyCapsule_GetPointer(cap, "gcfkit.schema");
            PyObject *container = PyList_New(count);
            if (container == NULL)
                return RC_ERR;
            rc = advance(d);
            if (rc == RC_OK)
                rc = dec_table(d, s, count, body, container);
            if (rc != RC_OK) {
                Py_DECREF(container);
                return rc;
            }
            *out = container;
            return RC_OK;
        }
    }
    PyObject *items = PyList_New(count);
    if (items == NULL)
        return RC_ERR;
    rc = advance(d);
    if (rc == RC_OK && count)
        rc = dec_expanded(d, count, body, items);
    if (rc != RC_OK) {
        Py_DECREF(items);
        return rc;
    }
    *out = items;
    return RC_OK;
}

static int
set_member(PyObject *obj, PyObject *key, PyObject *value)
{
    int c = PyDict_Contains(obj, key);
    if (c != 0) {
        Py_DECREF(value);
        return c < 0 ? RC_ERR : RC_FALLBACK; /* duplicate_key */
    }
    int r = PyDict_SetItem(obj, key, value);
    Py_DECREF(value);
    return r < 0 ? RC_ERR : RC_OK;
}

/* The members of an object at indentation `indent` (generic/decoder.py _obj_line and the
 * member lines of _Parser.run). */
static int
dec_object(Dec *d, PyObject *obj, Py_ssize_t indent)
{
    int rc;
    if ((rc = enter(d)) != RC_OK)
        return rc;
    while (!d->eof && d->ind >= indent) {
        if (d->ind > indent)
            return RC_FALLBACK; /* invalid_indent */
        Py_ssize_t a = d->cs, b = d->end, p;
        Py_UCS4 c = CH(d, a);
        PyObject *key, *value = NULL;
        if (c == '#') {
            /* "## key", "## key [N]..." */
            if (a + 3 >= b || CH(d, a + 3) == '[')
                return RC_FALLBACK;
            if ((rc = parse_key(d, a + 3, b, &key, &p)) != RC_OK)
                return rc;
            if (p == b) {
                value = PyDict_New();
                if (value == NULL) {
                    Py_DECREF(key);
                    return RC_ERR;
                }
                int c2 = PyDict_Contains(obj, key);
                if (c2 != 0) {
                    Py_DECREF(key);
                    Py_DECREF(value);
                    return c2 < 0 ? RC_ERR : RC_FALLBACK;
                }
                rc = advance(d);
                if (rc == RC_OK)
                    rc = dec_object(d, value, indent + 2);
            }
            else if (p + 1 < b && CH(d, p) == ' ' && CH(d, p + 1) == '[') {
                int c2 = PyDict_Contains(obj, key);
                if (c2 != 0) {
                    Py_DECREF(key);
                    return c2 < 0 ? RC_ERR : RC_FALLBACK;
                }
                rc = dec_array_head(d, p + 1, indent, 1, 0, NULL, NULL, &value);
            }
            else
                rc = RC_FALLBACK;
        }
        else if (c == '.' || c == '@' || c == '=') {
            return RC_FALLBACK;
        }
        else {
            if ((rc = parse_key(d, a, b, &key, &p)) != RC_OK)
                return rc;
            if (p < b && CH(d, p) == '=') {
                rc = parse_value(d, p + 1, b, &value);
                if (rc == RC_OK)
                    rc = advance(d);
            }
            else if (p < b && CH(d, p) == '[') {
                /* key[N]: v1,v2,... */
                int c2 = PyDict_Contains(obj, key);
                if (c2 != 0) {
                    Py_DECREF(key);
                    return c2 < 0 ? RC_ERR : RC_FALLBACK;
                }
                Py_ssize_t q = p + 1, count = 0, start = q;
                if (q < b && CH(d, q) == '0')
                    q++;
                else {
                    while (q < b && is_digit(CH(d, q)) && q - start < 9) {
                        count = count * 10 + (Py_ssize_t)(CH(d, q) - '0');
                        q++;
                    }
                    if (q == start || CH(d, start) == '0')
                        rc = RC_FALLBACK;
                }
                if (rc == RC_OK && (q + 1 >= b || CH(d, q) != ']' || CH(d, q + 1) != ':'))
                    rc = RC_FALLBACK;
                if (rc == RC_OK)
                    rc = parse_inline_values(d, q + 2, b, count, &value);
                if (rc == RC_OK)
                    rc = advance(d);
            }
            else
                rc = RC_FALLBACK;
        }
        if (rc != RC_OK) {
            Py_XDECREF(value);
            Py_DECREF(key);
            return rc;
        }
        rc = set_member(obj, key, value);
        Py_DECREF(key);
        if (rc != RC_OK)
            return rc;
    }
    d->depth--;
    return RC_OK;
}

/* The body: a root scalar, a root array or the root object's members (§7.1). */
static int
dec_root(Dec *d, PyObject **out)
{
    int rc;
    if (d->eof) {
        *out = PyDict_New();
        return *out == NULL ? RC_ERR : RC_OK;
    }
    if (d->ind != 0)
        return RC_FALLBACK;
    Py_ssize_t a = d->cs, b = d->end;
    Py_UCS4 c = CH(d, a);
    if (c == '=') {
        if ((rc = parse_value(d, a + 1, b, out)) != RC_OK)
            return rc;
        rc = advance(d);
    }
    else if (c == '#' && b - a > 3 && CH(d, a + 3) == '[') {
        rc = dec_array_head(d, a + 3, 0, 0, 1, NULL, NULL, out);
    }
    else {
        *out = PyDict_New();
        if (*out == NULL)
            return RC_ERR;
        rc = dec_object(d, *out, 0);
    }
    if (rc == RC_OK && !d->eof)
        rc = RC_FALLBACK; /* content after the root value */
    if (rc != RC_OK)
        Py_CLEAR(*out);
    return rc;
}

/* The header line at the start of d's text: exactly `head` (n characters of the given
 * kind), optionally followed by one tool= field. The index of its newline, or -1 when the
 * reference must read it. */
static Py_ssize_t
read_header(Dec *d, int kind, const void *head, Py_ssize_t hn)
{
    Py_ssize_t i;
    if (d->n < hn)
        return -1;
    for (i = 0; i < hn; i++)
        if (CH(d, i) != PyUnicode_READ(kind, head, i))
            return -1;
    Py_ssize_t eol = find_newline(d, 0);
    if (eol > hn) {
        static const char tool[] = " tool=";
        Py_ssize_t tn = (Py_ssize_t)sizeof tool - 1;
        if (eol - hn <= tn)
            return -1;
        for (i = 0; i < tn; i++)
            if (CH(d, hn + i) != (Py_UCS4)tool[i])
                return -1;
        for (i = hn + tn; i < eol; i++) {
            Py_UCS4 c = CH(d, i);
            if (c < 0x21 || c > 0x7e)
                return -1;
        }
    }
    return eol;
}

/* A dense payload's definition lines "$name=value" at d's current line (D4.1), in the
 * canonical order of their names (a, b, ... z, aa, ...): anything else is the reference's. */
static int
read_definitions(Dec *d)
{
    int rc = RC_OK;
    while (rc == RC_OK && !d->eof && d->ind == 0 && CH(d, d->cs) == '$') {
        Py_ssize_t i = d->cs + 1, idx = 0;
        while (i < d->end && CH(d, i) >= 'a' && CH(d, i) <= 'z' && i - d->cs <= 6) {
            idx = idx * 26 + (Py_ssize_t)(CH(d, i) - 'a' + 1);
            i++;
        }
        if (i >= d->end || CH(d, i) != '=' || idx != d->ndefs + 1)
            return RC_FALLBACK; /* invalid_definition, or a name out of order */
        i++;
        if (i >= d->end || CH(d, i) == '$')
            return RC_FALLBACK; /* a definition's value is a literal */
        PyObject *v;
        if ((rc = parse_value(d, i, d->end, &v)) != RC_OK)
            return rc;
        if (!PyUnicode_CheckExact(v)) {
            Py_DECREF(v);
            return RC_FALLBACK;
        }
        if (d->ndefs == d->capdefs) {
            Py_ssize_t cap = d->capdefs ? d->capdefs * 2 : 16;
            PyObject **p = PyMem_Realloc(d->defs, sizeof(PyObject *) * (size_t)cap);
            if (p == NULL) {
                Py_DECREF(v);
                PyErr_NoMemory();
                return RC_ERR;
            }
            d->defs = p;
            d->capdefs = cap;
        }
        d->defs[d->ndefs++] = v;
        rc = advance(d);
    }
    return rc;
}

/* The value of a generic payload, or with `dense` of a dense one whose header is `head`. */
static PyObject *
decode_text(PyObject *text, int kind, const void *head, Py_ssize_t hn, int dense)
{
    if (!STR_READY(text))
        return NULL;
    Dec d;
    memset(&d, 0, sizeof d);
    d.text = text;
    d.kind = PyUnicode_KIND(text);
    d.data = PyUnicode_DATA(text);
    d.n = PyUnicode_GET_LENGTH(text);
    d.dense = dense;
    if (PyUnicode_FindChar(text, '\r', 0, d.n, 1) != -1)
        Py_RETURN_NONE;
    Py_ssize_t eol = read_header(&d, kind, head, hn), i;
    if (eol < 0)
        Py_RETURN_NONE;
    /* About one slot per 128 characters: enough for the repeated values, small next to
     * the decoded value (a table's transient memory counts in the decode's peak). */
    size_t slots = 64;
    while (slots < CACHE_SIZE && (Py_ssize_t)slots * 128 < d.n)
        slots *= 2;
    d.cache_mask = slots - 1;
    d.cache = PyMem_Calloc(slots, sizeof(CacheEntry));
    d.schemas = PyDict_New();
    PyObject *value = NULL, *result = NULL;
    int rc;
    if (d.cache == NULL || d.schemas == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        rc = RC_ERR;
    }
    else {
        d.pos = eol + 1;
        /* Comment lines after the header ("#", "# ..."; the proxy's primer is one): skipped,
         * as the reference skips them (§11). */
        while (d.pos < d.n && CH(&d, d.pos) == '#') {
            Py_ssize_t e = find_newline(&d, d.pos);
            if (e - d.pos > MAX_LINE || (e - d.pos > 1 && CH(&d, d.pos + 1) != ' '))
                break;
            d.pos = e + 1;
        }
        rc = load_line(&d);
        if (rc == RC_OK && dense)
            rc = read_definitions(&d);
        if (rc == RC_OK)
            rc = dec_root(&d, &value);
    }
    if (rc == RC_OK) {
        result = PyTuple_Pack(1, value);
        Py_DECREF(value);
    }
    else if (rc != RC_ERR) {
        result = Py_None;
        Py_INCREF(result);
    }
    if (d.cache != NULL) {
        for (i = 0; i <= (Py_ssize_t)d.cache_mask; i++)
            Py_XDECREF(d.cache[i].value);
        PyMem_Free(d.cache);
    }
    for (i = 0; i < d.ndefs; i++)
        Py_DECREF(d.defs[i]);
    PyMem_Free(d.defs);
    Py_XDECREF(d.schemas);
    PyMem_Free(d.tmp);
    return result;
}

/* decode(text) -> (value,) | None */
static PyObject *
sp_decode(PyObject *self, PyObject *text)
{
    static const char head[] = "GCF profile=generic";
    if (!PyUnicode_CheckExact(text))
        Py_RETURN_NONE;
    return decode_text(text, PyUnicode_1BYTE_KIND, head, (Py_ssize_t)sizeof head - 1, 0);
}

/* decode_dense(text, header) -> (value,) | None: header is the dense header line without
 * fields (gcfkit.generic.encoder.dense_header_line writes it). */
static PyObject *
sp_decode_dense(PyObject *self, PyObject *args)
{
    PyObject *text, *header;
    if (!PyArg_ParseTuple(args, "OU:decode_dense", &text, &header))
        return NULL;
    if (!PyUnicode_CheckExact(text) || !STR_READY(header))
        Py_RETURN_NONE;
    return decode_text(text, PyUnicode_KIND(header), PyUnicode_DATA(header),
                       PyUnicode_GET_LENGTH(header), 1);
}

/* ======================================================================================
 * JSON-model equality (jsonio.same_value with its defaults: key order kept, numbers by
 * value), the lossless check behind every rewritten result
 * ====================================================================================== */

static inline int
is_number_exact(PyObject *v)
{
    return PyLong_CheckExact(v) || PyFloat_CheckExact(v);
}

/* 1: the same JSON value, 0: not, RC_FALLBACK: a type (or a depth) the Python walk decides,
 * RC_ERR. */
static int
same_rec(PyObject *x, PyObject *y, int depth)
{
    if (depth > C_MAX_DEPTH)
        return RC_FALLBACK;
    PyTypeObject *tx = Py_TYPE(x), *ty = Py_TYPE(y);
    int ax = tx == &PyList_Type || tx == &PyTuple_Type;
    int ay = ty == &PyList_Type || ty == &PyTuple_Type;
    if (ax && ay) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(x), i;
        if (n != PySequence_Fast_GET_SIZE(y))
            return 0;
        PyObject **xs = PySequence_Fast_ITEMS(x), **ys = PySequence_Fast_ITEMS(y);
        for (i = 0; i < n; i++) {
            int r = same_rec(xs[i], ys[i], depth + 1);
            if (r != 1)
                return r;
        }
        return 1;
    }
    if (tx == &PyDict_Type && ty == &PyDict_Type) {
        if (PyDict_GET_SIZE(x) != PyDict_GET_SIZE(y))
            return 0;
        Py_ssize_t px = 0, py = 0;
        PyObject *kx, *vx, *ky, *vy;
        /* Both key lists equal in order, then each value with the other's at the same key. */
        while (PyDict_Next(x, &px, &kx, &vx) && PyDict_Next(y, &py, &ky, &vy)) {
            if (kx != ky) {
                if (!PyUnicode_CheckExact(kx) || !PyUnicode_CheckExact(ky))
                    return RC_FALLBACK;
                if (PyUnicode_Compare(kx, ky) != 0)
                    return PyErr_Occurred() ? RC_ERR : 0;
            }
        }
        px = py = 0;
        while (PyDict_Next(x, &px, &kx, &vx) && PyDict_Next(y, &py, &ky, &vy)) {
            int r = same_rec(vx, vy, depth + 1);
            if (r != 1)
                return r;
        }
        return 1;
    }
    if (tx == &PyUnicode_Type && ty == &PyUnicode_Type)
        return x == y || PyUnicode_Compare(x, y) == 0 ? 1 : (PyErr_Occurred() ? RC_ERR : 0);
    if (tx == &PyFloat_Type && ty == &PyFloat_Type)
        return PyFloat_AS_DOUBLE(x) == PyFloat_AS_DOUBLE(y);
    if (is_number_exact(x) && is_number_exact(y))
        return PyObject_RichCompareBool(x, y, Py_EQ); /* int == int, int == float: exact */
    if ((x == Py_None || PyBool_Check(x)) && (y == Py_None || PyBool_Check(y)))
        return x == y;
    if ((ax || tx == &PyDict_Type || is_number_exact(x) || tx == &PyUnicode_Type ||
         x == Py_None || PyBool_Check(x)) &&
        (ay || ty == &PyDict_Type || is_number_exact(y) || ty == &PyUnicode_Type ||
         y == Py_None || PyBool_Check(y)))
        return 0; /* two JSON-model values of different kinds */
    return RC_FALLBACK;
}

/* definitions._occurrences: every string in a value position counted into `counts`;
 * RC_FALLBACK for a type outside the plain JSON model (the Python walk then counts). */
static int
occ_rec(PyObject *v, PyObject *counts, int depth)
{
    if (depth > C_MAX_DEPTH)
        return RC_FALLBACK;
    if (PyUnicode_CheckExact(v)) {
        PyObject *n = PyDict_GetItemWithError(counts, v);
        if (n == NULL && PyErr_Occurred())
            return RC_ERR;
        PyObject *m = PyLong_FromSsize_t(n == NULL ? 1 : PyLong_AsSsize_t(n) + 1);
        if (m == NULL)
            return RC_ERR;
        int r = PyDict_SetItem(counts, v, m);
        Py_DECREF(m);
        return r < 0 ? RC_ERR : RC_OK;
    }
    if (PyDict_CheckExact(v)) {
        Py_ssize_t pos = 0;
        PyObject *k, *x;
        int rc;
        while (PyDict_Next(v, &pos, &k, &x))
            if ((rc = occ_rec(x, counts, depth + 1)) != RC_OK)
                return rc;
        return RC_OK;
    }
    if (PyList_CheckExact(v) || PyTuple_CheckExact(v)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(v), i;
        PyObject **items = PySequence_Fast_ITEMS(v);
        int rc;
        for (i = 0; i < n; i++)
            if ((rc = occ_rec(items[i], counts, depth + 1)) != RC_OK)
                return rc;
        return RC_OK;
    }
    if (PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyBool_Check(v) || v == Py_None)
        return RC_OK;
    return RC_FALLBACK;
}

/* occurrences(value) -> dict | None */
static PyObject *
sp_occurrences(PyObject *self, PyObject *value)
{
    PyObject *counts = PyDict_New();
    if (counts == NULL)
        return NULL;
    int rc = occ_rec(value, counts, 0);
    if (rc == RC_OK)
        return counts;
    Py_DECREF(counts);
    if (rc == RC_ERR)
        return NULL;
    Py_RETURN_NONE;
}

/* ======================================================================================
 * Strict JSON in: the hooks json.loads calls (jsonio.loads_json), without a Python frame
 * ====================================================================================== */

/* Raised by the hooks with (code, message); jsonio turns it into GCFError(code, message). */
static PyObject *Refused;

/* json_pairs(pairs) -> dict: an object's members, a duplicate key refused. */
static PyObject *
sp_json_pairs(PyObject *self, PyObject *pairs)
{
    if (!PyList_CheckExact(pairs)) {
        PyErr_SetString(PyExc_TypeError, "json_pairs expects the list json.loads passes");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(pairs), i;
    PyObject *out = PyDict_New();
    if (out == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_TypeError, "json_pairs expects (key, value) pairs");
            return NULL;
        }
        PyObject *k = PyTuple_GET_ITEM(pair, 0);
        int had = PyDict_Contains(out, k);
        if (had != 0) {
            if (had > 0) {
                PyObject *msg = PyUnicode_FromFormat("JSON object has the key %R twice", k);
                if (msg != NULL) {
                    PyObject *args = Py_BuildValue("(sN)", "duplicate_key", msg);
                    if (args != NULL) {
                        PyErr_SetObject(Refused, args);
                        Py_DECREF(args);
                    }
                }
            }
            Py_DECREF(out);
            return NULL;
        }
        if (PyDict_SetItem(out, k, PyTuple_GET_ITEM(pair, 1)) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* json_float(text) -> float: a number with a fraction or an exponent, an overflow refused. */
static PyObject *
sp_json_float(PyObject *self, PyObject *text)
{
    PyObject *f = PyFloat_FromString(text);
    if (f == NULL || !isinf(PyFloat_AS_DOUBLE(f)))
        return f;
    Py_DECREF(f);
    PyObject *head = PyUnicode_Substring(text, 0, 40);
    if (head == NULL)
        return NULL;
    PyObject *msg = PyUnicode_FromFormat("number %U overflows a double", head);
    Py_DECREF(head);
    if (msg != NULL) {
        PyObject *args = Py_BuildValue("(sN)", "out_of_range", msg);
        if (args != NULL) {
            PyErr_SetObject(Refused, args);
            Py_DECREF(args);
        }
    }
    return NULL;
}

/* The number of distinct keys of the dicts rows[0..n) (proxy/rewrite.py _union_width), or
 * -1 with an exception set. */
static Py_ssize_t
union_width(PyObject **rows, Py_ssize_t n)
{
    PyObject *seen = PySet_New(NULL), *prev = NULL;
    if (seen == NULL)
        return -1;
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        PyObject *row = rows[i], *k, *v, *pk, *pv;
        Py_ssize_t pos = 0, ppos = 0;
        if (prev != NULL && PyDict_GET_SIZE(prev) == PyDict_GET_SIZE(row)) {
            /* The common uniform table: the previous row's very keys add nothing. */
            int same = 1;
            while (PyDict_Next(row, &pos, &k, &v) && PyDict_Next(prev, &ppos, &pk, &pv))
                if (k != pk) {
                    same = 0;
                    break;
                }
            if (same)
                continue;
            pos = 0;
        }
        while (PyDict_Next(row, &pos, &k, &v))
            if (PySet_Add(seen, k) < 0) {
                Py_DECREF(seen);
                return -1;
            }
        prev = row;
    }
    Py_ssize_t w = PySet_GET_SIZE(seen);
    Py_DECREF(seen);
    return w;
}

/* table_cells(value, stop) -> int: proxy/rewrite.py gcf_cells, the same walk in the same
 * order (the count it returns once past stop is the same too). */
static PyObject *
sp_table_cells(PyObject *self, PyObject *args)
{
    PyObject *value, *stop_obj = Py_None;
    if (!PyArg_ParseTuple(args, "O|O:table_cells", &value, &stop_obj))
        return NULL;
    long long stop = -1;
    if (stop_obj != Py_None) {
        stop = PyLong_AsLongLong(stop_obj);
        if (stop == -1 && PyErr_Occurred())
            return NULL;
        if (stop < 0)
            Py_RETURN_NONE; /* the Python walk answers a negative stop */
    }
    Py_ssize_t cap = 64, top = 0;
    PyObject **stack = PyMem_Malloc(sizeof(PyObject *) * (size_t)cap), **rows = NULL;
    Py_ssize_t caprows = 0;
    long long cells = 0;
    int failed = stack == NULL;
    if (!failed)
        stack[top++] = value;
#define PUSH(x)                                                                              \
    do {                                                                                     \
        if (top == cap) {                                                                    \
            PyObject **grown = PyMem_Realloc(stack, sizeof(PyObject *) * (size_t)cap * 2);  \
            if (grown == NULL) {                                                             \
                failed = 1;                                                                  \
                break;                                                                       \
            }                                                                                \
            stack = grown;                                                                   \
            cap *= 2;                                                                        \
        }                                                                                    \
        stack[top++] = (x);                                                                  \
    } while (0)
    while (!failed && top > 0) {
        PyObject *v = stack[--top];
        if (PyList_CheckExact(v)) {
            Py_ssize_t n = PyList_GET_SIZE(v), i;
            int all_rows = n > 0;
            for (i = 0; i < n && !failed; i++) {
                PyObject *x = PyList_GET_ITEM(v, i);
                if (PyDict_CheckExact(x))
                    PUSH(x);
                else {
                    all_rows = 0;
                    if (PyList_CheckExact(x))
                        PUSH(x);
                }
            }
            if (!failed && all_rows) {
                Py_ssize_t w = union_width(&PyList_GET_ITEM(v, 0), n);
                if (w < 0)
                    failed = 2;
                else
                    cells += (long long)n * w;
            }
        }
        else if (PyDict_CheckExact(v)) {
            Py_ssize_t pos = 0, objects = 0, n = PyDict_GET_SIZE(v);
            PyObject *k, *x;
            if (n > caprows) {
                PyObject **grown = PyMem_Realloc(rows, sizeof(PyObject *) * (size_t)n);
                if (grown == NULL) {
                    failed = 1;
                    break;
                }
                rows = grown;
                caprows = n;
            }
            while (!failed && PyDict_Next(v, &pos, &k, &x)) {
                if (PyDict_CheckExact(x)) {
                    rows[objects++] = x;
                    PUSH(x);
                }
                else if (PyList_CheckExact(x))
                    PUSH(x);
            }
            if (!failed && objects >= 2 && objects == n) {
                Py_ssize_t w = union_width(rows, n);
                if (w < 0)
                    failed = 2;
                else
                    cells += (long long)objects * w;
            }
        }
        if (stop >= 0 && cells > stop)
            break;
    }
#undef PUSH
    PyMem_Free(stack);
    PyMem_Free(rows);
    if (failed == 1)
        return PyErr_NoMemory();
    if (failed)
        return NULL;
    return PyLong_FromLongLong(cells);
}

/* The str argument of a function that takes only one (fn names it in the TypeError): its
 * length, kind and data; -1 with an exception set when it is not a str. */
static int
str_arg(PyObject *text, const char *fn, Py_ssize_t *n, int *kind, const void **data)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "%s expects a str", fn);
        return -1;
    }
    if (!STR_READY(text))
        return -1;
    *n = PyUnicode_GET_LENGTH(text);
    *kind = PyUnicode_KIND(text);
    *data = PyUnicode_DATA(text);
    return 0;
}

/* text_spans(line) -> list[tuple[int, int]] | None: where the string value of each member
 * named "text" spelled plainly stands in line (one JSON message, valid JSON), in document
 * order: (index of its opening quote, index after its closing quote). The reference is
 * gcfkit.proxy.jsonrpc._text_spans_py: an unescaped quote followed by text", whitespace, a
 * colon, whitespace and a quote opens a member name (a closing quote cannot be followed by
 * a letter in valid JSON), and its value's literal ends at its first unescaped quote.
 * None: an unterminated string (not valid JSON: the caller does not splice). */
static PyObject *
sp_text_spans(PyObject *self, PyObject *line)
{
    Py_ssize_t n;
    int kind;
    const void *d;
    if (str_arg(line, "text_spans", &n, &kind, &d) < 0)
        return NULL;
#define AT(i) PyUnicode_READ(kind, d, (i))
#define IS_WS(c) ((c) == ' ' || (c) == '\t' || (c) == '\n' || (c) == '\r')
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t i = 0;
    while (i < n) {
        Py_ssize_t p;
        if (kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *q = memchr((const Py_UCS1 *)d + i, '"', (size_t)(n - i));
            if (q == NULL)
                break;
            p = q - (const Py_UCS1 *)d;
        }
        else {
            for (p = i; p < n && AT(p) != '"'; p++)
                ;
            if (p >= n)
                break;
        }
        i = p + 1;
        if (p + 6 > n || AT(p + 1) != 't' || AT(p + 2) != 'e' || AT(p + 3) != 'x' ||
            AT(p + 4) != 't' || AT(p + 5) != '"')
            continue;
        Py_ssize_t b = p;
        while (b > 0 && AT(b - 1) == '\\')
            b--;
        if ((p - b) % 2)
            continue; /* an escaped quote: inside a string */
        Py_ssize_t j = p + 6;
        while (j < n && IS_WS(AT(j)))
            j++;
        if (j >= n || AT(j) != ':')
            continue;
        j++;
        while (j < n && IS_WS(AT(j)))
            j++;
        if (j >= n || AT(j) != '"')
            continue;
        Py_ssize_t quote = j, k = j + 1, end = -1;
        while (k < n) {
            Py_UCS4 c = AT(k);
            if (c == '\\')
                k += 2;
            else if (c == '"') {
                end = k + 1;
                break;
            }
            else
                k++;
        }
        if (end < 0) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        PyObject *span = Py_BuildValue("(nn)", quote, end);
        if (span == NULL || PyList_Append(out, span) < 0) {
            Py_XDECREF(span);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(span);
        i = end;
    }
#undef AT
#undef IS_WS
    return out;
}

/* utf8_len(text) -> int: len(text.encode("utf-8", "surrogatepass")) without the copy. */
static PyObject *
sp_utf8_len(PyObject *self, PyObject *text)
{
    Py_ssize_t n, i;
    int kind;
    const void *d;
    if (str_arg(text, "utf8_len", &n, &kind, &d) < 0)
        return NULL;
    Py_ssize_t size = n;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)d;
        for (i = 0; i < n; i++)
            size += p[i] >> 7;
    }
    else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *p = (const Py_UCS2 *)d;
        for (i = 0; i < n; i++)
            size += (p[i] >= 0x80) + (p[i] >= 0x800);
    }
    else {
        const Py_UCS4 *p = (const Py_UCS4 *)d;
        for (i = 0; i < n; i++)
            size += (p[i] >= 0x80) + (p[i] >= 0x800) + (p[i] >= 0x10000);
    }
    return PyLong_FromSsize_t(size);
}

/* ---- Token estimates (gcfkit.tokens.estimate, generic.definitions.estimate) ----------
 *
 * Both walk a str once, the way their reference regexes cut it (tokens._PIECE and
 * definitions._PIECES, applied with finditer), and give the same numbers: token_features
 * returns tokens.estimate's feature counts (the weighted sum stays in Python, so the float
 * arithmetic is the reference's own), dense_estimate the D9.3 integer estimate. */

enum { TK_LETTER, TK_DIGIT, TK_PUNCT, TK_SPACE };
static unsigned char tk_class[128];

static void
init_token_classes(void)
{
    for (int c = 0; c < 128; c++) {
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))
            tk_class[c] = TK_LETTER;
        else if (c >= '0' && c <= '9')
            tk_class[c] = TK_DIGIT;
        else if (Py_UNICODE_ISSPACE(c))  /* re's \s: str.isspace (\x1c-\x1f included) */
            tk_class[c] = TK_SPACE;
        else
            tk_class[c] = TK_PUNCT;
    }
}

typedef struct {
    Py_ssize_t ws_runs, ws_chars, words, word_chars, digits, punct, other;
} TokenFeatures;

/* One loop per string kind; R is the read of code point j. Alternatives in the reference's
 * order: ASCII letters, ASCII digits (groups of 3), ASCII punctuation, non-ASCII runs, then
 * whitespace runs (which may go on into non-ASCII whitespace). A run is classified by its
 * first code point's isspace(), as the reference does, so a non-ASCII run that starts
 * with a space counts as whitespace. */
#define TK_FEATURES_LOOP(T)                                                            \
    {                                                                                  \
        const T *p = (const T *)data;                                                  \
        Py_ssize_t i = 0, j;                                                           \
        while (i < n) {                                                                \
            Py_UCS4 c = p[i];                                                          \
            if (c < 128) {                                                             \
                int cls = tk_class[c];                                                 \
                j = i + 1;                                                             \
                if (cls == TK_SPACE) {                                                 \
                    while (j < n && Py_UNICODE_ISSPACE((Py_UCS4)p[j]))                 \
                        j++;                                                           \
                    if (j - i > 1) {                                                   \
                        f->ws_runs++;                                                  \
                        f->ws_chars += j - i;                                          \
                    }                                                                  \
                }                                                                      \
                else {                                                                 \
                    while (j < n && p[j] < 128 && tk_class[p[j]] == cls)               \
                        j++;                                                           \
                    if (cls == TK_LETTER) {                                            \
                        f->words++;                                                    \
                        f->word_chars += j - i;                                        \
                    }                                                                  \
                    else if (cls == TK_DIGIT)                                          \
                        f->digits += (j - i + 2) / 3;                                  \
                    else                                                               \
                        f->punct += j - i;                                             \
                }                                                                      \
            }                                                                          \
            else {                                                                     \
                j = i + 1;                                                             \
                while (j < n && p[j] >= 128)                                           \
                    j++;                                                               \
                if (!Py_UNICODE_ISSPACE(c))                                            \
                    f->other += j - i;                                                 \
                else if (j - i > 1) {                                                  \
                    f->ws_runs++;                                                      \
                    f->ws_chars += j - i;                                              \
                }                                                                      \
            }                                                                          \
            i = j;                                                                     \
        }                                                                              \
    }

static void
token_features_of(PyObject *text, TokenFeatures *f)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    memset(f, 0, sizeof(*f));
    if (kind == PyUnicode_1BYTE_KIND)
        TK_FEATURES_LOOP(Py_UCS1)
    else if (kind == PyUnicode_2BYTE_KIND)
        TK_FEATURES_LOOP(Py_UCS2)
    else
        TK_FEATURES_LOOP(Py_UCS4)
}

/* token_features(text) -> (ws_runs, ws_chars, words, word_chars, digit_groups, punct,
 * other): tokens.estimate's features of text. */
static PyObject *
sp_token_features(PyObject *self, PyObject *text)
{
    Py_ssize_t n;
    int kind;
    const void *d;
    if (str_arg(text, "token_features", &n, &kind, &d) < 0)
        return NULL;
    TokenFeatures f;
    token_features_of(text, &f);
    return Py_BuildValue("(nnnnnnn)", f.ws_runs, f.ws_chars, f.words, f.word_chars, f.digits,
                         f.punct, f.other);
}

/* D9.3: a letter run costs one per 6 letters, a digit run one per 3 digits, a run of 2+
 * spaces one (a single space nothing), any other code point one. */
#define TK_DENSE_LOOP(T)                                                               \
    {                                                                                  \
        const T *p = (const T *)data;                                                  \
        Py_ssize_t i = 0, j;                                                           \
        while (i < n) {                                                                \
            Py_UCS4 c = p[i];                                                          \
            int cls = c < 128 ? tk_class[c] : TK_PUNCT;                                \
            if (cls == TK_PUNCT || (cls == TK_SPACE && c != ' ')) {                    \
                total++;                                                               \
                i++;                                                                   \
                continue;                                                              \
            }                                                                          \
            j = i + 1;                                                                 \
            if (cls == TK_SPACE) {                                                     \
                while (j < n && p[j] == ' ')                                           \
                    j++;                                                               \
                total += j - i > 1;                                                    \
            }                                                                          \
            else {                                                                     \
                while (j < n && p[j] < 128 && tk_class[p[j]] == cls)                   \
                    j++;                                                               \
                total += cls == TK_LETTER ? (j - i + 5) / 6 : (j - i + 2) / 3;         \
            }                                                                          \
            i = j;                                                                     \
        }                                                                              \
    }

/* dense_estimate(text) -> int: generic.definitions.estimate(text). */
static PyObject *
sp_dense_estimate(PyObject *self, PyObject *text)
{
    Py_ssize_t n, total = 0;
    int kind;
    const void *data;
    if (str_arg(text, "dense_estimate", &n, &kind, &data) < 0)
        return NULL;
    if (kind == PyUnicode_1BYTE_KIND)
        TK_DENSE_LOOP(Py_UCS1)
    else if (kind == PyUnicode_2BYTE_KIND)
        TK_DENSE_LOOP(Py_UCS2)
    else
        TK_DENSE_LOOP(Py_UCS4)
    return PyLong_FromSsize_t(total);
}

/* ---- Compact JSON from JSON text (jsonio.compact_of) ---------------------------------
 *
 * minify_json(text) is dumps_compact(loads_json(text)) for a text that loads_json accepts,
 * written from the text in one pass without building the value: whitespace between tokens
 * dropped, every string re-spelled as json.dumps(ensure_ascii=False) writes it (the short
 * escapes, \u00XX for other control characters, every other character as itself, and a lone
 * surrogate as its lowercase \uXXXX: jsonio.escape_lone_surrogates), an integer as its
 * digits (-0 as 0), any other number as repr(float(token)). None when the text holds
 * anything else (NaN, an overflow, a bad escape, a control character): the caller dumps
 * the value instead. It does not check the nesting, which loads_json already did. */

static int
mj_put(Writer *w, Py_UCS4 c)
{
    int kind = c < 0x100 ? 1 : c < 0x10000 ? 2 : 4;
    if (kind > w->kind && w_widen(w, kind) < 0)
        return RC_ERR;
    return w_char(w, c);
}

static int
mj_escape(Writer *w, Py_UCS4 c)
{
    char buf[8];
    switch (c) {
    case '"':
        return w_ascii(w, "\\\"", 2);
    case '\\':
        return w_ascii(w, "\\\\", 2);
    case '\b':
        return w_ascii(w, "\\b", 2);
    case '\f':
        return w_ascii(w, "\\f", 2);
    case '\n':
        return w_ascii(w, "\\n", 2);
    case '\r':
        return w_ascii(w, "\\r", 2);
    case '\t':
        return w_ascii(w, "\\t", 2);
    default:
        if (c < 0x20 || Py_UNICODE_IS_SURROGATE(c)) {
            snprintf(buf, sizeof buf, "\\u%04x", (unsigned)c);
            return w_ascii(w, buf, 6);
        }
        return mj_put(w, c);
    }
}

static int
mj_hex4(int kind, const void *d, Py_ssize_t n, Py_ssize_t i, Py_UCS4 *out)
{
    if (i + 4 > n)
        return -1;
    Py_UCS4 v = 0;
    for (Py_ssize_t k = i; k < i + 4; k++) {
        Py_UCS4 c = PyUnicode_READ(kind, d, k);
        int x;
        if (c >= '0' && c <= '9')
            x = (int)(c - '0');
        else if (c >= 'a' && c <= 'f')
            x = (int)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            x = (int)(c - 'A' + 10);
        else
            return -1;
        v = (v << 4) | (Py_UCS4)x;
    }
    *out = v;
    return 0;
}

/* The first index from i on of a character a string cannot copy as it is: a quote, a
 * backslash, a control character or a surrogate (n if none). */
static Py_ssize_t
mj_plain(int kind, const void *d, Py_ssize_t n, Py_ssize_t i)
{
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)d;
        while (i < n && p[i] >= 0x20 && p[i] != '"' && p[i] != '\\')
            i++;
    }
    else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *p = (const Py_UCS2 *)d;
        while (i < n && p[i] >= 0x20 && p[i] != '"' && p[i] != '\\' &&
               !Py_UNICODE_IS_SURROGATE(p[i]))
            i++;
    }
    else {
        const Py_UCS4 *p = (const Py_UCS4 *)d;
        while (i < n && p[i] >= 0x20 && p[i] != '"' && p[i] != '\\' &&
               !Py_UNICODE_IS_SURROGATE(p[i]))
            i++;
    }
    return i;
}

/* The string starting at the quote at *pos; *pos ends past its closing quote. */
static int
mj_string(Writer *w, int kind, const void *d, Py_ssize_t n, Py_ssize_t *pos)
{
    Py_ssize_t i = *pos + 1, run = *pos;
    for (;;) {
        if (i >= n)
            return RC_FALLBACK;
        Py_UCS4 c = PyUnicode_READ(kind, d, i);
        if (c == '"') {
            i++;
            if (w_span(w, kind, d, run, i) < 0)
                return RC_ERR;
            *pos = i;
            return RC_OK;
        }
        if (c < 0x20)
            return RC_FALLBACK; /* json's strict mode refuses it */
        if (c != '\\' && !Py_UNICODE_IS_SURROGATE(c)) {
            i = mj_plain(kind, d, n, i + 1);
            continue;
        }
        if (w_span(w, kind, d, run, i) < 0)
            return RC_ERR;
        if (c != '\\') { /* a lone surrogate in the str itself */
            if (mj_escape(w, c) < 0)
                return RC_ERR;
            run = ++i;
            continue;
        }
        if (i + 1 >= n)
            return RC_FALLBACK;
        Py_UCS4 e = PyUnicode_READ(kind, d, i + 1), cp;
        i += 2;
        switch (e) {
        case '"':
        case '\\':
        case '/':
            cp = e;
            break;
        case 'b':
            cp = '\b';
            break;
        case 'f':
            cp = '\f';
            break;
        case 'n':
            cp = '\n';
            break;
        case 'r':
            cp = '\r';
            break;
        case 't':
            cp = '\t';
            break;
        case 'u':
            if (mj_hex4(kind, d, n, i, &cp) < 0)
                return RC_FALLBACK;
            i += 4;
            /* json joins an escaped high surrogate with an escaped low one that follows. */
            if (Py_UNICODE_IS_HIGH_SURROGATE(cp) && i + 1 < n &&
                PyUnicode_READ(kind, d, i) == '\\' && PyUnicode_READ(kind, d, i + 1) == 'u') {
                Py_UCS4 lo;
                if (mj_hex4(kind, d, n, i + 2, &lo) < 0)
                    return RC_FALLBACK;
                if (Py_UNICODE_IS_LOW_SURROGATE(lo)) {
                    cp = Py_UNICODE_JOIN_SURROGATES(cp, lo);
                    i += 6;
                }
            }
            break;
        default:
            return RC_FALLBACK;
        }
        if (mj_escape(w, cp) < 0)
            return RC_ERR;
        run = i;
    }
}

/* The number starting at *pos (JSON's grammar, checked). */
static int
mj_number(Writer *w, int kind, const void *d, Py_ssize_t n, Py_ssize_t *pos)
{
    Py_ssize_t start = *pos, i = start;
    int is_float = 0;
    if (PyUnicode_READ(kind, d, i) == '-')
        i++;
    if (i >= n || !is_digit(PyUnicode_READ(kind, d, i)))
        return RC_FALLBACK;
    if (PyUnicode_READ(kind, d, i) == '0') {
        i++;
        if (i < n && is_digit(PyUnicode_READ(kind, d, i)))
            return RC_FALLBACK;
    }
    else
        while (i < n && is_digit(PyUnicode_READ(kind, d, i)))
            i++;
    if (i < n && PyUnicode_READ(kind, d, i) == '.') {
        is_float = 1;
        i++;
        if (i >= n || !is_digit(PyUnicode_READ(kind, d, i)))
            return RC_FALLBACK;
        while (i < n && is_digit(PyUnicode_READ(kind, d, i)))
            i++;
    }
    if (i < n && (PyUnicode_READ(kind, d, i) == 'e' || PyUnicode_READ(kind, d, i) == 'E')) {
        is_float = 1;
        i++;
        if (i < n && (PyUnicode_READ(kind, d, i) == '+' || PyUnicode_READ(kind, d, i) == '-'))
            i++;
        if (i >= n || !is_digit(PyUnicode_READ(kind, d, i)))
            return RC_FALLBACK;
        while (i < n && is_digit(PyUnicode_READ(kind, d, i)))
            i++;
    }
    *pos = i;
    Py_ssize_t len = i - start;
    if (!is_float) {
        if (len == 2 && PyUnicode_READ(kind, d, start) == '-' &&
            PyUnicode_READ(kind, d, start + 1) == '0')
            return w_char(w, '0');
        if (len > 4000)
            return RC_FALLBACK; /* near int()'s digit limit: the reference's call */
        return w_span(w, kind, d, start, i);
    }
    char small[64], *buf = small;
    if (len >= (Py_ssize_t)sizeof small) {
        buf = PyMem_Malloc((size_t)len + 1);
        if (buf == NULL) {
            PyErr_NoMemory();
            return RC_ERR;
        }
    }
    for (Py_ssize_t k = 0; k < len; k++)
        buf[k] = (char)PyUnicode_READ(kind, d, start + k);
    buf[len] = '\0';
    char *end = NULL;
    double x = PyOS_string_to_double(buf, &end, NULL);
    int bad = (x == -1.0 && PyErr_Occurred()) || end != buf + len;
    if (buf != small)
        PyMem_Free(buf);
    if (bad) {
        /* Not reached for a token of JSON's grammar; the dump decides if it ever is. */
        if (PyErr_Occurred()) {
            if (PyErr_ExceptionMatches(PyExc_MemoryError))
                return RC_ERR;
            PyErr_Clear();
        }
        return RC_FALLBACK;
    }
    if (!isfinite(x))
        return RC_FALLBACK; /* loads_json refuses an overflow */
    char fast[32];
    Py_ssize_t fn = short_repr(x, fast, Py_DTSF_ADD_DOT_0);
    if (fn >= 0)
        return w_ascii(w, fast, fn);
    char *r = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (r == NULL)
        return RC_ERR;
    int rc = w_ascii(w, r, (Py_ssize_t)strlen(r));
    PyMem_Free(r);
    return rc;
}

static int
mj_word(int kind, const void *d, Py_ssize_t n, Py_ssize_t i, const char *word)
{
    Py_ssize_t k = 0;
    for (; word[k]; k++)
        if (i + k >= n || PyUnicode_READ(kind, d, i + k) != (Py_UCS4)word[k])
            return 0;
    return (int)k;
}

/* minify_json(text) -> str | None */
static PyObject *
sp_minify_json(PyObject *self, PyObject *text)
{
    Py_ssize_t n, i = 0;
    int kind;
    const void *d;
    if (str_arg(text, "minify_json", &n, &kind, &d) < 0)
        return NULL;
    Writer w;
    if (w_init(&w, n) < 0)
        return NULL;
    int rc = w_widen(&w, kind);
    while (rc == RC_OK && i < n) {
        Py_UCS4 c = PyUnicode_READ(kind, d, i);
        int k;
        switch (c) {
        case ' ':
        case '\t':
        case '\n':
        case '\r':
            i++;
            break;
        case '{':
        case '}':
        case '[':
        case ']':
        case ':':
        case ',':
            rc = w_char(&w, c);
            i++;
            break;
        case '"':
            rc = mj_string(&w, kind, d, n, &i);
            break;
        case 't':
        case 'f':
        case 'n':
            k = mj_word(kind, d, n, i, c == 't' ? "true" : c == 'f' ? "false" : "null");
            if (k == 0)
                rc = RC_FALLBACK;
            else {
                rc = w_span(&w, kind, d, i, i + k);
                i += k;
            }
            break;
        default:
            if (c == '-' || is_digit(c))
                rc = mj_number(&w, kind, d, n, &i);
            else
                rc = RC_FALLBACK;
        }
    }
    return w_result(&w, rc);
}

/* same_value(a, b) -> bool | None */
static PyObject *
sp_same_value(PyObject *self, PyObject *args)
{
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "OO:same_value", &a, &b))
        return NULL;
    int r = same_rec(a, b, 0);
    if (r == RC_ERR)
        return NULL;
    if (r == RC_FALLBACK)
        Py_RETURN_NONE;
    return PyBool_FromLong(r);
}

static PyMethodDef methods[] = {
    {"token_features", sp_token_features, METH_O,
     "token_features(text) -> tuple: tokens.estimate's seven feature counts of text."},
    {"dense_estimate", sp_dense_estimate, METH_O,
     "dense_estimate(text) -> int: the dense profile's D9.3 token estimate of text."},
    {"minify_json", sp_minify_json, METH_O,
     "minify_json(text) -> str | None: jsonio.dumps_compact(loads_json(text)) from the text."},
    {"text_spans", sp_text_spans, METH_O,
     "text_spans(line) -> list | None: where each plain 'text' member's string value stands."},
    {"utf8_len", sp_utf8_len, METH_O,
     "utf8_len(text) -> int: the UTF-8 size of text, lone surrogates 3 bytes each."},
    {"table_cells", sp_table_cells, METH_VARARGS,
     "table_cells(value, stop=None) -> int | None: proxy.rewrite.gcf_cells in C."},
    {"json_pairs", sp_json_pairs, METH_O,
     "json_pairs(pairs) -> dict: json.loads' object_pairs_hook, refusing duplicate keys."},
    {"json_float", sp_json_float, METH_O,
     "json_float(text) -> float: json.loads' parse_float, refusing overflows."},
    {"occurrences", sp_occurrences, METH_O,
     "occurrences(value) -> dict | None\n\n"
     "Each string in a value position of value, counted (dense D9.2 step 1), or None."},
    {"same_value", sp_same_value, METH_VARARGS,
     "same_value(a, b) -> bool | None\n\n"
     "jsonio.same_value(a, b) for plain JSON-model values, or None: let Python decide."},
    {"encode", sp_encode, METH_VARARGS,
     "encode(value, header, flatten, shared_schemas, inline_schemas) -> str | None\n\n"
     "The canonical generic-profile text of value, or None: let the reference do it."},
    {"encode_dense", sp_encode_dense, METH_VARARGS,
     "encode_dense(value, header, defs, lists, constants, short_rows) -> (str, int) | None\n\n"
     "The dense-profile text of value and the constructs it used, or None."},
    {"decode_dense", sp_decode_dense, METH_VARARGS,
     "decode_dense(text, header) -> (value,) | None\n\n"
     "The value of a dense-profile payload in canonical spelling, or None."},
    {"format_number", sp_format_number, METH_O,
     "format_number(x) -> str | None: canonical number text (§2.3.1)."},
    {"spelling", sp_spelling, METH_O,
     "spelling(s) -> str | None: definitions.spelling(s), or None: let the reference."},
    {"format_scalar", sp_format_scalar, METH_O,
     "format_scalar(x) -> str | None: the canonical cell text of a scalar."},
    {"decode", sp_decode, METH_O,
     "decode(text) -> (value,) | None\n\n"
     "The value of a generic-profile payload in canonical spelling, or None: let the\n"
     "reference decode it (every error, every other spelling)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "gcfkit._speedups",
    "The optional C accelerator of gcfkit's generic codec (see gcfkit.speedups).",
    -1,
    methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    init_tables();
    init_token_classes();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Refused = PyErr_NewException("gcfkit._speedups.Refused", NULL, NULL);
    if (Refused == NULL || PyModule_AddObjectRef(m, "Refused", Refused) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
