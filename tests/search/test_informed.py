"""The one predictor over free features, paid values and earlier studies (search/informed.py), and what it drives."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from coevo.search.acquisition import greedy_hv
from coevo.search.informed import InformedPredictor
from coevo.search.nb201 import NB201Problem, load_table
from coevo.search.nb201.proxy_table import FEATURE_PROXIES, PRIOR_PROXIES, PROXIES, REFERENCE_CELLS, FreeProxies, ProxyConfig
from coevo.search.predictor import spearman
from coevo.search.proposers import Evaluation
from coevo.search.runner import run_search

SHIPPED = Path(__file__).resolve().parents[2] / "search" / "nb201" / "data" / "proxies-natural.npz"


@pytest.fixture(scope="module")
def problem() -> NB201Problem:
    return NB201Problem(dataset="cifar100", device="pixel3")


@pytest.fixture(scope="module")
def shipped() -> dict[str, np.ndarray]:
    with np.load(SHIPPED) as data:
        return {k: data[k] for k in data.files}


def _robust_z(x: np.ndarray, ref: np.ndarray) -> np.ndarray:
    med = np.median(ref)
    q75, q25 = np.percentile(ref, [75, 25])
    return np.clip((x - med) / (q75 - q25 if q75 > q25 else 1.0), -5, 5)


def _evaluations(problem: NB201Problem, rows: np.ndarray, *, dataset: str | None = None) -> list[Evaluation]:
    table = problem.table
    acc = table.acc(dataset or problem.dataset)
    return [
        Evaluation(k, table.cell(int(i)), str(int(i)), {"accuracy": float(acc[i]), "latency_ms": 1.0}, True, {}) for k, i in enumerate(rows)
    ]


def test_free_features_are_the_shipped_scores_on_the_shipped_scale_and_missing_elsewhere(
    problem: NB201Problem, shipped: dict[str, np.ndarray]
) -> None:
    assert str(shipped["config"]) == ProxyConfig().key()
    table = load_table()
    index = shipped["index"]
    cells = [table.cell(int(i)) for i in index[300:310]]
    got = problem.free_features(cells)
    assert got.shape == (10, len(FEATURE_PROXIES) + 1)
    for j, name in enumerate(FEATURE_PROXIES):
        expected = _robust_z(shipped[name][300:310], shipped[name][:REFERENCE_CELLS])
        np.testing.assert_allclose(got[:, j], expected, rtol=1e-12)
    prior = np.mean([_robust_z(shipped[p][300:310], shipped[p][:REFERENCE_CELLS]) for p in PRIOR_PROXIES], axis=0)
    np.testing.assert_allclose(got[:, -1], prior, rtol=1e-12)
    np.testing.assert_allclose(problem.prior(cells), prior, rtol=1e-12)
    assert len(index) == len(table.ops) == len(set(index.tolist()))  # every NB201 cell, once
    assert len(problem.free_designs() or []) == len(index) and set(PROXIES) >= set(FEATURE_PROXIES)


def test_cells_a_table_lacks_have_missing_free_features(monkeypatch: pytest.MonkeyPatch, shipped: dict[str, np.ndarray]) -> None:
    # a table of other settings, or one that lacks cells, is never stood in for: those cells' features are missing
    from coevo.search.nb201 import proxy_table

    table = load_table()
    assert np.isnan(FreeProxies(ProxyConfig(batch_source="gaussian")).features([table.cell(0)])).all()
    full = FreeProxies(ProxyConfig())
    part = 3000
    scores = np.stack([shipped[p] for p in PROXIES], axis=1)
    monkeypatch.setattr(proxy_table, "shipped_arrays", lambda key: (shipped["index"][:part], scores[:part]))
    free = FreeProxies(ProxyConfig())
    inside = [table.cell(int(i)) for i in shipped["index"][300:305]]
    outside = [table.cell(int(i)) for i in shipped["index"][part : part + 5]]
    assert np.isfinite(free.features(inside)).all() and np.isfinite(free.prior(inside)).all()
    assert np.isnan(free.features(outside)).all() and np.isnan(free.prior(outside)).all()
    assert free.count == part and len(free.cells()) == part and "3,000 shipped-table cells" in free.describe()
    # the scale is the table's first 200 cells either way: a cell's features do not depend on how much the table holds
    np.testing.assert_array_equal(free.features(inside), full.features(inside))


def test_with_no_label_the_predictor_ranks_by_the_free_prior(problem: NB201Problem, shipped: dict[str, np.ndarray]) -> None:
    table = problem.table
    model = InformedPredictor(problem, (), seed=0)
    assert not model.fitted and model.ranks and model.information.paid == 0
    inside = [table.cell(int(i)) for i in shipped["index"][:50]]
    np.testing.assert_allclose(model.score(inside), problem.prior(inside))
    # a cell without free proxies (here: under proxy settings no table was made with) is ranked last, not guessed
    other = NB201Problem(dataset="cifar100", device="pixel3")
    other.proxy_config = ProxyConfig(batch_source="gaussian")
    assert (InformedPredictor(other, (), seed=0).score(inside[:3]) == -np.inf).all()
    with pytest.raises(ValueError, match="no model to sample"):
        model.point_samples(inside)


def test_more_paid_labels_rank_held_out_cells_better(problem: NB201Problem) -> None:
    table = problem.table
    rng = np.random.default_rng(5)
    order = rng.permutation(len(table.ops))
    held_out = order[-3000:]
    acc = table.acc(problem.dataset)[held_out]
    cells = [table.cell(int(i)) for i in held_out]
    rho = {}
    for n in (10, 100):
        model = InformedPredictor(problem, _evaluations(problem, order[:n]), seed=0)
        assert model.fitted and model.information.paid == n
        samples = model.point_samples(cells)
        assert samples.shape == (8, len(cells)) and np.isfinite(samples).all()
        rho[n] = spearman(samples.mean(axis=0), acc)
    # every cell's proxies are free: ten labels on the prior already rank well, a hundred rank better still
    assert rho[10] > 0.85 and rho[100] > rho[10] + 0.01


class _Evidence:
    def __init__(self, source: str, evaluations: list[Evaluation], shared: tuple[str, ...]) -> None:
        self.source, self.evaluations, self.shared = source, tuple(evaluations), shared


def test_an_earlier_study_of_the_same_objective_gives_labels_and_known_values(problem: NB201Problem) -> None:
    rows = np.random.default_rng(1).permutation(len(problem.table.ops))[:40]
    earlier = _evaluations(problem, rows)
    model = InformedPredictor(problem, (), seed=0, evidence=[_Evidence("other-device", earlier, ("accuracy",))])
    assert model.fitted and model.labels == 40 and model.information.paid == 0
    assert "other-device: 40 evaluations of accuracy as labels" in model.information.transferred[0]
    samples = model.point_samples([e.point for e in earlier[:5]])
    # measured under the same conditions: known exactly, with no spread
    np.testing.assert_array_equal(samples, np.tile([e.values["accuracy"] for e in earlier[:5]], (samples.shape[0], 1)))
    assert set(model.transferred_points) == {e.point for e in earlier}


def test_an_earlier_study_of_another_dataset_becomes_a_feature(problem: NB201Problem) -> None:
    rows = np.random.default_rng(2).permutation(len(problem.table.ops))
    other = _evaluations(problem, rows[:200], dataset="cifar10")
    paid = _evaluations(problem, rows[200:210])
    plain = InformedPredictor(problem, paid, seed=0)
    seeded = InformedPredictor(problem, paid, seed=0, evidence=[_Evidence("cifar10-study", other, ())])
    cells = [problem.table.cell(int(i)) for i in rows[-2000:]]
    assert seeded.features(cells).shape[1] == plain.features(cells).shape[1] + 1
    assert "as a feature" in seeded.information.transferred[0] and seeded.labels == 10
    acc = problem.table.acc(problem.dataset)[rows[-2000:]]
    # cifar10 accuracy ranks cifar100 cells well: ten labels plus the transferred model beat ten labels alone
    assert spearman(seeded.score(cells), acc) > spearman(plain.score(cells), acc) + 0.05


def test_greedy_hv_takes_the_front_first_by_contribution() -> None:
    # (score up, cheap down): a is the widest step, then d at the fast end; c is dominated by a
    score = np.array([3.0, 2.0, 1.0, 2.5, np.nan, 0.0])
    cheap = np.array([2.0, 1.0, 3.0, 0.5, 0.1, 4.0])
    picks = greedy_hv(score, cheap, 6)
    # floor = median of the finite scores (2.0), ceiling = 4.0: a adds (3-2)*(4-2)=2, d adds (2.5-2)*(4-0.5)=1.75
    assert picks[:2] == [0, 3]
    assert 4 not in picks and len(picks) == 5


def test_the_engine_starts_from_the_front_the_prior_predicts(problem: NB201Problem, tmp_path: Path) -> None:
    result = run_search(problem, "pelnas", budget=10, seed=0, storage=f"sqlite:///{tmp_path / 's.db'}")
    assert result.evaluations == 10
    import optuna

    study = optuna.load_study(study_name=result.study, storage=f"sqlite:///{tmp_path / 's.db'}")
    rationales = [t.user_attrs.get("rationale", "") for t in sorted(study.trials, key=lambda t: t.number)]
    # the start is the niches' count here (a third of 10 is fewer): six picks of the predicted front, then a guided round
    assert all("front the predictor gives before any label" in r for r in rationales[:6]), rationales[:2]
    assert not any("front the predictor gives before any label" in r for r in rationales[6:])
    assert result.information["paid"] == 10 and "15,625 shipped-table cells" in " ".join(result.information["free"])
    assert all(row["paid"] for row in result.front)
    # ten paid cells from the prior's front: already a good part of the true front's hypervolume
    assert result.hv_ratio is not None and result.hv_ratio > 0.85


def test_a_budget_of_zero_reports_the_zero_information_front(problem: NB201Problem, tmp_path: Path) -> None:
    result = run_search(problem, "pelnas", budget=0, seed=0, storage=f"sqlite:///{tmp_path / 's.db'}")
    assert result.evaluations == 0 and result.expensive_queries == 0
    assert any(n.startswith("zero-information front: no evaluation was paid") for n in result.notes)
    assert result.front and not any(row["paid"] for row in result.front)
    # scored on the truth afterwards, against the benchmark's own accuracy
    acc = problem.table.acc(problem.dataset)
    assert all(row["accuracy"] == pytest.approx(float(acc[int(row["point_id"])])) for row in result.front)
    assert result.hv_ratio is not None and result.hv_ratio > 0.9


def test_initial_picks_of_a_small_budget_spread_over_niches_without_a_prior(tmp_path: Path) -> None:
    # a problem with nothing free but its encoding keeps the stratified start, band by band across niches
    from coevo.agent.coevolution import CoevolutionProposer
    from coevo.agent.reasoners.offline import OfflineReasoner
    from coevo.search.niches import niche_of

    class NoPrior(NB201Problem):
        def free_features(self, points: object) -> np.ndarray:  # type: ignore[override]
            return np.full((len(points), 11), np.nan)  # type: ignore[arg-type]

        def free_designs(self) -> None:
            return None

    prob = NoPrior(dataset="cifar10", device="fpga")
    proposer = CoevolutionProposer(OfflineReasoner(), name="pelnas-nokb", use_knowledge=False)
    import optuna

    from coevo.search.proposers import RoundContext

    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'n.db'}", study_name="n", directions=["maximize", "minimize"])
    ctx = RoundContext(problem=prob, study=study, round=0, evaluations=(), seen=frozenset(), remaining=6, seed=0)
    first = proposer._initial(prob, prob.niches(), [], ctx, random.Random(0))[:6]
    assert len({niche_of(prob.niches(), p.point) for p in first}) == 6


def test_a_small_round_with_a_predictor_goes_where_the_front_is_predicted() -> None:
    from coevo.search.niches import allocate

    contribution = {"a": 1.0, "b": 1.0, "c": 9.0}
    assert allocate(4, contribution) == {"a": 1, "b": 1, "c": 2}  # PEL-NAS's floor: one slot per niche
    # no floor: 4 x (1, 1, 9) / 11 = (0.36, 0.36, 3.27): c takes 3, the last slot goes to the largest remainder (a, first of a tie)
    assert allocate(4, contribution, floor_share=0.0) == {"a": 1, "b": 0, "c": 3}


def test_few_shot_reports_the_prior_when_it_ranks_the_paid_designs_better(problem: NB201Problem) -> None:
    from coevo.search.few_shot import _validated_scorer

    table = problem.table
    free = [table.cell(int(i)) for i in np.load(SHIPPED)["index"][:400]]
    acc = {problem.point_id(c): float(table.acc(problem.dataset)[problem.index(c)]) for c in free}
    paid = [
        Evaluation(k, c, problem.point_id(c), {"accuracy": acc[problem.point_id(c)], "latency_ms": 1.0}, True, {})
        for k, c in enumerate(free[:12])
    ]
    y = np.array([e.values["accuracy"] for e in paid])
    model = InformedPredictor(problem, paid, seed=0)
    score, why = _validated_scorer(problem, model, paid, y, trust=-1.0)  # a predictor that ranks nothing out of fold
    assert why.endswith("it is reported")
    prior = problem.prior(free[12:])
    # the prior on the objective's scale: a rising line of it, so its order is the prior's
    assert spearman(score(free[12:]), prior) == pytest.approx(1.0)
    kept, why = _validated_scorer(problem, model, paid, y, trust=1.0)
    assert kept == model.score and "predictor ranks the paid designs better" in why


def test_a_study_without_a_knowledge_base_seeds_the_predictor(tmp_path: Path) -> None:
    from coevo.search.proposers import get_proposer

    storage = f"sqlite:///{tmp_path / 's.db'}"
    fpga = NB201Problem(dataset="cifar10", device="fpga")
    source = run_search(fpga, "tpe", budget=12, seed=0, storage=storage, study_name="src")
    raspi4 = NB201Problem(dataset="cifar10", device="raspi4")
    seeded = run_search(raspi4, get_proposer("pelnas", {"kb_from": "src"}), budget=10, seed=0, storage=storage, study_name="dst")
    assert seeded.evaluations == 10 and source.evaluations == 12
    assert seeded.information["transferred"] == ["src: 12 paid evaluations"]
    assert any(n.startswith("information:") and "from other studies: src" in n for n in seeded.notes)


def test_seeding_evaluations_from_a_file_says_it_paid_for_nothing(tmp_path: Path) -> None:
    from coevo.search.errors import UserInputError
    from coevo.search.proposers import get_proposer

    export = tmp_path / "kb.jsonl"
    export.write_text("")
    proposer = get_proposer("pelnas", {"kb_from": str(export), "kb_from_use": "evaluations"})
    storage = f"sqlite:///{tmp_path / 's.db'}"
    with pytest.raises(UserInputError, match=r"has no paid evaluations.*use heuristics for an export file"):
        run_search(NB201Problem(dataset="cifar10", device="fpga"), proposer, budget=10, seed=0, storage=storage, study_name="dst")


def test_query_mode_reads_free_proxies_and_computes_none(tmp_path: Path) -> None:
    # the information query mode may use: the shipped table's proxies, never a network instantiated for a candidate
    # (that would cost CPU-seconds per cell): a whole search runs without importing PyTorch
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from coevo.search.nb201 import NB201Problem\n"
        "from coevo.search.runner import run_search\n"
        f"r = run_search(NB201Problem(dataset='cifar10', device='raspi4'), 'pelnas', budget=30, seed=0, storage='sqlite:///{tmp_path}/q.db')\n"
        "assert r.evaluations == 30 and r.information['paid'] == 30, r.information\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.strip() == "False", done.stderr[-2000:]
