"""Every registered tool passes the same checks; adding a tool adds it here automatically."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from coevo.search.nb201 import NB201Problem
from coevo.search.runner import run_search
from coevo.tools import REGISTRY, Tool, ToolArgumentError, ToolResult, call_tool, llm_name
from coevo.tools.adapters import outcome_of, run_from_cli, to_langchain

TOOLS = list(REGISTRY)
ids = [t.name for t in TOOLS]

SLOW_EXAMPLES = {
    "compress.energy_aware": "its example trains a CNN and its QAT variants (about 2 minutes on 2 cores)",
    "he.gcn": "its example runs a CKKS-encrypted pass (about 5-10 s a call, called 5 times here)",
}
"""Tools whose example takes minutes: the tests that run the example carry ``slow`` for them."""
MEASURED = {"wall_s", "cycles_per_s", "s_per_step", "train_s", "peak_rss_mb", "train_peak_added_mb"}
MEASURED |= {"timings", "speedup_of_degree_block", "plan_ms"}  # kernel.spmm's timed runs
MEASURED |= {"timing"}  # gnn.circuit's forward/backward timings
MEASURED |= {"encrypted_latency_s", "ckks_max_abs_error"}  # he.gcn: CKKS noise differs between encryptions
MEASURED |= {"latency_ms"}  # stepping.run's measured latency per step
MEASURED |= {"cpu_s", "cache_io_s"}  # freeze.train's measured CPU and cache I/O time
"""Result fields that are measurements of the machine (time, memory): two identical calls differ in them."""
RUNS_EXAMPLE = [pytest.param(t, id=t.name, marks=[pytest.mark.slow] if t.name in SLOW_EXAMPLES else []) for t in TOOLS]


@pytest.fixture(scope="module")
def example_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose default storage holds study ``example``: a small pelnas search with a knowledge base."""
    folder = tmp_path_factory.mktemp("world")
    storage = f"sqlite:///{folder / 'runs' / 'coevo.sqlite3'}"
    (folder / "runs").mkdir()
    run_search(NB201Problem(dataset="cifar10", device="fpga"), "pelnas", budget=30, storage=storage, study_name="example")
    return folder


@pytest.fixture(autouse=True)
def _in_example_world(example_world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # tool examples use the default storage (./runs/coevo.sqlite3) and study "example"
    monkeypatch.chdir(example_world)


@pytest.mark.parametrize("tool", TOOLS, ids=ids)
def test_contract(tool: Tool) -> None:
    assert re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*", tool.name)
    assert len(tool.description) > 30
    assert issubclass(tool.Args, BaseModel)
    schema = tool.schema()
    json.dumps(schema)
    assert schema["type"] == "object"
    for name, field in tool.Args.model_fields.items():
        assert field.description, f"{tool.name}.{name} has no description"


@pytest.mark.parametrize("tool", RUNS_EXAMPLE)
def test_example_runs(tool: Tool) -> None:
    result = call_tool(tool, tool.example)  # a tool that cannot produce its value raises
    assert isinstance(result, ToolResult) and result.value
    json.dumps(result.model_dump())  # JSON-serialisable for chat and CLI


@pytest.mark.parametrize("tool", TOOLS, ids=ids)
def test_unknown_argument_is_a_typed_error_naming_it(tool: Tool) -> None:
    with pytest.raises(ToolArgumentError, match="no_such_field"):
        call_tool(tool, {**tool.example, "no_such_field": 1})


@pytest.mark.parametrize("tool", TOOLS, ids=ids)
def test_malformed_json_is_a_typed_error(tool: Tool) -> None:
    with pytest.raises(ToolArgumentError, match="not valid JSON"):
        call_tool(tool, "{not json")
    with pytest.raises(ToolArgumentError, match="JSON object"):
        call_tool(tool, "[1, 2]")


@pytest.mark.parametrize("tool", TOOLS, ids=ids)
def test_wrong_type_is_a_typed_error_with_example(tool: Tool) -> None:
    first = next(iter(tool.Args.model_fields))
    with pytest.raises(ToolArgumentError, match="Example"):
        call_tool(tool, {**tool.example, first: {"nested": ["wrong", "type"]}})


@pytest.mark.parametrize("tool", RUNS_EXAMPLE)
def test_langchain_adapter(tool: Tool) -> None:
    lc = to_langchain(tool)
    assert lc.name == llm_name(tool.name)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", lc.name)
    assert set(lc.args) == set(tool.Args.model_fields)
    out = json.loads(lc.invoke(tool.example))  # invoked with plain arguments: the observation text only
    assert set(out) == {"value", "messages"} and out["value"]
    bad = lc.invoke({**tool.example, "no_such_field": 1})
    assert bad.startswith("error:") and "no_such_field" in bad
    # invoked with a tool call (as chat does): a ToolMessage whose artifact says how the call ended
    good = lc.invoke({"name": lc.name, "args": tool.example, "id": "c1", "type": "tool_call"})
    result = outcome_of(good).result
    assert outcome_of(good).ok and result is not None and json.loads(good.content) == json.loads(result.model_dump_json())
    failed = lc.invoke({"name": lc.name, "args": {**tool.example, "no_such_field": 1}, "id": "c2", "type": "tool_call"})
    assert outcome_of(failed).status == "error" and outcome_of(failed).result is None and failed.content == bad


@pytest.mark.parametrize("tool", RUNS_EXAMPLE)
def test_cli_adapter_matches_direct_call(tool: Tool) -> None:
    def strip(result: Any) -> Any:  # timings and speeds differ between two runs
        if isinstance(result, dict):
            return {k: strip(v) for k, v in result.items() if k not in MEASURED}
        if isinstance(result, list):
            return [strip(v) for v in result]
        return result

    via_cli, direct = strip(run_from_cli(tool, json.dumps(tool.example))), strip(call_tool(tool, tool.example).model_dump())
    if tool.confirm:  # tools with effects (a new version, a new process) differ in ids between two calls
        assert via_cli.keys() == direct.keys() and via_cli["value"].keys() == direct["value"].keys()
    else:
        assert via_cli == direct
