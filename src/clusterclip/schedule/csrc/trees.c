/* The windows of version 4: a window's kept candidates, the tree descent and the
 * relisting of a level's nodes (treewindows.py). */
#include "kernels.h"

/* Positions of a descent whose candidates are found, then loaded, together (a speed
 * knob: of 1024 to 8192, 2048 was the fastest on a Zen 4). */
#define DESCENT_BATCH 2048

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

PyObject *py_descend(PyObject *self, PyObject *args) {
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

PyObject *py_compact(PyObject *self, PyObject *args) {
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

PyObject *py_take(PyObject *self, PyObject *args) {
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
