"""The simulator of the example family: misses of a tiled matrix multiplication on a fully associative LRU cache.

``C = A @ B`` with ``n x n`` matrices, row-major, laid out one after another in memory. The
blocks of ``tile_m x tile_k`` (A), ``tile_k x tile_n`` (B) and ``tile_m x tile_n`` (C) are
visited in a block loop order (``ijk``, ``ikj`` or ``kij``: which block index is outermost);
inside a block the loops run ``i, k, j``, touching ``A[i, k]``, ``B[k, j]`` and ``C[i, j]``. Every
touch is one access to the line holding the element; the cache keeps the most recently used
lines that fit its capacity. Like every ``sim/`` package, this module imports nothing of coevo's.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field

ORDERS = ("ijk", "ikj", "kij")
"""Block loop orders, outermost index first."""


@dataclass(frozen=True)
class CacheConfig:
    """The family's one configuration: every default and bound its problem and tool use (``metadata``: help, unit, bounds).

    Raises:
        ValueError: a value out of its bounds (the message names the field).
    """

    size: int = field(default=32, metadata={"help": "matrix side n: C = A @ B with n x n matrices", "unit": "elements", "ge": 4, "le": 128})
    capacity_kib: float = field(default=4.0, metadata={"help": "cache capacity", "unit": "KiB", "gt": 0, "le": 1024})
    line_bytes: int = field(default=64, metadata={"help": "cache line size", "unit": "bytes", "ge": 4, "le": 512})
    element_bytes: int = field(default=4, metadata={"help": "bytes per matrix element (float32: 4)", "unit": "bytes", "ge": 1, "le": 8})
    tile: int = field(default=8, metadata={"help": "tile side of one tool call", "unit": "elements", "ge": 1, "le": 128})
    order: str = field(default="ijk", metadata={"help": "block loop order, outermost index first: " + ", ".join(ORDERS)})

    def __post_init__(self) -> None:
        for f in self.__dataclass_fields__.values():
            value, meta = getattr(self, f.name), f.metadata
            if ("ge" in meta and value < meta["ge"]) or ("gt" in meta and value <= meta["gt"]) or ("le" in meta and value > meta["le"]):
                raise ValueError(
                    f"{f.name}={value} is out of bounds ({', '.join(f'{k} {meta[k]}' for k in ('ge', 'gt', 'le') if k in meta)})"
                )
        if self.order not in ORDERS:
            raise ValueError(f"order={self.order!r}: use one of {', '.join(ORDERS)}")


@dataclass(frozen=True)
class CacheStats:
    """What one simulated multiplication did: ``accesses`` element touches, ``misses`` of them missed the cache."""

    accesses: int
    misses: int

    @property
    def hit_pct(self) -> float:
        """Share of accesses that hit, in percent."""
        return 100.0 * (1 - self.misses / self.accesses)


def tile_kib(config: CacheConfig, tile_m: int, tile_n: int, tile_k: int) -> float:
    """The working set of one block step: the three tiles, in KiB."""
    return (tile_m * tile_k + tile_k * tile_n + tile_m * tile_n) * config.element_bytes / 1024


def simulate(config: CacheConfig, tile_m: int, tile_n: int, tile_k: int, order: str) -> CacheStats:
    """Count the accesses and LRU misses of the tiled multiplication (module doc)."""
    n, eb, line = config.size, config.element_bytes, config.line_bytes
    lines = max(1, int(config.capacity_kib * 1024) // line)
    base = {"a": 0, "b": n * n * eb, "c": 2 * n * n * eb}
    cache: OrderedDict[int, None] = OrderedDict()
    accesses = misses = 0
    ranges = {"i": range(0, n, tile_m), "j": range(0, n, tile_n), "k": range(0, n, tile_k)}
    for block in itertools.product(*(ranges[x] for x in order)):
        at = dict(zip(order, block, strict=True))
        for i in range(at["i"], min(at["i"] + tile_m, n)):
            for k in range(at["k"], min(at["k"] + tile_k, n)):
                for j in range(at["j"], min(at["j"] + tile_n, n)):
                    for address in (base["a"] + (i * n + k) * eb, base["b"] + (k * n + j) * eb, base["c"] + (i * n + j) * eb):
                        tag = address // line
                        accesses += 1
                        if tag in cache:
                            cache.move_to_end(tag)
                        else:
                            misses += 1
                            cache[tag] = None
                            if len(cache) > lines:
                                cache.popitem(last=False)
    return CacheStats(accesses, misses)
