"""Every export layout behind one protocol, and the registry ``clusterclip export`` lists.

An :class:`Exporter` has a ``name`` (the ``--format``), a one-paragraph ``help``,
an ``options`` dataclass built on :func:`clusterclip.options.option` (so its flags,
checks and error spelling are generated like the stages'), a ``check(out, options)``
that refuses a bad output or missing setting before any work, and
``export(work, out, options) -> ExportSummary``. The export functions keep their
own signatures and return values (a list of shards, a path, a dict of counts);
the exporters turn each into one :class:`ExportSummary`. A new layout is one
class here (its ``write``; ``export`` refuses an engine the layout does not list
in ``engines`` first) and one entry in :data:`EXPORTERS`; the command line learns
it from the registry.

This module imports no export function until one runs, so building the
command's parser loads none of them.

>>> sorted(EXPORTERS)  # doctest: +NORMALIZE_WHITESPACE
['cluster-folders', 'flat-tokens', 'litdata', 'mds', 'megatron', 'ordered-jsonl',
 'sample-index']
>>> EXPORTERS["litdata"].options().world_size
1
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from clusterclip.adapters.options import TokenOptions
from clusterclip.errors import ClusterClipError
from clusterclip.options import check_fields, option

if TYPE_CHECKING:
    from pathlib import Path

    from clusterclip.io import WorkDir

__all__ = [
    "EXPORTERS",
    "ExportSummary",
    "Exporter",
    "NoOptions",
    "ShardOptions",
    "TokenOptions",
    "TopologyOptions",
    "formats_on",
    "formats_using",
]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class ExportSummary:
    """What one export wrote: the layout, where, and the numbers its writer reported.

    >>> ExportSummary("mds", "out", {"samples": 1200, "out": "out"}).line()
    'export mds: samples 1,200 -> out'
    >>> ExportSummary("sample-index", "idx.npy").line()
    'export sample-index: wrote idx.npy'
    """

    format: str
    out: str
    details: Mapping[str, Any] = field(default_factory=dict)
    files: tuple[str, ...] = ()  # the files written, when the writer lists them

    def line(self) -> str:
        """The one line ``clusterclip export`` prints."""
        shown = {k: v for k, v in self.details.items() if k not in ("out", "prefix", "topology")}
        if not shown:
            return f"export {self.format}: wrote {self.out}"
        text = ", ".join(
            f"{key} {value:,}" if isinstance(value, int) else f"{key} {value}"
            for key, value in shown.items()
        )
        return f"export {self.format}: {text} -> {self.out}"


@dataclass(frozen=True, kw_only=True)
class NoOptions:
    """The settings of a layout that has none."""

    title: ClassVar[str] = ""


@dataclass(frozen=True, kw_only=True)
class ShardOptions:
    """How many documents go in each output file (the jsonl layouts).

    >>> ShardOptions().shard_size
    100000
    """

    title: ClassVar[str] = "output files"
    shard_size: int = option(100_000, "documents per output file", kind="int", minimum=1)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class TopologyOptions:
    """The trainer's topology, which only the litdata layout depends on.

    Not ``--num-workers`` / ``--batch-size``: those are the Ray actors and the
    encoder's batch in the other commands (the old spellings, in :attr:`renamed`,
    still work here, with a note).
    """

    title: ClassVar[str] = "trainer topology"
    #: field -> its former flag, still accepted (hidden from --help)
    renamed: ClassVar[dict[str, str]] = {
        "loader_workers": "--num-workers",
        "loader_batch_size": "--batch-size",
    }
    world_size: int = option(1, "ranks that will read the dataset", kind="int", minimum=1)
    loader_workers: int = option(
        0, "DataLoader workers per rank of the training loop (formerly --num-workers)",
        kind="int", minimum=0,
    )  # fmt: skip
    loader_batch_size: int = option(
        1, "samples per batch on each rank of the training loop (formerly --batch-size)",
        kind="int", minimum=1,
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_fields(self)


class Exporter(Protocol):
    """One output layout of a work directory's schedule."""

    name: ClassVar[str]
    help: ClassVar[str]
    options: ClassVar[type]
    #: Engines the layout's per-document work runs on (``"ray"``: read tasks on Ray).
    engines: ClassVar[tuple[str, ...]]

    def check(self, out: PathLike, options: Any) -> None:
        """Refuse, before any work, an output or settings this layout cannot write."""

    def export(
        self, work: WorkDir, out: PathLike, options: Any, *, engine: str = "local",
        engine_options: Mapping[str, Any] | None = None,
    ) -> ExportSummary:  # fmt: skip
        """Write the layout into ``out`` (its per-document work on ``engine``); what was written."""


class _IntoFolder:
    """Shared by the layouts that write a new or empty folder."""

    options: ClassVar[type] = NoOptions
    engines: ClassVar[tuple[str, ...]] = ("local",)
    name: ClassVar[str]

    def _refuse_engine(self, engine: str) -> None:
        """Refuse an engine this layout does not run on (it would be ignored silently)."""
        if engine not in self.engines:
            supported = ", ".join(formats_on(engine)) or "none yet"
            raise ClusterClipError(
                f"--format {self.name} runs on the local engine only; --engine {engine} "
                f"applies to: {supported}. Drop --engine {engine}."
            )

    def export(
        self, work: WorkDir, out: PathLike, options: Any, *, engine: str = "local",
        engine_options: Mapping[str, Any] | None = None,
    ) -> ExportSummary:  # fmt: skip
        """Refuse an engine the layout does not run on, then :meth:`write`."""
        self._refuse_engine(engine)
        return self.write(work.path, out, options, engine=engine, engine_options=engine_options)

    def write(
        self, path: Path, out: PathLike, options: Any, *, engine: str,
        engine_options: Mapping[str, Any] | None,
    ) -> ExportSummary:  # fmt: skip
        """Write the layout from the work directory at ``path``; each layout defines it."""
        raise NotImplementedError

    def check(self, out: PathLike, options: Any) -> None:
        from clusterclip.adapters.output import check_export_folder

        check_export_folder(out)  # a file or a folder with files: refused before any work


class OrderedJsonl(_IntoFolder):
    name = "ordered-jsonl"
    help = "the documents in schedule order, sharded (original records)"
    options = ShardOptions

    def write(self, path: Path, out: PathLike, options: Any, **engine: Any) -> ExportSummary:
        from clusterclip.adapters.export import export_ordered_jsonl

        shards = export_ordered_jsonl(path, out, shard_size=options.shard_size)
        return ExportSummary(self.name, os.fspath(out), files=tuple(map(str, shards)))


class FlatTokens(_IntoFolder):
    name = "flat-tokens"
    help = "one token array in schedule order (nanoGPT / OLMo style) + offsets"
    options = TokenOptions
    engines = ("local", "ray")
    writes = "a token array"

    def check(self, out: PathLike, options: Any) -> None:
        super().check(out, options)
        if options.tokenizer is None:
            raise ClusterClipError(
                f"--format {self.name} writes {self.writes} and needs --tokenizer "
                "NAME_OR_PATH: a tokenizer.json, a Hugging Face tokenizer directory, or a hub "
                f"name already in the local cache.{self._before()}"
            )

    def _before(self) -> str:
        return ""

    def write(self, path: Path, out: PathLike, options: Any, **engine: Any) -> ExportSummary:
        from clusterclip.adapters.flat import export_flat_tokens

        details = export_flat_tokens(path, out, **_tokens(options), **engine)
        return ExportSummary(self.name, os.fspath(out), details)


class Megatron(FlatTokens):
    name = "megatron"
    help = (
        "a Megatron-Core indexed dataset (.bin/.idx) whose sequences are the schedule; "
        "repeated documents share their bytes"
    )
    writes = "a Megatron-Core indexed dataset"

    def _before(self) -> str:
        return " The document-index .npy it wrote before is now --format sample-index."

    def write(self, path: Path, out: PathLike, options: Any, **engine: Any) -> ExportSummary:
        from clusterclip.adapters.megatron import export_megatron

        details = export_megatron(path, out, **_tokens(options), **engine)
        return ExportSummary(self.name, os.fspath(out), details)


def _tokens(options: TokenOptions) -> dict[str, Any]:
    return {
        "tokenizer": options.tokenizer,
        "eos_token": options.eos_token,
        "append_eos": options.append_eos,
    }


class SampleIndex(_IntoFolder):
    name = "sample-index"
    help = (
        "the schedule as a flat int64 .npy of document indices (what `--format megatron` "
        "wrote before it wrote an indexed dataset)"
    )

    def check(self, out: PathLike, options: Any) -> None:
        if not os.fspath(out).endswith(".npy"):  # a .npy file name, or a folder
            super().check(out, options)

    def write(self, path: Path, out: PathLike, options: Any, **engine: Any) -> ExportSummary:
        from clusterclip.adapters.export import export_sample_index

        path = export_sample_index(path, out)
        return ExportSummary(self.name, os.fspath(out), files=(str(path),))


class Mds(_IntoFolder):
    name = "mds"
    help = "a MosaicML streaming dataset in schedule order"
    engines = ("local", "ray")

    def write(self, path: Path, out: PathLike, options: Any, **engine: Any) -> ExportSummary:
        from clusterclip.adapters.mds import export_mds

        return ExportSummary(self.name, os.fspath(out), export_mds(path, out, **engine))


class LitData(_IntoFolder):
    name = "litdata"
    help = (
        "a LitData optimized dataset laid out for --world-size ranks x --loader-workers "
        "DataLoader workers x --loader-batch-size"
    )
    options = TopologyOptions
    engines = ("local", "ray")

    def write(self, path: Path, out: PathLike, options: Any, **engine: Any) -> ExportSummary:
        from clusterclip.adapters.litdata_export import export_litdata

        details = export_litdata(
            path, out, world_size=options.world_size,
            num_workers=options.loader_workers, batch_size=options.loader_batch_size, **engine,
        )  # fmt: skip
        return ExportSummary(self.name, os.fspath(out), details)


class ClusterFolders(_IntoFolder):
    name = "cluster-folders"
    help = "the ClusterClip authors' layout: cluster_<k>/data_<j>.jsonl"
    options = ShardOptions
    engines = ("local", "ray")

    def write(self, path: Path, out: PathLike, options: Any, **engine: Any) -> ExportSummary:
        from clusterclip.adapters.folders import export_cluster_folders

        details = export_cluster_folders(path, out, shard_size=options.shard_size, **engine)
        return ExportSummary(self.name, os.fspath(out), details)


#: ``--format`` name -> its exporter, in the order ``clusterclip export --help`` lists them.
EXPORTERS: dict[str, Exporter] = {
    exporter.name: exporter
    for exporter in (
        OrderedJsonl(),
        FlatTokens(),
        Megatron(),
        SampleIndex(),
        Mds(),
        LitData(),
        ClusterFolders(),
    )  # fmt: skip
}


def formats_on(engine: str) -> list[str]:
    """The ``--format`` names whose per-document work runs on ``engine``, sorted.

    >>> formats_on("ray")
    ['cluster-folders', 'flat-tokens', 'litdata', 'mds', 'megatron']
    """
    return sorted(name for name, exporter in EXPORTERS.items() if engine in exporter.engines)


def formats_using(options: type) -> list[str]:
    """The ``--format`` names whose settings are ``options``, sorted.

    >>> formats_using(TokenOptions)
    ['flat-tokens', 'megatron']
    """
    return sorted(name for name, exporter in EXPORTERS.items() if exporter.options is options)
