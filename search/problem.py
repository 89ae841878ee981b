"""The Problem contract: a design space plus named objectives, shared by every search.

A problem maps design points to and from Optuna parameters (so any Optuna sampler, and the
co-evolution engine through ``enqueue_trial``, can drive it), gives each point a stable id,
and evaluates objectives. Problems whose whole space is known also give the exact front.

A problem is one module that declares everything about itself (see :class:`Problem`): its
options as one pydantic model (types, defaults, bounds, help), its objectives, its niches,
the option ``coevo bench`` varies between run groups, and whether its front is exact. The
CLI flags, the search tools' schemas, bench axes, study names and knowledge-base scopes are
generated from that declaration (``docs/problems.md`` shows a whole problem in one file).
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coevo.search.errors import UserInputError
from coevo.search.metrics import FrontReference
from coevo.search.niches import Niche, single_niche

if TYPE_CHECKING:  # optuna is imported where it is used: importing it costs ~0.6 s of every `coevo problems list`
    import optuna

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
        depends_on: the problem options the objective's values depend on (NB201: accuracy on
            ``dataset``, latency on ``device``), or None for all of them. The knowledge base
            discounts a claim learned under other values of these options much more than one
            learned under other values of options it does not depend on.
        bounds: (lower, upper) limits of the values where the objective has them (a share: 0..1,
            a percentage: 0..100), None where unbounded. Surrogates use the upper one.
    """

    name: str
    direction: Literal["maximize", "minimize"]
    unit: str
    cost: Literal["cheap", "expensive"]
    depends_on: tuple[str, ...] | None = None
    bounds: tuple[float | None, float | None] = (None, None)


class ProblemOptions(BaseModel):
    """Base of a problem's options: one pydantic model with a type, default, bounds and help per field.

    Fields must be JSON scalars (str, int, float, bool, or a ``Literal`` of them) so they can
    become CLI flags, tool arguments and study-name parts. Unknown options are an error.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class ProblemContext:
    """What a problem may use besides its options when it is built (never part of its identity).

    Attributes:
        storage: the study storage URL, for caches kept beside the studies (zero-cost proxy scores).
    """

    storage: str | None = None


class Problem(ABC):
    """A design space with objectives, declared in one module.

    Class attributes a problem declares:

    * :attr:`name`: how studies, bench tables, CLI (``--problem NAME``) and knowledge-base
      scopes name it.
    * :attr:`Options`: its options, a :class:`ProblemOptions` subclass (default: none).
    * :attr:`objectives`: at least two; the first maximised, the second minimised (the pair
      the Pareto metrics use); more are recorded and reported.
    * :attr:`run_group`: the option ``coevo bench --groups`` varies (NB201: ``device``), or None.
    * :attr:`example_options`: small, fast options the conformance suite builds it with.
    * :attr:`noisy`: True when objectives are measured (a timing), so evaluating a point
      twice may differ; the conformance suite then checks values, not equality.
    * :attr:`eval_timeout_s`: how long one :meth:`evaluate` may take before its trial fails
      as timed out (``--eval-timeout`` overrides it for a search or a worker).
    * :meth:`niches` (a partition of the space for the co-evolution engine), :meth:`reference`
      (the exact front, when the whole space is known).

    Contract for implementations:

    * :meth:`spec` identifies the problem; a study created for one spec is never resumed
      for another. The default is the name and every option.
    * :meth:`suggest` must only use ``trial.suggest_*`` with the parameter names and
      choices of :meth:`distributions`, so enqueued proposals and samplers agree.
    * :meth:`evaluate` is deterministic for a point unless :attr:`noisy`; callers cache by
      :meth:`point_id`. It returns a finite number for every objective; a NaN, an infinity, a
      missing objective or an exception fails that trial (it is paid for, and the search goes
      on: :func:`invalid_values`). It runs in a thread of its own (so a search can time it out
      and stop it), so it must not rely on being on the main thread (``signal``).
    * :meth:`reference` returns the exact true front of the first two objectives when the
      whole space is known.

    Build one with keyword options (``MyProblem(k=4)``, validated against :attr:`Options`) or
    with an options instance (``MyProblem(MyProblem.Options(k=4))``); :func:`search.problems.make_problem`
    does the same by name.
    """

    name: ClassVar[str]
    Options: ClassVar[type[ProblemOptions]] = ProblemOptions
    objectives: tuple[Objective, ...]
    run_group: ClassVar[str | None] = None
    example_options: ClassVar[Mapping[str, Any]] = {}
    noisy: ClassVar[bool] = False
    eval_timeout_s: ClassVar[float] = 3600.0
    """Seconds one :meth:`evaluate` may run before its trial fails as timed out: the one default
    of the per-evaluation limit (an hour: longer than any simulation here; a problem that trains
    for longer declares more, ``math.inf`` for none). ``--eval-timeout`` overrides it."""
    design_label: str = "design"
    """Key under which :meth:`describe` output appears in reports and JSON."""
    design_format: str = ""
    """How :meth:`describe` writes a design, for prompts (what :meth:`parse_design` reads)."""
    found_set: Literal["all", "front", "predicted"] = "all"
    """What a search is scored on: every evaluated point (query mode); only the final front
    under the objectives as evaluated (zero-cost mode), re-scored by :meth:`true_values`; or
    the front of the paid points and of the designs a predictor trained on them scored
    afterwards (few-shot mode, :mod:`search.few_shot`; needs a :class:`Predictable` problem)."""

    def __init__(self, options: ProblemOptions | None = None, /, **values: Any) -> None:
        if options is not None and values:
            raise TypeError(f"{type(self).__name__}: give an options instance or keyword options, not both")
        self.options: Any = options if options is not None else self.validate_options(values)

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> Any:
        """Options from raw values (``None`` ones dropped), checked against :attr:`Options`.

        Raises:
            UserInputError: one line per wrong option, with its bound or choices, and the valid option names.
        """
        given = {k: v for k, v in values.items() if v is not None}
        try:
            return cls.Options.model_validate(given)
        except ValidationError as exc:
            raise UserInputError(f"problem {cls.name!r}: {options_error(cls.Options, exc)}") from None

    @classmethod
    def create(cls, options: Any, context: ProblemContext) -> Problem:
        """Build the problem from validated options; override when options choose another class (NB201's ``mode``)."""
        return cls(options)

    def niches(self) -> tuple[Niche, ...]:
        """The partition of the space the co-evolution engine explores niche by niche (default: one niche)."""
        return single_niche()

    def spec(self) -> dict[str, Any]:
        """JSON-serialisable identity of the problem: its name and every option."""
        return {"problem": self.name, **self.options.model_dump(mode="json")}

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


BOUNDS = ("ge", "gt", "le", "lt")
"""Metadata keys of a family configuration's field that bound its value (as pydantic's ``Field`` takes them)."""


def invalid_values(problem: Problem, values: Any) -> str | None:
    """Why ``values`` (what :meth:`Problem.evaluate` returned) is not a result, or None when it is one.

    A result is a mapping with a finite number for every objective (extra keys are ignored).
    The reason reads as a trial's failure: ``objective latency is NaN``.

    Example:
        >>> from types import SimpleNamespace
        >>> p = SimpleNamespace(objectives=(Objective("acc", "maximize", "%", "expensive"), Objective("ms", "minimize", "ms", "cheap")))
        >>> invalid_values(p, {"acc": 1.0, "ms": float("nan")})
        'objective ms is NaN'
        >>> invalid_values(p, {"acc": 1.0}), invalid_values(p, {"acc": 1, "ms": 2.5}) is None
        ('evaluate returned no value for objective ms', True)
    """
    if not isinstance(values, Mapping):
        return f"evaluate returned {type(values).__name__}, not a dict of objective values"
    missing = [o.name for o in problem.objectives if o.name not in values]
    if missing:
        return f"evaluate returned no value for objective{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
    for o in problem.objectives:
        value = values[o.name]
        try:
            number = float(value)
        except (TypeError, ValueError):
            return f"objective {o.name} is {value!r:.80}, not a number"
        if math.isnan(number):
            return f"objective {o.name} is NaN"
        if math.isinf(number):
            return f"objective {o.name} is {'-' if number < 0 else ''}infinite"
    return None


def config_field(config: type, name: str, *, description: str | None = None, bounds: bool = True, **narrower: float) -> Any:
    """A pydantic ``Field`` whose default and bounds come from a family's configuration, so neither is written twice.

    A family's configuration is a frozen dataclass in ``sim/<family>/config.py``; each field's
    ``metadata`` holds ``help``, optionally ``unit`` and the bounds of :data:`BOUNDS`. A
    problem's options and its tool's arguments both declare their fields through this.

    Args:
        config: the configuration dataclass.
        name: the field of ``config``.
        description: the adapter's own help text where it words the field for its caller (a tool's
            schema for a model); default: the field's ``help``.
        bounds: False leaves the range check to the simulator, whose error says more than pydantic's.
        narrower: bounds of :data:`BOUNDS` this adapter needs tighter than the family's (a search
            needs at least one augmented copy where one tool call may ask for none).

    Raises:
        KeyError: ``config`` has no field ``name``.
        ValueError: a bound in ``narrower`` is not one of :data:`BOUNDS`, or widens the family's.
    """
    f = {f.name: f for f in dataclasses.fields(config)}[name]
    limits = {k: f.metadata[k] for k in BOUNDS if k in f.metadata} if bounds else {}
    for k, v in narrower.items():
        if k not in BOUNDS or (k in limits and (v < limits[k] if k in ("ge", "gt") else v > limits[k])):
            raise ValueError(f"{config.__name__}.{name}: {k}={v} is not a narrower bound than {limits}")
        limits[k] = v
    return Field(f.default, description=description if description is not None else f.metadata.get("help"), **limits)


def options_error(model: type[BaseModel], exc: ValidationError) -> str:
    """A pydantic validation error as one line a person can act on: each wrong option, what it must be, what was given."""
    parts = []
    for e in exc.errors():
        field = ".".join(str(x) for x in e["loc"]) or "(options)"
        if e["type"] == "extra_forbidden":
            parts.append(f"no option {field!r} (options: {', '.join(model.model_fields) or 'none'})")
        elif e["type"] == "value_error":  # a validator's own message, which names the value
            parts.append(f"{field}: {str(e['msg']).removeprefix('Value error, ')}")
        else:
            msg = str(e["msg"])
            info = model.model_fields.get(str(e["loc"][0])) if e["loc"] else None
            why = f" ({info.description})" if e["type"] == "literal_error" and info is not None and info.description else ""
            parts.append(f"{field}: {msg[0].lower()}{msg[1:]}, got {e['input']!r}{why}")
    return "; ".join(parts)


def _suggest(trial: optuna.Trial, name: str, dist: optuna.distributions.BaseDistribution) -> Any:
    """Call the public ``suggest_*`` matching ``dist``."""
    import optuna

    if isinstance(dist, optuna.distributions.CategoricalDistribution):
        return trial.suggest_categorical(name, dist.choices)
    if isinstance(dist, optuna.distributions.IntDistribution):
        return trial.suggest_int(name, dist.low, dist.high, step=dist.step, log=dist.log)
    if isinstance(dist, optuna.distributions.FloatDistribution):
        return trial.suggest_float(name, dist.low, dist.high, step=dist.step, log=dist.log)
    raise TypeError(f"unsupported distribution for {name!r}: {dist!r}")


def _choices_text(dist: optuna.distributions.BaseDistribution) -> str:
    """The values a distribution allows, in words."""
    import optuna

    if isinstance(dist, optuna.distributions.CategoricalDistribution):
        return "one of " + ", ".join(str(c) for c in dist.choices)
    if isinstance(dist, optuna.distributions.IntDistribution | optuna.distributions.FloatDistribution):
        kind = "an integer" if isinstance(dist, optuna.distributions.IntDistribution) else "a number"
        step = f" in steps of {dist.step}" if dist.step not in (None, 1) else ""
        return f"{kind} from {dist.low} to {dist.high}{step}{' (log scale)' if dist.log else ''}"
    return repr(dist)


KEY_VALUE = re.compile(r"([a-z0-9_]+)\s*=\s*([\w.\-]+)")
"""``key=value`` pairs as :func:`read_key_values` reads them."""


LEVEL_VALUE = re.compile(r"([a-z0-9_]+)\s*=\s*([\w.:\-]+)")
"""``key=value`` pairs of a :class:`LevelProblem`: values may also hold ``:`` (a PE split such as ``12:3:1``)."""


def read_key_values(problem: Problem, text: str, what: str, pattern: re.Pattern[str] = KEY_VALUE) -> tuple[Point, dict[str, str]]:
    """Parse ``key=value`` pairs (the form ``describe`` writes) into a point through ``from_params``.

    Args:
        problem: the problem whose ``from_params`` reads the pairs.
        text: the design as written.
        what: the design in words for the error message (``"a tiling"``).
        pattern: the regular expression of one pair (key, value groups).

    Returns:
        the point and the pairs as read (for checks of derived keys).

    Raises:
        UserInputError: naming what could not be read and the expected format.
    """
    pairs = dict(pattern.findall(text))
    try:
        return problem.from_params(pairs), pairs
    except UserInputError as exc:
        raise UserInputError(f"cannot read {text!r} as {what}: {exc}; format: {problem.design_format}") from None


def level_neighbours(point: Sequence[Any], levels: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Designs that are a tuple of ordered levels: every design one level up or down at one position."""
    out = []
    for i, value in enumerate(point):
        j = list(levels).index(value)
        for nj in (j - 1, j + 1):
            if 0 <= nj < len(levels):
                out.append((*point[:i], levels[nj], *point[i + 1 :]))
    return out


def uniform_crossover(a: Sequence[Any], b: Sequence[Any], rng: random.Random) -> tuple[Any, ...]:
    """Each position from ``a`` or ``b`` with even odds (one ``rng.random()`` draw per position)."""
    return tuple(x if rng.random() < 0.5 else y for x, y in zip(a, b, strict=True))


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


class Predictable(ABC):
    """Label-free knowledge of the first objective, for few-shot and zero-cost modes (mixin for :class:`Evolvable` problems).

    Zero-cost proxies are the example: computed without training, they rank designs roughly
    as the expensive objective would. Contract: :meth:`predictor_features` ends with the
    column :meth:`prior` returns (predictors fit a correction of it), and neither reads an
    expensive objective. They may cost real computation per design, unlike
    :meth:`Evolvable.features` (the encoding proposers' models use while searching).
    """

    @abstractmethod
    def prior(self, points: Sequence[Point]) -> np.ndarray:
        """(n,) label-free estimate of the first objective (higher is better; any monotone scale; NaN where not known for free)."""

    @abstractmethod
    def predictor_features(self, points: Sequence[Point]) -> np.ndarray:
        """(n, d) features of the few-shot predictor, the prior last."""

    def free_features(self, points: Sequence[Point]) -> np.ndarray:
        """(n, d) the columns of :meth:`predictor_features` that cost nothing to know, NaN where a design's would cost a computation.

        The search's predictor (:class:`search.informed.InformedPredictor`) reads these for
        every candidate while searching, so a candidate never costs a feature computation
        (NB201: proxies of the cells of the shipped table, NaN for the others). Default: all of
        :meth:`predictor_features` (a problem whose features are all cheap).
        """
        return self.predictor_features(points)

    def free_designs(self) -> list[Point] | None:
        """Designs whose features are precomputed (free to predict), or None.

        When given, the prediction stage of few-shot and zero-cost modes scores all of them
        instead of searching the space with the problem's operators (whose designs may each
        cost a feature computation).
        """
        return None


_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")
"""How a boolean level may be written in text (any case)."""


@dataclass(frozen=True)
class Levels:
    """The ordered choices of one parameter of a :class:`LevelProblem`.

    Attributes:
        values: what a point holds, in order (for an ordered parameter, neighbours are one step apart).
        choices: what Optuna stores for each value, when that differs from the value (a 0/1 flag
            stored as 0.0/1.0 by older studies); default: the values themselves. Optuna accepts
            None, bool, int, float and str.
        ordered: False when the values have no order (scheduler names): every other value is then a neighbour.
        fmt: format spec of a value in point ids and descriptions (``"g"`` writes 0.0 as ``0``);
            default ``""``, which is ``str``.

    Raises:
        ValueError: no values, repeated values, or ``choices`` of another length.
    """

    values: tuple[Any, ...]
    choices: tuple[Any, ...] | None = None
    ordered: bool = True
    fmt: str = ""

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError("a parameter needs at least one level")
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"levels must differ, got {self.values}")
        if self.choices is not None and len(self.choices) != len(self.values):
            raise ValueError(f"{len(self.choices)} Optuna choices for {len(self.values)} levels")

    @property
    def stored(self) -> tuple[Any, ...]:
        """The Optuna choices, one per value."""
        return self.values if self.choices is None else self.choices

    def text(self, value: Any) -> str:
        """``value`` as point ids and descriptions write it."""
        return format(value, self.fmt)

    def param(self, value: Any) -> Any:
        """The Optuna choice of a value of the space."""
        return value if self.choices is None else self.choices[self.values.index(value)]

    def read(self, raw: Any) -> tuple[bool, Any]:
        """(True, the level) that ``raw`` (a value, its Optuna choice, or text of either) stands for; (False, None) if none."""
        for value, stored in zip(self.values, self.stored, strict=True):
            if _same(raw, value) or _same(raw, stored):
                return True, value
        return False, None


def _same(raw: Any, level: Any) -> bool:
    """Whether ``raw`` stands for ``level``: equal, equal text, or the same number (to 1e-9 relative)."""
    if isinstance(level, str) or level is None:
        return isinstance(raw, str) and raw.strip() == str(level)
    if isinstance(raw, str):
        word = raw.strip().lower()
        if isinstance(level, bool) and word in _TRUE + _FALSE:
            return (word in _TRUE) == level
        try:
            raw = float(word)
        except ValueError:
            return False
    if not isinstance(raw, int | float | np.number):
        return False
    return bool(abs(float(raw) - float(level)) <= 1e-9 * max(1.0, abs(float(level))))


def level_format(levels: Mapping[str, Levels]) -> str:
    """A design format listing every parameter's levels: ``key=value pairs: a=(1|2) b=(x|y)``."""
    return "key=value pairs: " + " ".join(f"{name}=({'|'.join(lv.text(v) for v in lv.values)})" for name, lv in levels.items())


class LevelProblem(Problem, Evolvable):
    """A problem whose design is one choice from a table of levels per parameter.

    A subclass declares :attr:`levels` (parameter name -> :class:`Levels`, in point order; on
    the class, or set in ``__init__`` when options decide it) and gets from it:

    * the encoding: :meth:`distributions` (one categorical per parameter, named as in the
      table), :meth:`from_params` / :meth:`to_params`, :meth:`point_id` (the values as
      :meth:`Levels.text` writes them, joined by ``-``), :meth:`describe` (``name=value``
      pairs) and :meth:`parse_design` (its inverse);
    * the co-evolution operators: :meth:`neighbours` (one parameter one step up or down, or
      to any other value when unordered), :meth:`crossover` (each parameter from either
      parent with even odds: one ``rng.random()`` draw per parameter) and
      :meth:`random_point` (one ``rng.choice`` per parameter), all deterministic given ``rng``;
    * :meth:`features`: the values as numbers (a non-numeric level by its index).

    A point is a tuple of level values in table order, or :attr:`point_type` (a NamedTuple
    with the parameters as fields). :meth:`violation` is the hook for constraints across
    parameters: points it refuses are not in the space (:meth:`from_params` raises, and the
    operators never return them). Subclasses still write :meth:`evaluate`,
    :meth:`cheap_values` and the declarations of :class:`Problem`; they override any of the
    above where their old studies stored another form (a point id, say), since stored
    parameter names, choices and point ids must not change once studies exist.

    Example::

        class Tiles(LevelProblem):
            name = "tiles"
            levels = {"tile": Levels((8, 16, 32)), "order": Levels(("ij", "ji"), ordered=False)}
            objectives = (...)
    """

    levels: Mapping[str, Levels]
    """Parameter name -> its levels, in point order."""
    point_type: ClassVar[type[tuple[Any, ...]]] = tuple
    """What a point is: ``tuple`` or a NamedTuple whose fields are the parameters in table order."""
    design_noun: ClassVar[str] = "a design"
    """The design in words, for :meth:`parse_design`'s errors (``"a tiling"``)."""

    def violation(self, point: tuple[Any, ...]) -> str | None:
        """Why ``point`` (every value a level) is outside the space, or None when it is in (default: always in).

        Must be cheap and deterministic: the operators call it on every candidate.
        """
        return None

    def _make(self, values: Sequence[Any]) -> Any:
        return tuple(values) if self.point_type is tuple else self.point_type(*values)

    # ---- the encoding

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        import optuna

        return {name: optuna.distributions.CategoricalDistribution(lv.stored) for name, lv in self.levels.items()}

    def from_params(self, params: Mapping[str, Any]) -> Any:
        """The point that Optuna parameters (values, stored choices or their text) stand for.

        Raises:
            UserInputError: naming each missing parameter, each value outside its levels (with
                the levels), or the constraint a point breaks.
        """
        missing = [name for name in self.levels if name not in params]
        if missing:
            raise UserInputError(f"{self.name} params need {', '.join(self.levels)}; missing: {', '.join(missing)}")
        values, bad = [], []
        for name, lv in self.levels.items():
            found, value = lv.read(params[name])
            if not found:
                bad.append(f"{name}={params[name]} is outside the space; {name} is one of {', '.join(lv.text(v) for v in lv.values)}")
            values.append(value)
        if bad:
            raise UserInputError("; ".join(bad))
        point = self._make(values)
        why = self.violation(point)
        if why is not None:
            raise UserInputError(f"{self.describe(point)} is outside the space: {why}")
        return point

    def to_params(self, point: Any) -> dict[str, Any]:
        return {name: lv.param(v) for (name, lv), v in zip(self.levels.items(), point, strict=True)}

    def point_id(self, point: Any) -> str:
        return "-".join(lv.text(v) for lv, v in zip(self.levels.values(), point, strict=True))

    def describe(self, point: Any) -> str:
        return " ".join(f"{name}={lv.text(v)}" for (name, lv), v in zip(self.levels.items(), point, strict=True))

    def parse_design(self, text: str) -> Any:
        """Read ``name=value`` pairs as :meth:`describe` writes them."""
        return read_key_values(self, text, self.design_noun, LEVEL_VALUE)[0]

    # ---- operators for the co-evolution engine (Evolvable)

    def neighbours(self, point: Any) -> list[Any]:
        """Every point with one parameter one level up or down (or any other level, unordered), in table order."""
        out = []
        for i, lv in enumerate(self.levels.values()):
            j = lv.values.index(point[i])
            steps = (j - 1, j + 1) if lv.ordered else range(len(lv.values))
            for k in steps:
                if 0 <= k < len(lv.values) and k != j:
                    moved = self._make((*point[:i], lv.values[k], *point[i + 1 :]))
                    if self.violation(moved) is None:
                        out.append(moved)
        return out

    def crossover(self, a: Any, b: Any, rng: random.Random) -> Any:
        """Each parameter from ``a`` or ``b`` with even odds; redrawn (at most 16 times, then ``a``) while a constraint refuses it."""
        for _ in range(16):
            child = self._make(uniform_crossover(a, b, rng))
            if self.violation(child) is None:
                return child
        return self._make(a)

    def random_point(self, rng: random.Random) -> Any:
        """A uniformly random point of the space (rejection sampling under :meth:`violation`).

        Raises:
            RuntimeError: 1000 draws in a row broke the constraints (a space almost empty).
        """
        for _ in range(1000):
            point = self._make([rng.choice(lv.values) for lv in self.levels.values()])
            if self.violation(point) is None:
                return point
        raise RuntimeError(f"problem {self.name}: 1000 random points in a row broke its constraints")

    def features(self, points: Sequence[Any]) -> np.ndarray:
        """(n, parameters): each value as a number, a non-numeric level by its index."""
        table = tuple(self.levels.values())
        rows = [[_number(lv, v) for lv, v in zip(table, p, strict=True)] for p in points]
        return np.array(rows, dtype=float).reshape(len(points), len(table))


def _number(levels: Levels, value: Any) -> float:
    """A level as a feature: itself when numeric, else its index."""
    return float(value) if isinstance(value, int | float | np.number) else float(levels.values.index(value))
