"""Systolic-array mapping against closed-form counts, the bit-level energy model, and energy-aware compression."""

from __future__ import annotations

import math

import numpy as np
import pytest

from search.errors import UserInputError
from sim.accel.compress import LEVELS, compress
from sim.accel.energy import VALUES, energy_table, msb_distance, toggles
from sim.accel.systolic import Layer, map_layer


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


@pytest.mark.slow  # trains the CNN and its QAT variants: 90-130 s on 2 cores
def test_energy_aware_compression_meets_the_accuracy_budget() -> None:
    out = compress("cnn-digits", accuracy_drop_max=2.0, seed=0)
    assert out.int8.accuracy > 90 and set(out.int8.levels.values()) == {256}  # the digits CNN learned its task
    for r in (out.layer_agnostic, out.layer_wise):
        assert out.accuracy_drop(r) <= 2.0 + 1e-9 and r.energy <= out.int8.energy
        assert set(r.levels.values()) <= set(LEVELS)
    assert len(set(out.layer_agnostic.levels.values())) == 1  # the same restriction everywhere
    assert math.isclose(sum(out.layer_wise.energy_by_layer.values()), out.layer_wise.energy, rel_tol=1e-6)
    # the tool's JSON: the same keys as ever, relative figures computed against INT8
    shown = out.as_dict()
    assert list(shown) == [
        "model",
        "dataset",
        "accuracy_drop_max",
        "int8",
        "layer_agnostic",
        "layer_wise",
        "energy_units",
        "energy_tables",
        "wall_s",
    ]
    wise = shown["layer_wise"]
    assert list(wise) == [
        "scheme",
        "allowed_values_per_layer",
        "accuracy",
        "accuracy_drop",
        "energy",
        "energy_reduction_vs_int8",
        "energy_by_layer",
    ]
    assert wise["accuracy_drop"] == round(out.int8.accuracy - out.layer_wise.accuracy, 2)
    assert wise["energy_reduction_vs_int8"] == round(1 - out.layer_wise.energy / out.int8.energy, 4)
    with pytest.raises(UserInputError, match="unknown model"):
        compress("cnn-mnist")
