"""The planner's byte counts equal what a real gloo pipeline run sends (2 processes on loopback)."""

from __future__ import annotations

import pytest

from sim.pipeline.gloo_check import check


@pytest.mark.parametrize("method", ["blockwise", "skip-aware"])
def test_bytes_sent_equal_the_plan(method: str) -> None:
    result = check("unet-small", devices=2, method=method, resolution=16)
    assert result.bytes_sent == result.bytes_planned > 0
    assert result.output_matches  # the split run computes what one process computes
