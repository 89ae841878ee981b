"""Choosing the heuristics a prompt carries: relevant to the context, confident, within a token budget.

Score of an active heuristic for a (problem spec, niche) context::

    score = confidence x status weight x scope relevance

* status weight: accepted 1.2, validated 1.1, proposed 1.0 (unhelpful, refuted, retired and rejected
  heuristics are never retrieved, nor are withheld claims: the ablation's switch).
* scope relevance: a heuristic scoped to another niche is excluded; its own niche 1.0,
  any niche (global) 0.8. A heuristic of another problem counts 0.2. Each other option of its
  scope that differs from the context multiplies it by 0.3 when the claim's objective depends
  on that option (:attr:`search.problem.Objective.depends_on`: NB201 latency on the device,
  accuracy on the dataset) and by 0.9 when it does not (accuracy does not depend on the
  device); 0.6 when the claim names no objective of the problem (free-text claims).

Heuristics are taken best first while their prompt line fits the budget (a line that
does not fit is skipped, and smaller ones may still fit). Tokens are estimated as
characters / 4: no tokenizer can be loaded offline, and the budget only has to bound the
prompt's size, not match a model's count exactly.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from coevo.knowledge.heuristics import Heuristic
from coevo.search.problem import Objective

STATUS_WEIGHT = {"accepted": 1.2, "validated": 1.1, "proposed": 1.0}
GLOBAL_NICHE = 0.8
OTHER_PROBLEM = 0.2
DEPENDS = 0.3
"""An option of the claim's scope differs and the claim's objective depends on it."""
INDEPENDENT = 0.9
"""An option of the claim's scope differs and the claim's objective does not depend on it."""
UNKNOWN_DEPENDENCE = 0.6
"""An option differs and the claim names no objective of the problem."""
WITHHOLD_ALL = "*"
"""Withhold every heuristic (the whole-knowledge-base ablation)."""


def estimate_tokens(text: str) -> int:
    """Approximate token count of ``text`` (characters / 4, at least 1)."""
    return max(1, (len(text) + 3) // 4)


def prompt_line(h: Heuristic) -> str:
    """How a heuristic appears in a prompt."""
    return f"{h.id} [{h.status}, confidence {h.confidence:.2f}] {h.text}"


def relevance(h: Heuristic, spec: Mapping[str, Any], niche: str | None, objectives: Sequence[Objective] = ()) -> float:
    """Scope relevance of ``h`` in context (0 = not applicable); see the module doc.

    Args:
        h: the heuristic.
        spec: the problem spec of the context (name and options).
        niche: the context's niche, or None for the whole space.
        objectives: the context problem's objectives (their ``depends_on``).
    """
    own = h.scope.get("niche")
    if own is not None and niche is not None and own != niche:
        return 0.0
    score = 1.0 if own is not None and own == niche else GLOBAL_NICHE
    if "problem" in h.scope and "problem" in spec and h.scope["problem"] != spec["problem"]:
        return score * OTHER_PROBLEM
    claimed = (h.structured or {}).get("objective")
    objective = next((o for o in objectives if o.name == claimed), None)
    for option, value in h.scope.items():
        if option in ("problem", "niche") or option not in spec or spec[option] == value:
            continue
        if objective is None:
            score *= UNKNOWN_DEPENDENCE
        else:
            score *= DEPENDS if objective.depends_on is None or option in objective.depends_on else INDEPENDENT
    return score


def rank(
    heuristics: Iterable[Heuristic],
    spec: Mapping[str, Any],
    niche: str | None,
    *,
    withhold: Collection[str] = (),
    objectives: Sequence[Objective] = (),
) -> list[Heuristic]:
    """Active, applicable, not withheld heuristics, best score first (ties: id order)."""
    if WITHHOLD_ALL in withhold:
        return []
    scored = []
    for h in heuristics:
        if not h.active or h.key in withhold:
            continue
        r = relevance(h, spec, niche, objectives)
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
    objectives: Sequence[Objective] = (),
) -> list[Heuristic]:
    """The best heuristics for the context whose prompt lines fit in ``token_budget`` tokens."""
    out, used = [], 0
    for h in rank(heuristics, spec, niche, withhold=withhold, objectives=objectives):
        cost = estimate_tokens(prompt_line(h)) + 1  # + the line break
        if used + cost <= token_budget:
            out.append(h)
            used += cost
    return out
