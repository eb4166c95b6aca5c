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
} Writer;

static int
w_init(Writer *w, Py_ssize_t cap)
{
    w->kind = 1;
    w->len = 0;
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

static int
w_ssize(Writer *w, Py_ssize_t v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%zd", v);
    return w_ascii(w, buf, n);
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
        Py_UCS4 c = PyUnicode_READ(kind, d, i);
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
static int
w_cell(Writer *w, PyObject *v)
{
    if (PyUnicode_CheckExact(v))
        return w_scalar_str(w, v);
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow)
            return RC_FALLBACK; /* out_of_range */
        if (x == -1 && PyErr_Occurred())
            return RC_ERR;
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%lld", x);
        return w_ascii(w, buf, n);
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

typedef struct {
    Writer w;
    int flatten, shared, inline_;
    Py_ssize_t *cuts; /* (position, length) pairs: declarations a shared schema omits */
    Py_ssize_t ncuts, capcuts;
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

static int
add_cut(Enc *e, Py_ssize_t pos, Py_ssize_t len)
{
    if (e->ncuts + 2 > e->capcuts) {
        Py_ssize_t cap = e->capcuts ? e->capcuts * 2 : 32;
        Py_ssize_t *p = PyMem_Realloc(e->cuts, (size_t)cap * sizeof(Py_ssize_t));
        if (p == NULL) {
            PyErr_NoMemory();
            return RC_ERR;
        }
        e->cuts = p;
        e->capcuts = cap;
    }
    e->cuts[e->ncuts++] = pos;
    e->cuts[e->ncuts++] = len;
    return RC_OK;
}

/* del out[mark:] */
static void
rollback(Enc *e, Py_ssize_t mark)
{
    e->w.len = mark;
    Py_ssize_t i, j = 0;
    for (i = 0; i < e->ncuts; i += 2) {
        if (e->cuts[i] < mark) {
            e->cuts[j++] = e->cuts[i];
            e->cuts[j++] = e->cuts[i + 1];
        }
    }
    e->ncuts = j;
}

/* -- the key and form helpers -------------------------------------------------------- */

static inline int
has_gt(PyObject *s)
{
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

/* _union: the ordered field union of dicts (all exact dicts, exact str keys, else
 * RC_FALLBACK). A new list in *out. */
static int
field_union(PyObject **objs, Py_ssize_t n, PyObject **out)
{
    PyObject *seen = PyDict_New();
    if (seen == NULL)
        return RC_ERR;
    PyObject *first_keys = NULL;
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        PyObject *o = objs[i];
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(o, &pos, &k, &v)) {
            if (!PyUnicode_CheckExact(k)) {
                Py_DECREF(seen);
                return RC_FALLBACK;
            }
            if (PyDict_SetDefault(seen, k, Py_None) == NULL) {
                Py_DECREF(seen);
                return RC_ERR;
            }
        }
    }
    (void)first_keys;
    *out = PyDict_Keys(seen);
    Py_DECREF(seen);
    return *out == NULL ? RC_ERR : RC_OK;
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

static inline int
keys_equal(PyObject *a, PyObject *b)
{
    /* Exact str only: no user code runs. */
    return a == b || PyUnicode_Compare(a, b) == 0;
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
    PyObject *decl; /* owned */
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
    p->slots = NULL;
    p->decl = NULL;
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
    }
    else {
        plan->decl = make_decl(columns, 0, &rc);
        if (plan->decl == NULL)
            goto fail;
    }
    PyMem_Free(present);
    Py_DECREF(columns);
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

typedef struct {
    int enabled;
    PyObject *schemas; /* field -> decl (the first tabular attachment of each field) */
    PyObject *decls;   /* field -> decl of its all-scalar tables */
    PyObject *flat;    /* field -> list of declaration positions */
    PyObject *spoiled; /* fields with any other kind of attachment */
} Share;

static int
share_init(Share *s, int enabled)
{
    s->enabled = enabled;
    s->schemas = PyDict_New();
    s->decls = PyDict_New();
    s->flat = PyDict_New();
    s->spoiled = PySet_New(NULL);
    if (!s->schemas || !s->decls || !s->flat || !s->spoiled)
        return RC_ERR;
    return RC_OK;
}

static void
share_clear(Share *s)
{
    Py_XDECREF(s->schemas);
    Py_XDECREF(s->decls);
    Py_XDECREF(s->flat);
    Py_XDECREF(s->spoiled);
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

/* _flat_rows: RC_OK, or RC_NESTED as soon as a cell holds a container. */
static int
flat_rows(Enc *e, PyObject **objs, Py_ssize_t n, PyObject *fields, Py_ssize_t ind)
{
    Writer *w = &e->w;
    Py_ssize_t width = PyList_GET_SIZE(fields), i, j;
    PyObject **names = &PyList_GET_ITEM(fields, 0);
    int rc;
    for (i = 0; i < n; i++) {
        PyObject *o = objs[i];
        if (ind && w_spaces(w, ind) < 0)
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
            if ((rc = w_cell(w, v)) != RC_OK)
                return rc;
            j++;
        }
        for (; j < width; j++) {
            if (j && w_char(w, '|') < 0)
                return RC_ERR;
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

/* _Encoder.rows: keys (a keyed map's member keys) or NULL. */
static int
enc_rows(Enc *e, Plan *plan, PyObject **objs, PyObject **keys, Py_ssize_t n,
         Py_ssize_t ind, int depth)
{
    if (depth > C_MAX_DEPTH)
        return RC_FALLBACK;
    Writer *w = &e->w;
    Share share = {0, NULL, NULL, NULL, NULL};
    int share_ready = 0;
    char *inline_seen = PyMem_Calloc((size_t)plan->n + 1, 1);
    Att *atts = PyMem_Malloc(sizeof(Att) * (size_t)(2 * plan->n + 1));
    int rc = RC_OK;
    if (inline_seen == NULL || atts == NULL) {
        PyErr_NoMemory();
        rc = RC_ERR;
        goto out;
    }
    Py_ssize_t body = ind + 4, i, s;
    for (i = 0; i < n; i++) {
        PyObject *obj = objs[i];
        Py_ssize_t ncells = 0, natt = 0, nlate = 0;
        if (w_spaces(w, ind) < 0) {
            rc = RC_ERR;
            goto out;
        }
        Py_ssize_t cells_at = w->len;
        if (keys != NULL) {
            ncells = 1;
            if ((rc = w_scalar_str(w, keys[i])) < 0)
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
                }
                if (rc < 0)
                    goto out;
                break;
            }
        }
        Py_ssize_t a;
        for (a = 0; a < nlate; a++)
            atts[natt++] = atts[plan->n + a];
        if (natt == 0) {
            if (w_char(w, '\n') < 0) {
                rc = RC_ERR;
                goto out;
            }
            continue;
        }
        {
            char prefix[32];
            int m = snprintf(prefix, sizeof prefix, "@%zd ", i);
            if (w_insert_ascii(w, cells_at, prefix, m) < 0 || w_char(w, '\n') < 0) {
                rc = RC_ERR;
                goto out;
            }
        }
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
out:
    if (share_ready)
        share_clear(&share);
    PyMem_Free(inline_seen);
    PyMem_Free(atts);
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
        Py_ssize_t decl_at = w->len;
        if (w_str(w, decl) < 0 || w_char(w, '\n') < 0) {
            Py_DECREF(decl);
            Py_DECREF(fields);
            return RC_ERR;
        }
        rc = flat_rows(e, objs, n, fields, ind);
        if (rc == RC_OK) {
            if (share != NULL)
                rc = share_flat_table(share, field, decl, decl_at);
            Py_DECREF(decl);
            Py_DECREF(fields);
            if (rc == RC_OK)
                *done = 1;
            return rc;
        }
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
    Py_ssize_t mark = w->len;
    if ((rc = w_pre(w, bpre)) < 0 || w_char(w, '[') < 0 || w_ssize(w, n) < 0 ||
        w_char(w, ']') < 0 || w_str(w, plan.decl) < 0 || w_char(w, '\n') < 0) {
        plan_free(&plan);
        return rc < 0 ? rc : RC_ERR;
    }
    rc = enc_rows(e, &plan, objs, NULL, n, ind, depth + 1);
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
        Py_ssize_t mark = w->len;
        rc = w_pre(w, bpre);
        if (rc >= 0) {
            if (w_char(w, '[') < 0 || w_ssize(w, n) < 0 || w_ascii(w, ":]{", 3) < 0)
                rc = RC_ERR;
        }
        if (rc >= 0)
            rc = w_key(w, label);
        Py_DECREF(label);
        if (rc >= 0) {
            if (w_char(w, ',') < 0 ||
                w_span(w, PyUnicode_KIND(plan.decl), PyUnicode_DATA(plan.decl), 1,
                       PyUnicode_GET_LENGTH(plan.decl)) < 0 ||
                w_char(w, '\n') < 0)
                rc = RC_ERR;
        }
        if (rc >= 0)
            rc = enc_rows(e, &plan, values, keys, n, ind, depth + 1);
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
cmp_cuts(const void *a, const void *b)
{
    Py_ssize_t x = ((const Py_ssize_t *)a)[0], y = ((const Py_ssize_t *)b)[0];
    return (x > y) - (x < y);
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
    e.flatten = flatten;
    e.shared = shared;
    e.inline_ = inline_;
    e.cuts = NULL;
    e.ncuts = e.capcuts = 0;
    if (w_init(&e.w, 4096) < 0)
        return NULL;
    int rc = w_str(&e.w, header);
    if (rc == RC_OK)
        rc = w_char(&e.w, '\n');
    if (rc == RC_OK)
        rc = enc_root(&e, value);
    PyObject *result = NULL;
    if (rc == RC_OK) {
        if (e.ncuts) {
            /* The repeated declarations of shared array schemas, cut out in one pass. */
            qsort(e.cuts, (size_t)(e.ncuts / 2), 2 * sizeof(Py_ssize_t), cmp_cuts);
            int k = e.w.kind;
            Py_ssize_t dst = e.cuts[0], src, c;
            for (c = 0; c < e.ncuts; c += 2) {
                src = e.cuts[c] + e.cuts[c + 1];
                Py_ssize_t next = c + 2 < e.ncuts ? e.cuts[c + 2] : e.w.len;
                memmove(e.w.data + dst * k, e.w.data + src * k, (size_t)(next - src) * k);
                dst += next - src;
            }
            e.w.len = dst;
        }
        result = w_finish(&e.w);
    }
    else if (rc == RC_FALLBACK || rc == RC_CONFLICT || rc == RC_NESTED) {
        result = Py_None;
        Py_INCREF(result);
    }
    w_free(&e.w);
    PyMem_Free(e.cuts);
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
    PyObject *r = NULL;
    if (rc == RC_OK)
        r = w_finish(&w);
    else if (rc != RC_ERR) {
        r = Py_None;
        Py_INCREF(r);
    }
    w_free(&w);
    return r;
}

/* DECODER */

static PyMethodDef methods[] = {
    {"encode", sp_encode, METH_VARARGS,
     "encode(value, header, flatten, shared_schemas, inline_schemas) -> str | None\n\n"
     "The canonical generic-profile text of value, or None: let the reference do it."},
    {"format_number", sp_format_number, METH_O,
     "format_number(x) -> str | None: canonical number text (§2.3.1)."},
    {"format_scalar", sp_format_scalar, METH_O,
     "format_scalar(x) -> str | None: the canonical cell text of a scalar."},
    /* DECODER METHODS */
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "gcfkit._speedups",
    "The optional C accelerator of gcfkit's generic codec (see gcfkit._accel).",
    -1,
    methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module);
}
