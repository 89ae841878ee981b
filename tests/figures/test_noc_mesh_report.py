"""The noc (issue 8 mesh) figure's tables, rendered from hand-made rows of mesh-runs.csv (no simulation)."""

from __future__ import annotations

from typing import Any

from coevo.figures import noc


def _row(experiment: str, load: float, seed: int, **values: float) -> dict[str, Any]:
    base = {
        "experiment": experiment, "traffic": "uniform", "routing": "xy", "offered_load": load, "seed": seed, "cycles": 1000,
        "gt_acceptance": 1.0, "gt_violations": 0, "gt_latency_p50": 5, "gt_latency_p99": 24, "gt_setup_mean": 5.3,
        "mean_delay": 10.0, "p99_delay": 50, "throughput": load, "cycles_per_s": 1000.0,
        "be_zero_load_latency_uniform": 5.0, "xy_saturation_bound_uniform": 0.5,
    }  # fmt: skip
    return base | values


def test_tables_are_medians_over_seeds_and_saturation_is_the_first_load_past_three_times_zero_load() -> None:
    rows = [_row("gt-mix", 0.2, s, gt_acceptance=a) for s, a in enumerate((0.90, 0.96, 0.99))]
    # saturation sweep: median delay 15 at 0.5 (= 3 x 5, not past it), 23 at 0.55 (past it)
    rows += [_row("xy-saturation", 0.5, s, mean_delay=d, throughput=t) for s, (d, t) in enumerate([(10, 0.48), (20, 0.49)])]
    rows += [_row("xy-saturation", 0.55, s, mean_delay=d, throughput=t) for s, (d, t) in enumerate([(16, 0.50), (30, 0.52)])]
    text = noc.render(rows, "python -m coevo.figures noc")
    assert "| 0.2 | xy | 0.960 | 0 | 5.0 | 24.0 | 5.3 | 10.0 | 50 | 0.200 |" in text  # the median of 0.90, 0.96, 0.99
    assert "| 0.5 | 0.485 | 15.0 |" in text and "| 0.55 | 0.510 | 23.0 |" in text
    assert "3x zero-load 5.000 cycles) at load 0.55; bisection bound 4/k = 0.5; highest delivered throughput 0.510." in text
    assert "Seeds 0-2" in text and "median 1,000 simulated cycles/s over the 7 runs" in text
