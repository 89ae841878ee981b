"""Shared fixtures: every test runs in its own folder, so ./runs/ never leaks between tests."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture
def storage(tmp_path: Path) -> str:
    """A fresh SQLite storage URL in the test's folder."""
    return f"sqlite:///{tmp_path / 'study.sqlite3'}"
