"""Every side table goes with its study, whichever modules the deleting process imported.

The rows are written in one process and purged in another that has imported none of the
modules owning them (as ``coevo runs delete`` may be), then counted with plain SQL.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from coevo.search.side_tables import SIDE_TABLES
from tests.helpers import coevo_env

OWNERS = ("coevo.search.workers", "coevo.search.round_log", "coevo.knowledge.store", "coevo.agent.reasoners.cache")

FILL = """
import sys
from coevo.agent.reasoners.cache import CachedReply, ResponseCache
from coevo.knowledge.heuristics import KnowledgeBase
from coevo.knowledge.store import KnowledgeStore, default_kb_url
from coevo.search.round_log import RoundLogs
from coevo.search.workers import Coordination

storage = sys.argv[1]
for study in ("gone", "kept"):
    ResponseCache(storage).put(study, "k1", "model", CachedReply("reply", 10, 2))
    RoundLogs(storage).write(study, 1, {"round": 1})
    coordination = Coordination(storage, study)
    coordination.register("w1")
    assert coordination.try_lease("lead", "w1", 60.0)
    assert coordination.claim("p1", 0, 5, lambda n: None) == ("new", None)
    kb = KnowledgeBase()
    kb.upsert("a", 0, text="claim A", scope={"problem": "nb201", "niche": None}, confidence=0.6, support=[1], refute=[])
    KnowledgeStore(default_kb_url(storage)).save(study, kb, round_no=0, by="offline", spec={"problem": "nb201"})
"""

PURGE = """
import json, sys
owners = {owners!r}
before = [m for m in owners if m in sys.modules]
from coevo.search.side_tables import purge_side_tables
notes = purge_side_tables(sys.argv[1], "gone", "delete")
print(json.dumps({{"before": before, "notes": notes}}))
"""


def _rows_by_study(db: Path) -> dict[str, dict[str, int]]:
    """Table -> study -> row count, for every table of ``db`` that has a ``study`` or ``kb`` column."""
    counts: dict[str, dict[str, int]] = {}
    with sqlite3.connect(db) as con:
        for (table,) in con.execute("select name from sqlite_master where type = 'table'"):
            columns = {row[1] for row in con.execute(f"pragma table_info({table})")}
            key = "study" if "study" in columns else "kb" if "kb" in columns else None
            if key is not None:
                counts[table] = dict(con.execute(f"select {key}, count(*) from {table} group by {key}").fetchall())
    return counts


def _python(code: str, *args: str) -> str:
    command = [sys.executable, "-c", textwrap.dedent(code), *args]
    done = subprocess.run(command, capture_output=True, text=True, env=coevo_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_deleting_a_study_purges_every_side_table_without_their_modules_imported(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    storage = f"sqlite:///{db}"
    _python(FILL, storage)
    filled = {**_rows_by_study(db), **_rows_by_study(tmp_path / "s.kb.db")}
    side = {t: n for t, n in filled.items() if n.get("gone")}
    # replies, round logs, claims, leases, workers, knowledge bases and their versions: each holds rows of both studies
    assert len(side) >= 7 and all(n.get("kept") for n in side.values()), filled

    report = json.loads(_python(PURGE.format(owners=OWNERS), storage))
    assert report["before"] == []  # the purging process had imported none of the modules owning the tables
    assert len(report["notes"]) == 4, report["notes"]  # claims, round logs, knowledge base, cached replies
    after = {**_rows_by_study(db), **_rows_by_study(tmp_path / "s.kb.db")}
    assert {t: after[t].get("gone", 0) for t in side} == dict.fromkeys(side, 0)
    assert {t: after[t].get("kept", 0) for t in side} == {t: n["kept"] for t, n in side.items()}  # the other study keeps its rows


def test_every_listed_purge_loads() -> None:
    assert [t.load().__module__ for t in SIDE_TABLES] == list(OWNERS)
