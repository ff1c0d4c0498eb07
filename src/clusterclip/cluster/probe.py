"""``backend="fastest"`` by measurement: time the E-step backends once per machine and shape.

``auto`` (the default) is not measured: it is a fixed rule of the CPU's flags and
the installed libraries (:func:`clusterclip.cluster.backends.auto_rule`), so that
the same command gives the same labels on every run, whatever the machine's
load and whether or not this module's cache exists. ``fastest`` trades that for
speed where the rule's pick is not the fastest (e.g. on a busy machine):

The first time :class:`~clusterclip.cluster.KMeans` resolves ``fastest`` for a
given CPU, library versions and shape, it times every backend this machine
can run (:func:`available_candidates`: ``numpy``; ``faiss`` and ``torch-fp32``
when installed; ``torch-bf16`` when the CPU has bf16 instructions) on the
actual data: one warm-up and :data:`PROBE_STEPS` timed Lloyd passes
(``assign_and_sum``) of a slice of the fit sample (evenly spaced rows, at most
:data:`PROBE_ROWS`, fewer for large ``K * d``) against ``K`` centroids taken
from it. A few seconds; the winner is kept in ``$CLUSTERCLIP_CACHE/kmeans-backend.json``
(default ``~/.cache/clusterclip``), keyed by the CPU model and count, the
versions of clusterclip, numpy, torch and faiss, ``d`` and power-of-two
buckets of ``K`` and the probe's row count; later fits of that kind read it.

The pick is the fastest backend, except that the inexact ``torch-bf16`` must be
at least :data:`BF16_MARGIN` faster than the fastest exact one to win (its
labels differ from fp32 at near-ties). A candidate that fails (not installed,
crashes) is skipped and its error recorded; an unreadable or unwritable cache
only costs a probe. A backend other than ``auto`` or ``fastest`` is used as given, unprobed.

The choice and why (``"CPU rule"`` for ``auto``; ``"probe"`` with the timings,
``"cached"``; ``"forced by user"``) is :class:`BackendChoice`; the cluster stage
puts it in its summary and manifest. Timings vary from run to run: two probes of
one machine may pick differently when two backends are close, which changes
labels at near-ties; to rerun a ``fastest`` result exactly, pass the backend it
recorded (``summary["backend"]``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.cluster.backends import (
    auto_rule,
    cuda_device,
    get_backend,
    native_bf16,
    resolve_backend,
)
from clusterclip.threads import available_cpus

__all__ = [
    "BackendChoice",
    "available_candidates",
    "cache_file",
    "cache_key",
    "choose_backend",
    "time_backends",
]

#: Name of the probe's cache file in the cache directory.
CACHE_FILE = "kmeans-backend.json"
#: Format version of the cache file (another version is ignored and rewritten).
CACHE_VERSION = 1
#: At most this many sample rows are timed.
PROBE_ROWS = 20_000
#: ... and fewer when ``2 * rows * K * d`` would pass this many flops per pass.
PROBE_FLOPS = 2e10
#: Timed passes per candidate (after one warm-up); the fastest counts.
PROBE_STEPS = 2
#: A candidate whose warm-up takes this many times the best time so far is not timed further.
HOPELESS = 3.0
#: torch-bf16 wins only when this much faster than the fastest exact backend.
BF16_MARGIN = 0.10

_EXACT = ("faiss", "torch-fp32", "numpy")


@dataclass(frozen=True)
class BackendChoice:
    """Which E-step backend a fit uses, and why.

    Attributes
    ----------
    backend : str
        The concrete backend (``faiss``, ``torch-bf16``, ``torch-fp32`` or ``numpy``).
    requested : str
        What the user asked for (``auto``, ``fastest`` or a backend name).
    reason : str
        ``"CPU rule"`` (``auto``: :func:`~clusterclip.cluster.backends.auto_rule`),
        ``"probe"`` (``fastest``, measured now), ``"cached"`` (``fastest``, measured
        earlier on this machine and shape) or ``"forced by user"``.
    seconds : dict
        Seconds of one Lloyd pass on the probe rows per candidate (probe or cached).
    skipped : dict
        Candidates that failed, with their error.
    probe_seconds : float or None
        Wall time of the probe (``None`` when there was none now).
    probe_rows : int or None
        Rows timed.
    cache : str or None
        The cache file read or written.
    cache_error : str or None
        Why the cache could not be read or written (the probe ran instead).
    rule : str or None
        With ``"CPU rule"``: the facts that chose the backend.
    """

    backend: str
    requested: str
    reason: str
    seconds: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    probe_seconds: float | None = None
    probe_rows: int | None = None
    cache: str | None = None
    cache_error: str | None = None
    rule: str | None = None

    def as_record(self) -> dict[str, Any]:
        """A JSON-ready dict (the summary's ``backend_choice``)."""
        return asdict(self)

    def describe(self) -> str:
        """One line: the backend, why, and the timings.

        >>> BackendChoice("faiss", "auto", "probe", {"faiss": 0.1, "numpy": 0.25}, {},
        ...               1.5, 20000).describe()
        'faiss (probe 1.5 s on 20,000 rows: faiss 0.100 s, numpy 0.250 s per pass)'
        >>> BackendChoice("numpy", "numpy", "forced by user").describe()
        'numpy (forced by user)'
        >>> BackendChoice("faiss", "auto", "CPU rule", rule="no native bf16, faiss installed").describe()
        'faiss (CPU rule: no native bf16, faiss installed)'
        """
        if self.reason == "CPU rule":
            return f"{self.backend} (CPU rule: {self.rule})"
        if self.reason == "forced by user":
            given = "" if self.requested == self.backend else f": {self.requested}"
            return f"{self.backend} (forced by user{given})"
        timings = ", ".join(
            f"{name} {s:.3f} s" for name, s in sorted(self.seconds.items(), key=lambda x: x[1])
        )
        failed = "".join(f"; {name} failed" for name in self.skipped)
        where = f" on {self.probe_rows:,} rows" if self.probe_rows else ""
        if self.reason == "probe":
            head = f"probe {self.probe_seconds:.1f} s{where}"
        else:
            head = f"cached probe{where}"
        return f"{self.backend} ({head}: {timings} per pass{failed})"


def available_candidates() -> list[str]:
    """The backends worth timing on this machine, cheapest to import first.

    ``numpy`` always; ``faiss`` and ``torch-fp32`` when installed; ``torch-bf16``
    when torch is installed and the CPU has AMX-BF16 or AVX512-BF16; ``torch-cuda``
    when torch sees a CUDA device.
    """
    import importlib.util

    names = ["numpy"]
    if importlib.util.find_spec("faiss") is not None:
        names.append("faiss")
    if importlib.util.find_spec("torch") is not None:
        names.append("torch-fp32")
        if native_bf16():
            names.append("torch-bf16")
        if cuda_device() is not None:
            names.append("torch-cuda")
    return names


def cache_file(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The probe's cache file: ``cache_dir`` or :func:`clusterclip.cache.cache_root`."""
    from clusterclip.cache import cache_root

    return Path(cache_dir if cache_dir is not None else cache_root()) / CACHE_FILE


def _bucket(value: int) -> int:
    """The power of two at or above ``value``."""
    return 1 << max(0, int(value) - 1).bit_length()


def probe_rows(n_rows: int, dim: int, n_clusters: int) -> int:
    """Rows the probe times: ``min(n, 20,000)``, fewer for large ``K * d`` (at least ``K``).

    >>> probe_rows(200_000, 384, 1024), probe_rows(500, 384, 1024), probe_rows(10**6, 768, 8192)
    (20000, 500, 8192)
    """
    by_flops = int(PROBE_FLOPS / (2.0 * max(dim, 1) * max(n_clusters, 1)))
    return min(n_rows, max(min(PROBE_ROWS, by_flops), n_clusters))


def cache_key(n_rows: int, dim: int, n_clusters: int) -> dict[str, Any]:
    """What a cached pick depends on: the CPU, the libraries and the shape bucket."""
    from clusterclip.cluster.blas import cpu_model
    from clusterclip.io import versions

    found = versions("torch", "faiss-cpu")
    found.pop("python", None)
    return {
        "cpu": cpu_model(),
        "cpus": available_cpus(),
        "versions": found,
        "dim": int(dim),
        "clusters_bucket": _bucket(n_clusters),
        "rows_bucket": _bucket(probe_rows(n_rows, dim, n_clusters)),
    }


def _read_cache(path: Path) -> tuple[dict[str, Any], str | None]:
    """The cache's entries, or empty with the reason it could not be used."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as error:
        return {}, f"unreadable {path}: {type(error).__name__}: {error}"
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return {}, f"ignored {path}: not a version-{CACHE_VERSION} probe cache"
    entries = data.get("entries")
    if not isinstance(entries, dict):
        return {}, f"ignored {path}: no entries"
    return entries, None


def _write_cache(path: Path, key: str, entry: dict[str, Any]) -> str | None:
    """Add ``entry`` under ``key`` (atomically); the reason on failure, else ``None``."""
    from clusterclip.io import atomic_path

    entries, _ = _read_cache(path)  # keep what other shapes (or processes) stored
    entries[key] = entry
    try:
        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"version": CACHE_VERSION, "entries": entries}, handle, indent=1)
    except OSError as error:
        return f"not written to {path}: {type(error).__name__}: {error}"
    return None


def time_backends(
    rows: np.ndarray,
    n_clusters: int,
    names: Sequence[str],
    *,
    steps: int = PROBE_STEPS,
) -> tuple[dict[str, float], dict[str, str]]:
    """Seconds of one Lloyd pass per backend on ``rows`` (unit float32, (n, d)), and failures.

    ``K`` centroids are evenly spaced rows of ``rows``. Each backend runs one
    warm-up pass (imports, allocation) and ``steps`` timed ones; the fastest
    counts. A backend whose warm-up is :data:`HOPELESS` times slower than the
    best so far keeps its warm-up time. An exception skips the backend.
    """
    centroids = np.ascontiguousarray(
        rows[np.linspace(0, len(rows) - 1, n_clusters).astype(np.int64)]
    )
    seconds: dict[str, float] = {}
    failed: dict[str, str] = {}
    for name in names:
        try:
            engine = get_backend(name)
            prepared = engine.prepare(rows)
            start = time.perf_counter()
            engine.assign_and_sum(prepared, rows, centroids)
            best = time.perf_counter() - start
            fastest = min(seconds.values(), default=np.inf)
            for _ in range(steps if best < HOPELESS * fastest else 0):
                start = time.perf_counter()
                engine.assign_and_sum(prepared, rows, centroids)
                best = min(best, time.perf_counter() - start)
        except Exception as error:  # noqa: BLE001 - any failure only removes a candidate
            failed[name] = f"{type(error).__name__}: {error}"
            continue
        seconds[name] = round(best, 6)
    return seconds, failed


def pick(seconds: dict[str, float]) -> str:
    """The fastest backend; ``torch-bf16`` only if :data:`BF16_MARGIN` faster than every exact one.

    >>> pick({"numpy": 0.3, "faiss": 0.2, "torch-bf16": 0.19})
    'faiss'
    >>> pick({"numpy": 0.3, "faiss": 0.2, "torch-bf16": 0.1})
    'torch-bf16'
    """
    exact = {name: s for name, s in seconds.items() if name in _EXACT}
    best = min(exact or seconds, key=lambda name: (exact or seconds)[name])
    bf16 = seconds.get("torch-bf16")
    if bf16 is not None and (not exact or bf16 < (1.0 - BF16_MARGIN) * exact[best]):
        return "torch-bf16"
    return best


def choose_backend(
    requested: str,
    sample: np.ndarray,
    n_clusters: int,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    candidates: Sequence[str] | None = None,
) -> BackendChoice:
    """The backend a fit of ``sample`` (unit float32 rows, (n, d)) into ``n_clusters`` uses.

    Parameters
    ----------
    requested : str
        ``"auto"`` (the CPU rule: no timing, no cache), ``"fastest"`` (probe or
        cache) or a backend name (used as given).
    sample : numpy.ndarray, shape (n, d)
        The fit sample; the probe times a slice of it (:func:`probe_rows`).
    n_clusters : int
    cache_dir : path, optional
        Where the cache file lives (default ``$CLUSTERCLIP_CACHE`` or ``~/.cache/clusterclip``).
    candidates : sequence of str, optional
        Backends to consider (default :func:`available_candidates`).

    Returns
    -------
    BackendChoice

    ``auto`` and a named backend are deterministic on a machine type;
    ``fastest`` depends on timings (see the module docstring).

    >>> X = np.eye(4, dtype=np.float32)
    >>> choose_backend("numpy", X, 2).reason
    'forced by user'
    >>> choose_backend("auto", X, 2).reason
    'CPU rule'
    """
    if requested == "auto":
        backend, why = auto_rule()
        return BackendChoice(backend, requested, "CPU rule", rule=why)
    if requested != "fastest":
        return BackendChoice(resolve_backend(requested), requested, "forced by user")
    names = list(candidates) if candidates is not None else available_candidates()
    n_rows, dim = int(sample.shape[0]), int(sample.shape[1])
    path = cache_file(cache_dir)
    key = json.dumps(cache_key(n_rows, dim, n_clusters), sort_keys=True)
    entries, cache_error = _read_cache(path)
    entry = entries.get(key)
    if isinstance(entry, dict) and entry.get("backend") in names:
        return BackendChoice(
            str(entry["backend"]), requested, "cached",
            seconds=dict(entry.get("seconds", {})), skipped=dict(entry.get("skipped", {})),
            probe_rows=entry.get("probe_rows"), cache=str(path),
        )  # fmt: skip
    started = time.perf_counter()
    count = probe_rows(n_rows, dim, n_clusters)
    rows = np.ascontiguousarray(sample[np.linspace(0, n_rows - 1, count).astype(np.int64)])
    seconds, skipped = time_backends(rows, n_clusters, names)
    probe_seconds = round(time.perf_counter() - started, 3)
    if not seconds:  # every candidate failed: the rule of thumb, unmeasured
        return BackendChoice(
            resolve_backend("auto"), requested, "probe failed: the CPU-flag rule",
            skipped=skipped, probe_seconds=probe_seconds, probe_rows=count,
            cache=str(path), cache_error=cache_error,
        )  # fmt: skip
    backend = pick(seconds)
    record = {"backend": backend, "seconds": seconds, "skipped": skipped, "probe_rows": count,
              "probe_seconds": probe_seconds, "probed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
    cache_error = _write_cache(path, key, record) or cache_error
    return BackendChoice(
        backend, requested, "probe", seconds=seconds, skipped=skipped,
        probe_seconds=probe_seconds, probe_rows=count, cache=str(path), cache_error=cache_error,
    )  # fmt: skip
