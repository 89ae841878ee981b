"""The offline reasoner speaks of objectives by name: its heuristics shape proposals on every problem, not only NB201."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from coevo.agent.reasoners import KnowledgeContext, OfflineReasoner, ProposeRequest
from coevo.knowledge import Heuristic, KnowledgeBase
from coevo.search.pipeline.problem import PipelineProblem
from coevo.search.problems import make_problem
from coevo.search.proposers import Evaluation


@pytest.fixture(scope="module")
def pipeline() -> PipelineProblem:
    problem = make_problem("pipeline", PipelineProblem.example_options)
    assert isinstance(problem, PipelineProblem)
    return problem


def _paid(problem: PipelineProblem, n: int) -> list[Evaluation]:
    rng = random.Random(3)
    points = sorted({problem.random_point(rng) for _ in range(n)})
    return [Evaluation(k, p, problem.point_id(p), problem.evaluate(p), True, {"round": 0}) for k, p in enumerate(points)]


def _claim(param: str, value: object, effect: float) -> Heuristic:
    structured = {"kind": "param_value_effect", "objective": "samples_per_s", "param": param, "value": value, "effect": effect}
    return Heuristic("H1", f"pv:samples_per_s:{param}:{value}:*", "claim", {"problem": "pipeline"}, {**structured, "niche": None})


def _proposals(problem: PipelineProblem, paid: list[Evaluation], heuristics: tuple[Heuristic, ...], seed: int) -> list[object]:
    niche = problem.niches()[2]  # pp4-7: most configurations of the example cluster live here
    elites = tuple(e for e in paid if niche.contains(e.point))[:4]
    request = ProposeRequest(
        problem=problem,
        niche=niche,
        quota=20,
        elites=elites,
        heuristics=heuristics,
        evaluations=tuple(paid),
        seen=frozenset(e.point_id for e in paid),
        round=1,
        rng=random.Random(seed),
    )
    return [p.point for p in OfflineReasoner().propose(request)]


def test_a_heuristic_on_a_pipeline_objective_changes_the_proposals(pipeline: PipelineProblem) -> None:
    paid = _paid(pipeline, 60)
    favoured = _claim("microbatch", 8, effect=1e6)  # claimed to raise samples/s enormously
    plain = [_proposals(pipeline, paid, (), seed) for seed in range(6)]
    guided = [_proposals(pipeline, paid, (favoured,), seed) for seed in range(6)]
    assert plain != guided  # before objectives were neutral, only claims on "accuracy" weighted anything
    count = Counter()
    for label, runs in (("plain", plain), ("guided", guided)):
        count[label] = sum(p.microbatch == 8 for run in runs for p in run)  # type: ignore[attr-defined]
    assert count["guided"] > count["plain"]
    # a claim against the value pushes the other way
    disfavoured = _claim("microbatch", 8, effect=-1e6)
    against = sum(p.microbatch == 8 for seed in range(6) for p in _proposals(pipeline, paid, (disfavoured,), seed))  # type: ignore[attr-defined]
    assert against < count["plain"]


def test_the_offline_reasoner_mines_claims_about_pipeline_objectives(pipeline: PipelineProblem) -> None:
    paid = _paid(pipeline, 80)
    kb = KnowledgeBase()
    changes = OfflineReasoner().update_knowledge(kb, paid, KnowledgeContext(pipeline, pipeline.niches(), 1, tuple(paid)))
    assert changes
    objectives = {(h.structured or {}).get("objective") for h in kb.heuristics.values()}
    assert objectives <= {"samples_per_s", "memory_gb"} and objectives
    unit = {(h.structured or {}).get("objective"): (h.structured or {}).get("unit") for h in kb.heuristics.values()}
    assert unit.get("memory_gb", "GB") == "GB" and unit.get("samples_per_s", "samples/s") == "samples/s"
