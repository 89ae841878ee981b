"""The weight-bits part of deploy-lm: a round-to-nearest weight width per block group of a zoo byte LM.

A design gives each transformer block's attention projections (``q, k, v, o``) and its MLP
(``fc1, fc2``) a weight width from :data:`BITS`, the same groups as the ``prune`` problem's
(:data:`search.prune.problem.GROUPS`). Weights are fake-quantized per output row, symmetric
round-to-nearest, by :func:`sim.quant.quantized_copy` (the quant family's RTN: no calibration,
no fine-tuning); embeddings and the output head stay float (the accelerator model does not run
them, :mod:`sim.fpga.model`). A pruned weight is 0 and stays 0 (zero is exact in the symmetric grid).

On its own it is a small problem: validation perplexity (as ``-ln ppl``) of the quantized LM
against the average weight bits. As a part of deploy-lm its stage turns the widths, and the
prune part's densities, into the bits the accelerator streams per weight of every layer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from coevo.search.niches import Niche
from coevo.search.problem import LevelProblem, Levels, Objective, ProblemOptions, config_field
from coevo.search.prune.problem import GROUPS, lm_shape
from coevo.sim.fpga.config import FpgaConfig
from coevo.sim.prune.config import PruneConfig

BITS: tuple[int, ...] = (2, 3, 4, 6, 8)
"""Weight widths a group may take (8: the accelerator's int8 lanes, the uncompressed baseline)."""
SUFFIX = "_bits"
"""A group's parameter is ``b<K>_<group>_bits`` (distinct from the prune part's ``b<K>_<group>``)."""
HEAD_BITS = 32
"""Layers outside the blocks (the output head) keep float-like weights: 32 bits is :data:`sim.quant.fake.MAX_BITS`."""


class LmBitsOptions(ProblemOptions):
    """Options of the weight-bits part."""

    model: Literal["lm-pydoc-tiny", "lm-pydoc"] = config_field(FpgaConfig, "search_model")
    eval_batches: int = config_field(PruneConfig, "eval_batches")


class LmBitsPart(LevelProblem):
    """Round-to-nearest weight bits per attention/MLP group of each block of a zoo LM (module doc)."""

    name = "lm-bits"
    Options = LmBitsOptions
    design_label = "bits"
    design_noun = "a weight width per block group"
    objectives = (
        Objective("neg_log_ppl", "maximize", "-ln ppl", "expensive", depends_on=("model", "eval_batches")),
        Objective("avg_bits", "minimize", "bits per block weight", "cheap", depends_on=("model",), bounds=(min(BITS), max(BITS))),
    )

    def __init__(self, options: LmBitsOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        self.model: str = self.options.model
        self.blocks, self.width = lm_shape(self.model)
        self.genes = [f"b{b}_{g}{SUFFIX}" for b in range(self.blocks) for g in GROUPS]
        self.levels = dict.fromkeys(self.genes, Levels(BITS))
        self.design_format = (
            "key=value per block group, " + " ".join(f"{g}=B" for g in self.genes) + f" with B one of {', '.join(map(str, BITS))}"
        )
        # weights per group of a block, in units of d^2 (GROUPS: rows / d x inputs / d per layer): attn 4, mlp 8
        self._size = {g: sum(r * i for _, r, i in layers) for g, layers in GROUPS.items()}

    def explain_encoding(self) -> str:
        return (
            f"A design gives each of the {self.blocks} transformer blocks of {self.model} two weight widths, round-to-nearest per "
            f"output row (no fine-tuning): bK_attn_bits for the attention projections q, k, v, o and bK_mlp_bits for the MLP "
            f"(twice the attention's weights), each one of {', '.join(map(str, BITS))} bits (8: the accelerator's int8). "
            f"It is written as {self.design_format}."
        )

    def layer_bits(self, point: Any) -> dict[str, int]:
        """Layer name (in the zoo's ByteGPT) -> weight bits, for every linear layer of the blocks."""
        out = {}
        for gene, bits in zip(self.genes, point, strict=True):
            block, group = gene[1:].removesuffix(SUFFIX).split("_")
            for layer, _, _ in GROUPS[group]:
                out[f"blocks.{block}.{layer}"] = int(bits)
        return out

    def average_bits(self, point: Any) -> float:
        """Mean weight bits over the blocks' linear weights."""
        total = sum(self._size[gene.removesuffix(SUFFIX).split("_")[1]] * b for gene, b in zip(self.genes, point, strict=True))
        return total / (sum(self._size.values()) * self.blocks)

    def quantized(self, model: Any, point: Any) -> Any:
        """A copy of ``model`` (the zoo LM, maybe pruned) with its block weights quantized to ``point``'s widths (module doc)."""
        from coevo.sim.quant import quantized_copy
        from coevo.sim.quant.fake import quant_layers

        bits: Mapping[str, int] = self.layer_bits(point)
        return quantized_copy(model, {layer.name: [bits.get(layer.name, HEAD_BITS)] * layer.units for layer in quant_layers(model)})

    def niches(self) -> tuple[Niche, ...]:
        return (
            Niche("narrow", "under 4 weight bits on average: the smallest, riskiest models", lambda p: self.average_bits(p) < 4),
            Niche("middle", "4 to 6 weight bits on average", lambda p: 4 <= self.average_bits(p) < 6),
            Niche("wide", "6 weight bits or more on average", lambda p: self.average_bits(p) >= 6),
        )

    def evaluate(self, point: Any) -> dict[str, float]:
        import torch

        from coevo.search.prune.run import zoo_model

        zm = zoo_model(self.model)
        with torch.no_grad():
            ppl = float(zm.evaluate(self.quantized(zm.model, point), split="val", max_batches=self.options.eval_batches or None))
        return {"neg_log_ppl": -math.log(ppl), "avg_bits": self.average_bits(point)}

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"avg_bits": np.array([self.average_bits(p) for p in points], dtype=float)}
