"""Niches: a partition of a design space, so every complexity band gets explored.

PEL-NAS splits NB201 by complexity, the count of 3x3 convolutions (and 1x1 where there is
no 3x3), because an unguided reasoner or sampler drifts to the big, accurate cells and leaves
the fast end of the front empty. Each problem declares its own partition
(:meth:`search.problem.Problem.niches`, next to the problem); :func:`single_niche` (one
niche) is the default and the ``-noniche`` ablation.

Budget allocation (:func:`allocate`) adapts each round to each niche's contribution to the
found front, with a floor so no niche starves.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Niche:
    """One part of a partition: an id, a description for prompts and reports, and a test."""

    id: str
    description: str
    contains: Callable[[Hashable], bool]


def single_niche() -> tuple[Niche, ...]:
    """No partition: one niche holding the whole space (the ``-noniche`` ablation)."""
    return (Niche("all", "the whole design space", lambda c: True),)


def niche_of(niches: Sequence[Niche], point: Hashable) -> str:
    """Id of the (first) niche containing ``point``."""
    for niche in niches:
        if niche.contains(point):
            return niche.id
    raise ValueError(f"point {point!r} lies in no niche of the partition")


FLOOR_SHARE = 0.08
"""Share of a round every niche gets at least, so none starves (PEL-NAS's allocation)."""


def allocate(total: int, contribution: dict[str, float], *, floor_share: float = FLOOR_SHARE) -> dict[str, int]:
    """Split ``total`` proposals across niches.

    Each niche gets ``floor_share`` of the round (at least one proposal when ``total``
    allows; none with a share of 0), and the rest in proportion to ``contribution`` (for instance its found-front
    points plus one), by largest remainder. Deterministic: ties break by niche order.
    """
    ids = list(contribution)
    if not ids or total <= 0:
        return dict.fromkeys(ids, 0)
    floor = max(1, int(floor_share * total)) if floor_share > 0 and total >= len(ids) else 0
    base = dict.fromkeys(ids, floor)
    rest = total - floor * len(ids)
    weight = sum(contribution.values()) or float(len(ids))
    raw = {k: rest * (contribution[k] or (0.0 if sum(contribution.values()) else 1.0)) / weight for k in ids}
    for k in ids:
        base[k] += int(raw[k])
    left = total - sum(base.values())
    for k in sorted(ids, key=lambda k: -(raw[k] - int(raw[k])))[:left]:
        base[k] += 1
    return base
