"""What an earlier study brings to a new search (``--kb-from``): its paid evaluations, checked to fit.

``coevo search --kb-from STUDY_OR_FILE`` seeds a search from an earlier one. Its distilled
heuristics come through :func:`knowledge.exchange.records_from`; this module gives the raw
evidence: the earlier study's successful paid evaluations, their points rebuilt under the new
search's problem, and which expensive objectives carry over unchanged.

Whether values carry over is the problems' own declaration (:attr:`search.problem.Objective.depends_on`):
NB201 accuracy depends on the dataset only, so an fpga study's accuracies are raspi4's too, and a
cifar100 search shares none of a cifar10 study's. Options that differ are what transfer is for;
what cannot transfer is refused with one line before anything is created: a study of another
problem, or one whose objectives differ by name, direction or unit (an NB201 zero-cost study's
accuracy is a z-score, not a percentage).

A study of one **part** of a composed search (:mod:`search.compose`: an ``nb201`` study for an
``nb201-accel`` search) is checked against that part as above, and its evaluations are lifted into
the joint space: each earlier point becomes the part's point of a joint design whose other parts
are drawn at random (seeded, so a rerun lifts them alike). Only the predicted part of a
:class:`~search.compose.PredictableComposition` lends the joint search its expensive objective, so
only its studies map; their predicted objective must carry over unchanged (the same dataset), since
a model of another setting's values has no feature column to go to in the joint encoding.

A study of a part of any other composition (a ``quant`` study for ``deploy-cnn``, whose ``bits``
part is the quant problem of the same CNN) brings its **heuristics only**
(:func:`heuristic_part_of`): its claims name parameters the joint design has under the same
names, checked to be the same parameters with the same choices (:func:`heuristic_compatibility`),
so they can guide the joint search and be tested by its evidence. Its evaluations do not
transfer: a part's accuracy there is of the part alone (the dense CNN, quantized), while the joint
accuracy depends on the other parts too (deploy-cnn prunes before it quantizes), so no earlier value
labels a joint design, fine-tuned (``finetune_epochs`` > 0) or not. A study of a problem that is no
part (``prune``, which prunes a language model: deploy-cnn's ``sparsity`` part is the CNN's own
``cnn-sparsity``) is refused in one line naming the parts that would map.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from coevo.search.compose import ComposedProblem, PredictableComposition
from coevo.search.errors import StorageMissingError, UserInputError
from coevo.search.problem import Objective, Problem, ProblemContext
from coevo.search.proposers import Evaluation
from coevo.search.storage import open_storage
from coevo.search.study import ATTR_SPEC, FAILURE

_NO_STORAGE = "sqlite:///:memory:"
"""Where the earlier problem rebuilt for its objectives keeps its caches: nowhere (it evaluates nothing)."""


@dataclass(frozen=True)
class Compatibility:
    """How an earlier problem spec relates to a search's problem (:func:`compatibility`).

    Attributes:
        shared: the search's expensive objectives whose values carry over unchanged (no option
            they depend on differs), in objective order.
        differs: option -> (earlier value, this search's value), for every option that differs
            (defaults filled in on both sides), sorted by name.
        objectives: the earlier problem's objectives (its trial values are in this order).
        parameters: the earlier problem's parameters (its Optuna distributions, by name).
    """

    shared: tuple[str, ...]
    differs: dict[str, tuple[Any, Any]]
    objectives: tuple[Objective, ...]
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PriorEvidence:
    """An earlier study's evidence for a new search (:func:`prior_evidence`).

    Attributes:
        source: what ``--kb-from`` named.
        study: the Optuna study it resolved to (None for a KB export file, or a knowledge base
            without a study).
        spec: the earlier study's problem spec (``problem.spec()`` of the run that made it; empty
            without a study).
        evaluations: its successful paid evaluations, in trial order, one per point: points rebuilt
            under the new search's problem (``point_id`` is theirs there), values as the earlier
            study measured them, keyed by objective name (all of them: only :attr:`shared` ones
            hold here unchanged), ``trial_number`` and ``attrs`` of the earlier study's trial.
        shared: expensive objectives whose values carry over unchanged.
        differs: problem options that differ: option -> (earlier value, this search's value); of
            the part's options when :attr:`part` is set.
        part: the key of the part of this search's composed problem that the earlier study's
            problem is (its evaluations lifted into joint points: module doc); None when the
            study is of this search's problem itself.
        heuristics_only: the study is of a part whose values label no joint design (module doc):
            :attr:`evaluations` is empty, and only its heuristics seed the search.
    """

    source: str
    study: str | None
    spec: dict[str, Any]
    evaluations: tuple[Evaluation, ...]
    shared: tuple[str, ...]
    differs: dict[str, tuple[Any, Any]]
    part: str | None = None
    heuristics_only: bool = False


def prior_evidence(problem: Problem, storage: str | None, source: str) -> PriorEvidence:
    """The evidence ``source`` (``--kb-from``) holds for a search of ``problem`` in ``storage``.

    ``source`` resolves as :func:`knowledge.exchange.records_from` resolves it: an existing file
    is a KB export (heuristics only: no evaluations); otherwise a study of that name in
    ``storage`` gives its paid evaluations: COMPLETE trials with a finite value per objective
    that paid for them (no failed evaluation, no unpaid repeat), whose parameters are a point of
    ``problem``'s space (rebuilt with ``problem.from_params``; a point seen twice counts once).
    A name that is no study (a knowledge base imported under it, or nothing:
    ``records_from`` then says so) gives no evaluations. Nothing is created or written. A study
    of the predicted part of a composed ``problem`` is checked against that part and its points
    lifted into joint ones; a study of another part gives no evaluations and says so
    (:attr:`PriorEvidence.heuristics_only`; module doc).

    Raises:
        UserInputError: the study is of another problem (and of no part of ``problem`` its
            knowledge maps onto), its parameters differ from the part's, its objectives differ from ``problem``'s (or the
            part's) by name, direction or unit, or its options are not valid for it any more
            (:func:`compatibility`); a part's study whose predicted objective does not carry over;
            or it was not made by coevo.
        StorageError: the storage exists but cannot be read.
    """
    study = None if Path(source).is_file() else _stored_study(storage, source)
    if study is None:
        return PriorEvidence(source, None, {}, (), (), {})
    spec = study.user_attrs.get(ATTR_SPEC)
    if not isinstance(spec, dict) or "problem" not in spec:
        raise UserInputError(f"--kb-from {source!r}: study {source!r} was not made by coevo (it has no problem spec)")
    key = part_of(problem, spec.get("problem"))
    if key is None and (other := heuristic_part_of(problem, spec.get("problem"))) is not None:
        assert isinstance(problem, ComposedProblem)  # heuristic_part_of maps only onto a composition's part
        fit = heuristic_compatibility(problem, other, spec, source=source)
        return PriorEvidence(source, study.study_name, dict(spec), (), (), fit.differs, other, heuristics_only=True)
    if key is None:
        _no_part(problem, spec.get("problem"), source)
        fit = compatibility(problem, spec, source=source)
        evaluations = _paid_evaluations(problem, study, _value_names(study, fit.objectives))
        return PriorEvidence(source, study.study_name, dict(spec), tuple(evaluations), fit.shared, fit.differs)
    assert isinstance(problem, ComposedProblem)  # part_of maps only onto a composition's part
    fit = part_compatibility(problem, key, spec, source=source)
    target = problem.part(key).problem
    evaluations = _paid_evaluations(target, study, _value_names(study, fit.objectives))
    lifted = lift(problem, key, evaluations)
    return PriorEvidence(source, study.study_name, dict(spec), tuple(lifted), fit.shared, fit.differs, key)


def part_compatibility(problem: ComposedProblem, key: str, spec: Mapping[str, Any], *, source: str) -> Compatibility:
    """Check evidence recorded under ``spec`` (a problem of part ``key``'s kind) against that part of ``problem``.

    As :func:`compatibility` on the part, and the joint expensive objective the part predicts
    must carry over unchanged (module doc). Returns the part's :class:`Compatibility` with
    :attr:`~Compatibility.shared` that objective.

    Raises:
        UserInputError: what :func:`compatibility` refuses, or the predicted objective does not
            carry over (another dataset), in one line.
    """
    target = problem.part(key).problem
    fit = compatibility(target, spec, source=source)
    first = problem.front_objectives[0]
    if first not in fit.shared:
        why = ", ".join(f"{k} {a} there, {b} here" for k, (a, b) in fit.differs.items() if not isinstance(a, dict | list))
        raise UserInputError(
            f"--kb-from {source!r}: {target.name} is part {key!r} of {problem.name}, but its {first} does not carry over"
            + (f" ({why})" if why else "")
            + f"; give a {target.name} study of the same setting"
        )
    return Compatibility((first,), fit.differs, fit.objectives)


def _no_part(problem: Problem, earlier: Any, source: str) -> None:
    """Refuse, naming the parts a composed ``problem`` could take, a study of another problem than it and those parts."""
    if earlier == problem.name or not isinstance(problem, ComposedProblem):
        return
    if isinstance(problem, PredictableComposition):
        parts = [problem.part(problem.predicted_part)]
    else:
        parts = [p for p in problem.part_list if _registered(p.problem.name)]
    named = ", ".join(f"{p.problem.name} (its part {p.key!r})" for p in parts)
    raise UserInputError(
        f"--kb-from {source!r}: a study of problem {earlier}, which is no part of {problem.name} that its knowledge maps onto; "
        f"give a study of {problem.name}" + (f" or of {named}" if named else "")
    )


def _registered(name: str) -> bool:
    """Whether ``name`` is a problem a study can be made of (a part may be a class only its composition builds)."""
    from coevo.search.problems import problem_names  # search.problems imports problem modules; keep this light

    return name in problem_names()


def part_of(problem: Problem, earlier: Any) -> str | None:
    """The key of the part of ``problem`` whose problem is named ``earlier``, when that part predicts ``problem``'s
    expensive objective (the predicted part of a :class:`~search.compose.PredictableComposition`); else None."""
    if earlier == problem.name or not isinstance(problem, PredictableComposition):
        return None
    key = problem.predicted_part
    return key if problem.part(key).problem.name == earlier else None


def heuristic_part_of(problem: Problem, earlier: Any) -> str | None:
    """The key of the part of ``problem`` that heuristics learned on problem ``earlier`` map onto; else None.

    The predicted part of a :class:`~search.compose.PredictableComposition` (:func:`part_of`);
    for any other composition, its one part whose problem is named ``earlier`` (deploy-cnn's
    ``bits`` for a ``quant`` study). Whether the parameters match is :func:`heuristic_compatibility`'s check.
    """
    if earlier == problem.name or not isinstance(problem, ComposedProblem):
        return None
    if isinstance(problem, PredictableComposition):
        return part_of(problem, earlier)
    keys = [p.key for p in problem.part_list if p.problem.name == earlier]
    return keys[0] if len(keys) == 1 else None


def heuristic_compatibility(problem: ComposedProblem, key: str, spec: Mapping[str, Any], *, source: str) -> Compatibility:
    """Check heuristics learned under ``spec`` against part ``key`` of ``problem`` (:func:`heuristic_part_of`).

    The predicted part of a composition that predicts: :func:`part_compatibility`. Any other
    part: :func:`compatibility` on the part (the same objectives, directions and units), and the
    earlier problem's parameters must be the part's, name for name and choice for choice: a claim
    names a parameter and one of its values, which must mean the same in the joint design. Other
    options may differ (a quant study that fine-tuned, a bits part that does not): its claims
    are then hypotheses the joint study's evidence tests, which ``coevo kb report`` shows.

    Raises:
        UserInputError: what :func:`compatibility` refuses, or parameters that differ, in one line.
    """
    if isinstance(problem, PredictableComposition):
        return part_compatibility(problem, key, spec, source=source)
    target = problem.part(key).problem
    fit = compatibility(target, spec, source=source)
    mine = target.distributions()
    differ = sorted(set(fit.parameters) ^ set(mine)) or sorted(n for n in mine if fit.parameters[n] != mine[n])
    if differ:
        shown = ", ".join(differ[:4]) + (f" and {len(differ) - 4} more" if len(differ) > 4 else "")
        raise UserInputError(
            f"--kb-from {source!r}: {target.name} is part {key!r} of {problem.name}, but its parameters differ ({shown}); "
            f"its heuristics would name parameters the joint design does not have: give a {target.name} study of the same model"
        )
    return fit


def heuristics_only(evidence: PriorEvidence, problem: Problem, use: str) -> UserInputError:
    """The error for ``--kb-from-use evaluations`` (or both) from a study of a part that brings heuristics only (module doc)."""
    earlier = evidence.spec.get("problem")
    return UserInputError(
        f"--kb-from {evidence.source!r}: a {earlier} study seeds part {evidence.part!r} of {problem.name} with its heuristics only "
        f"(its values are of {earlier} alone; {problem.name}'s depend on its other parts too), so --kb-from-use {use} cannot be met: "
        "use --kb-from-use heuristics or leave it out"
    )


def lift(problem: ComposedProblem, key: str, evaluations: list[Evaluation]) -> list[Evaluation]:
    """Part ``key``'s evaluations as joint points: the other parts drawn at random (seeded; module doc).

    An evaluation whose part point no draw of the other parts (16 tries) fits beside (a constraint
    between parts refuses them all) is left out.
    """
    rng = random.Random(0)
    index = [p.key for p in problem.part_list].index(key)
    out: list[Evaluation] = []
    for e in evaluations:
        for _ in range(16):
            other = problem.random_point(rng)
            point = (*other[:index], e.point, *other[index + 1 :])
            if problem.violation(point) is None:
                out.append(Evaluation(e.trial_number, point, problem.point_id(point), e.values, e.query, e.attrs))
                break
    return out


def nothing_paid(source: str) -> UserInputError:
    """The error for ``--kb-from-use evaluations`` from a source that paid for nothing (no study in the storage)."""
    return UserInputError(
        f"--kb-from {source!r} has no paid evaluations (it is no study in this storage); "
        "--kb-from-use evaluations needs an earlier study (or use heuristics for an export file)"
    )


def compatibility(problem: Problem, spec: Mapping[str, Any], *, source: str) -> Compatibility:
    """Check that evidence recorded under ``spec`` fits a search of ``problem``, and say what carries over.

    ``spec`` is the earlier problem's (a study's tag, or a heuristic's scope without its niche).
    Keys that are no option of ``problem`` (NB201's ``proxies``) are listed in ``differs`` when
    they differ, but only options decide what is shared. The earlier problem is rebuilt from
    ``spec`` with the class ``problem``'s name loads, keeping no cache, only to read its objectives.

    Args:
        problem: the new search's problem.
        spec: the earlier problem's spec.
        source: what ``--kb-from`` named (for the messages).

    Raises:
        UserInputError: ``spec`` names another problem, its options are not valid for
            ``problem``'s class, or its objectives differ by name, direction or unit.
    """
    earlier_name = spec.get("problem")
    if earlier_name != problem.name:
        raise UserInputError(
            f"--kb-from {source!r}: a study of problem {earlier_name}; this search is {problem.name} "
            f"(give a study or export of {problem.name})"
        )
    cls = _registered_class(problem)
    from coevo.search.problems import option_names  # search.problems imports problem modules; keep this light

    accepted = option_names(cls)
    try:
        options = cls.validate_options({k: v for k, v in spec.items() if k in accepted})
        earlier = cls.create(options, ProblemContext(storage=_NO_STORAGE))
    except UserInputError as exc:
        raise UserInputError(f"--kb-from {source!r}: its options are not valid for this search's problem: {exc}") from None
    here = problem.spec() | problem.options.model_dump(mode="json")  # NB201 query mode leaves its mode out of its spec
    differs = _differing(_normalized(spec, options.model_dump(mode="json"), accepted), here)
    _check_objectives(earlier.objectives, problem.objectives, source=source, differs=differs)
    shared = tuple(o.name for o in problem.objectives if o.cost == "expensive" and _carries_over(o, differs, accepted))
    return Compatibility(shared, differs, tuple(earlier.objectives), dict(earlier.distributions()))


def _registered_class(problem: Problem) -> type[Problem]:
    """The class ``problem``'s name or reference loads (its ``create`` picks the class of other options, NB201's modes)."""
    from coevo.search.problems import problem_class, problem_reference

    try:
        return problem_class(problem_reference(problem))
    except UserInputError:  # a class defined interactively: only this process has it
        return type(problem)


def _stored_study(storage: str | None, name: str) -> optuna.Study | None:
    """Study ``name`` in ``storage``, read only; None when there is none (or no storage yet: nothing is created)."""
    try:
        backend = open_storage(storage, create=False)
    except StorageMissingError:
        return None
    try:
        return optuna.load_study(study_name=name, storage=backend)
    except KeyError:
        return None


def _normalized(spec: Mapping[str, Any], options: dict[str, Any], accepted: set[str]) -> dict[str, Any]:
    """``spec`` with its options as validated (defaults filled, aliases under their names), other keys kept."""
    return {"problem": spec["problem"], **options, **{k: v for k, v in spec.items() if k not in accepted and k != "problem"}}


def _differing(earlier: Mapping[str, Any], here: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """option -> (earlier, here) for every key but ``problem`` whose values differ (a missing one is None)."""
    keys = sorted((set(earlier) | set(here)) - {"problem"})
    return {k: (earlier.get(k), here.get(k)) for k in keys if earlier.get(k) != here.get(k)}


def _carries_over(objective: Objective, differs: Mapping[str, Any], accepted: set[str]) -> bool:
    """Whether ``objective``'s values hold unchanged: no option it depends on differs (None: it depends on all of them)."""
    depends_on = accepted if objective.depends_on is None else set(objective.depends_on)
    return not depends_on & set(differs)


def _check_objectives(earlier: tuple[Objective, ...], here: tuple[Objective, ...], *, source: str, differs: Mapping[str, Any]) -> None:
    """Raise unless both problems have the same objectives with the same directions and units."""
    if {o.name for o in earlier} != {o.name for o in here}:
        raise UserInputError(
            f"--kb-from {source!r}: its objectives are {', '.join(o.name for o in earlier)}; "
            f"this search's are {', '.join(o.name for o in here)}, so its values do not carry over"
        )
    theirs = {o.name: o for o in earlier}
    for mine in here:
        other = theirs[mine.name]
        how = []
        if other.unit != mine.unit:
            how.append(f"its unit is {other.unit!r} there and {mine.unit!r} here")
        if other.direction != mine.direction:
            how.append(f"it is to {other.direction} there and to {mine.direction} here")
        if how:
            scalar = {k: (a, b) for k, (a, b) in differs.items() if not isinstance(a, dict | list) and not isinstance(b, dict | list)}
            why = ", ".join(f"{k} {a} there, {b} here" for k, (a, b) in scalar.items())
            raise UserInputError(
                f"--kb-from {source!r}: objective {mine.name} differs: {' and '.join(how)}"
                + (f" ({why})" if why else "")
                + "; its values do not carry over: give a study whose objectives match"
            )


def _value_names(study: optuna.Study, objectives: tuple[Objective, ...]) -> list[str]:
    """The objective of each trial value: the names the study recorded when it has them, else the earlier problem's order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        recorded = study.metric_names
    names = [o.name for o in objectives]
    return list(recorded) if recorded is not None and sorted(recorded) == sorted(names) else names


def _paid_evaluations(problem: Problem, study: optuna.Study, names: list[str]) -> list[Evaluation]:
    """The study's successful paid evaluations whose points are in ``problem``'s space, one per point, in trial order."""
    out: list[Evaluation] = []
    seen: set[str] = set()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if not _paid_success(trial, len(names)):
            continue
        point = _point_here(problem, trial.params)
        if point is None:
            continue
        point_id = problem.point_id(point)
        if point_id in seen:  # two workers may have paid for one point (a lease lost); its value counts once
            continue
        seen.add(point_id)
        assert trial.values is not None  # _paid_success checked it
        values = dict(zip(names, (float(v) for v in trial.values), strict=True))
        out.append(Evaluation(trial.number, point, point_id, values, True, dict(trial.user_attrs)))
    return out


def _paid_success(trial: FrozenTrial, n_values: int) -> bool:
    """Whether a COMPLETE trial paid for its values and got a finite one per objective."""
    if FAILURE in trial.user_attrs or not trial.user_attrs.get("query", True):
        return False  # a failed evaluation, or a repeat answered from an earlier trial (not paid)
    values = trial.values
    return values is not None and len(values) == n_values and all(math.isfinite(v) for v in values)


def _point_here(problem: Problem, params: Mapping[str, Any]) -> Any:
    """The point ``params`` encode in ``problem``'s space, or None where they are not one (another space's options)."""
    for name, dist in problem.distributions().items():
        if name not in params or not _within(dist, params[name]):
            return None
    try:
        return problem.from_params(params)
    except UserInputError:
        return None


def _within(dist: optuna.distributions.BaseDistribution, value: Any) -> bool:
    """Whether ``value`` is one of ``dist``'s (choices, or the range of a numeric one)."""
    if isinstance(dist, optuna.distributions.CategoricalDistribution):
        return value in dist.choices
    if isinstance(dist, optuna.distributions.FloatDistribution | optuna.distributions.IntDistribution):
        return isinstance(value, int | float) and not isinstance(value, bool) and dist.low <= value <= dist.high
    return True


__all__ = [
    "Compatibility",
    "PriorEvidence",
    "compatibility",
    "heuristic_compatibility",
    "heuristic_part_of",
    "heuristics_only",
    "lift",
    "part_compatibility",
    "part_of",
    "prior_evidence",
]
