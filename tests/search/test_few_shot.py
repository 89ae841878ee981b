"""Few-shot mode: the shipped proxy table, the predicted stage, and its trust check."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from coevo.search.few_shot import TRUST_FLOOR, predicted_front
from coevo.search.metrics import pareto_mask
from coevo.search.nb201 import NB201Problem
from coevo.search.nb201.few_shot_problem import FewShotNB201
from coevo.search.nb201.proxy_table import PROXIES, ProxyConfig, shipped_cells
from coevo.search.nb201.space import format_arch
from coevo.search.nb201.table import load_table
from coevo.search.proposers import Evaluation
from coevo.search.zero_cost import ProxyCache

SHIPPED = Path(__file__).resolve().parents[2] / "search" / "nb201" / "data" / "proxies-natural.npz"


def test_the_shipped_table_answers_without_computing(tmp_path: Path) -> None:
    data = np.load(SHIPPED)
    assert str(data["config"]) == ProxyConfig().key()  # made with the default settings and proxy definitions
    table = load_table()
    picks = [0, 7, len(data["index"]) - 1]
    cells = [table.cell(int(data["index"][k])) for k in picks]
    cache = ProxyCache(f"sqlite:///{tmp_path / 'c.db'}")
    scores = cache.scores(cells)
    assert cache.computed == 0
    for k, s in zip(picks, scores, strict=True):
        assert s == {p: pytest.approx(float(data[p][k])) for p in PROXIES}
    # another configuration never reads it
    assert shipped_cells(ProxyConfig(batch_source="gaussian").key()) == []
    assert [format_arch(c) for c in shipped_cells(ProxyConfig().key())[:3]] == [format_arch(table.cell(int(i))) for i in data["index"][:3]]


def _paid(problem: NB201Problem, cells: list, accuracy: np.ndarray) -> list[Evaluation]:
    lat = problem.cheap_values(cells)["latency_ms"]
    return [
        Evaluation(k, c, problem.point_id(c), {"accuracy": float(a), "latency_ms": float(t)}, True, {})
        for k, (c, a, t) in enumerate(zip(cells, accuracy, lat, strict=True))
    ]


def test_predicted_stage_reports_the_front_of_paid_and_predicted(tmp_path: Path) -> None:
    problem = FewShotNB201(dataset="cifar10", device="fpga", storage=f"sqlite:///{tmp_path / 'f.db'}")
    pool = problem.free_designs()
    assert pool is not None and len(pool) > 1000
    truth = NB201Problem(dataset="cifar10", device="fpga")
    cells = random.Random(3).sample(pool, 30)
    paid = _paid(problem, cells, np.array([truth.evaluate(c)["accuracy"] for c in cells]))
    stage = predicted_front(problem, paid, seed=0)
    assert stage.trust > TRUST_FLOOR and stage.scored == len(pool) - len({e.point_id for e in paid})
    values = np.array([[e.values["accuracy"], e.values["latency_ms"]] for e in stage.reported])
    # the reported set is non-dominated under what the stage knew (true for paid, predicted for others)
    assert pareto_mask(values[:, 0], values[:, 1]).all()
    predicted = [e for e in stage.reported if not e.query]
    assert predicted and all(e.attrs.get("predicted") for e in predicted)
    assert stage.paid_reported == sum(e.query for e in stage.reported)
    assert "of the free pool" in stage.note


def test_an_untrusted_predictor_reports_only_the_paid_designs(tmp_path: Path) -> None:
    problem = FewShotNB201(dataset="cifar10", device="fpga", storage=f"sqlite:///{tmp_path / 'f.db'}")
    pool = problem.free_designs()
    assert pool is not None
    cells = random.Random(5).sample(pool, 30)
    # labels that nothing the predictor sees can explain (noise): out-of-fold rho near 0
    # (an out-of-fold rho on 30 noise labels is itself noisy: draw 0 of this generator happened to reach 0.45)
    labels = np.random.default_rng(2).uniform(60.0, 90.0, size=len(cells))
    paid = _paid(problem, cells, labels)
    assert abs(stats.spearmanr(problem.prior(cells), labels).statistic) < 0.3
    stage = predicted_front(problem, paid, seed=0)
    assert stage.trust < TRUST_FLOOR
    assert stage.reported == paid and stage.scored == 0 and "Spend more queries" in stage.note


def test_few_shot_search_end_to_end(tmp_path: Path) -> None:
    from coevo.search.runner import run_search

    storage = f"sqlite:///{tmp_path / 's.db'}"
    problem = FewShotNB201(dataset="cifar10", device="raspi4", storage=storage)
    result = run_search(problem, "random", budget=8, seed=1, storage=storage)
    assert result.found_set == "predicted" and result.expensive_queries == 8 and result.evaluations == 8
    assert any(n.startswith("few-shot:") for n in result.notes)
    truth = NB201Problem(dataset="cifar10", device="raspi4")
    table = load_table()
    for row in result.front:  # scored on the benchmark's truth after the search
        cell = table.cell(int(row["point_id"]))
        assert row["accuracy"] == pytest.approx(truth.evaluate(cell)["accuracy"])
    assert result.hv_ratio is not None and 0 < result.hv_ratio <= 1


def test_a_corrupt_shipped_table_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coevo.search.errors import CoevoError
    from coevo.search.nb201 import proxy_table

    bad = tmp_path / "data"
    bad.mkdir()
    (bad / "proxies-natural.npz").write_bytes(b"not a zip")
    (bad / "nb201.npz").symlink_to(SHIPPED.parent / "nb201.npz")  # the benchmark table itself is fine
    monkeypatch.setattr(proxy_table.resources, "files", lambda _pkg: tmp_path)
    proxy_table.shipped_arrays.cache_clear()
    proxy_table.shipped_table.cache_clear()
    try:
        with pytest.raises(CoevoError, match=r"shipped proxy table .* is unreadable .*reinstall coevo"):
            proxy_table.shipped_table(ProxyConfig().key())
    finally:
        proxy_table.shipped_arrays.cache_clear()
        proxy_table.shipped_table.cache_clear()


def test_the_stage_after_the_last_paid_evaluation_reports_its_progress_to_the_end(tmp_path: Path) -> None:
    from coevo.search.runner import TRUTH, run_search
    from coevo.search.work_progress import listening

    problem = FewShotNB201(dataset="cifar10", device="fpga", storage=f"sqlite:///{tmp_path / 'f.db'}")
    reports: list[tuple[str, float]] = []
    with listening(lambda what, fraction: reports.append((what, fraction))):
        result = run_search(problem, "random", budget=12, seed=0, storage=f"sqlite:///{tmp_path / 's.db'}")
    stage = [(what, f) for what, f in reports if what.startswith("prediction stage: ")]
    assert stage[0] == ("prediction stage: fitting the predictor (12 paid designs)", 0.0)
    assert stage[-1] == ("prediction stage: done", 1.0)
    shares = [f for _, f in stage]
    assert shares == sorted(shares) and any("scoring the free pool" in what for what, _ in stage)
    truth = [f for what, f in reports if what.startswith(f"{TRUTH}: ")]
    predicted = sum(not row["paid"] for row in result.front)
    assert truth[-1] == 1.0 and len(truth) >= predicted + 1  # one report per design scored on the truth, then the end
