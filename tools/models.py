"""Model-zoo tools: list the zoo and its cache, build (train) a model."""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

from pydantic import Field

from coevo.sim.zoo.recipes import RECIPES, cache_dir, cached_info, names, recipe, recipe_key, recipe_parameter_count
from coevo.tools._base import Tool, ToolArgs, ToolResult
from coevo.tools._zoo import zoo_model


class ListArgs(ToolArgs):
    """Arguments of ``models.list``: which task's zoo models to list."""

    task: Literal["all", "classify", "lm"] = Field("all", description="only models of this task")


class ModelsList(Tool):
    """The zoo's models with task, size, metric and whether they are trained and cached."""

    name = "models.list"
    measured_fields = frozenset({"train_s"})  # the recorded training time of cached models
    description = (
        "List the model zoo: name, task, parameters, data, metric, and cache state "
        "(trained models show their baseline validation/test metric)."
    )
    Args = ListArgs
    example: ClassVar[dict[str, Any]] = {"task": "all"}

    def run(self, args: ListArgs) -> ToolResult:
        rows = []
        for name in names():
            rec = recipe(name)
            if args.task not in ("all", rec["task"]):
                continue
            info = cached_info(name)
            rows.append(
                {
                    "name": name,
                    "task": rec["task"],
                    "params": recipe_parameter_count(rec),  # from the sizes: listing builds no model (no torch)
                    "about": rec["about"],
                    "metric": "accuracy_pct" if rec["task"] == "classify" else "perplexity",
                    "cached": info is not None,
                    "baseline": (info or {}).get("baseline", {}),
                    "train_s": (info or {}).get("train_s"),
                    "key": recipe_key(rec),
                    # trained weights differ across machines: the fingerprint tells two caches' models apart
                    "weights": (info or {}).get("weights"),
                }
            )
        return ToolResult(value={"models": rows, "cache_dir": str(cache_dir())})


class BuildArgs(ToolArgs):
    """Arguments of ``models.build``: the zoo model to train (or load from the cache)."""

    model: str = Field(description=f"zoo model, one of {', '.join(RECIPES)}")
    rebuild: bool = Field(False, description="train again even if a cached copy exists")


class ModelsBuild(Tool):
    """Train a zoo model (or load it from the cache) and report its baseline metric."""

    name = "models.build"
    measured_fields = frozenset({"wall_s"})
    description = "Train a zoo model on its real data with fixed seeds and cache it (a second call loads it); report its baseline metric."
    Args = BuildArgs
    example: ClassVar[dict[str, Any]] = {"model": "cnn-digits"}
    long_running = True
    confirm = True  # trains for up to minutes and writes the cache: chat asks first

    def run(self, args: BuildArgs) -> ToolResult:
        started = time.perf_counter()
        if args.rebuild:
            from coevo.search.work_progress import report
            from coevo.sim.zoo import load

            zm = load(args.model, progress=report, rebuild=True) if args.model in RECIPES else zoo_model(args.model)[0]
            notes: list[str] = []
        else:
            zm, notes = zoo_model(args.model)
        value = {
            "name": zm.name,
            "task": zm.task,
            "params": zm.params,
            "metric": zm.metric,
            "baseline": zm.baseline,
            "how": zm.note,
            "wall_s": round(time.perf_counter() - started, 2),
            "path": str(zm.path),
            "key": zm.key,
            "weights": zm.fingerprint,
        }
        return ToolResult(value=value, messages=notes)
