"""Niches: a partition of a design space, so every complexity band gets explored.

PEL-NAS splits NB201 by complexity, the count of 3x3 convolutions (and 1x1 where there is
no 3x3), because an unguided reasoner or sampler drifts to the big, accurate cells and leaves
the fast end of the front empty. A partition is pluggable per problem
(:data:`PARTITIONS`); ``single`` (one niche) is the ablation.

Budget allocation (:func:`allocate`) adapts each round to each niche's contribution to the
found front, with a floor so no niche starves.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from search.errors import unknown_name
from search.nb201.space import OPS

_C3 = OPS.index("nor_conv_3x3")
_C1 = OPS.index("nor_conv_1x1")


@dataclass(frozen=True)
class Niche:
    """One part of a partition: an id, a description for prompts and reports, and a test."""

    id: str
    description: str
    contains: Callable[[Hashable], bool]


def nb201_complexity_niches() -> tuple[Niche, ...]:
    """The six PEL-NAS niches of NB201 by the count of 3x3 (and 1x1) convolutions."""

    def c3(cell: Hashable) -> int:
        return sum(op == _C3 for op in cell)  # type: ignore[attr-defined]

    def c1(cell: Hashable) -> int:
        return sum(op == _C1 for op in cell)  # type: ignore[attr-defined]

    return (
        Niche("conv0", "no convolution at all (only none / skip / avg-pool): the fastest cells", lambda c: c3(c) == 0 and c1(c) == 0),
        Niche("c1x1", "no 3x3 convolution, at least one 1x1 convolution", lambda c: c3(c) == 0 and c1(c) >= 1),
        Niche("c3x3_1", "exactly one 3x3 convolution", lambda c: c3(c) == 1),
        Niche("c3x3_2", "exactly two 3x3 convolutions", lambda c: c3(c) == 2),
        Niche("c3x3_3", "exactly three 3x3 convolutions", lambda c: c3(c) == 3),
        Niche("c3x3_4p", "four or more 3x3 convolutions: the most accurate, slowest cells", lambda c: c3(c) >= 4),
    )


def pipeline_degree_niches() -> tuple[Niche, ...]:
    """Hybrid-parallel configurations by pipeline degree: from pure data parallelism to deep pipelines.

    Deep pipelines move less gradient traffic but more activations and bubbles; shallow
    ones hold more of the model per device, so each band has its own memory/throughput trade-off.
    """

    def pp(point: Hashable) -> int:
        return int(point[0])  # type: ignore[index]

    return (
        Niche("pp1", "no pipeline: pure data parallelism, the whole model on every device", lambda c: pp(c) == 1),
        Niche("pp2-3", "shallow pipelines of 2-3 stages", lambda c: 2 <= pp(c) <= 3),
        Niche("pp4-7", "pipelines of 4-7 stages", lambda c: 4 <= pp(c) <= 7),
        Niche("pp8-15", "deep pipelines of 8-15 stages", lambda c: 8 <= pp(c) <= 15),
        Niche("pp16+", "pipelines of 16 or more stages", lambda c: pp(c) >= 16),
    )


def noc_subchannel_niches() -> tuple[Niche, ...]:
    """Mesh designs by sub-channels per link: cheap thin links to wide, costly ones."""

    def sc(point: Hashable) -> int:
        return int(point[0])  # type: ignore[index]

    return (
        Niche("s1-2", "thin links: 1-2 sub-channels per link (least wiring; routing must work hardest)", lambda d: sc(d) <= 2),
        Niche("s3-4", "3-4 sub-channels per link", lambda d: 3 <= sc(d) <= 4),
        Niche("s6-8", "wide links: 6-8 sub-channels per link (most wiring)", lambda d: sc(d) >= 6),
    )


def compress_depth_niches() -> tuple[Niche, ...]:
    """Restrictions by how many value bits they remove in all (sum over layers of log2(256 / K))."""

    def removed(point: Hashable) -> float:
        levels: tuple[int, ...] = point  # type: ignore[assignment]
        return sum(math.log2(256 / k) for k in levels)

    return (
        Niche("light", "light restrictions: at most 4 value bits removed over all layers (closest to INT8)", lambda p: removed(p) <= 4),
        Niche("medium", "5-10 value bits removed over all layers", lambda p: 4 < removed(p) <= 10),
        Niche("heavy", "more than 10 value bits removed: the lowest-energy, riskiest restrictions", lambda p: removed(p) > 10),
    )


def single_niche() -> tuple[Niche, ...]:
    """No partition: one niche holding the whole space (the ``-noniche`` ablation)."""
    return (Niche("all", "the whole design space", lambda c: True),)


PARTITIONS: dict[str, Callable[[], tuple[Niche, ...]]] = {
    "nb201-complexity": nb201_complexity_niches,
    "pipeline-degree": pipeline_degree_niches,
    "noc-subchannels": noc_subchannel_niches,
    "compress-depth": compress_depth_niches,
    "single": single_niche,
}


DEFAULT_PARTITION: dict[str, str] = {
    "nb201": "nb201-complexity",
    "pipeline": "pipeline-degree",
    "noc": "noc-subchannels",
    "compress": "compress-depth",
}
"""Niche partition per problem name; problems not listed get one niche."""


def partition_for(problem_name: str) -> tuple[Niche, ...]:
    """The default niches of a problem (one niche when it has no partition)."""
    return get_partition(DEFAULT_PARTITION.get(problem_name, "single"))


def get_partition(name: str) -> tuple[Niche, ...]:
    """The niches of a registered partition."""
    try:
        return PARTITIONS[name]()
    except KeyError:
        raise unknown_name("niche partition", name, PARTITIONS) from None


def niche_of(niches: Sequence[Niche], point: Hashable) -> str:
    """Id of the (first) niche containing ``point``."""
    for niche in niches:
        if niche.contains(point):
            return niche.id
    raise ValueError(f"point {point!r} lies in no niche of the partition")


def allocate(total: int, contribution: dict[str, float], *, floor_share: float = 0.08) -> dict[str, int]:
    """Split ``total`` proposals across niches.

    Each niche gets ``floor_share`` of the round (at least one proposal when ``total``
    allows), and the rest in proportion to ``contribution`` (for instance its found-front
    points plus one), by largest remainder. Deterministic: ties break by niche order.
    """
    ids = list(contribution)
    if not ids or total <= 0:
        return dict.fromkeys(ids, 0)
    floor = max(1, int(floor_share * total)) if total >= len(ids) else 0
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
