"""The versioned knowledge store: history, evidence, human decisions, schema, concurrency, errors."""

from __future__ import annotations

import multiprocessing
import sqlite3
import uuid
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

from coevo.knowledge import KnowledgeBase
from coevo.knowledge.store import EvidenceRow, KnowledgeStore, default_kb_url
from coevo.search.errors import StorageError, UserInputError

SPEC = {"problem": "nb201", "dataset": "cifar10", "device": "fpga"}


def _kb(*claims: tuple[str, str, float], round_no: int = 0) -> KnowledgeBase:
    kb = KnowledgeBase()
    for key, text, confidence in claims:
        kb.upsert(key, round_no, text=text, scope={**SPEC, "niche": None}, confidence=confidence, support=[1, 2], refute=[3])
    return kb


@pytest.fixture
def store(tmp_path: Path) -> KnowledgeStore:
    return KnowledgeStore(f"sqlite:///{tmp_path / 'kb.sqlite3'}")


def test_default_location_is_beside_the_study_file() -> None:
    assert default_kb_url(None) == "sqlite:///runs/coevo.kb.sqlite3"
    assert default_kb_url("sqlite:////data/x/study.db") == "sqlite:////data/x/study.kb.db"
    assert default_kb_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"  # same database, own tables


def test_edits_append_versions_and_nothing_is_lost(store: KnowledgeStore) -> None:
    ids = store.save("s", _kb(("a", "claim A", 0.6), ("b", "claim B", 0.7)), round_no=0, by="offline", spec=SPEC)
    assert ids == {"a": "H1", "b": "H2"}
    kb = store.load("s")
    kb.upsert("a", 1, confidence=0.9, note="re-measured", support=[1, 2, 4], refute=[3])
    kb.upsert("c", 1, text="claim C", scope=SPEC, confidence=0.5)
    ids = store.save("s", kb, round_no=1, by="offline", spec=SPEC)
    assert ids["c"] == "H3"
    history = store.history("s", "H1")
    assert [(v.version, v.round, v.confidence) for v in history] == [(1, 0, 0.6), (2, 1, 0.9)]
    assert "re-measured" in history[1].change and "confidence 0.600->0.900" in history[1].change
    assert [v.version for v in store.history("s", "H2")] == [1]  # unchanged: no new version
    # evidence rows are appended only for new or changed verdicts
    rows = store.evidence("s", "H1", current=False)
    assert sorted((r.trial, r.kind, r.round) for r in rows) == [(1, "support", 0), (2, "support", 0), (3, "refute", 0), (4, "support", 1)]
    kb = store.load("s")
    kb.upsert("a", 2, support=[1, 2], refute=[3, 4])  # trial 4 changes sides
    store.save("s", kb, round_no=2, by="offline", spec=SPEC)
    current = {r.trial: r.kind for r in store.evidence("s", "H1")}
    assert current[4] == "refute" and len(store.evidence("s", "H1", current=False)) == 5


def test_a_persons_decision_stands_against_reasoner_saves(store: KnowledgeStore) -> None:
    store.save("s", _kb(("a", "claim A", 0.6)), round_no=0, by="offline", spec=SPEC)
    store.review("s", "H1", "rejected", why="contradicts the datasheet")
    kb = store.load("s")
    assert kb.heuristics["H1"].status == "rejected"
    stale = _kb(("a", "claim A, re-measured", 0.99))  # a worker that loaded before the review
    store.save("s", stale, round_no=1, by="offline", spec=SPEC)
    head = store.history("s", "H1")[-1]
    assert head.status == "rejected" and head.text == "claim A, re-measured" and head.version == 3
    assert "contradicts the datasheet" in store.history("s", "H1")[1].change
    again = store.review("s", "H1", "rejected", why="still contradicts it")
    assert again.head.version == 3 and not again.recorded  # the same decision again: no version
    assert len(store.history("s", "H1")) == 3
    with pytest.raises(UserInputError, match="say why"):
        store.review("s", "H1", "accepted", why=" ")
    with pytest.raises(UserInputError, match=r"no heuristic 'H9'.*ids: H1"):
        store.review("s", "H9", "accepted", why="x")
    with pytest.raises(UserInputError, match="no knowledge base named 'nope'"):
        store.history("nope", "H1")


def test_extra_evidence_from_the_validation_loop(store: KnowledgeStore) -> None:
    store.save("s", _kb(("a", "claim A", 0.6)), round_no=0, by="offline", spec=SPEC)
    rows = [EvidenceRow("H1", "s", 40, "refute", "record", -1.5, 2), EvidenceRow("H1", "s", 41, "support", "record", 0.3, 2)]
    store.save("s", store.load("s"), round_no=2, by="offline", spec=SPEC, extra_evidence=rows)
    store.save("s", store.load("s"), round_no=3, by="offline", spec=SPEC, extra_evidence=rows)  # same verdicts: no new rows
    record = [r for r in store.evidence("s", current=False) if r.source == "record"]
    assert [(r.trial, r.kind, r.effect) for r in record] == [(40, "refute", -1.5), (41, "support", 0.3)]
    assert store.load("s").heuristics["H1"].support == [1, 2]  # record rows are not the reasoner's evidence


def test_a_store_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.sqlite3'}"
    KnowledgeStore(url, busy_timeout_s=5.0)  # separate engine cache key from other tests
    with sqlite3.connect(tmp_path / "new.sqlite3") as con:
        con.execute("insert into coevo_kb_schema (version, applied_at) values (99, 0)")
    with pytest.raises(StorageError, match="schema version 99, newer than this coevo reads"):
        KnowledgeStore(url, busy_timeout_s=5.5)


def test_a_locked_store_gives_a_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "locked.sqlite3"
    store = KnowledgeStore(f"sqlite:///{path}", busy_timeout_s=0.2)
    store.save("s", _kb(("a", "claim A", 0.6)), round_no=0, by="offline", spec=SPEC)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with pytest.raises(StorageError, match=r"locked by another process.*nothing was written"):
            store.save("s", _kb(("b", "claim B", 0.6)), round_no=1, by="offline", spec=SPEC)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert set(store.load("s").heuristics) == {"H1"}


def test_an_unreachable_database_is_a_storage_error() -> None:
    with pytest.raises(StorageError, match=r"cannot use storage .postgresql://nobody@127\.0\.0\.1:9/none.*refused"):
        KnowledgeStore("postgresql://nobody@127.0.0.1:9/none")


# ---------------------------------------------------------------- concurrent writers

ROUNDS = 12
SHARED_KEYS = [f"shared-{k}" for k in range(4)]


def _writer(url: str, kb_name: str, worker: int) -> None:
    """One search worker: load, edit shared and own claims, save; every round."""
    store = KnowledgeStore(url)
    for r in range(ROUNDS):
        kb = store.load(kb_name)
        for key in [*SHARED_KEYS, f"own-{worker}-{r % 3}"]:
            kb.upsert(
                key, r, text=f"{key} by worker {worker} in round {r}", scope={}, confidence=0.5 + 0.01 * r, support=[100 * worker + r]
            )
        store.save(kb_name, kb, round_no=r, by=f"worker{worker}", spec=SPEC)


def _check_concurrent_writers(url: str) -> None:
    kb_name = f"concurrent-{uuid.uuid4().hex[:8]}"
    KnowledgeStore(url)  # schema created before the race
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(url, kb_name, w)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    store = KnowledgeStore(url)
    heads = store.latest(kb_name)
    keys = Counter(v.key for v in heads.values())
    assert set(keys) == {*SHARED_KEYS, *(f"own-{w}-{k}" for w in range(2) for k in range(3))}
    assert max(keys.values()) == 1  # one heuristic per claim, whoever created it first
    for hid in heads:
        assert [v.version for v in store.history(kb_name, hid)] == list(range(1, heads[hid].version + 1))  # no gap, no clash
    evidence = [(e.hid, e.trial) for e in store.evidence(kb_name) if e.source == "reasoner"]
    assert len(evidence) == len(set(evidence))
    # every worker's evidence reached every shared claim
    for key in SHARED_KEYS:
        hid = next(h for h, v in heads.items() if v.key == key)
        trials = {e.trial for e in store.evidence(kb_name, hid)}
        assert {0, 100} <= trials


def test_two_writers_on_sqlite_do_not_corrupt_the_store(tmp_path: Path) -> None:
    _check_concurrent_writers(f"sqlite:///{tmp_path / 'shared.kb.sqlite3'}")


def test_two_writers_on_postgresql_do_not_corrupt_the_store(postgres_url: str) -> None:
    _check_concurrent_writers(postgres_url)


def test_same_schema_on_postgresql(postgres_url: str) -> None:
    store = KnowledgeStore(postgres_url)
    name = f"pg-{uuid.uuid4().hex[:8]}"
    store.save(name, _kb(("a", "claim A", 0.6)), round_no=0, by="offline", spec=SPEC)
    store.review(name, "H1", "accepted", why="checked on hardware")
    assert store.load(name).heuristics["H1"].status == "accepted"
    assert store.schema_version() == 1
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("select count(*) from coevo_kb_versions where kb = :k"), {"k": name}).scalar() == 2
