/* gcfkit._bpe: exact token counts for the o200k_base and cl100k_base encodings.
 *
 * Written from the published algorithm, not from any implementation: a text is split by
 * the encoding's pre-tokenizer pattern, and each piece is encoded by byte-pair merges,
 * always merging the adjacent pair whose concatenation has the lowest rank (leftmost on a
 * tie) until no pair is a token; the count is the number of parts left. A piece that is a
 * token as a whole counts 1.
 *
 * The ranks come in as the tiktoken text format (base64 token, space, rank, newline) and
 * are kept as one blob of token bytes plus an open-addressing hash of entry ids, a few
 * megabytes per encoding. The pre-tokenizer regexes are implemented by hand below, each
 * alternative with the result a backtracking (leftmost-first) matcher gives; the Unicode
 * classes come from _bpe_unicode.h (generated, see tests/gen_bpe_unicode.py).
 *
 * Tool results, what this is mostly for, are short texts of mostly ASCII that repeat
 * their pieces (keys, separators, indentation): ASCII is pre-tokenized from a byte-class
 * table, and each thread keeps a small cache of short pieces' counts, so that most pieces
 * cost neither a lookup in the rank table nor a merge. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_bpe_unicode.h"

#define NONE_RANK UINT32_MAX

typedef struct {
    PyObject_HEAD
    unsigned char *blob; /* token bytes, entry after entry */
    uint32_t *offs;      /* n + 1 offsets into blob */
    uint32_t *ranks;     /* rank of each entry */
    uint32_t *slots;     /* hash slots: entry index + 1, 0 = empty */
    uint32_t mask;
    Py_ssize_t n;
    int o200k;
    uint32_t id; /* this table's name in the piece cache; 0: not cached */
} Enc;

/* ---------------------------------------------------------------- rank table */

static inline uint64_t
hash_bytes(const unsigned char *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    }
    h ^= h >> 29;
    h *= 0x94D049BB133111EBULL;
    h ^= h >> 32;
    return h;
}

static inline uint32_t
lookup(const Enc *e, const unsigned char *p, size_t n)
{
    uint32_t i = (uint32_t)hash_bytes(p, n) & e->mask;
    for (;;) {
        uint32_t s = e->slots[i];
        if (s == 0)
            return NONE_RANK;
        s--;
        if (e->offs[s + 1] - e->offs[s] == n && memcmp(e->blob + e->offs[s], p, n) == 0)
            return e->ranks[s];
        i = (i + 1) & e->mask;
    }
}

static int
b64val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Parse the tiktoken rank file; 0 on success, -1 with an exception set. */
static int
load_ranks(Enc *e, const unsigned char *d, Py_ssize_t len)
{
    Py_ssize_t lines = 0;
    for (Py_ssize_t i = 0; i < len; i++)
        if (d[i] == '\n')
            lines++;
    if (len && d[len - 1] != '\n')
        lines++;
    if (lines == 0 || lines > (Py_ssize_t)(UINT32_MAX / 4)) {
        PyErr_SetString(PyExc_ValueError, "empty or oversized rank file");
        return -1;
    }
    e->blob = PyMem_Malloc((size_t)len + 1);
    e->offs = PyMem_Malloc(sizeof(uint32_t) * (size_t)(lines + 1));
    e->ranks = PyMem_Malloc(sizeof(uint32_t) * (size_t)lines);
    if (!e->blob || !e->offs || !e->ranks) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t n = 0, i = 0;
    uint32_t out = 0;
    while (i < len) {
        if (d[i] == '\n') { /* tolerate blank lines */
            i++;
            continue;
        }
        e->offs[n] = out;
        uint32_t acc = 0;
        int bits = 0;
        while (i < len && d[i] != ' ' && d[i] != '=') {
            int v = b64val(d[i]);
            if (v < 0)
                goto bad;
            acc = (acc << 6) | (uint32_t)v;
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                e->blob[out++] = (unsigned char)(acc >> bits);
                acc &= (1u << bits) - 1;
            }
            i++;
        }
        while (i < len && d[i] == '=')
            i++;
        if (i >= len || d[i] != ' ' || out == e->offs[n])
            goto bad;
        i++;
        uint64_t r = 0;
        int digits = 0;
        while (i < len && d[i] >= '0' && d[i] <= '9') {
            r = r * 10 + (d[i] - '0');
            if (r >= NONE_RANK)
                goto bad;
            i++;
            digits++;
        }
        if (!digits || (i < len && d[i] != '\n'))
            goto bad;
        e->ranks[n++] = (uint32_t)r;
    }
    e->offs[n] = out;
    e->n = n;
    size_t cap = 1;
    while (cap < (size_t)n * 2)
        cap <<= 1;
    e->mask = (uint32_t)(cap - 1);
    e->slots = PyMem_Calloc(cap, sizeof(uint32_t));
    if (!e->slots) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        const unsigned char *p = e->blob + e->offs[k];
        size_t m = e->offs[k + 1] - e->offs[k];
        if (lookup(e, p, m) != NONE_RANK) {
            PyErr_SetString(PyExc_ValueError, "duplicate token in rank file");
            return -1;
        }
        uint32_t j = (uint32_t)hash_bytes(p, m) & e->mask;
        while (e->slots[j])
            j = (j + 1) & e->mask;
        e->slots[j] = (uint32_t)k + 1;
    }
    /* Give back the slack of the blob (base64 is 4/3 of the bytes). */
    unsigned char *shrunk = PyMem_Realloc(e->blob, out ? out : 1);
    if (shrunk)
        e->blob = shrunk;
    return 0;
bad:
    PyErr_Format(PyExc_ValueError, "malformed rank file near line %zd", n + 1);
    return -1;
}

/* ---------------------------------------------------------------- byte-pair merges */

/* Pieces up to this many bytes merge in place (quadratic in the worst case, fastest for
 * the short pieces text is made of); longer ones use a heap, O(n log n). */
#define SMALL_PIECE 128

static Py_ssize_t
bpe_small(const Enc *e, const unsigned char *p, Py_ssize_t n)
{
    uint32_t st[SMALL_PIECE + 1], rk[SMALL_PIECE];
    Py_ssize_t m = n; /* parts; part k is p[st[k] : st[k + 1]] */
    for (Py_ssize_t k = 0; k <= n; k++)
        st[k] = (uint32_t)k;
    for (Py_ssize_t k = 0; k + 1 < m; k++)
        rk[k] = lookup(e, p + k, 2);
    while (m > 1) {
        uint32_t best = NONE_RANK;
        Py_ssize_t at = -1;
        for (Py_ssize_t k = 0; k + 1 < m; k++)
            if (rk[k] < best) {
                best = rk[k];
                at = k;
            }
        if (at < 0)
            break;
        /* Merge parts at and at + 1: drop boundary at + 1 and pair at + 1. */
        memmove(&st[at + 1], &st[at + 2], sizeof(uint32_t) * (size_t)(m - at - 1));
        if (m - at - 3 > 0)
            memmove(&rk[at + 1], &rk[at + 2], sizeof(uint32_t) * (size_t)(m - at - 3));
        m--;
        if (at + 1 < m)
            rk[at] = lookup(e, p + st[at], st[at + 2] - st[at]);
        if (at > 0)
            rk[at - 1] = lookup(e, p + st[at - 1], st[at + 1] - st[at - 1]);
    }
    return m;
}

/* A 4-ary min-heap of uint64 keys (shallower than a binary one: fewer cache misses on
 * the megabyte pieces it is for). */
typedef struct {
    uint64_t *a;
    size_t len, cap;
} Heap;

static void
heap_sift_down(Heap *h, size_t i, uint64_t v)
{
    size_t n = h->len;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n)
            break;
        size_t best = c, end = c + 4 < n ? c + 4 : n;
        for (size_t k = c + 1; k < end; k++)
            if (h->a[k] < h->a[best])
                best = k;
        if (v <= h->a[best])
            break;
        h->a[i] = h->a[best];
        i = best;
    }
    h->a[i] = v;
}

static int
heap_push(Heap *h, uint64_t v)
{
    if (h->len == h->cap) {
        size_t cap = h->cap * 2 + 16;
        uint64_t *a = PyMem_RawRealloc(h->a, cap * sizeof(uint64_t));
        if (!a)
            return -1;
        h->a = a;
        h->cap = cap;
    }
    size_t i = h->len++;
    while (i > 0) {
        size_t up = (i - 1) / 4;
        if (h->a[up] <= v)
            break;
        h->a[i] = h->a[up];
        i = up;
    }
    h->a[i] = v;
    return 0;
}

static uint64_t
heap_pop(Heap *h)
{
    uint64_t top = h->a[0], v = h->a[--h->len];
    if (h->len)
        heap_sift_down(h, 0, v);
    return top;
}

/* The merge queue of a long piece: keys rank << 32 | start, served lowest rank first and
 * leftmost on a tie. Merging a pair of rank r creates pairs that contain that token, and
 * in a BPE-trained table those rank above r: ranks arrive in increasing order, which a
 * radix heap over the rank (keys binned by the highest bit where their rank differs from
 * the current one) serves with sequential memory access. Bin 0 holds the current rank,
 * sorted by start once when it fills. A key whose rank is below the current one (a table
 * that breaks the rule) goes to a binary heap beside it, so the order stays exact anyway. */
typedef struct {
    uint64_t *a;
    size_t len, cap;
} Bin;

typedef struct {
    Bin bins[33];
    size_t head;  /* bin 0 is served from here */
    int sorted;   /* bin 0[head:] is in increasing order */
    uint32_t last; /* the current rank */
    size_t size;  /* keys in the bins */
    Heap side;
} Queue;

static int
bin_push(Bin *b, uint64_t v)
{
    if (b->len == b->cap) {
        size_t cap = b->cap * 2 + 16;
        uint64_t *a = PyMem_RawRealloc(b->a, cap * sizeof(uint64_t));
        if (!a)
            return -1;
        b->a = a;
        b->cap = cap;
    }
    b->a[b->len++] = v;
    return 0;
}

static inline int
bin_of(uint32_t last, uint64_t v)
{
    uint32_t r = (uint32_t)(v >> 32);
    return r == last ? 0 : 32 - __builtin_clz(r ^ last);
}

static int
queue_push(Queue *q, uint64_t v)
{
    if ((uint32_t)(v >> 32) < q->last)
        return heap_push(&q->side, v);
    int i = bin_of(q->last, v);
    if (i == 0)
        q->sorted = 0;
    q->size++;
    return bin_push(&q->bins[i], v);
}

static int
cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Pop the smallest key into *out: 1, or 0 when empty, -1 when out of memory. */
static int
queue_pop(Queue *q, uint64_t *out)
{
    Bin *zero = &q->bins[0];
    if (q->size && zero->len == q->head) {
        zero->len = q->head = 0;
        int i = 1;
        while (q->bins[i].len == 0)
            i++;
        Bin *b = &q->bins[i];
        uint32_t m = (uint32_t)(b->a[0] >> 32);
        for (size_t k = 1; k < b->len; k++)
            if ((uint32_t)(b->a[k] >> 32) < m)
                m = (uint32_t)(b->a[k] >> 32);
        q->last = m;
        /* Every key of bin i lands in a lower bin. */
        size_t n = b->len;
        b->len = 0;
        for (size_t k = 0; k < n; k++)
            if (bin_push(&q->bins[bin_of(m, b->a[k])], b->a[k]) < 0)
                return -1;
        q->sorted = 0;
    }
    if (q->size && !q->sorted) {
        uint64_t *a = zero->a + q->head;
        size_t n = zero->len - q->head;
        for (size_t k = 1; k < n; k++)
            if (a[k] < a[k - 1]) {
                qsort(a, n, sizeof(uint64_t), cmp_u64);
                break;
            }
        q->sorted = 1;
    }
    if (q->side.len && (!q->size || q->side.a[0] < zero->a[q->head])) {
        *out = heap_pop(&q->side);
        return 1;
    }
    if (!q->size)
        return 0;
    q->size--;
    *out = zero->a[q->head++];
    return 1;
}

static void
queue_free(Queue *q)
{
    for (int i = 0; i < 33; i++)
        PyMem_RawFree(q->bins[i].a);
    PyMem_RawFree(q->side.a);
}

/* -1 when out of memory (called without the GIL: no exception set). */
static Py_ssize_t
bpe_large(const Enc *e, const unsigned char *p, Py_ssize_t n)
{
    /* Part starting at byte i: nxt[i] is where the next part starts (n: none), prv[i]
     * the previous part's start, pr[i] the rank of the pair (part i, next part), or
     * NONE_RANK; dead parts have nxt == 0. A queue entry is stale when its part is gone
     * or its pair rank has changed. */
    uint32_t *nxt = PyMem_RawMalloc(sizeof(uint32_t) * (size_t)n * 3);
    Queue q;
    memset(&q, 0, sizeof q);
    if (!nxt)
        return -1;
    uint32_t *prv = nxt + n, *pr = prv + n;
    Py_ssize_t count = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        nxt[i] = (uint32_t)i + 1;
        prv[i] = i ? (uint32_t)i - 1 : 0;
        pr[i] = i + 1 < n ? lookup(e, p + i, 2) : NONE_RANK;
        if (pr[i] != NONE_RANK && queue_push(&q, ((uint64_t)pr[i] << 32) | (uint64_t)i) < 0)
            goto oom;
    }
    for (;;) {
        uint64_t top;
        int got = queue_pop(&q, &top);
        if (got < 0)
            goto oom;
        if (!got)
            break;
        uint32_t r = (uint32_t)(top >> 32), s = (uint32_t)top;
        if (pr[s] != r || nxt[s] == 0)
            continue;
        uint32_t d = nxt[s];
        nxt[s] = nxt[d];
        nxt[d] = 0;
        pr[d] = NONE_RANK;
        if (nxt[s] < (uint32_t)n)
            prv[nxt[s]] = s;
        count--;
        uint32_t t = nxt[s];
        pr[s] = t < (uint32_t)n ? lookup(e, p + s, nxt[t] - s) : NONE_RANK;
        if (pr[s] != NONE_RANK && queue_push(&q, ((uint64_t)pr[s] << 32) | s) < 0)
            goto oom;
        if (s > 0) {
            uint32_t v = prv[s];
            pr[v] = lookup(e, p + v, nxt[s] - v);
            if (pr[v] != NONE_RANK && queue_push(&q, ((uint64_t)pr[v] << 32) | v) < 0)
                goto oom;
        }
    }
    queue_free(&q);
    PyMem_RawFree(nxt);
    return count;
oom:
    queue_free(&q);
    PyMem_RawFree(nxt);
    return -1;
}

static inline Py_ssize_t
bpe_count(const Enc *e, const unsigned char *p, Py_ssize_t n)
{
    if (n <= 1)
        return n;
    if ((uint64_t)n >= UINT32_MAX)
        return -1; /* offsets are 32-bit: a 4 GB piece is refused as out of memory */
    if (lookup(e, p, (size_t)n) != NONE_RANK)
        return 1;
    return n <= SMALL_PIECE ? bpe_small(e, p, n) : bpe_large(e, p, n);
}

/* ---------------------------------------------------------------- pre-tokenizer */

typedef struct {
    const unsigned char *s;
    Py_ssize_t len;
} Text;

static inline int
is_space(uint32_t c)
{
    /* Unicode White_Space, as \s means in the encodings' (Rust and fancy-regex) regexes. */
    if (c < 0x80)
        return (c >= 0x09 && c <= 0x0D) || c == 0x20;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static inline int
class_of(uint32_t c)
{
    if (c < 0x80)
        return bpe_ascii_class[c];
    Py_ssize_t lo = 0, hi = BPE_NRANGES - 1;
    while (lo <= hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (c < bpe_ranges[mid][0])
            hi = mid - 1;
        else if (c > (bpe_ranges[mid][1] >> 3))
            lo = mid + 1;
        else
            return (int)(bpe_ranges[mid][1] & 7);
    }
    return 0;
}

/* The code point at byte i (valid UTF-8, i < len) and its length in bytes. */
static inline uint32_t
cp_at(const Text *t, Py_ssize_t i, int *n)
{
    const unsigned char *s = t->s + i;
    if (s[0] < 0x80) {
        *n = 1;
        return s[0];
    }
    if (s[0] < 0xE0) {
        *n = 2;
        return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if (s[0] < 0xF0) {
        *n = 3;
        return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    *n = 4;
    return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
           ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

#define IS_L(k) ((k) == BPE_UP || (k) == BPE_LO || (k) == BPE_LB)
#define IN_UPPER(k) ((k) == BPE_UP || (k) == BPE_LB || (k) == BPE_MK)
#define IN_LOWER(k) ((k) == BPE_LO || (k) == BPE_LB || (k) == BPE_MK)

/* [^\r\n\p{L}\p{N}] */
static inline int
prefix_ok(uint32_t c, int k)
{
    return c != '\r' && c != '\n' && !IS_L(k) && k != BPE_NU;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at i: its length in bytes, or 0. Case-insensitive
 * matching uses Unicode simple case folding, under which U+017F (long s) is an s. */
static Py_ssize_t
contraction(const Text *t, Py_ssize_t i)
{
    const unsigned char *s = t->s + i;
    Py_ssize_t left = t->len - i;
    if (left < 2 || s[0] != '\'')
        return 0;
    unsigned char a = s[1] | 0x20;
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if (left >= 3 && s[1] == 0xC5 && s[2] == 0xBF)
        return 3;
    if (left < 3)
        return 0;
    unsigned char b = s[2] | 0x20;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

/* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ from j: end or -1. */
static Py_ssize_t
o200k_lower_word(const Text *t, Py_ssize_t j)
{
    Py_ssize_t k = j, last_low_end = -1;
    int n;
    while (k < t->len) {
        int c = class_of(cp_at(t, k, &n));
        if (!IN_UPPER(c))
            break;
        k += n;
        if (IN_LOWER(c))
            last_low_end = k;
    }
    Py_ssize_t e = k;
    while (e < t->len) {
        int c = class_of(cp_at(t, e, &n));
        if (!IN_LOWER(c))
            break;
        e += n;
    }
    if (e > k)
        return e;
    /* Backtrack the upper run to its last character that is also lower-case-set. */
    return last_low_end;
}

/* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]* from j: end or -1. */
static Py_ssize_t
o200k_upper_word(const Text *t, Py_ssize_t j)
{
    Py_ssize_t k = j;
    int n;
    while (k < t->len && IN_UPPER(class_of(cp_at(t, k, &n))))
        k += n;
    if (k == j)
        return -1;
    while (k < t->len && IN_LOWER(class_of(cp_at(t, k, &n))))
        k += n;
    return k;
}

static Py_ssize_t
run_of_letters(const Text *t, Py_ssize_t j)
{
    int n;
    while (j < t->len && IS_L(class_of(cp_at(t, j, &n))))
        j += n;
    return j;
}

/* [^\s\p{L}\p{N}]+ from j: end (j if none). */
static Py_ssize_t
run_of_punct(const Text *t, Py_ssize_t j)
{
    int n;
    while (j < t->len) {
        uint32_t c = cp_at(t, j, &n);
        int k = class_of(c);
        if (is_space(c) || IS_L(k) || k == BPE_NU)
            break;
        j += n;
    }
    return j;
}

/* The end of the piece starting at byte i < len: any text (next_piece tries the ASCII
 * path first). */
static Py_ssize_t
next_piece_any(const Text *t, Py_ssize_t i, int o200k)
{
    int n;
    uint32_t c = cp_at(t, i, &n);
    int k = class_of(c);
    Py_ssize_t e;
    if (o200k) {
        /* [^\r\n\p{L}\p{N}]?<upper>*<lower>+(?i:'s|...)?  then  ...?<upper>+<lower>*... */
        for (int alt = 0; alt < 2; alt++) {
            Py_ssize_t (*word)(const Text *, Py_ssize_t) =
                alt ? o200k_upper_word : o200k_lower_word;
            e = -1;
            if (prefix_ok(c, k))
                e = word(t, i + n);
            if (e < 0)
                e = word(t, i);
            if (e >= 0)
                return e + contraction(t, e);
        }
    }
    else {
        if ((e = contraction(t, i)) > 0)
            return i + e;
        /* [^\r\n\p{L}\p{N}]?\p{L}+ */
        if (prefix_ok(c, k) && (e = run_of_letters(t, i + n)) > i + n)
            return e;
        if (IS_L(k))
            return run_of_letters(t, i);
    }
    if (k == BPE_NU) { /* \p{N}{1,3} */
        e = i + n;
        for (int more = 0; more < 2 && e < t->len; more++) {
            int m;
            if (class_of(cp_at(t, e, &m)) != BPE_NU)
                break;
            e += m;
        }
        return e;
    }
    /* " ?[^\s\p{L}\p{N}]+[\r\n/]*" (cl100k: [\r\n]*) */
    e = run_of_punct(t, c == ' ' ? i + 1 : i);
    if (e > (c == ' ' ? i + 1 : i)) {
        while (e < t->len &&
               (t->s[e] == '\r' || t->s[e] == '\n' || (o200k && t->s[e] == '/')))
            e++;
        return e;
    }
    /* Whitespace: \s*[\r\n]+ | \s+$ | \s+(?!\S) | \s+ */
    Py_ssize_t w = i, after_newline = -1, last_start = i;
    int chars = 0;
    while (w < t->len) {
        int m;
        uint32_t d = cp_at(t, w, &m);
        if (!is_space(d))
            break;
        last_start = w;
        w += m;
        chars++;
        if (d == '\r' || d == '\n')
            after_newline = w;
    }
    if (after_newline > 0)
        return after_newline;
    if (w == t->len || chars < 2)
        return w;
    return last_start;
}

/* ---------------------------------------------------------------- pre-tokenizer: ASCII */

/* The ASCII path. Tool results are mostly ASCII, and for ASCII the patterns reduce to
 * byte classes: no code point to decode, no Unicode class to search, and the o200k
 * word alternatives (upper* lower+, then upper+ lower*) end at the same byte, since no
 * ASCII letter is both upper- and lower-case-set. Wherever a byte >= 0x80 could change
 * the outcome (a run that stops at one: it may be a letter, a digit, a mark, a space or
 * punctuation that continues it), the general path decides instead. */
enum {
    A_UP = 1,  /* A-Z */
    A_LO = 2,  /* a-z */
    A_NU = 4,  /* 0-9 */
    A_SP = 8,  /* \t \n \v \f \r and space: \s */
    A_NL = 16, /* \r \n */
    A_PU = 32, /* the rest of ASCII: [^\s\p{L}\p{N}] */
    A_HI = 64, /* a byte of a non-ASCII character: not decided here */
};
static unsigned char ascii_kind[256]; /* filled from the Unicode tables at import */

static void
init_ascii_kind(void)
{
    for (int b = 0; b < 256; b++) {
        int k = b >= 0x80               ? A_HI
                : is_space((uint32_t)b) ? A_SP
                : bpe_ascii_class[b] == BPE_UP ? A_UP
                : bpe_ascii_class[b] == BPE_LO ? A_LO
                : bpe_ascii_class[b] == BPE_NU ? A_NU
                                               : A_PU;
        if (b == '\r' || b == '\n')
            k |= A_NL;
        ascii_kind[b] = (unsigned char)k;
    }
}

/* The kind of byte j; none past the end (a run the end of the text stops is decided). */
#define KIND_AT(t, j) ((j) < (t)->len ? ascii_kind[(t)->s[j]] : 0)

/* The end of the piece at byte i < len, or -1 when the general path must decide. */
static inline Py_ssize_t
next_piece_ascii(const Text *t, Py_ssize_t i, int o200k)
{
    const unsigned char *s = t->s;
    Py_ssize_t len = t->len, e;
    int k = ascii_kind[s[i]];
    if (k & A_HI)
        return -1;
    if (!o200k && s[i] == '\'' && (e = contraction(t, i)) > 0)
        return i + e; /* cl100k tries the contractions first */
    /* Words. The optional prefix is any character but \r, \n, a letter or a digit. */
    if (!(k & (A_NU | A_NL))) {
        Py_ssize_t j = k & (A_UP | A_LO) ? i : i + 1;
        e = j;
        if (o200k) {
            while (KIND_AT(t, e) & A_UP)
                e++;
            while (KIND_AT(t, e) & A_LO)
                e++;
        }
        else
            while (KIND_AT(t, e) & (A_UP | A_LO))
                e++;
        if (KIND_AT(t, e) & A_HI)
            return -1;
        if (e > j)
            return o200k ? e + contraction(t, e) : e;
    }
    if (k & A_NU) { /* \p{N}{1,3} */
        for (e = i + 1; e < i + 3 && (KIND_AT(t, e) & A_NU); e++)
            ;
        return e < i + 3 && (KIND_AT(t, e) & A_HI) ? -1 : e;
    }
    /* " ?[^\s\p{L}\p{N}]+[\r\n/]*" (cl100k: [\r\n]*) */
    Py_ssize_t start = s[i] == ' ' ? i + 1 : i;
    for (e = start; KIND_AT(t, e) & A_PU; e++)
        ;
    if (KIND_AT(t, e) & A_HI)
        return -1;
    if (e > start) {
        while (e < len && (s[e] == '\r' || s[e] == '\n' || (o200k && s[e] == '/')))
            e++;
        return e;
    }
    /* Whitespace: \s*[\r\n]+ | \s+$ | \s+(?!\S) | \s+ */
    Py_ssize_t after_newline = -1;
    for (e = i; KIND_AT(t, e) & A_SP; e++)
        if (ascii_kind[s[e]] & A_NL)
            after_newline = e + 1;
    if (KIND_AT(t, e) & A_HI)
        return -1;
    if (after_newline > 0)
        return after_newline;
    if (e == len || e - i < 2)
        return e;
    return e - 1;
}

/* The end of the piece starting at byte i < len. */
static inline Py_ssize_t
next_piece(const Text *t, Py_ssize_t i, int o200k)
{
    Py_ssize_t e = next_piece_ascii(t, i, o200k);
    return e >= 0 ? e : next_piece_any(t, i, o200k);
}

/* ---------------------------------------------------------------- piece cache */

/* Text of one kind repeats its pieces: the keys of JSON records, GCF's headers and
 * separators, indentation. A small direct-mapped cache of piece -> token count stays in
 * L2 (128 KB), where the rank table (megabytes) costs a few cache misses a lookup and a
 * piece that is not one token costs a merge. It is per thread (texts of NOGIL_BYTES and
 * more are counted without the GIL, in several threads at once) and shared by the
 * encodings a thread counts with: each entry names its encoding by id, ids are never
 * reused, and a hit compares the bytes, never only a hash. Measured on bench/tokenizer.py's
 * short results: 4096 entries beat 1024 and 2048, and a two-way cache of the same size was
 * slower (the second compare and the move on every miss). */
#define CACHE_BITS 12
#define CACHE_KEY 26 /* longer pieces are not cached */

/* 32 bytes. Aligning entries to cache lines measured no faster, and some loaders do not
 * honour a thread-local's alignment beyond malloc's in a module loaded at run time. */
typedef struct {
    uint32_t id;   /* Enc.id of the encoding that counted it; 0: empty */
    uint8_t len;   /* bytes of the piece, 1..CACHE_KEY */
    uint8_t count; /* its tokens (at most its bytes) */
    unsigned char key[CACHE_KEY];
} CacheEntry;

static _Thread_local CacheEntry piece_cache[1 << CACHE_BITS];

/* p[0:n] == q[0:n] for 1 <= n <= CACHE_KEY with word loads (overlapping at the end)
 * where memcmp would be a call. */
static inline int
same_short(const unsigned char *p, const unsigned char *q, size_t n)
{
    uint64_t a, b;
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&a, p + i, 8);
            memcpy(&b, q + i, 8);
            if (a != b)
                return 0;
        }
        memcpy(&a, p + n - 8, 8);
        memcpy(&b, q + n - 8, 8);
        return a == b;
    }
    if (n >= 4) {
        uint32_t x, y, u, v;
        memcpy(&x, p, 4);
        memcpy(&y, p + n - 4, 4);
        memcpy(&u, q, 4);
        memcpy(&v, q + n - 4, 4);
        return x == u && y == v;
    }
    return p[0] == q[0] && p[n / 2] == q[n / 2] && p[n - 1] == q[n - 1];
}

/* The cache slot of a short piece: its length and bytes mixed (all of them up to 24
 * bytes long; of 25 and 26, bytes 16 and 17 are left out, and the compare decides). */
static inline uint32_t
cache_slot(const unsigned char *p, size_t n)
{
    uint64_t a, b;
    if (n >= 8) {
        memcpy(&a, p, 8);
        memcpy(&b, p + n - 8, 8);
        if (n > 16) {
            uint64_t m;
            memcpy(&m, p + 8, 8);
            a ^= m * 0x9E3779B97F4A7C15ULL;
        }
    }
    else if (n >= 4) {
        uint32_t x, y;
        memcpy(&x, p, 4);
        memcpy(&y, p + n - 4, 4);
        a = x;
        b = y;
    }
    else {
        a = (uint64_t)p[0] | (uint64_t)p[n / 2] << 8 | (uint64_t)p[n - 1] << 16;
        b = 0;
    }
    uint64_t h = (a ^ (uint64_t)n << 56) * 0xFF51AFD7ED558CCDULL + b * 0xC4CEB9FE1A85EC53ULL;
    return (uint32_t)(h >> (64 - CACHE_BITS));
}

/* ---------------------------------------------------------------- counting */

/* Tokens of t, stopping once past limit (limit < 0: no limit); -1: out of memory. */
static Py_ssize_t
count_text(const Enc *e, const Text *t, Py_ssize_t limit)
{
    CacheEntry *cache = e->id ? piece_cache : NULL;
    Py_ssize_t total = 0, i = 0;
    while (i < t->len) {
        Py_ssize_t end = next_piece(t, i, e->o200k);
        const unsigned char *p = t->s + i;
        size_t n = (size_t)(end - i);
        Py_ssize_t c;
        if (cache && n <= CACHE_KEY) {
            CacheEntry *ce = &cache[cache_slot(p, n)];
            if (ce->id == e->id && ce->len == n && same_short(ce->key, p, n))
                c = ce->count;
            else {
                c = bpe_count(e, p, (Py_ssize_t)n); /* short: merged in place, never -1 */
                ce->id = e->id;
                ce->len = (uint8_t)n;
                ce->count = (uint8_t)c;
                memcpy(ce->key, p, n);
            }
        }
        else
            c = bpe_count(e, p, (Py_ssize_t)n);
        if (c < 0)
            return -1;
        total += c;
        if (limit >= 0 && total > limit)
            return total;
        i = end;
    }
    return total;
}

/* ---------------------------------------------------------------- Python type */

static int
get_text(PyObject *arg, Text *t)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.80s", Py_TYPE(arg)->tp_name);
        return -1;
    }
    const char *s = PyUnicode_AsUTF8AndSize(arg, &t->len);
    if (!s)
        return -1; /* lone surrogates: UnicodeEncodeError, the caller sanitizes */
    t->s = (const unsigned char *)s;
    return 0;
}

/* Long texts are counted without the GIL: the tables are immutable once built. */
#define NOGIL_BYTES 4096

static Py_ssize_t
count_maybe_nogil(const Enc *e, const Text *t, Py_ssize_t limit)
{
    Py_ssize_t n;
    if (t->len >= NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS n = count_text(e, t, limit);
        Py_END_ALLOW_THREADS
    }
    else
        n = count_text(e, t, limit);
    if (n < 0)
        PyErr_NoMemory();
    return n;
}

static PyObject *
Enc_count(Enc *self, PyObject *arg)
{
    Text t;
    if (get_text(arg, &t) < 0)
        return NULL;
    Py_ssize_t n = count_maybe_nogil(self, &t, -1);
    return n < 0 ? NULL : PyLong_FromSsize_t(n);
}

static PyObject *
Enc_count_till_limit(Enc *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "count_till_limit(text, limit)");
        return NULL;
    }
    Text t;
    if (get_text(args[0], &t) < 0)
        return NULL;
    int overflow;
    long long asked = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (asked == -1 && PyErr_Occurred())
        return NULL;
    /* A limit past Py_ssize_t is no limit: no text has that many tokens. */
    Py_ssize_t limit = overflow > 0 || asked > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX
                       : overflow < 0                      ? -1
                                                           : (Py_ssize_t)asked;
    if (limit < 0)
        Py_RETURN_NONE;
    Py_ssize_t n = count_maybe_nogil(self, &t, limit);
    if (n < 0)
        return NULL;
    if (n > limit)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(n);
}

static PyObject *
Enc_split(Enc *self, PyObject *arg)
{
    Text t;
    if (get_text(arg, &t) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    Py_ssize_t i = 0;
    while (out && i < t.len) {
        Py_ssize_t end = next_piece(&t, i, self->o200k);
        PyObject *piece = PyUnicode_DecodeUTF8((const char *)t.s + i, end - i, "strict");
        if (!piece || PyList_Append(out, piece) < 0) {
            Py_XDECREF(piece);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(piece);
        i = end;
    }
    return out;
}

static PyObject *
Enc_nbytes(Enc *self, void *closure)
{
    (void)closure;
    if (!self->slots)
        return PyLong_FromLong(0);
    size_t total = (size_t)self->offs[self->n] + sizeof(uint32_t) * (size_t)(2 * self->n + 1) +
                   sizeof(uint32_t) * ((size_t)self->mask + 1);
    return PyLong_FromSize_t(total);
}

static PyObject *
Enc_size(Enc *self, void *closure)
{
    (void)closure;
    return PyLong_FromSsize_t(self->n);
}

static int
Enc_init(Enc *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"ranks", "pattern", NULL};
    Py_buffer buf;
    const char *pattern;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*s", kwlist, &buf, &pattern))
        return -1;
    if (self->slots) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_RuntimeError, "Encoding is already initialised");
        return -1;
    }
    int rc = -1;
    if (strcmp(pattern, "o200k_base") == 0)
        self->o200k = 1;
    else if (strcmp(pattern, "cl100k_base") == 0)
        self->o200k = 0;
    else {
        PyErr_Format(PyExc_ValueError, "unknown pre-tokenizer %s", pattern);
        goto done;
    }
    rc = load_ranks(self, (const unsigned char *)buf.buf, buf.len);
    if (rc == 0) {
        /* Ids (given out under the GIL) are never reused, so a cache entry can outlive
         * its encoding harmlessly; past 2**32 - 1 encodings in one process, the next ones
         * count uncached. */
        static uint32_t last_id;
        if (last_id < UINT32_MAX)
            self->id = ++last_id;
    }
done:
    PyBuffer_Release(&buf);
    return rc;
}

static void
Enc_dealloc(Enc *self)
{
    PyMem_Free(self->blob);
    PyMem_Free(self->offs);
    PyMem_Free(self->ranks);
    PyMem_Free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Enc_check(Enc *self)
{
    if (!self->slots) {
        PyErr_SetString(PyExc_RuntimeError, "Encoding is not initialised");
        return NULL;
    }
    return (PyObject *)self;
}

#define CHECKED(fn)                                                                        \
    static PyObject *fn##_checked(PyObject *self, PyObject *arg)                           \
    {                                                                                      \
        if (!Enc_check((Enc *)self))                                                       \
            return NULL;                                                                   \
        return fn((Enc *)self, arg);                                                       \
    }
CHECKED(Enc_count)
CHECKED(Enc_split)

static PyObject *
Enc_count_till_limit_checked(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!Enc_check((Enc *)self))
        return NULL;
    return Enc_count_till_limit((Enc *)self, args, nargs);
}

static PyMethodDef Enc_methods[] = {
    {"count", (PyCFunction)Enc_count_checked, METH_O, "Number of tokens of a str."},
    {"count_till_limit", (PyCFunction)(void (*)(void))Enc_count_till_limit_checked,
     METH_FASTCALL, "Tokens of a str if at most limit, else None."},
    {"split", (PyCFunction)Enc_split_checked, METH_O, "The pre-tokenizer's pieces of a str."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Enc_getset[] = {
    {"size", (getter)Enc_size, NULL, "Number of tokens in the table.", NULL},
    {"nbytes", (getter)Enc_nbytes, NULL, "Bytes the tables take.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject EncType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gcfkit._bpe.Encoding",
    .tp_basicsize = sizeof(Enc),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Encoding(ranks, pattern): exact token counts from a tiktoken rank file.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Enc_init,
    .tp_dealloc = (destructor)Enc_dealloc,
    .tp_methods = Enc_methods,
    .tp_getset = Enc_getset,
};

static struct PyModuleDef bpe_module = {
    PyModuleDef_HEAD_INIT, "gcfkit._bpe", "Exact o200k_base / cl100k_base token counts.", -1,
    NULL,
};

PyMODINIT_FUNC
PyInit__bpe(void)
{
    if (PyType_Ready(&EncType) < 0)
        return NULL;
    init_ascii_kind();
    PyObject *m = PyModule_Create(&bpe_module);
    if (!m)
        return NULL;
    Py_INCREF(&EncType);
    if (PyModule_AddObject(m, "Encoding", (PyObject *)&EncType) < 0) {
        Py_DECREF(&EncType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
