"""``search.run``: start a headless search and return its summary."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from search.problems import make_problem
from search.runner import run_search
from tools._base import Target, Tool, ToolArgs, ToolResult


class SearchArgs(ToolArgs):
    problem: str = Field("nb201", description="problem: nb201 (NAS), pipeline (hybrid-parallel training plans) or noc (mesh NoC designs)")
    dataset: str | None = Field(None, description="NB201: cifar10, cifar100 or imagenet16_120")
    device: str | None = Field(None, description="NB201: latency device, e.g. fpga")
    model: str | None = Field(None, description="pipeline: model preset (unet-sd, uvit-h, ...) or path/to/file.py:function")
    cluster: str | None = Field(None, description="pipeline: cluster preset (v100x16-ib10, ...) or JSON file")
    global_batch: int | None = Field(None, ge=1, le=1_000_000, description="pipeline: samples per training step (default 128)")
    resolution: int | None = Field(None, ge=1, le=1024, description="pipeline: latent height/width (default 64)")
    topology: str | None = Field(None, description="noc: mesh (the designs searched)")
    k: int | None = Field(None, ge=2, le=16, description="noc: mesh side (default 8)")
    traffic: str | None = Field(None, description="noc: uniform, transpose, tornado or hotspot (default hotspot)")
    load: float | None = Field(None, gt=0, le=1, description="noc: offered load, fraction of a 4-sub-channel link (default 0.3)")
    gt_share: float | None = Field(None, ge=0, le=1, description="noc: share of the load in guaranteed-bandwidth flows (default 0.7)")
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


PROBLEM_OPTIONS = ("dataset", "device", "model", "cluster", "global_batch", "resolution", "topology", "k", "traffic", "load", "gt_share")
"""Problem options a search tool passes on (None ones are dropped by make_problem)."""


def problem_options(args: SearchArgs) -> dict[str, Any]:
    """The problem's options from a search tool's arguments."""
    options: dict[str, Any] = {name: getattr(args, name) for name in PROBLEM_OPTIONS}
    if args.mode != "query":
        options.update(mode=args.mode, storage=args.storage)
    return options


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
        "storage": "sqlite:///runs/example.sqlite3",
    }
    long_running = True
    writes: ClassVar[dict[str, Target]] = {"storage": "storage"}
    loads_code = ("problem", "model")

    def run(self, args: SearchArgs) -> ToolResult:
        problem = make_problem(args.problem, problem_options(args))
        result = run_search(problem, args.proposer, budget=args.budget, seed=args.seed, storage=args.storage, study_name=args.study)
        messages = [result.stopped] if result.stopped else []
        return ToolResult(value={k: v for k, v in vars(result).items() if k != "hv_history"}, messages=messages)
