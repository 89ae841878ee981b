"""Systolic-array mapping against closed-form counts and SCALE-Sim, the bit-level energy model, and energy-aware compression."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coevo.search.errors import UserInputError
from coevo.sim.accel.compress import LEVELS, SCOPES, Compressor, SchemeResult, compress
from coevo.sim.accel.energy import (
    DRAM_PJ_PER_BYTE,
    SRAM_PJ_PER_BYTE,
    VALUES,
    energy_table,
    fitted_psum_bits,
    group_costs,
    layer_psums,
    measure_layer,
    memory_pj,
    msb_distance,
    pj_per_toggle,
    random_product_toggles,
    toggles,
    worst_case_psum_bits,
)
from coevo.sim.accel.scalesim_ref import scalesim_cycles
from coevo.sim.accel.systolic import Layer, map_layer


def test_conv_becomes_its_im2col_gemm() -> None:
    conv = Layer.from_dict({"type": "conv", "c_in": 3, "h": 5, "w": 5, "c_out": 2, "kernel": 3, "batch": 2})
    assert conv.gemm() == (2 * 3 * 3, 27, 2)
    strided = Layer.from_dict({"type": "conv", "c_in": 8, "h": 8, "w": 8, "c_out": 4, "kernel": 3, "stride": 2, "padding": 1})
    assert strided.gemm() == (16, 72, 4)


def test_single_tile_counts_are_the_closed_forms() -> None:
    g = Layer.from_dict({"type": "gemm", "m": 4, "k": 4, "n": 4})
    ws, os_, is_ = (map_layer(g, 4, 4, f) for f in ("ws", "os", "is"))
    assert (ws.tiles, ws.cycles) == (1, 4 + 4 + 4 + 4 - 2)  # preload R, stream M, skew R + C - 2
    assert (os_.tiles, os_.cycles) == (1, 4 + 4 + 4 - 2)
    assert is_.cycles == ws.cycles and ws.macs == 64
    assert ws.utilisation == pytest.approx(64 / (14 * 16))
    assert ws.sram_reads == {"ifmap": 16, "filter": 16, "psum": 0} and ws.sram_writes == {"ofmap": 16}
    assert os_.sram_reads == {"ifmap": 16, "filter": 16, "psum": 0} and os_.sram_writes == {"ofmap": 16}


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_multi_tile_counts_match_an_explicit_tile_loop(dataflow: str) -> None:
    m, k, n, r, c = 50, 70, 40, 16, 8
    mapping = map_layer(Layer.from_dict({"type": "gemm", "m": m, "k": k, "n": n}), r, c, dataflow)
    tiles = cycles = ifmap = filt = 0
    if dataflow == "ws":
        for k0 in range(0, k, r):
            for n0 in range(0, n, c):
                tiles += 1
                cycles += r + m + r + c - 2
                ifmap += m * min(r, k - k0)  # the input rows of this K slice stream once per N tile
                filt += min(r, k - k0) * min(c, n - n0)
    elif dataflow == "os":
        for m0 in range(0, m, r):
            for n0 in range(0, n, c):
                tiles += 1
                cycles += k + r + c - 2
                ifmap += min(r, m - m0) * k
                filt += k * min(c, n - n0)
    else:
        for k0 in range(0, k, r):
            for m0 in range(0, m, c):
                tiles += 1
                cycles += r + n + r + c - 2
                ifmap += min(r, k - k0) * min(c, m - m0)
                filt += min(r, k - k0) * n
    assert (mapping.tiles, mapping.cycles) == (tiles, cycles)
    assert (mapping.sram_reads["ifmap"], mapping.sram_reads["filter"]) == (ifmap, filt)
    assert mapping.macs == m * k * n and 0 < mapping.utilisation <= 1


def test_dram_traffic_grows_when_operands_do_not_fit() -> None:
    g = Layer.from_dict({"type": "gemm", "m": 512, "k": 512, "n": 512})
    roomy = map_layer(g, 32, 32, "ws", ofmap_kb=2048)
    tight = map_layer(g, 32, 32, "ws", ifmap_kb=16, ofmap_kb=16)
    assert roomy.dram_bytes["ifmap"] == 512 * 512 and tight.dram_bytes["ifmap"] == tight.sram_reads["ifmap"]
    assert tight.dram_bytes["ofmap"] > roomy.dram_bytes["ofmap"]


def test_layer_errors_name_the_problem() -> None:
    with pytest.raises(UserInputError, match="unknown dataflow"):
        map_layer(Layer.from_dict({"type": "gemm", "m": 1, "k": 1, "n": 1}), 4, 4, "rs")
    with pytest.raises(UserInputError, match="does not fit"):
        Layer.from_dict({"type": "conv", "c_in": 1, "h": 2, "w": 2, "c_out": 1, "kernel": 5})
    with pytest.raises(UserInputError, match="unknown field"):
        Layer.from_dict({"type": "gemm", "m": 1, "k": 1, "n": 1, "depth": 3})
    with pytest.raises(UserInputError, match="must be a positive integer"):
        Layer.from_dict({"type": "gemm", "m": 0, "k": 1, "n": 1})


def test_toggle_counts_are_twos_complement_bit_flips() -> None:
    assert toggles(np.array([0]), np.array([-1]), 16)[0] == 16
    assert toggles(np.array([5]), np.array([4]), 22)[0] == 1
    assert msb_distance(np.array([0]), np.array([-1]))[0] == 6  # the sign-extension bits all flip


def test_energy_table_from_activation_streams() -> None:
    rng = np.random.default_rng(0)
    acts = np.maximum(rng.normal(0, 30, (400, 64)), 0).round().clip(0, 127).astype(np.int64)  # ReLU outputs
    weights = rng.integers(-128, 128, (64, 8))
    table = energy_table("layer", acts, weights, rows=16, positions=32, stream=64)
    assert table.energy.shape == (256,) and table.of(np.array([0]))[0] == table.energy.min()  # zero never toggles a product
    assert table.mult_toggles[128] == 0 and np.allclose(table.msb_groups.sum(axis=1), 1)
    assert set(VALUES[np.argsort(table.energy)[:1]]) == {0}
    cheap = table.cheapest(8)
    assert len(cheap) == 8 and 0 in cheap
    assert table.of(cheap).mean() < table.energy.mean()


def test_group_costs_by_hand() -> None:
    prev, nxt = np.array([0, 0, 5]), np.array([-1, 1, 4])
    counts, cost = group_costs(prev, nxt)
    # 0 -> -1 flips all 22 bits: 6 MSBs (group 6) and 16 low bits; 0 -> 1 and 5 -> 4 flip one low bit (group 0)
    assert counts.tolist() == [2, 0, 0, 0, 0, 0, 1]
    assert cost[0] == 1 and cost[6] == 16 + 6
    assert group_costs(prev, nxt, msb_weight=2.0)[1][6] == 16 + 12  # an MSB flip weighted twice a low bit


def test_group_weighted_total_is_the_toggle_count_at_equal_capacitance() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.integers(-5000, 5000, 4000), rng.integers(-5000, 5000, 4000)
    counts, cost = group_costs(a, b)
    assert float(counts @ cost) == pytest.approx(float(toggles(a, b, 22).sum()))  # sum over groups of count x cost
    counts2, cost2 = group_costs(a, b, msb_weight=3.0)
    assert float(counts2 @ cost2) == pytest.approx(float(toggles(a, b, 22).sum() + 2 * msb_distance(a, b).sum()))


def test_measured_activity_of_hand_streams() -> None:
    cost = np.array([0.5, 1, 2, 3, 4, 5, 9.0])
    acts = np.tile(np.array([[0], [-1]]), (50, 3))  # every column alternates 0, -1
    zero = measure_layer(acts, np.zeros((3, 2), dtype=np.int64), cost, rows=1, positions=8, stream=20)
    assert zero.mult_toggles == 0 and zero.psum_toggles == 0.5  # nothing switches: every transition in group 0
    ones = measure_layer(acts, np.ones((3, 2), dtype=np.int64), cost, rows=1, positions=8, stream=20)
    # rows=1: no incoming partial sum; the psum is the product 0 or -1: all 16 product bits and all 6 MSBs flip
    assert ones.mult_toggles == 16 and ones.psum_toggles == 9.0 and ones.group_counts[6] == ones.group_counts.sum()


# 8-bit register, 3-bit MSB window (bits 5-7): small enough to check every bit by hand
HAND_PREV = np.array([10, 20, 40, 30, 5])
HAND_NEXT = np.array([30, 60, 120, 100, -5])


def test_msb_groups_of_a_narrow_register_by_hand() -> None:
    # 10 -> 30:  00001010 -> 00011110, xor 00010100: bits 2, 4          -> d=0, 2 low toggles
    # 20 -> 60:  00010100 -> 00111100, xor 00101000: bits 3, 5          -> d=1, 1 low toggle
    # 40 -> 120: 00101000 -> 01111000, xor 01010000: bits 4, 6          -> d=1, 1 low toggle
    # 30 -> 100: 00011110 -> 01100100, xor 01111010: bits 1, 3, 4, 5, 6 -> d=2, 3 low toggles
    # 5 -> -5:   00000101 -> 11111011, xor 11111110: bits 1-7           -> d=3, 4 low toggles
    assert msb_distance(HAND_NEXT, HAND_PREV, 8, 3).tolist() == [0, 1, 1, 2, 3]
    counts, cost = group_costs(HAND_PREV, HAND_NEXT, psum_bits=8, msb_bits=3)
    assert counts.tolist() == [1, 2, 1, 1]  # every group populated
    assert cost.tolist() == [2 + 0, 1 + 1, 3 + 2, 4 + 3]  # mean low toggles + one unit per MSB flip
    assert float(counts @ cost) == 2 + 2 + 2 + 5 + 7  # = every bit that toggles
    # the same sums in the paper's 22-bit register: bits 16-21 are sign extension, only the sign flip moves them
    assert group_costs(HAND_PREV, HAND_NEXT)[0].tolist() == [4, 0, 0, 0, 0, 0, 1]


def test_register_widths_by_hand() -> None:
    assert [worst_case_psum_bits(r) for r in (1, 16, 64, 256)] == [16, 20, 22, 24]  # 128 * 128 * rows needs log2 + 2 bits
    assert fitted_psum_bits(np.array([0, 127])) == 8 and fitted_psum_bits(np.array([-128, 5])) == 8
    assert fitted_psum_bits(np.array([-129])) == 9 and fitted_psum_bits(np.array([128])) == 9
    with pytest.raises(UserInputError, match="psum_bits must be between 2 and 62"):
        group_costs(HAND_PREV, HAND_NEXT, psum_bits=70)
    with pytest.raises(UserInputError, match="msb_bits must be between 1 and psum_bits - 1 = 7"):
        group_costs(HAND_PREV, HAND_NEXT, psum_bits=8, msb_bits=8)


def test_grouped_energy_reduction_of_a_hand_stream() -> None:
    # every column streams 1, 3, 1, 3, ...; rows=1: no incoming partial sum, the sum is the product itself
    acts = np.tile(np.array([[1], [3]]), (40, 4))
    cost = np.array([1.0, 3.0, 6.0, 10.0])  # cost per transition of groups d = 0..3 (8-bit register, bits 5-7)
    # weight 30: sums 30 <-> 90 (00011110 <-> 01011010, xor 01000100: bits 2, 6): d=1; product toggles 2
    dear = measure_layer(acts, np.full((4, 3), 30), cost, rows=1, positions=6, stream=20, psum_bits=8)
    # weight 10: sums 10 <-> 30 (xor 00010100: bits 2, 4): d=0; product toggles 2
    cheap = measure_layer(acts, np.full((4, 3), 10), cost, rows=1, positions=6, stream=20, psum_bits=8)
    assert dear.group_counts.tolist() == [0, 6 * 19, 0, 0] and cheap.group_counts.tolist() == [6 * 19, 0, 0, 0]
    assert (dear.mult_toggles, dear.psum_toggles, cheap.mult_toggles, cheap.psum_toggles) == (2, 3.0, 2, 1.0)
    # per MAC in toggle units, 30 -> 10 cuts 2 + 3 to 2 + 1: 40 %; in pJ the partial-sum toggle costs 0.1 pJ * 22/32 / 11
    e_mult, e_psum = pj_per_toggle()
    assert e_psum == pytest.approx(0.00625)
    assert 1 - cheap.pj_per_mac() / dear.pj_per_mac() == pytest.approx(2 * 0.00625 / (2 * e_mult + 3 * 0.00625))
    # the table of the same stream puts each value in its group
    table = energy_table("hand", acts, np.full((4, 3), 10), rows=1, positions=6, stream=20, psum_bits=8, msb_bits=3)
    assert table.msb_groups[10 + 128].tolist() == [1, 0, 0, 0] and table.msb_groups[30 + 128].tolist() == [0, 1, 0, 0]
    assert table.msb_groups[64 + 128].tolist() == [0, 1, 0, 0]  # 64 <-> 192: 01000000 <-> 11000000, bit 7 only


def test_msb_groups_fill_when_the_register_fits_the_sums() -> None:
    rng = np.random.default_rng(3)
    acts = np.maximum(rng.normal(0, 30, (600, 64)), 0).round().clip(0, 127).astype(np.int64)  # ReLU outputs
    weights = rng.integers(-20, 21, (64, 16))
    # 16 rows of |a w| <= 127 * 20: |sum| <= 40,640 < 2^15, so the 22-bit register's 6 MSBs only copy the sign
    wide = measure_layer(acts, weights, np.zeros(7), rows=16, positions=128, stream=128)
    assert wide.group_counts[1:6].sum() == 0 and wide.groups_used == 2
    bits = fitted_psum_bits(layer_psums(acts, weights, rows=16, positions=128, stream=128))
    assert bits <= 17
    fitted = measure_layer(acts, weights, np.zeros(7), rows=16, positions=128, stream=128, psum_bits=bits)
    assert fitted.groups_used == 7 and fitted.group_shares[1:6].sum() > 0.2  # magnitude classes, not just the sign


def test_scopes_nest_from_compute_to_total() -> None:
    base = SchemeResult("int8", {"l": 256}, 99.0, 98.0, compute_pj=100.0, memory_pj=900.0, energy_by_layer={"l": 100.0}, sram_pj=100.0)
    cut = SchemeResult("x", {"l": 8}, 98.0, 97.0, compute_pj=40.0, memory_pj=900.0, energy_by_layer={"l": 40.0}, sram_pj=100.0)
    # compute 100 -> 40; on chip 200 -> 140; total 1000 -> 940
    assert cut.reductions(base) == pytest.approx({"compute": 0.6, "on_chip": 0.3, "total": 0.06})
    shown = cut.as_dict(base)
    assert (shown["compute_pj"], shown["onchip_pj"], shown["total_pj"], shown["sram_pj"], shown["dram_pj"]) == (40, 140, 940, 100, 800)
    assert set(SCOPES) == {"compute", "on_chip", "total"}


def test_a_register_width_out_of_range_is_refused_before_training() -> None:
    with pytest.raises(UserInputError, match=r"psum_bits must be 0 \(fitted per layer\) or between 2 and 62.*got 1$"):
        compress("cnn-digits", psum_bits=1)
    with pytest.raises(UserInputError, match="psum_bits must be 0"):
        Compressor("cnn-digits", psum_bits=99)


def test_random_product_toggles_match_sampling() -> None:
    rng = np.random.default_rng(2)
    a, b, c, d = (rng.integers(-128, 128, 400_000) for _ in range(4))
    assert random_product_toggles() == pytest.approx(float(toggles(a * b, c * d, 16).mean()), abs=0.02)


def test_memory_energy_of_one_tile_by_hand() -> None:
    mapping = map_layer(Layer.from_dict({"type": "gemm", "m": 4, "k": 4, "n": 4}), 4, 4, "ws")
    out = memory_pj(mapping)
    # SRAM: 16 input + 16 weight bytes read, 16 outputs of 4 bytes written; DRAM: each operand once, outputs 4 bytes
    assert out["sram_pj"] == pytest.approx((16 + 16 + 4 * 16) * SRAM_PJ_PER_BYTE)
    assert out["dram_pj"] == pytest.approx((16 + 16 + 4 * 16) * DRAM_PJ_PER_BYTE)


SCALESIM_TOLERANCE = 0.01
"""Largest relative cycle difference to SCALE-Sim's stall-free compute cycles allowed (they agree exactly today;
see :mod:`sim.accel.scalesim_ref` for why the compute unit is the like-for-like count)."""


# (rows, cols, input h = w, kernel, c_in, c_out, stride): a GEMM-like 1x1 case, cnn-mnist5k's conv2 and conv3 (padding
# applied to the input, as SCALE-Sim has no padding field), a strided conv, a non-square array
SCALESIM_LAYERS = [
    (8, 8, 7, 1, 70, 40, 1),
    (16, 16, 16, 3, 16, 32, 1),
    (16, 16, 9, 3, 32, 64, 1),
    (8, 16, 11, 3, 8, 24, 2),
    (32, 8, 10, 3, 16, 20, 1),
]


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("layer", SCALESIM_LAYERS, ids=[f"{r}x{c}-{h}px-k{k}-{ci}to{co}-s{s}" for r, c, h, k, ci, co, s in SCALESIM_LAYERS])
def test_cycles_agree_with_scalesim(dataflow: str, layer: tuple[int, ...]) -> None:
    pytest.importorskip("scalesim", reason="SCALE-Sim (pip install scalesim) is the external reference for cycle counts")
    rows, cols, size, kernel, c_in, c_out, stride = layer
    ours = map_layer(Layer("conv", c_in=c_in, h=size, w=size, c_out=c_out, kernel=kernel, stride=stride), rows, cols, dataflow)
    theirs = scalesim_cycles(dataflow, rows, cols, size, size, kernel, c_in, c_out, stride)
    assert abs(ours.cycles - theirs) <= SCALESIM_TOLERANCE * theirs, f"{dataflow}: ours {ours.cycles}, SCALE-Sim {theirs}"


@pytest.mark.slow  # QAT steps of the zoo digits CNN (cached after its first training): 40-90 s on 2 cores
def test_energy_aware_compression_meets_the_budget_on_validation() -> None:
    out = compress("cnn-digits", accuracy_drop_max=2.0, seed=0)
    assert out.int8.val_accuracy > 90 and set(out.int8.levels.values()) == {256}  # the digits CNN learned its task
    for r in (out.layer_agnostic, out.layer_wise):
        assert out.accuracy_drop(r) <= 2.0 + 1e-9  # the budget holds on the validation split it was chosen on
        assert r.compute_pj < out.int8.compute_pj and r.energy < out.int8.energy
        assert set(r.levels.values()) <= set(LEVELS) and r in out.steps
    assert len(set(out.layer_agnostic.levels.values())) == 1  # the same restriction everywhere
    assert math.isclose(sum(out.layer_wise.energy_by_layer.values()), out.layer_wise.compute_pj, rel_tol=1e-9)
    # memory energy comes from the mapping alone, so it is the same for every restriction and dilutes the reduction
    assert out.layer_wise.memory_pj == out.int8.memory_pj and out.energy_reduction(out.layer_wise) < out.compute_reduction(out.layer_wise)
    # each choice is the last step within budget of its scheme; a step out of budget stopped the ladder
    agnostic = [s for s in out.steps if s.scheme == "layer-agnostic"]
    assert all(s.within_budget for s in agnostic[:-1])
    kept = [s for s in agnostic if s.within_budget]
    assert out.layer_agnostic.step == (kept[-1].step if kept else 0)
    shown = out.as_dict()
    assert shown["chosen_on"].startswith("validation") and shown["layer_wise"]["total_reduction_vs_int8"] == round(
        1 - out.layer_wise.energy / out.int8.energy, 4
    )
    wise = shown["layer_wise"]  # every energy names its scope; memory dilutes the wider ones
    assert wise["compute_reduction_vs_int8"] > wise["onchip_reduction_vs_int8"] > wise["total_reduction_vs_int8"] > 0
    assert wise["onchip_pj"] == pytest.approx(wise["compute_pj"] + wise["sram_pj"], abs=0.2)
    assert shown["psum_bits_by_layer"] == dict.fromkeys(out.int8.levels, 22) and set(shown["energy_scopes"]) == set(SCOPES)
    assert shown["mapping"]["conv2"]["gemm_mkn"] == [64, 16 * 9, 32]  # 8x8 output pixels, 16 channels x 3x3, 32 filters
    assert shown["n_test"] == 500  # cnn-digits' test images: the tool's accuracy verdict counts them
    with pytest.raises(UserInputError, match="unknown model"):
        compress("cnn-mnist")
    with pytest.raises(UserInputError, match="levels must start at 256"):
        compress("cnn-digits", levels=(128, 64))
