"""A coevo search as an Optuna study: its tags, its evaluations, creating and reopening it.

A study is tagged with the problem spec, the proposer, the seed, the budget, the options
that shape the proposer (so any worker that joins rebuilds the same one), and a uid that
ties coevo's side tables (claims, round logs, LLM replies, knowledge base) to this study
and not to an earlier, deleted study of the same name.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import optuna
import sqlalchemy
from optuna.trial import FrozenTrial, TrialState

from coevo.search.coordination_tables import TAG_LEASE, release_lease, take_lease
from coevo.search.coordination_tables import metadata as coordination_metadata
from coevo.search.errors import UserInputError
from coevo.search.plugins import own_module, parse_reference
from coevo.search.problem import Problem
from coevo.search.proposers import Evaluation, Proposer
from coevo.search.side_tables import purge_side_tables
from coevo.search.storage import DEFAULT_STORAGE, DatabaseTimeouts, open_storage, require_writable, resolve_storage_url, side_engine

ATTR_SPEC = "coevo.problem"
ATTR_PROBLEM_REF = "coevo.problem_ref"
"""How to load the problem's class again: a registered name, or ``module:Class`` / ``/abs/path.py:Class`` (user problems)."""
ATTR_PROPOSER = "coevo.proposer"
ATTR_PROPOSER_OPTIONS = "coevo.proposer_options"
ATTR_SEED = "coevo.seed"
ATTR_BUDGET = "coevo.budget"
ATTR_UID = "coevo.uid"
ATTR_ROUND = "coevo.round"
"""The next co-evolution round (study attribute)."""
ATTR_WALL = "coevo.search_wall_s."
"""Prefix of the study attributes that hold each evaluating invocation's wall seconds, one attribute per invocation
(a random suffix: two invocations that end together cannot overwrite each other's, as a read-add-write of one sum
could); their sum is the study's search time (:func:`search_seconds`)."""


def search_seconds(study: optuna.Study) -> float | None:
    """Wall seconds of every invocation that evaluated for ``study``, summed (None: none recorded, a study from before)."""
    parts = [float(v) for k, v in study.user_attrs.items() if k.startswith(ATTR_WALL)]
    return round(sum(parts), 3) if parts else None


FAILURE = "failure"
"""Trial attribute: why its paid evaluation failed (a NaN, an exception, a timeout). A FAIL trial
with it is settled and paid for, never re-queued; a FAIL trial without it was left by a worker
that died or stopped, and its re-queued copy evaluates the point."""
INTERRUPTED = "interrupted"
"""Trial attribute: the worker was stopped (a signal) during its evaluation; not paid, its copy is re-queued."""
OUTCOME_ATTRS = (FAILURE, INTERRUPTED, "traceback")
"""What a trial's ending wrote, which its re-queued copy must not inherit."""


def default_study_name(problem: Problem, proposer: str, seed: int, variant: str = "") -> str:
    """``<problem>-<option values>-<proposer><variant>-s<seed>``, e.g. ``nb201-cifar10-fpga-tpe-s0``.

    Built from the problem's spec by :func:`spec_study_name`.
    """
    return spec_study_name(problem.spec(), proposer, seed, variant)


def spec_study_name(spec: Mapping[str, Any], proposer: str, seed: int, variant: str = "") -> str:
    """The default study name of the problem whose spec is ``spec`` (see :func:`default_study_name`).

    Every scalar option is in the name, in the spec's order (``noc-mesh-8-hotspot-0.3-0.7-3000-0-tpe-s0``),
    so runs that differ in any one of them are distinct studies; :func:`option_name_part` writes each value.
    """
    parts = [part for k, v in spec.items() if k != "problem" and (part := option_name_part(v)) is not None]
    return "-".join([str(spec["problem"]), *parts, proposer + variant, f"s{seed}"])


def option_name_part(value: Any) -> str | None:
    """How an option's value is written in a default study name; None for one left out (None, a nested setting).

    Strings and ints as they are (the names studies have always had). A float as its shortest
    round-tripping form (``0.05``, ``12.8``, ``1e-05``: two values never share a name), an
    integral one without its ``.0`` (the spec holds 1 and 1.0 equal too); a bool as ``true`` or
    ``false``. Floats and bools were once left out, so a sweep over one ran into a study of
    another value (docs/usage.md says what that means for such older studies).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value).removesuffix(".0")
    if isinstance(value, str | int):
        return str(value)
    return None  # None (an unset optional option) and nested settings: not part of a name


def evaluations_from_study(problem: Problem, study: optuna.Study) -> list[Evaluation]:
    """Every completed trial of ``study`` with a finite value per objective as an :class:`Evaluation`, in trial order.

    Failed evaluations are not evaluations (their points are still seen: they hold claims), and
    neither is a COMPLETE trial with a non-finite value or another number of values (a study
    written before evaluations were checked): the proposers never see them.
    """
    out = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if t.values is None or len(t.values) != len(problem.objectives) or not all(math.isfinite(v) for v in t.values):
            continue
        point = problem.from_params(t.params)
        values = {o.name: v for o, v in zip(problem.objectives, t.values, strict=True)}
        out.append(Evaluation(t.number, point, problem.point_id(point), values, bool(t.user_attrs.get("query", True)), dict(t.user_attrs)))
    return out


def failed_evaluation(trial: FrozenTrial) -> bool:
    """Whether ``trial`` ended FAIL because its (paid) evaluation failed, not because its worker died."""
    return trial.state == TrialState.FAIL and FAILURE in trial.user_attrs


def failed_evaluations(study: optuna.Study) -> list[FrozenTrial]:
    """The trials of ``study`` whose paid evaluation failed, in trial order."""
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,)) if failed_evaluation(t)]


def paid_count(study: optuna.Study) -> int:
    """Evaluations of ``study`` that paid for the expensive objectives: complete queries and failed evaluations."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
    return sum(bool(t.user_attrs.get("query", True)) if t.state == TrialState.COMPLETE else failed_evaluation(t) for t in trials)


def study_uid(study: optuna.Study) -> str:
    """The study's uid (given to studies made before uids existed on first use)."""
    uid = study.user_attrs.get(ATTR_UID)
    if not isinstance(uid, str):
        uid = uuid.uuid4().hex
        study.set_user_attr(ATTR_UID, uid)
    return uid


@dataclass(frozen=True)
class OpenedStudy:
    """What :func:`open_study` found or made."""

    study: optuna.Study
    created: bool
    budget: int
    """The budget now stored (a smaller one than the evaluations already made is not stored)."""
    paid: int
    """Evaluations already paid for when it was opened."""
    notes: tuple[str, ...] = ()
    """What was cleared when it was created (rows of an earlier, deleted study of the same name)."""


def open_study(problem: Problem, proposer: Proposer, *, storage: str | None, study_name: str, seed: int, budget: int) -> optuna.Study:
    """Create the study or reopen it with the same options; records the budget (see :func:`open_or_create`)."""
    return open_or_create(problem, proposer, storage=storage, study_name=study_name, seed=seed, budget=budget).study


def open_or_create(problem: Problem, proposer: Proposer, *, storage: str | None, study_name: str, seed: int, budget: int) -> OpenedStudy:
    """Create the study (tagged with problem, proposer, seed, uid) or reopen it with the same options.

    A new study first clears coevo's side tables of any earlier study of the same name (one
    removed with ``optuna delete-study``, say). The budget is stored unless it is below the
    evaluations already paid for: then the stored budget stays, and the caller says so.

    Raises:
        UserInputError: the study exists for another problem or proposer.
        StorageError: the storage cannot be opened, or is a SQLite file this process cannot write.
    """
    if resolve_storage_url(storage) == "sqlite:///:memory:":
        raise UserInputError(
            "sqlite:///:memory: cannot hold a search: every connection (workers, heartbeats) would see another, empty "
            f"database; use a file, e.g. {DEFAULT_STORAGE}"
        )
    proposer.check_storage(storage)  # before anything is written: a corrupt knowledge store must not cost the study a change
    require_writable(storage)
    backend = open_storage(storage)
    created = False
    notes: list[str] = []
    try:
        study = optuna.load_study(study_name=study_name, storage=backend, sampler=proposer.sampler(problem, seed))
    except KeyError:
        try:
            with _no_study_created_line():
                study = optuna.create_study(
                    study_name=study_name, storage=backend, directions=list(problem.directions), sampler=proposer.sampler(problem, seed)
                )
        except optuna.exceptions.DuplicatedStudyError:  # another process created it a moment ago
            study = optuna.load_study(study_name=study_name, storage=backend, sampler=proposer.sampler(problem, seed))
        else:
            created = True
            cleared = purge_side_tables(storage, study_name)
            if cleared:
                notes = [f"a new study {study_name!r} was created; an earlier, deleted study of that name had left: {'; '.join(cleared)}"]
    _tag_once(study, problem, proposer, seed, storage, created=created)
    attrs = study.user_attrs  # one read of the tag (each access is a query on a database storage)
    stored = attrs.get(ATTR_SPEC)
    same = _same_problem(stored, attrs.get(ATTR_PROBLEM_REF), problem)
    if not same or attrs.get(ATTR_PROPOSER) != proposer.name:
        raise UserInputError(
            f"study {study_name!r} already exists for problem {stored} with proposer "
            f"{attrs.get(ATTR_PROPOSER)!r}; pass another --study name or the same options"
        )
    stored_seed = attrs.get(ATTR_SEED)
    if not created and stored_seed is not None and stored_seed != seed:
        # not refused: going on with other randomness is a fair thing to want; but the study keeps its own seed
        notes.append(
            f"study {study_name!r} was created with seed {stored_seed}; this run's proposals are seeded from {seed}, and the "
            f"study keeps seed {stored_seed}"
        )
    study_uid(study)
    study.set_user_attr(ATTR_PROPOSER_OPTIONS, proposer.options())
    paid = 0 if created else paid_count(study)
    stored_budget = int(study.user_attrs.get(ATTR_BUDGET, 0))
    if budget >= paid or not stored_budget:
        study.set_user_attr(ATTR_BUDGET, budget)
        stored_budget = budget
    return OpenedStudy(study, created, stored_budget, paid, tuple(notes))


def _same_problem(stored: Any, reference: Any, problem: Problem) -> bool:
    """Whether a study's recorded spec names ``problem`` (a study recorded before an option was added or renamed still does)."""
    from coevo.search.problems import normalized_spec

    spec = problem.spec()
    if stored == spec:
        return True
    if not isinstance(stored, dict) or stored.get("problem") != spec.get("problem"):
        return False
    try:
        ref = str(reference) if reference else None
        return normalized_spec(stored, reference=ref) == normalized_spec(spec, reference=ref)
    except UserInputError:
        return False


class _DropStudyCreated(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("A new study created")


@contextmanager
def _no_study_created_line() -> Iterator[None]:
    # Optuna logs "A new study created in RDB with name: ..." at INFO for every create_study, so
    # `coevo.optimize` printed it into the caller's output (the CLI quiets Optuna as a whole). The
    # study is coevo's own bookkeeping and the result names it: only that record is dropped, only
    # during the call; the caller's logging settings are not touched.
    logger = logging.getLogger("optuna.storages._rdb.storage")  # the module that logs it
    drop = _DropStudyCreated()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def _tag(study: optuna.Study, problem: Problem, proposer: Proposer, seed: int) -> None:
    from coevo.search.problems import problem_reference

    study.set_user_attr(ATTR_PROBLEM_REF, problem_reference(problem))
    study.set_user_attr(ATTR_PROPOSER, proposer.name)
    study.set_user_attr(ATTR_SEED, seed)
    study.set_user_attr(ATTR_UID, uuid.uuid4().hex)
    # optuna-dashboard and trials_dataframe() show objective names instead of "Objective 0"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names([o.name for o in problem.objectives])
    study.set_user_attr(ATTR_SPEC, problem.spec())  # last: a study with its spec is tagged whole (see _tag_once)


TAG_LEASE_S = 30.0
"""How long a process may take to tag a study it created before another may adopt it (one that died untagged)."""


def _tag_once(study: optuna.Study, problem: Problem, proposer: Proposer, seed: int, storage: str | None, *, created: bool) -> None:
    """Tag an untagged study, or wait until the process tagging it has (the caller then checks the tag is its own).

    Two searches started together on a new name (with other options, say) both found the study
    untagged, one as its creator and one loading it a moment later, and both tagged it: the study
    said one proposer while the other's trials filled it. Whoever takes the study's ``tag`` lease
    tags; the others wait for the tag. A creator that died before tagging lets its lease expire
    after :data:`TAG_LEASE_S`, and the next search adopts the study (when it has no trials yet).
    """
    if study.user_attrs.get(ATTR_SPEC) is not None:
        return  # the common case: a study resumed
    engine = side_engine(storage, coordination_metadata)
    owner = uuid.uuid4().hex
    try:
        while study.user_attrs.get(ATTR_SPEC) is None:
            if take_lease(engine, study.study_name, TAG_LEASE, owner, TAG_LEASE_S):
                try:
                    if study.user_attrs.get(ATTR_SPEC) is None and (created or not study.get_trials(deepcopy=False)):
                        _tag(study, problem, proposer, seed)
                finally:  # a failed tagging lets the next search in at once, not after the lease's expiry
                    with suppress(sqlalchemy.exc.SQLAlchemyError, OSError):  # it expires anyway: never the error
                        release_lease(engine, study.study_name, TAG_LEASE, owner)
                return  # tagged here, by the process before, or not to be adopted (it has trials): the caller's check says
            time.sleep(0.2)
    finally:
        engine.dispose()


@dataclass(frozen=True)
class StoredSearch:
    """A finished or running search, read back from storage (:func:`search.runner.stored_summary` scores it)."""

    study: optuna.Study
    problem: Problem
    proposer: str
    seed: int
    budget: int
    proposer_options: dict[str, Any]


def load_search(storage: str | None, study_name: str, *, create: bool = True, timeouts: DatabaseTimeouts | None = None) -> StoredSearch:
    """Open study ``study_name`` and rebuild its problem from the recorded spec.

    Args:
        storage: the storage URL.
        study_name: the study.
        create: False for read-only callers: a storage that does not exist yet is an error
            (nothing is created).
        timeouts: bounds on each wait on the database (default: :func:`search.storage.open_storage`'s).

    Raises:
        UserInputError: no such study (the message lists the studies there), or it was not made by coevo.
        StorageError: the storage cannot be opened.
    """
    return reopen(open_stored_study(storage, study_name, create=create, timeouts=timeouts), storage)


def open_stored_study(
    storage: str | None, study_name: str, *, create: bool = True, timeouts: DatabaseTimeouts | None = None
) -> optuna.Study:
    """Open study ``study_name`` of a coevo search without rebuilding its problem (no user code is imported).

    Raises:
        UserInputError: no such study (the message lists the studies there), or it was not made by coevo.
        StorageError: the storage cannot be opened (with ``create=False``: it holds nothing yet).
    """
    backend = open_storage(storage, create=create, timeouts=timeouts)
    try:
        study = optuna.load_study(study_name=study_name, storage=backend)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(backend, include_best_trial=False)]
        listed = ", ".join(names[:10]) + (" ..." if len(names) > 10 else "") if names else "none"
        raise UserInputError(f"no study {study_name!r} in {resolve_storage_url(storage)} (studies: {listed})") from None
    spec = study.user_attrs.get(ATTR_SPEC)
    if not isinstance(spec, dict) or "problem" not in spec:
        raise UserInputError(f"study {study_name!r} was not created by coevo (it has no problem spec)")
    return study


def stored_code(study: optuna.Study) -> list[str]:
    """The user code that rebuilding ``study``'s problem would import: its problem's file or module, code named by its options.

    Read from the study's tags (nothing is imported): a built-in or installed problem names no code.
    """
    spec = study.user_attrs.get(ATTR_SPEC)
    if not isinstance(spec, dict):
        return []
    reference = study.user_attrs.get(ATTR_PROBLEM_REF) or spec.get("problem")
    options = [v for k, v in spec.items() if k != "problem"]
    code = []
    for value in [reference, *options]:
        ref = parse_reference(value)
        if ref is not None and (ref.is_file or not own_module(ref.target)):  # a study older than the rename names coevo's own
            code.append(str(value))
    return code


def reopen(study: optuna.Study, storage: str | None) -> StoredSearch:
    """``study`` (from :func:`open_stored_study`) with its problem rebuilt from the recorded spec (imports its code, if any).

    Raises:
        UserInputError: the problem cannot be rebuilt (its file is gone, fails to import, ...).
    """
    from coevo.search.problems import problem_from_spec  # search.problems imports problem modules; keep this light

    study_name = study.study_name
    spec = study.user_attrs[ATTR_SPEC]
    reference = study.user_attrs.get(ATTR_PROBLEM_REF)
    try:
        problem = problem_from_spec(spec, reference=str(reference) if reference else None, storage=storage)
    except UserInputError as exc:
        raise UserInputError(f"study {study_name!r} cannot be reopened: {exc}") from None
    stored_options = study.user_attrs.get(ATTR_PROPOSER_OPTIONS)
    return StoredSearch(
        study,
        problem,
        str(study.user_attrs.get(ATTR_PROPOSER, "?")),
        int(study.user_attrs.get(ATTR_SEED, 0)),
        int(study.user_attrs.get(ATTR_BUDGET, 0)),
        dict(stored_options) if isinstance(stored_options, dict) else {},
    )
