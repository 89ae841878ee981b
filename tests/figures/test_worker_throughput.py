"""The worker-throughput figure runs end to end on a small budget (it has no other test, and had rotted once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.figures import worker_throughput


def test_the_figure_starts_workers_and_prints_one_row_per_worker_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    storage = f"sqlite:///{tmp_path / 'w.sqlite3'}"
    argv = ["--storage", storage, "--workers", "1,2", "--query-budget", "6", "--modes", "query", "--runs", "2"]
    assert worker_throughput.main(argv) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| query")]
    assert [int(r[1]) for r in rows] == [1, 2]
    assert all(r[2].strip() == "6" for r in rows)  # exactly the budget paid, in every run
    assert all(len(r[4].split(",")) == 2 for r in rows)  # each run's rate beside the median
    assert all(float(r[3]) > 0 for r in rows)
