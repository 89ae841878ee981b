"""Problems composed from existing ones: the product of their design spaces, their evaluations chained.

A :class:`ComposedProblem` is built from **parts** (:class:`Part`), each an existing
:class:`~search.problem.Evolvable` problem used as it is (its encoding, operators, niches and
evaluation are not copied). The composition declares what any problem declares (name,
options, objectives with their costs), says which parts to build (:meth:`ComposedProblem.parts`)
and how their results make its objective values (:meth:`ComposedProblem.values`):

* **design**: a point is the tuple of the parts' points, in part order; the Optuna parameters
  are the union of the parts' (two parts may not share a parameter name); point ids join the
  parts' ids with ``/``; a design is written as ``key: <the part's own form>`` per part, joined
  by ``" ; "``;
* **constraints**: a part keeps its own (a :class:`~search.problem.LevelProblem`'s
  ``violation``); :meth:`ComposedProblem.violation` is the hook for constraints *between*
  parts (a weight buffer that must hold the network's largest layer);
* **evaluation chains the parts**: each part may have a ``stage`` that turns its point, and
  what the part before it produced, into what it hands on (a network's layer shapes and bit
  widths, then the accelerator's latency and energy on them). ``produces`` and ``consumes``
  declare the types handed on, and are checked when the problem is built: a part whose input
  is not what the part before it produces is refused in one line;
* **operators**: a neighbour changes one part's point by one of that part's own mutations; a
  crossover crosses each part with its own operator; features are the parts' features side by
  side; cheap values run the chain (stages must be cheap) and never an expensive objective;
* **niches**: those of one part, or the product of several parts' niches
  (:attr:`ComposedProblem.niche_parts`).

``search/nb201_accel/problem.py`` is the built-in example (an NB201 cell x a systolic-array
accelerator); ``docs/compose.md`` composes one in a single user file.
"""

from __future__ import annotations

import functools
import itertools
import random
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import optuna

from coevo.search.errors import UserInputError
from coevo.search.niches import Niche
from coevo.search.problem import Evolvable, Predictable, Problem

SEPARATOR = " ; "
"""Between the parts of a written design (no part's own form may contain it)."""
ID_SEPARATOR = "/"
"""Between the parts' point ids."""


@dataclass(frozen=True)
class Part:
    """One part of a composition.

    Attributes:
        key: its name in the composition (``cell``, ``accel``): designs and niche ids use it.
        problem: the part, an :class:`~search.problem.Evolvable` problem, used as it is.
        stage: ``(the part's point, what the previous part produced) -> what this part hands on``
            (None: the part hands nothing on and needs nothing). Called for cheap values too, so
            it must not evaluate an expensive objective.
        consumes: the type this part's stage needs from the previous part's (None: nothing).
        produces: the type its stage returns (None: nothing).
    """

    key: str
    problem: Problem
    stage: Callable[[Any, Any], Any] | None = None
    consumes: type | None = None
    produces: type | None = None


def _type_name(t: type | None) -> str:
    return "nothing" if t is None else t.__name__


def check_parts(name: str, parts: Sequence[Part]) -> None:
    """Refuse a composition that cannot work, in one line naming what is wrong.

    Raises:
        UserInputError: fewer than two parts, repeated keys, a part that is not Evolvable, two
            parts sharing a parameter name, or a part whose input is not what the part before it produces.
    """
    head = f"composition {name!r}"
    if len(parts) < 2:
        raise UserInputError(f"{head}: compose at least two parts, got {len(parts)}")
    keys = [p.key for p in parts]
    if len(set(keys)) != len(keys) or any(not k or SEPARATOR.strip() in k or ":" in k for k in keys):
        raise UserInputError(f"{head}: part keys must be distinct words without ':' or ';', got {keys}")
    owner: dict[str, str] = {}
    for part in parts:
        if not isinstance(part.problem, Evolvable):
            raise UserInputError(
                f"{head}: part {part.key!r} ({type(part.problem).__name__}) is not Evolvable: it has no operators to search with"
            )
        for param in part.problem.distributions():
            if param in owner:
                raise UserInputError(
                    f"{head}: parts {owner[param]!r} and {part.key!r} share the parameter {param!r}; a joint design needs distinct names"
                )
            owner[param] = part.key
    previous: type | None = None
    for part in parts:
        if part.consumes is not None and (previous is None or not issubclass(previous, part.consumes)):
            raise UserInputError(
                f"{head}: part {part.key!r} needs {_type_name(part.consumes)} but the part before it produces {_type_name(previous)}"
            )
        previous = part.produces if part.stage is not None else None


class ComposedProblem(Problem, Evolvable):
    """A problem whose design is the product of its parts' (module doc).

    A subclass declares ``name``, ``Options``, ``objectives`` (and anything else of
    :class:`~search.problem.Problem`) and implements :meth:`parts` and :meth:`values`.
    """

    niche_parts: ClassVar[tuple[str, ...] | None] = None
    """Keys of the parts whose niches partition the joint space (their product when several); None: the first part's."""

    def __init__(self, options: Any = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        self._parts: tuple[Part, ...] = tuple(self.parts())
        check_parts(self.name, self._parts)
        self._index = {p.key: i for i, p in enumerate(self._parts)}
        unknown = [k for k in self.niche_parts or () if k not in self._index]
        if unknown:
            raise UserInputError(
                f"composition {self.name!r}: niche_parts names no part {', '.join(unknown)}; parts: {', '.join(self._index)}"
            )
        self.design_format = SEPARATOR.join(f"{part.key}: {part.problem.design_format or 'its design'}" for part in self._parts)
        # the engine asks for the same points' chains, parameters and neighbours again and again (a reasoner
        # weighs every neighbour of every elite by its parameters): each is computed once per point
        self._chain_cache: Callable[[Any], dict[str, Any]] = functools.lru_cache(maxsize=1 << 14)(self._chain)
        self._params_cache: Callable[[Any], dict[str, Any]] = functools.lru_cache(maxsize=1 << 16)(self._to_params)
        self._neighbours_cache: Callable[[Any], list[Any]] = functools.lru_cache(maxsize=1 << 12)(self._neighbours)

    def __reduce__(self) -> tuple[type, tuple[Any]]:
        # rebuilt from its options: the parts' stages may be closures and the caches are per process
        return (type(self), (self.options,))

    # ---- what a composition declares

    @abstractmethod
    def parts(self) -> Sequence[Part]:
        """The parts, in chain order (built from the options)."""

    @abstractmethod
    def values(self, point: tuple[Any, ...], outputs: Mapping[str, Any], *, cheap_only: bool) -> dict[str, float]:
        """Objective values of ``point`` from what each part's stage produced (``outputs``, by part key).

        With ``cheap_only`` only the cheap objectives are asked for, and nothing expensive may be evaluated.
        """

    def violation(self, point: tuple[Any, ...]) -> str | None:
        """Why ``point`` breaks a constraint between parts, or None (default: no such constraint). Cheap and deterministic."""
        return None

    # ---- the parts

    @property
    def part_list(self) -> tuple[Part, ...]:
        """The parts, in order."""
        return self._parts

    def part(self, key: str) -> Part:
        """The part named ``key``."""
        return self._parts[self._index[key]]

    def subpoint(self, point: tuple[Any, ...], key: str) -> Any:
        """The point of part ``key`` within a joint ``point``."""
        return point[self._index[key]]

    def chain(self, point: tuple[Any, ...]) -> dict[str, Any]:
        """What each part's stage produced for ``point``, by part key (cached by point)."""
        return self._chain_cache(point)

    def _chain(self, point: tuple[Any, ...]) -> dict[str, Any]:
        outputs: dict[str, Any] = {}
        handed: Any = None
        for part, sub in zip(self._parts, point, strict=True):
            if part.stage is None:
                handed = None
                continue
            handed = part.stage(sub, handed)
            if part.produces is not None and not isinstance(handed, part.produces):
                raise UserInputError(
                    f"composition {self.name!r}: part {part.key!r} should produce {part.produces.__name__}, "
                    f"its stage returned {type(handed).__name__}"
                )
            outputs[part.key] = handed
        return outputs

    # ---- the encoding

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        return {name: d for part in self._parts for name, d in part.problem.distributions().items()}

    def from_params(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        """Each part reads its own parameters; a point that breaks a constraint between parts is refused."""
        point = tuple(p.problem.from_params({k: params[k] for k in p.problem.distributions() if k in params}) for p in self._parts)
        why = self.violation(point)
        if why is not None:
            raise UserInputError(f"{self.describe(point)} is outside the space: {why}")
        return point

    def to_params(self, point: Any) -> dict[str, Any]:
        return dict(self._params_cache(tuple(point)))  # a copy: callers may change it

    def _to_params(self, point: tuple[Any, ...]) -> dict[str, Any]:
        return {k: v for part, sub in zip(self._parts, point, strict=True) for k, v in part.problem.to_params(sub).items()}

    def point_id(self, point: Any) -> str:
        return ID_SEPARATOR.join(part.problem.point_id(sub) for part, sub in zip(self._parts, point, strict=True))

    def describe(self, point: Any) -> str:
        return SEPARATOR.join(f"{part.key}: {part.problem.describe(sub)}" for part, sub in zip(self._parts, point, strict=True))

    def parse_design(self, text: str) -> tuple[Any, ...]:
        """Read a design as :meth:`describe` writes it (each part's own form after its key).

        Raises:
            UserInputError: a part missing, or a part's design that the part cannot read.
        """
        pieces = [s.strip() for s in text.split(SEPARATOR.strip())]
        found: dict[str, str] = {}
        for piece in pieces:
            key, sep, rest = piece.partition(":")
            if sep and key.strip() in self._index:
                found[key.strip()] = rest.strip()
        missing = [p.key for p in self._parts if p.key not in found]
        if missing:
            raise UserInputError(f"cannot read {text!r}: no part {', '.join(missing)}; format: {self.design_format}")
        point = tuple(p.problem.parse_design(found[p.key]) for p in self._parts)
        why = self.violation(point)
        if why is not None:
            raise UserInputError(f"{text!r} is outside the space: {why}")
        return point

    def explain_encoding(self) -> str:
        return f"A design joins {len(self._parts)} parts, written {self.design_format}. " + " ".join(
            f"Part {part.key}: {part.problem.explain_encoding()}" for part in self._parts
        )

    # ---- evaluation

    def evaluate(self, point: Any) -> dict[str, float]:
        values = self.values(point, self.chain(point), cheap_only=False)
        return {o.name: float(values[o.name]) for o in self.objectives}

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        cheap = [o.name for o in self.objectives if o.cost == "cheap"]
        rows = [self.values(p, self.chain(p), cheap_only=True) for p in points]
        return {name: np.array([float(r[name]) for r in rows], dtype=float) for name in cheap}

    # ---- niches

    def niches(self) -> tuple[Niche, ...]:
        """The niches of :attr:`niche_parts` (the first part's by default); of several parts, their product."""
        keys = self.niche_parts or (self._parts[0].key,)
        per_part = [(self._index[k], self.part(k).problem.niches()) for k in keys]
        if len(per_part) == 1:
            i, niches = per_part[0]
            return tuple(Niche(n.id, n.description, _within(i, n.contains)) for n in niches)
        out = []
        for combo in itertools.product(*(niches for _, niches in per_part)):
            ids = [i for i, _ in per_part]
            out.append(
                Niche(
                    "*".join(n.id for n in combo),
                    "; ".join(f"{k}: {n.description}" for k, n in zip(keys, combo, strict=True)),
                    _all_within(ids, [n.contains for n in combo]),
                )
            )
        return tuple(out)

    # ---- operators (Evolvable)

    def neighbours(self, point: Any) -> list[Any]:
        """Every point with one part moved by one of that part's mutations (and no constraint between parts broken)."""
        return list(self._neighbours_cache(tuple(point)))  # a copy: callers may change it

    def _neighbours(self, point: tuple[Any, ...]) -> list[Any]:
        out = []
        for i, part in enumerate(self._parts):
            for moved in part.problem.neighbours(point[i]):  # type: ignore[attr-defined]
                candidate = (*point[:i], moved, *point[i + 1 :])
                if self.violation(candidate) is None:
                    out.append(candidate)
        return out

    def crossover(self, a: Any, b: Any, rng: random.Random) -> Any:
        """Each part crossed by its own operator; redrawn (at most 16 times, then ``a``) while a constraint between parts refuses it."""
        for _ in range(16):
            child = tuple(part.problem.crossover(x, y, rng) for part, x, y in zip(self._parts, a, b, strict=True))  # type: ignore[attr-defined]
            if self.violation(child) is None:
                return child
        return tuple(a)

    def random_point(self, rng: random.Random) -> Any:
        """Each part's random point (rejection sampling under :meth:`violation`).

        Raises:
            RuntimeError: 1000 draws in a row broke the constraints between parts.
        """
        for _ in range(1000):
            point = tuple(part.problem.random_point(rng) for part in self._parts)  # type: ignore[attr-defined]
            if self.violation(point) is None:
                return point
        raise RuntimeError(f"problem {self.name}: 1000 random points in a row broke the constraints between its parts")

    def features(self, points: Sequence[Any]) -> np.ndarray:
        """The parts' features side by side."""
        blocks = [part.problem.features([p[i] for p in points]) for i, part in enumerate(self._parts)]  # type: ignore[attr-defined]
        return np.hstack([np.asarray(b, dtype=float).reshape(len(points), -1) for b in blocks])


def _within(i: int, contains: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda point: contains(point[i])


def _all_within(ids: Sequence[int], tests: Sequence[Callable[[Any], bool]]) -> Callable[[Any], bool]:
    return lambda point: all(test(point[i]) for i, test in zip(ids, tests, strict=True))


class PredictableComposition(ComposedProblem, Predictable):
    """A composition whose first objective is one part's first objective, so that part's free knowledge (zero-cost proxies) predicts it.

    Declare :attr:`predicted_part`, the key of a :class:`~search.problem.Predictable` part.
    """

    predicted_part: ClassVar[str]
    """Key of the part whose prior and free features stand for the composition's first objective."""

    def __init__(self, options: Any = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        if not isinstance(self.part(self.predicted_part).problem, Predictable):
            raise UserInputError(f"composition {self.name!r}: part {self.predicted_part!r} is not Predictable")

    def _predictable(self) -> tuple[int, Predictable]:
        problem = self.part(self.predicted_part).problem
        assert isinstance(problem, Predictable)
        return self._index[self.predicted_part], problem

    def prior(self, points: Sequence[Any]) -> np.ndarray:
        i, problem = self._predictable()
        return problem.prior([p[i] for p in points])

    def predictor_features(self, points: Sequence[Any]) -> np.ndarray:
        i, problem = self._predictable()
        return problem.predictor_features([p[i] for p in points])

    def free_features(self, points: Sequence[Any]) -> np.ndarray:
        i, problem = self._predictable()
        return problem.free_features([p[i] for p in points])
