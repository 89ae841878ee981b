"""Progress of a search, running or finished: what `coevo runs` and the ``search.status`` tool show."""

from __future__ import annotations

from collections import Counter
from typing import Any

import optuna

from coevo.search.runner import pays_expensive, stored_summary
from coevo.search.storage import READ_TIMEOUTS
from coevo.search.study import ATTR_BUDGET, ATTR_PROPOSER, ATTR_SPEC, failed_evaluation, open_stored_study, reopen, stored_code
from coevo.search.workers import LOST, Coordination, worker_alive

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
    code was not imported).
    """
    study = open_stored_study(storage, study_name, create=False, timeouts=READ_TIMEOUTS)
    trials = study.get_trials(deepcopy=False)
    workers = Coordination(storage, study_name, READ_TIMEOUTS, create=False).workers()
    for w in workers:
        w["alive"] = worker_alive(w, ALIVE_S)
        if w["state"] == "running" and not w["alive"]:
            w["state"] = LOST  # gone, and no worker started since to mark its row (a reader writes nothing)
    code = [] if load_code else stored_code(study)
    evaluations = sum(t.state == optuna.trial.TrialState.COMPLETE and bool(t.user_attrs.get("query", True)) for t in trials)
    failed = sum(failed_evaluation(t) for t in trials)
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
