"""Issue 32 item 6: chat describes, starts and follows a joint (composed) search and explains a design part by part.

The model is scripted (the loopback OpenAI-protocol fake), the tools are the registry's real ones,
and every number the explanation gives is checked against what the test computes itself: the
problem's own evaluation of the design, the design text read by hand, the area model.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from coevo.agent.chat.loop import ChatAgent
from coevo.agent.chat.store import SessionStore
from coevo.agent.llm_client import LLMSettings, chat_model
from coevo.search.nb201_accel.problem import NB201AccelProblem
from coevo.sim.accel.area import array_mm2
from coevo.tools import REGISTRY, ToolArgumentError, call_tool
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import wait_until

STUDY = "joint-chat"
EDGES = ("edge_0_1", "edge_0_2", "edge_1_2", "edge_0_3", "edge_1_3", "edge_2_3")
"""NB201's edges in the order an arch string lists them (into node 1, then 2, then 3)."""


def _agent(fake: FakeOpenAI, storage: str) -> ChatAgent:
    store = SessionStore(storage)
    return ChatAgent(
        chat_model(LLMSettings(fake.url, "fake-chat", timeout_s=30.0, streaming=False)),
        REGISTRY,
        store,
        store.create("fake-chat"),
        storage=storage,
        confirm=lambda tool, args: True,
        stream=False,
    )


def _last_tool_result(request: dict[str, Any]) -> dict[str, Any]:
    content = [m for m in request["messages"] if m["role"] == "tool"][-1]["content"]
    return json.loads(content)["value"]


def _explain_the_most_accurate(request: dict[str, Any]) -> dict[str, Any]:
    """The scripted model's step after study_front: explain the front's most accurate design."""
    front = _last_tool_result(request)["front"]
    best = max(front, key=lambda row: row["accuracy"])
    return {"tool_calls": [{"name": "design_explain", "arguments": {"study": STUDY, "design": best["design"]}}]}


def _by_hand(design: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The cell's edge operations and the accelerator's settings, read from the written design without coevo."""
    cell_text, accel_text = (piece.split(":", 1)[1].strip() for piece in design.split(" ; "))
    ops = re.findall(r"\|([a-z_0-9]+)~\d", cell_text)
    settings = {k: (v if k == "dataflow" else int(v)) for k, v in re.findall(r"(\w+)=(\w+)", accel_text)}
    return dict(zip(EDGES, ops, strict=True)), settings


def test_chat_describes_starts_follows_and_explains_a_joint_search(storage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("COEVO_LLM_BASE_URL", "COEVO_LLM_MODEL"):  # the background search's reasoner: offline
        monkeypatch.delenv(var, raising=False)
    start = {"problem": "nb201-accel", "options": {"dataset": "cifar10"}, "proposer": "pelnas", "budget": 6, "study": STUDY}
    script = [
        {"tool_calls": [{"name": "problem_describe", "arguments": {"problem": "nb201-accel"}}]},
        {"content": "nb201-accel joins an NB201 cell and a systolic array."},
        {"tool_calls": [{"name": "search_start", "arguments": start}]},
        {"content": f"Started {STUDY}."},
        {"tool_calls": [{"name": "search_status", "arguments": {"study": STUDY}}]},
        {"content": "It is finished."},
        {"tool_calls": [{"name": "study_front", "arguments": {"study": STUDY}}]},
        _explain_the_most_accurate,
        {"content": "Here it is, part by part."},
    ]
    with FakeOpenAI(script) as fake:
        agent = _agent(fake, storage)
        agent.turn("what is nb201-accel?")
        described = _last_tool_result(fake.requests[1])
        agent.turn("search it with a budget of 6")
        started = _last_tool_result(fake.requests[3])

        def finished() -> bool:
            try:
                return bool(call_tool(REGISTRY.get("search.status"), {"study": STUDY, "storage": storage}).value["finished"])
            except ToolArgumentError:
                return False

        wait_until(finished, 120, "the background joint search to finish", every_s=0.5)
        agent.turn("how is it going?")
        status = _last_tool_result(fake.requests[5])
        result = agent.turn("explain its most accurate design")
        explained = _last_tool_result(fake.requests[8])

    assert result.answer == "Here it is, part by part."
    assert all(call["ok"] for call in result.tool_calls)

    # described: the parts and their parameters, the objectives with units and costs
    assert [p["part"] for p in described["parts"]] == ["cell", "accel"]
    assert set(described["parts"][0]["parameters"]) == set(EDGES)
    assert described["parts"][1]["parameters"]["dataflow"] == ["ws", "os", "is"]
    costs = {o["name"]: o["cost"] for o in described["objectives"]}
    assert costs == {"accuracy": "expensive", "latency_ms": "cheap", "energy_uj": "cheap", "area_mm2": "cheap"}

    # started and followed to the end
    assert started["study"] == STUDY and started["budget"] == 6
    assert status["finished"] and status["paid"] == 6 and status["budget"] == 6

    # explained part by part, every number against the test's own
    problem = NB201AccelProblem(dataset="cifar10")
    design = explained["design"]
    truth = problem.evaluate(problem.parse_design(design))
    ops, settings = _by_hand(design)
    cell, accel = explained["parts"]
    assert (cell["part"], cell["label"], cell["parameters"]) == ("cell", "arch", ops)
    assert cell["handed_on"]["bits"] == 8  # the chain's int8 operands
    assert (accel["part"], accel["label"], accel["parameters"]) == ("accel", "accelerator", settings)
    s = settings
    assert accel["handed_on"]["area_mm2"] == pytest.approx(array_mm2(s["rows"], s["cols"], s["ifmap_kb"], s["filter_kb"], s["ofmap_kb"]))
    energy_split = sum(accel["handed_on"][f"cost.{k}_uj"] for k in ("mac", "sram", "dram"))
    assert energy_split == pytest.approx(truth["energy_uj"], rel=1e-5)
    assert accel["handed_on"]["cost.latency_ms"] == pytest.approx(truth["latency_ms"], rel=1e-6)
    rows = {o["objective"]: o for o in explained["objectives"]}
    assert list(rows) == ["accuracy", "latency_ms", "energy_uj", "area_mm2"]
    for name, value in truth.items():
        assert rows[name]["value"] == pytest.approx(value, rel=1e-6), name
        assert rows[name]["source"] == f"trial {explained['trial']} (paid)"
    assert rows["energy_uj"]["unit"].startswith("uJ per image") and rows["area_mm2"]["unit"].startswith("mm^2")


def test_explaining_a_design_the_study_did_not_evaluate_pays_for_nothing(storage: str) -> None:
    call_tool(
        REGISTRY.get("search.run"),
        {"problem": "nb201-accel", "proposer": "random", "budget": 2, "study": "tiny", "storage": storage},
    )
    problem = NB201AccelProblem(dataset="cifar10")
    design = (
        "cell: |avg_pool_3x3~0|+|nor_conv_1x1~0|none~1|+|skip_connect~0|nor_conv_3x3~1|avg_pool_3x3~2| ; "
        "accel: rows=8 cols=128 dataflow=is ifmap_kb=256 filter_kb=8 ofmap_kb=16 clock_mhz=200"
    )
    result = call_tool(REGISTRY.get("design.explain"), {"study": "tiny", "storage": storage, "design": design})
    rows = {o["objective"]: o for o in result.value["objectives"]}
    truth = problem.evaluate(problem.parse_design(design))
    assert result.value["trial"] is None and rows["accuracy"]["value"] is None and "costs an evaluation" in rows["accuracy"]["source"]
    for name in ("latency_ms", "energy_uj", "area_mm2"):
        assert rows[name]["value"] == pytest.approx(truth[name], rel=1e-9) and rows[name]["source"].startswith("computed now")
    with pytest.raises(ToolArgumentError, match=r"either design .* or trial"):
        call_tool(REGISTRY.get("design.explain"), {"study": "tiny", "storage": storage})
    with pytest.raises(ToolArgumentError, match="trial 99 is no completed evaluation"):
        call_tool(REGISTRY.get("design.explain"), {"study": "tiny", "storage": storage, "trial": 99})
