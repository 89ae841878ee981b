"""``search.transfer``: an earlier study's paid evaluations for a new search, and what carries over.

The earlier study is a real search (random proposer, NB201 query mode, 10 paid evaluations on
fpga) in a temporary SQLite file; the values the loader returns are checked against the NB201
table, read through a problem of the study's own options, not against the loader's output.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

import coevo
from coevo.search.errors import UserInputError
from coevo.search.nb201 import NB201Problem
from coevo.search.nb201.problem import PARAM_NAMES
from coevo.search.nb201.space import OPS
from coevo.search.problems import make_problem
from coevo.search.proposers import get_proposer
from coevo.search.study import FAILURE, open_or_create
from coevo.search.transfer import compatibility, prior_evidence

FPGA = "fpga-study"
FPGA_SPEC = {"problem": "nb201", "dataset": "cifar10", "device": "fpga"}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A storage holding a 10-evaluation random search on fpga, plus the trials a search also leaves.

    Those are written as the worker writes them: an unpaid repeat (``query`` False) of the first
    point, a failed evaluation (FAIL with its ``failure``) and a pruned trial (a point another
    trial held); none is a paid evaluation.
    """
    storage = f"sqlite:///{tmp_path_factory.mktemp('transfer') / 'study.sqlite3'}"
    result = coevo.optimize("nb201", options={"device": "fpga"}, proposer="random", budget=10, storage=storage, study=FPGA)
    assert result.evaluations == 10
    study = optuna.load_study(study_name=FPGA, storage=storage)
    first = study.trials[0]
    dists = {name: CategoricalDistribution(OPS) for name in PARAM_NAMES}
    other = {name: "nor_conv_3x3" for name in PARAM_NAMES}
    study.add_trial(create_trial(params=first.params, distributions=dists, values=first.values, user_attrs={"query": False}))
    failed = {FAILURE: "objective accuracy is NaN"}
    study.add_trial(create_trial(params=other, distributions=dists, state=TrialState.FAIL, user_attrs=failed))
    study.add_trial(create_trial(params=other, distributions=dists, state=TrialState.PRUNED))
    return storage


def _paid_trials(storage: str) -> list[optuna.trial.FrozenTrial]:
    """The study's trials that paid for a value: COMPLETE with ``query`` True (what the search counted)."""
    study = optuna.load_study(study_name=FPGA, storage=storage)
    return [t for t in study.trials if t.state == TrialState.COMPLETE and t.user_attrs["query"]]


def test_another_device_gets_the_paid_evaluations_and_shares_accuracy(stored: str) -> None:
    here = NB201Problem(dataset="cifar10", device="raspi4")
    table_fpga = NB201Problem(dataset="cifar10", device="fpga")
    evidence = prior_evidence(here, stored, FPGA)
    assert (evidence.source, evidence.study, evidence.spec) == (FPGA, FPGA, FPGA_SPEC)
    assert evidence.shared == ("accuracy",)
    assert evidence.differs == {"device": ("fpga", "raspi4")}
    paid = _paid_trials(stored)
    assert len(paid) == 10  # the repeat, the failure and the pruned trial are not among them
    assert [e.trial_number for e in evidence.evaluations] == [t.number for t in paid]
    for e, t in zip(evidence.evaluations, paid, strict=True):
        assert e.point == tuple(OPS.index(t.params[name]) for name in PARAM_NAMES)
        assert e.point_id == str(here.index(e.point)) and e.query
        assert e.values == table_fpga.evaluate(e.point)  # the values the fpga study paid for, from the table
        assert e.values["accuracy"] == here.evaluate(e.point)["accuracy"]  # the shared objective holds here unchanged
        assert e.attrs["point_id"] == e.point_id
    assert any(e.values["latency_ms"] != here.evaluate(e.point)["latency_ms"] for e in evidence.evaluations)  # latency does not


def test_another_dataset_shares_nothing_but_still_returns_the_values(stored: str) -> None:
    here = NB201Problem(dataset="cifar100", device="raspi4")
    table_fpga = NB201Problem(dataset="cifar10", device="fpga")
    evidence = prior_evidence(here, stored, FPGA)
    assert evidence.shared == ()
    assert evidence.differs == {"dataset": ("cifar10", "cifar100"), "device": ("fpga", "raspi4")}
    assert len(evidence.evaluations) == 10
    assert [e.values["accuracy"] for e in evidence.evaluations] == [table_fpga.evaluate(e.point)["accuracy"] for e in evidence.evaluations]
    assert any(e.values["accuracy"] != here.evaluate(e.point)["accuracy"] for e in evidence.evaluations)


def test_the_same_options_differ_in_nothing(stored: str) -> None:
    evidence = prior_evidence(NB201Problem(dataset="cifar10", device="fpga"), stored, FPGA)
    assert evidence.differs == {} and evidence.shared == ("accuracy",) and len(evidence.evaluations) == 10


def test_a_study_of_another_problem_or_with_other_objectives_is_refused(stored: str) -> None:
    quant = make_problem("quant", {"model": "cnn-digits", "finetune_epochs": 0})
    open_or_create(quant, get_proposer("random"), storage=stored, study_name="quant-study", seed=0, budget=5)
    zero_cost = make_problem("nb201", {"mode": "zero-cost"}, storage=stored)
    open_or_create(zero_cost, get_proposer("random"), storage=stored, study_name="zc-study", seed=0, budget=5)
    here = NB201Problem(dataset="cifar10", device="raspi4")
    with pytest.raises(UserInputError, match=r"--kb-from 'quant-study': a study of problem quant; this search is nb201"):
        prior_evidence(here, stored, "quant-study")
    with pytest.raises(UserInputError) as exc:
        prior_evidence(here, stored, "zc-study")
    text = str(exc.value)
    assert "objective accuracy differs" in text and "'zero-shot score (mean robust z)' there and '%' here" in text
    assert "mode zero-cost there, query here" in text and "\n" not in text
    with pytest.raises(UserInputError, match="objective accuracy differs"):  # the other way round too
        prior_evidence(zero_cost, stored, FPGA)


def test_a_few_shot_study_pays_true_accuracies_so_they_carry_over(tmp_path: Path) -> None:
    few_shot = make_problem("nb201", {"mode": "few-shot", "device": "fpga"}, storage=f"sqlite:///{tmp_path / 'x.sqlite3'}")
    fit = compatibility(NB201Problem(dataset="cifar10", device="raspi4"), few_shot.spec(), source="s")
    assert fit.shared == ("accuracy",)
    assert fit.differs["mode"] == ("few-shot", "query") and fit.differs["device"] == ("fpga", "raspi4")


def test_options_no_longer_valid_are_one_line(stored: str) -> None:
    with pytest.raises(UserInputError, match=r"its options are not valid for this search's problem: .*unknown device 'gone'"):
        compatibility(NB201Problem(), {**FPGA_SPEC, "device": "gone"}, source="s")


def test_a_file_a_missing_name_and_a_missing_storage_give_no_evaluations(stored: str, tmp_path: Path) -> None:
    here = NB201Problem(dataset="cifar10", device="raspi4")
    export = tmp_path / FPGA  # a file of the study's name is an export file, as records_from reads it
    export.write_text("{}\n")
    for storage, source in [(stored, str(export)), (stored, "no-such-study")]:
        evidence = prior_evidence(here, storage, source)
        assert (evidence.study, evidence.spec, evidence.evaluations, evidence.shared, evidence.differs) == (None, {}, (), (), {})
    missing = tmp_path / "none" / "x.sqlite3"
    (tmp_path / "none").mkdir()
    assert prior_evidence(here, f"sqlite:///{missing}", FPGA).evaluations == ()
    assert not any((tmp_path / "none").iterdir())  # nothing created


def test_a_study_not_made_by_coevo_is_refused(stored: str) -> None:
    optuna.create_study(study_name="plain", storage=stored)
    with pytest.raises(UserInputError, match="'plain' was not made by coevo"):
        prior_evidence(NB201Problem(), stored, "plain")
