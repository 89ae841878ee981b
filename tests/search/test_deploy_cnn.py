"""deploy-cnn: narrow and sparse weights in the accelerator model by hand, the joint space, the chain, bad input, a search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coevo.agent.cli import main
from coevo.search.deploy_cnn.problem import DeployCnnProblem, cnn_layers
from coevo.search.errors import UserInputError
from coevo.sim.accel.energy import ADD_PJ, DRAM_PJ_PER_BYTE, MULT8_PJ
from coevo.sim.accel.network import ArrayConfig, NetLayer, Workload, network_cost
from coevo.sim.accel.systolic import Layer

ARRAY = ArrayConfig(rows=8, cols=8, dataflow="ws", ifmap_kb=16, filter_kb=8, ofmap_kb=16, clock_mhz=1000)
"""At 1 GHz the voltage scale is 1 (0.9 V): MAC energies are Horowitz's constants as they stand."""
FC = Layer("gemm", m=1, k=64, n=16)
"""1,024 weights: 1 KiB at int8, well inside the 8 KiB weight buffer (read from DRAM once)."""


def _cost(bits: float = 8.0, density: float = 1.0, layer: Layer = FC) -> tuple[float, float, float]:
    c = network_cost(Workload((NetLayer("fc", "linear", layer, 1, weight_bits=bits, density=density),)), ARRAY)
    return c.mac_uj, c.dram_uj, c.latency_ms


def test_narrow_weights_scale_the_multiplier_and_the_weight_traffic_by_hand() -> None:
    mac8, dram8, lat8 = _cost(8)
    mac4, dram4, lat4 = _cost(4)
    # 1,024 MACs: an 8-bit multiply (0.2 pJ) at 4 bits costs half, the 22-bit add is unchanged
    assert mac8 == pytest.approx(1024 * (MULT8_PJ + ADD_PJ) / 1e6)
    assert mac4 == pytest.approx(1024 * (MULT8_PJ / 2 + ADD_PJ) / 1e6)
    # DRAM: the 64 int8 inputs and 16 32-bit outputs are unchanged; the weights shrink from 1,024 to 512 bytes
    assert dram8 - dram4 == pytest.approx(512 * DRAM_PJ_PER_BYTE / 1e6)
    assert lat4 <= lat8


def test_sparse_weights_gate_macs_and_are_stored_with_an_index_when_that_is_smaller() -> None:
    mac8, dram8, _ = _cost(8)
    mac_half, dram_half, _ = _cost(8, density=0.5)
    assert mac_half == pytest.approx(mac8 / 2)  # zero weights gate their MACs
    # half the weights kept, each 8 bits + a 5-bit index (a fully connected layer): 6.5 bits per weight, 832 bytes
    assert dram8 - dram_half == pytest.approx((1024 - 832) * DRAM_PJ_PER_BYTE / 1e6)
    # at 2 bits, a 75 %-dense layer would need 0.75 x (2 + 5) = 5.25 bits sparse: it stays dense, 256 bytes
    _, dram2, _ = _cost(2)
    _, dram2_sparse, _ = _cost(2, density=0.75)
    assert dram2_sparse == pytest.approx(dram2)


def test_narrow_weights_that_fit_the_weight_buffer_stop_its_refetches() -> None:
    # a 128 x 128 layer under output stationary with 64 rows: 16 KiB of int8 weights overflow the 8 KiB buffer and are
    # read from DRAM once per row tile (ceil(64 / 8) = 8 times); at 4 bits they fit and are read once
    big = Layer("gemm", m=64, k=128, n=128)
    os_array = ArrayConfig(8, 8, "os", 16, 8, 16, 1000)

    def dram(bits: float) -> float:
        return network_cost(Workload((NetLayer("fc", "linear", big, 1, weight_bits=bits),)), os_array).dram_uj

    weights8, weights4 = 128 * 128 * 8, 128 * 128 // 2  # bytes of weights from DRAM
    assert dram(8) - dram(4) == pytest.approx((weights8 - weights4) * DRAM_PJ_PER_BYTE / 1e6)


def test_weight_bits_and_density_outside_the_model_are_refused() -> None:
    with pytest.raises(UserInputError, match="weight_bits must be in"):
        NetLayer("fc", "linear", FC, 1, weight_bits=16)
    with pytest.raises(UserInputError, match="density must be in"):
        NetLayer("fc", "linear", FC, 1, density=0.0)


@pytest.fixture(scope="module")
def problem() -> DeployCnnProblem:
    return DeployCnnProblem()


def _design(problem: DeployCnnProblem, bits: int, sparsity: float, accel: str) -> tuple[object, ...]:
    b = " ".join(f"{n}={bits}" for n in problem.part("bits").problem.distributions())
    s = " ".join(f"{n}={sparsity:g}" for n in problem.part("sparsity").problem.distributions())
    return problem.parse_design(f"bits: {b} ; sparsity: {s} ; accel: {accel}")


ACCEL = "rows=16 cols=16 dataflow=ws ifmap_kb=32 filter_kb=16 ofmap_kb=32 clock_mhz=400"


def test_the_joint_space_lists_every_parts_variables_without_clashes(problem: DeployCnnProblem) -> None:
    names = list(problem.distributions())
    layers = ("conv1", "conv2", "conv3", "fc1", "fc2")
    bits = [f"{layer}_{group}" for layer in layers for group in ("many", "rest")]
    sparsity = [f"{layer}_sparsity" for layer in layers[:-1]]  # the output head stays dense
    accel = ["rows", "cols", "dataflow", "ifmap_kb", "filter_kb", "ofmap_kb", "clock_mhz"]
    assert names == [*bits, *sparsity, *accel]
    assert len(set(names)) == len(names)


def test_the_cnn_layer_shapes_are_the_digits_cnns(problem: DeployCnnProblem) -> None:
    # 8x8 digits: conv1 1->16 and conv2 16->32 at 8x8 (3x3, padding 1), pool, conv3 32->64 at 4x4, pool, fc1 256->64, fc2 64->10
    gemms = {name: layer.gemm() for name, _, layer in cnn_layers("cnn-digits")}
    assert gemms == {"conv1": (64, 9, 16), "conv2": (64, 144, 32), "conv3": (16, 288, 64), "fc1": (1, 256, 64), "fc2": (1, 64, 10)}


def test_fewer_bits_and_more_sparsity_cost_less_energy_on_the_same_accelerator(problem: DeployCnnProblem) -> None:
    dense8, dense4, sparse8 = (_design(problem, b, s, ACCEL) for b, s in ((8, 0.0), (4, 0.0), (8, 0.75)))
    cheap = problem.cheap_values([dense8, dense4, sparse8])
    e8, e4, es = cheap["energy_uj"]
    assert e4 < e8 and es < e8
    assert cheap["area_mm2"][0] == cheap["area_mm2"][1] == cheap["area_mm2"][2]  # the array keeps its 8-bit PEs
    assert "accuracy" not in cheap


def test_the_evaluation_prunes_and_quantizes(problem: DeployCnnProblem) -> None:
    dense8 = problem.evaluate(_design(problem, 8, 0.0, ACCEL))
    crushed = problem.evaluate(_design(problem, 2, 0.75, ACCEL))
    assert dense8["accuracy"] > 90  # the zoo CNN at INT8 (98-99 %)
    assert crushed["accuracy"] < dense8["accuracy"] - 5  # 2 bits and 75 % pruned everywhere, no retraining
    assert crushed["energy_uj"] < dense8["energy_uj"]


def test_accelerator_settings_outside_their_levels_are_refused(problem: DeployCnnProblem) -> None:
    with pytest.raises(UserInputError, match="rows"):
        _design(problem, 8, 0.0, ACCEL.replace("rows=16", "rows=7"))


def test_bad_accelerator_options_are_one_line_exit_2_and_nothing_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.sqlite3"
    assert main(["search", "--problem", "deploy-cnn", "--budget", "4", "--storage", f"sqlite:///{db}", "--dram-gbps", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "dram_gbps" in err and len(err.splitlines()) == 1, err
    assert not db.exists()


def test_a_tiny_search_runs_end_to_end(storage: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "--problem", "deploy-cnn", "--budget", "4", "--storage", storage, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["evaluations"] == 4 and result["front"]
    for row in result["front"]:
        assert set(row["design"].split(" ; ")[i].split(":")[0] for i in range(3)) == {"bits", "sparsity", "accel"}
        assert 0 < row["accuracy"] <= 100 and row["energy_uj"] > 0 and row["latency_ms"] > 0 and row["area_mm2"] > 0
