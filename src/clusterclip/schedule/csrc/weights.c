/* Weighted candidates and exact sums (windows.py, planned.py). */
#include "kernels.h"

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

PyObject *py_cdf_guide(PyObject *self, PyObject *args) {
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

PyObject *py_inverse_cdf(PyObject *self, PyObject *args) {
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

PyObject *py_exact_sum(PyObject *self, PyObject *args) {
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
