/* The extension clusterclip.schedule.ckernels: its functions, one per loop. */
#include "kernels.h"

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
