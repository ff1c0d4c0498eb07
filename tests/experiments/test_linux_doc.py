"""The linux-doc corpus: sections cut at reST headings, the top folder as the category,
no translations, and a pin that names the files that differ from it (issue 30 item 8)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from tests.product_support import in_ci

from clusterclip.errors import ClusterClipError
from clusterclip.experiments import corpora, pins
from clusterclip.experiments.corpora import LINUX_DOC_DIR, PINNED, load_corpus, read_linux_doc
from clusterclip.experiments.pins import CorpusPin, file_digest, installed_version

ADMIN = """\
.. SPDX-License-Identifier: GPL-2.0

==============
The admin book
==============

Opening words of the admin guide, long enough to be kept as a section.

Booting
-------

How the kernel boots, in enough words to pass the shortest-section rule.

Tiny
----

short
"""
NET = """\
Sockets
=======

Everything about sockets, in a paragraph that is comfortably long enough.
"""
INDEX = """\
Kernel docs
===========

The top-level index of the documentation tree, with more than forty characters.
"""


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode("utf-8")))


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "Documentation"
    _write(root, "admin-guide/book.rst.gz", ADMIN)
    _write(root, "networking/sub/sockets.rst.gz", NET)
    _write(root, "index.rst.gz", INDEX)
    _write(root, "translations/zh_CN/book.rst.gz", ADMIN.replace("admin", "zh"))
    _write(root, "admin-guide/notes.txt.gz", INDEX)  # not reST: not read
    return root


def _pin_of(root: Path) -> CorpusPin:
    corpus = read_linux_doc(root)
    digests = {
        path.relative_to(root).as_posix(): file_digest(gzip.decompress(path.read_bytes()))
        for path in root.rglob("*.rst.gz")
        if "translations" not in path.parts
    }
    return CorpusPin(
        "linux-doc", "linux-doc-6.1", "6.1.192-3", digests, len(corpus), corpus.sha256()
    )


def test_sections_are_cut_at_headings_and_short_ones_dropped(tree):
    corpus = read_linux_doc(tree)
    assert corpus.ids == [
        "admin-guide/book.rst.gz#1",  # #0 is the SPDX line alone: under 40 characters
        "admin-guide/book.rst.gz#2",
        "index.rst.gz#0",
        "networking/sub/sockets.rst.gz#0",
    ]  # "Tiny" (#3) has five characters of text: dropped
    assert corpus.texts[0].startswith("The admin book\n\nOpening words")
    assert corpus.texts[1].startswith("Booting\n\nHow the kernel boots")
    assert "----" not in corpus.texts[1] and "=====" not in corpus.texts[0]  # underlines go


def test_the_category_is_the_top_folder_and_translations_are_skipped(tree):
    corpus = read_linux_doc(tree)
    assert corpus.categories == ["admin-guide", "admin-guide", "root", "networking"]
    assert not any(
        "translations" in i or "zh" in t for i, t in zip(corpus.ids, corpus.texts, strict=True)
    )
    assert corpus.name == "linux-doc" and "unpinned: 3 files, 4 documents" in corpus.source


def test_a_matching_pin_reads_and_says_so(tree):
    corpus = read_linux_doc(tree, pin=_pin_of(tree), installed="6.1.192-3")
    assert len(corpus) == 4
    assert corpus.source == "linux-doc-6.1 6.1.192-3 (pinned: 3 files, 4 documents)"


def test_a_changed_file_fails_the_pin_naming_it(tree):
    pin = _pin_of(tree)
    _write(tree, "networking/sub/sockets.rst.gz", NET + "\nA paragraph added upstream.\n")
    expected = (
        r"^corpus `linux-doc`: 1 of the 3 pinned files differs from the pin \(linux-doc-6.1 "
        r"6.1.192-3; installed: 6.1.200-1\): changed networking/sub/sockets.rst.gz\. Install the "
        r"pinned version \(apt-get install linux-doc-6.1=6.1.192-3\), or read these files as "
        r"another experiment with --corpus-pin=off"
    )
    with pytest.raises(ClusterClipError, match=expected):
        read_linux_doc(tree, pin=pin, installed="6.1.200-1")


def test_missing_and_new_files_fail_the_pin_naming_them(tree):
    pin = _pin_of(tree)
    (tree / "index.rst.gz").unlink()
    _write(tree, "hwmon/new-chip.rst.gz", NET)
    with pytest.raises(ClusterClipError) as caught:
        read_linux_doc(tree, pin=pin, installed=None)
    message = str(caught.value)
    assert "1 of the 3 pinned files differs" in message
    assert "missing index.rst.gz; not pinned hwmon/new-chip.rst.gz" in message
    assert "installed: not as a package" in message


def test_a_changed_reader_fails_the_pin(tree, monkeypatch):
    pin = _pin_of(tree)
    monkeypatch.setattr(corpora, "_MIN_SECTION_CHARS", 1)  # the SPDX line and "Tiny" count
    with pytest.raises(ClusterClipError, match=r"now read as 6 documents .* says 4 documents"):
        read_linux_doc(tree, pin=pin)


def test_the_pin_round_trips_through_its_file(tree, tmp_path):
    pin = _pin_of(tree)
    pin.write(tmp_path / "pin.json.gz")
    assert CorpusPin.read(tmp_path / "pin.json.gz") == pin
    first = (tmp_path / "pin.json.gz").read_bytes()
    pin.write(tmp_path / "pin.json.gz")
    assert (tmp_path / "pin.json.gz").read_bytes() == first  # the same pin, the same bytes


def test_the_shipped_pin_records_package_files_and_documents():
    pin = CorpusPin.read(PINNED["linux-doc"])
    assert (pin.package, pin.version) == ("linux-doc-6.1", "6.1.192-3")
    assert (len(pin.files), pin.documents) == (2841, 19309)
    assert not any(p.startswith("translations/") for p in pin.files)
    assert all(p.endswith(".rst.gz") for p in pin.files)


def test_installed_version_reads_dpkg_status(tmp_path):
    status = tmp_path / "status"
    status.write_text(
        "Package: linux-doc-6.1\nStatus: deinstall ok config-files\nVersion: 6.1.1-1\n\n"
        "Package: linux-doc-6.1\nStatus: install ok installed\nVersion: 6.1.192-3\n"
        "Description: docs\n more text: with a colon\n"
    )
    assert installed_version("linux-doc-6.1", status=status) == "6.1.192-3"
    assert installed_version("linux-doc-6.2", status=status) is None
    assert installed_version("x", status=tmp_path / "none") is None


def test_an_unknown_pin_mode_is_refused():
    with pytest.raises(ClusterClipError, match=r"^`corpus_pin` must be one of check, off"):
        load_corpus("linux-doc", pin="maybe")


def test_pins_command_refuses_an_unpinned_corpus(capsys):
    assert pins.main(["kjv"]) == 2
    assert "usage: python -m clusterclip.experiments.pins {linux-doc}" in capsys.readouterr().out


def require_linux_doc() -> None:
    """Skip without the package, except under CI=true (the install script installs it)."""
    if LINUX_DOC_DIR.is_dir():
        return
    message = f"{LINUX_DOC_DIR} missing: apt-get install -y linux-doc-6.1"
    if in_ci():
        pytest.fail(f"CI=true needs it (scripts/install-test-corpora.sh): {message}")
    pytest.skip(message)


def installed_matches_pin() -> bool:
    """True when the installed files are the pinned ones (False once Debian moves on)."""
    try:
        load_corpus("linux-doc")
    except ClusterClipError as error:
        assert "differ" in str(error) and "--corpus-pin=off" in str(error)
        return False
    return True


def test_the_installed_corpus_is_the_pinned_one_or_is_refused():
    require_linux_doc()
    unpinned = load_corpus("linux-doc", pin="off")
    if installed_matches_pin():
        corpus = load_corpus("linux-doc")
        assert (len(corpus), len(set(corpus.categories))) == (19309, 77)
        assert corpus.sha256() == unpinned.sha256()
        assert corpus.source.startswith("linux-doc-6.1 6.1.192-3 (pinned")
    else:  # another Debian release: still read with the pin off, and said so
        assert "unpinned" in unpinned.source
    assert "translations" not in {c for c in unpinned.categories}
