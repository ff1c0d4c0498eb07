"""A stop (Ctrl-C, SIGTERM) is reported as a stop even when it surfaces as another error.

Python raises a signal's exception wherever the main thread is. Inside
``threading.Condition.wait`` that is between the lock's release and its
reacquiring, and the ``with`` block then fails on the way out with
``RuntimeError: release unlocked lock`` (seen in a stopped ``clusterclip run``,
which printed a traceback and exited 1 instead of saying what it did not run).
"""

from __future__ import annotations

import threading

import pytest

from clusterclip.cli import main
from clusterclip.cli.run import run_to_the_end
from clusterclip.cli.stops import Terminated, stop_behind


def _stopped_inside_a_lock() -> None:
    """What the stopped run did: the stop lands inside a lock, whose release then fails."""
    lock = threading.Lock()
    try:
        raise Terminated()
    except KeyboardInterrupt:
        lock.release()  # RuntimeError: release unlocked lock, chained to the stop


def test_an_error_raised_while_unwinding_from_a_stop_is_that_stop():
    with pytest.raises(RuntimeError) as caught:
        _stopped_inside_a_lock()
    assert isinstance(stop_behind(caught.value), Terminated)


def test_an_error_of_its_own_is_not_a_stop():
    try:
        try:
            raise ValueError("first")
        except ValueError:
            raise RuntimeError("second") from None
    except RuntimeError as error:
        assert stop_behind(error) is None


def test_a_run_stopped_inside_a_lock_says_what_did_not_run(capsys):
    from clusterclip.pipeline import StageLedger

    def start(log, ledger: StageLedger):
        _stopped_inside_a_lock()

    status = run_to_the_end(start, workdir="w")
    err = capsys.readouterr().err
    assert status == 143
    assert "clusterclip run: terminated (SIGTERM): " in err
    assert "Rerun the same command to finish" in err


def test_a_run_that_fails_on_its_own_still_raises():
    def start(log, ledger):
        raise RuntimeError("a bug, not a stop")

    with pytest.raises(RuntimeError, match="a bug, not a stop"):
        run_to_the_end(start, workdir="w")


def test_a_command_stopped_inside_a_lock_exits_as_stopped(monkeypatch, capsys):
    """``main``'s own handler: the command's work stopped inside a lock."""
    import clusterclip.cli.schedule as command

    monkeypatch.setattr(command, "run", lambda args: _stopped_inside_a_lock())
    status = main(["schedule", "--workdir", "w"])
    assert status == 143
    assert (
        capsys.readouterr().err == "clusterclip schedule: terminated (SIGTERM); rerun to resume.\n"
    )


def test_a_command_that_fails_on_its_own_still_raises(monkeypatch):
    import clusterclip.cli.schedule as command

    def fails(args):
        raise RuntimeError("a bug, not a stop")

    monkeypatch.setattr(command, "run", fails)
    with pytest.raises(RuntimeError, match="a bug, not a stop"):
        main(["schedule", "--workdir", "w"])
