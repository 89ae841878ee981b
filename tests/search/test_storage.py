from __future__ import annotations

import gc
import uuid
from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy as sa
import sqlalchemy.exc

from coevo.search.errors import StorageError
from coevo.search.storage import DEFAULT_STORAGE, check_exists, open_storage, resolve_storage_url, shown_url, side_engine
from tests.helpers import wait_until


def test_postgres_urls_use_the_installed_driver() -> None:
    assert resolve_storage_url("postgresql://u@h/db").startswith("postgresql+psycopg://")
    assert resolve_storage_url(None) == "sqlite:///runs/coevo.sqlite3"


def test_shown_url_masks_a_password_and_leaves_the_rest_as_given() -> None:
    assert shown_url("postgresql://alice:s3cret@db.example:5432/coevo") == "postgresql://alice:***@db.example:5432/coevo"
    assert "s3cret" not in shown_url("postgresql+psycopg://alice:s3cret@h/db?sslmode=require")
    # no password: exactly as the user wrote it (no driver added, no port filled in)
    assert shown_url("postgresql://alice@h/db") == "postgresql://alice@h/db"
    assert shown_url("sqlite:///runs/x.sqlite3") == "sqlite:///runs/x.sqlite3"
    assert shown_url(None) == DEFAULT_STORAGE
    assert shown_url("not a url") == "not a url"


def test_side_engine_survives_a_creation_race(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    meta = sa.MetaData()
    sa.Table("t", meta, sa.Column("k", sa.Integer, primary_key=True))
    calls = {"n": 0}
    real = sa.MetaData.create_all

    def racing(self: sa.MetaData, *args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 1:  # another process created the table between check and CREATE
            raise sqlalchemy.exc.OperationalError("CREATE TABLE t", {}, Exception("table t already exists"))
        real(self, *args, **kwargs)

    monkeypatch.setattr(sa.MetaData, "create_all", racing)
    engine = side_engine(f"sqlite:///{tmp_path / 'x.db'}", meta)
    assert calls["n"] == 2 and sa.inspect(engine).has_table("t")


def test_side_engine_reports_a_dead_database() -> None:
    meta = sa.MetaData()
    sa.Table("t", meta, sa.Column("k", sa.Integer, primary_key=True))
    with pytest.raises(StorageError, match="cannot use storage"):
        side_engine("postgresql://nobody@127.0.0.1:9/none", meta)


def test_open_storage_twice_is_fine(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'o.db'}"
    first = open_storage(url)
    study_id = first.create_new_study([optuna.study.StudyDirection.MINIMIZE], "kept")
    second = open_storage(url)  # the schema is there: opened, not re-created
    assert second.get_study_id_from_name("kept") == study_id and second.get_current_version() == first.get_current_version()


@pytest.mark.postgres
def test_searches_in_one_process_leave_no_database_connections_open(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # optuna's storages sit in reference cycles: without the runner closing them, every search in a
    # long process (chat, the Python API in a loop) left about five connections until a full collection
    from coevo.search.nb201 import NB201Problem
    from coevo.search.runner import run_search

    app = f"coevo-conns-{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(resolve_storage_url(postgres_url), connect_args={"application_name": "coevo-test-admin"})
    query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = :app")

    def none_open() -> bool:
        with admin.connect() as conn:
            return conn.execute(query, {"app": app}).scalar_one() == 0

    monkeypatch.setenv("PGAPPNAME", app)  # libpq names every connection the searches open
    gc.collect()
    gc.disable()  # so only the runner can have closed them
    try:
        for _ in range(3):
            problem = NB201Problem(dataset="cifar10", device="fpga")
            result = run_search(problem, "random", budget=3, storage=postgres_url, study_name=f"conns-{uuid.uuid4().hex[:8]}")
            assert result.evaluations == 3
            # the server ends a closed connection's backend a moment after the client closed it
            wait_until(none_open, 10, "the search's connections to close")
    finally:
        gc.enable()
        admin.dispose()


def test_closing_connections_leaves_a_shared_in_memory_database_alone() -> None:
    # a shared-cache in-memory database lives as long as one connection to it: closing the pools
    # at a search's end (SQLAlchemy gives this URL a queue pool) deleted the study under the caller
    from coevo.search.nb201 import NB201Problem
    from coevo.search.runner import run_search

    url = "sqlite:///file::memory:?cache=shared&uri=true"
    name = f"mem-{uuid.uuid4().hex[:8]}"
    problem = NB201Problem(dataset="cifar10", device="fpga")
    assert run_search(problem, "random", budget=3, storage=url, study_name=name).evaluations == 3
    assert run_search(problem, "random", budget=5, storage=url, study_name=name).evaluations == 5  # resumed, not lost


def test_a_storage_path_that_is_a_folder_says_so(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match=rf"{tmp_path} is a folder; give a file path, e\.g\. sqlite:///{tmp_path}/coevo\.sqlite3"):
        open_storage(f"sqlite:///{tmp_path}")


def test_a_missing_storage_says_pass_storage_only_to_someone_who_did_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageError, match=r"runs/coevo.sqlite3' does not exist \(run a search first, or pass --storage\)"):
        check_exists(None)
    given = f"sqlite:///{tmp_path / 'typo.sqlite3'}"
    with pytest.raises(StorageError, match=r"does not exist \(check the path, or run a search that writes there first\)") as info:
        check_exists(given)
    assert "--storage" not in str(info.value)
