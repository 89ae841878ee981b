"""kernel.spmm: what it returns on a small graph, the issue's example, and its bad input (one clear line each)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from coevo.tools import REGISTRY, ToolArgumentError, call_tool

TOOL = REGISTRY.get("kernel.spmm")


def test_every_method_is_timed_and_agrees_with_scipy() -> None:
    value = call_tool(TOOL, {"graph": "rmat-100k", "feature_dim": 16, "method": "all", "repeats": 2}).value
    assert value["nnz"] == 100_000 and value["rows"] == value["cols"] == 8192 and value["feature_dim"] == 16
    assert set(value["timings"]) == {"degree-block", "naive", "scipy", "torch"}
    for m, row in value["timings"].items():
        assert row["max_rel_error"] < 1e-5, m
        # GFLOP/s is 2 nnz F over the median time, recomputed here from the reported median
        assert row["gflops"] == pytest.approx(2 * 100_000 * 16 / (row["median_ms"] / 1e3) / 1e9, rel=1e-3)
        assert row["iqr_ms"] >= 0
    assert set(value["speedup_of_degree_block"]) == {"naive", "scipy", "torch"}
    bal = value["balance"]["degree-block"]
    assert bal["block_max_over_mean"] >= 1 and bal["thread_max_over_mean"] >= 1 and bal["segments"] >= value["rows"]


def test_the_issue_example_runs_one_method(tmp_path: Path) -> None:
    value = call_tool(TOOL, {"graph": "karate", "feature_dim": 64, "method": "degree-block", "repeats": 1}).value
    assert list(value["timings"]) == ["degree-block"] and value["speedup_of_degree_block"] == {}
    assert value["nnz"] == 156 and value["max_degree"] == 17  # Zachary's club: the instructor (node 33) has 17 ties


def test_a_csr_file_is_read(tmp_path: Path) -> None:
    m = sp.random(50, 50, density=0.1, format="csr", random_state=0)
    path = tmp_path / "g.npz"
    sp.save_npz(path, m)
    value = call_tool(TOOL, {"graph": str(path), "feature_dim": 4, "method": "naive", "repeats": 1}).value
    assert value["nnz"] == m.nnz and value["timings"]["naive"]["max_rel_error"] < 1e-6


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"feature_dim": 0}, r"feature_dim: Input should be greater than or equal to 1 \(got 0\)"),
        ({"graph": "rmat-7m"}, "unknown graph 'rmat-7m'"),
        ({"method": "cusparse"}, "method"),
        ({"params": {"width": 0}}, r"params\.width: Input should be greater than or equal to 1 \(got 0\)"),
        ({"params": {"threads": 4096}}, "threads must be between 1 and"),
        ({"graph": "missing.npz"}, "does not exist"),
    ],
)
def test_bad_input_is_one_clear_error(args: dict[str, object], match: str) -> None:
    with pytest.raises(ToolArgumentError, match=match) as exc:
        call_tool(TOOL, {"graph": "karate", "feature_dim": 8, "repeats": 1, **args})
    assert "\n" not in str(exc.value).strip()


def test_an_invalid_csr_file_says_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, indptr=np.array([0, 2, 3]), indices=np.array([1, 9, 0]), data=np.ones(3), shape=np.array([2, 4]))
    with pytest.raises(ToolArgumentError, match=r"bad\.npz: column id 9 at entry 1 is out of range for 4 columns"):
        call_tool(TOOL, {"graph": str(path), "feature_dim": 8, "repeats": 1})


def test_the_speed_ups_carry_a_paired_verdict_and_noisy_timings_a_warning() -> None:
    from coevo.sim.graph.bench import Timings
    from coevo.tools.kernels import _verdicts

    # degree-block 1 s every round; naive 2, 2, 2.2 s -> ratios 2, 2, 2.2: mean 2.07, [1.78, 2.35] (t(0.975, 2) = 4.303)
    # scipy 1.0, 1.0, 2.0 s: IQR (1.5 - 1.0) = 0.5 of a median of 1.0 -> noisy
    t = Timings({"degree-block": [1.0, 1.0, 1.0], "naive": [2.0, 2.0, 2.2], "scipy": [1.0, 1.0, 2.0]}, {}, 0.0, {}, 1, 1)
    lines = _verdicts(t)
    assert lines[0].startswith(
        "degree-block vs naive (mean of the rounds' paired ratios): 2.07 x speed-up [1.78, 2.35] (95 % t interval, 3 rounds): better"
    )
    assert "degree-block vs scipy" in lines[1] and "within noise" in lines[1]
    assert lines[2].startswith("warning: scipy's timings are noisy (IQR 50 % of the median)")
    assert len(lines) == 3
