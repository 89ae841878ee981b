"""The codesign figure (joint vs sequential co-design on nb201-accel): its pieces, with hand-computed expectations, and a tiny run."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from coevo.figures import codesign
from coevo.figures._common import read_numbers, strip_provenance
from coevo.search.errors import UserInputError
from coevo.search.nb201_accel.accel import Accel
from coevo.search.nb201_accel.problem import NB201AccelProblem


def test_split_budget_halves_and_refuses_tiny_budgets() -> None:
    assert codesign.split_budget(100) == (50, 50)
    assert codesign.split_budget(7) == (3, 4)
    with pytest.raises(UserInputError, match="at least 4"):
        codesign.split_budget(3)


def test_stages_count_evaluations_or_accuracy_queries() -> None:
    assert codesign.stages("sequential", 101) == (50, 51)  # equal joint-design evaluations
    assert codesign.stages("sequential-acc", 100) == (100, 100)  # equal accuracy queries: stage 2 pays none
    with pytest.raises(UserInputError):
        codesign.stages("sequential-acc", 2)


def test_front_cells_keeps_the_distinct_cells_of_the_front() -> None:
    # (90, 2.0) is dominated by the same cell at (90, 1.5); (70, 0.6) by (80, 0.5)
    cells = [5, 7, 5, 9, 11]
    acc = [90.0, 85.0, 90.0, 80.0, 70.0]
    lat = [2.0, 1.0, 1.5, 0.5, 0.6]
    assert codesign.front_cells(cells, acc, lat) == [7, 5, 9]
    assert codesign.front_cells([], [], []) == []


def _rows() -> list[dict[str, object]]:
    return [
        {"arm": "joint", "budget": 100, "seed": 0, "hv": 0.90, "recall": 0.2},
        {"arm": "joint", "budget": 100, "seed": 1, "hv": 0.95, "recall": 0.3},
        {"arm": "joint", "budget": 100, "seed": 2, "hv": 0.93, "recall": 0.1},
        {"arm": "sequential", "budget": 100, "seed": 2, "hv": 0.81, "recall": 0.0},
        {"arm": "sequential", "budget": 100, "seed": 0, "hv": 0.80, "recall": 0.1},
        {"arm": "sequential", "budget": 200, "seed": 1, "hv": 0.10, "recall": 0.0},  # another budget: not paired
    ]


def test_paired_follows_the_seed_and_the_budget() -> None:
    diffs = codesign.paired(_rows(), "joint", "sequential", 100)
    assert diffs == pytest.approx([0.10, 0.12])  # seeds 0 and 2, in seed order; seed 1 has no sequential run at 100
    assert codesign.paired(_rows(), "joint", "sequential", 100, "recall") == pytest.approx([0.1, 0.1])
    assert codesign.paired(_rows(), "joint", "sequential", 200) == []


def test_verdict_against_hand_computed_t_intervals() -> None:
    # three seeds: half-width = t(0.975, 2) * sd / sqrt(3) = 4.302653 * 0.01 / 1.732051 = 0.024841
    assert codesign.verdict([0.10, 0.11, 0.12], "joint", "sequential") == "joint ahead"
    assert codesign.verdict([0.02, 0.03, 0.04], "joint", "sequential") == "joint ahead"  # mean 0.03 > 0.0248
    assert codesign.verdict([0.01, 0.02, 0.03], "joint", "sequential") == "no difference the seeds can resolve"  # 0.02 < 0.0248
    assert codesign.verdict([-0.10, -0.11, -0.12], "joint", "sequential") == "sequential ahead"
    assert codesign.verdict([0.5], "joint", "sequential") == "too few seeds to say"


def test_findings_say_the_verdict_per_budget() -> None:
    rows = [
        {"arm": arm, "budget": 100, "seed": s, "hv": hv, "recall": 0.0}
        for arm, hvs in (("joint", (0.90, 0.91, 0.92)), ("sequential", (0.80, 0.80, 0.80)))
        for s, hv in enumerate(hvs)
    ]
    text = codesign.findings(rows)
    assert "B = 100, **joint** vs **sequential**: HV-ratio difference +0.1100 ± 0.0248" in text
    assert "**joint ahead**" in text


def test_where_joint_does_not_pay_names_the_arms_not_behind() -> None:
    rows = [
        {"arm": arm, "budget": 100, "seed": s, "hv": hv, "recall": 0.0, "evaluations": ev, "cells": cells}
        for arm, hvs, ev, cells in (
            ("joint", (0.90, 0.91, 0.92), 100, 60),
            ("sequential", (0.80, 0.80, 0.80), 100, 50),
            ("sequential-acc", (0.90, 0.92, 0.91), 200, 100),
        )
        for s, hv in enumerate(hvs)
    ]
    text = codesign.where_joint_does_not_pay(rows)
    assert "**sequential**" not in text  # joint is ahead of it: +0.11 ± 0.0248
    assert "B = 100: **sequential-acc** is not behind joint search (no difference the seeds can resolve" in text
    assert (
        "evaluated 200 joint designs and paid 100 distinct cells (accuracy queries, training runs); joint search evaluated 100 and paid 60"
        in text
    )
    assert "ahead of every sequential arm" in codesign.where_joint_does_not_pay(rows[:6])
    free = [{"arm": r["arm"], "budget": 100, "seed": r["seed"], "hv_free": 0.95 if r["arm"] == "joint" else r["hv"]} for r in rows[:6]]
    # under the free-accelerator scoring joint - sequential = 0.15 each seed: ahead, so no line; made equal, a line
    assert "cells on their fastest accelerators" not in codesign.where_joint_does_not_pay(rows[:6], free)
    for r in free:
        r["hv_free"] = 0.9 + 0.01 * int(r["seed"])
    assert "B = 100, cells on their fastest accelerators: **sequential** is not behind joint search (no difference" in (
        codesign.where_joint_does_not_pay(rows[:6], free)
    )


def test_bounds_section_says_when_one_accelerator_serves_every_cell() -> None:
    rows = [
        {"bound": "every cell on the default accelerator", "accel": "a", "hv": 0.97},
        {"bound": "every cell on the best single accelerator", "accel": "b", "hv": 1.0},
    ]
    assert "One accelerator (`b`) is the fastest for every cell" in codesign.bounds_section(rows)
    rows[1]["hv"] = 0.99
    assert "One accelerator" not in codesign.bounds_section(rows)


def test_stage_problems_are_corners_of_the_joint_space() -> None:
    joint = NB201AccelProblem(dataset="cifar10")
    fixed = codesign.FixedAccelProblem(dataset="cifar10")
    rng = random.Random(0)
    for _ in range(5):
        cell, accel = fixed.random_point(rng)
        assert Accel(*accel) == codesign.DEFAULT_ACCEL
        assert fixed.evaluate((cell, accel)) == joint.evaluate((cell, accel))
    kept = codesign.KeptCellsProblem(dataset="cifar10", cells="10,20")
    seen = set()
    for _ in range(20):
        point = kept.random_point(rng)
        seen.add(point[0][0])
        design = kept.joint_point(point)
        assert kept.evaluate(point) == joint.evaluate(design)
        assert kept.point_id(point) == joint.point_id(design)  # ids are nb201-accel's, so front recall counts them
    assert seen == {10, 20}


@pytest.mark.slow
def test_a_tiny_run_pays_equal_evaluations_and_re_renders(tmp_path: Path) -> None:
    out = tmp_path / "out"
    codesign.main(["--budgets", "6", "--seeds", "0,1", "--out", str(out), "--runs", str(tmp_path / "runs")])
    rows = read_numbers(out / codesign.RUNS_CSV)
    assert sorted((r["arm"], r["seed"]) for r in rows) == sorted((a, s) for a in codesign.ARMS for s in (0, 1))
    assert all(r["evaluations"] == (12 if r["arm"] == "sequential-acc" else 6) for r in rows)
    # the sequential flow pays 3 cells in stage 1 and none in stage 2 (its cells are stage 1's); at equal accuracy queries, 6
    assert all(r["cells"] <= 3 and 1 <= r["kept"] <= 3 for r in rows if r["arm"] == "sequential")
    assert all(r["cells"] <= 6 for r in rows if r["arm"] == "sequential-acc")
    designs = read_numbers(out / codesign.DESIGNS_CSV)
    seq = [d for d in designs if d["arm"] == "sequential" and d["seed"] == 0]
    assert {d["cell"] for d in seq if d["stage"] == 2} <= {d["cell"] for d in seq if d["stage"] == 1}
    assert all(d["accel"] == "32-32-ws-256-32-64-600" for d in seq if d["stage"] == 1)
    bounds = {r["bound"]: r["hv"] for r in read_numbers(out / codesign.BOUNDS_CSV)}
    assert bounds["every cell on its own fastest accelerator (the exact front)"] == pytest.approx(1.0)  # by definition
    assert bounds["every cell on the default accelerator"] <= bounds["every cell on the best single accelerator"] <= 1.0 + 1e-9
    # each cell on its own fastest accelerator dominates the cell as evaluated: never a lower HV ratio
    free = {(r["arm"], r["seed"]): r["hv_free"] for r in read_numbers(out / codesign.FREE_CSV)}
    assert all(free[(r["arm"], r["seed"])] >= r["hv"] - 1e-9 for r in rows)
    page = (out / codesign.MD).read_text()
    assert "**joint** vs **sequential**" in page and (out / codesign.PNG).exists()
    codesign.main(["--report-only", "--out", str(out)])
    assert strip_provenance((out / codesign.MD).read_text()) == strip_provenance(page)
    # rerunning one arm replaces its rows and keeps the others' (the searches are read back from --runs)
    codesign.main(["--budgets", "6", "--seeds", "0", "--arms", "random", "--out", str(out), "--runs", str(tmp_path / "runs")])
    again = read_numbers(out / codesign.RUNS_CSV)
    assert [(r["arm"], r["seed"]) for r in again] == [(r["arm"], r["seed"]) for r in rows]
    assert [r["hv"] for r in again] == [r["hv"] for r in rows]


def test_report_only_rerenders_the_committed_page(tmp_path: Path) -> None:
    committed = Path(__file__).resolve().parents[2] / "docs" / "bench" / "codesign"
    shutil.copytree(committed, tmp_path / "codesign")
    codesign.main(["--report-only", "--out", str(tmp_path / "codesign")])
    rendered = (tmp_path / "codesign" / codesign.MD).read_text()
    assert strip_provenance(rendered) == strip_provenance((committed / codesign.MD).read_text())
