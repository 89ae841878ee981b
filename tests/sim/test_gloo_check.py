"""The planner's byte counts equal what a real gloo pipeline run sends (2 processes on loopback)."""

from __future__ import annotations

import pytest

from coevo.sim.pipeline.gloo_check import check


@pytest.mark.parametrize("method", ["blockwise", "skip-aware"])
def test_bytes_sent_equal_the_plan(method: str) -> None:
    result = check("unet-small", devices=2, method=method, resolution=16)
    assert result.bytes_sent == result.bytes_planned > 0
    assert result.backward_bytes_sent == result.bytes_planned  # gradients go back over the same boundaries
    assert result.output_matches and result.grads_match  # the split run computes what one process computes
    assert result.ok


def test_three_stage_blockwise_relays_skips_and_a_uvit_splits_too() -> None:
    relayed = check("unet-small", devices=3, method="blockwise", resolution=16)
    assert relayed.ok and relayed.bytes_sent == 475_136  # golden: the planner's count for this plan
    assert check("uvit-tiny", devices=2, method="skip-aware", resolution=8, repeats=1).ok


def test_three_stage_direct_skips_are_sent_once_point_to_point() -> None:
    direct = check("unet-small", devices=3, method="blockwise-direct", resolution=16)
    assert direct.ok  # bytes both ways equal the planner's direct count; output and gradients equal one process's
    assert 0 < direct.bytes_sent < 475_136  # the relayed run of the same cuts above sends more


def test_calibration_scales_the_rate_to_reproduce_the_measured_step() -> None:
    from coevo.sim.pipeline.gloo_check import Calibration

    cal = Calibration("blockwise", 2, flops_per_s=1e11, link_gbs=4.0, latency_us=80.0, measured_s=0.2, predicted_s=0.16)
    assert cal.error == pytest.approx(-0.2)
    cluster = cal.calibrated_cluster()
    assert cluster.device_tflops == pytest.approx(0.08) and cluster.inter_gbs == 4.0 and cluster.devices == 2
