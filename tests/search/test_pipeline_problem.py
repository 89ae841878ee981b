"""The ``pipeline`` search problem: encoding, feasibility, exact front, and a co-evolution search through the CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from coevo.agent.cli import main
from coevo.search.errors import UserInputError
from coevo.search.niches import niche_of
from coevo.search.pipeline.problem import Config, PipelineProblem
from coevo.search.problems import make_problem
from coevo.search.study import load_search

OPTIONS = {"model": "unet-tiny", "cluster": "v100x8-pcie", "global_batch": 16, "resolution": 8}


@pytest.fixture(scope="module")
def problem() -> PipelineProblem:
    p = make_problem("pipeline", OPTIONS)
    assert isinstance(p, PipelineProblem)
    return p


def test_points_round_trip_through_params_ids_and_text(problem: PipelineProblem) -> None:
    points = problem.all_points()
    # pp in 1, 2, 4, 8 on 8 devices; two schedules per partitioner; three balances for the byte-aware
    # partitioners (blockwise-bytes, skip-aware), balance 0 only for the compute-balanced baselines (blockwise, blockwise-direct)
    assert len(points) == 4 * 5 * (2 + 2 + 2 * 3 + 2 * 3) * 2
    assert len({problem.point_id(c) for c in points}) == len(points)
    for c in points[::7]:
        assert problem.from_params(problem.to_params(c)) == c
        assert problem.parse_design(problem.describe(c)) == c
    with pytest.raises(UserInputError, match="pp=3 is outside the space"):
        problem.parse_design("pp=3 microbatch=1 partitioner=blockwise schedule=1f1b balance=0 recompute=off")
    with pytest.raises(UserInputError, match="dp=3 does not match pp=2"):
        problem.parse_design("pp=2 dp=3 microbatch=1 partitioner=blockwise schedule=1f1b balance=0 recompute=off")
    with pytest.raises(UserInputError, match="format: key=value"):
        problem.parse_design("a deep pipeline please")


def test_infeasible_configurations_say_why_and_run_at_zero(problem: PipelineProblem) -> None:
    no_batch = Config(1, 4, "blockwise", "1f1b", 0.0, "off")  # dp 8 x microbatch 4 > 16
    assert "not a multiple of dp x microbatch" in str(problem.infeasible(no_batch))
    too_deep = Config(8, 1, "skip-aware", "wave", 0.0, "off")  # unet-tiny has 4 pairs
    assert "at most 4 stages" in str(problem.infeasible(too_deep))
    assert problem.evaluate(too_deep)["samples_per_s"] == 0.0
    ok = Config(2, 2, "skip-aware", "wave", 0.0, "off")
    assert problem.infeasible(ok) is None and problem.evaluate(ok)["samples_per_s"] > 0
    assert make_problem("pipeline", OPTIONS).evaluate(ok) == problem.evaluate(ok)  # deterministic: a new instance (no memo)
    assert problem.cheap_values([ok])["memory_gb"][0] == problem.evaluate(ok)["memory_gb"]


def test_exact_front_and_operators(problem: PipelineProblem) -> None:
    ref = problem.reference()
    assert ref.ids and ref.hv > 0
    feasible = [c for c in problem.all_points() if problem.infeasible(c) is None]
    best = max(problem.evaluate(c)["samples_per_s"] for c in feasible)
    assert max(ref.front_first) == pytest.approx(best)
    c = Config(2, 2, "skip-aware", "wave", 0.0, "off")
    changed = [[f for f, a, b in zip(Config._fields, c, n, strict=True) if a != b] for n in problem.neighbours(c)]
    # the schedule's name follows the plan; compute-balanced baselines take balance 0
    assert all(len(f) == 1 or (f[0] == "partitioner" and set(f[1:]) <= {"schedule", "balance"}) for f in changed)
    assert c not in problem.neighbours(c) and len(set(problem.neighbours(c))) == len(problem.neighbours(c))
    rng = random.Random(0)
    assert problem.crossover(c, problem.random_point(rng), rng) in set(problem.all_points())
    assert problem.features(feasible[:5]).shape == (5, 5 + 4 + 3)  # 4 partitioners, 3 schedules one-hot
    niches = problem.niches()
    assert {niche_of(niches, p) for p in problem.all_points()} == {"pp1", "pp2-3", "pp4-7", "pp8-15"}


def test_1f1b_and_wave_are_one_schedule_named_by_the_plan(problem: PipelineProblem) -> None:
    # the simulator runs both as the 1F1B rule over the plan's virtual stages (V-shaped on skip-aware plans)
    for partitioner, name in (("blockwise", "1f1b"), ("skip-aware", "wave")):
        one, other = (Config(2, 2, partitioner, s, 0.0, "off") for s in ("1f1b", "wave"))
        assert problem.point_id(one) == problem.point_id(other) and f"schedule={name}" in problem.describe(other)
        assert problem.evaluate(one) == problem.evaluate(other)
        params = problem.to_params(one) | {"schedule": "wave" if name == "1f1b" else "1f1b"}
        assert problem.from_params(params).schedule == name
    for partitioner in ("blockwise", "blockwise-direct", "blockwise-bytes"):
        assert {c.schedule for c in problem.all_points() if c.partitioner == partitioner} == {"gpipe", "1f1b"}
    assert {c.balance for c in problem.all_points() if c.partitioner == "blockwise-direct"} == {0.0}


def test_unknown_options_are_explained() -> None:
    with pytest.raises(UserInputError, match="unknown cluster"):
        make_problem("pipeline", {**OPTIONS, "cluster": "tpu-pod"})
    with pytest.raises(UserInputError, match=r"no option 'dataset' \(options: model, cluster, global_batch, resolution\)"):
        make_problem("pipeline", {**OPTIONS, "dataset": "cifar10"})


def test_pelnas_search_through_the_cli_and_resume(capsys: pytest.CaptureFixture[str], storage: str) -> None:
    args = ["search", "--problem", "pipeline", "--model", "unet-tiny", "--cluster", "v100x8-pcie", "--global-batch", "16"]
    args += ["--resolution", "8", "--proposer", "pelnas", "--budget", "40", "--storage", storage, "--json"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["evaluations"] == 40 and 0 < data["hv_ratio"] <= 1
    assert all(set(row) >= {"config", "samples_per_s", "memory_gb"} for row in data["front"])
    name = "pipeline-unet-tiny-v100x8-pcie-16-8-pelnas-s0"
    stored = load_search(storage, name)  # the int options come back from the recorded spec
    assert stored.problem.spec() == {"problem": "pipeline", **OPTIONS}
    assert main(["kb", "list", "--storage", storage, "--study", name, "--json"]) == 0
    heuristics = [json.loads(line) for line in capsys.readouterr().out.splitlines()]  # JSON lines, one per heuristic
    assert heuristics and all(h["kb"] == name for h in heuristics)  # the co-evolution engine learned heuristics on this problem too


def test_bench_runs_the_pipeline_problem_per_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench"
    args = ["bench", "--problem", "pipeline", "--model", "unet-tiny", "--cluster", "v100x8-pcie", "--global-batch", "16"]
    args += ["--resolution", "8", "--proposers", "random,pelnas", "--budget", "10", "--seeds", "1", "--out", str(out)]
    assert main(args) == 0
    table = (out / "results.md").read_text()
    assert "| v100x8-pcie | random |" in table and "| v100x8-pcie | pelnas |" in table
    assert "# coevo bench: pipeline (model=unet-tiny, global_batch=16, resolution=8), budget 10" in table  # options as run
    assert (out / "hv_v100x8-pcie.png").exists() and (out / "front_v100x8-pcie.png").exists()
