"""SteppingNet MAC split as a coevo problem: accurate subnets at every step, and a cheap first step.

A point sets the MAC split of a four-step SteppingNet on a zoo CNN classifier (:mod:`sim.stepping`):
``first``, the first step's share of the full model's MACs, ``gap1`` and ``gap2``, the MAC shares
the second and third steps add (the fourth step is the full budget, 1.0), and ``distill``
(1: the smaller steps also learn from the largest one's softmax). Objectives:

* ``mean_accuracy`` (maximised, expensive): validation accuracy (%) averaged over the four steps,
  after joint training for ``epochs`` epochs with the option ``assign``'s assignment of units to
  steps (importance-driven by default; deterministic per seed; cached on disk by
  :func:`sim.stepping.build`).
* ``smallest_kmac`` (minimised, cheap): MACs per image (thousands) of the first step as built
  (the integer widths' achieved MACs, not the target): the least a device must spend to get an answer.
* ``smallest_accuracy`` (maximised, expensive, reported): validation accuracy of the first step.

Niches split the space by the first step's share: ``small`` (<= 0.1), ``medium`` (0.15-0.2),
``large`` (>= 0.25). The space has 7 x 6 x 6 x 2 = 504 points; each costs a training, so the
exact front is unknown.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, cast

import numpy as np

from coevo.search.niches import Niche
from coevo.search.problem import LevelProblem, Levels, Objective, ProblemOptions, config_field
from coevo.sim.stepping import StepPlan, plan  # sim.stepping._plan only: no torch
from coevo.sim.stepping.config import SteppingConfig

FIRST: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35)
"""Shares of the full MACs the first step may take."""
GAPS: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3)
"""Shares the second and third steps may add (the largest split, 0.35 + 0.3 + 0.3, stays below the full 1.0)."""
LEVELS: dict[str, tuple[float, ...]] = {"first": FIRST, "gap1": GAPS, "gap2": GAPS, "distill": (0.0, 1.0)}
PARAMS = tuple(LEVELS)
TABLE = {
    **{p: Levels(LEVELS[p], fmt="g") for p in PARAMS[:3]},
    "distill": Levels((0, 1), choices=LEVELS["distill"], fmt="g"),  # a point holds 0/1; studies store 0.0/1.0
}
Split = tuple[float, float, float, int]


def fractions_of(point: Split) -> tuple[float, float, float, float]:
    """The four steps' MAC fractions of a point (rounded to 4 decimals so equal splits give equal cache keys)."""
    first, gap1, gap2, _ = point
    return round(first, 4), round(first + gap1, 4), round(first + gap1 + gap2, 4), 1.0


@functools.cache
def _plan(model: str, fractions: tuple[float, ...]) -> StepPlan:
    from coevo.sim.stepping import zoo_setup

    return plan(zoo_setup(model)[1], fractions)


class SteppingOptions(ProblemOptions):
    """Options of the ``stepping`` problem."""

    model: Literal["cnn-digits", "cnn-mnist5k"] = config_field(SteppingConfig, "model")
    epochs: int = config_field(SteppingConfig, "search_epochs")
    seed: int = config_field(SteppingConfig, "seed")
    assign: Literal["importance", "index"] = config_field(SteppingConfig, "assign")


class SteppingProblem(LevelProblem):
    """MAC split of a four-step SteppingNet, and distillation on/off (module doc)."""

    name = "stepping"
    Options = SteppingOptions
    run_group = "model"
    design_label = "split"
    design_noun = "a stepping MAC split"
    levels = TABLE
    design_format = (
        "first=F gap1=G gap2=H distill=D with F one of "
        + ", ".join(map(str, FIRST))
        + "; G, H one of "
        + ", ".join(map(str, GAPS))
        + "; D 0 or 1 (steps at F, F+G, F+G+H, 1.0 of the full MACs)"
    )
    example_options: ClassVar[Mapping[str, Any]] = {"model": "cnn-digits", "epochs": 1}
    objectives = (
        Objective("mean_accuracy", "maximize", "%", "expensive", bounds=(0.0, 100.0)),
        Objective("smallest_kmac", "minimize", "kMAC", "cheap", depends_on=("model",), bounds=(0.0, None)),
        Objective("smallest_accuracy", "maximize", "%", "expensive", bounds=(0.0, 100.0)),
    )

    def __init__(self, options: SteppingOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        self.model: str = self.options.model
        self.full_macs = _plan(self.model, (1.0,)).full_macs

    def niches(self) -> tuple[Niche, ...]:
        return (
            Niche(
                "small",
                "first step at most 0.1 of the full MACs: cheapest first answer, least accurate",
                lambda p: cast(Split, p)[0] <= 0.1,
            ),
            Niche("medium", "first step 0.15 to 0.2 of the full MACs", lambda p: 0.1 < cast(Split, p)[0] <= 0.2),
            Niche("large", "first step 0.25 or more of the full MACs: accurate first answer, costlier", lambda p: cast(Split, p)[0] > 0.2),
        )

    def explain_encoding(self) -> str:
        return (
            f"A design sets the MAC split of a four-step SteppingNet on {self.model} ({self.full_macs} MACs per image at "
            "full width): the first step takes `first` of the full MACs, the second adds `gap1`, the third `gap2`, the "
            "fourth is the full 1.0. Every layer's units are split into step groups; larger steps reuse the smaller "
            "steps' activations. distill=1 trains the smaller steps also on the largest step's softmax. "
            f"It is written as {self.design_format}."
        )

    def evaluate(self, point: Any) -> dict[str, float]:
        from coevo.sim.stepping import build

        split = tuple(point)
        fractions = fractions_of(cast(Split, split))
        b = build(
            self.model,
            fractions,
            kind="stepping",
            epochs=self.options.epochs,
            seed=self.options.seed,
            distill=bool(split[3]),
            assign=self.options.assign,
        )
        return {
            "mean_accuracy": float(sum(b.val_accuracy) / len(b.val_accuracy)),
            "smallest_kmac": float(self.cheap_values([split])["smallest_kmac"][0]),
            "smallest_accuracy": float(b.val_accuracy[0]),
        }

    def acquisition_bounds(self) -> tuple[float, float]:
        """Accuracy floor 50 % (well above chance for 10 classes; a problem constant), the largest first step's MACs."""
        return 50.0, FIRST[-1] * self.full_macs / 1000.0 + 1e-9

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"smallest_kmac": np.array([_plan(self.model, fractions_of(tuple(p))).macs(0) / 1000.0 for p in points], dtype=float)}
