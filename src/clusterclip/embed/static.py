"""The static encoder: a model2vec model (token-embedding lookup + mean), run on CPU.

The model is distilled once from a sentence-transformers model and cached
(:func:`static_cache_dir`), or given as an existing model2vec directory. Token
counts use the distilled model's tokenizer (the source model's vocabulary).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clusterclip.embed.base import resolve_model, tokenizer_counter, unit_rows
from clusterclip.embed.static_pass import OnePass
from clusterclip.errors import ClusterClipError, require_extra

if TYPE_CHECKING:
    from clusterclip.embed.encoders import EncoderSpec

__all__ = ["STATIC_PCA_DIMS", "StaticEncoder", "ensure_static_model", "static_cache_dir"]

#: Dimensions the distilled model keeps (model2vec's PCA).
STATIC_PCA_DIMS = 256


def static_cache_dir(spec: EncoderSpec) -> Path:
    """Where the model2vec model distilled from ``spec.model`` is cached.

    ``$CLUSTERCLIP_CACHE/static/<hash>`` (default cache ``~/.cache/clusterclip``);
    the hash covers the source model (name, or absolute path), the PCA size and
    the model2vec version, so a new model2vec release distils afresh.
    """
    from importlib import metadata

    from clusterclip.cache import cache_root

    root = cache_root()
    source = resolve_model(spec.model)
    if Path(source).exists():
        source = str(Path(source).resolve())
    try:
        version = metadata.version("model2vec")
    except metadata.PackageNotFoundError:
        version = "none"
    key = json.dumps([spec.model_id(), source, STATIC_PCA_DIMS, version])
    return root / "static" / hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


def _is_model2vec_dir(path: Path) -> bool:
    config = path / "config.json"
    if not config.is_file():
        return False
    try:
        return json.loads(config.read_text("utf-8")).get("model_type") == "model2vec"
    except (OSError, json.JSONDecodeError):
        return False


def ensure_static_model(spec: EncoderSpec) -> Path:
    """The model2vec model for ``spec``: an existing one, or distilled once and cached."""
    given = Path(spec.model) if spec.model else None
    if given is not None and _is_model2vec_dir(given):
        return given
    target = static_cache_dir(spec)
    if _is_model2vec_dir(target):
        return target
    require_extra("model2vec", "static")
    distill = require_extra("model2vec.distill", "static").distill
    source = resolve_model(spec.model)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        model = distill(
            model_name=source,
            pca_dims=STATIC_PCA_DIMS,
            trust_remote_code=spec.trust_remote_code,
        )
        model.save_pretrained(str(tmp))
        try:
            os.rename(tmp, target)  # atomic; another process may have won the race
        except OSError:
            if not _is_model2vec_dir(target):
                raise
    except ClusterClipError:
        raise
    except Exception as error:
        raise ClusterClipError(
            f"cannot distil a static model from {spec.model_id()!r} ({error}). "
            "Pass a local sentence-transformers model path with --model, or use --encoder tfidf."
        ) from error
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


class StaticEncoder:
    """A model2vec static model (token-embedding lookup + mean), run on CPU.

    ``encode`` is model2vec's own ``StaticModel.encode`` (unit rows); the
    embed stage calls ``encode_with_counts``, which gives the same vectors and
    the token counts from one tokenisation (:mod:`clusterclip.embed.static_pass`).
    """

    def __init__(self, spec: EncoderSpec) -> None:
        self.spec = spec
        self.path = ensure_static_model(spec)
        model2vec = require_extra("model2vec", "static")
        options = {} if spec.max_length is None else {"max_length": spec.max_length}
        self.model = model2vec.StaticModel.from_pretrained(str(self.path), **options)
        self.dim = int(self.model.dim)
        self.batch_size = spec.batch_size or 1024
        self._count = tokenizer_counter(self.model.tokenizer)
        self._one_pass = self._checked_one_pass()

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts), batch_size=self.batch_size, show_progress_bar=False,
            use_multiprocessing=False,
        )  # fmt: skip
        return unit_rows(vectors)

    def count_tokens(self, texts: list[str]) -> np.ndarray:
        return self._count(texts)

    def encode_with_counts(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(encode(texts), count_tokens(texts))`` from one tokenisation.

        Tokenising is most of a static model's work, and ``n_tokens`` needs an
        untruncated pass anyway: its token ids also give each text's vector
        (:class:`~clusterclip.embed.static_pass.OnePass`), batch by batch, the
        next batch tokenised while this one is pooled. Used only when a check at
        load time found it equal to ``encode`` and ``count_tokens`` for this
        model (plain embedding tables, no weights); else both run.
        """
        if self._one_pass is None:
            return self.encode(texts), self.count_tokens(texts)
        rows, counts = self._one_pass(list(texts), batch_size=self.batch_size)
        return unit_rows(rows), counts

    def _checked_one_pass(self) -> OnePass | None:
        model = self.model
        if getattr(model, "token_mapping", None) is not None:
            return None
        if getattr(model, "weights", None) is not None:
            return None
        if not np.issubdtype(model.embedding.dtype, np.floating):
            return None  # quantised tables are decoded by model2vec
        try:
            one_pass = OnePass(model)
        except (AttributeError, TypeError, ValueError):  # another model2vec layout
            return None
        probe = ["In the beginning God created the heaven.", "zxq qqq 12345 !!", "", "a b"]
        if one_pass.max_chars is not None and one_pass.max_chars < 100_000:
            # cut texts: one with spaces, one without (each cut where model2vec cuts it)
            words = "And God said, Let there be light: and there was light. "
            probe += [
                words * (one_pass.max_chars // len(words) + 2),
                "x" * (one_pass.max_chars + 9),
            ]
        try:
            rows, counts = one_pass(probe, batch_size=self.batch_size)
        except (AttributeError, TypeError, ValueError, IndexError):
            return None
        if counts.tolist() != self.count_tokens(probe).tolist():
            return None
        # model2vec rounds its output to the table's dtype (float16 here): equal up to that
        equal = np.allclose(unit_rows(rows), self.encode(probe), rtol=0, atol=5e-4)
        return one_pass if equal else None

    def describe(self) -> dict[str, Any]:
        from importlib import metadata

        return {
            "encoder": "static",
            "model": f"model2vec distilled from {self.spec.model_id()}",
            "model_path": str(self.path),
            "dim": self.dim,
            "max_length": self.spec.max_length,
            "pca_dims": STATIC_PCA_DIMS,
            "model2vec": metadata.version("model2vec"),
            "normalized": True,
            "tokenizer": self.spec.model_id(),
        }
