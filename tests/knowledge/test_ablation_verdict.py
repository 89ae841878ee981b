"""An ablation's table ends with a verdict per metric: whether withholding made a difference the seeds can see."""

from __future__ import annotations

from coevo.knowledge.ablation import Comparison, MetricChange


def test_a_change_every_seed_agrees_on_is_judged_and_a_symmetric_one_is_noise() -> None:
    # every seed loses 0.01 of the HV ratio: -1.00 point (x100), no spread, so the interval is the point itself
    lost = MetricChange("hv_ratio", (0.99, 0.98, 0.97), (0.98, 0.97, 0.96))
    assert lost.verdict("with it", "without H1").endswith(
        "[-1.00, -1.00] (95 % t interval, 3 seeds): worse; warning: small sample (3 seeds)"
    )
    # +1, -1, +1, -1 points: mean 0, an interval around it
    mixed = MetricChange("front_recall", (0.50, 0.50, 0.50, 0.50), (0.51, 0.49, 0.51, 0.49))
    assert "within noise" in mixed.verdict("with it", "without H1")
    one = MetricChange("hv_ratio", (0.9,), (0.8,))
    assert one.ci95 is None and "no interval" in one.verdict("a", "b")
    table = Comparison("t", "with it", "without H1", (0, 1, 2), [lost], []).markdown()
    assert "- verdict: hv_ratio without H1 vs with it: -1.00 points (x100)" in table
    assert (
        Comparison("t", "with it", "without H1", (0, 1, 2), [lost], [])
        .as_dict()["metrics"]["hv_ratio"]["verdict"]
        .endswith("worse; warning: small sample (3 seeds)")
    )
