"""ONNX Runtime for the sentence-transformers encoder's float32 forward pass, the export
both graph runtimes read, and the rule that picks a runtime.

Where the CPU has no bfloat16 instructions (no ``avx512_bf16``, no ``amx_bf16``)
the transformer runs in float32. ``runtime="onnxruntime"`` runs the model's
forward pass in ONNX Runtime instead of torch: the sentence-transformers model
(transformer and pooling, as the model is configured) is exported once to ONNX,
its attention, GELU and LayerNorm fused by ONNX Runtime's transformer optimizer,
and cached in ``$CLUSTERCLIP_CACHE/onnx/<hash>`` (default
``~/.cache/clusterclip/onnx/``). The hash covers the model's weights and
architecture and the versions of the exporting libraries, so any model name or
path works and a changed model is exported afresh.

The graph stays float32: its vectors match torch float32 to cosine 1.0000 on
every document measured (docs/embed.md). Int8 (dynamic, per-channel weights) was
measured and not adopted: min cosine 0.981-0.986 with every matrix product
quantised, and its activations are quantised with one scale per batch, so a
text's vector would depend on the texts it is batched with.

``auto`` runs float32 on CPUs without native bfloat16 in OpenVINO where it is
installed (:mod:`clusterclip.embed.openvino_runtime`), else in ONNX Runtime, both
measured faster than torch there (:func:`choose_runtime`): on an AVX2-only AMD
EPYC (family 23 model 49), end to end, OpenVINO 1.20-1.26x plain fp32
``SentenceTransformer.encode``, ONNX Runtime 1.14-1.21x, our torch float32 path
0.96-1.01x (docs/performance.md). The rule is one of the device, precision, CPU
flags and installed libraries, never of a timing.
A model that cannot be exported, or whose exported graph does not reproduce
torch on a few probe texts, runs in torch; the reason is recorded in the
manifest (``encoder.runtime_reason``) and given as a warning.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import ClusterClipError, MissingDependencyError, invalid, require_extra
from clusterclip.threads import cpu_flags, native_bfloat16

__all__ = [
    "RUNTIMES",
    "choose_runtime",
    "onnx_cache_dir",
    "onnxruntime_installed",
    "cached_graph",
    "export_onnx",
    "MODEL_FILE",
]

#: Values of ``runtime``: ``auto`` (the rule of :func:`choose_runtime`), torch,
#: onnxruntime, openvino (:mod:`clusterclip.embed.openvino_runtime`).
RUNTIMES = ("auto", "torch", "onnxruntime", "openvino")
#: The runtimes that run an exported float32 graph on the CPU, and the extra of each.
GRAPH_RUNTIMES = {"onnxruntime": "embed", "openvino": "openvino"}
#: Whether ``auto`` picks ONNX Runtime for float32 on CPUs without native bfloat16.
#: On: on an AVX2-only CPU it was faster than torch float32, encode only and end to
#: end (docs/performance.md, "The transformer without bf16"). (On an AVX-512 Xeon
#: with torch held to AVX2 it had run at 0.66-1.02x; that CPU has native bf16, so
#: ``auto`` runs bfloat16 there and this rule does not apply.)
AUTO_ONNXRUNTIME = True
#: Whether ``auto`` picks OpenVINO, where it is installed, for float32 on CPUs without
#: native bfloat16 (before ONNX Runtime). On: it was ahead of ONNX Runtime end to end in
#: 9 of 10 paired rounds on an AVX2-only EPYC, by 1-7% (docs/performance.md). (It was
#: off while a segmentation fault it caused was unexplained; the cause and its fix are
#: in :func:`clusterclip.embed.openvino_runtime.shared_core`.)
AUTO_OPENVINO = True
#: Version of the export recipe below; part of the cache key (a new recipe exports afresh).
EXPORT_RECIPE = 1
#: Probe texts whose ONNX vectors must match torch's before the graph is used.
PROBES = (
    "In the beginning God created the heaven and the earth.",
    "zxq qqq 12345 !!",
    "Shares in the company rose sharply after it reported higher profits for the year. " * 4,
)
#: Least cosine between the exported graph's and torch's vectors on :data:`PROBES`.
PROBE_COSINE = 0.9999
#: The graph's file name in its cache directory.
MODEL_FILE = "model.onnx"


def onnxruntime_installed() -> bool:
    """True when ``onnxruntime`` and ``onnx`` can be imported (both ship in ``clusterclip[embed]``).

    >>> isinstance(onnxruntime_installed(), bool)
    True
    """
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


def choose_runtime(
    runtime: str,
    *,
    device: str,
    precision: str,
    flags: Iterable[str] | None = None,
    installed: bool | None = None,
    openvino: bool | None = None,
) -> tuple[str, str]:
    """What runs the transformer's forward pass, and why: ``(runtime, reason)``.

    ``runtime="auto"`` is, for float32 on a CPU without native bfloat16,
    ``openvino`` when OpenVINO is installed (:data:`AUTO_OPENVINO`), else
    ``onnxruntime`` when ONNX Runtime is installed (:data:`AUTO_ONNXRUNTIME`; both
    measured faster than torch there, docs/performance.md), else ``torch``. It is a
    rule of these facts alone, never of a timing, so the same machine and
    libraries always choose the same way. ``flags``: the CPU's
    (:func:`clusterclip.threads.cpu_flags`) when ``None``; ``installed`` and
    ``openvino``: whether ONNX Runtime and OpenVINO can be imported, looked up
    when ``None``. ``device`` and ``precision`` are resolved values (``cpu``,
    ``float32``...).

    Raises
    ------
    ClusterClipError
        ``runtime="onnxruntime"`` or ``"openvino"`` with a device other than
        the CPU or a precision other than float32; MissingDependencyError when
        the runtime asked for is not installed.

    Examples
    --------
    >>> choose_runtime("onnxruntime", device="cpu", precision="float32", installed=True)
    ('onnxruntime', 'asked for')
    >>> choose_runtime("auto", device="cpu", precision="float32",
    ...                flags={"avx2", "fma"}, installed=True, openvino=True)[0]
    'openvino'
    >>> choose_runtime("auto", device="cpu", precision="float32",
    ...                flags={"avx2", "fma"}, installed=True, openvino=False)[0]
    'onnxruntime'
    >>> choose_runtime("auto", device="cpu", precision="bfloat16",
    ...                flags={"avx512_bf16"}, installed=True)[0]
    'torch'
    """
    if runtime not in RUNTIMES:
        raise invalid("runtime", f"one of {', '.join(RUNTIMES)}", runtime)
    if runtime == "torch":
        return "torch", "asked for"
    if runtime in GRAPH_RUNTIMES:
        if device != "cpu":
            raise invalid(
                "runtime", f"{runtime} only with device cpu", f"{runtime} on {device}",
                "Pass --device cpu, or --runtime torch to run on the accelerator.",
            )  # fmt: skip
        if precision != "float32":
            raise invalid(
                "runtime", f"{runtime} only with precision float32 (or auto on a CPU "
                "without native bfloat16)", f"{runtime} in {precision}",
                "Pass --precision float32, or --runtime torch for bfloat16.",
            )  # fmt: skip
        found = installed if runtime == "onnxruntime" else openvino
        if found is None:
            found = onnxruntime_installed() if runtime == "onnxruntime" else _openvino_installed()
        if not found:
            raise MissingDependencyError(
                f"--runtime {runtime} needs {runtime}, which is not installed: "
                f"pip install 'clusterclip[{GRAPH_RUNTIMES[runtime]}]'"
            )
        return runtime, "asked for"
    if device != "cpu":
        return "torch", f"device {device}"
    if precision != "float32":
        return "torch", f"{precision} runs in torch"
    if native_bfloat16(cpu_flags() if flags is None else flags):
        return "torch", "float32 asked on a CPU with native bfloat16 (torch is the reference)"
    if AUTO_OPENVINO and (_openvino_installed() if openvino is None else openvino):
        return "openvino", (
            "float32 on a CPU without native bfloat16, OpenVINO installed: measured faster than "
            "onnxruntime and torch there (--runtime onnxruntime or torch to use those)"
        )
    if installed is None:
        installed = onnxruntime_installed()
    if not installed:
        return "torch", "onnxruntime is not installed (pip install 'clusterclip[embed]')"
    if not AUTO_ONNXRUNTIME:
        return "torch", "float32 on a CPU without native bfloat16 (--runtime onnxruntime to use it)"
    return "onnxruntime", (
        "float32 on a CPU without native bfloat16: onnxruntime measured faster than torch there "
        "(--runtime torch to use torch)"
    )


def _openvino_installed() -> bool:
    from clusterclip.embed.openvino_runtime import openvino_installed

    return openvino_installed()


def _versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for name in ("torch", "transformers", "sentence-transformers", "onnx", "onnxruntime"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "none"
    return found


def model_fingerprint(model: Any) -> str:
    """blake2b of a torch module's weights (names, dtypes, shapes, bytes) and its
    printed architecture: what the exported graph is computed from."""
    import torch

    digest = hashlib.blake2b(digest_size=16)
    digest.update(repr(model).encode())
    for name, tensor in sorted(model.state_dict().items()):
        value = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{value.dtype}|{tuple(value.shape)}".encode())
        digest.update(value.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def onnx_cache_dir(fingerprint: str, *, fused: bool = True) -> Path:
    """Where the graph exported from a model of this fingerprint is cached.

    ``$CLUSTERCLIP_CACHE/onnx/<hash>``; the hash covers the model's
    fingerprint (:func:`model_fingerprint`), the export recipe and the
    versions of torch, transformers, sentence-transformers, onnx and
    onnxruntime, and whether ONNX Runtime's fusions were applied (``fused``;
    OpenVINO reads the unfused graph).

    >>> onnx_cache_dir("0" * 32).parent.name
    'onnx'
    >>> onnx_cache_dir("0" * 32) != onnx_cache_dir("0" * 32, fused=False)
    True
    """
    from clusterclip.cache import cache_root

    recipe: list[Any] = [fingerprint, EXPORT_RECIPE, _versions()]
    key = json.dumps(recipe if fused else [*recipe, "unfused"], sort_keys=True)
    return cache_root() / "onnx" / hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


class _Forward:
    """``model(features)["sentence_embedding"]`` with the features as positional tensors
    (what ``torch.onnx.export`` traces)."""

    def __new__(cls, model: Any, names: list[str]) -> Any:
        import torch

        class Forward(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, *tensors: Any) -> Any:
                return self.model(dict(zip(names, tensors, strict=True)))["sentence_embedding"]

        # eval() before export: the exporter restores the wrapper's mode afterwards,
        # and a fresh module is in training mode (dropout on in torch from then on)
        return Forward().eval()


def _eager_attention(model: Any) -> Any:
    """Switch the model's attention to the eager implementation while exporting (ONNX
    Runtime fuses its pattern into one Attention operator; the SDPA export it does not).
    Returns the implementation to restore, or None where the model cannot switch."""
    for module in model.modules():
        setter = getattr(module, "set_attn_implementation", None)
        config = getattr(module, "config", None)
        if setter is None or config is None:
            continue
        before = getattr(config, "_attn_implementation", None)
        try:
            setter("eager")
        except Exception:  # models without an eager path keep theirs
            return None
        return module, before
    return None


def export_onnx(model: Any, names: list[str], target: Path, *, fuse: bool = True) -> Path:
    """Export a sentence-transformers model (float32, on CPU) to ``target/model.onnx``.

    Traced with ``torch.onnx.export`` (TorchScript exporter, dynamic batch and
    sequence axes, inputs ``names``, output ``sentence_embedding``), then, with
    ``fuse`` (the default), optimised by ``onnxruntime.transformers.optimizer``
    (attention, GELU and LayerNorm fusions where it recognises a BERT-like graph;
    a graph it does not recognise is kept as exported). ``fuse=False`` keeps the
    standard ONNX operators only, for other runtimes (``benchmarks/bench_openvino.py``).
    Written to a temp directory and renamed, so a concurrent export never leaves
    a half-written cache.
    """
    import torch

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    switched = _eager_attention(model)
    try:
        raw = tmp / "raw.onnx"
        example = tuple(torch.ones((2, 8), dtype=torch.long) for _ in names)
        axes = {name: {0: "batch", 1: "sequence"} for name in names}
        with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Forward(model, names), example, str(raw), input_names=names,
                output_names=["sentence_embedding"],
                dynamic_axes={**axes, "sentence_embedding": {0: "batch"}},
                opset_version=17, dynamo=False, do_constant_folding=True,
            )  # fmt: skip
        _optimize(raw, tmp / MODEL_FILE, _attention_shape(model) if fuse else None)
        raw.unlink()
        for extra in tmp.glob("raw.onnx*"):  # external data of large models
            extra.unlink()
        try:
            os.rename(tmp, target)  # atomic; another process may have won the race
        except OSError:
            if not (target / MODEL_FILE).is_file():
                raise
    finally:
        model.eval()
        if switched is not None:
            module, before = switched
            module.set_attn_implementation(before or "sdpa")
        shutil.rmtree(tmp, ignore_errors=True)
    return target / MODEL_FILE


def _attention_shape(model: Any) -> tuple[int, int] | None:
    """``(heads, width)`` from the first Hugging Face config in the model, if any."""
    for module in model.modules():
        config = getattr(module, "config", None)
        heads = getattr(config, "num_attention_heads", None)
        width = getattr(config, "hidden_size", None)
        if isinstance(heads, int) and isinstance(width, int):
            return heads, width
    return None


def _optimize(source: Path, destination: Path, shape: tuple[int, int] | None) -> None:
    """ONNX Runtime's transformer fusions (``model_type="bert"``, with the model's
    heads and width); the graph as exported where they are unknown or the optimizer
    fails (a fusion that guessed them wrong gave cosine 0.95 to torch)."""
    if shape is None:
        shutil.copyfile(source, destination)
        return
    optimizer = require_extra("onnxruntime.transformers.optimizer", "embed")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optimized = optimizer.optimize_model(
                str(source),
                model_type="bert",
                num_heads=shape[0],
                hidden_size=shape[1],
                opt_level=1,
            )
            large = source.stat().st_size > 1_800_000_000
            optimized.save_model_to_file(str(destination), use_external_data_format=large)
    except Exception:  # an architecture the optimizer does not know: run it unfused
        shutil.copyfile(source, destination)


class OnnxForward:
    """An ONNX Runtime session running a sentence-transformers model's forward pass.

    ``run(batch)`` takes the padded int64 inputs (``input_ids``,
    ``attention_mask``, ...) as numpy arrays and returns float32 pooled rows,
    not normalised, as ``model(features)["sentence_embedding"]`` would.

    Examples
    --------
    >>> from clusterclip.embed.encoders import EncoderSpec
    >>> encoder = EncoderSpec(device="cpu", runtime="onnxruntime").build()  # doctest: +SKIP
    >>> encoder.describe()["runtime"]  # doctest: +SKIP
    'onnxruntime'
    """

    def __init__(self, path: Path, names: list[str], threads: int) -> None:
        ort = require_extra("onnxruntime", "embed")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = max(1, int(threads))
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # Idle threads sleep instead of spinning: on a shared 2-core machine (load 8)
        # spinning ran at 0.78x (5.9 against 7.6 docs/s, ~100-token texts, median of 3).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.path = path
        self.names = names
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def run(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        feeds = {name: np.ascontiguousarray(batch[name], dtype=np.int64) for name in self.names}
        return np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)


def load_onnx_forward(model: Any, names: list[str], threads: int) -> OnnxForward:
    """The cached exported graph of ``model`` (exported on first use), in a session.

    Raises ClusterClipError naming the cause when the export fails.
    """
    return OnnxForward(cached_graph(model, names), names, threads)


def cached_graph(model: Any, names: list[str], *, fused: bool = True) -> Path:
    """The path of ``model``'s exported graph in the cache (:func:`onnx_cache_dir`),
    exported there on first use (:func:`export_onnx`; ``fused`` as there).

    Raises ClusterClipError naming the cause when the export fails.
    """
    directory = onnx_cache_dir(model_fingerprint(model), fused=fused)
    path = directory / MODEL_FILE
    if not path.is_file():
        try:
            export_onnx(model, names, directory, fuse=fused)
        except Exception as error:
            raise ClusterClipError(
                f"ONNX export failed ({type(error).__name__}: {error})"
            ) from error
    return path
