"""The spmm problem: the space, measured objectives on a small graph, niches, its CLI flags and a short search."""

from __future__ import annotations

import contextlib
import io
import random

import numpy as np
import pytest

from coevo.agent.cli import main
from coevo.search.errors import UserInputError
from coevo.search.problems import make_problem
from coevo.search.runner import run_search
from coevo.search.spmm.problem import LONG_ROW, WIDTHS, SpmmDesign, SpmmProblem


@pytest.fixture(scope="module")
def problem() -> SpmmProblem:
    return SpmmProblem(graph="rmat-100k", feature_dim=16, threads=2, repeats=3)


def test_evaluate_measures_the_median_and_derives_gflops(problem: SpmmProblem) -> None:
    d = SpmmDesign(1 << 16, 256, 16, True, 1)
    v = problem.evaluate(d)
    assert list(v) == ["gflops", "threads", "time_ms", "time_iqr_ms"]
    assert v["gflops"] == pytest.approx(2 * 100_000 * 16 / (v["time_ms"] / 1e3) / 1e9)
    assert v["threads"] == 1.0 and v["time_iqr_ms"] >= 0
    assert problem.cheap_values([d])["threads"].tolist() == [1.0]


def test_every_design_computes_the_same_product(problem: SpmmProblem) -> None:
    a = problem.graph
    x = np.random.default_rng(1).standard_normal((a.shape[1], 16)).astype(np.float32)
    expected = a.to_scipy() @ x
    from coevo.sim.graph.spmm import spmm_blocked

    rng = random.Random(0)
    for d in [problem.random_point(rng) for _ in range(4)] + [SpmmDesign(1 << 14, 256, 16, False, 2)]:
        np.testing.assert_allclose(spmm_blocked(a, x, params=problem.params_of(d)), expected, rtol=1e-4, atol=1e-4)


def test_space_niches_and_design_text(problem: SpmmProblem) -> None:
    d = SpmmDesign(1 << 18, LONG_ROW[-1], WIDTHS[-1], False, 2)
    assert problem.parse_design(problem.describe(d)) == d
    assert problem.point_id(d) == f"w262144-l{LONG_ROW[-1]}-c4096-n-p2"
    niches = {n.id: n for n in problem.niches()}
    assert niches["parallel"].contains(d) and not niches["serial"].contains(d)
    assert niches["serial"].contains(d._replace(threads=1))
    # one level up or down in each of the five parameters: the lowest block_work, long_row and threads have one neighbour
    # each, sort one, width 16 two (8 and 32)
    assert len(problem.neighbours(SpmmDesign(1 << 14, 256, 16, True, 1))) == 6
    with pytest.raises(UserInputError, match="width=7 is outside the space"):
        problem.from_params({**problem.to_params(d), "width": 7})


def test_options_are_checked() -> None:
    with pytest.raises(UserInputError, match="feature_dim"):
        make_problem("spmm", {"feature_dim": 0})
    with pytest.raises(UserInputError, match="exceeds numba's pool"):
        SpmmProblem(threads=255)
    with pytest.raises(UserInputError, match="unknown graph"):
        SpmmProblem(graph="nope").evaluate(SpmmDesign(1 << 14, 256, 16, True, 1))


def test_cli_has_the_option_flags() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["search", "--problem", "spmm", "--help"])
    text = out.getvalue()
    assert "--graph" in text and "--feature-dim" in text and "--repeats" in text


def test_a_short_pelnas_search_runs(storage: str) -> None:
    problem = SpmmProblem(graph="karate", feature_dim=8, threads=2, repeats=2)
    result = run_search(problem, "pelnas", budget=6, storage=storage, study_name="spmm-test")
    assert result.evaluations == 6 and result.front and all(row["gflops"] > 0 for row in result.front)
