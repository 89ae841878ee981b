"""Activation-aware pruning of a zoo LM as a coevo problem: keep perplexity low while pruning more weights.

A point gives each transformer block's attention (``q, k, v, o``) and MLP (``fc1, fc2``) an
unstructured sparsity from :data:`LEVELS` (0 leaves the group dense); the layers are pruned
layer by layer with the chosen activation-aware score (:mod:`sim.prune`). Objectives:

* ``neg_log_ppl`` (maximised, expensive): ``-ln(val perplexity)`` of the pruned LM. The
  engine and the Pareto metrics maximise the first objective, so perplexity (lower is
  better) enters as its negative log (monotone: the same fronts; a difference of 0.1 is a
  10 % perplexity ratio).
* ``weight_share`` (minimised, cheap): share of the blocks' nn.Linear weights kept, exact
  from the design (per-row rounding included), so parameters and multiply-accumulates of
  those layers both scale with it.

The space has 6^(2 x blocks) points (1.7 M for lm-pydoc), each needing a pruning and an
evaluation, so the exact front is unknown (:meth:`reference` is None).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np

from coevo.search.errors import UserInputError
from coevo.search.niches import Niche
from coevo.search.problem import LevelProblem, Levels, Objective, ProblemOptions, config_field
from coevo.sim.prune.config import PruneConfig, Score
from coevo.sim.zoo.recipes import ZooError, recipe

LEVELS: tuple[float, ...] = (0.0, 0.25, 0.4, 0.5, 0.6, 0.75)
"""Sparsities a layer group may take."""


def lm_shape(model: str) -> tuple[int, int]:
    """(blocks, width d) of a zoo LM, read from its recipe: the design space needs them before any training."""
    try:
        rec = recipe(model)
    except ZooError as exc:
        raise UserInputError(str(exc)) from None
    if rec["task"] != "lm":
        raise UserInputError(f"the prune problem prunes a language model; {model!r} is a {rec['task']} model")
    return int(rec["arch"]["n_layers"]), int(rec["arch"]["d"])


GROUPS: dict[str, tuple[tuple[str, int, int], ...]] = {
    "attn": (("attn.q", 1, 1), ("attn.k", 1, 1), ("attn.v", 1, 1), ("attn.o", 1, 1)),
    "mlp": (("mlp.fc1", 4, 1), ("mlp.fc2", 1, 4)),
}
"""Group -> its layers as (name in the block, rows / d, inputs / d)."""

Sparsities = tuple[float, ...]


class PruneOptions(ProblemOptions):
    """Options of the ``prune`` problem."""

    model: Literal["lm-pydoc", "lm-pydoc-tiny", "lm-pystdlib", "lm-pystdlib-tiny"] = config_field(
        PruneConfig, "model", description="the zoo LM to prune (lm-pystdlib: on 31 MB of Python source; the -tiny ones for tests)"
    )
    score: Score = config_field(PruneConfig, "score")
    calib_tokens: int = config_field(PruneConfig, "calib_tokens")
    calib_seed: int = config_field(PruneConfig, "seed")
    eval_batches: int = config_field(PruneConfig, "eval_batches")


class PruneProblem(LevelProblem):
    """Sparsity per attention/MLP group of each block of a zoo LM (module doc)."""

    name = "prune"
    Options = PruneOptions
    run_group = "model"
    design_label = "sparsity"
    design_noun = "a sparsity design"
    example_options: ClassVar[Mapping[str, Any]] = {"model": "lm-pydoc-tiny", "calib_tokens": 64, "eval_batches": 2}
    objectives = (
        Objective("neg_log_ppl", "maximize", "-ln ppl", "expensive"),
        Objective("weight_share", "minimize", "x dense", "cheap", depends_on=("model",), bounds=(0.0, 1.0)),
    )

    def __init__(self, options: PruneOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        self.model: str = self.options.model
        self.blocks, self.width = lm_shape(self.model)
        self.genes = [f"b{b}_{g}" for b in range(self.blocks) for g in GROUPS]
        self.levels = dict.fromkeys(self.genes, Levels(LEVELS, fmt="g"))
        self.design_format = (
            "key=value per block group, " + " ".join(f"{g}=S" for g in self.genes) + f" with S one of {', '.join(map(str, LEVELS))}"
        )
        self._dense = sum(r * i for layers in GROUPS.values() for _, r, i in layers) * self.width**2 * self.blocks
        self._cache: dict[Sparsities, dict[str, float]] = {}
        self._checked = False

    def niches(self) -> tuple[Niche, ...]:
        def pruned(point: Any) -> float:
            return 1 - self._share(point)

        return (
            Niche("light", "under 30 % of the block weights pruned", lambda p: pruned(p) < 0.3),
            Niche("medium", "30-50 % of the block weights pruned", lambda p: 0.3 <= pruned(p) < 0.5),
            Niche("heavy", "50 % or more of the block weights pruned: the smallest, riskiest models", lambda p: pruned(p) >= 0.5),
        )

    def explain_encoding(self) -> str:
        return (
            f"A design gives each of the {self.blocks} transformer blocks of {self.model} two unstructured sparsities "
            f"(share of weights set to zero in every output row, chosen by the {self.options.score} score): bK_attn for the "
            f"attention projections q, k, v, o ({self.width}x{self.width} each) and bK_mlp for the MLP (fc1 {4 * self.width}x"
            f"{self.width}, fc2 {self.width}x{4 * self.width}; twice the attention's weights); each one of "
            f"{', '.join(map(str, LEVELS))} (0: dense). Block 0 is nearest the input. It is written as "
            f"{self.design_format}."
        )

    def layer_sparsity(self, point: Any) -> dict[str, float]:
        """Layer name (in the zoo's ByteGPT) -> sparsity, for the groups not left dense."""
        out = {}
        for gene, s in zip(self.genes, point, strict=True):
            block, group = gene[1:].split("_")
            for layer, _, _ in GROUPS[group]:
                if s > 0:
                    out[f"blocks.{block}.{layer}"] = s
        return out

    def _share(self, point: Any) -> float:
        kept = 0
        for gene, s in zip(self.genes, point, strict=True):
            for _, rows, ins in GROUPS[gene.split("_")[1]]:
                width = ins * self.width
                kept += rows * self.width * (width - round(s * width))
        return kept / self._dense

    def evaluate(self, point: Any) -> dict[str, float]:
        from coevo.search.prune.run import prune_zoo, zoo_model  # torch and the zoo only when a design is evaluated

        key = tuple(point)
        if key not in self._cache:
            if not self._checked:
                self._check(zoo_model(self.model).model)
            sparsity = self.layer_sparsity(key)
            if sparsity:
                o = self.options
                out = prune_zoo(
                    self.model,
                    sparsity,
                    score=o.score,
                    calib_tokens=o.calib_tokens,
                    seed=o.calib_seed,
                    splits=("val",),
                    max_batches=o.eval_batches or None,
                    dense={"val": math.nan},  # not needed here
                )
                ppl = out.val_pruned
            else:
                zm = zoo_model(self.model)
                ppl = float(zm.evaluate(zm.model, split="val", max_batches=self.options.eval_batches or None))
            self._cache[key] = {"neg_log_ppl": -math.log(ppl), "weight_share": self._share(key)}
        return dict(self._cache[key])

    def _check(self, model: Any) -> None:
        """The loaded model has the blocks and width its recipe says (else the design space would be wrong)."""
        blocks = getattr(model, "blocks", None)
        if blocks is None or len(blocks) != self.blocks or blocks[0].attn.q.weight.shape != (self.width, self.width):
            raise UserInputError(
                f"zoo model {self.model} does not have {self.blocks} blocks of width {self.width} (its cache does not match its recipe)"
            )
        self._checked = True

    def acquisition_bounds(self) -> tuple[float, float]:
        return -math.log(256.0), 1.0 + 1e-9  # a byte LM that knows nothing: perplexity 256

    # ---- operators for the co-evolution engine (Evolvable)

    def features(self, points: Sequence[Any]) -> np.ndarray:
        """Sparsity per group, then the share of block weights pruned."""
        return np.array([[*p, 1 - self._share(p)] for p in points], dtype=float).reshape(len(points), len(self.genes) + 1)

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"weight_share": np.array([self._share(p) for p in points], dtype=float)}
