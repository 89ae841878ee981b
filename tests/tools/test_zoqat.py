"""quant.zo_qat on the zoo's test-size LM: values that make sense, a separate process, bad input, one clear error."""

from __future__ import annotations

from typing import Any

import pytest

from coevo.tools import REGISTRY, ToolArgumentError, call_tool

TOOL = REGISTRY.get("quant.zo_qat")
QUICK: dict[str, Any] = {"model": "lm-pydoc-tiny", "w_bits": 4, "a_bits": 8, "eval_batches": 1, "isolate": False}


def test_rtn_is_the_untrained_quantized_model_and_costs_quality() -> None:
    result = call_tool(TOOL, {**QUICK, "w_bits": 2, "method": "rtn"})
    value = result.value
    ppl = value["perplexity"]
    assert value["verdict"] in result.messages and "rtn vs float, test perplexity" in value["verdict"]
    assert "over 64 sequences" in value["verdict"] and value["verdict"].endswith("negative: worse than the baseline beyond the noise")
    assert value["metric"] == "perplexity" and value["steps"] == 0
    assert ppl["after"] == ppl["rtn"]  # no training: after is the RTN model
    assert ppl["rtn"]["val"] > ppl["float"]["val"] > 1  # 2-bit weights hurt the float model
    assert value["s_per_step"] == 0


def test_gptq_is_post_training_and_beats_rtn_at_3_bits() -> None:
    value = call_tool(TOOL, {**QUICK, "w_bits": 3, "method": "gptq"}).value
    ppl = value["perplexity"]
    assert value["steps"] == 0 and value["s_per_step"] == 0  # no training step
    assert ppl["after"]["val"] < ppl["rtn"]["val"]  # same grid, same calibration batches: error compensation helps


def test_spsa_in_a_fresh_process_reports_its_peak_memory_and_speed() -> None:
    value = call_tool(TOOL, {**QUICK, "method": "spsa", "steps": 3, "isolate": True}).value
    assert value["method"] == "spsa" and value["steps"] == 3
    assert value["peak_rss_mb"] > 50  # a process holding torch and a model: tens of MB at least
    assert value["s_per_step"] > 0 and value["trainable_values"] > 0
    assert all(v > 1 for stage in value["perplexity"].values() for v in stage.values())


@pytest.mark.slow  # 9 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_ste_needs_more_training_memory_than_spsa() -> None:
    # the first-order baseline keeps activations for backprop; ZO runs forward only (same model, batch, steps)
    # batches of 64: STE's saved activations (about 40 MB on the tiny LM) stand well clear of the
    # allocator's page-granular noise, which made a 32-sequence batch land on the margin
    spsa = call_tool(TOOL, {**QUICK, "method": "spsa", "steps": 3, "batch_size": 64}).value
    ste = call_tool(TOOL, {**QUICK, "method": "ste", "steps": 3, "batch_size": 64}).value
    assert ste["train_peak_added_mb"] > spsa["train_peak_added_mb"] + 20


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"w_bits": 0}, "w_bits"),
        ({"w_bits": 0.5}, r"w_bits: .*fractional part \(got 0.5\); bounds: >= 1, <= 16"),  # not an int: its bounds said too
        ({"a_bits": 0}, "a_bits"),
        ({"method": "adam"}, "method"),
        ({"lr": -1}, "lr"),
        ({"model": "no-such-model"}, "no-such-model"),
        ({"model": "cnn-mnist"}, "cnn-digits"),
    ],
)
def test_bad_input_is_one_clear_error(args: dict[str, Any], match: str) -> None:
    with pytest.raises(ToolArgumentError, match=match) as err:
        call_tool(TOOL, {**QUICK, "steps": 1, **args})
    assert "\n" not in str(err.value)
