"""The one-line ``verdict`` of the tools that measure an effect against a baseline in the same result (issue 31, item 8).

Results are built by hand (no model runs): one with a clear loss, one with a clear gain, one inside
the noise; the verdict must name each differently, by the rule of :func:`search.stats.effect_verdict`.
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

from coevo.search.prune.run import PruneOutcome
from coevo.tools import noc, prune, quant, zoqat

NEGATIVE, POSITIVE, NOISE = "negative: worse", "positive: better", "within noise, no effect shown"


def test_quant_judges_the_quantized_model_against_the_float_model_on_test() -> None:
    lost = quant._verdict("class-based", 2.49, 80.0, 95.0, n_test=500)
    tie = quant._verdict("class-based", 3.99, 94.8, 95.0, n_test=500)  # one test image
    assert "class-based at 2.49 average bits vs the float model" in lost and NEGATIVE in lost
    assert "-0.20 points" in tie and tie.endswith(NOISE)


def _zoqat_out(after: float, rtn: float, float_: float, n: int | None = None, spread: float = 0.01) -> dict[str, Any]:
    out: dict[str, Any] = {"after_test": after, "rtn_test": rtn, "float_test": float_, "n_scored": {"test": n} if n else {}}
    if n is None:  # a language model: per-sequence cross-entropies around each perplexity's log, each stage its own noise
        for k, (stage, ppl) in enumerate((("after", after), ("rtn", rtn), ("float", float_))):
            rng = random.Random(k)
            noise = [rng.gauss(0.0, spread) for _ in range(100)]
            out[f"{stage}_test_nll"] = [math.log(ppl) + e - statistics.fmean(noise) for e in noise]
    return out


def test_zo_qat_judges_training_against_rtn_and_rtn_against_float() -> None:
    trained = zoqat._verdict("ste", "perplexity", _zoqat_out(10.8, 11.8, 11.7))  # -8.5 %: lower perplexity is better
    tied = zoqat._verdict("spsa", "perplexity", _zoqat_out(11.79, 11.80, 11.7))  # -0.08 %
    rtn = zoqat._verdict("rtn", "perplexity", _zoqat_out(11.8, 11.8, 11.7))
    assert "ste vs rtn" in trained and POSITIVE in trained and "over 100 sequences" in trained
    assert "spsa vs rtn" in tied and tied.endswith(NOISE)
    assert "rtn vs float" in rtn and NEGATIVE in rtn  # +0.85 %: the quantization's own cost
    # the same -0.08 % with sequences that disagree much more is still noise; with identical shifts it is a gain
    assert zoqat._verdict("spsa", "perplexity", _zoqat_out(11.79, 11.80, 11.7, spread=0.2)).endswith(NOISE)
    steady = _zoqat_out(11.79, 11.80, 11.7)
    steady["after_test_nll"] = [v + math.log(11.79 / 11.80) for v in steady["rtn_test_nll"]]
    assert POSITIVE in zoqat._verdict("spsa", "perplexity", steady)
    no_sequences = {k: v for k, v in _zoqat_out(10.8, 11.8, 11.7).items() if not k.endswith("_nll")}
    assert "no per-sequence test scores" in zoqat._verdict("ste", "perplexity", no_sequences)
    on_digits = zoqat._verdict("spsa", "accuracy", _zoqat_out(90.0, 97.0, 98.0, n=500))
    assert "-7.00 points" in on_digits and NEGATIVE in on_digits


def _outcome(test_pruned: float, metric: str = "perplexity", test_dense: float = 12.0, half: float | None = 0.002) -> PruneOutcome:
    return PruneOutcome(
        model="m", metric=metric, score="wanda", pattern="2:4", target_sparsity=0.5, sparsity=0.5, calib_tokens=32, seed=0,
        val_dense=test_dense, val_pruned=test_pruned, test_dense=test_dense, test_pruned=test_pruned, wall_s=0.1, layers=2,
        test_ln_half=half if metric == "perplexity" else None, test_sequences=256 if metric == "perplexity" else None,
    )  # fmt: skip


def test_prune_judges_the_pruned_model_against_the_dense_one() -> None:
    worse, same = prune.verdict(_outcome(12.6), n_test=0), prune.verdict(_outcome(12.01), n_test=0)
    assert "wanda 2:4 at 50% sparsity vs dense" in worse and NEGATIVE in worse and "over 256 sequences" in worse
    assert same.endswith(NOISE)  # +0.08 % against a 0.2 % noise
    assert NEGATIVE in prune.verdict(_outcome(12.01, half=0.0005), n_test=0)  # the same change on a quieter test set
    assert "no per-sequence test scores" in prune.verdict(_outcome(12.6, half=None), n_test=0)
    gained = prune.verdict(_outcome(99.0, "accuracy", test_dense=90.0), n_test=1000)  # pruning as a regulariser: +9 points
    assert POSITIVE in gained


def _compress(wise: float, agnostic: float, wise_acc: float, int8_acc: float = 99.0) -> dict[str, Any]:
    return {
        "int8": {"compute_reduction_vs_int8": 0.0, "test_accuracy": int8_acc},
        "layer_agnostic": {"compute_reduction_vs_int8": agnostic, "test_accuracy": int8_acc},
        "layer_wise": {"compute_reduction_vs_int8": wise, "test_accuracy": wise_acc},
        "n_test": 500,
    }


def test_compress_judges_layer_wise_energy_against_layer_agnostic_and_its_accuracy_against_int8() -> None:
    ahead = noc.compress_verdict(_compress(0.50, 0.40, 98.8))
    behind = noc.compress_verdict(_compress(0.30, 0.40, 90.0))
    assert ahead.startswith("verdict: layer-wise vs layer-agnostic") and "+10.0 points" in ahead
    assert "positive: layer-wise saves more" in ahead and ahead.endswith(NOISE)  # 0.2 points of accuracy: one image
    assert "-10.0 points" in behind and "negative: layer-wise saves less" in behind and NEGATIVE in behind
