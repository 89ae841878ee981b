"""The codesign-cnn figure (joint vs sequential co-design on deploy-cnn): its pieces by hand, the stage problems, a tiny run."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from coevo.figures import codesign, codesign_cnn
from coevo.figures._common import read_numbers, strip_provenance
from coevo.search.deploy_cnn.problem import DeployCnnProblem
from coevo.search.nb201_accel.accel import Accel

W8, W4 = (8,) * 10, (4,) * 10
DENSE, SPARSE = (0.0,) * 4, (0.5, 0.75, 0.0, 0.25)


def test_kept_compressions_round_trip_through_the_option() -> None:
    kept = [(W8, DENSE), (W4, SPARSE)]
    text = codesign_cnn.encode_kept(kept)
    assert text == "8,8,8,8,8,8,8,8,8,8:0,0,0,0;4,4,4,4,4,4,4,4,4,4:0.5,0.75,0,0.25"
    assert codesign_cnn.decode_kept(text) == kept


def test_kept_compressions_are_the_distinct_ones_on_the_accuracy_energy_front() -> None:
    a, b, c = (W8, DENSE), (W4, DENSE), (W4, SPARSE)
    points = [(*a, "x"), (*b, "y"), (*a, "z"), (*c, "w")]
    # a at (95, 9) is dominated by a at (95, 8); b (90, 7) and c (85, 6) are on the front; a's second design is too
    rows = [
        {"accuracy": 95, "energy_uj": 9},
        {"accuracy": 90, "energy_uj": 7},
        {"accuracy": 95, "energy_uj": 8},
        {"accuracy": 85, "energy_uj": 6},
    ]
    assert codesign_cnn.kept_compressions(points, rows) == [b, a, c]


def test_pooled_front_scores_the_pool_itself_at_one_and_a_dominated_run_lower() -> None:
    pool = [{"accuracy": 98.0, "energy_uj": 9.0}, {"accuracy": 95.0, "energy_uj": 7.0}, {"accuracy": 85.0, "energy_uj": 10.0}]
    ref = codesign_cnn.pooled_reference(pool, "energy_uj")
    assert (ref.floor, ref.ceiling) == (80.0, 10.0)
    assert ref.hv_ratio([98.0, 95.0], [9.0, 7.0]) == pytest.approx(1.0)
    # alone, (95, 7) covers (95 - 80) x (10 - 7) = 45 of the pool's 45 + (98 - 95) x (10 - 9) = 48
    assert ref.hv_ratio([95.0], [7.0]) == pytest.approx(45 / 48)


def test_stage_problems_are_corners_of_the_joint_space() -> None:
    joint = DeployCnnProblem()
    fixed = codesign_cnn.FixedAccelDeployCnn()
    rng = random.Random(0)
    for _ in range(3):
        point = fixed.random_point(rng)
        assert Accel(*point[2]) == codesign.DEFAULT_ACCEL
        assert fixed.evaluate(point) == joint.evaluate(point)
    kept = codesign_cnn.KeptCompressionsProblem(kept=codesign_cnn.encode_kept([(W8, DENSE), (W4, SPARSE)]))
    seen = set()
    for _ in range(12):
        point = kept.random_point(rng)
        seen.add(point[0][0])
        assert kept.evaluate(point) == joint.evaluate(kept.joint_point(point))
    assert seen == {0, 1}


@pytest.mark.slow
def test_a_tiny_run_pays_equal_evaluations_and_re_renders(tmp_path: Path) -> None:
    out = tmp_path / "out"
    codesign_cnn.main(["--budgets", "4", "--seeds", "0,1", "--arms", "sequential,random", "--out", str(out), "--runs", str(tmp_path / "r")])
    rows = read_numbers(out / codesign_cnn.RUNS_CSV)
    assert sorted((r["arm"], r["seed"]) for r in rows) == sorted((a, s) for a in ("sequential", "random") for s in (0, 1))
    assert all(r["evaluations"] == 4 for r in rows)
    assert all(0 < r["hv_energy"] <= 1 + 1e-9 and 0 < r["hv_latency"] <= 1 + 1e-9 for r in rows)
    designs = read_numbers(out / codesign_cnn.DESIGNS_CSV)
    seq = [d for d in designs if d["arm"] == "sequential" and d["seed"] == 0]
    assert all(d["accel"] == "32-32-ws-256-32-64-600" for d in seq if d["stage"] == 1)
    stage1 = {(d["bits"], d["sparsity"]) for d in seq if d["stage"] == 1}
    assert {(d["bits"], d["sparsity"]) for d in seq if d["stage"] == 2} <= stage1  # stage 2 only re-uses stage 1's compressions
    for r in read_numbers(out / codesign_cnn.BEST_CSV):  # the best of 30,000 accelerators includes the default one
        assert r["energy_best"] <= r["energy_default"]
    page = (out / codesign_cnn.MD).read_text()
    assert "**sequential** vs **random**" in page and (out / codesign_cnn.PNG).exists()
    codesign_cnn.main(["--report-only", "--out", str(out)])
    assert strip_provenance((out / codesign_cnn.MD).read_text()) == strip_provenance(page)


def test_report_only_rerenders_the_committed_page(tmp_path: Path) -> None:
    committed = Path(__file__).resolve().parents[2] / "docs" / "bench" / "codesign-cnn"
    shutil.copytree(committed, tmp_path / "cc")
    codesign_cnn.main(["--report-only", "--out", str(tmp_path / "cc")])
    rendered = (tmp_path / "cc" / codesign_cnn.MD).read_text()
    assert strip_provenance(rendered) == strip_provenance((committed / codesign_cnn.MD).read_text())
