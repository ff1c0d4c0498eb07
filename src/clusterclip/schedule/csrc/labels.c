/* Documents by label: their count and places, and a dense tree's levels (grouping.py,
 * hierarchy.py). */
#include "kernels.h"

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

PyObject *py_place(PyObject *self, PyObject *args) {
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

PyObject *py_count(PyObject *self, PyObject *args) {
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

PyObject *py_tree_column(PyObject *self, PyObject *args) {
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
