"""Pruning tool: activation-aware pruning of a zoo model's nn.Linear layers (magnitude, Wanda, cosine, variance, cos+var)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from coevo.search.problem import config_field
from coevo.search.prune.run import PruneOutcome, prune_zoo
from coevo.search.stats import effect_verdict
from coevo.search.work_progress import report
from coevo.sim.prune.config import PruneConfig, Score
from coevo.sim.prune.masks import check_pattern_sparsity, parse_pattern
from coevo.tools._base import Tool, ToolArgs, ToolResult
from coevo.tools._zoo import model_field, zoo_model


class PruneArgs(ToolArgs):
    """Arguments of ``prune.activation``: the zoo model, the sparsity and its pattern, the importance score, the calibration sample."""

    model: str = model_field(PruneConfig.model)
    sparsity: float = config_field(
        PruneConfig, "sparsity", description="share of each pruned layer's weights set to zero, in (0, 1); N:M needs 1 - N/M"
    )
    pattern: Literal["unstructured", "2:4", "4:8"] = config_field(
        PruneConfig,
        "pattern",
        description="unstructured (per output row, as Wanda) or N:M: at most N nonzeros in M consecutive input weights",
    )
    score: Score = config_field(
        PruneConfig,
        "score",
        description=(
            "importance: |W|; Wanda |W|*||x_j||; cos: share of the output's angular deviation; var: |W|*std(x_j); cos+var: both; "
            "sparsegpt: the SparseGPT baseline (OBS masks, kept weights updated to reconstruct the output)"
        ),
    )
    calib_tokens: int = config_field(
        PruneConfig, "calib_tokens", description="calibration tokens (from the training split) the scores are measured on"
    )
    seed: int = config_field(PruneConfig, "seed", description="seed of the calibration sample (which training sequences)")


class PruneActivation(Tool):
    """Prune a zoo model layer by layer with an activation-aware score; dense vs pruned val/test metric."""

    name = "prune.activation"
    measured_fields = frozenset({"wall_s"})
    description = (
        "Prune the nn.Linear layers inside the transformer blocks of a zoo model (not embeddings or head) to a "
        "sparsity, unstructured or N:M (2:4, 4:8), scoring weights by magnitude, Wanda (|W| x input norm), "
        "output-activation angular deviation (cos), input-activation variance (var) or both (cos+var), or with the "
        "SparseGPT reconstruction baseline, layer by layer with calibration activations propagated through the layers "
        "already pruned. Returns val/test perplexity (or accuracy) dense and pruned, the sparsity measured from the "
        "masks and the pruning's wall time. The zoo model itself is not changed."
    )
    Args = PruneArgs
    example: ClassVar[dict[str, Any]] = {
        "model": "lm-pydoc-tiny",
        "sparsity": 0.5,
        "pattern": "2:4",
        "score": "cos+var",
        "calib_tokens": 64,
    }
    long_running = True
    loads_code = ("model",)

    def run(self, args: PruneArgs) -> ToolResult:
        check_pattern_sparsity(parse_pattern(args.pattern), args.sparsity)  # before the model is built (or trained)
        zm, notes = zoo_model(args.model)
        outcome = prune_zoo(
            zm,
            args.sparsity,
            pattern=args.pattern,
            score=args.score,
            calib_tokens=args.calib_tokens,
            seed=args.seed,
            progress=report,
            paired_test=True,
        )
        better = "lower" if outcome.metric == "perplexity" else "higher"
        value = outcome.as_dict()
        value["verdict"] = verdict(outcome, len(zm.splits["test"]))
        return ToolResult(
            value=value,
            messages=[
                *notes,
                f"{outcome.metric} measured on the zoo's val/test splits ({better} is better); wall_s is the pruning alone",
                "weights are zeroed in a copy: no speed-up is claimed (sparse kernels are not modelled)",
                value["verdict"],
            ],
        )


def verdict(outcome: PruneOutcome, n_test: int) -> str:
    """The pruned model's test metric judged against the dense model's in the same outcome (``search.stats``' rule).

    ``n_test``: the test examples the accuracy of a classifier was measured on (a perplexity's noise is
    the outcome's own paired per-sequence interval, ``test_ln_half`` over ``test_sequences``).
    """
    if outcome.test_pruned is None or outcome.test_dense is None:  # the tool measures test; kept for the types
        return "verdict: no test split measured"
    what = f"{outcome.score} {outcome.pattern} at {outcome.sparsity:.0%} sparsity vs dense, test {outcome.metric}"
    if outcome.metric == "perplexity":
        if outcome.test_ln_half is None:
            return "verdict: no per-sequence test scores measured (prune_zoo's paired_test), so no noise to judge against"
        return effect_verdict(
            what, outcome.test_pruned, outcome.test_dense, metric="perplexity", n=outcome.test_sequences, ln_half=outcome.test_ln_half
        )
    return effect_verdict(what, outcome.test_pruned, outcome.test_dense, metric=outcome.metric, n=n_test)
