"""Helpers shared by tests that run or kill real processes, and the one way tests wait for something to happen."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

ROOT = Path(__file__).resolve().parents[1]

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout_s: float, what: str, *, every_s: float = 0.2) -> T:
    """Call ``predicate`` every ``every_s`` seconds until it returns a true value, and return that value.

    Waiting on a condition, not for a fixed time, keeps a test right on a loaded machine: it goes
    on as soon as the thing happened, and gives up only after ``timeout_s``. The predicate is
    asked once more at the deadline, so a slow last step is not a failure. Exceptions the
    predicate raises propagate (an ``assert`` inside it fails the wait at once).

    Raises:
        AssertionError: ``timeout_s`` passed first; the message says what did not happen (``what``).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        last_try = time.monotonic() >= deadline
        if value := predicate():
            return value
        if last_try:
            raise AssertionError(f"waited {timeout_s:g} s for {what}; it did not happen")
        time.sleep(min(every_s, max(0.0, deadline - time.monotonic())))


def coevo_env() -> dict[str, str]:
    """Environment for a ``python -m agent.cli`` subprocess running this checkout."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def kill_after_trials(cmd: list[str], db: Path, trials: int, cwd: Path, timeout_s: float = 300) -> None:
    """Start ``cmd``, wait until ``db`` holds ``trials`` complete trials, then SIGKILL it.

    Fails if the process finishes first (raise its budget) or the trials are not there within
    ``timeout_s`` (generous: start-up alone takes most of a minute on a loaded 2-core machine).
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "coevo.agent.cli", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=coevo_env()
    )

    def killable() -> bool:
        if proc.poll() is not None:
            return True  # finished: the assertion below says so
        try:
            with sqlite3.connect(db, timeout=1) as con:
                done = con.execute("select count(*) from trials where state = 'COMPLETE'").fetchone()[0]
        except sqlite3.OperationalError:  # the search has not created its tables yet
            return False
        return bool(done >= trials)

    try:
        wait_until(killable, timeout_s, f"{trials} complete trials in {db}")
    except AssertionError:
        proc.kill()
        proc.wait()
        raise
    assert proc.poll() is None, "the search finished before it could be killed; raise its budget"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def study_trials(storage: str, study: str) -> list[FrozenTrial]:
    """The trials of ``study`` at ``storage``, read through a storage whose connections are closed before returning.

    ``optuna.load_study(storage=URL)`` opens a new engine each call and optuna's storage sits in a reference cycle, so its
    pooled connection stays open until a full garbage collection: a test that polls a PostgreSQL study every 0.2 s
    would exhaust the server's ``max_connections`` (100) within a minute.
    """
    import optuna

    from coevo.search.storage import open_storage

    backend = open_storage(storage, create=False)
    try:
        return optuna.load_study(study_name=study, storage=backend).get_trials(deepcopy=False)
    finally:
        backend.engine.dispose()
