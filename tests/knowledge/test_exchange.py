"""Export and import: round trip, provenance, and line-numbered errors with nothing half-imported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coevo.knowledge import KnowledgeBase
from coevo.knowledge.exchange import parse_jsonl, read_file, records_from, to_jsonl
from coevo.knowledge.store import EvidenceRow, KnowledgeStore
from coevo.search.errors import UserInputError

SPEC = {"problem": "nb201", "dataset": "cifar10", "device": "fpga"}


@pytest.fixture
def store(tmp_path: Path) -> KnowledgeStore:
    s = KnowledgeStore(f"sqlite:///{tmp_path / 'kb.sqlite3'}")
    kb = KnowledgeBase()
    kb.upsert("a", 0, text="claim A", scope={**SPEC, "niche": None}, confidence=0.9, status="validated", support=[5], refute=[6])
    kb.upsert("b", 0, text="claim B", scope={**SPEC, "niche": "c1x1"}, confidence=0.4, status="refuted")
    s.save("src", kb, round_no=0, by="offline", spec=SPEC, extra_evidence=[EvidenceRow("H1", "src", 30, "support", "record", 0.5, 1)])
    return s


def test_round_trip_keeps_claims_evidence_and_provenance(store: KnowledgeStore, tmp_path: Path) -> None:
    path = tmp_path / "kb.jsonl"
    path.write_text(to_jsonl(store.export("src")))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["id"] for r in lines] == ["H1", "H2"] and lines[0]["history"][0]["change"] == "created"
    ids = store.import_records("dst", read_file(path), spec={**SPEC, "device": "raspi4"}, by="import")
    assert ids == ["H1", "H2"]
    dst = store.load("dst")
    a, b = dst.heuristics["H1"], dst.heuristics["H2"]
    assert a.status == "proposed" and a.origin == "src:H1" and a.scope["device"] == "fpga"  # validated elsewhere: earn it again
    assert b.status == "refuted"  # refuted stays out of prompts
    # the evidence comes along, still naming the source study's trials; the working copy's bare trial numbers are dst's own
    assert a.support == [] and a.refute == [] and store.load("dst", study="src").heuristics["H1"].support == [5]
    brought = {("src", 5, "reasoner"), ("src", 6, "reasoner"), ("src", 30, "record")}
    assert {(e.study, e.trial, e.source) for e in store.evidence("dst", "H1")} == brought
    # a save of dst's working copy does not write the source's trial numbers back as dst's trials
    a.confidence = 0.5
    store.save("dst", dst, round_no=1, by="offline", spec=SPEC)
    assert {(e.study, e.trial, e.source) for e in store.evidence("dst", "H1")} == brought
    assert "imported from src:H1 (was validated there)" in store.history("dst", "H1")[0].change
    assert [r.key for r in records_from(store, "src")] == ["a", "b"]  # a study name works as a source too


def test_malformed_file_names_every_bad_line_and_imports_nothing(store: KnowledgeStore, tmp_path: Path) -> None:
    good = to_jsonl(store.export("src")).splitlines()
    bad = [
        good[0],
        "{not json",
        json.dumps({**json.loads(good[1]), "confidence": 3}),
        json.dumps({"key": "x"}),
        "",
        json.dumps({**json.loads(good[1]), "status": "maybe"}),
        json.dumps(json.loads(good[0])),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(bad) + "\n")
    with pytest.raises(UserInputError) as exc:
        read_file(path)
    text = str(exc.value)
    assert "5 bad line(s), nothing imported" in text
    assert "line 2: not JSON" in text and "line 3: confidence 3 is outside 0..1" in text
    assert (
        "line 4: missing field 'text'" in text
        and "line 6: status 'maybe'" in text
        and "line 7: claim 'a' appears again (first on line 1)" in text
    )
    assert not store.exists("dst")


def test_missing_and_empty_sources(store: KnowledgeStore, tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="no such file"):
        read_file(tmp_path / "nope.jsonl")
    with pytest.raises(UserInputError, match="no heuristics in the file"):
        parse_jsonl("\n\n", source="empty.jsonl")
    with pytest.raises(UserInputError, match="no such file, and no knowledge base"):
        records_from(store, "neither")


def test_a_knowledge_base_without_heuristics_is_refused_as_one_not_as_a_file(store: KnowledgeStore) -> None:
    store.save("empty", KnowledgeBase(), round_no=0, by="offline", spec=SPEC)  # a study that learned nothing yet
    assert store.exists("empty")
    with pytest.raises(UserInputError, match="its knowledge base holds no heuristics") as raised:
        records_from(store, "empty")
    assert "file" not in str(raised.value)
