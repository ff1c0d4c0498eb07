/* The pass lookups of version 4 (passes.py). */
#include "kernels.h"

/* Draws a pass lookup places together before reading their documents. */
#define BATCH 8192

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

PyObject *py_lookup(PyObject *self, PyObject *args) {
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
