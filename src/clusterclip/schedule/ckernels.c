/*
 * Compiled loops of the schedule's hot paths (clusterclip.schedule.kernels).
 *
 * Each function computes exactly what the numpy code beside it computes (the
 * same bytes); the numpy code stays the reference and the fallback where this
 * module was not built. Arrays arrive as buffers the Python wrappers checked
 * (dtype, C order, sizes); every loop runs without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define GAMMA 0x9E3779B97F4A7C15ULL
/* Draws a pass lookup places together before reading their documents. */
#define BATCH 8192

/* Loads a line ahead of its use (a hint; no effect on results). */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)0)
#endif
/* Positions of a descent whose candidates are found, then loaded, together (a speed
 * knob: of 1024 to 8192, 2048 was the fastest on a Zen 4). */
#define DESCENT_BATCH 2048
/* How many positions ahead a loop prefetches. */
#define AHEAD 16
/* At most 2**BUCKET_BITS buckets in a counting pass (sort_pairs). */
#define BUCKET_BITS 18

/* splitmix64's output function (clusterclip.schedule.feistel.mix64). */
static inline uint64_t mix64(uint64_t z) {
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Listed child number of candidate n of a stream with window key `key`, of m listed:
 * min(floor(u m), m - 1), u = (mix64(key + (n + 1) GAMMA) >> 11) / 2**53, in float64. */
static inline int64_t listed_index(uint64_t key, int64_t n, int64_t m) {
    uint64_t word = mix64(key + (uint64_t)(n + 1) * GAMMA);
    double u = (double)(word >> 11) * 0x1p-53;
    int64_t index = (int64_t)(u * (double)m);
    return index < m - 1 ? index : m - 1;
}

typedef struct {
    int64_t size, n_nodes, window;
    const int64_t *entries, *start, *listed, *children;
    const uint64_t *keys;
    int64_t *next_n, *dead, *state, *out_child, *out_draws;
    uint8_t *out_final, *alive;
    volatile int64_t loaded; /* what the loads ahead read, kept so that they stay */
} Descent;

/* Bit `at` of a level's alive bits: whether the child listed at `at` of its children
 * (treewindows.NodeLevel.alive) has draws left. */
static inline int is_alive(const uint8_t *alive, int64_t at) {
    return (alive[at >> 3] >> (at & 7)) & 1;
}

/* Whether node v's alive bits say what the counts say, and one of its listed children is
 * active (what a stream that rejects on and on is checked for). */
static int bits_hold(const Descent *d, int64_t v) {
    int any = 0;
    for (int64_t at = d->start[v]; at < d->start[v] + d->listed[v]; at++) {
        const int64_t child = d->children[at];
        const int active = d->state[2 * child] < d->state[2 * child + 1];
        if (active != is_alive(d->alive, at)) return 0;
        any |= active;
    }
    return any;
}

/* The listed position of node v's first candidate from number *n on whose bit is set;
 * *n becomes that candidate's number. -1 where the node's bits are out of step with
 * the counts or none of its children is active (checked once a stream has rejected
 * 64 times its listed children: by chance that happens with odds below e**-64). */
static inline int64_t next_alive(const Descent *d, int64_t v, uint64_t key, int64_t *n) {
    const int64_t first = d->start[v], m = d->listed[v];
    for (int64_t tries = 0;; (*n)++) {
        const int64_t at = first + listed_index(key, *n, m);
        if (is_alive(d->alive, at)) return at;
        if (++tries == 64 * m + 64 && !bits_hold(d, v)) return -1;
    }
}

/* The descent of treewindows.TreeWindows._descend, position by position: each takes
 * the next candidates of its node's stream until one's child is active.
 *
 * The alive bits (one per listed position, kept by this loop and by compact) answer
 * "is this candidate's child active?" from cache, so a batch of positions first finds
 * its candidates by the bits as they stand, then loads their children and rows (loads
 * independent of each other, which the CPU overlaps), then takes them in order. A bit
 * never comes back inside a descent, so the candidates the bits passed over are the
 * ones the loop rejects; a candidate whose child ran out earlier in the batch, and the
 * node's later positions, are redrawn in order by the bits as they stand then. */
static int descend(Descent *d) {
    const uint64_t after = (uint64_t)(d->window + 1) * GAMMA;
    int64_t *planned = malloc(sizeof(int64_t) * (size_t)(d->n_nodes + 4 * DESCENT_BATCH));
    if (planned == NULL) return -1;
    int64_t *from = planned + d->n_nodes, *numbers = from + DESCENT_BATCH;
    int64_t *at = numbers + DESCENT_BATCH, *kids = at + DESCENT_BATCH;
    for (int64_t v = 0; v < d->n_nodes; v++) planned[v] = d->next_n[v];
    for (int64_t first = 0; first < d->size; first += DESCENT_BATCH) {
        const int64_t last = first + DESCENT_BATCH < d->size ? first + DESCENT_BATCH : d->size;
        for (int64_t i = first; i < last; i++) {
            if (i + AHEAD < last) { /* the node rows of a later position */
                const int64_t ahead = d->entries[i + AHEAD];
                PREFETCH(planned + ahead);
                PREFETCH(d->keys + ahead);
                PREFETCH(d->start + ahead);
                PREFETCH(d->listed + ahead);
            }
            const int64_t v = d->entries[i];
            int64_t n = planned[v];
            from[i - first] = n;
            at[i - first] = next_alive(d, v, mix64(d->keys[v] + after), &n);
            if (at[i - first] < 0) {
                free(planned);
                return -2;
            }
            numbers[i - first] = n;
            planned[v] = n + 1;
        }
        for (int64_t j = 0; j < last - first; j++) kids[j] = d->children[at[j]];
        int64_t loaded = 0; /* their rows, loaded now (a loop of prefetches was slower) */
        for (int64_t j = 0; j < last - first; j++) loaded ^= d->state[2 * kids[j]];
        d->loaded = loaded;
        for (int64_t i = first; i < last; i++) {
            const int64_t v = d->entries[i], j = i - first;
            int64_t n = d->next_n[v], where = at[j], child = kids[j];
            if (from[j] == n && d->state[2 * child] < d->state[2 * child + 1]) {
                n = numbers[j];
            } else { /* an earlier position changed what this one finds */
                where = next_alive(d, v, mix64(d->keys[v] + after), &n);
                if (where < 0) {
                    free(planned);
                    return -2;
                }
                child = d->children[where];
            }
            d->next_n[v] = n + 1;
            const int64_t count = d->state[2 * child], cap = d->state[2 * child + 1];
            d->state[2 * child] = count + 1;
            d->out_child[i] = child;
            d->out_draws[i] = count;
            d->out_final[i] = count + 1 == cap;
            if (count + 1 == cap) {
                d->dead[v] += 1;
                d->alive[where >> 3] &= (uint8_t) ~(1u << (where & 7));
            }
        }
        for (int64_t i = first; i < last; i++) planned[d->entries[i]] = d->next_n[d->entries[i]];
    }
    free(planned);
    return 0;
}

static PyObject *py_descend(PyObject *self, PyObject *args) {
    /* entries, keys, start, listed, children; next_n, dead, state; window; the outputs */
    Py_buffer b[12];
    long long window;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*w*w*w*Lw*w*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4],
                          &b[5], &b[6], &b[7], &window, &b[8], &b[9], &b[10], &b[11]))
        return NULL;
    Descent d = {
        .size = b[0].len / 8, .n_nodes = b[5].len / 8, .window = (int64_t)window,
        .entries = b[0].buf, .keys = b[1].buf, .start = b[2].buf, .listed = b[3].buf,
        .children = b[4].buf, .next_n = b[5].buf, .dead = b[6].buf, .state = b[7].buf,
        .out_child = b[8].buf, .out_draws = b[9].buf, .out_final = b[10].buf,
        .alive = b[11].buf,
    };
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = descend(&d);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 12; i++) PyBuffer_Release(&b[i]);
    if (failed == -1) return PyErr_NoMemory();
    if (failed)
        return PyErr_Format(PyExc_RuntimeError,
                            "kernels: a node's alive bits are out of step with its children's "
                            "counts, or it has no active child (a bug: please report it)");
    Py_RETURN_NONE;
}


/* ---- Relisting a level's nodes (treewindows.NodeLevel.compact) ---- */

/* Every node more than a quarter of whose listed children are exhausted keeps the
 * active ones (count below cap in `state`, the level below's rows), in order, at the
 * front of its list; its listed count becomes theirs and its dead count 0. A child
 * outside `state` stops it: returns that node, else -1. */
static int64_t compact(int64_t n_nodes, const int64_t *start, int64_t *listed, int64_t *dead,
                       int64_t *children, int64_t n_children, const int64_t *state,
                       int64_t n_rows, uint8_t *alive) {
    for (int64_t v = 0; v < n_nodes; v++) {
        if (4 * dead[v] <= listed[v]) continue;
        int64_t *kids = children + start[v];
        if (start[v] < 0 || start[v] + listed[v] > n_children) return v;
        for (int64_t j = 0; j < listed[v] && j < AHEAD; j++) {
            if (kids[j] >= 0 && kids[j] < n_rows) PREFETCH(state + 2 * kids[j]);
        }
        int64_t kept = 0;
        for (int64_t j = 0; j < listed[v]; j++) {
            if (j + AHEAD < listed[v] && kids[j + AHEAD] >= 0 && kids[j + AHEAD] < n_rows)
                PREFETCH(state + 2 * kids[j + AHEAD]);
            const int64_t child = kids[j];
            if (child < 0 || child >= n_rows) return v;
            if (state[2 * child] < state[2 * child + 1]) kids[kept++] = child;
        }
        if (alive != NULL) /* every child listed now is active */
            for (int64_t at = start[v]; at < start[v] + kept; at++)
                alive[at >> 3] |= (uint8_t)(1u << (at & 7));
        listed[v] = kept;
        dead[v] = 0;
    }
    return -1;
}

static PyObject *py_compact(PyObject *self, PyObject *args) {
    /* start, state; listed, dead, children, alive (empty: no bits kept) */
    Py_buffer b[6];
    if (!PyArg_ParseTuple(args, "y*y*w*w*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]))
        return NULL;
    int64_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = compact(b[0].len / 8, b[0].buf, b[2].buf, b[3].buf, b[4].buf, b[4].len / 8, b[1].buf,
                  b[1].len / 16, b[5].len ? b[5].buf : NULL);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 6; i++) PyBuffer_Release(&b[i]);
    if (bad >= 0)
        return PyErr_Format(PyExc_ValueError,
                            "kernels: node %lld lists a child outside the level below",
                            (long long)bad);
    Py_RETURN_NONE;
}

/* ---- Pass lookups (passes.PassTable.lookup) ---- */

#define SMALL_PASS 32    /* passes.SMALL_PASS */
#define TABLE_ROWS 4096  /* passes.TABLE_ROWS */
#define RADIX_FROM 1024  /* passes at least this long are sorted by radix passes (speed only) */

static inline int64_t read_id(const void *ids, int wide, int64_t i) {
    return wide ? ((const int64_t *)ids)[i] : (int64_t)((const int32_t *)ids)[i];
}

static inline void write_id(void *ids, int wide, int64_t i, int64_t value) {
    if (wide)
        ((int64_t *)ids)[i] = value;
    else
        ((int32_t *)ids)[i] = (int32_t)value;
}

/* Sorts packed (key << 32 | position) values ascending: a bucket per value by the
 * key's top bits (the keys are uniform), then insertion inside each bucket. `spare`
 * holds n values and n + 1 counts. */
static void sort_small(uint64_t *a, int64_t n, uint64_t *spare) {
    int64_t *count = (int64_t *)(spare + n);
    for (int64_t b = 0; b <= n; b++) count[b] = 0;
    for (int64_t i = 0; i < n; i++) count[((a[i] >> 32) * (uint64_t)n) >> 32]++;
    int64_t total = 0;
    for (int64_t b = 0; b <= n; b++) {
        int64_t c = count[b];
        count[b] = total;
        total += c;
    }
    for (int64_t i = 0; i < n; i++) spare[count[((a[i] >> 32) * (uint64_t)n) >> 32]++] = a[i];
    for (int64_t i = 0; i < n; i++) {  /* each bucket's values follow the buckets before */
        uint64_t v = spare[i];
        int64_t j = i - 1;
        for (; j >= 0 && a[j] > v; j--) a[j + 1] = a[j];
        a[j + 1] = v;
    }
}

/* Stable LSD radix sort of packed values by their top 32 bits (11-bit digits). */
static int sort_radix(uint64_t *a, int64_t n) {
    uint64_t *b = malloc(sizeof(uint64_t) * (size_t)n);
    int64_t *count = malloc(sizeof(int64_t) * 2048);
    if (b == NULL || count == NULL) {
        free(b);
        free(count);
        return -1;
    }
    for (int shift = 32; shift < 64; shift += 11) {
        for (int k = 0; k < 2048; k++) count[k] = 0;
        for (int64_t i = 0; i < n; i++) count[(a[i] >> shift) & 2047]++;
        int64_t total = 0;
        for (int k = 0; k < 2048; k++) {
            int64_t c = count[k];
            count[k] = total;
            total += c;
        }
        for (int64_t i = 0; i < n; i++) b[count[(a[i] >> shift) & 2047]++] = a[i];
        uint64_t *t = a;
        a = b;
        b = t;
    }
    /* three passes: the sorted values are in the buffer that was b; copy back */
    for (int64_t i = 0; i < n; i++) b[i] = a[i];
    free(a);
    free(count);
    return 0;
}

/* q = x / d and x - q d for 0 <= x < 2**53 and 1 <= d < 2**31: a float64 quotient,
 * corrected by one where rounding moved it (several times faster than an integer
 * division, the same result). */
static inline int64_t divide(int64_t x, int64_t d, int64_t *remainder) {
    int64_t q = (int64_t)((double)x / (double)d), r = x - q * d;
    if (r < 0) {
        q--;
        r += d;
    } else if (r >= d) {
        q++;
        r -= d;
    }
    *remainder = r;
    return q;
}


typedef struct {
    int64_t size, first, n_groups, cache_size, used, n_members, table_size;
    const int64_t *group, *draw;
    int64_t *records, *cached_at, *out;
    const void *members;
    void *cache;
    const uint8_t *table;
    int wide;
    int64_t bad; /* the position of a draw out of range, when one is */
} Lookup;

/* Writes pass p of the group at `record` into the cache at `at`: its members in the
 * order of the sort keys (mix64(P + (i + 1) GAMMA) >> 32, i), P = the pass key.
 * `scratch` holds 3 RADIX_FROM + 1 values: enough for a shorter pass; a longer one
 * gets buffers of its own, for its own length. */
static int make_pass(Lookup *L, const int64_t *record, uint64_t pass_key, int64_t at, uint64_t *scratch) {
    const int64_t offset = record[0], size = record[1];
    uint64_t *keys = scratch;
    if (size >= RADIX_FROM) {
        keys = malloc(sizeof(uint64_t) * (size_t)size);
        if (keys == NULL) return -1;
    }
    for (int64_t i = 0; i < size; i++) {
        uint64_t word = mix64(pass_key + (uint64_t)(i + 1) * GAMMA);
        keys[i] = (word >> 32) << 32 | (uint64_t)i;
    }
    if (size >= RADIX_FROM) {
        if (sort_radix(keys, size)) {
            free(keys);
            return -1;
        }
    } else {
        sort_small(keys, size, scratch + RADIX_FROM);
    }
    for (int64_t k = 0; k < size; k++)
        write_id(L->cache, L->wide, at + k, read_id(L->members, L->wide, offset + (int64_t)(keys[k] & 0xFFFFFFFFULL)));
    if (keys != scratch) free(keys);
    return 0;
}

enum { CACHED, SMALL, MISSED };

/* Documents of draws `draw` of groups `group` from position `first` on. Returns the
 * position where the cache ran out of room (size when done), -1 out of memory, or
 * -2 for a draw of a group not in the table or a negative one (at L->bad). In batches: where each draw's document is, for all of a batch (independent loads
 * the CPU overlaps), then the documents; the draws of passes not cached are done in
 * order after them, each making its pass once. */
static int64_t lookup(Lookup *L, uint64_t *keys, int64_t *where, int64_t *base, uint8_t *kind) {
    for (int64_t first = L->first; first < L->size; first += BATCH) {
        const int64_t last = first + BATCH < L->size ? first + BATCH : L->size;
        for (int64_t i = first; i < last; i++) {
            if (i + AHEAD < L->size) {
                const int64_t ahead = L->group[i + AHEAD];
                if (ahead >= 0 && ahead < L->n_groups) PREFETCH(L->records + 4 * ahead);
            }
            const int64_t g = L->group[i], j = L->draw[i], k = i - first;
            if (g < 0 || g >= L->n_groups || j < 0 || j >= ((int64_t)1 << 53)) {
                L->bad = i;
                return -2;
            }
            const int64_t *record = L->records + 4 * g;
            int64_t cursor;
            const int64_t size = record[1], pass = divide(j, size, &cursor);
            if (size <= SMALL_PASS) {
                const uint64_t pass_key = mix64((uint64_t)record[2] + (uint64_t)(pass + 1) * GAMMA);
                const int64_t row = (int64_t)(pass_key & (TABLE_ROWS - 1));
                int64_t turn;
                divide((int64_t)(pass_key >> 32), size, &turn);
                int64_t turned = cursor + turn;
                if (turned >= size) turned -= size;
                kind[k] = SMALL;
                where[k] = record[3] + row * size + turned;
                base[k] = record[0];
            } else if (record[3] == pass) {
                kind[k] = CACHED;
                where[k] = L->cached_at[g] + cursor;
            } else {
                kind[k] = MISSED;
            }
        }
        for (int64_t k = 0; k < last - first; k++) {
            if (kind[k] == CACHED)
                L->out[first + k] = read_id(L->cache, L->wide, where[k]);
            else if (kind[k] == SMALL)
                where[k] = L->table[where[k]];
        }
        for (int64_t k = 0; k < last - first; k++)
            if (kind[k] == SMALL) L->out[first + k] = read_id(L->members, L->wide, base[k] + where[k]);
        for (int64_t i = first; i < last; i++) {
            if (kind[i - first] != MISSED) continue;
            const int64_t g = L->group[i], j = L->draw[i];
            int64_t *record = L->records + 4 * g;
            int64_t cursor;
            const int64_t size = record[1], pass = divide(j, size, &cursor);
            if (record[3] != pass) {  /* not made by an earlier draw of this batch */
                if (L->used + size > L->cache_size) return i;
                const int64_t at = L->used;
                const uint64_t pass_key = mix64((uint64_t)record[2] + (uint64_t)(pass + 1) * GAMMA);
                if (make_pass(L, record, pass_key, at, keys)) return -1;
                L->used += size;
                if (pass < record[3]) {  /* an earlier pass than the cached one: not kept */
                    L->out[i] = read_id(L->cache, L->wide, at + cursor);
                    continue;
                }
                record[3] = pass;
                L->cached_at[g] = at;
            }
            L->out[i] = read_id(L->cache, L->wide, L->cached_at[g] + cursor);
        }
    }
    return L->size;
}

static PyObject *py_lookup(PyObject *self, PyObject *args) {
    /* group, draw, members, table; records, cached_at, cache, out; first, used, wide */
    Py_buffer b[8];
    long long first, used;
    int wide;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*w*w*w*LLp", &b[0], &b[1], &b[2], &b[3], &b[4],
                          &b[5], &b[6], &b[7], &first, &used, &wide))
        return NULL;
    const int64_t width = wide ? 8 : 4;
    Lookup L = {
        .size = b[0].len / 8, .first = (int64_t)first, .n_groups = b[5].len / 8,
        .cache_size = b[6].len / width, .used = (int64_t)used, .n_members = b[2].len / width,
        .table_size = b[3].len, .group = b[0].buf, .draw = b[1].buf, .members = b[2].buf,
        .table = b[3].buf, .records = b[4].buf, .cached_at = b[5].buf, .cache = b[6].buf,
        .out = b[7].buf, .wide = wide,
    };
    int64_t stopped = -1;
    /* a short pass's keys, the small sort's spare values and counts; a batch's places, kinds */
    const size_t values = 3 * RADIX_FROM + 1 + 2 * BATCH;
    uint64_t *scratch = malloc(sizeof(uint64_t) * values + BATCH);
    if (scratch != NULL) {
        int64_t *where = (int64_t *)(scratch + 3 * RADIX_FROM + 1), *base = where + BATCH;
        Py_BEGIN_ALLOW_THREADS
        stopped = lookup(&L, scratch, where, base, (uint8_t *)(base + BATCH));
        Py_END_ALLOW_THREADS
        free(scratch);
    }
    for (int i = 0; i < 8; i++) PyBuffer_Release(&b[i]);
    if (stopped == -2)
        return PyErr_Format(PyExc_ValueError,
                            "kernels: draw %lld of group %lld (position %lld) is not in the table",
                            (long long)L.draw[L.bad], (long long)L.group[L.bad], (long long)L.bad);
    if (stopped < 0) return PyErr_NoMemory();
    return Py_BuildValue("LL", (long long)stopped, (long long)L.used);
}

/* ---- A window's candidates (treewindows.TreeWindows._top) ---- */

/* Keeps the candidates whose entry has not taken its cap, counting the earlier
 * candidates: the kept ones in order, their draw numbers and last-draw flags.
 * Returns how many were kept. */
static int64_t take(int64_t size, const int64_t *candidates, int64_t entries, int64_t *state,
                    int64_t *out_entry, int64_t *out_draws, uint8_t *out_final) {
    int64_t kept = 0;
    for (int64_t i = 0; i < size; i++) {
        if (i + AHEAD < size) {
            const int64_t ahead = candidates[i + AHEAD];
            if (ahead >= 0 && ahead < entries) PREFETCH(state + 2 * ahead);
        }
        const int64_t c = candidates[i];
        if (c < 0 || c >= entries) return -1 - i;
        const int64_t count = state[2 * c], cap = state[2 * c + 1];
        const int64_t open = count < cap; /* kept: no branch (late windows reject at random) */
        state[2 * c] = count + open;
        out_entry[kept] = c; /* written always, kept only when open: kept <= i < size */
        out_draws[kept] = count;
        out_final[kept] = count + 1 == cap;
        kept += open;
    }
    return kept;
}

static PyObject *py_take(PyObject *self, PyObject *args) {
    Py_buffer b[5]; /* candidates; state, out_entry, out_draws, out_final */
    if (!PyArg_ParseTuple(args, "y*w*w*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4])) return NULL;
    int64_t kept;
    Py_BEGIN_ALLOW_THREADS
    kept = take(b[0].len / 8, b[0].buf, b[1].len / 16, b[1].buf, b[2].buf, b[3].buf, b[4].buf);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 5; i++) PyBuffer_Release(&b[i]);
    if (kept < 0)
        return PyErr_Format(PyExc_ValueError, "kernels: candidate %lld is not an entry of the state",
                            (long long)(-1 - kept));
    return PyLong_FromLongLong((long long)kept);
}

/* ---- A slab of the planned order (slabs.SlabOrder.slab_with_lasts) ---- */

/* Sorts `n` (key, payload) pairs by key, stably: one counting pass on the top bits of
 * the keys (a bucket holds a few pairs on average), then insertion inside each bucket;
 * or, where the keys bunch up (a bucket would hold over 256), LSD radix passes of 11
 * bits. `key`, `payload` hold the pairs and `key2`, `payload2` as much room again;
 * the sorted pairs end in key2, payload2. Returns 0, or -1 out of memory. */
static int sort_pairs(int64_t n, uint64_t *key, uint64_t *payload, uint64_t *key2,
                      uint64_t *payload2) {
    uint64_t top = 0;
    for (int64_t i = 0; i < n; i++) top = key[i] > top ? key[i] : top;
    int bits = 0;
    while (bits < 64 && (top >> bits) != 0) bits++;
    int bucket_bits = 0;
    while (bucket_bits < BUCKET_BITS && ((int64_t)1 << (bucket_bits + 2)) <= n) bucket_bits++;
    const int shift = bits > bucket_bits ? bits - bucket_bits : 0;
    const int64_t buckets = (int64_t)1 << bucket_bits;
    int64_t *start = calloc((size_t)(buckets > 2048 ? buckets : 2048) + 1, sizeof(int64_t));
    if (start == NULL) return -1;
    for (int64_t i = 0; i < n; i++) start[(key[i] >> shift) + 1]++;
    int64_t crowded = 0; /* the most pairs in one bucket: insertion is quadratic in it */
    for (int64_t b = 1; b <= buckets; b++) crowded = start[b] > crowded ? start[b] : crowded;
    if (crowded > 256) {
        int64_t *count = start;
        int odd = 0;
        for (int pass = 0; pass == 0 || (pass < 64 && (top >> pass) != 0); pass += 11, odd ^= 1) {
            for (int k = 0; k < 2048; k++) count[k] = 0;
            for (int64_t i = 0; i < n; i++) count[(key[i] >> pass) & 2047]++;
            int64_t total = 0;
            for (int k = 0; k < 2048; k++) {
                const int64_t c = count[k];
                count[k] = total;
                total += c;
            }
            for (int64_t i = 0; i < n; i++) {
                const int64_t to = count[(key[i] >> pass) & 2047]++;
                key2[to] = key[i];
                payload2[to] = payload[i];
            }
            uint64_t *swap = key;
            key = key2;
            key2 = swap;
            swap = payload;
            payload = payload2;
            payload2 = swap;
        }
        if (!odd) { /* an even number of passes: the pairs are back in the first buffers */
            for (int64_t i = 0; i < n; i++) {
                key2[i] = key[i];
                payload2[i] = payload[i];
            }
        }
        free(start);
        return 0;
    }
    for (int64_t b = 0; b < buckets; b++) start[b + 1] += start[b];
    for (int64_t i = 0; i < n; i++) {
        const int64_t to = start[key[i] >> shift]++;
        key2[to] = key[i];
        payload2[to] = payload[i];
    }
    for (int64_t i = 1; i < n; i++) { /* in place: each pair moves back past larger keys */
        const uint64_t k = key2[i], p = payload2[i];
        int64_t j = i - 1;
        for (; j >= 0 && key2[j] > k; j--) {
            key2[j + 1] = key2[j];
            payload2[j + 1] = payload2[j];
        }
        key2[j + 1] = k;
        payload2[j + 1] = p;
    }
    free(start);
    return 0;
}

/* The draws of a slab, cluster after cluster (cluster c: draws low[c] .. low[c] +
 * span[c] - 1 of n_k[c]), ordered by (time, cluster-major position) where time =
 * (int64)((j + phi) / n_k * 2**40) - offset: the groups, draw numbers and whether
 * each is its cluster's last draw, in order. Each draw is sorted with what it puts out
 * (group, draw number and last flag packed in 64 bits where they fit, else its
 * cluster-major position), so the output is read in order, not gathered; the output
 * arrays are the sort's second buffers. Returns 0, or -1 out of memory. */
static int slab(int64_t m, const int64_t *span, const int64_t *low, const double *phi,
                const int64_t *n_k, const int64_t *groups, int64_t offset, int64_t n,
                int64_t *out_groups, int64_t *out_draws, uint8_t *out_last) {
    uint64_t every_group = 0, every_draw = 0;
    for (int64_t c = 0; c < m; c++) {
        every_group |= (uint64_t)groups[c];
        every_draw |= (uint64_t)(low[c] + span[c]);
    }
    int group_bits = 0, draw_bits = 0;
    while (group_bits < 64 && (every_group >> group_bits) != 0) group_bits++;
    while (draw_bits < 64 && (every_draw >> draw_bits) != 0) draw_bits++;
    const int packed = group_bits + draw_bits + 1 <= 64; /* (group, draw, last) in a word */
    uint64_t *key = malloc(sizeof(uint64_t) * (size_t)(2 * n + 1)), *payload = key + n;
    int64_t *first = packed ? NULL : malloc(sizeof(int64_t) * (size_t)(m + 1));
    uint32_t *owner = packed ? NULL : malloc(sizeof(uint32_t) * (size_t)(n + 1));
    if (key == NULL || (!packed && (first == NULL || owner == NULL))) {
        free(key);
        free(first);
        free(owner);
        return -1;
    }
    int64_t p = 0;
    for (int64_t c = 0; c < m; c++) {
        const uint64_t group = (uint64_t)groups[c] << (draw_bits + 1);
        for (int64_t t = 0; t < span[c]; t++, p++) {
            const int64_t draw = low[c] + t;
            double tau = ((double)draw + phi[c]) / (double)n_k[c];
            tau *= 1099511627776.0; /* 2**40 */
            key[p] = (uint64_t)((int64_t)tau - offset);
            if (packed)
                payload[p] = group | (uint64_t)draw << 1 | (uint64_t)(draw + 1 == n_k[c]);
            else {
                payload[p] = (uint64_t)p;
                owner[p] = (uint32_t)c;
            }
        }
    }
    uint64_t *sorted = (uint64_t *)out_draws; /* the payloads, in order */
    const int failed = sort_pairs(n, key, payload, (uint64_t *)out_groups, sorted);
    free(key);
    if (failed) {
        free(first);
        free(owner);
        return -1;
    }
    if (packed) {
        const uint64_t draw_mask = ((uint64_t)1 << draw_bits) - 1;
        for (int64_t i = 0; i < n; i++) {
            const uint64_t word = sorted[i];
            out_groups[i] = (int64_t)(word >> (draw_bits + 1));
            out_draws[i] = (int64_t)((word >> 1) & draw_mask);
            out_last[i] = (uint8_t)(word & 1);
        }
        return 0;
    }
    first[0] = 0;
    for (int64_t c = 0; c < m; c++) first[c + 1] = first[c] + span[c];
    for (int64_t i = 0; i < n; i++) {
        const uint64_t q = sorted[i];
        const uint32_t c = owner[q];
        const int64_t draw = low[c] + ((int64_t)q - first[c]);
        out_groups[i] = groups[c];
        out_draws[i] = draw;
        out_last[i] = draw + 1 == n_k[c];
    }
    free(first);
    free(owner);
    return 0;
}

static PyObject *py_slab(PyObject *self, PyObject *args) {
    /* span, low, phi, n_k, groups; out_groups, out_draws, out_last; offset */
    Py_buffer b[8];
    long long offset;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*w*w*w*L", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
                          &b[6], &b[7], &offset))
        return NULL;
    int failed;
    const int64_t m = b[0].len / 8, n = b[5].len / 8;
    Py_BEGIN_ALLOW_THREADS
    failed = slab(m, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf, (int64_t)offset, n,
                  b[5].buf, b[6].buf, b[7].buf);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 8; i++) PyBuffer_Release(&b[i]);
    if (failed) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* ---- Weighted candidates (windows._inverse_cdf) ---- */

/* For each u: the first index whose cumulative weight exceeds it, i.e.
 * np.searchsorted(cdf, u, side="right"). `guide[b]` is that index for b / L (the
 * start of u's slice): the answer is there or after, unless float rounding put u in
 * the slice above, when it is searched from the beginning. A few steps forward,
 * then a binary search. Any guide gives the same answers, only slower where it is
 * wrong: an entry past the cdf (or negative) starts a search of the whole cdf. */
static inline int64_t slice_of(double x, int64_t size) {
    int64_t slot = (int64_t)(x * (double)size);
    if (slot > size - 1) slot = size - 1;
    return slot < 0 ? 0 : slot;
}

/* guide[b] of an int32 guide (`wide` 0) or an int64 one (1). */
static inline int64_t guide_at(const void *guide, int wide, int64_t b) {
    return wide ? ((const int64_t *)guide)[b] : (int64_t)((const int32_t *)guide)[b];
}

static inline const void *guide_line(const void *guide, int wide, int64_t b) {
    return (const char *)guide + (wide ? 8 : 4) * b;
}

/* Inlined twice below, with `wide` a constant: one loop per width. */
static inline void inverse_cdf(int64_t n, const double *u, int64_t size, const double *cdf,
                               const void *guide, int wide, int64_t *out) {
    for (int64_t i = 0; i < n; i++) {
        /* The guide of a later u, and the cdf where a nearer one starts, loaded ahead. */
        if (i + 2 * AHEAD < n) PREFETCH(guide_line(guide, wide, slice_of(u[i + 2 * AHEAD], size)));
        if (i + AHEAD < n) {
            const int64_t ahead = guide_at(guide, wide, slice_of(u[i + AHEAD], size));
            if (ahead > 0 && ahead <= size) PREFETCH(cdf + ahead - 1);
            if (ahead >= 0 && ahead + 3 < size) PREFETCH(cdf + ahead + 3);
        }
        const double x = u[i];
        int64_t low = guide_at(guide, wide, slice_of(x, size)), high = size;
        if (low < 0 || low > size) {
            low = 0; /* not a guide: searched outright */
        } else if (low > 0 && cdf[low - 1] > x) {
            high = low;
            low = 0;
        } else if (low + 4 <= size) {
            /* The cdf does not decrease: the values <= x among the next four are the
             * steps to the answer, when fewer than four (counted, not branched on:
             * about half the draws take one step, half none). */
            const int64_t steps = (int64_t)(cdf[low] <= x) + (int64_t)(cdf[low + 1] <= x) +
                                  (int64_t)(cdf[low + 2] <= x) + (int64_t)(cdf[low + 3] <= x);
            if (steps < 4) {
                out[i] = low + steps;
                continue;
            }
            low += 4;
        } else { /* the last three values at most */
            while (low < size && cdf[low] <= x) low++;
            out[i] = low;
            continue;
        }
        while (low < high) { /* the first index in [low, high) with cdf > x */
            const int64_t middle = low + (high - low) / 2;
            if (cdf[middle] <= x)
                low = middle + 1;
            else
                high = middle;
        }
        out[i] = low;
    }
}

/* guide[b]: the first index whose cumulative weight exceeds b / L (L = size), i.e.
 * np.searchsorted(cdf, arange(L) / L, side="right"), by one merge of the two
 * ascending sequences; int32 entries (`wide` 0, size below 2**31) or int64 (1). */
static void cdf_guide(int64_t size, const double *cdf, void *guide, int wide) {
    int64_t j = 0;
    for (int64_t b = 0; b < size; b++) {
        const double x = (double)b / (double)size;
        while (j < size && cdf[j] <= x) j++;
        if (wide)
            ((int64_t *)guide)[b] = j;
        else
            ((int32_t *)guide)[b] = (int32_t)j;
    }
}

static PyObject *py_cdf_guide(PyObject *self, PyObject *args) {
    Py_buffer b[2]; /* cdf; guide */
    if (!PyArg_ParseTuple(args, "y*w*", &b[0], &b[1])) return NULL;
    const int64_t size = b[0].len / 8;
    const int wide = b[1].len == 8 * size;
    Py_BEGIN_ALLOW_THREADS
    cdf_guide(size, b[0].buf, b[1].buf, wide);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 2; i++) PyBuffer_Release(&b[i]);
    Py_RETURN_NONE;
}

static PyObject *py_inverse_cdf(PyObject *self, PyObject *args) {
    Py_buffer b[4]; /* u, cdf, guide (int32 or int64: its length says); out */
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &b[0], &b[1], &b[2], &b[3])) return NULL;
    const int64_t n = b[0].len / 8, size = b[1].len / 8;
    if ((b[2].len != 4 * size && b[2].len != 8 * size) || b[3].len < 8 * n) {
        for (int i = 0; i < 4; i++) PyBuffer_Release(&b[i]);
        return PyErr_Format(PyExc_ValueError, "kernels: inverse_cdf needs a guide entry per cdf value");
    }
    Py_BEGIN_ALLOW_THREADS
    if (b[2].len == 8 * size)
        inverse_cdf(n, b[0].buf, size, b[1].buf, b[2].buf, 1, b[3].buf);
    else
        inverse_cdf(n, b[0].buf, size, b[1].buf, b[2].buf, 0, b[3].buf);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 4; i++) PyBuffer_Release(&b[i]);
    Py_RETURN_NONE;
}

/* ---- Documents grouped by label (grouping._place_by_chunks) ---- */

/* Documents first .. first + n - 1 (labels[i], int32 or int64) to
 * members[following[label + 1]++] (int32 or int64), in document order; negative
 * labels are not members. Returns -1, or the first i whose label is past the table
 * or whose place is past the members (nothing is written there or after it). */
static int64_t place(const void *labels, int wide_labels, int64_t n, int64_t first,
                     int64_t *following, int64_t size, void *members, int wide_members,
                     int64_t n_members) {
    const int32_t *narrow = labels;
    const int64_t *wide = labels;
    for (int64_t i = 0; i < n; i++) {
        if (i + AHEAD < n) {
            const int64_t ahead = wide_labels ? wide[i + AHEAD] : narrow[i + AHEAD];
            if (ahead >= 0 && ahead + 1 < size) PREFETCH(following + ahead + 1);
        }
        const int64_t label = wide_labels ? wide[i] : narrow[i];
        if (label < 0) continue;
        if (label + 1 >= size) return i;
        const int64_t to = following[label + 1];
        if (to < 0 || to >= n_members) return i;
        following[label + 1] = to + 1;
        if (wide_members)
            ((int64_t *)members)[to] = first + i;
        else
            ((int32_t *)members)[to] = (int32_t)(first + i);
    }
    return -1;
}

static PyObject *py_place(PyObject *self, PyObject *args) {
    Py_buffer b[3]; /* labels; following, members */
    long long first;
    int wide_labels, wide_members;
    if (!PyArg_ParseTuple(args, "y*w*w*Lpp", &b[0], &b[1], &b[2], &first, &wide_labels,
                          &wide_members))
        return NULL;
    const int64_t n = b[0].len / (wide_labels ? 8 : 4);
    const int64_t n_members = b[2].len / (wide_members ? 8 : 4);
    int64_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = place(b[0].buf, wide_labels, n, (int64_t)first, b[1].buf, b[1].len / 8, b[2].buf,
                wide_members, n_members);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 3; i++) PyBuffer_Release(&b[i]);
    if (bad >= 0)
        return PyErr_Format(PyExc_ValueError,
                            "kernels: document %lld has a label past the counts or its cluster "
                            "is already full",
                            (long long)(first + bad));
    Py_RETURN_NONE;
}

/* Documents per label + 1 (grouping._grouped_by_counts): counts[label + 1] += 1 for
 * every label, counts[0] for the negative ones. Returns -1, or the first document
 * whose label is past the counts (nothing is counted from it on). */
static int64_t count_labels(const void *labels, int wide_labels, int64_t n, int64_t *counts,
                            int64_t size) {
    const int32_t *narrow = labels;
    const int64_t *wide = labels;
    for (int64_t i = 0; i < n; i++) {
        const int64_t label = wide_labels ? wide[i] : narrow[i];
        const int64_t at = label < 0 ? 0 : label + 1;
        if (at >= size) return i;
        counts[at] += 1;
    }
    return -1;
}

static PyObject *py_count(PyObject *self, PyObject *args) {
    Py_buffer b[2]; /* labels; counts */
    int wide_labels;
    if (!PyArg_ParseTuple(args, "y*w*p", &b[0], &b[1], &wide_labels)) return NULL;
    const int64_t n = b[0].len / (wide_labels ? 8 : 4);
    int64_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = count_labels(b[0].buf, wide_labels, n, b[1].buf, b[1].len / 8);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 2; i++) PyBuffer_Release(&b[i]);
    if (bad >= 0)
        return PyErr_Format(PyExc_ValueError,
                            "kernels: the label at position %lld is past the counts",
                            (long long)bad);
    Py_RETURN_NONE;
}

/* ---- One level of a tree over dense labels (hierarchy._dense_tree) ---- */

/* For every row i with labels[i] >= 0: its ancestor at this level, column[i * stride]
 * (>= 0), goes to table[labels[i]] (-1 there: not seen yet), and must equal what an
 * earlier row of the same leaf put there. Returns -1, or the first row that breaks
 * this (a negative ancestor, a leaf past the table, or two ancestors of one leaf). */
static int64_t tree_column(int64_t n, const int64_t *labels, const int64_t *column,
                           int64_t stride, int64_t *table, int64_t size) {
    for (int64_t i = 0; i < n; i++) {
        if (i + AHEAD < n && labels[i + AHEAD] >= 0 && labels[i + AHEAD] < size)
            PREFETCH(table + labels[i + AHEAD]);
        const int64_t leaf = labels[i];
        if (leaf < 0) continue;
        const int64_t ancestor = column[i * stride];
        if (ancestor < 0 || leaf >= size) return i;
        if (table[leaf] < 0)
            table[leaf] = ancestor;
        else if (table[leaf] != ancestor)
            return i;
    }
    return -1;
}

static PyObject *py_tree_column(PyObject *self, PyObject *args) {
    Py_buffer b[3]; /* labels, levels (N, L - 1); table */
    long long level;
    if (!PyArg_ParseTuple(args, "y*y*w*L", &b[0], &b[1], &b[2], &level)) return NULL;
    const int64_t n = b[0].len / 8, stride = n ? b[1].len / 8 / n : 1;
    int64_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = tree_column(n, b[0].buf, (const int64_t *)b[1].buf + level, stride, b[2].buf,
                      b[2].len / 8);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 3; i++) PyBuffer_Release(&b[i]);
    return PyLong_FromLongLong((long long)bad);
}

/* ---- Exact sums (planned.exact_sum) ---- */

/* Partials of finite float64 values never number more than the exponent range
 * allows (about 2098 / 53); more means something else went wrong. */
#define MOST_PARTIALS 128

/* The sum of n finite values correctly rounded, by math.fsum's algorithm
 * (Shewchuk's non-overlapping partials, then the same half-even correction):
 * the very same float. Returns 0 and sets *sum, or -1 where fsum must answer
 * (a value or a partial not finite: fsum raises or returns inf or nan). */
static int exact_sum(const double *values, int64_t n, double *sum) {
    double p[MOST_PARTIALS];
    int64_t m = 0;
    for (int64_t k = 0; k < n; k++) {
        double x = values[k];
        if (!isfinite(x)) return -1;
        int64_t i = 0;
        for (int64_t j = 0; j < m; j++) {
            double y = p[j];
            if (fabs(x) < fabs(y)) {
                const double t = x;
                x = y;
                y = t;
            }
            const double hi = x + y, lo = y - (hi - x);
            if (lo != 0.0) p[i++] = lo;
            x = hi;
        }
        m = i;
        if (x != 0.0) {
            if (!isfinite(x) || m == MOST_PARTIALS) return -1;
            p[m++] = x;
        }
    }
    double hi = 0.0, lo = 0.0;
    if (m > 0) {
        hi = p[--m];
        while (m > 0) { /* from the top, until the sum is inexact */
            const double x = hi, y = p[--m];
            hi = x + y;
            lo = y - (hi - x);
            if (lo != 0.0) break;
        }
        if (m > 0 && ((lo < 0.0 && p[m - 1] < 0.0) || (lo > 0.0 && p[m - 1] > 0.0))) {
            const double y = lo * 2.0, x = hi + y; /* half-even across partials */
            if (y == x - hi) hi = x;
        }
    }
    *sum = hi;
    return 0;
}

static PyObject *py_exact_sum(PyObject *self, PyObject *args) {
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "y*", &b)) return NULL;
    double sum = 0.0;
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = exact_sum(b.buf, b.len / 8, &sum);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    if (failed) Py_RETURN_NONE;
    return PyFloat_FromDouble(sum);
}

static PyMethodDef methods[] = {
    {"exact_sum", py_exact_sum, METH_VARARGS, "math.fsum of float64 values (see kernels.exact_sum)."},
    {"cdf_guide", py_cdf_guide, METH_VARARGS, "Where weighted searches start (see kernels.cdf_guide)."},
    {"compact", py_compact, METH_VARARGS, "Relists a level's nodes (see kernels.compact)."},
    {"descend", py_descend, METH_VARARGS, "The tree descent of one level (see kernels.descend)."},
    {"inverse_cdf", py_inverse_cdf, METH_VARARGS, "Weighted candidates (see kernels.inverse_cdf)."},
    {"slab", py_slab, METH_VARARGS, "A slab of the planned order (see kernels.slab)."},
    {"take", py_take, METH_VARARGS, "The kept candidates of a window (see kernels.take)."},
    {"tree_column", py_tree_column, METH_VARARGS, "One level of a tree (see kernels.tree_column)."},
    {"lookup", py_lookup, METH_VARARGS, "Documents of draws of a pass table (see kernels.lookup)."},
    {"place", py_place, METH_VARARGS, "Documents to their clusters' places (see kernels.place)."},
    {"count", py_count, METH_VARARGS, "Documents per label (see kernels.count)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ckernels", "Compiled loops of the schedule (see kernels.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_ckernels(void) { return PyModule_Create(&module); }
