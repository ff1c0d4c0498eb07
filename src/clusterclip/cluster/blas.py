"""Put faiss's bundled OpenBLAS on the right kernels before faiss is imported.

faiss-cpu wheels (1.15 here) bundle OpenBLAS 0.3.15, which does not recognise
recent Intel CPUs (Sapphire Rapids and later) and falls back to its generic
``Prescott`` kernels: the matrix products behind every k-means E-step then run
3-5x slower. OpenBLAS reads ``OPENBLAS_CORETYPE`` once, when the library is
loaded, so the fix must happen before the first ``import faiss``:
:func:`import_faiss` sets ``OPENBLAS_CORETYPE=SkylakeX`` on CPUs with AVX-512
(``Haswell`` on AVX2 CPUs) when the variable is unset, imports faiss, and
:func:`faiss_blas_info` asks threadpoolctl which kernels faiss's OpenBLAS really
uses, so the manifest can record it.

numpy is imported before this module runs, so its own OpenBLAS (which detects
these CPUs correctly) is not affected; torch uses oneDNN/MKL, not OpenBLAS.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from clusterclip.errors import require_extra
from clusterclip.threads import cpu_flags

__all__ = ["cpu_model", "SLOW_CORETYPES", "faiss_blas_info", "import_faiss", "recommended_coretype"]

#: OpenBLAS kernel families that mean "CPU not recognised" on an x86-64 machine.
SLOW_CORETYPES = frozenset({"prescott", "katmai", "coppermine", "northwood", "banias", "core2"})

_state: dict[str, Any] = {"set_by_clusterclip": False}


def cpu_model() -> str:
    """The CPU as a line of text: model name, family/model and its bf16 support,
    e.g. ``'AMD EPYC (family 25 model 1; no native bf16)'``."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    break  # the first processor is enough
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        import platform

        return platform.processor() or platform.machine() or "unknown CPU"
    flags = set(fields.get("flags", "").split())
    bf16 = [name for name in ("amx_bf16", "avx512_bf16") if name in flags]
    support = "native bf16: " + ", ".join(bf16) if bf16 else "no native bf16"
    return (
        f"{fields.get('model name', 'unknown CPU')} (family {fields.get('cpu family', '?')} "
        f"model {fields.get('model', '?')}; {support})"
    )


def recommended_coretype(flags: frozenset[str] | None = None) -> str | None:
    """The OpenBLAS core type to force for these CPU flags, or ``None``.

    >>> recommended_coretype(frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq"}))
    'SkylakeX'
    >>> recommended_coretype(frozenset({"avx2", "fma"}))
    'Haswell'
    >>> recommended_coretype(frozenset()) is None
    True
    """
    flags = cpu_flags() if flags is None else flags
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return None


def import_faiss() -> Any:
    """Import faiss with ``OPENBLAS_CORETYPE`` set for this CPU (see module docstring).

    The variable is only set when the user has not set it and faiss is not yet
    loaded; :func:`faiss_blas_info` reports what happened.

    >>> faiss = import_faiss()  # doctest: +SKIP
    """
    if "faiss" not in sys.modules and "OPENBLAS_CORETYPE" not in os.environ:
        coretype = recommended_coretype()
        if coretype is not None:
            os.environ["OPENBLAS_CORETYPE"] = coretype
            _state["set_by_clusterclip"] = True
    return require_extra("faiss", "cluster")


def faiss_blas_info() -> dict[str, Any]:
    """Which OpenBLAS kernels faiss runs on, as threadpoolctl reports them.

    Returns
    -------
    dict
        ``architecture`` (e.g. ``"SkylakeX"``; ``None`` if unknown), ``version``,
        ``coretype_env`` (the variable's value), ``set_by_clusterclip`` and
        ``slow`` (True when faiss fell back to generic kernels).

    >>> faiss_blas_info()["architecture"]  # doctest: +SKIP
    'SkylakeX'
    """
    import_faiss()
    info: dict[str, Any] = {
        "architecture": None,
        "version": None,
        "coretype_env": os.environ.get("OPENBLAS_CORETYPE"),
        "set_by_clusterclip": bool(_state["set_by_clusterclip"]),
        "slow": False,
    }
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return info
    for entry in threadpool_info():
        if entry.get("internal_api") == "openblas" and "faiss" in str(entry.get("filepath", "")):
            info["architecture"] = entry.get("architecture")
            info["version"] = entry.get("version")
            break
    architecture = str(info["architecture"] or "").lower()
    info["slow"] = architecture in SLOW_CORETYPES
    return info
