"""Sparse-attention tool: a zoo LM's exact attention swapped for a linear-cost operator, perplexity and recall vs dense."""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar, Literal

from coevo.search.errors import UserInputError
from coevo.search.problem import config_field
from coevo.search.stats import effect_verdict, paired_log_ratio
from coevo.sim.attention import METHODS, attention_flops, check_config, evaluate_sparse, evaluate_sparse_model
from coevo.sim.attention.config import ATTENTION, MAX_BITS, MIN_BITS, AttentionFamilyConfig
from coevo.sim.attention.evaluate import check_eval, sequence_nll_pair
from coevo.sim.zoo import RECIPES
from coevo.tools._base import Tool, ToolArgs, ToolResult, names_code
from coevo.tools._zoo import model_field, zoo_model

Method = Literal["dense", "topk-quantized-keys", "local-global"]
assert set(METHODS) == {"dense", "topk-quantized-keys", "local-global"}  # the Literal lists sim.attention's methods


class SparseArgs(ToolArgs):
    """Arguments of ``attention.sparse``: the zoo LM, the sparse operator replacing its attention and its settings, the split scored."""

    model: str = model_field(ATTENTION.model)
    method: Method = config_field(
        AttentionFamilyConfig,
        "method",
        description=(
            "topk-quantized-keys: queries/keys quantized to key_bits pre-score every visible key, the top_k best per query "
            "get an exact softmax; local-global: the window most recent keys plus the first n_global tokens; dense: exact"
        ),
    )
    # bounds are left to sim.attention's checks: they run before a model trains and say what to give
    top_k: int = config_field(AttentionFamilyConfig, "top_k", description="keys kept per query (topk-quantized-keys), >= 1", bounds=False)
    key_bits: int = config_field(
        AttentionFamilyConfig,
        "key_bits",
        description=f"bits of the quantized queries/keys that pre-score (topk-quantized-keys), {MIN_BITS}..{MAX_BITS}",
        bounds=False,
    )
    window: int = config_field(
        AttentionFamilyConfig, "window", description="local window in tokens, the query included (local-global), >= 1", bounds=False
    )
    n_global: int = config_field(
        AttentionFamilyConfig, "n_global", description="leading tokens every query also attends to (local-global), >= 0", bounds=False
    )
    split: Literal["val", "test"] = config_field(AttentionFamilyConfig, "split")
    max_batches: int | None = config_field(
        AttentionFamilyConfig, "max_batches", description="batches of 64 sequences scored (>= 1); null for the whole split", bounds=False
    )


class AttentionSparse(Tool):
    """Perplexity, top-k recall and operation counts of a zoo LM with sparse attention (no retraining)."""

    name = "attention.sparse"
    measured_fields = frozenset({"wall_s"})
    description = (
        "Replace the exact causal attention of a zoo language model (lm-pydoc, lm-pydoc-tiny; trained on first use) by a "
        "sparse operator without retraining: top-k keys per query chosen by low-bit quantized Q/K pre-scores "
        "(topk-quantized-keys), or a fixed local window + global tokens (local-global). Returns perplexity vs the exact "
        "model, recall of the exact top-k keys, the softmax mass kept, and per-layer MACs dense vs sparse plus the "
        "low-bit pre-scoring operations (still quadratic in length)."
    )
    Args = SparseArgs
    example: ClassVar[dict[str, Any]] = {
        "model": "lm-pydoc-tiny",
        "method": "topk-quantized-keys",
        "top_k": 16,
        "key_bits": 4,
        "max_batches": 1,
    }
    long_running = True
    loads_code = ("model",)

    def run(self, args: SparseArgs) -> ToolResult:
        start = time.perf_counter()
        config = check_config(args.method, args.top_k, args.key_bits, args.window, args.n_global)  # before a model trains
        check_eval(args.split, args.max_batches)
        if args.model in RECIPES and RECIPES[args.model]["task"] != "lm":
            raise UserInputError(f"model {args.model!r} is a {RECIPES[args.model]['task']} model; sparse attention needs a language model")
        zm, notes = zoo_model(args.model, task="lm")  # trains a zoo model on first use, with progress
        if names_code(args.model):
            result = evaluate_sparse_model(zm, config, args.split, args.max_batches)
        else:
            result = evaluate_sparse(
                args.model, args.method, args.top_k, args.key_bits, args.window, args.n_global, args.split, args.max_batches
            )
        _, ln_half, sequences = paired_log_ratio(*sequence_nll_pair(zm, config, args.split, args.max_batches))
        length = int(result["length"])
        n_heads, d_model, layers = _dims(zm.model)
        flops = attention_flops(args.method, length, d_model, n_heads, args.top_k, args.key_bits, args.window, args.n_global)
        value: dict[str, Any] = {
            "model": args.model,
            "method": args.method,
            "split": args.split,
            "perplexity": result["perplexity"],
            "dense_perplexity": result["dense_perplexity"],
            "perplexity_change_pct": 100.0 * (result["perplexity"] / result["dense_perplexity"] - 1.0),
            "recall_topk": None if math.isnan(result["recall"]) else result["recall"],
            "attention_mass_kept": result["attention_mass"],
            "keys_per_query": result["keys_per_query"],
            "tokens_scored": int(result["tokens"]),
            "length": length,
            "layers": layers,
            "d_model": d_model,
            "n_heads": n_heads,
            "per_layer_ops": flops,
            "verdict": effect_verdict(
                f"{args.method} vs exact attention, {args.split} perplexity",
                result["perplexity"],
                result["dense_perplexity"],
                metric="perplexity",
                n=sequences,
                ln_half=ln_half,
            ),
            "wall_s": round(time.perf_counter() - start, 3),
        }
        messages = [
            *notes,
            "no retraining: the trained weights run with the sparse operator in every attention layer",
            "per_layer_ops: one sequence of `length` tokens, all heads; MACs of scores and value sums only (projections are the "
            "same for every method); lowbit_ops are key_bits x key_bits MACs of the pre-scoring over every visible pair",
        ]
        if args.method == "topk-quantized-keys":
            messages.append("recall_topk and attention_mass_kept average over queries that saw more than top_k keys (the others keep all)")
        if args.method == "topk-quantized-keys" and args.top_k >= length:
            messages.append(f"top_k={args.top_k} >= the model's length {length}: every visible key is kept, this is dense attention")
        messages.append(value["verdict"])
        return ToolResult(value=value, messages=messages)


def _dims(model: Any) -> tuple[int, int, int]:
    """(heads, width, layers) of the model's attention modules."""
    found = [m for m in model.modules() if all(hasattr(m, a) for a in ("q", "k", "v", "o", "n_heads"))]
    if not found:
        raise UserInputError("the model has no attention module with q, k, v, o projections and n_heads")
    return int(found[0].n_heads), int(found[0].q.in_features), len(found)
