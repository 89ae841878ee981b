"""A search refused for a bad companion (a --kb-from source, a corrupt knowledge store) writes nothing: no new SQLite
file, no change to an existing study (found by an audit of bad input)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from coevo.agent.cli import main
from tests.helpers import coevo_env

SEARCH = ["search", "--problem", "nb201", "--proposer", "pelnas"]


def _dump(path: Path) -> list[str]:
    """Every table's rows (SQLite may rewrite a page's bytes without changing a row)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return list(conn.iterdump())


def test_a_missing_kb_from_source_creates_no_default_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*SEARCH, "--budget", "2", "--kb-from", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_corrupt_knowledge_store_stops_the_search_before_it_touches_the_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    storage = f"sqlite:///{tmp_path / 's.sqlite3'}"
    # a process of its own: what an in-process run leaves to finish later (a lease's release) must not land in the check
    first = [sys.executable, "-m", "coevo.agent.cli", *SEARCH, "--budget", "2", "--storage", storage, "--study", "x"]
    subprocess.run(first, check=True, capture_output=True, env=coevo_env(), timeout=300)
    before = _dump(tmp_path / "s.sqlite3")
    (tmp_path / "s.kb.sqlite3").write_bytes(os.urandom(5000))
    assert main([*SEARCH, "--budget", "4", "--storage", storage, "--study", "x"]) == 2
    assert "is damaged" in capsys.readouterr().err
    assert _dump(tmp_path / "s.sqlite3") == before  # budget, worker rows, leases: every row unchanged
    assert optuna.load_study(study_name="x", storage=storage).user_attrs["coevo.budget"] == 2


def test_a_corrupt_knowledge_store_beside_no_study_yet_creates_none(tmp_path: Path) -> None:
    (tmp_path / "n.kb.sqlite3").write_bytes(os.urandom(5000))
    assert main([*SEARCH, "--budget", "2", "--storage", f"sqlite:///{tmp_path / 'n.sqlite3'}"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.kb.sqlite3"]


def test_a_knowledge_store_path_that_is_a_folder_stops_the_search_before_it_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.kb.sqlite3").mkdir()
    assert main([*SEARCH, "--budget", "2", "--storage", f"sqlite:///{tmp_path / 's.sqlite3'}"]) == 2
    assert "s.kb.sqlite3, is a folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.kb.sqlite3"]
