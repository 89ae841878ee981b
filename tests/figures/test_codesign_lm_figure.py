"""The codesign-lm figure (joint vs sequential co-design on deploy-lm): its pieces by hand, the stage problems, a re-render."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from coevo.figures import codesign_lm
from coevo.figures._common import strip_provenance
from coevo.search.fpga.problem import FpgaDesign

DENSE8 = ((0.0,) * 4, (8,) * 4)
SPARSE4 = ((0.5, 0.75, 0.0, 0.25), (4, 2, 8, 6))


def test_kept_compressions_round_trip_through_the_option() -> None:
    text = codesign_lm.encode_kept([DENSE8, SPARSE4])
    assert text == "0,0,0,0:8,8,8,8;0.5,0.75,0,0.25:4,2,8,6"
    assert codesign_lm.decode_kept(text) == [DENSE8, SPARSE4]


def test_kept_compressions_are_the_distinct_ones_on_the_perplexity_latency_front() -> None:
    a, b = DENSE8, SPARSE4
    points = [(*a, "x"), (*b, "y"), (*a, "z")]
    # a at (-2.40, 1.2) is dominated by a at (-2.40, 1.1); b (-2.45, 1.0) is on the front
    rows = [{"neg_log_ppl": -2.40, "latency_ms": 1.2}, {"neg_log_ppl": -2.45, "latency_ms": 1.0}, {"neg_log_ppl": -2.40, "latency_ms": 1.1}]
    assert codesign_lm.kept_compressions(points, rows) == [b, a]


def test_pooled_front_scores_the_pool_itself_at_one() -> None:
    pool = [{"neg_log_ppl": -2.4, "latency_ms": 2.0}, {"neg_log_ppl": -2.5, "latency_ms": 1.0}]
    ref = codesign_lm.pooled_reference(pool, "latency_ms", floor=-2.8)
    assert ref.hv_ratio([-2.4, -2.5], [2.0, 1.0]) == pytest.approx(1.0)
    # the ceiling is the pool's largest latency (2.0): (-2.4, 2.0) adds no area, so (-2.5, 1.0) alone covers all 0.3 x 1.0
    assert ref.hv_ratio([-2.5], [1.0]) == pytest.approx(1.0)
    assert ref.hv_ratio([-2.4], [2.0]) == pytest.approx(0.0)


def test_stage_problems_are_corners_of_the_joint_space() -> None:
    options = {"batch": 4, "draws": 1, "eval_batches": 1, "calib_tokens": 64}
    fixed = codesign_lm.FixedFpgaDeployLm(**options)
    rng = random.Random(0)
    for _ in range(3):
        assert FpgaDesign(*fixed.random_point(rng)[2]) == codesign_lm.DEFAULT_FPGA
    kept = codesign_lm.KeptCompressionsProblem(**options, kept=codesign_lm.encode_kept([DENSE8, SPARSE4]))
    joint = kept.part("compression").problem.joint  # type: ignore[attr-defined]
    for _ in range(4):
        point = kept.random_point(rng)
        design = kept.joint_point(point)
        assert (design[0], design[1]) in (DENSE8, SPARSE4)
        mine, theirs = kept.cheap_values([point]), joint.cheap_values([design])
        assert {k: float(v[0]) for k, v in mine.items()} == pytest.approx({k: float(v[0]) for k, v in theirs.items()})


def test_report_only_rerenders_the_committed_page(tmp_path: Path) -> None:
    committed = Path(__file__).resolve().parents[2] / "docs" / "bench" / "codesign-lm"
    for name in (codesign_lm.RUNS_CSV, codesign_lm.DESIGNS_CSV):
        shutil.copy(committed / name, tmp_path / name)
    codesign_lm.main(["--report-only", "--out", str(tmp_path)])
    page = (tmp_path / codesign_lm.MD).read_text()
    assert strip_provenance(page) == strip_provenance((committed / codesign_lm.MD).read_text())
    assert (tmp_path / codesign_lm.PNG).exists()
