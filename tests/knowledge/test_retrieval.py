"""Retrieval for prompts: relevance, confidence, token budget; rejected heuristics never included."""

from __future__ import annotations

import pytest

from coevo.knowledge import Heuristic
from coevo.knowledge.retrieval import WITHHOLD_ALL, estimate_tokens, prompt_line, rank, relevance, retrieve
from coevo.search.nb201.problem import NB201Problem
from coevo.search.pipeline.problem import PipelineProblem

CTX = {"problem": "nb201", "dataset": "cifar10", "device": "raspi4"}


def _h(
    n: int, *, conf: float = 0.8, status: str = "proposed", niche: str | None = None, device: str = "raspi4", objective: str = "accuracy"
) -> Heuristic:
    return Heuristic(
        id=f"H{n}",
        key=f"k{n}",
        text=f"claim number {n} about {objective}",
        scope={**CTX, "device": device, "niche": niche},
        structured={"objective": objective},
        confidence=conf,
        status=status,  # type: ignore[arg-type]
    )


def test_inactive_and_withheld_heuristics_are_never_retrieved() -> None:
    hs = [_h(1, status="rejected"), _h(2, status="refuted"), _h(3, status="retired"), _h(4), _h(5, status="accepted")]
    assert [h.id for h in rank(hs, CTX, None)] == ["H5", "H4"]
    assert [h.id for h in rank(hs, CTX, None, withhold=["k5"])] == ["H4"]
    assert rank(hs, CTX, None, withhold=[WITHHOLD_ALL]) == []


def test_scope_relevance() -> None:
    objectives = NB201Problem.objectives
    assert relevance(_h(1, niche="c1x1"), CTX, "c3x3_1", objectives) == 0.0  # another niche's claim
    assert relevance(_h(1, niche="c1x1"), CTX, "c1x1", objectives) > relevance(_h(1), CTX, "c1x1", objectives)  # own niche beats global
    accuracy_elsewhere = relevance(_h(1, device="fpga"), CTX, None, objectives)
    latency_elsewhere = relevance(_h(1, device="fpga", objective="latency_ms"), CTX, None, objectives)
    same = relevance(_h(1), CTX, None, objectives)
    # the declared dependencies decide: NB201 latency depends on the device, accuracy does not
    assert latency_elsewhere == pytest.approx(0.3 * same) and accuracy_elsewhere == pytest.approx(0.9 * same)
    ranked = rank([_h(1, conf=0.9, device="fpga", objective="latency_ms"), _h(2, conf=0.5)], CTX, None, objectives=objectives)
    assert [h.id for h in ranked] == ["H2", "H1"]
    # the same claim about a pipeline objective, learned on another cluster: throughput depends on every option
    pipe = {"problem": "pipeline", "model": "unet-sd", "cluster": "v100x16-ib10"}
    claim = Heuristic("H9", "k9", "t", {**pipe, "cluster": "v100x16-ib300", "niche": None}, {"objective": "samples_per_s"})
    assert relevance(claim, pipe, None, PipelineProblem.objectives) == pytest.approx(0.8 * 0.3)
    assert relevance(claim, pipe, None, ()) == pytest.approx(0.8 * 0.6)  # no objective known: in between
    assert relevance(claim, CTX, None, objectives) == pytest.approx(0.8 * 0.2)  # another problem


def test_token_budget_is_respected_and_filled_best_first() -> None:
    hs = [_h(k, conf=1.0 - k / 100) for k in range(1, 30)]
    line = estimate_tokens(prompt_line(hs[0])) + 1
    chosen = retrieve(hs, CTX, None, token_budget=5 * line + 2)
    assert [h.id for h in chosen] == ["H1", "H2", "H3", "H4", "H5"]
    assert sum(estimate_tokens(prompt_line(h)) + 1 for h in chosen) <= 5 * line + 2
    assert retrieve(hs, CTX, None, token_budget=3) == []
