"""``coevo search --kb-from`` checks its source before the study exists: one line, exit 2, nothing created.

A source of another problem, or with other objectives (an NB201 zero-cost study's accuracy is a
z-score, not a percentage), is refused, whether it is a study in the storage or an export file;
one of the same problem on another device passes (that is transfer).
"""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from coevo.agent.cli import main
from coevo.knowledge import KnowledgeBase
from coevo.knowledge.exchange import check_scopes, parse_jsonl, to_jsonl
from coevo.knowledge.store import KnowledgeStore
from coevo.search.errors import UserInputError
from coevo.search.nb201 import NB201Problem
from coevo.search.problems import make_problem
from coevo.search.proposers import get_proposer
from coevo.search.study import open_or_create

FPGA_SPEC = {"problem": "nb201", "dataset": "cifar10", "device": "fpga"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A storage with a quant study and an NB201 zero-cost study, and three exports (nb201 fpga, quant, zero-cost)."""
    folder = tmp_path_factory.mktemp("kbfrom")
    storage = f"sqlite:///{folder / 'study.sqlite3'}"
    quant = make_problem("quant", {"model": "cnn-digits", "finetune_epochs": 0})
    open_or_create(quant, get_proposer("random"), storage=storage, study_name="quant-study", seed=0, budget=5)
    zero_cost = make_problem("nb201", {"mode": "zero-cost"}, storage=storage)
    open_or_create(zero_cost, get_proposer("random"), storage=storage, study_name="zc-study", seed=0, budget=5)
    store = KnowledgeStore(f"sqlite:///{folder / 'exports.sqlite3'}")
    for name, spec in [("fpga", FPGA_SPEC), ("quant", quant.spec()), ("zc", zero_cost.spec())]:
        kb = KnowledgeBase()
        kb.upsert("a", 0, text="claim A", scope={**spec, "niche": None}, confidence=0.5, status="proposed")
        kb.upsert("b", 0, text="claim B", scope={**spec, "niche": "c1x1"}, confidence=0.4, status="proposed")
        store.save(name, kb, round_no=0, by="offline", spec=spec)
        (folder / f"{name}.jsonl").write_text(to_jsonl(store.export(name)))
    return folder


def _search(folder: Path, source: str, *extra: str) -> list[str]:
    storage = f"sqlite:///{folder / 'study.sqlite3'}"
    return ["search", "--problem", "nb201", "--proposer", "pelnas", "--budget", "5", "--storage", storage, "--kb-from", source, *extra]


def _files(folder: Path) -> list[str]:
    """The folder's files, but SQLite's journal of a connection still open (``-wal``, ``-shm``: made by any reader)."""
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm")))


def _studies(folder: Path) -> list[str]:
    return sorted(s.study_name for s in optuna.get_all_study_summaries(f"sqlite:///{folder / 'study.sqlite3'}", include_best_trial=False))


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("quant-study", "--kb-from 'quant-study': a study of problem quant; this search is nb201"),
        ("zc-study", "objective accuracy differs: its unit is 'zero-shot score (mean robust z)' there and '%' here"),
        ("quant.jsonl", "2 of 2 heuristics are scoped to problem quant; this search is nb201"),
        ("zc.jsonl", "objective accuracy differs: its unit is 'zero-shot score (mean robust z)' there and '%' here"),
        ("no-such-study", "--kb-from 'no-such-study': no such file, and no knowledge base (study) of that name"),
    ],
)
def test_a_source_that_does_not_fit_is_one_line_exit_2_and_creates_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str], source: str, says: str
) -> None:
    path = folder / source
    before, files = _studies(folder), _files(folder)
    assert main(_search(folder, str(path) if path.suffix == ".jsonl" else source)) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    error_at = next(i for i, line in enumerate(lines) if line.startswith("error:"))
    message = " ".join(lines[error_at:])  # one message (rich folds long lines at the terminal width)
    assert says in message and "Traceback" not in err and message.count("error:") == 1
    assert _studies(folder) == before and _files(folder) == files  # no study, no knowledge store


def test_an_export_of_another_device_seeds_the_search(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*_search(folder, str(folder / "fpga.jsonl"), "--device", "raspi4", "--study", "seeded"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["study"] == "seeded"
    imported = KnowledgeStore.for_storage(f"sqlite:///{folder / 'study.sqlite3'}").latest("seeded")
    assert sorted(h.text for h in imported.values()) == ["claim A", "claim B"]


def test_scopes_of_another_problem_are_counted_and_those_without_one_fit(folder: Path) -> None:
    mixed = (folder / "fpga.jsonl").read_text() + json.dumps(
        {**json.loads((folder / "quant.jsonl").read_text().splitlines()[0]), "key": "q"}
    )
    records = parse_jsonl(mixed, source="mixed.jsonl")
    with pytest.raises(UserInputError, match=r"1 of 3 heuristics are scoped to problem quant; this search is nb201"):
        check_scopes(records, NB201Problem(device="raspi4"), source="mixed.jsonl")
    line = {"key": "k", "text": "t", "scope": {}, "confidence": 0.1, "status": "proposed", "author": "human"}
    bare = parse_jsonl(json.dumps(line), source="b")
    check_scopes(bare, NB201Problem(), source="b")  # a hand-written heuristic without a scope fits any search
