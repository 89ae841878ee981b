"""The ``mobo`` baseline: latency-stratified initial design, then expected-HV screening with latency known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import optuna

from coevo.search.bench import BenchSpec, run_bench
from coevo.search.nb201 import NB201Problem
from coevo.search.proposers import get_proposer
from coevo.search.runner import run_search


def test_mobo_stratifies_then_screens_by_expected_hv(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'm.db'}"
    problem = NB201Problem(dataset="cifar10", device="raspi4")
    result = run_search(problem, "mobo", budget=40, seed=0, storage=storage)
    trials = sorted(optuna.load_study(study_name=result.study, storage=storage).get_trials(deepcopy=False), key=lambda t: t.number)
    assert len(trials) == 40
    first = trials[:20]
    assert all("stratified by the cheap objective" in t.user_attrs.get("rationale", "") for t in first)
    # one point per latency bin: the 20 initial latencies fall in distinct 5 % quantile bins
    # of the whole space (20 uniform draws fill about 12.8 on average)
    edges = np.quantile(problem.table.lat("raspi4"), np.linspace(0, 1, 21)[1:-1])
    bins = {int(np.searchsorted(edges, t.values[1])) for t in first}
    assert len(bins) >= 16
    assert all("expected HV gain" in t.user_attrs.get("rationale", "") for t in trials[20:])
    assert get_proposer("mobo").sees_cheap_objectives and not get_proposer("tpe").sees_cheap_objectives


def test_bench_marks_who_sees_the_cheap_objective(tmp_path: Path) -> None:
    spec = BenchSpec("nb201", {"dataset": "cifar10"}, ("fpga",), ("random", "mobo"), (0, 1), budget=10)
    run_bench(spec, tmp_path / "out")
    md = (tmp_path / "out" / "results.md").read_text()
    rows = {line.split(" | ")[1]: line for line in md.splitlines() if line.startswith("| fpga | ")}
    assert rows["mobo"].endswith("| ◆ |") and rows["random"].endswith(" | |")
    assert "Column 'sees cheap' (◆): proposers that see the cheap objective(s) of every candidate before paying for it (mobo)" in md
