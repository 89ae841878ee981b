"""Progress of a search, running or finished: what `coevo runs` and the ``search.status`` tool show."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import optuna

from coevo.search.runner import stored_summary
from coevo.search.storage import READ_TIMEOUTS
from coevo.search.study import load_search
from coevo.search.workers import Coordination

ALIVE_S = 30.0
"""A worker is alive when it was seen this recently (heartbeats come every few seconds)."""


def progress(storage: str | None, study_name: str) -> dict[str, Any]:
    """Progress of one search: evaluations against budget, trial states, workers, metrics so far."""
    stored = load_search(storage, study_name, create=False)
    trials = stored.study.get_trials(deepcopy=False)
    states = dict(Counter(t.state.name for t in trials))
    workers = Coordination(storage, study_name, READ_TIMEOUTS).workers()  # a read: seconds, not a worker's bounds
    now = time.time()
    for w in workers:
        w["alive"] = w["state"] == "running" and now - w["last_seen"] < ALIVE_S
    result = stored_summary(stored, storage)
    return {
        "study": study_name,
        "problem": stored.problem.spec(),
        "proposer": stored.proposer,
        "evaluations": sum(t.state == optuna.trial.TrialState.COMPLETE and bool(t.user_attrs.get("query", True)) for t in trials),
        "budget": stored.budget,
        "states": states,
        "round": stored.study.user_attrs.get("coevo.round"),
        "hv_ratio": result.hv_ratio,
        "front_recall": result.front_recall,
        "front_size": len(result.front),
        "workers_alive": sum(w["alive"] for w in workers),
        "workers": workers,
    }
