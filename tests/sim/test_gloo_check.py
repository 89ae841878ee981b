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


# unet-small (sim/pipeline/unet.py: base 64, mults (1, 2, 2), one residual block per level, attention at level 1) at
# resolution 16, microbatch 1, float32 (4 bytes an element), block by block (C x H x W of each block's output):
#   0 enc0 conv-in 64x16x16    1 enc1 res 64x16x16    2 enc2 down 64x8x8     3 enc3 res+attn 128x8x8
#   4 enc4 down 128x4x4        5 enc5 res 128x4x4     6 mid 128x4x4
#   7 dec0 128x4x4 (skip 5)    8 dec1 +up 128x8x8 (skip 4)    9 dec2 128x8x8 (skip 3)    10 dec3 +up 128x16x16 (skip 2)
#   11 dec4 64x16x16 (skip 1)  12 dec5 64x16x16 (skip 0)      13 out 4x16x16
BYTES = {i: 4 * c * h * w for i, (c, h, w) in enumerate([(64, 16, 16), (64, 16, 16), (64, 8, 8), (128, 8, 8), (128, 4, 4), (128, 4, 4)])}
BYTES |= {8: 4 * 128 * 8 * 8, 10: 4 * 128 * 16 * 16}
# Three devices, cut where the FLOPs are most even (blockwise: minimise the largest device's FLOPs): blocks 0-8 | 9-10 |
# 11-13, which test_unet_small_three_way_cuts checks by trying every pair of cuts. Forward bytes sent, relayed skips:
# boundary 8 -> 9 carries dec1's output, the skips 3 -> 9 and 2 -> 10 (their ends on devices 0 and 1) and the skips
# 1 -> 11 and 0 -> 12 (devices 0 and 2); boundary 10 -> 11 carries dec3's output and again 1 -> 11 and 0 -> 12. The
# skips 5 -> 7 and 4 -> 8 stay on device 0.
RELAYED_BYTES = (BYTES[8] + BYTES[3] + BYTES[2] + BYTES[1] + BYTES[0]) + (BYTES[10] + BYTES[1] + BYTES[0])
# Direct skips: each skip between devices sent once, point to point; the boundaries carry the activations only.
DIRECT_BYTES = BYTES[8] + BYTES[10] + BYTES[3] + BYTES[2] + BYTES[1] + BYTES[0]


def test_unet_small_three_way_cuts() -> None:
    from coevo.sim.pipeline.partition import blockwise
    from coevo.sim.pipeline.profile import profile

    p = profile("unet-small", resolution=16, microbatch=1, dtype_bytes=4)
    assert {i: p.blocks[i].out_bytes for i in BYTES} == BYTES  # the shapes above
    flops = [b.flops for b in p.blocks]
    # every pair of cuts (a, b): devices hold blocks [0, a), [a, b), [b, 14); the even split minimises the largest share
    _, a, b = min((max(sum(flops[:a]), sum(flops[a:b]), sum(flops[b:])), a, b) for a in range(1, 13) for b in range(a + 1, 14))
    assert (a, b) == (9, 11)
    assert blockwise(p, 3, flops_per_s=1e12).device_of == (0,) * 9 + (1,) * 2 + (2,) * 3


@pytest.mark.slow  # 12 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_three_stage_blockwise_relays_skips_and_a_uvit_splits_too() -> None:
    relayed = check("unet-small", devices=3, method="blockwise", resolution=16)
    assert RELAYED_BYTES == 475_136
    assert relayed.ok and relayed.bytes_sent == RELAYED_BYTES  # derived above from the cuts and the block shapes
    assert check("uvit-tiny", devices=2, method="skip-aware", resolution=8, repeats=1).ok


def test_three_stage_direct_skips_are_sent_once_point_to_point() -> None:
    direct = check("unet-small", devices=3, method="blockwise-direct", resolution=16)
    assert direct.ok  # bytes both ways equal the planner's direct count; output and gradients equal one process's
    assert 0 < direct.bytes_sent == DIRECT_BYTES < RELAYED_BYTES  # the relayed run of the same cuts above sends more


def test_calibration_scales_the_rate_to_reproduce_the_measured_step() -> None:
    from coevo.sim.pipeline.gloo_check import Calibration

    cal = Calibration("blockwise", 2, flops_per_s=1e11, link_gbs=4.0, latency_us=80.0, measured_s=0.2, predicted_s=0.16)
    assert cal.error == pytest.approx(-0.2)
    cluster = cal.calibrated_cluster()
    assert cluster.device_tflops == pytest.approx(0.08) and cluster.inter_gbs == 4.0 and cluster.devices == 2
