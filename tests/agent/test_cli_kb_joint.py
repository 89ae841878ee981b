"""``coevo search --kb-from`` across problems: a single-family NB201 study seeds a joint ``nb201-accel`` search.

The source is a real 24-evaluation pelnas search of ``nb201`` (cifar10, fpga) in a temporary
SQLite file; what the joint search reports is checked against the source study's trials (its
paid evaluations counted here from Optuna) and against the NB201 table, not against the
loader's own output.
"""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from coevo.agent.cli import main
from coevo.knowledge.imported import imported_heuristics
from coevo.knowledge.store import KnowledgeStore
from coevo.search.informed import InformedPredictor
from coevo.search.nb201 import NB201Problem
from coevo.search.nb201_accel.problem import NB201AccelProblem
from coevo.search.study import FAILURE
from coevo.search.transfer import prior_evidence

SOURCE = "nb201-src"
JOINT = ["search", "--problem", "nb201-accel", "--dataset", "cifar10", "--proposer", "pelnas", "--json"]


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An nb201 cifar10/fpga pelnas study (24 evaluations), an nb201 cifar100 one and a noc one (random, a few each)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('kbjoint') / 'study.sqlite3'}"
    nb201 = ["search", "--problem", "nb201", "--device", "fpga", "--storage", url, "--json"]
    assert main([*nb201, "--dataset", "cifar10", "--proposer", "pelnas", "--budget", "24", "--study", SOURCE]) == 0
    assert main([*nb201, "--dataset", "cifar100", "--proposer", "random", "--budget", "5", "--study", "c100"]) == 0
    assert main(["search", "--problem", "noc", "--proposer", "random", "--budget", "3", "--storage", url, "--study", "noc", "--json"]) == 0
    return url


def _paid_cells(storage: str) -> dict[tuple[str, ...], float]:
    """The source study's paid accuracies by cell (its edge parameters), read from Optuna's trials directly."""
    study = optuna.load_study(study_name=SOURCE, storage=storage)
    names = study.metric_names or ["accuracy", "latency_ms"]
    out: dict[tuple[str, ...], float] = {}
    for t in study.get_trials(states=(TrialState.COMPLETE,)):
        if t.user_attrs.get("query", True) and FAILURE not in t.user_attrs:
            out.setdefault(tuple(str(t.params[k]) for k in sorted(t.params)), float(t.values[names.index("accuracy")]))
    return out


def test_an_nb201_study_seeds_the_cell_part_of_a_joint_search(storage: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    paid = _paid_cells(storage)
    assert len(paid) >= 20  # a 24-evaluation search: its distinct paid cells
    assert main([*JOINT, "--budget", "10", "--storage", storage, "--kb-from", SOURCE]) == 0
    result = json.loads(capsys.readouterr().out)
    line = f"{SOURCE}: {len(paid)} paid evaluations seeded part cell (its accuracy as labels)"
    assert result["information"]["transferred"] == [line]
    assert any(n.startswith("information:") and line in n for n in result["notes"])
    # the predictor's labels: every earlier cell, each with the table's cifar10 accuracy, on a joint design
    problem = NB201AccelProblem(dataset="cifar10")
    evidence = prior_evidence(problem, storage, SOURCE)
    assert evidence.part == "cell" and evidence.shared == ("accuracy",)
    table = NB201Problem(dataset="cifar10")
    cells = problem.part("cell").problem
    for e in evidence.evaluations:
        cell = problem.subpoint(e.point, "cell")
        assert e.values["accuracy"] == pytest.approx(table.evaluate(cell)["accuracy"])
        assert paid[tuple(str(v) for _, v in sorted(cells.to_params(cell).items()))] == e.values["accuracy"]
    predictor = InformedPredictor(problem, (), seed=0, evidence=(evidence,))
    assert predictor.labels == len(paid) and predictor.fitted
    # a cell paid for there is known on any accelerator here, not predicted
    first = evidence.evaluations[0]
    other = next(p for p in problem.neighbours(first.point) if problem.subpoint(p, "cell") == problem.subpoint(first.point, "cell"))
    assert predictor.point_samples([other])[:, 0] == pytest.approx(first.values["accuracy"])


def test_a_study_that_does_not_map_is_refused_in_one_line(storage: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    before = set(optuna.get_all_study_names(storage))
    assert main([*JOINT, "--budget", "5", "--storage", storage, "--kb-from", "c100"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "accuracy does not carry over" in err and "cifar100" in err
    assert main([*JOINT, "--budget", "5", "--storage", storage, "--kb-from", "noc", "--seed", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "a study of problem noc, which is no part of nb201-accel" in err
    assert main([*JOINT, "--budget", "5", "--storage", storage, "--kb-from", "c100", "--kb-from-use", "heuristics", "--seed", "2"]) == 2
    assert "does not carry over" in capsys.readouterr().err
    assert set(optuna.get_all_study_names(storage)) == before  # nothing made


def test_heuristics_of_the_part_carry_the_joint_parameter(storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main([*JOINT, "--budget", "6", "--storage", storage, "--kb-from", SOURCE, "--kb-from-use", "heuristics", "--seed", "3"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["information"]["transferred"] == []
    store = KnowledgeStore.for_storage(storage)
    source = {h.hid: h for h in store.latest(SOURCE).values() if (h.structured or {}).get("param")}
    imported = [v for v in store.history(result["study"]) if v.origin and (v.structured or {}).get("param")]
    assert source and imported
    joint_params = set(NB201AccelProblem(dataset="cifar10").distributions())
    for v in imported:
        assert v.scope["problem"] == "nb201-accel" and v.scope["part"] == "cell" and v.scope["from"] == "nb201"
        assert v.structured is not None and v.structured["param"] in joint_params and v.structured["part"] == "cell"
    for v in imported:  # the part's parameter is the joint one by the same name (a composition keeps its parts' names)
        assert v.origin.startswith(f"{SOURCE}:") and v.structured is not None
        assert v.structured["param"] == (source[v.origin.split(":")[1]].structured or {})["param"]
    # an export of the part's study maps the same way
    path = tmp_path / "nb201.jsonl"
    assert main(["kb", "export", "--storage", storage, "--study", SOURCE, "--out", str(path)]) == 0
    capsys.readouterr()
    assert main([*JOINT, "--budget", "6", "--storage", storage, "--kb-from", str(path), "--seed", "4"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert [v for v in store.history(from_file["study"]) if v.origin and v.scope.get("part") == "cell"]


def _section_rows(markdown: str, heading: str) -> list[list[str]]:
    """The cells of the table rows of section ``heading`` of a report (header and rule left out)."""
    section = markdown.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in section.splitlines() if line.startswith("| ")]
    return rows[1:]


def test_the_report_says_where_imported_heuristics_came_from_and_whether_they_held(
    storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main([*JOINT, "--budget", "16", "--storage", storage, "--kb-from", SOURCE, "--kb-from-use", "both", "--seed", "5"]) == 0
    joint = json.loads(capsys.readouterr().out)["study"]
    store = KnowledgeStore.for_storage(storage)
    source = store.latest(SOURCE)
    heads = store.latest(joint)
    items = imported_heuristics(store, joint)
    assert items and {i.hid for i in items} == {h for h, v in heads.items() if v.origin}
    brought_any = False
    for i in items:
        there = source[i.origin.split(":")[1]]
        assert i.origin.startswith(f"{SOURCE}:") and i.source == SOURCE and (i.problem, i.part) == ("nb201", "cell")
        assert (i.status_there, i.confidence_imported) == (there.status, pytest.approx(there.confidence))
        assert i.status_imported == ("proposed" if there.status == "validated" else there.status)
        # the verdict, checked against the store: the status now and the evidence of the joint study's own trials
        now = heads[i.hid].status
        own = [e for e in store.evidence(joint, i.hid) if e.study == joint]
        assert i.status_now == now and (i.support, i.refute) == (
            sum(e.kind == "support" for e in own),
            sum(e.kind == "refute" for e in own),
        )
        # evidence the import brought along: the source's rows, not counted in the verdict; an empty list would pass
        # the all() vacuously, so check there is some wherever the source had evidence of its own for the heuristic
        brought = [e for e in store.evidence(joint, i.hid) if e not in own]
        assert all(e.study == SOURCE for e in brought)
        had_evidence = any(e.study == SOURCE for e in store.evidence(SOURCE, i.origin.split(":")[1]))
        assert bool(brought) == had_evidence, (i.hid, len(brought), had_evidence)
        brought_any = brought_any or bool(brought)
        expected = {
            "held": now in ("validated", "accepted"),
            "did not hold": now in ("refuted", "unhelpful", "rejected"),
            "not tested here": not own and now == i.status_imported,
            "not measurable here": False,  # nb201's objectives are nb201-accel's: every claim can be tested there
            "open": now == "proposed" and bool(own),
            "set aside": now == "retired",
        }
        assert expected[i.verdict], (i.verdict, now, len(own))
    assert brought_any  # the source's evidence did come along (with --kb-from-use both)
    # the report's section: one row per imported heuristic, naming its source, its part and its verdict
    out = tmp_path / "report"
    assert main(["kb", "report", "--storage", storage, "--study", joint, "--out", str(out)]) == 0
    rows = {r[0]: r for r in _section_rows((out / "report.md").read_text(), "Imported heuristics")}
    assert set(rows) == {i.hid for i in items}
    for i in items:
        _, _, origin, learned_on, there, now_cell, evidence, held = rows[i.hid]
        assert origin == i.origin and origin.startswith(f"{SOURCE}:") and learned_on == "nb201 -> part cell"
        assert there.startswith(i.status_there) and now_cell.startswith(heads[i.hid].status)
        assert evidence == f"{i.support}/{i.refute}" and held == i.verdict
    assert "Imported heuristics" in (out / "report.html").read_text()
    # kb show says the same of one of them
    capsys.readouterr()
    assert main(["kb", "show", items[0].hid, "--storage", storage, "--study", joint, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["provenance"]
    assert shown["origin"] == items[0].origin and shown["part"] == "cell" and shown["verdict"] == items[0].verdict
