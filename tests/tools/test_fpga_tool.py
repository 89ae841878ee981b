"""schedule.length_aware: what it returns on real and given lengths, the CP-SAT gap, and its bad input (one clear line each)."""

from __future__ import annotations

import itertools

import pytest

from coevo.sim.fpga import Accelerator, AttentionConfig, Metrics, device, model_shape, schedule_batch, split_pes
from coevo.tools import REGISTRY, ToolArgumentError, call_tool
from coevo.tools.fpga import paired_verdict

TOOL = REGISTRY.get("schedule.length_aware")


def test_issue_command_on_pydoc_sentences() -> None:
    value = call_tool(TOOL, {"lengths": "pydoc-sentences", "batch": 32, "pes": 64, "draws": 2}).value
    assert value["batches"] == 2 and value["batch_sizes"] == [32] and value["pes"] == 64 and value["schedules_checked"]
    assert value["pe_split"] == {"matmul": 32, "attention": 24, "softmax": 8} and value["max_pes_on_device"] == 2520 // 16
    methods = value["methods"]
    assert set(methods) == {"padding", "bucketing", "length-aware", "fifo", "realloc"}
    assert len(value["realloc_splits"]) == 2 and all(sum(s.values()) == 64 for s in value["realloc_splits"])
    moves = [(32, 24, 8), *(tuple(s.values()) for s in value["realloc_splits"])]  # from the design's split
    assert value["reconfig_cycles"] == 2_000 and value["realloc_split_changes"] == sum(a != b for a, b in itertools.pairwise(moves))
    assert methods["padding"]["speedup_vs_padding_median"] == 1.0
    assert methods["length-aware"]["padding_waste_median"] == 0.0 == methods["fifo"]["padding_waste_median"]
    assert methods["padding"]["padding_waste_median"] > methods["bucketing"]["padding_waste_median"] > 0
    for row in methods.values():
        assert 0 < row["pe_utilization_median"] <= 1
        assert row["makespan_ms_min"] <= row["makespan_ms_median"] <= row["makespan_ms_max"]


def test_explicit_lengths_are_cut_into_consecutive_batches_and_match_the_simulator() -> None:
    lengths = [12, 40, 7, 130, 64, 3, 90, 22, 51, 8]
    value = call_tool(TOOL, {"lengths": lengths, "batch": 4, "model": "lm-pydoc-tiny", "attention": "dense", "split": "6:1:1"}).value
    assert value["lengths"] == "explicit" and value["batches"] == 3 and value["batch_sizes"] == [2, 4]
    assert value["length_max_tokens"] == 130
    accel = Accelerator(device("zcu102"), split_pes(64, (6, 1, 1)))
    spans = [accel.cycles_to_ms(schedule_batch(b, accel, model_shape("lm-pydoc-tiny"), AttentionConfig("dense"), "length-aware").makespan)
             for b in (lengths[:4], lengths[4:8], lengths[8:])]  # fmt: skip
    assert value["methods"]["length-aware"]["makespan_ms_median"] == pytest.approx(sorted(spans)[1], abs=1e-4)


def test_equal_lengths_need_no_padding() -> None:
    value = call_tool(TOOL, {"lengths": [48] * 6, "batch": 6, "model": "lm-pydoc-tiny"}).value
    assert all(row["padding_waste_median"] == 0 for row in value["methods"].values())


def test_cpsat_gap_on_a_small_batch() -> None:
    args = {"lengths": [20, 50, 90], "batch": 3, "model": "lm-pydoc-tiny", "attention": "dense", "cores": "1:2:1", "cpsat_time_limit_s": 2}
    gap = call_tool(TOOL, args).value["cpsat"]
    assert gap["simple_lower_bound_cycles"] <= gap["bound_cycles"] <= gap["makespan_cycles"] <= gap["length_aware_cycles"]
    assert gap["length_aware_gap_to_bound"] >= 0 and gap["status"] in ("optimal", "feasible") and gap["tasks"] == 3 * 2 * (4 + 3 * 2)
    assert gap["realloc_over_fixed_split_bound"] == round(gap["realloc_cycles"] / gap["bound_cycles"], 4)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"lengths": []}, r"lengths=\[\] holds 0 sequences and at least 1 is needed"),
        ({"lengths": [5, 0, -3]}, r"positive integers.*\[0, -3\]"),
        ({"lengths": "wiki"}, "unknown length corpus 'wiki'"),
        ({"pes": 400}, r"need 6400 DSP slices; zcu102 has 2520 \(at most 157 PEs\): use pes <= 157 or a larger device \(alveo-u280\)"),
        ({"pes": 64, "device": "zu3eg"}, "use pes <= 22"),
        ({"split": "4:3"}, "three numbers 'matmul:attention:softmax'"),
        ({"cores": "1:1:40"}, "softmax engine has 8 PEs for 40 cores"),
        ({"tile_m": 1024, "tile_n": 1024, "device": "zu3eg", "pes": 16}, "use smaller tiles"),
        ({"batch": 0}, "batch"),
        ({"reconfig_cycles": -5}, r"reconfig_cycles: Input should be greater than or equal to 0 \(got -5\)"),
    ],
)
def test_bad_input_is_one_clear_line(args: dict[str, object], match: str) -> None:
    with pytest.raises(ToolArgumentError, match=match):
        call_tool(TOOL, {"batch": 8, "model": "lm-pydoc-tiny", **args})


def _spans(*cycles: int) -> list[Metrics]:
    return [Metrics(c, c / 2e5, 0.5, 0.0, {}, 1) for c in cycles]


def test_a_verdict_marks_a_loss_or_an_effect_inside_its_noise() -> None:
    ref = _spans(100, 100, 100)
    # speed-ups 100/110, 100/111, 100/109: all near 0.91, the interval lies below 1
    assert paired_verdict({"m": _spans(110, 111, 109), "r": ref}, "m", "r").endswith("verdict: slower")
    # speed-ups 100/90, 100/110, 100/100: 1.11, 0.91, 1.00, the interval holds 1
    assert "verdict: no measurable difference" in paired_verdict({"m": _spans(90, 110, 100), "r": ref}, "m", "r")
    clear = paired_verdict({"m": _spans(50, 48, 52), "r": ref}, "m", "r")  # about 2x on every batch
    assert "verdict" not in clear and clear.startswith("m vs r: 2.00")
    assert "one batch, no interval" in paired_verdict({"m": _spans(50), "r": _spans(100)}, "m", "r")
