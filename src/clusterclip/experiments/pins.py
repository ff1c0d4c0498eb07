"""Pinned corpora: the files an experiment was defined on, recorded and checked on every read.

A pin records where a named corpus came from (a Debian package and its version), a digest of
every file its reader reads (the decompressed bytes) and what the reader made of them (the
number of documents and :meth:`~clusterclip.experiments.corpora.Corpus.sha256`, the hash every
run records as ``corpus_sha256``). Reading a pinned corpus checks the installed files against
the pin first, so a grid defined on one version of the files never runs, silently, on another
(each Debian point release changes the kernel's documentation a little). The check names the
files that differ; ``--corpus-pin=off`` reads them anyway, as another experiment whose runs
record their own hash (:func:`clusterclip.experiments.lm.check_same_corpus` keeps the two
apart).

Re-pin after a deliberate change (its own commit: it redefines the experiments on that corpus)::

    python -m clusterclip.experiments.pins linux-doc

>>> pin = CorpusPin("demo", "demo-pkg", "1.0", {"a.rst.gz": file_digest(b"x")}, 1, "ab" * 32)
>>> check_files(pin, {"a.rst.gz": file_digest(b"y")}, installed="1.1")
Traceback (most recent call last):
...
clusterclip.errors.ClusterClipError: corpus `demo`: 1 of the 1 pinned file differs from the pin (demo-pkg 1.0; installed: 1.1): changed a.rst.gz. Install the pinned version (apt-get install demo-pkg=1.0), or read these files as another experiment with --corpus-pin=off (its runs record their own corpus_sha256).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from clusterclip.errors import ClusterClipError, plural

__all__ = [
    "DPKG_STATUS",
    "CorpusPin",
    "check_documents",
    "check_files",
    "file_digest",
    "installed_version",
    "main",
]

DPKG_STATUS = Path("/var/lib/dpkg/status")
#: Hex digits kept of each file's sha256: enough to tell a changed file, small enough to ship.
_DIGEST_CHARS = 16
_LISTED = 5  # file names a mismatch message lists per kind of change


def file_digest(data: bytes) -> str:
    """The pin's digest of one file's (decompressed) bytes: a sha256 prefix.

    >>> file_digest(b"")
    'e3b0c44298fc1c14'
    """
    return hashlib.sha256(data).hexdigest()[:_DIGEST_CHARS]


@dataclass(frozen=True)
class CorpusPin:
    """What a named corpus is, as pinned: its package, its files and the documents read.

    Attributes
    ----------
    corpus : str
        The corpus name (``linux-doc``).
    package, version : str
        The Debian package the files come from and the version pinned.
    files : mapping of str to str
        Path relative to the corpus folder -> :func:`file_digest` of the decompressed bytes.
    documents : int
        Documents the reader cut the files into.
    sha256 : str
        :meth:`~clusterclip.experiments.corpora.Corpus.sha256` of those documents.
    """

    corpus: str
    package: str
    version: str
    files: Mapping[str, str]
    documents: int
    sha256: str

    def describe(self) -> str:
        """One line for logs and results: package, version, files and documents.

        >>> CorpusPin("d", "pkg", "1.0", {"a": "0"}, 3, "ab").describe()
        'pkg 1.0 (pinned: 1 file, 3 documents)'
        """
        return (
            f"{self.package} {self.version} (pinned: {plural(len(self.files), 'file')}, "
            f"{plural(self.documents, 'document')})"
        )

    def write(self, path: str | Path) -> None:
        """Write the pin as gzipped JSON (sorted keys, so the same pin gives the same bytes)."""
        from clusterclip.io import atomic_write_bytes

        record = {
            "corpus": self.corpus, "package": self.package, "version": self.version,
            "documents": self.documents, "sha256": self.sha256, "files": dict(self.files),
        }  # fmt: skip
        text = json.dumps(record, indent=0, sort_keys=True) + "\n"
        atomic_write_bytes(path, gzip.compress(text.encode("utf-8"), mtime=0))

    @classmethod
    def read(cls, path: str | Path) -> CorpusPin:
        """The pin written by :meth:`write`."""
        record = json.loads(gzip.decompress(Path(path).read_bytes()))
        return cls(
            corpus=record["corpus"], package=record["package"], version=record["version"],
            files=record["files"], documents=record["documents"], sha256=record["sha256"],
        )  # fmt: skip


def installed_version(package: str, *, status: Path = DPKG_STATUS) -> str | None:
    """The installed version of a Debian package, read from dpkg's status file (or None).

    >>> installed_version("no-such-package-here") is None
    True
    """
    try:
        text = status.read_text("utf-8", errors="replace")
    except OSError:
        return None
    for paragraph in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1)
            for line in paragraph.splitlines()
            if ": " in line and line[0] != " "
        )
        if fields.get("Package") == package and fields.get("Status", "").endswith(" installed"):
            return fields.get("Version")
    return None


def _fix(pin: CorpusPin) -> str:
    return (
        f"Install the pinned version (apt-get install {pin.package}={pin.version}), or read "
        "these files as another experiment with --corpus-pin=off (its runs record their own "
        "corpus_sha256)."
    )


def check_files(pin: CorpusPin, digests: Mapping[str, str], *, installed: str | None) -> None:
    """Raise, naming the files, unless ``digests`` (path -> digest) are exactly the pin's.

    Parameters
    ----------
    pin : CorpusPin
    digests : mapping of str to str
        :func:`file_digest` of every file the reader found, by relative path.
    installed : str or None
        The package version installed here, for the message.
    """
    changed = sorted(p for p in pin.files if p in digests and digests[p] != pin.files[p])
    missing = sorted(p for p in pin.files if p not in digests)
    new = sorted(p for p in digests if p not in pin.files)
    if not (changed or missing or new):
        return
    parts = []
    for word, names in (("changed", changed), ("missing", missing), ("not pinned", new)):
        if names:
            more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
            parts.append(f"{word} {', '.join(names[:_LISTED])}{more}")
    differ = len(changed) + len(missing)
    raise ClusterClipError(
        f"corpus `{pin.corpus}`: {differ:,} of the {plural(len(pin.files), 'pinned file')} "
        f"{'differs' if differ == 1 else 'differ'} from the pin ({pin.package} {pin.version}; "
        f"installed: {installed or 'not as a package'}): {'; '.join(parts)}. {_fix(pin)}"
    )


def check_documents(pin: CorpusPin, *, documents: int, sha256: str) -> None:
    """Raise unless the reader cut the pinned files into the pinned documents.

    The files matched (:func:`check_files`), so a difference here means the reader
    changed (the heading split, the shortest section kept, the categories).

    >>> pin = CorpusPin("demo", "pkg", "1.0", {}, 3, "ab" * 32)
    >>> check_documents(pin, documents=3, sha256="ab" * 32)
    >>> check_documents(pin, documents=4, sha256="cd" * 32)
    Traceback (most recent call last):
    ...
    clusterclip.errors.ClusterClipError: corpus `demo`: the pinned files now read as 4 documents (sha256 cdcdcdcdcdcd...), but the pin says 3 documents (sha256 abababababab...): the reader changed. Re-pin in its own commit (python -m clusterclip.experiments.pins demo): it redefines every experiment on this corpus.
    """
    if documents == pin.documents and sha256 == pin.sha256:
        return
    raise ClusterClipError(
        f"corpus `{pin.corpus}`: the pinned files now read as {plural(documents, 'document')} "
        f"(sha256 {sha256[:12]}...), but the pin says {plural(pin.documents, 'document')} "
        f"(sha256 {pin.sha256[:12]}...): the reader changed. Re-pin in its own commit "
        f"(python -m clusterclip.experiments.pins {pin.corpus}): it redefines every "
        "experiment on this corpus."
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m clusterclip.experiments.pins CORPUS [PATH]``: write the pin of the installed files."""
    from clusterclip.experiments import corpora

    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in corpora.PINNED:
        print(
            f"usage: python -m clusterclip.experiments.pins {{{','.join(corpora.PINNED)}}} [PATH]"
        )
        return 2
    name = args[0]
    pin = corpora.pin_installed(name)
    path = Path(args[1]) if len(args) > 1 else corpora.PINNED[name]
    pin.write(path)
    print(f"{name}: {pin.describe()}, documents sha256 {pin.sha256} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
