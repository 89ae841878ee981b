"""The problems a search can run: coevo's own, installed plug-ins, and a user's file or module.

* Built-ins are listed in :data:`BUILTIN` (name -> ``module:Class``), imported when first used.
* An installed package registers its own under the ``coevo.problems`` entry-point group::

      [project.entry-points."coevo.problems"]
      hls = "mypkg.spaces:Hls"

* ``--problem path/to/file.py:Class`` or ``--problem module:Class`` loads a user's class.

Every class is checked against the contract of :class:`search.problem.Problem` when it is
loaded (:func:`check_problem_class`), so a broken one fails with one line naming what is
missing, before any study is touched.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coevo.search.errors import UserInputError, unknown_name
from coevo.search.plugins import entry_points, is_reference, load_entry_point, load_reference
from coevo.search.problem import Objective, Problem, ProblemContext, ProblemOptions

BUILTIN: dict[str, str] = {
    "nb201": "coevo.search.nb201.problem:NB201Problem",
    "pipeline": "coevo.search.pipeline.problem:PipelineProblem",
    "noc": "coevo.search.noc.problem:NocProblem",
    "compress": "coevo.search.compress.problem:CompressProblem",
    "prune": "coevo.search.prune.problem:PruneProblem",
    "quant": "coevo.search.quant.problem:QuantProblem",
    "spmm": "coevo.search.spmm.problem:SpmmProblem",
    "lingcn": "coevo.search.lingcn.problem:LinGcnProblem",
    "fpga-transformer": "coevo.search.fpga.problem:FpgaTransformerProblem",
    "reram": "coevo.search.reram.problem:ReramProblem",
    "stepping": "coevo.search.stepping.problem:SteppingProblem",
    "freeze": "coevo.search.freeze.problem:FreezeProblem",
    "nb201-accel": "coevo.search.nb201_accel.problem:NB201AccelProblem",
    "deploy-cnn": "coevo.search.deploy_cnn.problem:DeployCnnProblem",
    "deploy-lm": "coevo.search.deploy_lm.problem:DeployLmProblem",
}
"""coevo's own problems: name -> ``module:Class``. A new built-in problem is one module and one line here."""

ENTRY_POINT_GROUP = "coevo.problems"
NAME = re.compile(r"^[a-z][a-z0-9_.-]*$")
SCALARS = (str, int, float, bool)
_REF_ATTR = "_coevo_reference"


def problem_names() -> list[str]:
    """Names of the built-in and installed problems (nothing is imported)."""
    return [*BUILTIN, *(n for n in entry_points(ENTRY_POINT_GROUP) if n not in BUILTIN)]


def problem_class(name: str) -> type[Problem]:
    """The problem class ``name`` names: a built-in, an installed entry point, or a ``module:Class`` / ``file.py:Class`` reference.

    Raises:
        UserInputError: unknown name (the message lists the known ones), a reference that does
            not load, or a class that breaks the contract (the message says what is missing).
    """
    if name in BUILTIN:
        cls = load_reference(BUILTIN[name], what="problem")
        ref = name
    elif name in (installed := entry_points(ENTRY_POINT_GROUP)):
        cls = load_entry_point(installed[name], what="problem")
        ref = name
    elif is_reference(name):
        cls = load_reference(name, what="problem")
        target, _, attr = name.rpartition(":")
        ref = f"{Path(target).resolve()}:{attr}" if target.endswith(".py") else name  # workers elsewhere load the same file
    else:
        raise unknown_name("problem", name, problem_names()) from None
    check_problem_class(cls, name)
    if _REF_ATTR not in vars(cls):  # the class's own: a subclass of a loaded class is not its parent
        setattr(cls, _REF_ATTR, ref)
    return cls


def check_problem_class(cls: Any, where: str) -> None:
    """Raise :class:`UserInputError` unless ``cls`` keeps the :class:`Problem` contract (declarations, not behaviour).

    Behaviour (round trips, niches, determinism) is checked by the conformance suite,
    :mod:`coevo.testing.problems`, which every registered problem runs (and a plug-in's can).
    """
    head = f"problem {where!r}"
    _check_declarations(cls, head)
    _check_objectives(cls, head)


def _check_declarations(cls: Any, head: str) -> None:
    """The class, its name and its options: a :class:`Problem` subclass, every method implemented, scalar options."""
    if not (isinstance(cls, type) and issubclass(cls, Problem)):
        raise UserInputError(f"{head}: {cls!r} is not a subclass of coevo.Problem (search.problem.Problem)")
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        raise UserInputError(f"{head}: {cls.__name__} does not implement {', '.join(missing)} (see docs/problems.md)")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not NAME.match(name):
        raise UserInputError(f"{head}: {cls.__name__}.name must be a lowercase word such as 'my-space', got {name!r}")
    if not (isinstance(cls.Options, type) and issubclass(cls.Options, ProblemOptions)):
        raise UserInputError(f"{head}: {cls.__name__}.Options must subclass coevo.ProblemOptions")
    limit = getattr(cls, "eval_timeout_s", None)
    if isinstance(limit, bool) or not isinstance(limit, int | float) or not limit > 0:
        raise UserInputError(f"{head}: {cls.__name__}.eval_timeout_s must be a positive number of seconds (math.inf: none), got {limit!r}")
    for field, info in cls.Options.model_fields.items():
        if not all(t in SCALARS for t in scalar_types(info.annotation)):
            raise UserInputError(f"{head}: option {field!r} must be a str, int, float, bool or a Literal of them, got {info.annotation}")


def _check_objectives(cls: type[Problem], head: str) -> None:
    """The objectives (at least two, unique names, the Pareto pair first) and what they and the run group refer to."""
    objectives = getattr(cls, "objectives", None)
    if not isinstance(objectives, tuple) or len(objectives) < 2 or not all(isinstance(o, Objective) for o in objectives):
        raise UserInputError(f"{head}: {cls.__name__}.objectives must be a tuple of at least two Objective")
    if len({o.name for o in objectives}) != len(objectives):
        raise UserInputError(f"{head}: objective names must be unique, got {[o.name for o in objectives]}")
    if objectives[0].direction != "maximize" or objectives[1].direction != "minimize":
        raise UserInputError(
            f"{head}: the first objective is maximised and the second minimised (the Pareto metrics' pair); got "
            f"{objectives[0].name} {objectives[0].direction}, {objectives[1].name} {objectives[1].direction}"
        )
    fields = set(cls.Options.model_fields)
    for o in objectives:
        unknown = sorted(set(o.depends_on or ()) - fields)
        if unknown:
            raise UserInputError(f"{head}: objective {o.name} depends on {', '.join(unknown)}, which are not options")
    if cls.run_group is not None and cls.run_group not in fields:
        raise UserInputError(f"{head}: run_group {cls.run_group!r} is not an option (options: {', '.join(sorted(fields)) or 'none'})")


def scalar_types(annotation: Any) -> list[type]:
    """The Python types an option's annotation allows (``Literal`` values by their types; ``X | None`` as X)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return [type(v) for v in typing.get_args(annotation)]
    if origin in (typing.Union, types.UnionType):
        return [t for a in typing.get_args(annotation) if a is not type(None) for t in scalar_types(a)]
    return [annotation] if isinstance(annotation, type) else [type(annotation)]


def option_names(cls: type[Problem]) -> set[str]:
    """The option names ``cls`` accepts, with the aliases older studies may have stored."""
    names = set(cls.Options.model_fields)
    for info in cls.Options.model_fields.values():
        alias = info.validation_alias
        for choice in getattr(alias, "choices", [alias] if isinstance(alias, str) else []):
            if isinstance(choice, str):
                names.add(choice)
    return names


def make_problem(name: str, options: Mapping[str, Any] | None = None, *, storage: str | None = None) -> Problem:
    """Build problem ``name`` from its options (``None`` ones are dropped).

    Args:
        name: a problem name or reference (:func:`problem_class`).
        options: option values; each is checked against the problem's :attr:`Options`.
        storage: the study storage, for caches a problem keeps beside the studies.

    Raises:
        UserInputError: unknown problem, or an option that is unknown or out of its bounds
            (the message gives the bound and the valid names).
    """
    cls = problem_class(name)
    return cls.create(cls.validate_options(options or {}), ProblemContext(storage=storage))


def problem_from_spec(spec: Mapping[str, Any], *, reference: str | None = None, storage: str | None = None) -> Problem:
    """Rebuild the problem a study recorded (its spec, and the reference of a user's problem)."""
    cls = problem_class(reference or str(spec["problem"]))
    accepted = option_names(cls)
    return make_problem(reference or str(spec["problem"]), {k: v for k, v in spec.items() if k in accepted}, storage=storage)


def normalized_spec(spec: Mapping[str, Any], *, reference: str | None = None) -> dict[str, Any]:
    """``spec`` with its options as the problem reads them now (defaults filled, renamed options under their new name).

    Two specs name the same problem when their normalized forms are equal, so a study made
    before an option was added or renamed still opens.
    """
    cls = problem_class(reference or str(spec["problem"]))
    accepted = option_names(cls)
    options = cls.validate_options({k: v for k, v in spec.items() if k in accepted}).model_dump(mode="json")
    return {"problem": spec["problem"], **options, **{k: v for k, v in spec.items() if k not in accepted and k != "problem"}}


def problem_reference(problem: Problem) -> str:
    """How to load ``problem``'s class again (in a worker, on resume): its registered name, or a reference to its class."""
    cls = type(problem)
    ref = vars(cls).get(_REF_ATTR)
    if isinstance(ref, str):
        return ref
    if cls.name in BUILTIN:
        return cls.name
    module = inspect.getmodule(cls)
    if module is not None and module.__name__ not in ("__main__",) and not module.__name__.startswith("coevo_user_"):
        return f"{module.__name__}:{cls.__qualname__}"
    try:
        return f"{Path(inspect.getfile(cls)).resolve()}:{cls.__qualname__}"
    except (TypeError, OSError):
        return cls.name  # defined interactively: only this process can run it


def describe_options(cls: type[Problem]) -> list[dict[str, Any]]:
    """Each option of ``cls``: name, type, default, bounds or choices, help (``coevo problems describe``, tool schemas)."""
    rows = []
    for field, info in cls.Options.model_fields.items():
        choices = typing.get_args(info.annotation) if typing.get_origin(info.annotation) is typing.Literal else None
        bounds = {}
        for meta in info.metadata:
            for key in ("ge", "gt", "le", "lt"):
                if getattr(meta, key, None) is not None:
                    bounds[key] = getattr(meta, key)
        rows.append(
            {
                "name": field,
                "type": "choice" if choices else "/".join(t.__name__ for t in scalar_types(info.annotation)),
                "default": info.get_default(),
                "choices": list(choices) if choices else None,
                "bounds": bounds or None,
                "help": info.description or "",
            }
        )
    return rows
