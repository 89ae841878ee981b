"""Pieces of GT routing on the SDM mesh that need no simulator: the bees' foraging table and the path baselines.

* :class:`ForagingTable`: per node, per destination, per outgoing link, a path quality in
  [0, 1] learned from returning foragers (BeeHive / BeeAdHoc, Wedde and Farooq: agents
  travel the network, report what they saw to the routing table of every node they pass
  on the way back, and data follow the table stochastically). Qualities *evaporate*: an
  entry last set to ``q`` at cycle ``t0`` reads ``q * 2 ** (-(t - t0) / half_life)`` at cycle
  ``t``, so information nobody refreshes fades. A forager's report moves an entry towards
  the measured quality by ``learning_rate``.
* :func:`segment_quality`: what a forager reports for the path it took from a node on:
  the bottleneck's free share of the link times the detour penalty (minimal hops / hops
  taken), 1 for an empty minimal path and 0 for a saturated one.
* :func:`widest_shortest_path` (among the minimal paths, one whose bottleneck has the most
  free sub-channels) and :func:`k_shortest_feasible` (networkx ``shortest_simple_paths``,
  the first of the ``k`` shortest with room on every link): the centralised baselines,
  computed from the true link state at request time (a best case for them: a real
  controller would see state as old as its round trip).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from coevo.sim.errors import UserInputError

if TYPE_CHECKING:  # networkx loads when a graph is first built, not when the problem is listed
    import networkx as nx

FreeFn = Callable[[int, int], int]
"""``(a, b) -> free sub-channels`` on the directed link a -> b."""


class ForagingTable:
    """Path qualities per (node, destination, next hop), with evaporation (module doc).

    Args:
        half_life: cycles after which an unrefreshed quality has halved.
        learning_rate: share of the gap to a forager's measured quality an update closes (0..1].
        floor: weight every candidate keeps in the roulette, so paths nobody reported on are still tried.

    Example:
        >>> t = ForagingTable(half_life=100)
        >>> t.reinforce(0, 5, 1, 0.8, now=0)
        >>> round(t.quality(0, 5, 1, now=100), 3)
        0.2
    """

    def __init__(self, half_life: float = 400.0, learning_rate: float = 0.5, floor: float = 0.02) -> None:
        if half_life <= 0 or not 0 < learning_rate <= 1 or floor < 0:
            raise UserInputError("bee table: half_life must be > 0, learning_rate in (0, 1], floor >= 0")
        self.half_life, self.learning_rate, self.floor = half_life, learning_rate, floor
        self._entries: dict[tuple[int, int], dict[int, tuple[float, int]]] = {}

    def quality(self, node: int, dst: int, nxt: int, now: int) -> float:
        """The evaporated quality of reaching ``dst`` from ``node`` through ``nxt`` (0 if never reported)."""
        value, t0 = self._entries.get((node, dst), {}).get(nxt, (0.0, now))
        return value * 2.0 ** (-(now - t0) / self.half_life)

    def reinforce(self, node: int, dst: int, nxt: int, measured: float, now: int) -> None:
        """A forager reports ``measured`` (0..1) for the path ``node -> nxt -> ... -> dst``."""
        q = self.quality(node, dst, nxt, now)
        self._entries.setdefault((node, dst), {})[nxt] = (q + self.learning_rate * (measured - q), now)

    def best_known(self, node: int, dst: int, now: int) -> float:
        """The highest quality ``node`` holds for ``dst`` (0 when it knows nothing fresh)."""
        return max((self.quality(node, dst, n, now) for n in self._entries.get((node, dst), {})), default=0.0)

    def best(self, node: int, dst: int, options: Sequence[int], now: int) -> int | None:
        """The option with the highest quality (None when none has a positive one); ties go to the lower node id."""
        scored = [(self.quality(node, dst, n, now), -n) for n in options]
        if not scored or max(scored)[0] <= 0:
            return None
        return -max(scored)[1]

    def choose(self, node: int, dst: int, options: Sequence[int], now: int, rng: random.Random, alpha: float, explore: float) -> int:
        """A forager's next hop: uniform with probability ``explore``, else roulette over ``(quality + floor) ** alpha``."""
        if not options:
            raise ValueError("no options to choose from")
        if rng.random() < explore:
            return rng.choice(list(options))
        weights = [(self.quality(node, dst, n, now) + self.floor) ** alpha for n in options]
        return rng.choices(list(options), weights=weights)[0]


def segment_quality(free: Sequence[int], subchannels: int, min_hops: int) -> float:
    """Quality of a path whose links had ``free`` sub-channels: bottleneck share x minimal hops / hops taken."""
    if not free:
        raise ValueError("a path segment has at least one link")
    return min(free) / subchannels * min_hops / len(free)


def widest_shortest_path(k: int, free: FreeFn, src: int, dst: int) -> tuple[list[int], int]:
    """Among the minimal paths of a k x k mesh from ``src`` to ``dst``, one with the widest bottleneck.

    Dynamic programming over the minimal-path DAG (every minimal path stays in the bounding
    box and steps towards ``dst``): ``width[v] = max over predecessors u of min(width[u], free(u, v))``.
    Ties go to the predecessor with the lower node id, so the answer is deterministic.

    Returns:
        (path, bottleneck free sub-channels); ``([src], 0)`` when ``src == dst``.
    """
    if src == dst:
        return [src], 0
    sx, sy, tx, ty = src % k, src // k, dst % k, dst // k
    step_x, step_y = (1 if tx > sx else -1), (1 if ty > sy else -1)
    width: dict[int, float] = {src: float("inf")}
    parent: dict[int, int] = {}
    for i in range(abs(tx - sx) + 1):
        for j in range(abs(ty - sy) + 1):
            v = (sy + j * step_y) * k + sx + i * step_x
            if v == src:
                continue
            preds = []
            if i > 0:
                preds.append(v - step_x)
            if j > 0:
                preds.append(v - step_y * k)
            best = max(preds, key=lambda u: (min(width[u], free(u, v)), -u))
            width[v], parent[v] = min(width[best], free(best, v)), best
    path = [dst]
    while path[-1] != src:
        path.append(parent[path[-1]])
    return path[::-1], int(width[dst])


def k_shortest_feasible(graph: nx.DiGraph, free: FreeFn, src: int, dst: int, width: int, k: int) -> list[int] | None:
    """The first of the ``k`` shortest simple paths (networkx, by hops) with ``width`` free sub-channels on every link."""
    import networkx as nx

    for path in itertools.islice(nx.shortest_simple_paths(graph, src, dst), k):
        if all(free(a, b) >= width for a, b in itertools.pairwise(path)):
            return list(path)
    return None
