"""Reading searches back: ``studies.list`` and ``study.front`` (grounding for chat)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import optuna
from pydantic import Field

from coevo.search.errors import CoevoError, StorageMissingError
from coevo.search.round_log import read_round_logs
from coevo.search.runner import stored_summary
from coevo.search.storage import DEFAULT_STORAGE, open_storage, resolve_storage_url
from coevo.search.study import ATTR_BUDGET, ATTR_PROPOSER, ATTR_SPEC, open_stored_study, reopen, stored_code
from coevo.tools._base import Tool, ToolArgs, ToolResult

READS_STORAGE: dict[str, Literal["storage"]] = {"storage": "storage"}
"""The ``storage`` argument of a tool that only reads it: confined like a written one, never created."""

MAX_STUDIES = 200


class StudiesArgs(ToolArgs):
    storage: str | None = Field(None, description=f"Optuna storage URL; default {DEFAULT_STORAGE}")
    contains: str | None = Field(None, description="only studies whose name contains this text")


class StudiesList(Tool):
    """Every study in a storage with its problem, proposer, budget and evaluations so far."""

    name = "studies.list"
    description = (
        "List the searches (Optuna studies) in a storage: name, problem (dataset, device), proposer, budget and "
        "evaluations so far. Use it to find the study name other tools need."
    )
    Args = StudiesArgs
    example: ClassVar[dict[str, Any]] = {}
    reads: ClassVar[dict[str, Literal["storage"]]] = READS_STORAGE

    def run(self, args: StudiesArgs) -> ToolResult:
        try:
            backend = open_storage(args.storage, create=False)
        except StorageMissingError as exc:  # nothing stored there yet: an answer, and nothing is created
            return ToolResult(value={"storage": resolve_storage_url(args.storage), "studies": []}, messages=[str(exc)])
        rows = []
        for s in optuna.get_all_study_summaries(backend, include_best_trial=False):
            if args.contains and args.contains not in s.study_name:
                continue
            rows.append(
                {
                    "study": s.study_name,
                    "problem": s.user_attrs.get(ATTR_SPEC),
                    "proposer": s.user_attrs.get(ATTR_PROPOSER),
                    "budget": s.user_attrs.get(ATTR_BUDGET),
                    "trials": s.n_trials,
                }
            )
        messages = [f"showing the first {MAX_STUDIES} of {len(rows)}"] if len(rows) > MAX_STUDIES else []
        return ToolResult(value={"storage": resolve_storage_url(args.storage), "studies": rows[:MAX_STUDIES]}, messages=messages)


def study_code(args: StudyArgs) -> list[str]:
    """The user code that reopening the study ``args`` name would import (its problem file or module); none when it cannot be read.

    Read from the study's tags without importing anything; a study that cannot be opened names
    no code here, and the tool then fails on it before anything is imported.
    """
    try:
        return stored_code(open_stored_study(args.storage, args.study, create=False))
    except CoevoError:
        return []


class StudyArgs(ToolArgs):
    study: str = Field(..., description="study name (see studies.list; search.start returns it)")
    storage: str | None = Field(None, description=f"Optuna storage URL; default {DEFAULT_STORAGE}")


class StudyFront(Tool):
    """A study's found front (trial ids, designs, objective values) and its metrics."""

    name = "study.front"
    description = (
        "Read a search's found Pareto front (each row: design, objective values, point id) and its metrics "
        "(HV ratio, IGD, front recall against the true front where known; evaluations; budget)."
    )
    Args = StudyArgs
    example: ClassVar[dict[str, Any]] = {"study": "example"}
    reads: ClassVar[dict[str, Literal["storage"]]] = READS_STORAGE

    def stored_code(self, args: StudyArgs) -> list[str]:
        return study_code(args)

    def run(self, args: StudyArgs) -> ToolResult:
        stored = reopen(open_stored_study(args.storage, args.study, create=False), args.storage)
        result = stored_summary(stored, args.storage)
        logs = read_round_logs(args.storage, stored.study).values()
        result.reasoner = next((str(v["reasoner"]) for v in logs if v.get("reasoner")), None)  # pelnas studies say who reasoned
        value = {k: v for k, v in vars(result).items() if k not in ("hv_history", "wall_s", "llm_usage") and v is not None}
        return ToolResult(value=value)
