from __future__ import annotations

from typing import Any, ClassVar

import pytest

from coevo.search.errors import UserInputError
from coevo.search.nb201 import NB201Problem, format_arch
from coevo.tools import REGISTRY, Registry, Tool, ToolArgs, ToolExecutionError, ToolResult, call_tool, llm_name


class _Args(ToolArgs):
    x: int = 0


class Good(Tool):
    name = "demo.echo"
    description = "Echo the argument back, for registry tests."
    Args = _Args
    example: ClassVar[dict[str, Any]] = {"x": 1}

    def run(self, args: _Args) -> ToolResult:
        return ToolResult(value={"x": args.x})


class Broken(Good):
    name = "demo.broken"

    def run(self, args: _Args) -> ToolResult:
        raise RuntimeError("disk on fire")


def test_llm_names() -> None:
    assert llm_name("nb201.query") == "nb201_query"
    assert llm_name("search.run") == "search_run"
    assert REGISTRY.get("nb201_query") is REGISTRY.get("nb201.query")


def test_duplicates_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        Registry([Good(), Good()])

    class Clash(Good):
        name = "demo_echo"  # same function-calling name as demo.echo

    with pytest.raises(ValueError, match="duplicate"):
        Registry([Good(), Clash()])


@pytest.mark.parametrize(
    ("attr", "value", "match"),
    [("name", "Bad Name", "must match"), ("description", " ", "description"), ("Args", dict, "Args"), ("example", None, "example")],
)
def test_contract_checked_at_registration(attr: str, value: object, match: str) -> None:
    bad = type("Bad", (Good,), {attr: value})()
    with pytest.raises(TypeError, match=match):
        Registry([bad])


def test_unknown_tool_lists_valid_names() -> None:
    with pytest.raises(UserInputError, match=r"valid tools: .*nb201.query"):
        REGISTRY.get("nb201.train")


def test_failure_is_an_execution_error_not_an_argument_error() -> None:
    with pytest.raises(ToolExecutionError, match="disk on fire"):
        call_tool(Broken(), {"x": 1})


def test_the_query_tool_agrees_with_the_problem() -> None:
    problem = NB201Problem(dataset="cifar100", device="raspi4")
    tool = REGISTRY.get("nb201.query")
    table = problem.table
    for index in (0, 1, 777, 15624):
        cell = table.cell(index)
        value = call_tool(tool, {"dataset": "cifar100", "device": "raspi4", "arch": format_arch(cell)}).value
        assert {"accuracy": value["accuracy_pct"], "latency_ms": value["latency_ms"]} == problem.evaluate(cell)


def test_pareto_front_tool_is_the_exact_front() -> None:
    out = call_tool(REGISTRY.get("nb201.pareto_front"), {"dataset": "cifar10", "device": "fpga", "limit": 1000}).value
    ref = NB201Problem(dataset="cifar10", device="fpga").reference()
    assert {str(r["index"]) for r in out["front"]} == ref.ids
    lat = [r["latency_ms"] for r in out["front"]]
    assert lat == sorted(lat)
    truncated = call_tool(REGISTRY.get("nb201.pareto_front"), {"dataset": "cifar10", "device": "fpga", "limit": 2})
    assert len(truncated.value["front"]) == 2 and any("truncated" in m for m in truncated.messages)


def test_nb201_tools_take_the_problems_dataset_choices_and_defaults() -> None:
    """The tools' dataset is the ``nb201`` problem's Literal: an unknown one is an argument error naming the choices."""
    from coevo.search.nb201.problem import NB201Options
    from coevo.tools import ToolArgumentError

    for name in ("nb201.query", "nb201.pareto_front"):
        args = REGISTRY.get(name).Args.model_fields
        for option in ("dataset", "device"):
            assert args[option].default == NB201Options.model_fields[option].default, (name, option)
        assert args["dataset"].annotation == NB201Options.model_fields["dataset"].annotation, name
    with pytest.raises(ToolArgumentError, match="cifar100"):
        call_tool(REGISTRY.get("nb201.pareto_front"), {"dataset": "mnist", "device": "fpga"})
