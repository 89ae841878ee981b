"""``search.run``: start a headless search and return its summary."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from search.problems import make_problem
from search.runner import run_search
from tools._base import Tool, ToolArgs, ToolResult


class SearchArgs(ToolArgs):
    problem: str = Field("nb201", description="problem name, e.g. nb201")
    dataset: str | None = Field(None, description="NB201: cifar10, cifar100 or imagenet16_120")
    device: str | None = Field(None, description="NB201: latency device, e.g. fpga")
    proposer: str = Field(
        "pelnas", description="proposer: pelnas (co-evolution, offline reasoner), pelnas-noniche, pelnas-nokb, random, nsga2, tpe"
    )
    mode: str = Field(
        "query", description="query (accuracy queries count against the budget) or zero-cost (accuracy from zero-cost proxies)"
    )
    budget: int = Field(100, ge=1, le=100_000, description="expensive evaluations (accuracy queries) to spend")
    seed: int = Field(0, description="random seed")
    storage: str | None = Field(None, description="Optuna storage URL; default sqlite:///runs/coevo.sqlite3")
    study: str | None = Field(None, description="study name; an existing study with the same options is resumed")


class SearchRun(Tool):
    """Run (or resume) a search to its budget and return HV ratio, IGD, recall and the front."""

    name = "search.run"
    description = (
        "Run or resume a headless design search (query mode) on a problem with a proposer and a budget; "
        "returns HV ratio, IGD, front recall, evaluations, wall time and the found front."
    )
    Args = SearchArgs
    example: ClassVar[dict[str, Any]] = {
        "problem": "nb201",
        "dataset": "cifar10",
        "device": "fpga",
        "proposer": "random",
        "budget": 5,
        "storage": "sqlite:///:memory:",
    }
    long_running = True

    def run(self, args: SearchArgs) -> ToolResult:
        options: dict[str, Any] = {"dataset": args.dataset, "device": args.device}
        if args.mode != "query":
            options.update(mode=args.mode, storage=args.storage)
        problem = make_problem(args.problem, options)
        result = run_search(problem, args.proposer, budget=args.budget, seed=args.seed, storage=args.storage, study_name=args.study)
        messages = [result.stopped] if result.stopped else []
        return ToolResult(value={k: v for k, v in vars(result).items() if k != "hv_history"}, messages=messages)
