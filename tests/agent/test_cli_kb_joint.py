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
