"""Mixed-precision weight quantization as a coevo problem: maximise accuracy, minimise average weight bits.

The units (output filters / neurons) of each Conv2d/Linear layer of a zoo classifier are
split into two groups by class-based importance (:mod:`sim.quant.mixed`): ``<layer>_many``,
the units important to at least the layer's median number of classes, and ``<layer>_rest``.
A point gives each group a width from ``{2, 3, 4, 6, 8}`` bits. Objectives:

* ``accuracy`` (maximised, expensive): validation accuracy (%) after straight-through
  fine-tuning for up to ``finetune_epochs`` epochs (the best val epoch kept; 0: round-to-nearest).
  Deterministic per seed.
* ``avg_bits`` (minimised, cheap): average weight bits, weighted by weight count.
* ``model_kbit`` (minimised, cheap, reported): storage in kbit (quantized weights, a 32-bit
  scale per unit, everything else float32).

Niches split the space by average bits: ``low`` (<= 3), ``mid`` (3-5], ``high`` (> 5). The
space has 5^10 points for cnn-digits, so the exact front is unknown.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from coevo.search.errors import UserInputError
from coevo.search.niches import Niche
from coevo.search.problem import LevelProblem, Levels, Objective, ProblemOptions, config_field
from coevo.sim.quant.config import CANDIDATES, QuantConfig

if TYPE_CHECKING:  # torch loads when a quant problem first evaluates, not when it is listed
    from coevo.sim.quant import Group

ARCH_LAYERS: dict[str, tuple[str, ...]] = {
    "cnn-digits": ("conv1", "conv2", "conv3", "fc1", "fc2"),
    "cnn-mnist5k-small": ("conv1", "conv2", "conv3", "fc1", "fc2"),  # issue 31's second task
}
"""The Conv2d/Linear layers of each zoo classifier the problem offers (checked against the loaded model)."""
PARTS = ("many", "rest")
Widths = tuple[int, ...]


def zoo_classifier(name: str, progress: Callable[[str, float], None] | None = None) -> Any:
    """The zoo model ``name`` (:func:`sim.zoo.load`), which must be a classifier.

    Raises:
        UserInputError: unknown model (the message lists the zoo), or a model that is not a classifier.
    """
    from coevo.sim.zoo import ZooError, load

    try:
        zm = load(name, progress=progress)
    except ZooError as exc:
        raise UserInputError(str(exc)) from None
    if zm.task != "classify":
        raise UserInputError(f"{name} is a {zm.task} model; class-based quantization needs a classifier such as cnn-digits")
    return zm


@functools.cache
def _setup(model: str, quantile: float) -> tuple[Any, tuple[Group, ...]]:
    """The zoo model and its class-importance groups (computed once per process: a few seconds)."""
    import torch

    from coevo.sim.quant import class_counts, class_groups, class_scores, quant_layers

    torch.set_num_threads(max(1, torch.get_num_threads()))
    zm = zoo_classifier(model)
    names = tuple(layer.name for layer in quant_layers(zm.model))
    if names != ARCH_LAYERS[model]:
        raise UserInputError(f"zoo model {model} has layers {names}, expected {ARCH_LAYERS[model]}")
    counts = class_counts(class_scores(zm.model, zm.loader("train")), quantile)
    return zm, tuple(class_groups(zm.model, counts, 2))


class QuantOptions(ProblemOptions):
    """Options of the ``quant`` problem."""

    model: Literal["cnn-digits", "cnn-mnist5k-small"] = config_field(QuantConfig, "model")
    finetune_epochs: int = config_field(QuantConfig, "search_finetune_epochs")
    seed: int = config_field(QuantConfig, "seed")


class QuantProblem(LevelProblem):
    """Bits per layer and class-importance group of a zoo classifier (module doc)."""

    name = "quant"
    Options = QuantOptions
    run_group = "model"
    design_label = "bits"
    design_noun = "a bit assignment"
    example_options: ClassVar[Mapping[str, Any]] = {"model": "cnn-digits", "finetune_epochs": 0}
    objectives = (
        Objective("accuracy", "maximize", "%", "expensive", bounds=(0.0, 100.0)),
        Objective("avg_bits", "minimize", "bits/weight", "cheap", depends_on=("model",), bounds=(0.0, 32.0)),
        Objective("model_kbit", "minimize", "kbit", "cheap", depends_on=("model",)),
    )

    def __init__(self, options: QuantOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        self.model: str = self.options.model
        self.params = tuple(f"{layer}_{part}" for layer in ARCH_LAYERS[self.model] for part in PARTS)
        self.levels = dict.fromkeys(self.params, Levels(CANDIDATES))
        self.design_format = (
            "key=value per group, " + " ".join(f"{p}=B" for p in self.params) + f" with B one of {', '.join(map(str, CANDIDATES))}"
        )
        self._cache: dict[Widths, dict[str, float]] = {}

    @property
    def _groups(self) -> tuple[Group, ...]:
        return _setup(self.model, 0.5)[1]

    def _bits(self, point: Widths) -> dict[str, list[int]]:
        from coevo.sim.quant import group_bits

        zm = _setup(self.model, 0.5)[0]
        return group_bits(zm.model, self._groups, point)

    def unit_bits(self, point: Any) -> dict[str, list[int]]:
        """Layer -> the width of each of its units (output filters / neurons) under ``point``, as the evaluation quantizes."""
        return self._bits(tuple(point))

    def layer_bits(self, point: Any) -> dict[str, float]:
        """Layer -> its average weight bits under ``point`` (its groups' widths weighted by their weight counts)."""
        weights: dict[str, float] = {}
        total: dict[str, float] = {}
        by_name = {f"{g.layer}_{g.part}": g for g in self._groups}
        for param, b in zip(self.params, point, strict=True):
            g = by_name.get(param)
            if g is not None:  # a layer too small to split has no rest group
                weights[g.layer] = weights.get(g.layer, 0.0) + g.weights * b
                total[g.layer] = total.get(g.layer, 0.0) + g.weights
        return {layer: weights[layer] / total[layer] for layer in total}

    def niches(self) -> tuple[Niche, ...]:
        return (
            Niche("low", "at most 3 bits per weight on average: the smallest, riskiest models", lambda p: self._avg(p) <= 3),
            Niche("mid", "more than 3 and at most 5 bits per weight on average", lambda p: 3 < self._avg(p) <= 5),
            Niche("high", "more than 5 bits per weight on average: close to INT8", lambda p: self._avg(p) > 5),
        )

    def explain_encoding(self) -> str:
        groups = {g.layer + "_" + g.part: g for g in self._groups}
        sizes = ", ".join(f"{p} {groups[p].weights if p in groups else 0}" for p in self.params)
        return (
            f"A design gives each of the {len(self.params)} unit groups of {self.model} a weight width from "
            f"{', '.join(map(str, CANDIDATES))} bits. Each Conv2d/Linear layer's units (output filters or neurons) are split "
            "by class-based importance (first-order Taylor score per class, on the train split): <layer>_many holds the units "
            "important to at least the layer's median number of classes, <layer>_rest the others. Weights per group: "
            f"{sizes}. It is written as {self.design_format}."
        )

    def evaluate(self, point: Any) -> dict[str, float]:
        widths = tuple(point)
        if widths not in self._cache:
            from coevo.sim.quant import finetune

            zm = _setup(self.model, 0.5)[0]
            seed = self.options.seed
            _, record = finetune(
                zm.model, self._bits(widths), zm.loader("train", shuffle=True, seed=seed), zm.loader("val"),
                epochs=self.options.finetune_epochs, seed=seed,
            )  # fmt: skip
            cheap = self.cheap_values([widths])
            self._cache[widths] = {
                "accuracy": float(record.val_accuracy[record.best_epoch]),
                "avg_bits": float(cheap["avg_bits"][0]),
                "model_kbit": float(cheap["model_kbit"][0]),
            }
        return dict(self._cache[widths])

    def acquisition_bounds(self) -> tuple[float, float]:
        """Accuracy floor 80 % (a useful 10-class digit classifier; a problem constant, no paid value), 8 bits."""
        return 80.0, float(CANDIDATES[-1]) + 1e-9

    def _avg(self, point: Any) -> float:
        total = sum(g.weights for g in self._groups)
        by_name = {f"{g.layer}_{g.part}": g.weights for g in self._groups}
        return sum(by_name.get(p, 0) * b for p, b in zip(self.params, point, strict=True)) / total

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        from coevo.sim.quant import model_bits

        zm = _setup(self.model, 0.5)[0]
        return {
            "avg_bits": np.array([self._avg(p) for p in points], dtype=float),
            "model_kbit": np.array([model_bits(zm.model, self._bits(tuple(p))) / 1000.0 for p in points], dtype=float),
        }
