"""The transformer in OpenVINO (issue 32, item 2): the auto rule, what asking for it
where it cannot run says, and the runtime recorded by the embed stage. Its vectors
against plain float32 and a vector that depends on its text alone are tested with ONNX
Runtime's (``graph_encoder`` in test_onnx_runtime.py)."""

from __future__ import annotations

import numpy as np
import pytest
from tests.embed.test_onnx_runtime import SAPPHIRE, ZEN3, graph_encoder_of

from clusterclip.embed.encoders import resolve_compute
from clusterclip.embed.onnx_runtime import AUTO_OPENVINO, choose_runtime, onnx_cache_dir
from clusterclip.errors import ClusterClipError, MissingDependencyError


def test_auto_runs_openvino_where_installed_on_a_cpu_without_bf16():
    assert AUTO_OPENVINO
    runtime, reason = choose_runtime(
        "auto", device="cpu", precision="float32", flags=ZEN3, installed=True, openvino=True
    )
    assert runtime == "openvino" and "--runtime onnxruntime or torch" in reason
    # without OpenVINO, ONNX Runtime; with neither, torch
    assert choose_runtime(
        "auto", device="cpu", precision="float32", flags=ZEN3, installed=True, openvino=False
    )[0] == "onnxruntime"  # fmt: skip
    assert choose_runtime(
        "auto", device="cpu", precision="float32", flags=ZEN3, installed=False, openvino=False
    )[0] == "torch"  # fmt: skip
    # a bf16 CPU and an accelerator keep torch, OpenVINO or not
    for device, precision, flags in (("cpu", "bfloat16", SAPPHIRE), ("cpu", "float32", SAPPHIRE),
                                     ("cuda", "float16", ZEN3)):  # fmt: skip
        assert choose_runtime(
            "auto", device=device, precision=precision, flags=flags, installed=True, openvino=True
        )[0] == "torch"  # fmt: skip


def test_asking_for_openvino_where_it_cannot_run_says_what_to_do():
    with pytest.raises(ClusterClipError, match="openvino only with device cpu.*--device cpu"):
        choose_runtime("openvino", device="cuda", precision="float32", openvino=True)
    with pytest.raises(ClusterClipError, match="precision float32.*--runtime torch"):
        choose_runtime("openvino", device="cpu", precision="bfloat16", openvino=True)
    with pytest.raises(MissingDependencyError, match=r"clusterclip\[openvino\]"):
        choose_runtime("openvino", device="cpu", precision="float32", openvino=False)
    assert choose_runtime("openvino", device="cpu", precision="float32", openvino=True) == (
        "openvino",
        "asked for",
    )
    assert resolve_compute("cpu", "auto", "openvino") == ("cpu", "float32")
    # OpenVINO reads the graph without ONNX Runtime's fused operators: its own cache entry
    assert onnx_cache_dir("a" * 32, fused=False) != onnx_cache_dir("a" * 32)


@pytest.fixture(scope="module")
def openvino_encoder():
    encoder = graph_encoder_of("openvino")
    # its own graph: the one without ONNX Runtime's fused operators
    assert (
        encoder.describe()["onnx_model"] != graph_encoder_of("onnxruntime").describe()["onnx_model"]
    )
    return encoder


@pytest.mark.slow
def test_embed_stage_records_openvino_and_refuses_a_change(openvino_encoder, verses, tmp_path):
    from embed_helpers import write_jsonl

    import clusterclip

    texts = [v["text"] for v in verses[:30]]
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"text": text} for text in texts])
    work = tmp_path / "w"
    clusterclip.embed(corpus, workdir=work, device="cpu", runtime="openvino")
    entry = clusterclip.io.WorkDir(work).entry("embed")
    assert entry["encoder"]["runtime"] == "openvino"
    result = clusterclip.embed(corpus, workdir=work, device="cpu", runtime="openvino")
    stored = result.embeddings[:]
    assert stored.tobytes() == openvino_encoder.encode(texts).astype(np.float16).tobytes()
    with pytest.raises(ClusterClipError, match="runtime: 'openvino' -> 'onnxruntime'"):
        clusterclip.embed(corpus, workdir=work, device="cpu", runtime="onnxruntime")
