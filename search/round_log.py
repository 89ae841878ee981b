"""Round logs of co-evolution searches, in a table of their own (``coevo_round_logs``).

One row per (study, round): what the round's reasoner did (knowledge changes, allocation,
rejections, LLM usage), as JSON. They used to be study user attributes
(``coevo.rounds.N``), which made ``optuna studies`` output thousands of characters wide;
:func:`read_round_logs` still reads those from studies written before the change.
"""

from __future__ import annotations

import json
import time
from typing import Any

import optuna
import sqlalchemy as sa

from coevo.search.side_tables import PurgeReason
from coevo.search.storage import has_table, side_engine

LEGACY_PREFIX = "coevo.rounds."
"""Study user-attribute prefix of round logs written by earlier coevo versions."""
SKIPPED_UPDATE = "knowledge update skipped:"
"""How a round log's ``changes`` list records a knowledge-base update the reasoner failed to make (followed by why)."""

metadata = sa.MetaData()
round_logs = sa.Table(
    "coevo_round_logs",
    metadata,
    sa.Column("study", sa.String(512), primary_key=True),
    sa.Column("round", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("log", sa.Text, nullable=False),
    sa.Column("at", sa.Float, nullable=False),
)


class RoundLogs:
    """The round logs in the database of study storage ``storage``.

    Raises:
        StorageError: the database cannot be opened.
    """

    def __init__(self, storage: str | None, *, create: bool = True) -> None:
        self.engine = side_engine(storage, metadata, create=create)
        self.create = create

    def write(self, study: str, round_no: int, log: dict[str, Any]) -> None:
        """Store (or replace: a rerun round rewrites its log) the log of ``round_no``."""
        text = json.dumps(log, default=str)
        with self.engine.begin() as conn:
            conn.execute(round_logs.delete().where(round_logs.c.study == study, round_logs.c.round == round_no))
            conn.execute(round_logs.insert().values(study=study, round=round_no, log=text, at=time.time()))

    def read(self, study: str) -> dict[int, dict[str, Any]]:
        """Round number -> log, for every logged round of ``study`` (none when a reader finds no table: nothing is created)."""
        if not self.create and not has_table(self.engine, round_logs.name):
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(round_logs.c.round, round_logs.c.log).where(round_logs.c.study == study)).all()
        return {int(r.round): json.loads(r.log) for r in rows}

    def delete(self, study: str) -> int:
        """Remove every log of ``study``; returns how many there were."""
        with self.engine.begin() as conn:
            return int(conn.execute(round_logs.delete().where(round_logs.c.study == study)).rowcount or 0)

    def count(self, study: str) -> int:
        """How many rounds of ``study`` are logged."""
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(round_logs).where(round_logs.c.study == study)).scalar_one())


def read_round_logs(storage: str | None, study: optuna.Study) -> dict[int, dict[str, Any]]:
    """Every round log of ``study``: the table's, plus legacy ones kept as study user attributes."""
    logs = {
        int(k.removeprefix(LEGACY_PREFIX)): v
        for k, v in study.user_attrs.items()
        if k.startswith(LEGACY_PREFIX) and k.removeprefix(LEGACY_PREFIX).isdigit() and isinstance(v, dict)
    }
    reader = RoundLogs(storage, create=False)  # a reader: it creates no table
    try:
        logs.update(reader.read(study.study_name))
    finally:
        reader.engine.dispose()
    return dict(sorted(logs.items()))


def purge_round_logs(storage: str | None, study: str, reason: PurgeReason) -> str | None:
    """Remove the round logs of ``study`` (listed in :data:`search.side_tables.SIDE_TABLES`)."""
    logs = RoundLogs(storage)
    try:
        n = logs.delete(study)
    finally:
        logs.engine.dispose()
    return f"{n} round logs" if n else None
