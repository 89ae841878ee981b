"""UNet profiles from the meta device and the two partitioners: golden values on a tiny model, DP optimality, errors."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest
import torch

from coevo.search.errors import UserInputError
from coevo.sim.pipeline.blocks import BlockNet
from coevo.sim.pipeline.partition import blockwise, min_max_split, skip_aware, units
from coevo.sim.pipeline.profile import BlockProfile, ModelProfile, build_model, profile


def test_tiny_profile_golden() -> None:
    p = profile("unet-tiny", resolution=8)
    assert [b.name for b in p.blocks] == ["enc0", "enc1", "enc2", "enc3", "mid", "dec0", "dec1", "dec2", "dec3", "out"]
    assert p.skip_edges == [(3, 5), (2, 6), (1, 7), (0, 8)]  # mirrored: the last encoder output feeds the first decoder block
    enc0 = p.blocks[0]
    assert enc0.flops == 2 * 4 * 8 * 9 * 8 * 8  # conv 4->8, 3x3, 8x8 output: 2 * C_in * C_out * k^2 * H * W
    assert enc0.out_bytes == 8 * 8 * 8 * 2 and enc0.param_bytes == (4 * 8 * 9 + 8) * 2  # fp16
    assert p.graph.number_of_edges() == 9 + 4 and p.graph.edges[0, 8]["kind"] == "skip"
    # compute ops: enc0 is one conv; enc1 a residual block: (group norm, SiLU, conv) x 2 and the add
    assert enc0.kernels == 1 and p.blocks[1].kernels == 7 and p.graph.nodes[1]["kernels"] == 7


def test_per_op_cost_balances_stages_on_time_not_flops() -> None:
    # block 0: many tiny ops; blocks 1-2: one big op each. FLOPs alone put the cut after block 1
    blocks = (
        BlockProfile("many", "other", 100, 0, 10, (1,), None, kernels=400),
        BlockProfile("big1", "other", 1000, 0, 10, (1,), None, kernels=1),
        BlockProfile("big2", "other", 1000, 0, 10, (1,), None, kernels=1),
    )
    p = ModelProfile("ops", 1, 1, 2, blocks, nx.DiGraph())
    assert blockwise(p, 2, flops_per_s=1e3).device_of == (0, 0, 1)
    slow_launch = blockwise(p, 2, flops_per_s=1e3, kernel_s=0.005)  # 400 ops x 5 ms = 2 s, the work of 2000 FLOPs
    assert slow_launch.device_of == (0, 1, 1)
    assert slow_launch.compute_s == pytest.approx(((100 + 400 * 5) * 3 / 1e3, (2000 + 2 * 5) * 3 / 1e3))


def test_meta_profile_matches_a_real_forward() -> None:
    p = profile("unet-small", resolution=16, microbatch=2)
    model = BlockNet(build_model("unet-small"))
    assert sum(x.numel() for x in model.parameters()) * 2 == p.total("param_bytes")
    out = model(torch.randn(2, 4, 16, 16))
    assert tuple(out.shape) == p.blocks[-1].out_shape


def test_sd_size_profiles_without_allocating() -> None:
    p = profile("unet-sd", resolution=64)
    assert len(p.blocks) == 26 and len(p.skip_edges) == 12
    assert 500e6 < p.total("param_bytes") / 2 < 1e9 and p.total("flops") > 4e11


def test_min_max_split_is_optimal() -> None:
    costs = [5, 1, 7, 3, 3, 9, 2, 4]
    for parts in (1, 2, 3, 4, 8):
        groups = min_max_split(costs, parts)
        got = max(sum(c for c, g in zip(costs, groups, strict=True) if g == k) for k in range(parts))
        best = min(
            max(sum(costs[a:b]) for a, b in zip((0, *cuts), (*cuts, len(costs)), strict=True))
            for cuts in itertools.combinations(range(1, len(costs)), parts - 1)
        )
        assert got == best and groups == sorted(groups) and set(groups) == set(range(parts))


def test_partition_bytes_golden() -> None:
    p = profile("unet-tiny", resolution=8)
    b = blockwise(p, 2, flops_per_s=1e12)
    # the expected cut, by brute force: blockwise minimises the slower stage's work, which with no kernel cost is the
    # blocks' FLOPs; try every contiguous 2-way split (a cut before block c) and keep the best, which must be unique
    flops = [blk.flops for blk in p.blocks]
    slower = {c: max(sum(flops[:c]), sum(flops[c:])) for c in range(1, len(flops))}
    cut = min(slower, key=lambda c: slower[c])
    assert sorted(slower.values())[0] < sorted(slower.values())[1]  # one best cut: the expected split is well defined
    assert cut == 6  # by hand: enc0..dec0 899,072 FLOPs vs dec1..out 1,085,440 (a cut one later: 1,390,592 vs 593,920)
    assert b.device_of == tuple(int(i >= cut) for i in range(len(flops)))
    # the bytes that follow from that cut: the activation out of the last block before it (dec0: 512 bytes), and each
    # skip whose producer is before the cut and consumer after it, sent one hop: enc2 256, enc1 1024, enc0 1024 (enc3's
    # skip to dec0 stays on device 0)
    crossing = [src for src, dst in p.skip_edges if src < cut <= dst]
    assert b.boundary_bytes == p.blocks[cut - 1].out_bytes == 512
    assert b.skip_bytes == sum(p.blocks[src].out_bytes for src in crossing) == 1024 + 1024 + 256
    assert b.skip_bytes_direct == b.skip_bytes  # two stages: every crossing skip is one hop, relayed or direct
    s = skip_aware(p, 2, flops_per_s=1e12)
    assert units(p) == [[0, 8, 9], [1, 7], [2, 6], [3, 5, 4]]
    assert s.skip_bytes == 0 and all(s.device_of[a] == s.device_of[c] for a, c in p.skip_edges)
    assert s.boundary_bytes == 1024 + 2048  # enc1 -> enc2 down, dec1 -> dec2 back up
    # with two stages the baseline cuts at the bottleneck and sends less: skip-awareness pays off in deep pipelines
    assert s.total_bytes > b.total_bytes


def test_skip_aware_cuts_sd_traffic_at_8_devices() -> None:
    p = profile("unet-sd", resolution=64)
    b, s = blockwise(p, 8, flops_per_s=50e12), skip_aware(p, 8, flops_per_s=50e12)
    assert s.skip_bytes == 0 and b.skip_bytes > b.boundary_bytes
    assert s.total_bytes < 0.5 * b.total_bytes
    assert b.skip_bytes > b.skip_bytes_direct  # relayed through intermediate stages


def test_bad_inputs_are_clear() -> None:
    p = profile("unet-tiny", resolution=8)
    with pytest.raises(UserInputError, match="at most 4 devices"):
        skip_aware(p, 5, flops_per_s=1e12)
    with pytest.raises(UserInputError, match="cannot split 10 blocks into 11"):
        blockwise(p, 11, flops_per_s=1e12)
    with pytest.raises(UserInputError, match="multiple of 2"):
        profile("unet-tiny", resolution=7)
    with pytest.raises(UserInputError, match="unknown model 'resnet'"):
        profile("resnet")
