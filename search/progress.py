"""Progress of a search, running or finished: what `coevo runs` and the ``search.status`` tool show."""

from __future__ import annotations

from collections import Counter
from typing import Any

import optuna

from coevo.search.round_log import read_round_logs
from coevo.search.runner import pays_expensive, stored_summary
from coevo.search.storage import READ_TIMEOUTS
from coevo.search.study import ATTR_BUDGET, ATTR_PROPOSER, ATTR_SPEC, failed_evaluation, open_stored_study, reopen, stored_code
from coevo.search.workers import LOST, Coordination, lost_note, why_gone, worker_alive

ALIVE_S = 30.0
"""A worker is alive when it was seen this recently (heartbeats come every few seconds)."""


def progress(storage: str | None, study_name: str, *, load_code: bool = True) -> dict[str, Any]:
    """Progress of one search: evaluations against budget, trial states, workers, metrics so far.

    Nothing is created in the storage, and each wait on it is a read's (seconds, not a worker's
    bounds). The metrics (HV ratio, front recall, front size) need the study's problem rebuilt:
    with ``load_code=False`` a problem that is the user's code (a file or module,
    :func:`search.study.stored_code`) is not imported, those metrics are None and ``not_loaded``
    lists the code that was left alone. ``evaluations`` are the budget's evaluations with a
    result, ``failed`` those that failed, and ``budget_used`` both (what the budget counts);
    ``paid`` is the part that paid for the expensive objectives: ``budget_used``, 0 for a search
    that only estimates them (zero-cost mode), and None when that is not known (the problem's
    code was not imported). ``reasoner`` names what proposed a co-evolution search's rounds
    (:func:`reasoner_label`; None for the other proposers). Each worker's ``evaluations`` are the
    paid evaluations (failed ones included) of the trials it ran, counted from the trials, so
    they sum to ``budget_used`` (a worker's own row is written every few seconds, and a killed
    worker's never again).
    """
    study = open_stored_study(storage, study_name, create=False, timeouts=READ_TIMEOUTS)
    trials = study.get_trials(deepcopy=False)
    paid = [t for t in trials if _paid(t)]
    workers = _workers(Coordination(storage, study_name, READ_TIMEOUTS, create=False).workers(), paid)
    code = [] if load_code else stored_code(study)
    failed = sum(failed_evaluation(t) for t in trials)
    evaluations = len(paid) - failed
    info: dict[str, Any] = {
        "study": study_name,
        "problem": study.user_attrs[ATTR_SPEC],
        "proposer": str(study.user_attrs.get(ATTR_PROPOSER, "?")),
        "evaluations": evaluations,
        "failed": failed,
        "budget_used": evaluations + failed,
        "paid": None,  # known once the problem is rebuilt: a zero-cost search pays for nothing
        "budget": int(study.user_attrs.get(ATTR_BUDGET, 0)),
        "states": dict(Counter(t.state.name for t in trials)),
        "round": study.user_attrs.get("coevo.round"),
        "reasoner": reasoner_label(read_round_logs(storage, study)),
        "hv_ratio": None,
        "front_recall": None,
        "front_size": None,
        "workers_alive": sum(w["alive"] for w in workers),
        "workers": workers,
    }
    if code:
        return {**info, "not_loaded": code}
    stored = reopen(study, storage)
    result = stored_summary(stored, storage)
    metrics = {"hv_ratio": result.hv_ratio, "front_recall": result.front_recall, "front_size": len(result.front)}
    metrics["paid"] = info["budget_used"] if pays_expensive(stored.problem.found_set) else 0
    return {**info, "problem": stored.problem.spec(), **metrics}


def _paid(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether ``trial`` is one of the budget's evaluations: a complete query, or a failed evaluation."""
    complete = trial.state == optuna.trial.TrialState.COMPLETE and bool(trial.user_attrs.get("query", True))
    return complete or failed_evaluation(trial)


def _workers(rows: list[dict[str, Any]], paid: list[optuna.trial.FrozenTrial]) -> list[dict[str, Any]]:
    """The worker rows as a reader shows them: alive or not, ``lost`` when gone while saying ``running``, and the
    evaluations of each counted from the trials it ran (see :func:`progress`). The reader writes nothing."""
    ran = Counter(str(t.user_attrs.get("worker")) for t in paid)
    for w in rows:
        w["alive"] = worker_alive(w, ALIVE_S)
        w["evaluations"] = ran.get(str(w["worker"]), 0)
        if w["state"] == "running" and not w["alive"]:
            # gone, and no worker started since to mark its row: said the way that worker would say it
            w["state"] = LOST
            w["note"] = lost_note(why_gone(w, ALIVE_S) or "its process ended")
    return rows


def reasoner_rounds(logs: dict[int, dict[str, Any]]) -> dict[str, list[int]]:
    """Each reasoner label of a study's round logs (first use first) with the rounds it proposed."""
    rounds_of: dict[str, list[int]] = {}
    for number, log in sorted(logs.items()):
        if log.get("reasoner"):
            rounds_of.setdefault(str(log["reasoner"]), []).append(number)
    return rounds_of


def reasoner_label(logs: dict[int, dict[str, Any]]) -> str | None:
    """Which reasoner proposed a co-evolution study's rounds, from its round logs: ``offline (no LLM)``; for a study
    resumed with another, each with its rounds (``offline (no LLM) in rounds 0-3; llm:m in rounds 4-9``); None when
    no round names one (not a co-evolution search)."""
    rounds_of = reasoner_rounds(logs)
    if len(rounds_of) <= 1:
        return next(iter(rounds_of), None)
    return "; ".join(f"{label} in round{'s' if len(rs) > 1 else ''} {_spans(rs)}" for label, rs in rounds_of.items())


def _spans(numbers: list[int]) -> str:
    """``0, 1, 2, 5`` -> ``0-2, 5``."""
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
