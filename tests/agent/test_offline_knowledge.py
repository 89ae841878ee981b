"""The offline reasoner's knowledge says what it measured: words agree with figures, confidence respects counts."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from coevo.agent.reasoners import KnowledgeContext, OfflineReasoner
from coevo.knowledge import KnowledgeBase
from coevo.knowledge.store import KnowledgeStore, StudyKnowledge, Version
from coevo.search.nb201 import NB201Problem
from coevo.search.nb201.problem import complexity_niches
from coevo.search.proposers import Evaluation

PROBLEM = NB201Problem(dataset="cifar10", device="fpga")
KEY = "pv:accuracy:edge_0_1:nor_conv_3x3:*"
CONV3 = 3  # op code of nor_conv_3x3 on edge_0_1, the value under test
OTHERS = (0, 1, 2, 4)
PATTERN = np.array([-1.5, 1.5, -0.5, 0.5, -1.0, 1.0, 0.0])
"""Deterministic spread around a batch's mean (zero mean)."""


def _batch(start: int, n: int, holds: bool, mean: float, spread: float) -> list[Evaluation]:
    """``n`` evaluations numbered from ``start``, accuracy ``mean`` + a fixed zero-mean pattern."""
    out = []
    for k in range(n):
        op = CONV3 if holds else OTHERS[k % len(OTHERS)]
        cell = (op, (start + k) % 5, (start + k) // 5 % 5, (start + k) // 25 % 5, 1, 2)
        acc = mean + spread * PATTERN[k % len(PATTERN)]
        out.append(Evaluation(start + k, cell, str(start + k), {"accuracy": float(acc), "latency_ms": 5.0}, True, {"round": 0}))
    return out


def _independent(evals: list[Evaluation]) -> tuple[float, float, int, int]:
    """(effect, 95% CI half-width, n with, n without) of nor_conv_3x3 on edge_0_1, from the raw values."""
    holds = [PROBLEM.to_params(e.point)["edge_0_1"] == "nor_conv_3x3" for e in evals]
    a = np.array([e.values["accuracy"] for e, h in zip(evals, holds, strict=True) if h])
    b = np.array([e.values["accuracy"] for e, h in zip(evals, holds, strict=True) if not h])
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    return float(a.mean() - b.mean()), 1.96 * se, len(a), len(b)


def _update(reasoner: OfflineReasoner, knowledge: StudyKnowledge, evals: list[Evaluation], round_no: int) -> Version:
    kb = knowledge.load()
    reasoner.update_knowledge(kb, evals, KnowledgeContext(PROBLEM, complexity_niches(), round_no, tuple(evals)))
    knowledge.save(kb, round_no)
    latest = knowledge.store.latest(knowledge.kb)
    return next(v for v in latest.values() if v.key == KEY)


def _close(shown: str, value: float) -> bool:
    """``shown`` (a number as printed, to its own precision) is ``value`` rounded."""
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    return abs(float(shown) - value) <= 0.5 * 10**-decimals + 1e-12


def _check_claim(v: Version, expected: tuple[float, float, int, int]) -> None:
    effect, ci, n_with, n_without = expected
    m = re.fullmatch(
        r"edge_0_1=nor_conv_3x3 \(vs other edge_0_1 values\) (raises|lowers) accuracy by ([\d.]+) ± ([\d.]+) pp "
        r"\(95% CI; (\d+) vs (\d+) evaluations\)",
        v.text,
    )
    assert m, v.text
    assert m[1] == ("raises" if effect > 0 else "lowers") and _close(m[2], abs(effect)) and _close(m[3], ci)
    assert (int(m[4]), int(m[5])) == (n_with, n_without)
    s = v.structured or {}
    assert s["effect"] == pytest.approx(effect) and s["ci95"] == pytest.approx(ci)
    assert (s["n_with"], s["n_without"]) == (n_with, n_without)


def test_text_is_rewritten_from_each_new_measurement_and_says_when_refuted(tmp_path: Path) -> None:
    store = KnowledgeStore(f"sqlite:///{tmp_path / 'kb.sqlite3'}")
    knowledge = StudyKnowledge(store, "s", PROBLEM.spec(), "offline (no LLM)")
    reasoner = OfflineReasoner()
    # round 0: a large effect, mined as a claim
    evals = _batch(0, 8, True, 85.0, 1.0) + _batch(100, 12, False, 75.0, 1.0)
    first = _update(reasoner, knowledge, evals, 0)
    _check_claim(first, _independent(evals))
    # round 1: more evidence, a smaller (still strong) effect: re-mined, new words
    evals += _batch(200, 10, True, 79.0, 2.0) + _batch(300, 10, False, 76.0, 2.0)
    second = _update(reasoner, knowledge, evals, 1)
    assert second.version > first.version and second.text != first.text
    _check_claim(second, _independent(evals))
    # round 2: weaker still, 1.96 < t < 2.5: not mined again, but re-measured, kept and rewritten
    evals += _batch(400, 40, True, 76.0, 5.0) + _batch(500, 40, False, 76.0, 5.0)
    effect, ci, _, _ = _independent(evals)
    assert 1.96 < 1.96 * effect / ci < 2.5  # the premise of this step
    third = _update(reasoner, knowledge, evals, 2)
    assert third.status == "proposed" and third.text != second.text
    _check_claim(third, _independent(evals))
    # round 3: the effect vanishes: refuted, and the words say so with the refuting figure
    evals += _batch(600, 40, True, 70.0, 12.0) + _batch(700, 20, False, 77.0, 12.0)
    effect, ci, n_with, n_without = _independent(evals)
    assert abs(effect) <= ci
    fourth = _update(reasoner, knowledge, evals, 3)
    assert fourth.status == "refuted"
    m = re.fullmatch(
        r"refuted: edge_0_1=nor_conv_3x3 \(vs other edge_0_1 values\) was claimed to raise accuracy; "
        r"re-measured ([+-]?[\d.]+) ± ([\d.]+) pp \(95% CI; (\d+) vs (\d+) evaluations\): the 95% CI contains 0",
        fourth.text,
    )
    assert m, fourth.text
    assert _close(m[1], effect) and _close(m[2], ci) and (int(m[3]), int(m[4])) == (n_with, n_without)
    s = fourth.structured or {}
    assert s["effect"] == pytest.approx(effect) and s["claimed_effect"] == pytest.approx(_independent(evals[:120])[0])
    assert s["n_with"] == n_with and s["n_without"] == n_without


def test_confidence_shrinks_with_few_evaluations_and_approaches_one_with_many() -> None:
    reasoner = OfflineReasoner()
    few = _batch(0, 5, True, 90.0, 0.2) + _batch(100, 6, False, 70.0, 0.2)
    effect, ci, _, _ = _independent(few)
    assert 1.96 * effect / ci > 30  # a huge t: 1 - p is 1.0000 to any printed precision
    kb_few = _kb(reasoner, few)
    claim = kb_few.by_key(KEY)
    assert claim is not None and claim.confidence <= 0.75
    many = _batch(0, 300, True, 90.0, 0.2) + _batch(1000, 300, False, 70.0, 0.2)
    claim = _kb(reasoner, many).by_key(KEY)
    assert claim is not None and claim.confidence >= 0.99


def _kb(reasoner: OfflineReasoner, evals: list[Evaluation]) -> KnowledgeBase:
    kb = KnowledgeBase()
    reasoner.update_knowledge(kb, evals, KnowledgeContext(PROBLEM, complexity_niches(), 1, tuple(evals)))
    return kb


def _noise_study(seed: int, planted: float) -> list[Evaluation]:
    """200 random cells whose accuracy is noise, plus ``planted`` pp where edge_0_1 is nor_conv_3x3; latency constant."""
    rng = np.random.default_rng(seed)
    cells = rng.integers(0, 5, size=(200, 6))
    acc = rng.normal(70.0, 2.0, 200) + planted * (cells[:, 0] == CONV3)
    return [
        Evaluation(k, tuple(int(c) for c in cells[k]), str(k), {"accuracy": float(acc[k]), "latency_ms": 5.0}, True, {"round": 0})
        for k in range(200)
    ]


def test_the_miner_controls_the_false_discovery_rate_over_a_rounds_comparisons() -> None:
    from scipy import stats

    evals = _noise_study(23, planted=0.0)
    # the premise: on pure noise, some single comparison passes the per-test floor |t| >= 2.5 by chance
    params = [PROBLEM.to_params(e.point) for e in evals]
    acc = np.array([e.values["accuracy"] for e in evals])
    naive = [
        abs(stats.ttest_ind(acc[held], acc[~held], equal_var=False).statistic)
        for name in params[0]
        for value in {p[name] for p in params}
        if min((held := np.array([p[name] == value for p in params])).sum(), (~held).sum()) >= 5
    ]
    assert max(naive) >= 2.5
    kb = KnowledgeBase()
    OfflineReasoner().update_knowledge(kb, evals, KnowledgeContext(PROBLEM, complexity_niches(), 0, tuple(evals)))
    assert [h.text for h in kb.heuristics.values()] == []  # Benjamini-Hochberg over the round's comparisons: no false claim
    # a real effect of the same data's size is still found
    evals = _noise_study(23, planted=3.0)
    kb = KnowledgeBase()
    OfflineReasoner().update_knowledge(kb, evals, KnowledgeContext(PROBLEM, complexity_niches(), 0, tuple(evals)))
    assert kb.by_key(KEY) is not None


def test_a_heuristic_imported_onto_a_part_keeps_its_origin_when_re_measured_or_refuted(tmp_path: Path) -> None:
    store = KnowledgeStore(f"sqlite:///{tmp_path / 'kb.sqlite3'}")
    knowledge = StudyKnowledge(store, "s", PROBLEM.spec(), "offline (no LLM)")
    reasoner = OfflineReasoner()
    evals = _batch(0, 8, True, 85.0, 1.0) + _batch(100, 12, False, 75.0, 1.0)
    _update(reasoner, knowledge, evals, 0)
    kb = knowledge.load()  # the claim as --kb-from leaves an imported one: scope and claim name its part and source problem
    h = kb.by_key(KEY)
    assert h is not None and h.structured is not None
    kb.upsert(KEY, 0, scope={**h.scope, "part": "cell", "from": "nb201"}, structured={**h.structured, "part": "cell"})
    knowledge.save(kb, 0)
    evals += _batch(200, 10, True, 79.0, 2.0) + _batch(300, 10, False, 76.0, 2.0)
    remined = _update(reasoner, knowledge, evals, 1)  # mined again: new figures
    evals += _batch(600, 40, True, 70.0, 12.0) + _batch(700, 20, False, 77.0, 12.0)
    refuted = _update(reasoner, knowledge, evals, 3)  # the effect vanishes: refuted with the re-measured figures
    assert refuted.status == "refuted" and remined.text != refuted.text
    for v in (remined, refuted):
        assert (v.scope["part"], v.scope["from"], (v.structured or {}).get("part")) == ("cell", "nb201", "cell")
