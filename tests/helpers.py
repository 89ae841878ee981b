"""Helpers shared by tests that kill real processes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def coevo_env() -> dict[str, str]:
    """Environment for a ``python -m agent.cli`` subprocess running this checkout."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def kill_after_trials(cmd: list[str], db: Path, trials: int, cwd: Path, timeout_s: float = 120) -> None:
    """Start ``cmd``, wait until ``db`` holds ``trials`` complete trials, then SIGKILL it.

    Fails if the process finishes first (raise its budget) or nothing happens in time.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "coevo.agent.cli", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=coevo_env()
    )
    deadline = time.time() + timeout_s
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
        try:
            with sqlite3.connect(db, timeout=1) as con:
                done = con.execute("select count(*) from trials where state = 'COMPLETE'").fetchone()[0]
        except sqlite3.OperationalError:
            continue
        if done >= trials:
            break
    assert proc.poll() is None, "the search finished before it could be killed; raise its budget"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
