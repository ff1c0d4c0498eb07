/*
 * Compiled loops of the schedule's hot paths (clusterclip.schedule.kernels): what
 * the files of this folder share. One extension, clusterclip.schedule.ckernels, is
 * built from all of them (setup.py); module.c lists its functions.
 *
 * Each function computes exactly what the numpy code beside it computes (the
 * same bytes); the numpy code stays the reference and the fallback where the
 * extension was not built. Arrays arrive as buffers the Python wrappers checked
 * (dtype, C order, sizes); every loop runs without the GIL.
 */
#ifndef CLUSTERCLIP_KERNELS_H
#define CLUSTERCLIP_KERNELS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define GAMMA 0x9E3779B97F4A7C15ULL

/* Loads a line ahead of its use (a hint; no effect on results). */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)0)
#endif
/* How many positions ahead a loop prefetches. */
#define AHEAD 16

/* splitmix64's output function (clusterclip.schedule.feistel.mix64). */
static inline uint64_t mix64(uint64_t z) {
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* The extension's functions (module.c), one per file's section. */
PyObject *py_descend(PyObject *self, PyObject *args);
PyObject *py_compact(PyObject *self, PyObject *args);
PyObject *py_take(PyObject *self, PyObject *args);
PyObject *py_lookup(PyObject *self, PyObject *args);
PyObject *py_slab(PyObject *self, PyObject *args);
PyObject *py_cdf_guide(PyObject *self, PyObject *args);
PyObject *py_inverse_cdf(PyObject *self, PyObject *args);
PyObject *py_place(PyObject *self, PyObject *args);
PyObject *py_count(PyObject *self, PyObject *args);
PyObject *py_tree_column(PyObject *self, PyObject *args);
PyObject *py_exact_sum(PyObject *self, PyObject *args);

#endif
