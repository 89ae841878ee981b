"""``search.run``: start a headless search and return its summary; the search tools' shared arguments."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from coevo.search.config import SearchConfig, default
from coevo.search.problems import describe_options, problem_class, problem_names
from coevo.search.proposers import proposer_names
from coevo.tools._base import Target, Tool, ToolArgs, ToolResult, problem_code


def _options_help() -> str:
    """Every registered problem's options, from the problems' own declarations."""
    parts = []
    for name in problem_names():
        try:
            rows = describe_options(problem_class(name))
        except Exception as exc:  # an installed plug-in that does not load must not take the tools down
            parts.append(f"{name}: (unavailable: {exc})")
            continue
        opts = ", ".join(
            f"{r['name']} ({'|'.join(map(str, r['choices'])) if r['choices'] else r['type']}, default {r['default']})" for r in rows
        )
        parts.append(f"{name}: {opts or 'none'}")
    return "problem options by problem; " + "; ".join(parts) + ". Unknown or out-of-bounds options are refused with the bound."


def _described(field: str) -> str:
    """The description of :class:`SearchConfig` field ``field`` (what it is, its range, its default)."""
    return str(SearchConfig.model_fields[field].description)


class SearchArgs(ToolArgs):
    """A search as the tools take it; its defaults and checks are :class:`~coevo.search.config.SearchConfig`'s."""

    problem: str = Field(
        default=default("problem"),
        description=f"problem: {', '.join(problem_names())} (coevo problems list describes them), or path/to/file.py:Class",
    )
    options: dict[str, Any] = Field(default_factory=dict, description=_options_help())
    proposer: str = Field(
        default=default("proposer"),
        description=f"proposer: {', '.join(proposer_names())} (pelnas: the co-evolution engine, offline reasoner)",
    )
    # no bounds here: SearchConfig.create (in config()) checks the values, with the same rule and message as the CLI and the API
    budget: int = Field(
        default=default("budget"),
        description="evaluations to make, 0 or more (0: the front the free information predicts, nothing paid); each paid for its "
        "expensive objective (NB201: an accuracy query; zero-cost mode: an evaluation on the proxies' estimate, none paid)",
    )
    seed: int = Field(default=default("seed"), description=_described("seed"))
    storage: str | None = Field(default=None, description=_described("storage"))
    study: str | None = Field(default=None, description="study name; an existing study with the same options is resumed")
    eval_timeout_s: float | None = Field(default=None, description=_described("eval_timeout_s"))

    def config(self) -> SearchConfig:
        """The search these arguments describe (the proposer's own reasoner: offline).

        Raises:
            UserInputError: a bad problem, option or proposer, or a budget, seed or timeout out of range, naming the field.
        """
        return SearchConfig.create(**self.model_dump())


class SearchTool(Tool):
    """What the search tools share: the problem's user code (a problem file, a model file in the options) asks first."""

    writes: ClassVar[dict[str, Target]] = {"storage": "storage"}
    loads_code = ("problem", "options")

    def user_code(self, args: Any) -> list[str]:
        return problem_code(args)


class SearchRun(SearchTool):
    """Run (or resume) a search to its budget and return HV ratio, IGD, recall and the front."""

    name = "search.run"
    measured_fields = frozenset({"wall_s"})
    description = (
        "Run or resume a headless design search on a problem with a proposer and a budget; "
        "returns HV ratio, IGD, front recall, evaluations, wall time and the found front."
    )
    Args = SearchArgs
    example: ClassVar[dict[str, Any]] = {
        "problem": "nb201",
        "options": {"dataset": "cifar10", "device": "fpga"},
        "proposer": "random",
        "budget": 5,
        "storage": "sqlite:///runs/example.sqlite3",
    }
    long_running = True

    def run(self, args: SearchArgs) -> ToolResult:
        result = args.config().run()
        messages = [result.stopped] if result.stopped else []
        value = {k: v for k, v in vars(result).items() if k != "hv_history"} | {"budget_used": result.budget_used, "paid": result.paid}
        return ToolResult(value=value, messages=messages + result.notes)
