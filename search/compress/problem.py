"""Energy-aware layer-wise compression as a coevo problem: maximise accuracy, minimise energy per inference.

A point gives each layer of a zoo CNN (:mod:`sim.accel.compress`: ``cnn-digits`` or
``cnn-mnist5k``, layers conv1-conv3, fc1, fc2) how many of its lowest-energy INT8 weight values
it may use (256: plain INT8): one restriction step from the INT8 QAT model, with the energy
tables measured on that model. Objectives:

* ``accuracy`` (maximised, expensive): **validation** accuracy after quantization-aware
  training under the restriction (deterministic per seed). The search chooses on it, so it is
  never the test split.
* ``energy_ratio`` (minimised, cheap): energy per inference of the INT8 model's weights
  projected onto the allowed values, relative to plain INT8 (:mod:`sim.accel.energy`'s tables),
  in the scope ``energy_scope`` names: ``total`` (compute + SRAM + DRAM of the systolic mapping,
  the default), ``on_chip`` (compute + SRAM) or ``compute`` (MAC energy only). Memory does not
  change with the weights, so the wider the scope, the closer the ratio stays to 1.

The space has 7^5 = 16,807 points, each needing a QAT run, so the exact front is unknown
(:meth:`reference` is None).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, cast

import numpy as np
import optuna
from pydantic import AliasChoices, Field

from coevo.search.errors import UserInputError
from coevo.search.niches import Niche
from coevo.search.problem import (
    Evolvable,
    Objective,
    Problem,
    ProblemOptions,
    config_field,
    level_neighbours,
    read_key_values,
    uniform_crossover,
)
from coevo.sim.accel.config import LEVELS, AccelConfig

LAYERS = ("conv1", "conv2", "conv3", "fc1", "fc2")
"""The restricted layers of both zoo CNNs (checked against the model when the problem is made)."""
Levels = tuple[int, ...]


def depth_niches() -> tuple[Niche, ...]:
    """Restrictions by how many value bits they remove in all (sum over layers of log2(256 / K))."""

    def removed(point: Any) -> float:
        return sum(math.log2(256 / k) for k in point)

    return (
        Niche("light", "light restrictions: at most 4 value bits removed over all layers (closest to INT8)", lambda p: removed(p) <= 4),
        Niche("medium", "5-10 value bits removed over all layers", lambda p: 4 < removed(p) <= 10),
        Niche("heavy", "more than 10 value bits removed: the lowest-energy, riskiest restrictions", lambda p: removed(p) > 10),
    )


class CompressOptions(ProblemOptions):
    """Options of the ``compress`` problem."""

    model: Literal["cnn-digits", "cnn-mnist5k"] = config_field(
        AccelConfig,
        "model",
        description="the zoo model to compress: cnn-digits (8x8 scikit-learn digits) or cnn-mnist5k (5,000 MNIST images)",
    )
    energy_scope: Literal["total", "on_chip", "compute"] = config_field(AccelConfig, "energy_scope")
    train_seed: Annotated[int, Field(validation_alias=AliasChoices("train_seed", "seed"))] = config_field(
        AccelConfig,
        "seed",
        description="seed of the model's training and of quantization-aware training",
    )  # "seed" in studies made before coevo 0.2


class CompressProblem(Problem, Evolvable):
    """Per-layer allowed-value counts of a zoo CNN (module doc)."""

    name = "compress"
    Options = CompressOptions
    run_group = "model"
    design_label = "restriction"
    objectives = (
        Objective("accuracy", "maximize", "%", "expensive", bounds=(0.0, 100.0)),
        Objective("energy_ratio", "minimize", "x INT8", "cheap", depends_on=("model", "energy_scope")),
    )
    design_format = "key=value per layer, " + " ".join(f"{n}=K" for n in LAYERS) + f" with K one of {', '.join(map(str, LEVELS))}"

    def __init__(self, options: CompressOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        self.model: str = self.options.model
        self.seed: int = self.options.train_seed
        self.energy_scope: str = self.options.energy_scope
        self._cache: dict[Levels, dict[str, float]] = {}

    @property
    def _comp(self) -> Any:
        from coevo.sim.accel.compress import compressor  # torch: loaded on first use, not when the problem is listed

        comp = compressor(self.model, self.seed)  # trained on first use, then shared in the process
        if tuple(comp.layers) != LAYERS:
            raise UserInputError(f"model {self.model} has layers {comp.layers}, not the problem's {LAYERS}")
        return comp

    def niches(self) -> tuple[Niche, ...]:
        return depth_niches()

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        return {n: optuna.distributions.CategoricalDistribution(LEVELS) for n in LAYERS}

    def from_params(self, params: Mapping[str, Any]) -> Levels:
        try:
            levels = tuple(int(params[n]) for n in LAYERS)
        except (KeyError, TypeError, ValueError) as exc:
            raise UserInputError(f"compress params need {', '.join(LAYERS)}; got {dict(params)!r}") from exc
        bad = [f"{n}={k}" for n, k in zip(LAYERS, levels, strict=True) if k not in LEVELS]
        if bad:
            raise UserInputError(f"{', '.join(bad)} outside the space; K is one of {', '.join(map(str, LEVELS))}")
        return levels

    def to_params(self, point: Any) -> dict[str, Any]:
        return dict(zip(LAYERS, point, strict=True))

    def point_id(self, point: Any) -> str:
        return "-".join(map(str, point))

    def describe(self, point: Any) -> str:
        return " ".join(f"{n}={k}" for n, k in zip(LAYERS, point, strict=True))

    def parse_design(self, text: str) -> Levels:
        """Read ``layer=K`` pairs as :meth:`describe` writes them."""
        return cast(Levels, read_key_values(self, text, "a restriction")[0])  # from_params returns Levels

    def evaluate(self, point: Any) -> dict[str, float]:
        levels = tuple(point)
        if levels not in self._cache:
            result = self._comp.evaluate(dict(zip(LAYERS, levels, strict=True)), "search")
            energy = float(self.cheap_values([levels])["energy_ratio"][0])
            self._cache[levels] = {"accuracy": result.val_accuracy, "energy_ratio": energy}
        return dict(self._cache[levels])

    def acquisition_bounds(self) -> tuple[float, float]:
        return 0.0, 1.0 + 1e-9

    # ---- operators for the co-evolution engine (Evolvable)

    def neighbours(self, point: Any) -> list[Levels]:
        return level_neighbours(point, LEVELS)

    def crossover(self, a: Any, b: Any, rng: random.Random) -> Levels:
        return uniform_crossover(a, b, rng)

    def random_point(self, rng: random.Random) -> Levels:
        return tuple(rng.choice(LEVELS) for _ in LAYERS)

    def features(self, points: Sequence[Any]) -> np.ndarray:
        """log2(256 / K) per layer (values removed, in bits)."""
        return np.array([[math.log2(256 / k) for k in p] for p in points], dtype=float).reshape(len(points), len(LAYERS))

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        comp = self._comp
        # the projection is a total (compute + SRAM + DRAM); narrower scopes take out the memory they leave out
        left_out = {"total": 0.0, "on_chip": sum(comp.memory_pj.values()) - sum(comp.sram_pj.values())}
        memory = left_out.get(self.energy_scope, sum(comp.memory_pj.values()))
        base = comp.int8_projected_energy - memory
        return {"energy_ratio": np.array([(comp.projected_energy(dict(zip(LAYERS, p, strict=True))) - memory) / base for p in points])}
