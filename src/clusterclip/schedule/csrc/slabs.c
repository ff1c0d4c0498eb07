/* A slab of version 4's planned order (slabs.py). */
#include "kernels.h"

/* At most 2**BUCKET_BITS buckets in a counting pass (sort_pairs). */
#define BUCKET_BITS 18

/* ---- A slab of the planned order (slabs.SlabOrder.slab_with_lasts) ---- */

/* Sorts `n` (key, payload) pairs by key, stably: one counting pass on the top bits of
 * the keys (a bucket holds a few pairs on average), then insertion inside each bucket;
 * or, where the keys bunch up (a bucket would hold over 256), LSD radix passes of 11
 * bits. A pair is two adjacent words (key, payload), so each move writes one place, not
 * two. `pairs` holds them and `pairs2` as much room again; the sorted pairs end in
 * pairs2. `top`: the largest key. Returns 0, or -1 out of memory. */
static int sort_pairs(int64_t n, uint64_t *pairs, uint64_t *pairs2, uint64_t top) {
    int bits = 0;
    while (bits < 64 && (top >> bits) != 0) bits++;
    int bucket_bits = 0;
    while (bucket_bits < BUCKET_BITS && ((int64_t)1 << (bucket_bits + 2)) <= n) bucket_bits++;
    const int shift = bits > bucket_bits ? bits - bucket_bits : 0;
    const int64_t buckets = (int64_t)1 << bucket_bits;
    int64_t *start = calloc((size_t)(buckets > 2048 ? buckets : 2048) + 1, sizeof(int64_t));
    if (start == NULL) return -1;
    for (int64_t i = 0; i < n; i++) start[(pairs[2 * i] >> shift) + 1]++;
    int64_t crowded = 0; /* the most pairs in one bucket: insertion is quadratic in it */
    for (int64_t b = 1; b <= buckets; b++) crowded = start[b] > crowded ? start[b] : crowded;
    if (crowded > 256) {
        int64_t *count = start;
        uint64_t *from = pairs, *to = pairs2;
        for (int pass = 0; pass == 0 || (pass < 64 && (top >> pass) != 0); pass += 11) {
            for (int k = 0; k < 2048; k++) count[k] = 0;
            for (int64_t i = 0; i < n; i++) count[(from[2 * i] >> pass) & 2047]++;
            int64_t total = 0;
            for (int k = 0; k < 2048; k++) {
                const int64_t c = count[k];
                count[k] = total;
                total += c;
            }
            for (int64_t i = 0; i < n; i++) {
                const int64_t at = count[(from[2 * i] >> pass) & 2047]++;
                to[2 * at] = from[2 * i];
                to[2 * at + 1] = from[2 * i + 1];
            }
            uint64_t *swap = from;
            from = to;
            to = swap;
        }
        if (from != pairs2) /* an even number of passes: the pairs are back in `pairs` */
            memcpy(pairs2, from, sizeof(uint64_t) * 2 * (size_t)n);
        free(start);
        return 0;
    }
    for (int64_t b = 0; b < buckets; b++) start[b + 1] += start[b];
    for (int64_t i = 0; i < n; i++) {
        const int64_t at = start[pairs[2 * i] >> shift]++;
        pairs2[2 * at] = pairs[2 * i];
        pairs2[2 * at + 1] = pairs[2 * i + 1];
    }
    for (int64_t i = 1; i < n; i++) { /* in place: each pair moves back past larger keys */
        const uint64_t k = pairs2[2 * i], p = pairs2[2 * i + 1];
        int64_t j = i - 1;
        for (; j >= 0 && pairs2[2 * j] > k; j--) {
            pairs2[2 * j + 2] = pairs2[2 * j];
            pairs2[2 * j + 3] = pairs2[2 * j + 1];
        }
        pairs2[2 * j + 2] = k;
        pairs2[2 * j + 3] = p;
    }
    free(start);
    return 0;
}

/* The draws of a slab, cluster after cluster (cluster c: draws low[c] .. low[c] +
 * span[c] - 1 of n_k[c]), ordered by (time, cluster-major position) where time =
 * (int64)((j + phi) / n_k * 2**40) - offset: the groups, draw numbers and whether
 * each is its cluster's last draw, in order. Each draw is sorted with what it puts out
 * (group, draw number and last flag packed in 64 bits where they fit, else its
 * cluster-major position), so the output is read in order, not gathered. The sorted
 * pairs land in `out` (2 n words: the groups' n, then the draw numbers'), which is
 * then unpacked in place. Returns 0, or -1 out of memory. */
static int slab(int64_t m, const int64_t *span, const int64_t *low, const double *phi,
                const int64_t *n_k, const int64_t *groups, int64_t offset, int64_t n,
                int64_t *out, uint8_t *out_last) {
    uint64_t every_group = 0, every_draw = 0;
    for (int64_t c = 0; c < m; c++) {
        every_group |= (uint64_t)groups[c];
        every_draw |= (uint64_t)(low[c] + span[c]);
    }
    int group_bits = 0, draw_bits = 0;
    while (group_bits < 64 && (every_group >> group_bits) != 0) group_bits++;
    while (draw_bits < 64 && (every_draw >> draw_bits) != 0) draw_bits++;
    const int packed = group_bits + draw_bits + 1 <= 64; /* (group, draw, last) in a word */
    uint64_t *pairs = malloc(sizeof(uint64_t) * (size_t)(2 * n + 1));
    int64_t *first = packed ? NULL : malloc(sizeof(int64_t) * (size_t)(m + 1));
    uint32_t *owner = packed ? NULL : malloc(sizeof(uint32_t) * (size_t)(n + 1));
    if (pairs == NULL || (!packed && (first == NULL || owner == NULL))) {
        free(pairs);
        free(first);
        free(owner);
        return -1;
    }
    int64_t p = 0;
    uint64_t top = 0;
    for (int64_t c = 0; c < m; c++) {
        const uint64_t group = (uint64_t)groups[c] << (draw_bits + 1);
        for (int64_t t = 0; t < span[c]; t++, p++) {
            const int64_t draw = low[c] + t;
            double tau = ((double)draw + phi[c]) / (double)n_k[c];
            tau *= 1099511627776.0; /* 2**40 */
            const uint64_t key = (uint64_t)((int64_t)tau - offset);
            pairs[2 * p] = key;
            top = key > top ? key : top;
            if (packed)
                pairs[2 * p + 1] = group | (uint64_t)draw << 1 | (uint64_t)(draw + 1 == n_k[c]);
            else {
                pairs[2 * p + 1] = (uint64_t)p;
                owner[p] = (uint32_t)c;
            }
        }
    }
    uint64_t *sorted = (uint64_t *)out; /* 2 n words: the sorted pairs */
    if (sort_pairs(n, pairs, sorted, top)) {
        free(pairs);
        free(first);
        free(owner);
        return -1;
    }
    /* Unpacked in place: the draw numbers go to `pairs` first (free now), the groups to
     * out[i], which pair i no longer needs once read (pair i is at 2 i and 2 i + 1). */
    int64_t *draws = (int64_t *)pairs;
    if (packed) {
        const uint64_t draw_mask = ((uint64_t)1 << draw_bits) - 1;
        for (int64_t i = 0; i < n; i++) {
            const uint64_t word = sorted[2 * i + 1];
            out[i] = (int64_t)(word >> (draw_bits + 1));
            draws[i] = (int64_t)((word >> 1) & draw_mask);
            out_last[i] = (uint8_t)(word & 1);
        }
    } else {
        first[0] = 0;
        for (int64_t c = 0; c < m; c++) first[c + 1] = first[c] + span[c];
        for (int64_t i = 0; i < n; i++) {
            const uint64_t q = sorted[2 * i + 1];
            const uint32_t c = owner[q];
            const int64_t draw = low[c] + ((int64_t)q - first[c]);
            out[i] = groups[c];
            draws[i] = draw;
            out_last[i] = draw + 1 == n_k[c];
        }
    }
    memcpy(out + n, draws, sizeof(int64_t) * (size_t)n);
    free(pairs);
    free(first);
    free(owner);
    return 0;
}

PyObject *py_slab(PyObject *self, PyObject *args) {
    /* span, low, phi, n_k, groups; out_groups, out_draws, out_last; offset */
    Py_buffer b[8];
    long long offset;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*w*w*w*L", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
                          &b[6], &b[7], &offset))
        return NULL;
    int failed;
    const int64_t m = b[0].len / 8, n = b[5].len / 8;
    if (b[6].len != b[5].len || (char *)b[6].buf != (char *)b[5].buf + b[5].len) {
        for (int i = 0; i < 8; i++) PyBuffer_Release(&b[i]);
        PyErr_SetString(PyExc_ValueError, "slab: the draw numbers must follow the groups");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    failed = slab(m, b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf, (int64_t)offset, n,
                  b[5].buf, b[7].buf);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 8; i++) PyBuffer_Release(&b[i]);
    if (failed) return PyErr_NoMemory();
    Py_RETURN_NONE;
}
