"""Choosing the heuristics a prompt carries: relevant to the context, confident, within a token budget.

Score of an active heuristic for a (problem spec, niche) context::

    score = confidence x status weight x scope relevance

* status weight: accepted 1.2, validated 1.1, proposed 1.0 (refuted, retired and rejected
  heuristics are never retrieved, nor are withheld claims: the ablation's switch).
* scope relevance: a heuristic scoped to another niche is excluded; its own niche 1.0,
  any niche (global) 0.8. Each scope field that differs from the context multiplies it:
  problem 0.2, dataset 0.6, device 0.3 for claims about a latency/energy objective and
  0.9 for others (accuracy does not depend on the device; latency does).

Heuristics are taken best first while their prompt line fits the budget (a line that
does not fit is skipped, and smaller ones may still fit). Tokens are estimated as
characters / 4: no tokenizer can be loaded offline, and the budget only has to bound the
prompt's size, not match a model's count exactly.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from knowledge.heuristics import Heuristic

STATUS_WEIGHT = {"accepted": 1.2, "validated": 1.1, "proposed": 1.0}
GLOBAL_NICHE = 0.8
MISMATCH = {"problem": 0.2, "dataset": 0.6}
DEVICE_MISMATCH_HARDWARE = 0.3
DEVICE_MISMATCH_OTHER = 0.9
HARDWARE_WORDS = ("latency", "energy", "power", "throughput", "area")
WITHHOLD_ALL = "*"
"""Withhold every heuristic (the whole-knowledge-base ablation)."""


def estimate_tokens(text: str) -> int:
    """Approximate token count of ``text`` (characters / 4, at least 1)."""
    return max(1, (len(text) + 3) // 4)


def prompt_line(h: Heuristic) -> str:
    """How a heuristic appears in a prompt."""
    return f"{h.id} [{h.status}, confidence {h.confidence:.2f}] {h.text}"


def relevance(h: Heuristic, spec: Mapping[str, Any], niche: str | None) -> float:
    """Scope relevance of ``h`` in context (0 = not applicable); see the module doc."""
    own = h.scope.get("niche")
    if own is not None and niche is not None and own != niche:
        return 0.0
    score = 1.0 if own is not None and own == niche else GLOBAL_NICHE
    for field, factor in MISMATCH.items():
        if field in h.scope and field in spec and h.scope[field] != spec[field]:
            score *= factor
    if "device" in h.scope and "device" in spec and h.scope["device"] != spec["device"]:
        objective = str((h.structured or {}).get("objective", h.text)).lower()
        hardware = any(word in objective for word in HARDWARE_WORDS)
        score *= DEVICE_MISMATCH_HARDWARE if hardware else DEVICE_MISMATCH_OTHER
    return score


def rank(heuristics: Iterable[Heuristic], spec: Mapping[str, Any], niche: str | None, *, withhold: Collection[str] = ()) -> list[Heuristic]:
    """Active, applicable, not withheld heuristics, best score first (ties: id order)."""
    if WITHHOLD_ALL in withhold:
        return []
    scored = []
    for h in heuristics:
        if not h.active or h.key in withhold:
            continue
        r = relevance(h, spec, niche)
        if r > 0:
            scored.append((h.confidence * STATUS_WEIGHT.get(h.status, 1.0) * r, h))
    scored.sort(key=lambda item: (-item[0], int(item[1].id[1:]) if item[1].id[1:].isdigit() else 0, item[1].id))
    return [h for _, h in scored]


def retrieve(
    heuristics: Iterable[Heuristic],
    spec: Mapping[str, Any],
    niche: str | None,
    *,
    token_budget: int,
    withhold: Collection[str] = (),
) -> list[Heuristic]:
    """The best heuristics for the context whose prompt lines fit in ``token_budget`` tokens."""
    out, used = [], 0
    for h in rank(heuristics, spec, niche, withhold=withhold):
        cost = estimate_tokens(prompt_line(h)) + 1  # + the line break
        if used + cost <= token_budget:
            out.append(h)
            used += cost
    return out
