from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy as sa
import sqlalchemy.exc

from coevo.search.errors import StorageError
from coevo.search.storage import open_storage, resolve_storage_url, side_engine


def test_postgres_urls_use_the_installed_driver() -> None:
    assert resolve_storage_url("postgresql://u@h/db").startswith("postgresql+psycopg://")
    assert resolve_storage_url(None) == "sqlite:///runs/coevo.sqlite3"


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
