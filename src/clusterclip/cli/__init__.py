"""The ``clusterclip`` command: a thin layer over the Python API.

Each sub-command lives in its own module ``clusterclip.cli.<name>`` that defines
``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``. Modules
import nothing heavy at import time, so ``clusterclip --help`` is instant.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from clusterclip import __version__
from clusterclip.errors import ClusterClipError

#: Sub-command name -> module, in the order shown by ``--help``.
COMMANDS = {
    "run": "clusterclip.cli.run",
    "demo": "clusterclip.cli.demo",
    "embed": "clusterclip.cli.embed",
    "add": "clusterclip.cli.add",
    "cluster": "clusterclip.cli.cluster",
    "dedup": "clusterclip.cli.dedup",
    "schedule": "clusterclip.cli.schedule",
    "report": "clusterclip.cli.report",
    "inspect": "clusterclip.cli.inspect",
    "export": "clusterclip.cli.export",
    "experiment": "clusterclip.cli.experiment",
}
#: Commands whose long steps show progress on stderr (their --help says how to silence it).
SHOWS_PROGRESS = ("run", "demo", "embed", "add", "cluster", "dedup", "schedule", "export")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clusterclip",
        description="ClusterClip Sampling: embed, cluster and schedule training documents "
        "so that rare topics are seen more and no document repeats more than R times.",
        epilog="Example: clusterclip demo    |    clusterclip run corpus.jsonl --workdir w "
        "--n-clusters 100 --epochs 3 --max-repeats 6",
    )
    parser.add_argument("--version", action="version", version=f"clusterclip {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name == module_name:  # sub-command not part of this build
                continue
            raise
        epilog = getattr(module, "EXAMPLE", None)
        if name in SHOWS_PROGRESS:
            from clusterclip.progress import SILENCE

            epilog = f"{epilog or ''}\n{SILENCE}\n".lstrip("\n")
        sub = subparsers.add_parser(
            name,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run, _flags=sub)
    return parser


#: What to do when the file system refuses (errno -> one sentence).
_OS_FIXES = {
    errno.EISDIR: "Pass a file path, not a directory.",
    errno.ENOTDIR: "A folder on that path is a file: pass another path.",
    errno.ENOSPC: "Free disk space, or write elsewhere.",
    errno.EACCES: "Check the permissions, or write elsewhere.",
    errno.EPERM: "Check the permissions, or write elsewhere.",
    errno.EROFS: "The file system is read-only: write elsewhere.",
    errno.ENOENT: "Check the path.",
}


@contextlib.contextmanager
def _one_line_warnings(command: str) -> Iterator[None]:
    """Print clusterclip's warnings as ``clusterclip CMD: warning: ...``, not Python's format.

    Python's format names a source line (``<frozen runpy>:88: UserWarning: ...``)
    that means nothing to a user of the command; other libraries' warnings keep it.
    """
    from clusterclip.errors import ClusterClipWarning

    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
            if not issubclass(category, ClusterClipWarning):
                shown(message, category, *args, **kwargs)
                return
            text = str(message).removeprefix("clusterclip: ")
            print(f"clusterclip {command}: warning: {text}", file=sys.stderr, flush=True)

        warnings.showwarning = show
        yield


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``clusterclip`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    from clusterclip.cli.flags import flag_map
    from clusterclip.cli.stops import sigterm_raises
    from clusterclip.errors import spelled_as_flags

    try:
        with (
            spelled_as_flags(flag_map(args._flags)),
            _one_line_warnings(args.command),
            sigterm_raises(),
        ):
            status = int(args._run(args) or 0)
        sys.stdout.flush()  # a reader that left shows up here, not in Python's exit flush
        return status
    except Exception as error:
        return _failed(args.command, error)
    except KeyboardInterrupt as stop:
        return _stopped(args.command, stop)


def _stopped(command: str, stop: KeyboardInterrupt) -> int:
    """Say that Ctrl-C or SIGTERM stopped the command; its exit status (130 or 143)."""
    from clusterclip.cli.stops import exit_status, stop_name

    print(f"clusterclip {command}: {stop_name(stop)}; rerun to resume.", file=sys.stderr)
    return exit_status(stop)


def _failed(command: str, error: Exception) -> int:
    """Say why the command failed; its exit status. An error of no known kind is raised again."""
    from clusterclip.cli.stops import stop_behind

    stop = stop_behind(error)
    if stop is not None:  # raised while unwinding from a stop: the stop is what happened
        return _stopped(command, stop)
    if isinstance(error, BrokenPipeError):
        # `clusterclip run ... | head`: the reader left. Stop quietly, as a process killed
        # by SIGPIPE does (status 128 + 13), so `set -o pipefail` sees the command did not
        # finish; stdout goes to /dev/null so that Python's final flush cannot complain.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    if isinstance(error, ClusterClipError):
        print(f"clusterclip {command}: error: {error}", file=sys.stderr)
        return 2
    if isinstance(error, MemoryError):
        print(
            f"clusterclip {command}: error: out of memory. Use a smaller budget, "
            "corpus or batch size, or a machine with more memory.",
            file=sys.stderr,
        )
        return 1
    if isinstance(error, OSError):  # the file system refused: no space, no permission, ...
        where = f": {error.filename}" if error.filename else ""
        fix = _OS_FIXES.get(error.errno, "")
        print(
            f"clusterclip {command}: error: {error.strerror or error}{where}."
            + (f" {fix}" if fix else ""),
            file=sys.stderr,
        )
        return 1
    raise error


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
