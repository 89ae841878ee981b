"""The fair baselines that see the cheap objective: ``qnehvi`` (BoTorch) and the pymoo EAs with screened offspring."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
from scipy import stats

from coevo.search.errors import UserInputError
from coevo.search.nb201 import NB201Problem
from coevo.search.proposers import Evaluation, RoundContext, ScreenedEAProposer, get_proposer
from coevo.search.proposers import _screened as screened_module
from coevo.search.proposers._qnehvi import fit_gp
from coevo.search.runner import run_search

PROBLEM = NB201Problem(dataset="cifar10", device="raspi4")


def _trials(storage: str, study: str) -> list[optuna.trial.FrozenTrial]:
    return sorted(optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False), key=lambda t: t.number)


@pytest.mark.parametrize("name", ["nsga2-screened", "smsemoa-screened"])
def test_screened_eas_pay_only_for_offspring_the_acquisition_picked(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = f"sqlite:///{tmp_path / 's.db'}"
    screened: list[dict[str, Any]] = []
    real = screened_module.greedy_ehvi

    def spy(problem: Any, model: Any, paid: Any, points: Any, quota: int) -> Any:
        picks = real(problem, model, paid, points, quota)
        screened.append({"offered": {problem.point_id(p) for p in points}, "picked": {problem.point_id(points[i]) for i, _ in picks}})
        return picks

    monkeypatch.setattr(screened_module, "greedy_ehvi", spy)
    proposer = get_proposer(name, {"screen": 5})
    assert isinstance(proposer, ScreenedEAProposer) and proposer.sees_cheap_objectives
    result = run_search(PROBLEM, proposer, budget=60, seed=0, storage=storage)
    trials = _trials(storage, result.study)
    assert len(trials) == 60 and len(screened) == 2  # rounds 1 and 2 are screened (20 paid after the initial population)
    for k, rnd in enumerate(screened):
        paid = {t.user_attrs["point_id"] for t in trials[20 * (k + 1) : 20 * (k + 2)]}
        # the algorithm bred ~5 x 20 unseen offspring; exactly the 20 the acquisition picked were paid for
        assert len(rnd["offered"]) >= 60 and paid == rnd["picked"]
        assert not rnd["offered"] & {t.user_attrs["point_id"] for t in trials[: 20 * (k + 1)]}
    assert all("stratified by the cheap objective" in t.user_attrs["rationale"] for t in trials[:20])
    assert all("screened: expected HV gain" in t.user_attrs["rationale"] for t in trials[20:])
    assert proposer._algo is not None and proposer._algo.n_gen >= 3  # the algorithm was told every generation


def test_screened_ea_rebuilds_its_population_on_resume(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'r.db'}"
    run_search(PROBLEM, "nsga2-screened", budget=40, seed=1, storage=storage, study_name="r")
    fresh = get_proposer("nsga2-screened")  # a new process: nothing in memory
    result = run_search(PROBLEM, fresh, budget=60, seed=1, storage=storage, study_name="r")
    assert result.evaluations == 60
    assert isinstance(fresh, ScreenedEAProposer) and len(fresh._algo.pop) <= fresh.population


@pytest.mark.slow  # 11 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_qnehvi_starts_latency_stratified_and_its_gp_ranks_held_out_cells(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'q.db'}"
    result = run_search(PROBLEM, get_proposer("qnehvi", {"shortlist": 40}), budget=60, seed=0, storage=storage)
    trials = _trials(storage, result.study)
    edges = np.quantile(PROBLEM.table.lat("raspi4"), np.linspace(0, 1, 21)[1:-1])
    # the start is a third of the budget: 20 designs, one per latency bin (random draws fill ~12.8 of 20 bins)
    assert len({int(np.searchsorted(edges, t.values[1])) for t in trials[:20]}) >= 16
    assert all("qLogNEHVI batch pick" in t.user_attrs["rationale"] for t in trials[20:])
    # the GP (fit on 120 random cells) ranks 400 held-out cells as their true accuracy does
    rng = random.Random(0)
    cells = list({PROBLEM.point_id(c): c for c in (PROBLEM.random_point(rng) for _ in range(700))}.values())
    paid = [Evaluation(i, c, PROBLEM.point_id(c), PROBLEM.evaluate(c), True) for i, c in enumerate(cells[:120])]
    held = cells[120:520]
    fit = fit_gp(PROBLEM, paid, held, seed=0)
    predicted = fit.mean(range(len(held)))
    truth = np.array([PROBLEM.evaluate(c)["accuracy"] for c in held])
    assert stats.spearmanr(predicted, truth).statistic > 0.6
    assert np.allclose(fit.x_points[:, -1].numpy(), PROBLEM.cheap_values(held)["latency_ms"])  # latency rides along, known


class _NotEvolvable:
    name = "toy"


class _FloatSpace:
    name = "floaty"

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        return {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}


@pytest.mark.parametrize("name", ["qnehvi", "nsga2-screened", "smsemoa-screened"])
def test_new_baselines_refuse_problems_they_cannot_handle(name: str) -> None:
    ctx = RoundContext(problem=_NotEvolvable(), study=None, round=0, evaluations=(), seen=frozenset(), remaining=10, seed=0)  # type: ignore[arg-type]
    with pytest.raises(UserInputError, match=f"{name} needs a problem with features and cheap objectives"):
        get_proposer(name).propose(ctx)
    with pytest.raises(UserInputError, match="has no option population"):
        get_proposer("qnehvi", {"population": 3})


def test_screened_encoding_refuses_continuous_parameters() -> None:
    with pytest.raises(UserInputError, match="needs categorical or linear integer parameters; floaty's 'x' is FloatDistribution"):
        screened_module._Encoding(_FloatSpace(), "nsga2-screened")  # type: ignore[arg-type]
