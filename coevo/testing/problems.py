"""The conformance suite of a problem: what every registered problem passes, and a plug-in's problem can too.

A problem under test is named the way ``--problem`` names one (a registered name,
``module:Class``, ``path/to/file.py:Class``) or given as its class; it is built with its
``example_options`` (or the options given), once, since some problems build tables or
profiles when built. With pytest::

    import pytest
    from coevo.testing import problems as problem_suite

    SUBJECT = problem_suite.ProblemUnderTest(MyProblem)

    @pytest.mark.parametrize("check", problem_suite.CHECKS, ids=str)
    def test_my_problem(check):
        check(SUBJECT)

Without a test runner, ``problem_suite.check_problem_conforms(MyProblem)`` runs every check
and raises :class:`coevo.testing.ConformanceError` naming the first that fails. A class given
directly must be importable by its module and name (defined at a module's top level): one
check rebuilds it from the reference a study would store.
"""

from __future__ import annotations

import json
import math
import random
import typing
from collections.abc import Mapping
from functools import cached_property, partial
from typing import Any

import optuna

from coevo.search.errors import UserInputError
from coevo.search.niches import niche_of
from coevo.search.problem import Evolvable, Problem, ProblemContext
from coevo.search.problems import check_problem_class, describe_options, problem_class, problem_from_spec, problem_reference
from coevo.search.study import spec_study_name
from coevo.testing._suite import Check, CheckSkipped, ConformanceError, expect, raised, run_checks


class ProblemUnderTest:
    """A problem class, how to build it, and the instance the checks share.

    Args:
        problem: a name or reference as ``--problem`` takes it, or the class itself.
        options: the options to build it with; None: its ``example_options``.
    """

    def __init__(self, problem: str | type[Problem], options: Mapping[str, Any] | None = None) -> None:
        self._given = problem
        self._options = None if options is None else dict(options)

    @property
    def label(self) -> str:
        """How failure messages name the problem: the name or reference given, or the class's ``name``."""
        return self._given if isinstance(self._given, str) else f"{getattr(self._given, 'name', self._given.__name__)}"

    @cached_property
    def cls(self) -> type[Problem]:
        """The class, loaded (a name or reference) and checked against the declarations of the contract."""
        if isinstance(self._given, str):
            return problem_class(self._given)  # checks the declarations itself
        check_problem_class(self._given, self.label)
        return self._given

    @property
    def options(self) -> dict[str, Any]:
        """The options the checks build the problem with."""
        return dict(self.cls.example_options) if self._options is None else dict(self._options)

    def make(self, options: Mapping[str, Any] | None = None) -> Problem:
        """A new instance, built from ``options`` (default: :attr:`options`) as ``make_problem`` builds one."""
        cls = self.cls
        return cls.create(cls.validate_options(self.options if options is None else options), ProblemContext())

    @cached_property
    def problem(self) -> Problem:
        """The instance the checks share (built once)."""
        return self.make()


def sampled_points(problem: Problem, n: int, seed: int = 0) -> list[typing.Hashable]:
    """``n`` points sampled the way Optuna samplers do (through ``suggest``)."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed), directions=problem.directions)
    return [problem.suggest(study.ask()) for _ in range(n)]


def check_declarations(subject: ProblemUnderTest) -> None:
    """The class declarations keep the contract: objectives ordered, with units, cost classes and sane bounds."""
    cls = subject.cls  # loading checks the declarations (check_problem_class) and raises on a broken one
    objectives = cls.objectives
    expect(
        objectives[0].direction == "maximize" and objectives[1].direction == "minimize",
        f"{subject.label}: the first objective must be maximised and the second minimised",
    )
    for o in objectives:
        expect(o.unit and o.cost in ("cheap", "expensive"), f"{subject.label}: objective {o.name} needs a unit and a cost class")
        lo, hi = o.bounds
        expect(lo is None or hi is None or lo < hi, f"{subject.label}: objective {o.name} has bounds {o.bounds}")
    expect(any(o.cost == "expensive" for o in objectives), f"{subject.label}: no expensive objective (nothing for the budget to count)")


def _out_of_bounds(row: Mapping[str, Any]) -> object:
    """A value the option described by ``row`` (:func:`describe_options`) refuses, or None when it has no bound or choice."""
    if row["choices"]:
        return "not-one-of-the-choices"
    bounds = row["bounds"]
    if not bounds:
        return None
    if "le" in bounds:
        return bounds["le"] + 1
    if "lt" in bounds:
        return bounds["lt"]
    return bounds.get("ge", bounds.get("gt", 0)) - 1


def check_options_refused(subject: ProblemUnderTest) -> None:
    """An unknown option, and every option out of its bounds or choices, is refused with its name and the value given."""
    raised(
        UserInputError,
        lambda: subject.make({**subject.options, "no_such_option": 1}),
        what=f"{subject.label} built with an unknown option",
        pattern="no option 'no_such_option'",
    )
    for row in describe_options(subject.cls):
        expect(row["help"], f"{subject.label}: option {row['name']} has no help text")
        bad = _out_of_bounds(row)
        if bad is None:
            continue
        exc = raised(
            UserInputError,
            partial(subject.make, {**subject.options, row["name"]: bad}),
            what=f"{subject.label} built with {row['name']}={bad!r}",
        )
        expect(
            row["name"] in str(exc) and repr(bad) in str(exc),
            f"{subject.label}: refusing {row['name']}={bad!r}, the message should say what was wrong and what was given: {exc}",
        )


def check_spec_rebuilds(subject: ProblemUnderTest) -> None:
    """The spec names the problem, is JSON, and rebuilds the same problem from the reference a study stores."""
    problem = subject.problem
    spec = problem.spec()
    expect(spec["problem"] == problem.name, f"{subject.label}: spec names {spec['problem']!r}, not {problem.name!r}")
    expect(json.loads(json.dumps(spec)) == spec, f"{subject.label}: the spec does not survive JSON: {spec}")
    again = problem_from_spec(spec, reference=problem_reference(problem))
    expect(
        type(again) is type(problem) and again.spec() == spec, f"{subject.label}: the spec rebuilt {type(again).__name__} {again.spec()}"
    )


def _other_values(row: Mapping[str, Any], value: Any) -> list[Any]:
    """Candidate values of the option described by ``row`` other than ``value`` (the caller keeps the valid ones)."""
    if row["choices"]:
        return [c for c in row["choices"] if c != value]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, float):
        # a small step first: a sweep's neighbouring values (0.03, 0.05) must not share a name
        return [value + 0.01, value - 0.01, value * 2 + 1, value / 2]
    if isinstance(value, int):
        return [value + 1, value - 1]
    if isinstance(value, str):
        return [f"{value}x"]
    return []  # a nested setting: not part of a name


def check_study_names_tell_options_apart(subject: ProblemUnderTest) -> None:
    """Changing any one scalar option to another valid value changes the default study name.

    A sweep over an option (``--fault-rate 0.03`` then ``0.05``) must start a new study, not
    run into the study of the other value. The names are built from the validated options as
    the default :meth:`Problem.spec` holds them, so no instance is built per value.
    """
    cls = subject.cls

    def spec(options: Mapping[str, Any]) -> dict[str, Any]:
        return {"problem": cls.name, **cls.validate_options(options).model_dump(mode="json")}

    base = spec(subject.options)
    name = spec_study_name(base, "random", 0)
    for row in describe_options(cls):
        for other in _other_values(row, base[row["name"]]):
            try:
                changed = spec({**subject.options, row["name"]: other})
            except UserInputError:
                continue  # out of bounds, or refused with the other options: try the next value
            if changed == base:
                continue
            expect(
                spec_study_name(changed, "random", 0) != name,
                f"{subject.label}: {row['name']}={changed[row['name']]!r} gives the default study name {name!r} of "
                f"{row['name']}={base[row['name']]!r}",
            )
            break


def check_params_round_trip(subject: ProblemUnderTest) -> None:
    """Parameters round-trip, cover the distributions, and give point ids stable across instances (and designs parse back)."""
    problem, fresh = subject.problem, subject.make()
    parses = type(problem).parse_design is not Problem.parse_design
    for point in sampled_points(problem, 40):
        params = problem.to_params(point)
        expect(problem.from_params(params) == point, f"{subject.label}: {params} decodes to {problem.from_params(params)}, not {point}")
        expect(set(params) == set(problem.distributions()), f"{subject.label}: parameters {sorted(params)} are not the distributions'")
        ids = {fresh.point_id(point), problem.point_id(point), problem.point_id(problem.from_params(params))}
        expect(len(ids) == 1, f"{subject.label}: point {point} has several ids {sorted(ids)}")
        if parses:
            text = problem.describe(point)
            expect(problem.parse_design(text) == point, f"{subject.label}: {text!r} parses to {problem.parse_design(text)}, not {point}")


def check_niches_partition(subject: ProblemUnderTest) -> None:
    """The niches have unique ids and descriptions, and every point lies in exactly one."""
    problem = subject.problem
    niches = problem.niches()
    expect(len({n.id for n in niches}) == len(niches), f"{subject.label}: niche ids repeat: {[n.id for n in niches]}")
    expect(all(n.description for n in niches), f"{subject.label}: a niche has no description")
    for point in sampled_points(problem, 300, seed=1):
        inside = sum(n.contains(point) for n in niches)
        expect(inside == 1, f"{problem.describe(point)} is in {inside} niches")
        niche_of(niches, point)


def check_evaluate(subject: ProblemUnderTest) -> None:
    """Evaluation gives every objective, finite and within its bounds, the same again unless noisy; free values are the evaluated ones."""
    problem = subject.problem
    names = [o.name for o in problem.objectives]
    for point in sampled_points(problem, 2, seed=2):
        values = problem.evaluate(point)
        expect(list(values) == names, f"{subject.label}: evaluate gave {list(values)}, not the objectives {names}")
        expect(
            all(isinstance(v, float) and math.isfinite(v) for v in values.values()), f"{subject.label}: values not finite floats: {values}"
        )
        for o in problem.objectives:
            lo, hi = o.bounds
            inside = (lo is None or values[o.name] >= lo) and (hi is None or values[o.name] <= hi)
            expect(inside, f"{subject.label}: {o.name}={values[o.name]} is outside its bounds {o.bounds}")
        again = subject.make().evaluate(point)
        if problem.noisy:
            expect(list(again) == names, f"{subject.label}: a new instance evaluated {list(again)}, not {names}")
        else:  # deterministic: a new instance, the same values
            expect(again == values, f"{subject.label}: a new instance evaluated {again}, the first {values} (declare noisy if measured)")
        if isinstance(problem, Evolvable):
            cheap = problem.cheap_values([point])
            for o in problem.objectives:
                if o.cost == "cheap":
                    free = float(cheap[o.name][0])
                    same = math.isclose(free, values[o.name], rel_tol=1e-6, abs_tol=1e-12)  # pytest.approx's tolerance
                    expect(same, f"{subject.label}: the free {o.name} is {free}, evaluated {values[o.name]}")


def check_evolution_operators(subject: ProblemUnderTest) -> None:
    """Random points, neighbours and crossover stay in the space; features are finite, one row per point (Evolvable problems only)."""
    problem = subject.problem
    if not isinstance(problem, Evolvable):
        raise CheckSkipped(f"{subject.label} is not Evolvable: the co-evolution engine does not search it")
    rng = random.Random(3)
    points = [problem.random_point(rng) for _ in range(20)]

    def round_trips(point: Any) -> bool:
        return bool(problem.from_params(problem.to_params(point)) == point)

    for point in points:
        expect(round_trips(point), f"{subject.label}: random point {point} does not round-trip")
        neighbours = problem.neighbours(point)
        expect(neighbours and point not in neighbours, f"{subject.label}: {point} has no neighbours, or is its own")
        expect(all(round_trips(n) for n in neighbours), f"{subject.label}: a neighbour of {point} does not round-trip")
    child = problem.crossover(points[0], points[1], rng)
    expect(round_trips(child), f"{subject.label}: the crossover child {child} does not round-trip")
    features = problem.features(points)
    if features.ndim != 2 or features.shape[0] != len(points):
        raise ConformanceError(f"{subject.label}: features have shape {features.shape}, not ({len(points)}, d)")
    expect(all(math.isfinite(float(x)) for x in features.ravel()), f"{subject.label}: features are not finite")


CHECKS: tuple[Check[ProblemUnderTest], ...] = (
    Check("declarations", check_declarations),
    Check("options_refused", check_options_refused),
    Check("spec_rebuilds", check_spec_rebuilds),
    Check("study_names", check_study_names_tell_options_apart),
    Check("params_round_trip", check_params_round_trip),
    Check("niches_partition", check_niches_partition),
    Check("evaluate", check_evaluate, runs_example=True),
    Check("evolution_operators", check_evolution_operators),
)
"""Every check a problem passes, in the order to run them."""


def check_problem_conforms(problem: str | type[Problem] | ProblemUnderTest, options: Mapping[str, Any] | None = None) -> None:
    """Run every check of :data:`CHECKS` on a problem (a name or reference, its class, or a :class:`ProblemUnderTest`).

    Raises:
        ConformanceError: the first check that fails, named.
    """
    subject = problem if isinstance(problem, ProblemUnderTest) else ProblemUnderTest(problem, options)
    run_checks(CHECKS, subject, label=f"problem {subject.label}")
