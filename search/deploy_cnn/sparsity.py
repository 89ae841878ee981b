"""The sparsity part of deploy-cnn: an unstructured pruning sparsity per layer of a zoo CNN.

A design gives each Conv2d/Linear layer of the zoo classifier but its output head (kept dense,
as :func:`sim.prune.prunable_layers` keeps a model's head) a sparsity from the prune problem's
levels (:data:`search.prune.problem.LEVELS`). A layer is pruned by weight magnitude in every
output row (a convolution's filter is a row of its im2col weight), with the masks of
:mod:`sim.prune.masks`: the pruner of :mod:`sim.prune` prunes ``nn.Linear`` layers only, and its
activation-aware scores need a language model's calibration tokens, so this part uses its
magnitude score and masks directly. No retraining.

On its own it is a small problem: validation accuracy (%) of the pruned float model against
the share of weights kept. As a part of deploy-cnn its stage turns the layers' widths (from
the bits part) and its own densities into the network's workload on the accelerator.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from coevo.search.niches import Niche
from coevo.search.problem import LevelProblem, Levels, Objective, ProblemOptions, config_field
from coevo.search.prune.problem import LEVELS
from coevo.search.quant.problem import ARCH_LAYERS, zoo_classifier
from coevo.sim.quant.config import QuantConfig

SUFFIX = "_sparsity"
"""A layer's parameter is ``<layer>_sparsity`` (distinct from the bits part's ``<layer>_many`` / ``<layer>_rest``)."""


class SparsityOptions(ProblemOptions):
    """Options of the sparsity part."""

    model: Literal["cnn-digits"] = config_field(QuantConfig, "model")


@functools.cache
def zoo_cnn(model: str) -> Any:
    """The zoo classifier ``model`` (:func:`search.quant.problem.zoo_classifier`), loaded once per process."""
    return zoo_classifier(model)


@functools.cache
def weight_shapes(model: str) -> dict[str, tuple[int, int]]:
    """Layer -> (output rows, weights per row) of the zoo CNN ``model`` (loads it: torch)."""
    zm = zoo_cnn(model)
    modules = dict(zm.model.named_modules())
    out = {}
    for layer in ARCH_LAYERS[model]:
        w = modules[layer].weight
        out[layer] = (int(w.shape[0]), int(w[0].numel()))
    return out


class SparsityPart(LevelProblem):
    """Magnitude-pruning sparsity per layer of a zoo CNN (module doc)."""

    name = "cnn-sparsity"
    Options = SparsityOptions
    design_label = "sparsity"
    design_noun = "a sparsity per layer"
    objectives = (
        Objective("accuracy", "maximize", "%", "expensive", bounds=(0.0, 100.0)),
        Objective("weight_share", "minimize", "x dense", "cheap", depends_on=("model",), bounds=(0.0, 1.0)),
    )

    def __init__(self, options: SparsityOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        self.model: str = self.options.model
        self.layers: tuple[str, ...] = ARCH_LAYERS[self.model][:-1]
        self.levels = {f"{layer}{SUFFIX}": Levels(LEVELS, fmt="g") for layer in self.layers}
        self.design_format = (
            "key=value per layer, " + " ".join(f"{p}=S" for p in self.levels) + f" with S one of {', '.join(map(str, LEVELS))}"
        )

    def explain_encoding(self) -> str:
        return (
            f"A design gives each layer of {self.model} but its output head an unstructured sparsity (share of the weights "
            f"of every output filter or neuron set to zero, the smallest magnitudes first), one of {', '.join(map(str, LEVELS))} "
            f"(0: dense). It is written as {self.design_format}."
        )

    def densities(self, point: Any) -> dict[str, float]:
        """Layer -> share of its weights kept (exact: the pruned count per row is rounded as the masks round it)."""
        shapes = weight_shapes(self.model)
        out = {}
        for layer, s in zip(self.layers, point, strict=True):
            width = shapes[layer][1]
            out[layer] = (width - round(s * width)) / width
        return out

    def _share(self, point: Any) -> float:
        shapes = weight_shapes(self.model)
        dens = self.densities(point)
        sizes = {layer: rows * width for layer, (rows, width) in shapes.items()}
        kept = sum(sizes[layer] * dens.get(layer, 1.0) for layer in sizes)
        return kept / sum(sizes.values())

    def pruned(self, model: Any, point: Any) -> Any:
        """A copy of ``model`` (a torch module with this CNN's layers) with each layer pruned to ``point``'s sparsity."""
        import torch

        from coevo.sim.prune.masks import unstructured_mask

        out = copy.deepcopy(model)
        modules = dict(out.named_modules())
        with torch.no_grad():
            for layer, s in zip(self.layers, point, strict=True):
                if s > 0:
                    w = modules[layer].weight
                    keep = unstructured_mask(w.abs().reshape(w.shape[0], -1), float(s), "row")
                    w.mul_(keep.reshape(w.shape).to(w.dtype))
        return out

    def niches(self) -> tuple[Niche, ...]:
        return (
            Niche("light", "under 30 % of the weights pruned", lambda p: 1 - self._share(p) < 0.3),
            Niche("medium", "30-50 % of the weights pruned", lambda p: 0.3 <= 1 - self._share(p) < 0.5),
            Niche("heavy", "50 % or more of the weights pruned", lambda p: 1 - self._share(p) >= 0.5),
        )

    def evaluate(self, point: Any) -> dict[str, float]:
        from coevo.sim.quant import accuracy

        zm = zoo_cnn(self.model)
        return {"accuracy": accuracy(self.pruned(zm.model, tuple(point)), zm.loader("val")), "weight_share": self._share(point)}

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"weight_share": np.array([self._share(p) for p in points], dtype=float)}
