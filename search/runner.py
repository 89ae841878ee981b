"""The study runner: one proposer, one problem, a budget, on Optuna storage.

Query mode (docs/design.md): the budget counts evaluations of the problem's expensive objectives
(for NB201, accuracy queries). A point proposed again is answered from the study's own
records and costs nothing. The found set is every evaluated point.

A search is one worker of :mod:`search.workers` on its study, so it takes a claim on every
point it pays for, and ``coevo worker`` processes joining it share the budget exactly.

Resuming: rerunning with the same study name continues where the stored trials end.
Trials left RUNNING by a killed process are failed and re-queued at once when their
process is certainly gone (see :meth:`search.workers.Worker.run`); enqueued proposals not
yet evaluated are kept.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import optuna

from coevo.search.errors import UserInputError
from coevo.search.few_shot import predicted_front
from coevo.search.informed import Evidence, Information, free_sources
from coevo.search.metrics import FrontMetrics, FrontReference, pareto_mask
from coevo.search.niches import niche_of
from coevo.search.problem import Evolvable, Predictable, Problem
from coevo.search.proposers import Evaluation, Proposer, get_proposer
from coevo.search.storage import closing_idle_connections, resolve_storage_url
from coevo.search.strict_json import strict_dumps
from coevo.search.study import (
    ATTR_WALL,
    FAILURE,
    StoredSearch,
    default_study_name,
    evaluations_from_study,
    failed_evaluations,
    open_or_create,
    search_seconds,
)
from coevo.search.work_progress import report
from coevo.search.workers import Progress, Worker, WorkerSettings


@dataclass
class SearchResult:
    """Summary of a search (also the ``--json`` output of ``coevo search``).

    ``wall_s`` is this invocation's wall time, in seconds: from the start of the command (``coevo
    search`` passes its start, so building the problem and the proposer count; a caller that
    passes none, from the call of :func:`run_search`) until the result was scored, the final
    scoring included (the few-shot prediction stage, the zero-cost front's true values).
    ``evaluations`` counts budgeted evaluations that gave a result, ``failed`` those that failed
    (a NaN, an exception, a timeout: counted all the same, so :attr:`budget_used` =
    ``evaluations + failed`` is what the budget counted), and ``trials`` every trial of the
    study (duplicates answered from the study included). :attr:`paid` is the part of the
    budget that paid for the expensive objectives: all of it, except in zero-cost mode
    (``found_set`` ``front``), where the budget counts evaluations on proxy estimates and
    nothing is paid (``expensive_queries`` and ``information["paid"]`` are 0 there too).
    """

    study: str
    storage: str
    problem: dict[str, Any]
    proposer: str
    seed: int
    budget: int
    evaluations: int
    expensive_queries: int
    """Evaluations that read the problem's true expensive objectives (0 when they were estimated, e.g. NB201 zero-cost)."""
    trials: int
    wall_s: float
    hv_ratio: float | None
    igd: float | None
    front_recall: float | None
    front: list[dict[str, Any]]
    hv_history: list[float] = field(default_factory=list)
    stopped: str | None = None
    found_set: str = "all"
    """``all``: every evaluation was scored on the true objectives; ``front``: objectives were
    estimated during the search and only the reported front was scored afterwards;
    ``predicted``: the paid evaluations trained a predictor, and the front of paid and
    predicted designs was reported, then scored on the truth (few-shot mode)."""
    reported: int = 0
    """Designs in the found set, the set scored on the truth (``all``: every paid evaluation; otherwise the designs reported:
    the front under the estimates or predictions, scored afterwards). ``front`` holds those of them non-dominated on the
    true objectives, so it can be shorter."""
    reasoner: str | None = None
    llm_usage: dict[str, Any] | None = None
    exploration: dict[str, Any] = field(default_factory=dict)
    """Where the evaluations went: counts per niche and per band of the second objective (exploration bias)."""
    notes: list[str] = field(default_factory=list)
    """What the run noticed and left as it was (e.g. a budget below the evaluations already made)."""
    failed: int = 0
    """Paid evaluations that failed (each counted once against the budget, never re-evaluated)."""
    failures: list[dict[str, Any]] = field(default_factory=list)
    """Each failed evaluation: its trial, point id, design and why it failed (``failure``)."""
    information: dict[str, Any] = field(default_factory=dict)
    """What the search could use (:class:`search.informed.Information`): free sources, paid evaluations, earlier studies."""
    answered: int = 0
    """Trials answered free from the study (a design proposed again); the rest of ``trials`` beyond the paid ones
    were skipped, interrupted and re-queued, or are still waiting or running (a stopped search)."""
    search_wall_s: float | None = None
    """Wall seconds of every invocation that evaluated for this study, summed (``wall_s`` is this invocation's alone: a
    rerun that finds the study finished takes a second); None where no invocation evaluated (budget 0: the scoring's
    time is ``wall_s``) or for a study searched before coevo recorded it."""

    @property
    def budget_used(self) -> int:
        """Evaluations the budget counted: those with a result and those that failed (in every mode)."""
        return self.evaluations + self.failed

    @property
    def paid(self) -> int:
        """Evaluations that paid for the expensive objectives: :attr:`budget_used`, or 0 where the search only estimated
        them (zero-cost mode: the budget counts proxy evaluations, and no accuracy is paid for)."""
        return self.budget_used if pays_expensive(self.found_set) else 0

    def to_json(self, *, history: bool = False) -> str:
        """One JSON object; the per-evaluation HV history only when asked."""
        data = asdict(self) | {"budget_used": self.budget_used, "paid": self.paid}
        if not history:
            data.pop("hv_history")
        return strict_dumps(data)


def unpaid_word(found_set: str) -> str:
    """What a reported design nothing was paid for is: ``estimated`` (zero-cost mode's proxies) or ``predicted``."""
    return "predicted" if pays_expensive(found_set) else "estimated"


def pays_expensive(found_set: str) -> bool:
    """Whether a search of a problem with this :attr:`~search.problem.Problem.found_set` pays for its expensive objectives.

    Only ``front`` (NB201 zero-cost mode) estimates them during the search: its budget counts
    evaluations on the estimate, and the reported front is scored on the truth afterwards for free.
    """
    return found_set != "front"


@closing_idle_connections()  # a long process runs many searches: their connections close as each ends
def run_search(
    problem: Problem,
    proposer: str | Proposer,
    *,
    budget: int,
    seed: int = 0,
    storage: str | None = None,
    study_name: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    settings: WorkerSettings | None = None,
    on_open: Callable[[str], None] | None = None,
    eval_timeout_s: float | None = None,
    started: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> SearchResult:
    """Run (or resume) a search until ``budget`` expensive evaluations.

    The search is one worker (:class:`search.workers.Worker`) on the study: it claims every
    point before paying for it, so ``coevo worker`` processes may join it at any time, from
    any machine sharing the storage, and the study still pays exactly the budget.

    Args:
        problem: the problem to search.
        proposer: a registered proposer name or an instance.
        budget: evaluations to make (0 or more): paid ones of the expensive objectives, or in zero-cost mode evaluations on
            their estimate (none paid); a resumed study counts what it has.
            A budget below the evaluations already made changes nothing (the result says so).
        seed: seed of the proposer's randomness.
        storage: Optuna storage URL; None for the default SQLite file under ./runs/.
        study_name: defaults to :func:`default_study_name`.
        on_progress: called after every paid evaluation of this process.
        settings: heartbeat and fault-tolerance timing (defaults: :class:`WorkerSettings`).
        on_open: called with the study name once the study exists, before this process
            starts working (``coevo search --workers N`` starts the other workers there).
        eval_timeout_s: seconds one evaluation may take (None: the problem's ``eval_timeout_s``).
            An evaluation that fails (times out, raises, gives a NaN or no value) fails its
            trial, is paid for, and the search goes on.
        started: the ``clock`` reading the result's ``wall_s`` counts from (the command's start);
            None: now.
        clock: the time function of ``wall_s`` (seconds); tests pass a fake one.

    Raises:
        UserInputError: budget < 0, a seed out of range, or the study exists for another problem/proposer.
        StorageError: the storage cannot be opened.
    """
    check_budget(budget)
    check_seed(seed)
    proposer = get_proposer(proposer)
    name = study_name or study_name_of(problem, proposer, seed)
    started = clock() if started is None else started
    opened = open_or_create(problem, proposer, storage=storage, study_name=name, seed=seed, budget=budget)
    notes = list(opened.notes)
    stopped = None
    if budget <= opened.paid:
        # nothing left to pay for: no worker is started here or by on_open (`--workers N` would start N - 1 for nothing),
        # and the progress display is told so, rather than showing a count that never moves
        if budget < opened.paid:
            notes.append(
                f"study {name!r} already has {opened.paid} evaluations, more than --budget {budget}: nothing to do, its budget "
                f"stays {opened.budget} (pass a budget above {opened.paid} to extend it)"
            )
        elif budget > 0:
            notes.append(
                f"study {name!r} already has the {budget} evaluations of its budget: nothing new to evaluate (a larger budget extends it)"
            )
        if on_progress is not None:
            on_progress(Progress(opened.paid, opened.budget, len(opened.study.get_trials(deepcopy=False)), None, idle=True))
    else:
        if on_open is not None:
            on_open(name)
        worker = Worker(
            problem,
            proposer,
            storage=storage,
            study_name=name,
            seed=seed,
            settings=settings,
            on_progress=on_progress,
            eval_timeout_s=eval_timeout_s,
        )
        try:
            stopped = worker.run().stopped
        except BaseException:
            # an invocation that died (an exception out of the worker, Ctrl-C outside its handler) searched all the same:
            # its seconds count in the study's search time. A dead storage must not hide the original error
            with suppress(Exception):
                _record_search_time(opened.study, clock() - started if budget > opened.paid else 0.0)
            raise
    result = summarize(
        problem,
        opened.study,
        proposer=proposer.name,
        seed=seed,
        budget=opened.budget,
        storage=storage,
        wall_s=0.0,  # set below: the scoring counts too (few-shot's prediction stage, which reports its own progress, takes seconds)
        history=True,
        stopped=stopped,
        evidence=getattr(proposer, "loaded_evidence", ()),
    )
    result.notes = notes + result.notes
    reasoner = getattr(proposer, "reasoner", None)
    if reasoner is not None:
        result.reasoner = reasoner.label
        result.llm_usage = reasoner.usage.as_dict()
    result.wall_s = round(clock() - started, 3)
    _record_search_time(opened.study, result.wall_s if budget > opened.paid else 0.0)
    result.search_wall_s = search_seconds(opened.study)
    return result


def study_name_of(problem: Problem, proposer: Proposer, seed: int) -> str:
    """The default study name of a search of ``problem`` by ``proposer``: :func:`default_study_name` with the proposer's
    variant (a ``kb_from`` run, another LLM model, another screening is another study)."""
    return default_study_name(problem, proposer.name, seed, proposer.variant)


def _record_search_time(study: optuna.Study, seconds: float) -> None:
    """Record ``seconds`` of this invocation in the study (when it evaluated: ``seconds`` > 0); :func:`search_seconds` sums them."""
    if seconds > 0:
        study.set_user_attr(f"{ATTR_WALL}{uuid.uuid4().hex[:12]}", round(seconds, 3))


MAX_SEED = 2**22 - 1
"""Largest seed: later workers sample with ``seed * 1000 + n``, and Optuna's samplers take seeds below 2**32."""


def budget_problem(budget: int) -> str | None:
    """What is wrong with ``budget`` (``must be ..., got N``, to follow its name), None when nothing is.

    The one statement of the rule: :func:`check_budget` and :class:`~search.config.SearchConfig` both read it.
    """
    if budget < 0:
        return f"must be a number of evaluations, 0 or more (0: the front the free information predicts), got {budget}"
    return None


def seed_problem(seed: int) -> str | None:
    """What is wrong with ``seed`` (``must be ..., got N``), None when it is from 0 to :data:`MAX_SEED`."""
    if not 0 <= seed <= MAX_SEED:
        return f"must be an integer from 0 to {MAX_SEED}, got {seed}"
    return None


def check_budget(budget: int) -> None:
    """Raise :class:`UserInputError` unless ``budget`` is 0 or more (:func:`budget_problem`)."""
    if (problem := budget_problem(budget)) is not None:
        raise UserInputError(f"budget {problem}")


def check_seed(seed: int) -> None:
    """Raise :class:`UserInputError` unless ``0 <= seed <= MAX_SEED`` (:func:`seed_problem`)."""
    if (problem := seed_problem(seed)) is not None:
        raise UserInputError(f"seed {problem}")


def summarize(
    problem: Problem,
    study: optuna.Study,
    *,
    proposer: str,
    seed: int,
    budget: int,
    storage: str | None,
    wall_s: float,
    history: bool = False,
    stopped: str | None = None,
    evaluations: list[Evaluation] | None = None,
    trials: int | None = None,
    evidence: Sequence[Evidence] = (),
) -> SearchResult:
    """Score a study's found set (every budgeted evaluation) against the problem's true front.

    ``history`` adds the HV ratio after every paid evaluation, in trial order (problems with
    an exact front whose found set is every evaluation). ``evaluations`` and ``trials``, when
    the caller already holds them, spare re-reading the study. ``evidence``: the earlier
    studies the search was seeded with (``--kb-from``), for the prediction stage and the
    result's declaration of what it used.
    """
    if evaluations is None:
        evaluations = evaluations_from_study(problem, study)
    if trials is None:
        trials = len(study.get_trials(deepcopy=False))
    answered = sum(1 for e in evaluations if not e.query)  # a design proposed again, answered from the study
    paid = [e for e in evaluations if e.query]
    notes: list[str] = []
    failures = [_failure_row(t) for t in failed_evaluations(study)]
    found = _found_set(problem, paid, seed, notes, evidence)
    information = _information(problem, paid, evidence)
    first, second = problem.front_objectives
    y1 = np.array([e.values[first] for e in found])
    y2 = np.array([e.values[second] for e in found])
    ids = [e.point_id for e in found]
    ref = problem.reference()
    metrics = FrontMetrics.score(ref, ids, y1, y2) if ref else None
    hv_history = ref.hv_history(y1.tolist(), y2.tolist()) if history and ref and problem.found_set == "all" else []
    front = _front_rows(problem, found, y1, y2)
    if found and (problem.found_set != "all" or not paid):
        # the reported designs are a front under estimates or predictions: on the truth some of them dominate others
        predicted = sum(not row["paid"] for row in front)
        notes.append(
            f"front: {len(front)} of the {len(found)} reported designs are non-dominated on the true objectives "
            f"({len(front) - predicted} paid, {predicted} {unpaid_word(problem.found_set)})"
        )
    notes.append(information.line())
    return SearchResult(
        study=study.study_name,
        storage=resolve_storage_url(storage),
        problem=problem.spec(),
        proposer=proposer,
        seed=seed,
        budget=budget,
        evaluations=len(paid),
        expensive_queries=len(paid) if pays_expensive(problem.found_set) else 0,
        reported=len(found),
        found_set=problem.found_set,
        trials=trials,
        answered=answered,
        wall_s=round(wall_s, 3),
        hv_ratio=metrics.hv_ratio if metrics else None,
        igd=metrics.igd if metrics else None,
        front_recall=metrics.front_recall if metrics else None,
        front=front,
        hv_history=hv_history,
        stopped=stopped,
        exploration=exploration_histogram(problem, [e.point for e in found], y2, ref),
        notes=notes,
        failed=len(failures),
        failures=failures,
        information=information.as_dict(),
    )


def _information(problem: Problem, paid: Sequence[Evaluation], evidence: Sequence[Evidence]) -> Information:
    """What the search could use: free sources, the evaluations it paid for, the earlier studies it was given."""
    transferred = tuple(_transferred(ev) for ev in evidence)
    return Information(free_sources(problem), len(paid) if pays_expensive(problem.found_set) else 0, transferred)


def _transferred(ev: Evidence) -> str:
    """One earlier study's phrase in :class:`Information`: its paid evaluations, and the part they seeded (a part's study)."""
    line = f"{ev.source}: {len(ev.evaluations)} paid evaluations"
    part = getattr(ev, "part", None)
    return line if part is None else f"{line} seeded part {part} (its {', '.join(ev.shared)} as labels)"


def _failure_row(trial: optuna.trial.FrozenTrial) -> dict[str, Any]:
    """A failed evaluation as the summary lists it."""
    attrs = trial.user_attrs
    return {"trial": trial.number, "point_id": attrs.get("point_id"), "design": attrs.get("design"), "failure": attrs[FAILURE]}


def _found_set(
    problem: Problem, paid: list[Evaluation], seed: int, notes: list[str], evidence: Sequence[Evidence] = ()
) -> list[Evaluation]:
    """The set a search is scored on, with true values: every paid evaluation, or the reported front (appends a note).

    With nothing paid, a problem with a label-free prior reports the zero-information front
    (the front under the prior, or an earlier study's model), labelled as such in the notes.
    """
    if not paid and not (isinstance(problem, Predictable) and isinstance(problem, Evolvable)):
        return paid
    if problem.found_set == "front" and paid:
        return _estimated_front(problem, paid, notes)
    if problem.found_set == "predicted" or not paid:
        # few-shot: a predictor trained on the paid evaluations scores more designs; the front of
        # paid and predicted is reported, and only now scored on the truth
        stage = predicted_front(problem, paid, seed=seed, evidence=evidence)
        notes.append(stage.note)
        return _truly_scored(problem, stage.reported, keep_paid=True)
    return paid


def _estimated_front(problem: Problem, paid: list[Evaluation], notes: list[str]) -> list[Evaluation]:
    """Estimated objectives (NB201 zero-cost mode): the front under the estimates, then scored truly."""
    first, second = problem.front_objectives
    evaluations = paid
    searched = f"zero-cost: the front is taken over the {len(paid)} searched designs"
    pool = problem.free_designs() if isinstance(problem, Predictable) else None
    if pool and isinstance(problem, Predictable) and isinstance(problem, Evolvable):
        # designs with free estimates join the searched ones (unpaid: no expensive query either way)
        seen = {e.point_id for e in paid}
        fresh = [p for p in pool if problem.point_id(p) not in seen]
        prior, cheap = problem.prior(fresh), problem.cheap_values(fresh)[second]
        evaluations = paid + [
            Evaluation(-1, p, problem.point_id(p), {first: float(a), second: float(c)}, True, {"free": True})
            for p, a, c in zip(fresh, prior, cheap, strict=True)
        ]
        searched += f" and {len(fresh)} more with free proxy scores"
    est = pareto_mask(np.array([e.values[first] for e in evaluations]), np.array([e.values[second] for e in evaluations]))
    notes.append(f"{searched}; reported: the {int(est.sum())} designs of the estimated front (scored on the truth only afterwards)")
    return _truly_scored(problem, [e for e, keep in zip(evaluations, est, strict=True) if keep], keep_paid=False)


TRUTH = "scoring the reported designs on the true objectives"
"""What scoring the reported designs (an estimated or predicted front) on the truth is reported as
(:mod:`search.work_progress`): after the search's last evaluation, one true evaluation per design (a table lookup
for NB201, longer for a problem that measures)."""


def _truly_scored(problem: Problem, evaluations: Sequence[Evaluation], *, keep_paid: bool) -> list[Evaluation]:
    """Each evaluation with the problem's true values (a paid one as it stands when ``keep_paid``), reporting how far it is."""
    scored: list[Evaluation] = []
    for k, e in enumerate(evaluations):
        report(f"{TRUTH}: {k} of {len(evaluations)} designs", k / len(evaluations))
        if keep_paid and e.query:
            scored.append(e)
        else:
            scored.append(Evaluation(e.trial_number, e.point, e.point_id, problem.true_values(e.point), e.query, e.attrs))
    if evaluations:
        report(f"{TRUTH}: {len(evaluations)} of {len(evaluations)} designs", 1.0)
    return scored


def front_columns(problem: Problem) -> list[str]:
    """The objectives in the order front tables show them: the minimised one of the front's pair first (the front reads
    fastest first), then the maximised one, then any others."""
    names = [o.name for o in problem.objectives]
    first, second = problem.front_objectives
    return [second, first, *(n for n in names if n not in (first, second))]


def _front_rows(problem: Problem, found: list[Evaluation], y1: np.ndarray, y2: np.ndarray) -> list[dict[str, Any]]:
    """The found set's non-dominated designs with every objective (not only the front's pair), by the second objective."""
    second = problem.front_objectives[1]
    # keys in the order every front table shows them (coevo search's, and chat's, which renders a tool result's records
    # in key order): the objectives as front_columns orders them, point id, paid, then the design
    shown = front_columns(problem)
    front: list[dict[str, Any]] = [
        {
            **{n: float(found[i].values[n]) for n in shown},
            "point_id": found[i].point_id,
            # a predicted design is reported with its true values, but nothing was paid to learn them
            "paid": bool(found[i].query) and pays_expensive(problem.found_set),
            problem.design_label: problem.describe(found[i].point),
        }
        for i in np.flatnonzero(pareto_mask(y1, y2))
    ]
    front.sort(key=lambda row: (row[second], row["point_id"]))
    return front


BANDS = 5
"""Equal-width bands of the second (minimised) objective in exploration histograms."""


def band_edges(ref: FrontReference | None, second: np.ndarray) -> np.ndarray:
    """Edges of :data:`BANDS` equal-width bands of the second objective: over the whole space's range when the
    reference knows it, widened to the evaluated values that fall outside it (a reference built on part of a
    space, e.g. nb201-accel's); over the evaluated values otherwise."""
    values = np.asarray(second, dtype=float)
    lo, hi = (ref.second_min, ref.second_max) if ref else ((float(values.min()), float(values.max())) if len(values) else (0.0, 1.0))
    if len(values):
        lo, hi = min(lo, float(values.min())), max(hi, float(values.max()))
    return np.linspace(lo, hi, BANDS + 1)


def band_of(edges: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The band (0 to ``BANDS - 1``) of each value; the top edge belongs to the top band."""
    return np.clip(np.searchsorted(edges, np.asarray(second, dtype=float), side="right") - 1, 0, len(edges) - 2)


def stored_summary(stored: StoredSearch, storage: str | None) -> SearchResult:
    """A stored search's found set scored as :func:`summarize` does (no wall time: nothing ran here)."""
    return summarize(
        stored.problem, stored.study, proposer=stored.proposer, seed=stored.seed, budget=stored.budget, storage=storage, wall_s=0.0
    )


def exploration_histogram(problem: Problem, points: list[Any], second: np.ndarray, ref: FrontReference | None) -> dict[str, Any]:
    """Counts of evaluated points per niche of the problem's partition and per band of the
    second objective (:func:`band_edges`; NB201: latency)."""
    niches = problem.niches()
    per_niche = {n.id: 0 for n in niches}
    for p in points:
        per_niche[niche_of(niches, p)] += 1
    edges = band_edges(ref, second)
    bands = np.bincount(band_of(edges, second), minlength=BANDS).tolist() if len(second) else [0] * BANDS
    return {
        "niches": per_niche,
        "band_objective": problem.front_objectives[1],
        "bands": bands,
        "band_edges": [round(float(x), 4) for x in edges],
    }
