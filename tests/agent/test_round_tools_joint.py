"""Issue 32 item 6: an LLM reasoner proposing designs of a composed problem knows its free objectives through its round tools."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from coevo.agent.reasoners._base import ProposeRequest
from coevo.agent.reasoners.llm import LLMReasoner
from coevo.agent.reasoners.round_tools import RoundToolbox
from coevo.search.nb201 import NB201Problem
from coevo.search.nb201_accel.problem import NB201AccelProblem
from coevo.search.niches import single_niche
from coevo.search.problem import Objective, Problem
from tests.fakes.openai_server import FakeOpenAI

DESIGNS = [
    "cell: |nor_conv_3x3~0|+|nor_conv_1x1~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|none~2| ; "
    "accel: rows=16 cols=64 dataflow=os ifmap_kb=128 filter_kb=32 ofmap_kb=64 clock_mhz=400",
    "cell: |avg_pool_3x3~0|+|avg_pool_3x3~0|avg_pool_3x3~1|+|skip_connect~0|skip_connect~1|avg_pool_3x3~2| ; "
    "accel: rows=128 cols=8 dataflow=is ifmap_kb=16 filter_kb=8 ofmap_kb=16 clock_mhz=1000",
]
FREE = ("latency_ms", "energy_uj", "area_mm2")


def _request(problem: Problem, storage: str) -> ProposeRequest:
    return ProposeRequest(
        problem=problem,
        niche=single_niche()[0],
        quota=1,
        elites=(),
        heuristics=(),
        evaluations=(),
        seen=frozenset(),
        round=1,
        rng=random.Random(0),
        study="s",
        storage=storage,
    )


def test_an_llm_round_on_nb201_accel_offers_its_free_objectives_at_their_evaluated_values(storage: str) -> None:
    problem = NB201AccelProblem(dataset="cifar10")
    script = [
        {"tool_calls": [{"name": "problem_cheap_objectives", "arguments": {"designs": DESIGNS}}]},
        {"content": json.dumps({"candidates": [{"design": DESIGNS[0], "rationale": "fast and small"}]})},
    ]
    with FakeOpenAI(script) as fake:
        reasoner = LLMReasoner(model="fake-7b", base_url=fake.url, backoff_s=0.01, timeout_s=5.0)
        proposals = reasoner.propose(_request(problem, storage))
    assert [p.point for p in proposals] == [problem.parse_design(DESIGNS[0])]
    first = fake.requests[0]
    assert "problem_cheap_objectives" in {t["function"]["name"] for t in first["tools"]}
    prompt = next(m["content"] for m in first["messages"] if m["role"] == "user")
    line = next(line for line in prompt.splitlines() if line.strip().startswith("- problem_cheap_objectives:"))
    for o in problem.objectives:  # the prompt names exactly the free ones, with their units
        assert (f"{o.name} ({o.unit})" in line) == (o.name in FREE), o.name
    observation = json.loads(next(m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"))["value"]
    for row, design in zip(observation["designs"], DESIGNS, strict=True):
        truth = problem.evaluate(problem.parse_design(design))
        assert set(row) == {"design", *FREE}  # never the expensive accuracy
        for name in FREE:
            assert row[name] == pytest.approx(truth[name], rel=1e-6, abs=1e-6), name
    assert reasoner.take_trace()["tools"]["by_status"] == {"ok": 1}


class _AllPaid(NB201Problem):
    """NB201 with its latency declared expensive too: nothing is free to know."""

    name = "nb201-all-paid"
    objectives = (
        Objective("accuracy", "maximize", "%", "expensive", bounds=(0.0, 100.0)),
        Objective("latency_ms", "minimize", "ms", "expensive", bounds=(0.0, None)),
    )


@pytest.mark.parametrize(
    ("problem", "free"),
    [(NB201AccelProblem(dataset="cifar10"), FREE), (NB201Problem(dataset="cifar10", device="fpga"), ("latency_ms",)), (_AllPaid(), ())],
    ids=["nb201-accel", "nb201", "nothing-free"],
)
def test_the_round_offers_the_cheap_tool_only_with_the_problems_free_objectives(
    problem: Problem, free: tuple[str, ...], storage: str
) -> None:
    offered: dict[str, Any] = {t["name"]: t["use"] for t in RoundToolbox(problem, "s", storage).offered()}
    assert {"study_front", "kb_show"} <= set(offered)
    if not free:
        assert "problem_cheap_objectives" not in offered
        return
    named = [o.name for o in problem.objectives if f"{o.name} (" in offered["problem_cheap_objectives"]]
    assert tuple(named) == free
