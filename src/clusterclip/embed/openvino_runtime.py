"""OpenVINO for the sentence-transformers encoder's float32 forward pass.

``runtime="openvino"`` runs the transformer's float32 forward pass on the CPU
in OpenVINO (``pip install 'clusterclip[openvino]'``, also in ``all``);
``runtime="auto"`` picks it for float32 on a CPU without native bfloat16 where it
is installed (:data:`clusterclip.embed.onnx_runtime.AUTO_OPENVINO`). The model is exported
once to ONNX with standard operators only (OpenVINO's reader does not know ONNX
Runtime's fused ones: :func:`clusterclip.embed.onnx_runtime.export_onnx` with
``fuse=False``), cached next to ONNX Runtime's graph under
``$CLUSTERCLIP_CACHE/onnx/``, and compiled by OpenVINO's CPU plugin at load
time with float32 inference precision (never its bf16 or f16 defaults), the
``LATENCY`` hint (one stream: the micro-batches come one after another) and as
many threads as torch has here.

The encoder checks the compiled model against torch on probe texts before using
it, as it does for ONNX Runtime (:mod:`clusterclip.embed.onnx_runtime`). Vectors
match torch float32 to cosine 1.0000 on the documents measured (docs/performance.md,
"The transformer without bf16"), but not bit for bit: the runtime is recorded in
the work directory, and a stage refuses to mix runtimes.

Examples
--------
>>> from clusterclip.embed.encoders import EncoderSpec
>>> encoder = EncoderSpec(device="cpu", runtime="openvino").build()  # doctest: +SKIP
>>> encoder.describe()["runtime"]  # doctest: +SKIP
'openvino'
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from clusterclip.errors import require_extra

__all__ = ["OpenVinoForward", "load_openvino_forward", "openvino_installed", "shared_core"]

#: The compile settings: float32 arithmetic, one stream, no thread pinning (the
#: encoder may share its cores with a reader thread or other Ray workers).
COMPILE_CONFIG = {
    "INFERENCE_PRECISION_HINT": "f32",
    "PERFORMANCE_HINT": "LATENCY",
    "ENABLE_CPU_PINNING": False,
}


@functools.cache
def shared_core() -> Any:
    """The one ``openvino.Core`` of this process, kept until it exits.

    Every compiled model comes from it, so OpenVINO's CPU plugin is created once
    and never destroyed while the process runs. The plugin installs an alternate
    signal stack (``sigaltstack``) on the thread that creates it and frees that
    stack when it is destroyed, disabling the alternate stack only on the thread
    that destroys it. With a ``Core`` per model, a compiled model released on
    another thread (garbage collection runs wherever it is triggered) left the
    creating thread pointing at freed memory, and the next signal handled there
    (Python installs its handlers with ``SA_ONSTACK``) killed the process with a
    segmentation fault raised by the kernel: the crash the test suite saw.
    ``tests/embed/test_openvino_runtime.py`` runs that sequence in a child
    interpreter (it dies with SIGSEGV without this function).
    """
    return require_extra("openvino", "openvino").Core()


def openvino_installed() -> bool:
    """True when ``openvino`` can be imported (``pip install 'clusterclip[openvino]'``).

    >>> isinstance(openvino_installed(), bool)
    True
    """
    return importlib.util.find_spec("openvino") is not None


class OpenVinoForward:
    """An OpenVINO compiled model running a sentence-transformers model's forward pass.

    ``run(batch)`` takes the padded int64 inputs (``input_ids``,
    ``attention_mask``, ...) as numpy arrays and returns float32 pooled rows,
    not normalised, as ``model(features)["sentence_embedding"]`` would: the
    same interface as :class:`clusterclip.embed.onnx_runtime.OnnxForward`.
    """

    def __init__(self, path: Path, names: list[str], threads: int) -> None:
        core = shared_core()
        config = {**COMPILE_CONFIG, "INFERENCE_NUM_THREADS": max(1, int(threads))}
        self.path = path
        self.names = names
        self.compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
        self.output = self.compiled.output(0)
        self.request = self.compiled.create_infer_request()

    def run(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        feeds = {name: np.ascontiguousarray(batch[name], dtype=np.int64) for name in self.names}
        return np.array(self.request.infer(feeds)[self.output], dtype=np.float32)


def load_openvino_forward(model: Any, names: list[str], threads: int) -> OpenVinoForward:
    """The cached standard-operator ONNX graph of ``model`` (exported on first
    use), compiled by OpenVINO.

    Raises ClusterClipError naming the cause when the export fails.
    """
    from clusterclip.embed.onnx_runtime import cached_graph

    require_extra("openvino", "openvino")
    return OpenVinoForward(cached_graph(model, names, fused=False), names, threads)
