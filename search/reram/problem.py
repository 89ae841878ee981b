"""ReRAM crossbar fault protection as a coevo problem: maximise accuracy under faults, minimise area.

A point sets the protection of a zoo classifier mapped onto 64x64 crossbars (8-bit weights,
2 bits per cell, differential pairs; :mod:`sim.reram`):

* ``prune_rows`` / ``prune_cols``: fraction of each layer's input rows / output columns pruned
  (0, 0.05, 0.1, 0.2) by row/column scores learned with the model (``prune_method``), freeing
  cells; every design, unpruned included, gets the same ``finetune_epochs`` of training;
* ``dup``: 0/1, duplicate columns into the freed bitlines of the same crossbars;
* ``msb``: 0, 1 or 2 most significant slices copied into each weight's low cells;
* ``spare``: 0, 1, 2 or 4 spare rows and as many spare columns per crossbar (the baseline,
  costing area).

Objectives:

* ``accuracy`` (maximised, expensive): mean validation accuracy (%) over a fixed set of fault
  maps (seeds ``0..fault_maps-1``) at the option's fault rate and SA0:SA1 ratio. Deterministic.
* ``area`` (minimised, cheap): crossbar equivalents the layout reserves: crossbars used (both
  arrays of each pair) times the spare-line area factor ``(64+s)^2 / 64^2``.

Niches: ``zero-space`` (no spare lines) and ``spare`` (spare lines).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

import numpy as np

from coevo.search.errors import UserInputError
from coevo.search.niches import Niche
from coevo.search.problem import LevelProblem, Levels, Objective, ProblemOptions, config_field
from coevo.sim.reram.config import ReramConfig
from coevo.sim.reram.crossbar import parse_ratio

if TYPE_CHECKING:  # torch loads when a design is first mapped, not when the problem is listed
    from coevo.sim.reram import ModelPlan, Protection

LEVELS: dict[str, tuple[Any, ...]] = {
    "prune_rows": (0.0, 0.05, 0.1, 0.2),
    "prune_cols": (0.0, 0.05, 0.1, 0.2),
    "dup": (0, 1),
    "msb": (0, 1, 2),
    "spare": (0, 1, 2, 4),
}
"""Each parameter's values, in order (neighbours are one step apart)."""
PARAMS = tuple(LEVELS)
TABLE = {p: Levels(v, fmt="g") for p, v in LEVELS.items()}
CFG = ReramConfig().crossbar()
Point = tuple[Any, ...]


@functools.cache
def _zoo(model: str) -> Any:
    from coevo.sim.zoo import ZooError, load

    try:
        zm = load(model)
    except ZooError as exc:
        raise UserInputError(str(exc)) from None
    return zm


class ReramOptions(ProblemOptions):
    """Options of the ``reram`` problem."""

    model: Literal["mlp-digits", "cnn-digits"] = config_field(ReramConfig, "model")
    fault_rate: float = config_field(ReramConfig, "fault_rate")
    sa0_sa1: str = config_field(ReramConfig, "sa0_sa1")
    fault_maps: int = config_field(ReramConfig, "search_fault_maps")
    knowledge: Literal["known", "unknown"] = config_field(ReramConfig, "search_knowledge")
    finetune_epochs: int = config_field(ReramConfig, "finetune_epochs")
    prune_method: Literal["learned", "l2"] = config_field(ReramConfig, "prune_method")


class ReramProblem(LevelProblem):
    """Protection of a model on faulty ReRAM crossbars (module doc)."""

    name = "reram"
    Options = ReramOptions
    run_group = "model"
    design_label = "protection"
    design_noun = "a protection setting"
    levels = TABLE
    design_format = "key=value per setting: prune_rows=F prune_cols=F (F one of 0, 0.05, 0.1, 0.2) dup=0|1 msb=0|1|2 spare=0|1|2|4"
    example_options: ClassVar[Mapping[str, Any]] = {"model": "mlp-digits", "fault_maps": 2}
    objectives = (
        Objective("accuracy", "maximize", "%", "expensive", bounds=(0.0, 100.0)),
        Objective("area", "minimize", "crossbars", "cheap", depends_on=("model",), bounds=(0.0, None)),
    )

    def __init__(self, options: ReramOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        if self.options.knowledge == "unknown":
            raise UserInputError(
                "knowledge='unknown' cannot use spare lines (repair needs the fault map); this problem searches them: use 'known'"
            )
        if self.options.prune_method == "learned" and self.options.finetune_epochs < 1:
            # the space prunes (prune_rows/prune_cols above 0): every such design would fail its evaluation, paid for
            raise UserInputError(
                f"finetune_epochs={self.options.finetune_epochs} with prune_method='learned': learned pruning trains its "
                "row/column scores with the model; give finetune_epochs >= 1, or prune_method='l2' (one-shot magnitude pruning)"
            )
        self.sa0_share = parse_ratio(self.options.sa0_sa1)
        self._plans: dict[Point, ModelPlan] = {}
        self._cache: dict[Point, dict[str, float]] = {}
        self._areas: dict[Point, float] = {}

    def protection(self, point: Point) -> Protection:
        """The :class:`sim.reram.Protection` a point sets."""
        from coevo.sim.reram import Protection

        pr, pc, dup, msb, spare = point
        o = self.options
        return Protection(pr, pc, bool(dup), msb, spare, spare, o.knowledge, o.finetune_epochs, o.prune_method)

    def _plan(self, point: Point) -> ModelPlan:
        if point not in self._plans:
            from coevo.sim.reram import prepare

            self._plans[point] = prepare(_zoo(self.options.model), CFG, self.protection(point))
        return self._plans[point]

    def niches(self) -> tuple[Niche, ...]:
        return (
            Niche(
                "zero-space",
                "no spare lines: protection from pruning, duplication and MSB copies within the crossbars",
                lambda p: cast(Point, p)[4] == 0,
            ),
            Niche("spare", "spare rows and columns per crossbar replace faulty lines, at an area cost", lambda p: cast(Point, p)[4] > 0),
        )

    def explain_encoding(self) -> str:
        return (
            f"A design protects {self.options.model} mapped on {CFG.rows}x{CFG.cols} ReRAM crossbars ({CFG.weight_bits}-bit weights, "
            f"{CFG.bits_per_cell} bits per cell, differential pairs) against stuck-at faults: prune_rows/prune_cols prune that "
            f"fraction of each layer's input rows/output columns ({self.options.prune_method} pruning, every design trained "
            f"{self.options.finetune_epochs} epochs), freeing cells; dup=1 fills freed bitlines with copies of the columns "
            f"the fault map hurts most ({self.options.knowledge} maps); msb copies the top 1-2 two-bit slices of each weight into its low "
            "cells (precision drops by 2 bits per slice); spare adds that many spare rows and columns to every crossbar (area "
            f"grows). Accuracy is the mean val accuracy over {self.options.fault_maps} fault maps at {self.options.fault_rate:g} "
            f"fault rate, SA0:SA1 {self.options.sa0_sa1}. Written as {self.design_format}."
        )

    def evaluate(self, point: Any) -> dict[str, float]:
        point = tuple(point)
        if point not in self._cache:
            from coevo.sim.reram import evaluate_under_faults

            zm = _zoo(self.options.model)
            plan = self._plan(point)
            values, _ = evaluate_under_faults(
                plan, lambda m: zm.evaluate(m, "val"), self.options.fault_rate, self.sa0_share, range(self.options.fault_maps)
            )
            self._cache[point] = {"accuracy": float(np.mean(values)), "area": self._area(point)}
        return dict(self._cache[point])

    def acquisition_bounds(self) -> tuple[float, float]:
        """Accuracy floor 80 % (a useful 10-class digit classifier), area of the unpruned model with the most spares."""
        from coevo.sim.reram import Protection, crossbars_needed

        need = crossbars_needed(_zoo(self.options.model).model, CFG)
        return 80.0, need * Protection(spare_rows=4, spare_cols=4).area_factor(CFG) + 1e-9

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"area": np.array([self._area(tuple(p)) for p in points], dtype=float)}

    def _area(self, point: Point) -> float:
        # from the layout's line counts: planning the pruned model (learned pruning trains it) took minutes per niche
        # before the first paid evaluation
        if point not in self._areas:
            from coevo.sim.reram import layout_area

            self._areas[point] = float(layout_area(_zoo(self.options.model).model, CFG, self.protection(point)))
        return self._areas[point]
