"""nb201-accel: layer shapes by hand and against PyTorch, cycles against SCALE-Sim, the stated constants, the exact front, a search."""

from __future__ import annotations

import random

import numpy as np
import pytest

import coevo
from coevo.search.nb201.space import parse_arch
from coevo.search.nb201_accel.accel import Accel, AccelPart
from coevo.search.nb201_accel.problem import NB201AccelProblem, all_accels, cell_workload, latency_table
from coevo.sim.accel.area import array_mm2, pe_um2, sram_mm2
from coevo.sim.accel.network import ArrayConfig, network_cost, sram_pj_per_byte, voltage_scale
from coevo.sim.accel.scalesim_ref import scalesim_cycles
from coevo.sim.accel.systolic import map_layer

CELL = "|nor_conv_3x3~0|+|none~0|nor_conv_1x1~1|+|skip_connect~0|none~1|avg_pool_3x3~2|"
"""One 3x3 conv, one 1x1 conv, one pool, a skip and two empty edges."""


@pytest.fixture(scope="module")
def problem() -> NB201AccelProblem:
    return NB201AccelProblem(dataset="cifar10")


def test_conv_macs_of_one_cell_are_the_hand_count() -> None:
    # per cell of any stage (H x H pixels, C channels; H^2 C^2 is the same in all three stages): 3x3 = 1024 * 16 * 16 * 9
    conv3, conv1 = 1024 * 16 * 16 * 9, 1024 * 16 * 16
    stem = 32 * 32 * 3 * 9 * 16
    # reduction into a stage of 2C channels at H/2 pixels: 3x3 stride-2 conv C -> 2C, 3x3 conv 2C -> 2C, 1x1 shortcut C -> 2C
    reduce2 = 16 * 16 * (16 * 9 * 32 + 32 * 9 * 32 + 16 * 32)
    reduce3 = 8 * 8 * (32 * 9 * 64 + 64 * 9 * 64 + 32 * 64)
    classifier = 64 * 10
    hand = stem + 15 * (conv3 + conv1) + reduce2 + reduce3 + classifier
    assert hand == 47_104_640  # the sum written out once, so a wrong term above shows
    workload = cell_workload(parse_arch(CELL), "cifar10")
    assert workload.macs(("conv", "linear")) == hand
    # the pools, run as depthwise convolutions: a 3x3 pool per cell (H^2 C 9 each), the 2x2 shortcut pools, the global pool
    pools = 5 * 9 * (32 * 32 * 16 + 16 * 16 * 32 + 8 * 8 * 64) + 4 * (16 * 16 * 16 + 8 * 8 * 32) + 8 * 8 * 64
    assert workload.macs(("pool",)) == pools


def test_conv_macs_agree_with_the_pytorch_network() -> None:
    torch = pytest.importorskip("torch")
    from coevo.search.nb201.model import NB201Network

    for arch in (CELL, "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_1x1~1|+|nor_conv_3x3~0|nor_conv_1x1~1|nor_conv_3x3~2|"):
        net = NB201Network(parse_arch(arch), num_classes=10)
        macs: list[int] = []

        def count(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor, macs: list[int] = macs) -> None:
            if isinstance(module, torch.nn.Conv2d):
                macs.append(output.numel() * module.in_channels * module.kernel_size[0] * module.kernel_size[1])
            elif isinstance(module, torch.nn.Linear):
                macs.append(output.numel() * module.in_features)

        hooks = [m.register_forward_hook(count) for m in net.modules() if isinstance(m, torch.nn.Conv2d | torch.nn.Linear)]
        with torch.no_grad():
            net.eval()(torch.zeros(1, 3, 32, 32))
        for h in hooks:
            h.remove()
        assert cell_workload(parse_arch(arch), "cifar10").macs(("conv", "linear")) == sum(macs), arch


# NB201 layers (rows, cols, input side, kernel, c_in, c_out, stride): stage 3's 3x3 conv, stage 2's 1x1 conv, the
# reduction into stage 2 (stride 2), the stem, on square and non-square arrays
NB201_LAYERS = [
    (16, 16, 8, 3, 64, 64, 1),
    (32, 8, 16, 1, 32, 32, 1),
    (8, 32, 32, 3, 16, 32, 2),
    (16, 16, 32, 3, 3, 16, 1),
]


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("layer", NB201_LAYERS, ids=[f"{r}x{c}-{h}px-k{k}-{ci}to{co}-s{s}" for r, c, h, k, ci, co, s in NB201_LAYERS])
def test_nb201_layer_cycles_agree_with_scalesim(dataflow: str, layer: tuple[int, ...]) -> None:
    pytest.importorskip("scalesim", reason="SCALE-Sim (pip install scalesim) is the external reference for cycle counts")
    rows, cols, size, kernel, c_in, c_out, stride = layer
    network = cell_workload(parse_arch("|nor_conv_3x3~0|+|nor_conv_1x1~0|none~1|+|none~0|none~1|none~2|"), "cifar10")
    ours = [
        nl.layer
        for nl in network.layers
        if (nl.layer.c_in, nl.layer.c_out, nl.layer.kernel, nl.layer.stride, nl.layer.h) == (c_in, c_out, kernel, stride, size)
    ]
    assert ours, "the layer is one of the network's"
    m = ours[0].gemm()[0]
    out = int(m**0.5)
    # SCALE-Sim has no padding and rounds a partial stride window up: give it the input the windows actually read
    # ((out - 1) * stride + kernel: the padded image, less a last padded row no stride-2 window reaches)
    extent = (out - 1) * stride + kernel
    mapped = map_layer(ours[0], rows, cols, dataflow)
    theirs = scalesim_cycles(dataflow, rows, cols, extent, extent, kernel, c_in, c_out, stride)
    assert abs(mapped.cycles - theirs) <= 0.01 * theirs, f"{dataflow}: ours {mapped.cycles}, SCALE-Sim {theirs}"


def test_area_and_energy_constants_are_the_cited_ones() -> None:
    assert pe_um2() == pytest.approx(282 + 137 * 22 / 32 + 38 * 4.522)
    assert sram_mm2(1) == pytest.approx(8192 * 0.346 / 0.5 / 1e6)
    assert array_mm2(16, 16, 32, 16, 32) == pytest.approx(256 * pe_um2() / 1e6 + sram_mm2(80))
    assert [sram_pj_per_byte(kb) for kb in (8, 32, 1024)] == pytest.approx([10 / 8, 20 / 8, 100 / 8])  # Horowitz's points
    assert sram_pj_per_byte(16) == pytest.approx(10 / 8 * 2**0.5)  # between 8 and 32 KB, log-log: 10 * 2^(1/2) pJ
    assert voltage_scale(1000) == pytest.approx(1.0) and voltage_scale(500) == pytest.approx((0.75 / 0.9) ** 2)


def test_latency_is_compute_or_dram_bound_per_layer() -> None:
    workload = cell_workload(parse_arch(CELL), "cifar10")
    fast_dram = network_cost(workload, ArrayConfig(16, 16, "ws", 64, 32, 64, 500, dram_gbps=1e6))
    assert fast_dram.latency_ms == pytest.approx(fast_dram.cycles / 500e6 * 1e3, rel=1e-6)  # compute-bound everywhere
    slow_dram = network_cost(workload, ArrayConfig(16, 16, "ws", 64, 32, 64, 500, dram_gbps=0.1))
    assert slow_dram.latency_ms > 10 * fast_dram.latency_ms and slow_dram.energy_uj == pytest.approx(fast_dram.energy_uj)


def test_the_vectorised_latency_table_is_the_evaluated_latency(problem: NB201AccelProblem) -> None:
    rng = random.Random(5)
    points = [problem.random_point(rng) for _ in range(30)]
    accels = [Accel(*p[1]) for p in points]
    combos, table = latency_table("cifar10", accels, 12.8)
    for i, p in enumerate(points):
        counts = tuple(sum(c == code for c in p[0]) for code in (2, 3, 4))  # 1x1, 3x3, pool codes
        assert table[i, combos.index(counts)] == pytest.approx(problem.evaluate(p)["latency_ms"], rel=1e-9)


def test_no_design_dominates_the_exact_front(problem: NB201AccelProblem) -> None:
    ref = problem.reference()
    assert len(all_accels()) == 5 * 5 * 3 * 5 * 4 * 4 * 5 and len(ref.ids) == len(ref.front_first)
    rng = random.Random(9)
    points = [problem.random_point(rng) for _ in range(400)]
    values = [problem.evaluate(p) for p in points]
    for acc, lat in zip(ref.front_first, ref.front_second, strict=True):
        assert not any(v["accuracy"] > acc and v["latency_ms"] < lat for v in values)
    # a front design is reachable: its id is a real point's
    some = next(iter(ref.ids)).split("|")[0]
    cell, accel = some.split("/")
    point = (
        problem.part("cell").problem.table.cell(int(cell)),
        AccelPart().from_params(dict(zip(AccelPart.levels, accel.split("-"), strict=True))),
    )
    assert problem.point_id(point) == some
    got = problem.evaluate(point)
    front = zip(ref.front_first, ref.front_second, strict=True)
    assert any(got["accuracy"] == a and got["latency_ms"] == pytest.approx(b) for a, b in front)


def test_a_short_search_runs(storage: str) -> None:
    result = coevo.optimize("nb201-accel", proposer="pelnas", budget=16, storage=storage, seed=0)
    assert result.evaluations == 16 and result.hv_ratio is not None and 0 < result.hv_ratio <= 1
    assert result.front and all(row["latency_ms"] > 0 and row["area_mm2"] > 0 and row["energy_uj"] > 0 for row in result.front)
    assert np.isfinite(result.igd)  # type: ignore[arg-type]
