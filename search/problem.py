"""The Problem contract: a design space plus named objectives, shared by every search.

A problem maps design points to and from Optuna parameters (so any Optuna sampler, and the
co-evolution engine through ``enqueue_trial``, can drive it), gives each point a stable id,
and evaluates objectives. Problems whose whole space is known also give the exact front.
"""

from __future__ import annotations

import random
import re
from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import optuna

from search.errors import UserInputError
from search.metrics import FrontReference

Point = Hashable
"""A design point; each problem documents its concrete type."""


@dataclass(frozen=True)
class Objective:
    """A named objective.

    Attributes:
        name: identifier used in studies and reports, e.g. ``accuracy``.
        direction: ``maximize`` or ``minimize``.
        unit: unit of the value, e.g. ``%`` or ``ms``.
        cost: ``expensive`` objectives count against the search budget (they stand for
            training or a long simulation); ``cheap`` ones are free lookups/predictions.
    """

    name: str
    direction: Literal["maximize", "minimize"]
    unit: str
    cost: Literal["cheap", "expensive"]


class Problem(ABC):
    """A design space with objectives.

    Contract for implementations:

    * :meth:`spec` identifies the problem; a study created for one spec is never resumed
      for another.
    * :meth:`suggest` must only use ``trial.suggest_*`` with the parameter names and
      choices of :meth:`distributions`, so enqueued proposals and samplers agree.
    * :meth:`evaluate` is deterministic for a point; callers cache by :meth:`point_id`.
    * The first objective of :attr:`front_objectives` is maximised, the second minimised;
      :meth:`reference` returns their exact true front when the whole space is known.
    """

    name: str
    objectives: tuple[Objective, ...]
    design_label: str = "design"
    """Key under which :meth:`describe` output appears in reports and JSON."""
    design_format: str = ""
    """How :meth:`describe` writes a design, for prompts (what :meth:`parse_design` reads)."""
    found_set: Literal["all", "front"] = "all"
    """What a search is scored on: every evaluated point (query mode) or only the final
    front under the objectives as evaluated (zero-cost mode), re-scored by :meth:`true_values`."""

    @abstractmethod
    def spec(self) -> dict[str, Any]:
        """JSON-serialisable identity of the problem (name and options)."""

    @abstractmethod
    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        """Optuna distributions of the parameters that encode a point."""

    @abstractmethod
    def from_params(self, params: Mapping[str, Any]) -> Point:
        """Decode Optuna parameters into a point (raises ``UserInputError`` if invalid)."""

    @abstractmethod
    def to_params(self, point: Point) -> dict[str, Any]:
        """Encode a point as Optuna parameters (inverse of :meth:`from_params`)."""

    @abstractmethod
    def point_id(self, point: Point) -> str:
        """Stable id of a point (the same across runs and machines)."""

    @abstractmethod
    def describe(self, point: Point) -> str:
        """Human-readable form of a point (e.g. an NB201 arch string)."""

    @abstractmethod
    def evaluate(self, point: Point) -> dict[str, float]:
        """Values of every objective at ``point``, keyed by objective name."""

    def explain_encoding(self) -> str:
        """What the parameters of a design mean, in words for reports; override with the problem's own.

        The default is built from :meth:`distributions` (parameters with the same choices
        are listed together) and :attr:`design_format`.
        """
        groups: dict[str, list[str]] = {}
        for name, dist in self.distributions().items():
            groups.setdefault(_choices_text(dist), []).append(name)
        listed = "; ".join(f"{', '.join(names)} ({'each ' if len(names) > 1 else ''}{choices})" for choices, names in groups.items())
        n = sum(len(names) for names in groups.values())
        text = f"A design is set by {n} parameter{'s' if n != 1 else ''}: {listed}."
        return f"{text} It is written as {self.design_format.rstrip('.')}." if self.design_format else text

    def acquisition_bounds(self) -> tuple[float, float] | None:
        """(floor of the maximised objective, reference of the minimised one) for acquisition
        functions during a search. Must be built from information a search may use (no
        expensive objective of unpaid points); None when the problem has none."""
        return None

    def true_values(self, point: Any) -> dict[str, float]:
        """Values used to score a search afterwards (the evaluated values unless estimated)."""
        return self.evaluate(point)

    def parse_design(self, text: str) -> Point:
        """Inverse of :meth:`describe` (raises ``UserInputError`` saying what is wrong)."""
        raise UserInputError(f"problem {self.name} cannot read designs from text")

    @property
    def front_objectives(self) -> tuple[str, str]:
        """(maximised, minimised) objective names used by the Pareto metrics."""
        return (self.objectives[0].name, self.objectives[1].name)

    def reference(self) -> FrontReference | None:
        """The exact front of the whole space, or None where it is unknown."""
        return None

    def suggest(self, trial: optuna.Trial) -> Point:
        """Sample a point through ``trial`` (used by Optuna samplers)."""
        params = {name: _suggest(trial, name, dist) for name, dist in self.distributions().items()}
        return self.from_params(params)

    @property
    def directions(self) -> list[Literal["maximize", "minimize"]]:
        """Optuna study directions, in objective order."""
        return [o.direction for o in self.objectives]

    @property
    def expensive(self) -> tuple[str, ...]:
        """Names of the objectives that count against the budget."""
        return tuple(o.name for o in self.objectives if o.cost == "expensive")


def _suggest(trial: optuna.Trial, name: str, dist: optuna.distributions.BaseDistribution) -> Any:
    """Call the public ``suggest_*`` matching ``dist``."""
    if isinstance(dist, optuna.distributions.CategoricalDistribution):
        return trial.suggest_categorical(name, dist.choices)
    if isinstance(dist, optuna.distributions.IntDistribution):
        return trial.suggest_int(name, dist.low, dist.high, step=dist.step, log=dist.log)
    if isinstance(dist, optuna.distributions.FloatDistribution):
        return trial.suggest_float(name, dist.low, dist.high, step=dist.step, log=dist.log)
    raise TypeError(f"unsupported distribution for {name!r}: {dist!r}")


def _choices_text(dist: optuna.distributions.BaseDistribution) -> str:
    """The values a distribution allows, in words."""
    if isinstance(dist, optuna.distributions.CategoricalDistribution):
        return "one of " + ", ".join(str(c) for c in dist.choices)
    if isinstance(dist, optuna.distributions.IntDistribution | optuna.distributions.FloatDistribution):
        kind = "an integer" if isinstance(dist, optuna.distributions.IntDistribution) else "a number"
        step = f" in steps of {dist.step}" if dist.step not in (None, 1) else ""
        return f"{kind} from {dist.low} to {dist.high}{step}{' (log scale)' if dist.log else ''}"
    return repr(dist)


KEY_VALUE = re.compile(r"([a-z0-9_]+)\s*=\s*([\w.\-]+)")
"""``key=value`` pairs as :func:`read_key_values` reads them."""


def read_key_values(problem: Problem, text: str, what: str) -> tuple[Point, dict[str, str]]:
    """Parse ``key=value`` pairs (the form ``describe`` writes) into a point through ``from_params``.

    Returns:
        the point and the pairs as read (for checks of derived keys).

    Raises:
        UserInputError: naming what could not be read and the expected format.
    """
    pairs = dict(KEY_VALUE.findall(text))
    try:
        return problem.from_params(pairs), pairs
    except UserInputError as exc:
        raise UserInputError(f"cannot read {text!r} as {what}: {exc}; format: {problem.design_format}") from None


class Evolvable(ABC):
    """Operators the co-evolution engine needs from a problem (mixin for :class:`Problem`).

    Contract: every method is deterministic given its arguments (and ``rng``); none
    evaluates an expensive objective.
    """

    @abstractmethod
    def neighbours(self, point: Any) -> list[Any]:
        """Every point one elementary mutation away."""

    @abstractmethod
    def crossover(self, a: Point, b: Point, rng: random.Random) -> Point:
        """A child of two points."""

    @abstractmethod
    def random_point(self, rng: random.Random) -> Point:
        """A uniformly random point of the space."""

    @abstractmethod
    def features(self, points: Sequence[Point]) -> np.ndarray:
        """(n, d) numeric encoding for surrogate models."""

    @abstractmethod
    def cheap_values(self, points: Sequence[Point]) -> dict[str, np.ndarray]:
        """Cheap objectives (free lookups/predictions) of many points, by objective name."""
