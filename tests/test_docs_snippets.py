"""The documentation runs: every Python snippet executes, every command line parses.

Python: each ```python block of README.md and docs/*.md runs as written, as a
script of its own, in a fresh directory holding the documented preparation
(:func:`prepared`): the corpus files the pages name and a work directory made
by the real ``clusterclip run``. A block that cannot run on one machine is
marked in the markdown, on the line before its fence::

    <!-- snippet: skip needs a multi-node Ray cluster -->

and is reported as skipped with that reason (keep such marks rare).

Commands: every ``clusterclip <command> ...`` line of the other fenced blocks
(and of each sub-command's ``--help`` examples) is parsed by the real argument
parser and its option values are validated by the stages' option classes,
without running anything. Every ```toml block is loaded as a run configuration.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.product_support import client_python, kjv_records, require_module

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
SKIP_MARK = re.compile(r"<!--\s*snippet:\s*skip\s+(.+?)\s*-->\s*$")
#: Most Python blocks allowed to be skipped across all pages (each needs its reason).
MAX_SKIPPED = 2


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    code: str
    skip: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def fenced_blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = SKIP_MARK.search(before)
        blocks.append(
            Block(page, line, match.group(1), match.group(2), mark.group(1) if mark else None)
        )
    return blocks


BLOCKS = [block for page in PAGES for block in fenced_blocks(page)]
PYTHON = [block for block in BLOCKS if block.language == "python"]


def test_the_documentation_has_python_snippets_and_few_are_skipped():
    assert len(PYTHON) >= 10, [block.name for block in PYTHON]
    skipped = {block.name: block.skip for block in PYTHON if block.skip}
    assert len(skipped) <= MAX_SKIPPED, skipped
    print("skipped snippets:", skipped or "none")


# --------------------------------------------------------------------------- Python snippets


def env(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "HF_HUB_OFFLINE": "1",
        "CLUSTERCLIP_PROGRESS": "0",
        "HF_DATASETS_CACHE": str(tmp / "hf-datasets-cache"),
    }


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """The preparation the pages describe, made once and copied for every snippet.

    - ``corpus/part-0.jsonl``, ``corpus/part-1.jsonl``: 150 KJV verses each
      (``{"id", "book", "chapter", "verse", "text"}`` per line);
    - ``data/part-0.jsonl``: the same first file (README, docs/embed.md);
    - ``work``: ``clusterclip run corpus/ --workdir work --n-clusters 100``, with
      the model-free tfidf encoder to keep the test fast (the snippets read the
      work directory; none depends on the encoder);
    - ``labels.npy``: ``np.save("labels.npy", WorkDir("work").labels())``.
    """
    require_module("sklearn")  # the tfidf encoder
    root = tmp_path_factory.mktemp("docs-prepared")
    verses = kjv_records(step=100)[:300]  # spread over the books
    for folder, name, part in (("corpus", "part-0", verses[:150]), ("corpus", "part-1", verses[150:]),
                               ("data", "part-0", verses[:150])):  # fmt: skip
        (root / folder).mkdir(exist_ok=True)
        lines = "".join(__import__("json").dumps(r) + "\n" for r in part)
        (root / folder / f"{name}.jsonl").write_text(lines, encoding="utf-8")
    command = [sys.executable, "-m", "clusterclip", "run", "corpus/", "--workdir", "work",
               "--n-clusters", "100", "--encoder", "tfidf"]  # fmt: skip
    done = subprocess.run(command, cwd=root, env=env(root), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    from clusterclip.io import WorkDir

    np.save(root / "labels.npy", WorkDir(root / "work").labels())
    return root


#: Libraries whose snippets run in their own environment (``.venvs/NAME``, built by make test).
CLIENT_ENVS = {"streaming": "streaming", "litdata": "litdata"}
#: ``ModuleNotFoundError: No module named 'x'`` or clusterclip's install hint.
MISSING = re.compile(r"No module named '([\w.]+)'|`([\w.]+)` is needed for this step")


@pytest.mark.slow
@pytest.mark.parametrize("block", PYTHON, ids=[block.name for block in PYTHON])
def test_python_snippet_runs_as_written(block, prepared, tmp_path):
    if block.skip:
        pytest.skip(f"marked in {block.name}: {block.skip}")
    where = tmp_path / "snippet"
    shutil.copytree(prepared, where)
    script = where / "snippet.py"
    script.write_text(block.code, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=where, env=env(tmp_path),
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    if done.returncode != 0 and (missing := MISSING.search(done.stderr)):
        module = missing.group(1) or missing.group(2)
        if module.split(".")[0] in CLIENT_ENVS:  # a trainer library with its own environment
            python = client_python(CLIENT_ENVS[module.split(".")[0]])  # skip, or fail under CI
            done = subprocess.run([str(python), str(script)], cwd=where, env=env(tmp_path),
                                  capture_output=True, text=True, timeout=900)  # fmt: skip
        else:
            require_module(module)  # skip, or fail under CI=true
    assert done.returncode == 0, f"{block.name} failed:\n{block.code}\n{done.stderr[-4000:]}"


# --------------------------------------------------------------------------- command lines


def command_lines(text: str) -> list[str]:
    """``clusterclip ...`` commands of a fenced shell block (or of a --help example).

    Continuation lines are joined and ``[--optional parts]`` unwrapped. In a
    block that shows prompts (``$ cmd`` followed by its output) only the
    prompted lines are commands; elsewhere a line is a command when its second
    word is a lower-case word (so ``clusterclip run: done`` output is not).
    """
    joined = re.sub(r"\\\n\s*", " ", text).splitlines()
    prompted = any(line.lstrip().startswith("$ ") for line in joined)
    found = []
    for raw in joined:
        line = raw.strip()
        if prompted:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        line = line.replace("python -m clusterclip.experiments.lm", "clusterclip experiment lm")
        line = line.replace("python -m clusterclip ", "clusterclip ")
        if re.match(r"clusterclip [a-z][a-z-]*(\s|$)", line):
            found.append(re.sub(r"\[([^\]]*)\]", r"\1", line))
    return found


def shell_words(line: str) -> list[str]:
    """The words of the command, up to a redirection, pipe or ``&&`` (comments dropped)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = []
    for word in lexer:
        if word and set(word) <= set("|&;<>()"):
            break
        words.append(word)
    return words


def documented_commands() -> list[tuple[str, str]]:
    found = [(block.name, line) for block in BLOCKS if block.language != "python"
             for line in command_lines(block.code)]  # fmt: skip
    from clusterclip.cli import COMMANDS

    for name, module_name in COMMANDS.items():
        example = getattr(__import__(module_name, fromlist=["EXAMPLE"]), "EXAMPLE", "") or ""
        found += [(f"clusterclip {name} --help", line) for line in command_lines(example)]
    return found


COMMAND_LINES = documented_commands()


def test_every_documented_command_is_found():
    pages = {where.split(":")[0] for where, _ in COMMAND_LINES}
    assert len(COMMAND_LINES) >= 30 and {"README.md", "docs/scaling.md"} <= pages, COMMAND_LINES


@pytest.mark.parametrize(
    "where, line", COMMAND_LINES, ids=[f"{w} {c[:60]}" for w, c in COMMAND_LINES]
)
def test_documented_command_parses(where, line, capsys):
    from clusterclip.cli import build_parser
    from clusterclip.cli.flags import section_values
    from clusterclip.config import SECTIONS

    argv = shell_words(line)[1:]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"{where}: `{line}` does not parse:\n{capsys.readouterr().err}")
    for section, options in SECTIONS.items():  # the values, as each stage would check them
        values = section_values(args, section)
        if values:
            options(**values)


TOML = [block for block in BLOCKS if block.language == "toml"]


@pytest.mark.parametrize("block", TOML, ids=[block.name for block in TOML])
def test_documented_config_file_is_a_valid_run_config(block):
    """A ```toml block is a config file: every key known, every value valid."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = require_module("tomli")
    from clusterclip.config import config_from_mapping

    config_from_mapping(tomllib.loads(block.code), where=f" in {block.name}")
