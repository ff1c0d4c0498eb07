/* A slab of version 4's planned order (slabs.py). */
#include "kernels.h"

/* At most 2**BUCKET_BITS buckets in a counting pass (sort_pairs). */
#define BUCKET_BITS 18

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

PyObject *py_slab(PyObject *self, PyObject *args) {
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
