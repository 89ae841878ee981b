"""Shared fixtures: every test runs in its own folder, so ./runs/ never leaks between tests.

Markers (declared in pyproject.toml): ``postgres`` is put on every test that asks for the
``postgres_url`` fixture (by name here; a test that asks for it at run time with
``request.getfixturevalue`` must carry the marker itself, and fails with that advice if it
does not); ``slow`` is put by hand on tests that take more than about 20 s, and
``make test-fast`` leaves them out.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

# Child processes (coevo workers and commands, figure scripts) get one OpenMP/BLAS thread each, like this
# process's torch below (_one_torch_thread): on a busy 2-core machine their spin-waiting thread pools made
# them several times slower. Set before torch loads; a value already in the environment wins.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import optuna  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402

# One Hypothesis profile for the whole suite: no per-example deadline (the default 200 ms fails a test whose example
# merely ran slowly on a loaded 2-core machine), the same examples on every run (derandomize: a failure reproduces
# and none appears or vanishes by chance; it implies no example database), and the reproduction blob printed with
# a failure. A test's own @settings(...) still overrides single values (max_examples, deadline=None where it says so).
hypothesis_settings.register_profile("coevo", deadline=None, derandomize=True, print_blob=True)
hypothesis_settings.load_profile("coevo")

SHARED = Path(__file__).resolve().parents[2] / "shared"
"""Data beside the checkout (``../shared``): present on the team's machines and in CI, absent from a plain clone."""

IN_CI = os.environ.get("CI") == "true"
"""Under CI what a test needs (PostgreSQL, ../shared) is part of the environment: its absence fails, never skips."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the ``postgres_url`` fixture ``postgres``.

    Under pytest-xdist (``make test`` runs ``-n auto --dist loadfile``) a test file runs on one
    worker, as its module fixtures and order expect; the PostgreSQL tests of different files share
    the database ``test`` and touch only studies and connections of their own.
    """
    for item in items:
        if "postgres_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session", autouse=True)
def _zoo_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One model-zoo cache for the whole run (each zoo model trains at most once), never the user's ~/.cache.

    Parallel workers share it (the folder above each worker's own temporary folder): the zoo
    locks a recipe while it trains, so a model that two workers need trains once.
    """
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cache = root / "coevo-cache"
    cache.mkdir(exist_ok=True)
    os.environ["COEVO_CACHE"] = str(cache)


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """One torch intra-op thread for the whole run.

    The tests train tiny models, where a second thread gains nothing, and on a busy 2-core
    machine (CI, or several jobs at once) torch's worker threads spin-wait for each other and
    make them many times slower. Tests that measure threads set them themselves.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


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
def _postgres_server() -> str:
    """The local PostgreSQL server (trust auth, database ``test``), checked once per session.

    Skipped with the reason when no server answers, except under CI (``CI=true``), where
    the server is part of the environment and its absence is a failure.
    """
    import sqlalchemy

    from coevo.search.storage import resolve_storage_url

    try:
        engine = sqlalchemy.create_engine(resolve_storage_url(POSTGRES_URL), connect_args={"connect_timeout": 3})
        with engine.connect():
            pass
        engine.dispose()
    except sqlalchemy.exc.OperationalError as exc:
        if IN_CI:
            pytest.fail(f"CI needs PostgreSQL at {POSTGRES_URL}: {str(exc).splitlines()[0]}")
        pytest.skip(f"no PostgreSQL server at {POSTGRES_URL} ({str(exc).splitlines()[0]}); CI runs these tests")
    return POSTGRES_URL


@pytest.fixture
def postgres_url(_postgres_server: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """The local PostgreSQL server's URL, for a test marked ``postgres`` (see the module doc).

    After the test a full garbage collection closes the connections of the storages it opened: optuna's
    ``RDBStorage`` sits in a reference cycle, so its pool outlives the last reference until a full collection,
    and the two test processes together would otherwise reach the server's ``max_connections``.
    """
    if request.node.get_closest_marker("postgres") is None:
        pytest.fail(f"{request.node.nodeid} uses PostgreSQL: mark it (or its parameter) with pytest.mark.postgres")
    yield _postgres_server
    gc.collect()
