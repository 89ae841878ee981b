"""deploy-lm: compressed weights in the FPGA model by hand, the chain, the perplexity against the zoo model's own, bad input, a search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coevo.agent.cli import main
from coevo.search.compose import Part, check_parts
from coevo.search.deploy_lm.bits import LmBitsPart
from coevo.search.deploy_lm.problem import CompressedLm, DeployLmProblem, LayerDensity, compressed_lm
from coevo.search.errors import UserInputError
from coevo.search.prune.problem import PruneProblem
from coevo.sim.fpga import Accelerator, AttentionConfig, compare_methods, device, split_pes
from coevo.sim.fpga.model import TransformerShape, model_shape

FPGA = "split=4:3:1 tile_m=32 tile_n=64 tile_k=64 top_k=32 key_bits=4 scheduler=length-aware"
TINY_WEIGHTS = 2 * 12 * 64 * 64
"""lm-pydoc-tiny: 2 blocks of q, k, v, o (64 x 64) and fc1, fc2 (256 x 64): 12 d^2 weights each."""


@pytest.fixture(scope="module")
def problem() -> DeployLmProblem:
    return DeployLmProblem(batch=8, draws=1, eval_batches=1, calib_tokens=64)


def _design(problem: DeployLmProblem, sparsity: float, bits: int, fpga: str = FPGA) -> tuple[object, ...]:
    s = " ".join(f"{n}={sparsity:g}" for n in problem.part("prune").problem.distributions())
    b = " ".join(f"{n}={bits}" for n in problem.part("bits").problem.distributions())
    return problem.parse_design(f"prune: {s} ; bits: {b} ; fpga: {fpga}")


def test_the_joint_space_lists_every_parts_variables_without_clashes(problem: DeployLmProblem) -> None:
    names = list(problem.distributions())
    groups = [f"b{b}_{g}" for b in range(2) for g in ("attn", "mlp")]
    fpga = ["split", "tile_m", "tile_n", "tile_k", "top_k", "key_bits", "scheduler"]
    assert names == [*groups, *(f"{g}_bits" for g in groups), *fpga]


def test_parts_sharing_a_parameter_or_a_broken_chain_are_refused_in_one_line() -> None:
    prune = PruneProblem(model="lm-pydoc-tiny")
    with pytest.raises(UserInputError, match="parts 'a' and 'b' share the parameter 'b0_attn'") as exc:
        check_parts("x", [Part("a", prune), Part("b", PruneProblem(model="lm-pydoc-tiny"))])
    assert "\n" not in str(exc.value)
    bits = LmBitsPart(model="lm-pydoc-tiny")
    with pytest.raises(UserInputError, match="part 'bits' needs LayerDensity but the part before it produces CompressedLm"):
        check_parts(
            "x",
            [
                Part("prune", prune, stage=lambda s, _: None, produces=CompressedLm),
                Part("bits", bits, stage=lambda b, d: None, consumes=LayerDensity),
            ],
        )


def test_stored_bits_and_weight_memory_by_hand() -> None:
    layers = [f"blocks.{b}.{x}" for b in range(2) for x in ("attn.q", "attn.k", "attn.v", "attn.o", "mlp.fc1", "mlp.fc2")]
    dense8 = compressed_lm("lm-pydoc-tiny", dict.fromkeys(layers, 8), dict.fromkeys(layers, 1.0))
    assert dense8.weight_mb == pytest.approx(TINY_WEIGHTS / 1e6)  # int8: a byte per weight
    assert dense8.shape.weight_bits == ((8.0, 8.0, 8.0, 8.0),) * 2
    four = compressed_lm("lm-pydoc-tiny", dict.fromkeys(layers, 4), dict.fromkeys(layers, 1.0))
    assert four.weight_mb == pytest.approx(TINY_WEIGHTS / 2 / 1e6)
    # a quarter of the weights kept at 8 bits, each with a 5-bit index: 0.25 x 13 = 3.25 bits per weight
    sparse = compressed_lm("lm-pydoc-tiny", dict.fromkeys(layers, 8), dict.fromkeys(layers, 0.25))
    assert sparse.weight_mb == pytest.approx(TINY_WEIGHTS * 3.25 / 8 / 1e6)
    # half kept at 4 bits would need 0.5 x 9 = 4.5 bits sparse: stored dense, 4 bits
    half4 = compressed_lm("lm-pydoc-tiny", dict.fromkeys(layers, 4), dict.fromkeys(layers, 0.5))
    assert half4.weight_mb == pytest.approx(four.weight_mb)


def test_int8_weight_bits_leave_the_fpga_model_as_it_was_and_narrow_ones_never_slow_it() -> None:
    base = model_shape("lm-pydoc-tiny")
    int8 = TransformerShape(64, 2, 2, 256, weight_bits=((8, 8, 8, 8),) * 2)
    narrow = TransformerShape(64, 2, 2, 256, weight_bits=((2, 2, 2, 2), (4, 4, 4, 4)))
    attn = AttentionConfig("topk", top_k=16, key_bits=4)
    batches = [[5, 40, 130, 9], [300, 12]]
    for tile_m in (8, 32):
        accel = Accelerator(device("zcu102"), split_pes(64, (4, 3, 1)), tile_m=tile_m)
        for method in ("padding", "length-aware", "realloc"):

            def span(shape: TransformerShape, method: str = method, accel: Accelerator = accel) -> list[int]:
                return [m.makespan_cycles for m in compare_methods(batches, accel, shape, attn, (method,))[method]]

            assert span(int8) == span(base)
            assert all(n <= w for n, w in zip(span(narrow), span(base), strict=True))
    with pytest.raises(UserInputError, match="weight_bits"):
        TransformerShape(64, 2, 2, 256, weight_bits=((16, 8, 8, 8),) * 2)


def test_sparser_and_narrower_designs_take_less_memory_and_no_more_time(problem: DeployLmProblem) -> None:
    for scheduler in ("padding", "bucketing", "length-aware", "realloc"):
        fpga = FPGA.replace("length-aware", scheduler).replace("tile_m=32", "tile_m=16")
        designs = [_design(problem, s, b, fpga) for s, b in ((0.0, 8), (0.0, 4), (0.75, 8), (0.75, 2))]
        cheap = problem.cheap_values(designs)
        mb, ms = cheap["weight_mb"], cheap["latency_ms"]
        assert mb[0] == pytest.approx(TINY_WEIGHTS / 1e6)
        assert mb[1] < mb[0] and mb[2] < mb[0] and mb[3] < min(mb[1], mb[2])
        assert max(ms[1], ms[2]) <= ms[0] and ms[3] <= min(ms[1], ms[2])
        assert "neg_log_ppl" not in cheap and "perplexity" not in cheap
    # the narrowest design moves fewer weight bytes, and somewhere that is time (memory-bound edge tiles)
    assert ms[3] < ms[0]


def test_a_dense_int8_design_with_exact_attention_has_the_zoo_models_perplexity(problem: DeployLmProblem) -> None:
    from coevo.search.prune.run import zoo_model

    zm = zoo_model("lm-pydoc-tiny")
    own = float(zm.evaluate(zm.model, split="val", max_batches=1))
    dense8 = problem.compression_perplexity((0.0,) * 4, (8,) * 4, None)
    # RTN int8 per output row moves a weight by at most half a step (1/254 of the row's largest): within 0.5 % of the float model
    assert dense8 == pytest.approx(own, rel=0.005)
    # the widest sparse attention of the space (64 of the 128-byte block's keys, 8-bit pre-score) stays within 2 %
    values = problem.evaluate(_design(problem, 0.0, 8, FPGA.replace("top_k=32", "top_k=64").replace("key_bits=4", "key_bits=8")))
    assert values["perplexity"] == pytest.approx(own, rel=0.02)


def test_the_evaluation_prunes_quantizes_and_sparsifies(problem: DeployLmProblem) -> None:
    dense8 = problem.evaluate(_design(problem, 0.0, 8))
    crushed = problem.evaluate(_design(problem, 0.75, 2, FPGA.replace("top_k=32", "top_k=8").replace("key_bits=4", "key_bits=2")))
    assert crushed["perplexity"] > dense8["perplexity"] * 1.05  # 75 % pruned, 2 bits, 8 keys per query: no retraining
    assert crushed["weight_mb"] < dense8["weight_mb"] and crushed["latency_ms"] < dense8["latency_ms"]
    assert dense8["neg_log_ppl"] == pytest.approx(-__import__("math").log(dense8["perplexity"]))


def test_fpga_settings_outside_their_levels_are_refused(problem: DeployLmProblem) -> None:
    with pytest.raises(UserInputError, match="top_k"):
        _design(problem, 0.0, 8, FPGA.replace("top_k=32", "top_k=100"))
    with pytest.raises(UserInputError, match="bits"):
        _design(problem, 0.0, 5)


@pytest.mark.parametrize(
    ("flags", "names"), [(["--pes", "200"], "pes=200 exceeds the 157 PEs of board zcu102"), (["--pes", "9999"], "pes")]
)
def test_bad_options_are_one_line_exit_2_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], names: str
) -> None:
    db = tmp_path / "s.sqlite3"
    assert main(["search", "--problem", "deploy-lm", "--budget", "4", "--storage", f"sqlite:///{db}", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert names in err and len(err.splitlines()) == 1, err
    assert not db.exists()


@pytest.mark.slow
def test_a_tiny_search_runs_end_to_end(storage: str, capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--batch", "8", "--draws", "1", "--eval-batches", "1", "--calib-tokens", "64"]
    assert main(["search", "--problem", "deploy-lm", "--proposer", "pelnas", "--budget", "4", "--storage", storage, "--json", *flags]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["evaluations"] == 4 and result["front"]
    for row in result["front"]:
        assert [p.split(":")[0] for p in row["design"].split(" ; ")] == ["prune", "bits", "fpga"]
        assert row["perplexity"] > 1 and row["latency_ms"] > 0 and row["weight_mb"] > 0
