"""The conformance suite of a tool: what every tool in :data:`coevo.tools.REGISTRY` passes, and a plug-in's tool can too.

With pytest (one test per check; mark the checks that run the example slow when it takes minutes)::

    import pytest
    from coevo.testing import tools as tool_suite

    @pytest.mark.parametrize("check", tool_suite.CHECKS, ids=str)
    def test_my_tool(check):
        check(MyTool())

Without a test runner, ``tool_suite.check_tool_conforms(MyTool())`` runs every check and
raises :class:`coevo.testing.ConformanceError` naming the first that fails.

The checks run the tool's ``example`` in the current directory; an example that reads a study
from the default storage needs that study there. Result fields the tool declares in
``measured_fields`` (timings, memory) are left out when two calls are compared.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

from coevo.testing._suite import Check, ConformanceError, expect, raised, run_checks
from coevo.tools import Tool, ToolArgumentError, ToolResult, call_tool, llm_name
from coevo.tools._base import NAME_PATTERN
from coevo.tools.adapters import outcome_of, run_from_cli, to_langchain


def check_contract(tool: Tool) -> None:
    """Name, description, argument schema and declarations keep the contract."""
    expect(isinstance(tool.name, str) and NAME_PATTERN.fullmatch(tool.name), f"name {tool.name!r} is not dotted lowercase words")
    expect(len(tool.description) > 30, f"{tool.name}: the description says too little ({len(tool.description)} characters)")
    expect(isinstance(tool.Args, type) and issubclass(tool.Args, BaseModel), f"{tool.name}: Args is not a pydantic model")
    schema = tool.schema()
    json.dumps(schema)
    expect(schema["type"] == "object", f"{tool.name}: the argument schema is a {schema['type']!r}, not an object")
    for name, field in tool.Args.model_fields.items():
        expect(field.description, f"{tool.name}.{name} has no description")
    measured = tool.measured_fields
    expect(
        isinstance(measured, frozenset) and all(isinstance(f, str) for f in measured),
        f"{tool.name}: measured_fields must be a frozenset of field names, got {measured!r}",
    )
    expect(isinstance(tool.slow_example, bool), f"{tool.name}: slow_example must be a bool, got {tool.slow_example!r}")


def check_example_runs(tool: Tool) -> None:
    """The example runs and gives a JSON-serialisable, non-empty value."""
    result = call_tool(tool, tool.example)  # a tool that cannot produce its value raises
    expect(isinstance(result, ToolResult) and result.value, f"{tool.name}: the example gave no value: {result!r}")
    json.dumps(result.model_dump())  # JSON-serialisable for chat and CLI


def check_unknown_argument(tool: Tool) -> None:
    """An unknown argument is a typed error that names it."""
    raised(
        ToolArgumentError,
        lambda: call_tool(tool, {**tool.example, "no_such_field": 1}),
        what=f"{tool.name} called with an unknown argument",
        pattern="no_such_field",
    )


def check_malformed_json(tool: Tool) -> None:
    """Arguments that are not JSON, or not a JSON object, are typed errors."""
    raised(
        ToolArgumentError, lambda: call_tool(tool, "{not json"), what=f"{tool.name} called with malformed JSON", pattern="not valid JSON"
    )
    raised(ToolArgumentError, lambda: call_tool(tool, "[1, 2]"), what=f"{tool.name} called with a JSON list", pattern="JSON object")


def check_wrong_type(tool: Tool) -> None:
    """An argument of the wrong type is a typed error whose message shows an example."""
    first = next(iter(tool.Args.model_fields))
    raised(
        ToolArgumentError,
        lambda: call_tool(tool, {**tool.example, first: {"nested": ["wrong", "type"]}}),
        what=f"{tool.name} called with a dict for {first!r}",
        pattern="Example",
    )


def check_langchain_adapter(tool: Tool) -> None:
    """The LangChain adapter gives the observation text for plain calls and a ToolMessage with its outcome for tool calls."""
    lc = to_langchain(tool)
    expect(lc.name == llm_name(tool.name), f"{tool.name}: LangChain name {lc.name!r} is not {llm_name(tool.name)!r}")
    expect(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", lc.name), f"{tool.name}: LangChain name {lc.name!r} is not a function-calling name")
    expect(set(lc.args) == set(tool.Args.model_fields), f"{tool.name}: LangChain arguments {sorted(lc.args)} are not Args' fields")
    out = json.loads(lc.invoke(tool.example))  # invoked with plain arguments: the observation text only
    expect(set(out) == {"value", "messages"} and out["value"], f"{tool.name}: the observation is not value and messages: {out}")
    bad = lc.invoke({**tool.example, "no_such_field": 1})
    expect(bad.startswith("error:") and "no_such_field" in bad, f"{tool.name}: a bad call's observation does not name the error: {bad}")
    # invoked with a tool call (as chat does): a ToolMessage whose artifact says how the call ended
    good = lc.invoke({"name": lc.name, "args": tool.example, "id": "c1", "type": "tool_call"})
    result = outcome_of(good).result
    if not outcome_of(good).ok or result is None:
        raise ConformanceError(f"{tool.name}: the example's tool call did not end ok: {outcome_of(good)}")
    expect(json.loads(good.content) == json.loads(result.model_dump_json()), f"{tool.name}: the ToolMessage text is not its result")
    failed = lc.invoke({"name": lc.name, "args": {**tool.example, "no_such_field": 1}, "id": "c2", "type": "tool_call"})
    expect(
        outcome_of(failed).status == "error" and outcome_of(failed).result is None and failed.content == bad,
        f"{tool.name}: a bad tool call is not an error outcome with the plain call's text: {outcome_of(failed)}, {failed.content!r}",
    )


def without_measured(result: Any, measured: frozenset[str]) -> Any:
    """``result`` (JSON-like) without the fields named in ``measured``, at any depth."""
    if isinstance(result, dict):
        return {k: without_measured(v, measured) for k, v in result.items() if k not in measured}
    if isinstance(result, list):
        return [without_measured(v, measured) for v in result]
    return result


def check_cli_matches_direct_call(tool: Tool) -> None:
    """The CLI adapter gives what a direct call gives (but the tool's ``measured_fields``; ids only by key for ``confirm`` tools)."""
    via_cli = without_measured(run_from_cli(tool, json.dumps(tool.example)), tool.measured_fields)
    direct = without_measured(call_tool(tool, tool.example).model_dump(), tool.measured_fields)
    if tool.confirm:  # tools with effects (a new version, a new process) differ in ids between two calls
        expect(
            via_cli.keys() == direct.keys() and via_cli["value"].keys() == direct["value"].keys(),
            f"{tool.name}: the CLI's result has other fields than a direct call's: {sorted(via_cli['value'])} vs {sorted(direct['value'])}",
        )
    else:
        expect(via_cli == direct, f"{tool.name}: the CLI gave {via_cli}, a direct call {direct} (a field missing from measured_fields?)")


CHECKS: tuple[Check[Tool], ...] = (
    Check("contract", check_contract),
    Check("example_runs", check_example_runs, runs_example=True),
    Check("unknown_argument", check_unknown_argument),
    Check("malformed_json", check_malformed_json),
    Check("wrong_type", check_wrong_type),
    Check("langchain_adapter", check_langchain_adapter, runs_example=True),
    Check("cli_matches_direct_call", check_cli_matches_direct_call, runs_example=True),
)
"""Every check a tool passes, in the order to run them."""


def check_tool_conforms(tool: Tool) -> None:
    """Run every check of :data:`CHECKS` on ``tool``.

    Raises:
        ConformanceError: the first check that fails, named.
    """
    run_checks(CHECKS, tool, label=f"tool {tool.name}")
