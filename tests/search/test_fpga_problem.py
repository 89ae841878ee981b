"""The ``fpga-transformer`` problem: designs round-trip, simulated objectives, perplexity from sparse attention, a pelnas search."""

from __future__ import annotations

import json
import random

import pytest

from coevo.agent.cli import main
from coevo.search.errors import UserInputError
from coevo.search.fpga.problem import FpgaDesign, FpgaTransformerProblem, sparse_perplexity
from coevo.search.niches import niche_of
from coevo.search.problems import make_problem

OPTIONS = {"batch": 8, "draws": 1, "ppl_batches": 1}


def test_designs_round_trip_and_niches_follow_the_scheduler() -> None:
    p = make_problem("fpga-transformer", OPTIONS)
    assert isinstance(p, FpgaTransformerProblem)
    d = FpgaDesign("12:3:1", 64, 128, 32, 16, 4, "length-aware")
    assert p.describe(d) == "split=12:3:1 tile_m=64 tile_n=128 tile_k=32 top_k=16 key_bits=4 scheduler=length-aware"
    assert p.parse_design(p.describe(d)) == d == p.from_params(p.to_params(d))
    assert p.point_id(d) == "s12-3-1-t64x128x32-k16-b4-length-aware"
    near = p.neighbours(d)
    assert d not in near and len(near) == len(set(near))
    assert FpgaDesign("12:3:1", 64, 128, 32, 16, 4, "padding") in near and FpgaDesign("8:3:1", 64, 128, 32, 16, 4, "length-aware") in near
    assert {niche_of(p.niches(), d._replace(scheduler=s)) for s in ("padding", "bucketing", "length-aware", "realloc")} == {
        "padding", "bucketing", "length-aware", "realloc"
    }  # fmt: skip
    with pytest.raises(UserInputError, match="top_k=7 is outside the space"):
        p.parse_design("split=4:3:1 tile_m=32 tile_n=64 tile_k=64 top_k=7 key_bits=4 scheduler=padding")
    rng = random.Random(0)
    assert all(p.from_params(p.to_params(x)) == x for x in (p.random_point(rng) for _ in range(30)))


def test_simulated_objectives_are_free_and_favour_no_padding() -> None:
    p = make_problem("fpga-transformer", OPTIONS)
    base = FpgaDesign("6:1:1", 32, 64, 64, 32, 4, "padding")
    designs = [base._replace(scheduler=s) for s in ("padding", "bucketing", "length-aware")]
    cheap = p.cheap_values(designs)
    pad, bucket, aware = cheap["makespan_ms"]
    assert aware < bucket < pad  # the same work without (or with less) padding, on the same batch
    assert cheap["padding_waste"][2] == 0 < cheap["padding_waste"][1] < cheap["padding_waste"][0]
    assert all(0 < u <= 1 for u in cheap["pe_utilization"])


def test_realloc_designs_reallocate_the_same_pes_per_batch() -> None:
    p = make_problem("fpga-transformer", OPTIONS)
    # 2:1:1 starves the matmul engine on short sentences: re-allocating the same 64 PEs per batch must pay
    fixed, moved = (FpgaDesign("2:1:1", 32, 64, 64, 32, 4, s) for s in ("length-aware", "realloc"))
    spans = p.cheap_values([fixed, moved])["makespan_ms"]
    assert spans[1] < spans[0]
    assert p.point_id(moved).endswith("-realloc")


def test_the_reconfiguration_options_move_only_realloc_designs() -> None:
    aware, moved = (FpgaDesign("2:1:1", 32, 64, 64, 32, 4, s) for s in ("length-aware", "realloc"))
    spans = {
        (cost, rule): make_problem("fpga-transformer", {**OPTIONS, "draws": 3, "reconfig_cycles": cost, "change_rule": rule}).cheap_values(
            [aware, moved]
        )["makespan_ms"]
        for cost in (0, 10**9)
        for rule in ("myopic", "amortized")
    }
    assert len({v[0] for v in spans.values()}) == 1  # length-aware never changes split: no option moves it
    # free changes: both rules leave the starving split (amortized may pick another split: it watches every split seen);
    # a prohibitive cost: realloc keeps the design's split under either rule
    assert max(spans[0, "myopic"][1], spans[0, "amortized"][1]) < spans[0, "myopic"][0]
    assert spans[10**9, "myopic"][1] == spans[10**9, "amortized"][1] == spans[0, "myopic"][0]
    with pytest.raises(UserInputError, match="change_rule"):
        make_problem("fpga-transformer", {**OPTIONS, "change_rule": "lazy"})
    with pytest.raises(UserInputError, match="reconfig_cycles"):
        make_problem("fpga-transformer", {**OPTIONS, "reconfig_cycles": -1})


def test_bad_options_say_what_to_change() -> None:
    with pytest.raises(UserInputError, match=r"pes=300 exceeds the 157 PEs of zcu102 .* use pes <= 157 or device alveo-u280"):
        make_problem("fpga-transformer", {**OPTIONS, "pes": 300})
    make_problem("fpga-transformer", {**OPTIONS, "pes": 300, "device": "alveo-u280"})


@pytest.mark.slow  # trains lm-pydoc-tiny into the test session's zoo cache on first use
def test_accuracy_objective_is_the_sparse_attention_perplexity() -> None:
    pytest.importorskip("coevo.sim.attention", reason="needs branch i20-attn's sim.attention (evaluate_sparse) merged")
    p = make_problem("fpga-transformer", OPTIONS)
    coarse = p.evaluate(FpgaDesign("6:1:1", 32, 64, 64, 8, 2, "length-aware"))
    fine = p.evaluate(FpgaDesign("6:1:1", 32, 64, 64, 64, 8, "length-aware"))
    for values, (k, bits) in ((coarse, (8, 2)), (fine, (64, 8))):
        ppl, dense = sparse_perplexity("lm-pydoc-tiny", k, bits, 1)
        assert values["perplexity"] == ppl and values["ppl_retention"] == pytest.approx(dense / ppl)
    assert coarse["ppl_retention"] < fine["ppl_retention"] <= 1.001  # 8 keys picked with 2-bit scores lose more than 64 with 8
    assert coarse["makespan_ms"] != fine["makespan_ms"]  # top_k and key_bits change the attention work too


@pytest.mark.slow
def test_pelnas_search_on_the_fpga_problem(capsys: pytest.CaptureFixture[str], storage: str) -> None:
    pytest.importorskip("coevo.sim.attention", reason="needs branch i20-attn's sim.attention (evaluate_sparse) merged")
    args = ["search", "--problem", "fpga-transformer", "--batch", "8", "--draws", "1", "--ppl-batches", "1"]
    assert main([*args, "--proposer", "pelnas", "--budget", "12", "--storage", storage, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["evaluations"] == 12 and data["hv_ratio"] is None
    assert data["front"] and all(row["makespan_ms"] > 0 and row["ppl_retention"] > 0.5 for row in data["front"])
