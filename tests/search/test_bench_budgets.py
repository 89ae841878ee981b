"""``coevo bench --budgets``: one run per (group, proposer, seed), scored on prefixes of its paid evaluations."""

from __future__ import annotations

import csv
import itertools
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState

from coevo.agent.cli import main
from coevo.search.bench import BenchSpec, parse_budgets, run_bench
from coevo.search.bench_budgets import BudgetRow, run_budget_bench
from coevo.search.errors import UserInputError
from coevo.search.nb201.problem import NB201Problem
from coevo.search.problems import make_problem

BUDGETS = (3, 6, 10)


class FrontScoredNB201(NB201Problem):
    """NB201 in query mode, declared to score its reported front after the search (as zero-cost mode does)."""

    found_set = "front"

    def free_designs(self) -> None:
        return None  # the front of the paid designs alone: no free pool joins it


class UnboundedNB201(NB201Problem):
    """NB201 in query mode as a problem with neither a true front nor acquisition bounds (as fpga-transformer)."""

    def reference(self) -> None:
        return None

    def acquisition_bounds(self) -> None:
        return None


def _union_hv(first: Sequence[float], second: Sequence[float], floor: float, ceiling: float) -> float:
    """Area of the union of the boxes [second, ceiling] x [floor, first]: an HV computed without the code's Pareto sweep."""
    pts = [(a, c) for a, c in zip(first, second, strict=True) if a > floor and c < ceiling]
    edges = sorted({c for _, c in pts} | {ceiling})
    area = 0.0
    for left, right in itertools.pairwise(edges):
        height = max((a for a, c in pts if c <= left), default=floor) - floor
        area += (right - left) * height
    return area


def _paid_values(
    storage: str, study: str, names: tuple[str, str], objectives: list[str], budget: int | None = None
) -> tuple[list[float], list[float]]:
    """The first ``budget`` paid evaluations of ``study`` (complete trials that queried), read straight from Optuna."""
    trials = optuna.load_study(study_name=study, storage=storage).get_trials(states=(TrialState.COMPLETE,))
    paid = sorted((t for t in trials if t.user_attrs.get("query", True)), key=lambda t: t.number)[:budget]
    i, j = objectives.index(names[0]), objectives.index(names[1])
    return [t.values[i] for t in paid], [t.values[j] for t in paid]


def _rows(out: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((out / "budgets.csv").open()))


def _trials(storage: str) -> int:
    return sum(s.n_trials for s in optuna.get_all_study_summaries(storage))


@pytest.fixture(scope="module")
def nb201_bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("budgets")
    spec = BenchSpec("nb201", {"dataset": "cifar10"}, ("fpga",), ("random", "tpe"), (0, 1), budget=1, budgets=BUDGETS)
    run_budget_bench(spec, out)
    return out


def test_one_row_per_run_and_budget_and_one_run_per_seed(nb201_bench: Path) -> None:
    rows = _rows(nb201_bench)
    assert sorted((r["proposer"], r["seed"], int(r["budget"])) for r in rows) == sorted(
        (p, str(s), b) for p in ("random", "tpe") for s in (0, 1) for b in BUDGETS
    )
    assert all(int(r["paid"]) == int(r["budget"]) and r["hv_kind"] == "ratio" and r["front_recall"] != "" for r in rows)
    assert all(r["cuts_round"] == "False" for r in rows)  # Optuna samplers propose one design at a time: no rounds
    storage = f"sqlite:///{nb201_bench / 'bench.sqlite3'}"
    assert len(optuna.get_all_study_names(storage)) == 4  # one study per (proposer, seed), run to the largest budget
    runs = list(csv.DictReader((nb201_bench / "runs.csv").open()))
    assert len(runs) == 4 and all(int(r["evaluations"]) == max(BUDGETS) for r in runs)


def test_the_hv_at_a_budget_is_the_hv_of_the_first_paid_evaluations(nb201_bench: Path) -> None:
    storage = f"sqlite:///{nb201_bench / 'bench.sqlite3'}"
    problem = make_problem("nb201", {"dataset": "cifar10", "device": "fpga"})
    ref = problem.reference()
    assert ref is not None
    objectives = [o.name for o in problem.objectives]
    grew = 0
    for r in _rows(nb201_bench):
        acc, lat = _paid_values(storage, r["study"], problem.front_objectives, objectives, int(r["budget"]))
        assert len(acc) == int(r["budget"])
        assert float(r["hv"]) == pytest.approx(_union_hv(acc, lat, ref.floor, ref.ceiling) / ref.hv, rel=1e-9)
        grew += int(r["budget"]) == 10 and float(r["hv"]) > 0
    assert grew >= 2  # the check is not vacuous: runs found useful cells by 10 evaluations


def test_a_sampler_prefix_is_what_a_shorter_run_finds(nb201_bench: Path, tmp_path: Path) -> None:
    # the "anytime" claim for Optuna samplers: a run of budget 6 pays for the first 6 designs of a run of 10
    from coevo.search.runner import run_search

    problem = make_problem("nb201", {"dataset": "cifar10", "device": "fpga"})
    for proposer in ("random", "tpe"):
        short = run_search(problem, proposer, budget=6, seed=1, storage=f"sqlite:///{tmp_path / f'{proposer}.db'}")
        row = next(r for r in _rows(nb201_bench) if r["proposer"] == proposer and r["seed"] == "1" and r["budget"] == "6")
        assert short.evaluations == 6 and float(row["hv"]) == pytest.approx(short.hv_ratio, rel=1e-12)
        long_trials = optuna.load_study(study_name=row["study"], storage=f"sqlite:///{nb201_bench / 'bench.sqlite3'}").get_trials()
        short_trials = optuna.load_study(study_name=short.study, storage=short.storage).get_trials()
        assert [t.params for t in short_trials] == [t.params for t in long_trials[: len(short_trials)]]


def test_the_table_has_intervals_and_paired_differences_and_the_plot_exists(nb201_bench: Path) -> None:
    md = (nb201_bench / "budgets.md").read_text()
    levels = [line for line in md.splitlines() if line.startswith(("| 3 |", "| 6 |", "| 10 |"))]
    assert len(levels) == 6  # budgets x (level table, paired table)
    level_rows = levels[:3]
    assert all(line.count(" ± ") == 2 for line in level_rows)  # random and tpe: mean ± half-width over 2 seeds
    assert "best baseline" in md and "first B paid evaluations" in md
    png = (nb201_bench / "budgets_fpga.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_a_rerun_reuses_the_finished_runs(nb201_bench: Path) -> None:
    storage = f"sqlite:///{nb201_bench / 'bench.sqlite3'}"
    before, rows = _trials(storage), _rows(nb201_bench)
    spec = BenchSpec("nb201", {"dataset": "cifar10"}, ("fpga",), ("random", "tpe"), (0, 1), budget=1, budgets=BUDGETS)
    run_budget_bench(spec, nb201_bench)
    assert _trials(storage) == before and _rows(nb201_bench) == rows


def test_a_longer_plain_bench_in_the_same_storage_is_scored_on_its_prefixes(tmp_path: Path) -> None:
    plain = BenchSpec("nb201", {"dataset": "cifar10"}, ("fpga",), ("random",), (0,), budget=12)
    run_bench(plain, tmp_path)
    storage = f"sqlite:///{tmp_path / 'bench.sqlite3'}"
    before = _trials(storage)
    run_budget_bench(BenchSpec("nb201", {"dataset": "cifar10"}, ("fpga",), ("random",), (0,), budget=1, budgets=(4, 8)), tmp_path)
    assert _trials(storage) == before  # nothing evaluated: the study already holds 12
    assert [(r["budget"], r["paid"]) for r in _rows(tmp_path)] == [("4", "4"), ("8", "8")]


@pytest.mark.slow  # 24 simulated NoC evaluations: about 25 s on 2 shared cores
def test_without_a_true_front_the_hv_is_over_the_pooled_front_of_every_run(tmp_path: Path) -> None:
    options = {"topology": "mesh", "k": 4, "load": 0.5, "gt_share": 0.8}
    spec = BenchSpec("noc", options, (), ("random", "tpe"), (0, 1), budget=1, budgets=(2, 4, 6))
    run_budget_bench(spec, tmp_path)
    storage = f"sqlite:///{tmp_path / 'bench.sqlite3'}"
    problem = make_problem("noc", options)
    assert problem.reference() is None
    bounds = problem.acquisition_bounds()
    assert bounds is not None
    objectives = [o.name for o in problem.objectives]
    rows = _rows(tmp_path)
    assert len(rows) == 12 and {r["hv_kind"] for r in rows} == {"pooled"} and {r["front_recall"] for r in rows} == {""}
    pool_first: list[float] = []
    pool_second: list[float] = []
    for study in optuna.get_all_study_names(storage):  # every run of the group, every proposer and seed
        a, c = _paid_values(storage, study, problem.front_objectives, objectives)
        pool_first += a
        pool_second += c
    best = _union_hv(pool_first, pool_second, *bounds)
    assert best > 0
    for r in rows:
        a, c = _paid_values(storage, r["study"], problem.front_objectives, objectives, int(r["budget"]))
        assert float(r["hv"]) == pytest.approx(_union_hv(a, c, *bounds) / best, rel=1e-9)
    assert all(float(r["hv"]) <= 1 + 1e-12 for r in rows) and min(float(r["hv"]) for r in rows) < 1


def test_without_bounds_the_reference_point_is_the_pooled_worst_paid_evaluation(tmp_path: Path) -> None:
    reference = f"{Path(__file__).resolve()}:UnboundedNB201"
    spec = BenchSpec(reference, {"dataset": "cifar10"}, ("fpga",), ("random", "tpe"), (0, 1), budget=1, budgets=(4, 12))
    run_budget_bench(spec, tmp_path)
    storage = f"sqlite:///{tmp_path / 'bench.sqlite3'}"
    problem = make_problem("nb201", {"dataset": "cifar10", "device": "fpga"})
    objectives = [o.name for o in problem.objectives]
    rows = _rows(tmp_path)
    assert len(rows) == 8 and {r["hv_kind"] for r in rows} == {"pooled-worst"}
    pooled = [_paid_values(storage, name, problem.front_objectives, objectives) for name in optuna.get_all_study_names(storage)]
    floor, ceiling = min(min(a) for a, _ in pooled), max(max(c) for _, c in pooled)
    best = _union_hv([x for a, _ in pooled for x in a], [x for _, c in pooled for x in c], floor, ceiling)
    for r in rows:
        a, c = _paid_values(storage, r["study"], problem.front_objectives, objectives, int(r["budget"]))
        assert float(r["hv"]) == pytest.approx(_union_hv(a, c, floor, ceiling) / best, rel=1e-9)
    assert 0 < min(float(r["hv"]) for r in rows) < 1
    # the one-budget bench ranks such a problem on the same pooled HV (one definition)
    plain = BenchSpec(reference, {"dataset": "cifar10"}, ("fpga",), ("random", "tpe"), (0, 1), budget=12, storage=storage)
    table = run_bench(plain, tmp_path / "plain").markdown
    tpe = [r for r in rows if r["proposer"] == "tpe" and r["budget"] == "12"]
    mean = sum(float(r["hv"]) for r in tpe) / len(tpe)
    assert f"| fpga | tpe | {mean:.4f} ± " in table and "worst values of every paid evaluation" in table


def test_a_found_set_scored_after_the_search_gets_one_study_per_budget(tmp_path: Path) -> None:
    reference = f"{Path(__file__).resolve()}:FrontScoredNB201"
    spec = BenchSpec(reference, {"dataset": "cifar10"}, ("fpga",), ("random",), (0, 1), budget=1, budgets=(3, 6))
    planned: list[int] = []
    run_budget_bench(spec, tmp_path, on_plan=planned.append)
    assert planned == [4]
    storage = f"sqlite:///{tmp_path / 'bench.sqlite3'}"
    names = sorted(optuna.get_all_study_names(storage))
    assert names == [f"nb201-cifar10-fpga-random-s{s}-b{b}" for s in (0, 1) for b in (3, 6)]
    problem = make_problem("nb201", {"dataset": "cifar10", "device": "fpga"})
    ref = problem.reference()
    assert ref is not None
    objectives = [o.name for o in problem.objectives]
    rows = _rows(tmp_path)
    assert len(rows) == 4
    for r in rows:
        assert r["study"].endswith(f"-b{r['budget']}") and r["paid"] == r["budget"]
        acc, lat = _paid_values(storage, r["study"], problem.front_objectives, objectives)
        assert len(acc) == int(r["budget"])
        assert float(r["hv"]) == pytest.approx(_union_hv(acc, lat, ref.floor, ref.ceiling) / ref.hv, rel=1e-9)
    before = _trials(storage)
    run_budget_bench(spec, tmp_path)
    assert _trials(storage) == before


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        (["--budgets", "0,x"], "'x' is not a whole number"),
        (["--budgets", "0"], "the largest one positive"),
        (["--budgets=-5,10"], "from 0"),
        (["--budgets", "10,10,20"], "must increase"),
        (["--budgets", "20,10"], "must increase"),
        (["--budgets", "10,,20"], "an empty item"),
        (["--budgets", "10,20", "--budget", "5"], "not both"),
    ],
)
def test_bad_budgets_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], match: str) -> None:
    out = tmp_path / "out"
    code = main(["bench", "--problem", "nb201", "--devices", "fpga", "--proposers", "random", "--seeds", "1", "--out", str(out), *flags])
    err = capsys.readouterr().err
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_parse_budgets_reads_an_increasing_list() -> None:
    assert parse_budgets("10, 20,40,60") == (10, 20, 40, 60)
    assert parse_budgets("7") == (7,)
    assert parse_budgets("0,30,100,300") == (0, 30, 100, 300)  # 0: the zero-information front
    for bad in ("", "0", "-1,10", "10,10", "30,20"):
        with pytest.raises(UserInputError, match="such as 0,10,20,40,60"):
            parse_budgets(bad)


def test_the_union_hv_of_the_test_agrees_with_a_hand_count() -> None:
    # boxes up to ceiling 4 above floor 0 from (y1, y2) = (0.5, 0.5), (2, 1), (3, 2): 0.5 * 0.5 + 2 * 1 + 3 * 2
    assert _union_hv([2.0, 3.0, 0.5], [1.0, 2.0, 0.5], 0.0, 4.0) == pytest.approx(2 * 1 + 3 * 2 + 0.5 * 0.5)
    assert _union_hv([], [], 0.0, 1.0) == 0.0
    assert np.isclose(_union_hv([1.0, 1.0], [0.0, 0.0], 0.0, 2.0), 2.0)


def _synthetic(pelnas_at_20: Sequence[float]) -> list[BudgetRow]:
    """tpe is the best baseline at 40 (0.90, 0.92, 0.94 over seeds 0-2), random below it; pelnas at 20 as given."""
    rows = []
    for b in (10, 20, 40, 60):
        for s in (0, 1, 2):
            rows.append(BudgetRow("g", "tpe", s, b, b, 0.5 + b / 100 + 0.02 * s, "pooled", None, False, f"tpe-s{s}"))
            rows.append(BudgetRow("g", "random", s, b, b, 0.4 + b / 100, "pooled", None, False, f"random-s{s}"))
            hv = pelnas_at_20[s] if b == 20 else 0.5
            rows.append(BudgetRow("g", "pelnas", s, b, b, hv, "pooled", None, b in (10, 20), f"pelnas-s{s}"))
    return rows


def test_the_summary_says_whether_pelnas_at_20_reaches_the_best_baseline_at_40(tmp_path: Path) -> None:
    from coevo.figures.budgets import report
    from coevo.search.bench_budgets import read_budget_csv, write_budget_csv

    (tmp_path / "quant").mkdir()
    (tmp_path / "reram").mkdir()
    misses = _synthetic([0.89, 0.91, 0.93])  # 0.01, 0.01, 0.01 below tpe's 0.90, 0.92, 0.94
    write_budget_csv(misses, "quant", tmp_path / "quant" / "budgets.csv")
    assert read_budget_csv(tmp_path / "quant" / "budgets.csv") == misses
    write_budget_csv(_synthetic([0.95, 0.92, 0.96]), "reram", tmp_path / "reram" / "budgets.csv")  # +0.05, 0, +0.02
    text = report(tmp_path)
    quant = text[text.index("### quant") : text.index("### reram")]
    reram = text[text.index("### reram") :]
    # quant: every pair -0.01 (no spread: a zero-width interval); 0.01 of tpe's mean 0.92 is 1.1 %
    assert "(tpe, the highest mean HV at 40): -0.0100 ± 0.0000" in quant
    assert "does not hold: pelnas misses it by 0.0100 HV (1.1% of tpe's mean)." in quant
    # same budget, against tpe: at 10, 0.5 - (0.60, 0.62, 0.64): mean -0.12, sd 0.02, half-width 4.3027 * 0.02 / sqrt(3);
    # at 20, (0.89, 0.91, 0.93) - (0.70, 0.72, 0.74) = 0.19 on every seed
    assert "| pelnas - best baseline (paired) | -0.120 ± 0.050 * (tpe) | +0.190 ± 0.000 * (tpe) |" in quant
    # reram: mean +0.0233, sd 0.0252, t(0.975, 2) = 4.3027: half-width 0.0625
    assert "+0.0233 ± 0.0625" in reram and "the interval includes 0" in reram
    assert '40" is undecided: the seeds cannot tell (mean difference +0.0233 HV)' in reram  # a mean above 0 is not a yes
    # pelnas at 20: 0.95, 0.92, 0.96: mean 0.9433, sd 0.0208: half-width 4.3027 * 0.0208 / sqrt(3) = 0.0517
    assert "| pelnas | 0.500 ± 0.000 | 0.943 ± 0.052 |" in reram
    assert "Not measured: prune, fpga-transformer" in text


def test_a_budget_page_is_rendered_again_from_its_csv_alone(tmp_path: Path) -> None:
    from coevo.search.bench_budgets import rerender_budget_page, write_budget_csv

    write_budget_csv(_synthetic([0.95, 0.92, 0.96]), "quant", tmp_path / "budgets.csv")
    page = rerender_budget_page(tmp_path).read_text()
    assert page.startswith("# coevo bench --budgets: quant, budgets [10, 20, 40, 60], seeds [0, 1, 2]")
    assert "## model g" in page  # quant's run group is its model
    # pelnas at 20 minus tpe at 40: +0.05, 0, +0.02, an interval over 0
    assert "| pelnas at 20 | tpe at 40 | 0.9433 ± 0.0517 | 0.9200 ± 0.0497 | +0.0233 ± 0.0625 | undecided (the interval holds 0) |" in page


def test_runs_csv_keeps_a_problem_option_named_seed_apart_from_the_run_seed(tmp_path: Path) -> None:
    from coevo.search.bench import _write_csv
    from coevo.search.runner import SearchResult

    spec = {"problem": "quant", "model": "cnn-digits", "seed": 0}
    result = SearchResult("q-s2", "", spec, "tpe", 2, 60, 60, 60, 61, 1.5, None, None, None, [])
    _write_csv([result], tmp_path / "runs.csv")
    header, row = (tmp_path / "runs.csv").read_text().splitlines()
    assert header.split(",").count("seed") == 1 and "option_seed" in header
    values = dict(zip(header.split(","), row.split(","), strict=True))
    assert values["option_seed"] == "0" and values["seed"] == "2" and values["model"] == "cnn-digits"


def test_the_committed_summary_is_what_its_saved_budgets_csv_render(tmp_path: Path) -> None:
    import shutil

    from coevo.figures._cli import main as figures
    from coevo.figures._common import strip_provenance

    committed = Path(__file__).resolve().parents[2] / "docs" / "bench" / "budgets"
    shutil.copytree(committed, tmp_path / "budgets")
    assert figures(["budgets", "--out", str(tmp_path / "budgets"), "--report-only"]) == 0
    rendered = (tmp_path / "budgets" / "summary.md").read_text()
    assert strip_provenance(rendered) == strip_provenance((committed / "summary.md").read_text())
    assert rendered.count("### ") == 4 and "Not measured" not in rendered


def test_a_significant_difference_that_rounds_to_zero_gets_the_digits_that_show_it() -> None:
    from coevo.figures.budgets import _difference

    assert _difference([0.01, 0.02, 0.03]) == "+0.020 ± 0.025"  # includes 0: three decimals, no mark
    tiny = [-0.00005, -0.00006, -0.00007]  # mean -0.00006, half-width 0.0000248: excludes 0
    assert _difference(tiny) == "-0.00006 ± 0.00002 *"
    # mean 0.0021, half-width 4.303 * 0.0001 / sqrt(3) = 0.000248: the mean shows at 3 decimals, the half-width needs 4
    assert _difference([0.002, 0.0021, 0.0022]) == "+0.0021 ± 0.0002 *"


def test_reaching_the_baseline_is_judged_on_the_interval_not_the_mean() -> None:
    from coevo.search.bench_budgets import reaches

    assert reaches([0.5, -0.5, 0.01], [0.9, 0.9, 0.9]) == "undecided (the interval holds 0)"  # mean above 0, seeds cannot tell
    assert reaches([-0.3, 0.2, -0.01], [0.9, 0.9, 0.9]) == "undecided (the interval holds 0)"  # mean below 0 likewise
    assert reaches([0.020, 0.021, 0.022], [0.9, 0.9, 0.9]) == "yes"  # 0.021 ± 0.0025
    assert reaches([0.0, 0.0, 0.0], [0.9, 0.9, 0.9]) == "yes"  # the same HV every seed
    assert reaches([-0.019, -0.020, -0.021], [1.0, 1.0, 1.0]) == "no, by 0.0200 (2.0% of the baseline's mean)"
    assert reaches([0.1], [0.9]) == "undecided (one seed: no interval)"
    assert reaches([], []) == "n/a"
