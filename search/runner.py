"""The study runner: one proposer, one problem, a budget, on Optuna storage.

Query mode (DESIGN.md): the budget counts evaluations of the problem's expensive objectives
(for NB201, accuracy queries). A point proposed again is answered from the study's own
records and costs nothing. The found set is every evaluated point.

Resuming: rerunning with the same study name continues where the stored trials end.
Trials left RUNNING by a killed process are marked FAIL (they recorded no values) and
their points may be proposed again; enqueued proposals not yet evaluated are kept.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import optuna

from search.errors import UserInputError
from search.metrics import FrontMetrics, FrontReference, pareto_mask
from search.niches import niche_of, partition_for
from search.problem import Problem
from search.proposers import Evaluation, Proposal, Proposer, RoundContext, get_proposer
from search.storage import open_storage, resolve_storage_url

ATTR_SPEC = "coevo.problem"
ATTR_PROPOSER = "coevo.proposer"
ATTR_SEED = "coevo.seed"
ATTR_BUDGET = "coevo.budget"

MAX_TRIALS_PER_QUERY = 20
"""Stop after this many trials per budgeted query: a sampler stuck re-proposing seen points."""


@dataclass
class Progress:
    """What a progress display needs after each evaluation."""

    queries: int
    budget: int
    trials: int
    hv_ratio: float | None


@dataclass
class SearchResult:
    """Summary of a search (also the ``--json`` output of ``coevo search``).

    ``wall_s`` is this invocation's time; ``evaluations`` counts budgeted queries and
    ``trials`` every told trial (duplicates included).
    """

    study: str
    storage: str
    problem: dict[str, Any]
    proposer: str
    seed: int
    budget: int
    evaluations: int
    accuracy_queries: int
    trials: int
    wall_s: float
    hv_ratio: float | None
    igd: float | None
    front_recall: float | None
    front: list[dict[str, Any]]
    hv_history: list[float] = field(default_factory=list)
    stopped: str | None = None
    mode: str = "query"
    """``query`` (accuracy queries count against the budget) or ``zero-cost`` (none made)."""
    reasoner: str | None = None
    llm_usage: dict[str, Any] | None = None
    exploration: dict[str, Any] = field(default_factory=dict)
    """Where the evaluations went: counts per niche and per latency band (exploration bias)."""

    def to_json(self, *, history: bool = False) -> str:
        """One JSON object; the per-evaluation HV history only when asked."""
        data = asdict(self)
        if not history:
            data.pop("hv_history")
        return json.dumps(data)


def default_study_name(problem: Problem, proposer: str, seed: int, variant: str = "") -> str:
    """``<problem>-<option values>-<proposer><variant>-s<seed>``, e.g. ``nb201-cifar10-fpga-tpe-s0``."""
    # scalar options only: nested settings stay out of the name
    parts = [str(v) for k, v in problem.spec().items() if k != "problem" and isinstance(v, str | int) and not isinstance(v, bool)]
    return "-".join([problem.name, *parts, proposer + variant, f"s{seed}"])


def evaluations_from_study(problem: Problem, study: optuna.Study) -> list[Evaluation]:
    """Every completed trial of ``study`` as an :class:`Evaluation`, in trial order."""
    out = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        point = problem.from_params(t.params)
        values = {o.name: v for o, v in zip(problem.objectives, t.values, strict=True)}
        out.append(Evaluation(t.number, point, problem.point_id(point), values, bool(t.user_attrs.get("query", True)), dict(t.user_attrs)))
    return out


@dataclass(frozen=True)
class StoredSearch:
    """A finished or running search, read back from storage."""

    study: optuna.Study
    problem: Problem
    proposer: str
    seed: int
    budget: int

    def summary(self, storage: str | None) -> SearchResult:
        """Its found set scored as :func:`summarize` does (no wall time: nothing ran here)."""
        return summarize(self.problem, self.study, proposer=self.proposer, seed=self.seed, budget=self.budget, storage=storage, wall_s=0.0)


def load_search(storage: str | None, study_name: str) -> StoredSearch:
    """Open study ``study_name`` and rebuild its problem from the recorded spec.

    Raises:
        UserInputError: no such study (the message lists the studies there), or it was not made by coevo.
        StorageError: the storage cannot be opened.
    """
    from search.problems import make_problem  # search.problems imports problem modules; keep runner light

    backend = open_storage(storage)
    try:
        study = optuna.load_study(study_name=study_name, storage=backend)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(backend, include_best_trial=False)]
        listed = ", ".join(names[:10]) + (" ..." if len(names) > 10 else "") if names else "none"
        raise UserInputError(f"no study {study_name!r} in {resolve_storage_url(storage)} (studies: {listed})") from None
    spec = study.user_attrs.get(ATTR_SPEC)
    if not isinstance(spec, dict) or "problem" not in spec:
        raise UserInputError(f"study {study_name!r} was not created by coevo (it has no problem spec)")
    options: dict[str, Any] = {k: v for k, v in spec.items() if k != "problem" and isinstance(v, str | int | float)}
    if options.get("mode", "query") != "query":
        options["storage"] = storage
    return StoredSearch(
        study,
        make_problem(spec["problem"], options),
        str(study.user_attrs.get(ATTR_PROPOSER, "?")),
        int(study.user_attrs.get(ATTR_SEED, 0)),
        int(study.user_attrs.get(ATTR_BUDGET, 0)),
    )


def open_study(problem: Problem, proposer: Proposer, *, storage: str | None, study_name: str, seed: int, budget: int) -> optuna.Study:
    """Create the study (tagged with problem, proposer, seed) or reopen it with the same options; records the budget.

    Raises:
        UserInputError: the study exists for another problem or proposer.
    """
    backend = open_storage(storage)
    spec = problem.spec()
    try:
        study = optuna.load_study(study_name=study_name, storage=backend, sampler=proposer.sampler(problem, seed))
    except KeyError:
        study = optuna.create_study(
            study_name=study_name, storage=backend, directions=list(problem.directions), sampler=proposer.sampler(problem, seed)
        )
        study.set_user_attr(ATTR_SPEC, spec)
        study.set_user_attr(ATTR_PROPOSER, proposer.name)
        study.set_user_attr(ATTR_SEED, seed)
    else:
        stored = study.user_attrs.get(ATTR_SPEC)
        if stored is None and not study.get_trials(deepcopy=False):
            # created by a run killed before it tagged the study: adopt it
            study.set_user_attr(ATTR_SPEC, spec)
            study.set_user_attr(ATTR_PROPOSER, proposer.name)
            study.set_user_attr(ATTR_SEED, seed)
            stored = spec
        if stored != spec or study.user_attrs.get(ATTR_PROPOSER) != proposer.name:
            raise UserInputError(
                f"study {study_name!r} already exists for problem {stored} with proposer "
                f"{study.user_attrs.get(ATTR_PROPOSER)!r}; pass another --study name or the same options"
            )
    study.set_user_attr(ATTR_BUDGET, budget)
    return study


def _fail_stale_trials(study: optuna.Study) -> int:
    stale = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    for t in stale:
        study.tell(t.number, state=optuna.trial.TrialState.FAIL)
    return len(stale)


def run_search(
    problem: Problem,
    proposer: str | Proposer,
    *,
    budget: int,
    seed: int = 0,
    storage: str | None = None,
    study_name: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> SearchResult:
    """Run (or resume) a query-mode search until ``budget`` expensive evaluations.

    Args:
        problem: the problem to search.
        proposer: a registered proposer name or an instance.
        budget: expensive evaluations to pay for (> 0); a resumed study counts what it has.
        seed: seed of the proposer's randomness.
        storage: Optuna storage URL; None for the default SQLite file under ./runs/.
        study_name: defaults to :func:`default_study_name`.
        on_progress: called after every told trial.

    Raises:
        UserInputError: budget <= 0, or the study exists for another problem/proposer.
        StorageError: the storage cannot be opened.
    """
    if budget <= 0:
        raise UserInputError(f"budget must be a positive number of evaluations, got {budget}")
    proposer = get_proposer(proposer)
    name = study_name or default_study_name(problem, proposer.name, seed, proposer.variant)
    study = open_study(problem, proposer, storage=storage, study_name=name, seed=seed, budget=budget)
    _fail_stale_trials(study)
    ref = problem.reference()
    acc_name, lat_name = problem.front_objectives
    evaluations = evaluations_from_study(problem, study)
    seen = {e.point_id: e for e in evaluations}
    queries = sum(e.query for e in evaluations)
    round_no = int(study.user_attrs.get("coevo.round", 0))
    started = time.perf_counter()
    stopped: str | None = None
    found_a = [e.values[acc_name] for e in evaluations if e.query]
    found_l = [e.values[lat_name] for e in evaluations if e.query]
    # zero-cost mode has no true accuracy during the search: no live HV (scored at the end)
    track = ref is not None and problem.found_set == "all"
    history = ref.hv_history(found_a, found_l) if ref and track else []
    max_trials = MAX_TRIALS_PER_QUERY * budget + 100
    # Counts are tracked here: asking the storage for all trials each step is O(n^2).
    n_trials = len(study.get_trials(deepcopy=False))
    n_waiting = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)))

    while queries < budget:
        if n_trials >= max_trials:
            stopped = f"stopped after {n_trials} trials: the proposer keeps re-proposing evaluated points"
            break
        ctx = RoundContext(problem, study, round_no, tuple(evaluations), frozenset(seen), budget - queries, seed, storage)
        rejected: list[tuple[Proposal, str]] = []
        if n_waiting == 0:
            batch_ids: set[str] = set()
            for prop in proposer.propose(ctx):
                if prop.error:
                    rejected.append((prop, prop.error))
                    continue
                pid = problem.point_id(prop.point)
                if pid in seen or pid in batch_ids:
                    rejected.append((prop, "already evaluated" if pid in seen else "duplicate in this round"))
                    continue
                batch_ids.add(pid)
                attrs = {"rationale": prop.rationale, "heuristics": list(prop.heuristics), "round": round_no, **prop.attrs}
                study.enqueue_trial(problem.to_params(prop.point), user_attrs=attrs)
                n_waiting += 1
                n_trials += 1
        results: list[Evaluation] = []
        for _ in range(max(1, n_waiting)):
            if queries >= budget:
                break
            trial = study.ask()
            if n_waiting:
                n_waiting -= 1
            else:
                n_trials += 1
            point = problem.suggest(trial)
            pid = problem.point_id(point)
            if pid in seen:
                values, query = seen[pid].values, False
            else:
                values, query = problem.evaluate(point), True
            trial.set_user_attr("point_id", pid)
            trial.set_user_attr("design", problem.describe(point))
            trial.set_user_attr("query", query)
            study.tell(trial, [values[o.name] for o in problem.objectives])
            ev = Evaluation(trial.number, point, pid, values, query, dict(trial.user_attrs))
            evaluations.append(ev)
            results.append(ev)
            if query:
                seen[pid] = ev
                queries += 1
                found_a.append(values[acc_name])
                found_l.append(values[lat_name])
                if ref and track:
                    history.append(ref.hv_ratio(found_a, found_l))
            if on_progress:
                on_progress(Progress(queries, budget, n_trials, history[-1] if history else None))
        proposer.observe(ctx, results, rejected)
        round_no += 1
        study.set_user_attr("coevo.round", round_no)

    result = summarize(
        problem,
        study,
        proposer=proposer.name,
        seed=seed,
        budget=budget,
        storage=storage,
        wall_s=time.perf_counter() - started,
        history=history,
        stopped=stopped,
        evaluations=evaluations,
        trials=n_trials,
    )
    reasoner = getattr(proposer, "reasoner", None)
    if reasoner is not None:
        result.reasoner = reasoner.label
        result.llm_usage = reasoner.usage.as_dict()
    return result


def summarize(
    problem: Problem,
    study: optuna.Study,
    *,
    proposer: str,
    seed: int,
    budget: int,
    storage: str | None,
    wall_s: float,
    history: list[float] | None = None,
    stopped: str | None = None,
    evaluations: list[Evaluation] | None = None,
    trials: int | None = None,
) -> SearchResult:
    """Score a study's found set (every budgeted evaluation) against the problem's true front.

    ``evaluations`` and ``trials``, when the caller already holds them, spare re-reading the study.
    """
    if evaluations is None:
        evaluations = evaluations_from_study(problem, study)
    if trials is None:
        trials = len(study.get_trials(deepcopy=False))
    evaluations = [e for e in evaluations if e.query]
    acc_name, lat_name = problem.front_objectives
    queries = len(evaluations)
    if problem.found_set == "front" and evaluations:
        # zero-cost mode: report the front under the estimates, then score it truly
        est = pareto_mask(np.array([e.values[acc_name] for e in evaluations]), np.array([e.values[lat_name] for e in evaluations]))
        evaluations = [
            Evaluation(e.trial_number, e.point, e.point_id, problem.true_values(e.point), e.query, e.attrs)
            for e, keep in zip(evaluations, est, strict=True)
            if keep
        ]
    acc = np.array([e.values[acc_name] for e in evaluations])
    lat = np.array([e.values[lat_name] for e in evaluations])
    ids = [e.point_id for e in evaluations]
    ref = problem.reference()
    metrics = FrontMetrics.score(ref, ids, acc, lat) if ref else None
    mask = pareto_mask(acc, lat)
    front: list[dict[str, Any]] = [
        {problem.design_label: problem.describe(evaluations[i].point), "point_id": ids[i], acc_name: float(acc[i]), lat_name: float(lat[i])}
        for i in np.flatnonzero(mask)
    ]
    front.sort(key=lambda row: (row[lat_name], row["point_id"]))
    exploration = exploration_histogram(problem, [e.point for e in evaluations], lat, ref)
    return SearchResult(
        study=study.study_name,
        storage=resolve_storage_url(storage),
        problem=problem.spec(),
        proposer=proposer,
        seed=seed,
        budget=budget,
        evaluations=queries,
        accuracy_queries=queries if problem.found_set == "all" else 0,
        mode=str(problem.spec().get("mode", "query")),
        trials=trials,
        wall_s=round(wall_s, 3),
        hv_ratio=metrics.hv_ratio if metrics else None,
        igd=metrics.igd if metrics else None,
        front_recall=metrics.front_recall if metrics else None,
        front=front,
        hv_history=history or [],
        stopped=stopped,
        exploration=exploration,
    )


LATENCY_BANDS = 5


def exploration_histogram(problem: Problem, points: list[Any], lat: np.ndarray, ref: FrontReference | None) -> dict[str, Any]:
    """Counts of evaluated points per niche of the problem's default partition and per
    latency band (equal-width bands over the whole space's latency range when known)."""
    niches = partition_for(problem.name)
    per_niche = {n.id: 0 for n in niches}
    for p in points:
        per_niche[niche_of(niches, p)] += 1
    lo, hi = (ref.lat_min, ref.lat_max) if ref else ((float(lat.min()), float(lat.max())) if len(lat) else (0.0, 1.0))
    edges = np.linspace(lo, hi, LATENCY_BANDS + 1)
    bands = np.histogram(np.clip(lat, lo, hi), bins=edges)[0].tolist() if len(lat) else [0] * LATENCY_BANDS
    return {"niches": per_niche, "latency_bands": bands, "latency_edges_ms": [round(float(x), 4) for x in edges]}
