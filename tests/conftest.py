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


POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The local PostgreSQL server (trust auth, database ``test``).

    Skipped with the reason when no server answers, except under CI (``CI=true``), where
    the server is part of the environment and its absence is a failure.
    """
    import os

    import sqlalchemy

    from search.storage import resolve_storage_url

    try:
        engine = sqlalchemy.create_engine(resolve_storage_url(POSTGRES_URL), connect_args={"connect_timeout": 3})
        with engine.connect():
            pass
        engine.dispose()
    except sqlalchemy.exc.OperationalError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs PostgreSQL at {POSTGRES_URL}: {str(exc).splitlines()[0]}")
        pytest.skip(f"no PostgreSQL server at {POSTGRES_URL} ({str(exc).splitlines()[0]}); CI runs these tests")
    return POSTGRES_URL
