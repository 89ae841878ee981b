"""The revision a figure records: dirty for changed code, not for the figure's own outputs under docs/."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from coevo.figures._common import git_revision

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _git(tmp_path, "init", "-q")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "table.csv").write_text("a\n1\n")
    (tmp_path / "code.py").write_text("X = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # a figure run from a subfolder sees the whole tree
    return tmp_path


def test_a_changed_output_under_docs_leaves_the_revision_clean(repo: Path) -> None:
    head = _git(repo, "rev-parse", "--short=12", "HEAD")
    (repo / "docs" / "table.csv").write_text("a\n2\n")
    assert git_revision.__wrapped__() == head


def test_changed_code_marks_the_revision_dirty(repo: Path) -> None:
    head = _git(repo, "rev-parse", "--short=12", "HEAD")
    (repo / "code.py").write_text("X = 2\n")
    assert git_revision.__wrapped__() == head + "-dirty"
