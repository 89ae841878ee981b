"""attention.sparse: what it returns on the tiny zoo LM, its op counts by hand, and its bad input (one clear line each)."""

from __future__ import annotations

import pytest

from coevo.tools import REGISTRY, ToolArgumentError, call_tool

TOOL = REGISTRY.get("attention.sparse")


def test_top_k_result_is_consistent_with_the_hand_counts() -> None:
    value = call_tool(TOOL, {"model": "lm-pydoc-tiny", "method": "topk-quantized-keys", "top_k": 16, "key_bits": 4, "max_batches": 1}).value
    assert (value["length"], value["d_model"], value["n_heads"], value["layers"]) == (128, 64, 2, 2)
    ops = value["per_layer_ops"]
    # 128 queries: 1 + ... + 128 = 8,256 visible pairs; top-16 keeps 16*17/2 + 112*16 = 1,928; 2 * d_model MACs per pair
    assert ops["mac_dense"] == 128 * 8256 and ops["mac_sparse"] == 128 * 1928 and ops["lowbit_ops"] == 64 * 8256
    assert 0.5 < value["recall_topk"] <= 1 and 0 < value["attention_mass_kept"] < 1
    assert value["perplexity_change_pct"] == pytest.approx(100 * (value["perplexity"] / value["dense_perplexity"] - 1))
    assert value["tokens_scored"] == 64 * 128 and value["keys_per_query"] == pytest.approx(1928 / 128)


def test_top_k_over_the_length_is_the_dense_model() -> None:
    result = call_tool(TOOL, {"top_k": 500, "key_bits": 2, "max_batches": 1})
    value = result.value
    assert value["perplexity"] == pytest.approx(value["dense_perplexity"], rel=1e-5) and value["recall_topk"] == 1.0
    assert value["per_layer_ops"]["mac_ratio"] == 1.0
    # no effect to show, and the caller is told so in the value and in what chat and the CLI print
    assert value["verdict"].endswith("within noise, no effect shown") and value["verdict"] in result.messages
    assert "over 64 sequences" in value["verdict"]  # max_batches 1: the paired interval over the 64 sequences scored


def test_local_global_has_no_recall_and_no_prescoring() -> None:
    value = call_tool(TOOL, {"method": "local-global", "window": 16, "n_global": 4, "max_batches": 1}).value
    assert value["recall_topk"] is None and value["per_layer_ops"]["lowbit_ops"] == 0
    # window 16 + 4 global: 136 + 112*16 = 1,928 local pairs, plus sum_{t=1}^{112} min(4, t) = 10 + 108*4 = 442 global ones
    assert value["per_layer_ops"]["mac_sparse"] == 128 * (1928 + 442)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"top_k": 0}, "top_k=0"),
        ({"key_bits": 0}, "key_bits=0"),
        ({"key_bits": 33}, "between 1 and 16"),
        ({"window": -2}, "window=-2"),
        ({"n_global": -1}, "n_global=-1"),
        ({"max_batches": 0}, "max_batches=0"),
        ({"method": "flash"}, "method"),
        ({"split": "dev"}, "split"),
        ({"model": "cnn-digits"}, "classify model; sparse attention needs a language model"),
        ({"model": "gpt2"}, "no model 'gpt2'"),
    ],
)
def test_bad_input_is_one_clear_error(args: dict[str, object], match: str) -> None:
    with pytest.raises(ToolArgumentError, match=match) as exc:
        call_tool(TOOL, {"model": "lm-pydoc-tiny", **args})
    assert "\n" not in str(exc.value).strip()
