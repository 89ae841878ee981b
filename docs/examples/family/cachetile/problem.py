"""The search problem of the example family: tile sizes and block order of a matmul, hit rate against working set.

Every option's default and bound comes from :class:`cachetile.sim.CacheConfig` (``config_field``);
the design space is a level table, so :class:`coevo.LevelProblem` gives the encoding, point
ids, the text form and the co-evolution operators. Run it with::

    PYTHONPATH=docs/examples/family coevo search --problem cachetile.problem:CacheTiling --budget 20
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

import coevo
from coevo.search.problem import config_field

from .sim import ORDERS, CacheConfig, simulate, tile_kib

TILES = (2, 4, 8, 16, 32)
LEVELS = {
    "tile_m": coevo.Levels(TILES),
    "tile_n": coevo.Levels(TILES),
    "tile_k": coevo.Levels(TILES),
    "order": coevo.Levels(ORDERS, ordered=False),
}


class CacheTilingOptions(coevo.ProblemOptions):
    """Options of the ``cache-tiling`` problem: the multiplication and the cache every design runs on."""

    size: int = config_field(CacheConfig, "size")
    capacity_kib: float = config_field(CacheConfig, "capacity_kib")
    line_bytes: int = config_field(CacheConfig, "line_bytes")
    element_bytes: int = config_field(CacheConfig, "element_bytes")


class CacheTiling(coevo.LevelProblem):
    """Tilings of a matmul on a toy LRU cache: hit rate (simulated) against the tiles' working set."""

    name = "cache-tiling"
    Options = CacheTilingOptions
    levels = LEVELS
    design_label = "tiling"
    design_noun = "a tiling"
    design_format = coevo.level_format(LEVELS)
    example_options: ClassVar[Mapping[str, Any]] = {"size": 16}
    objectives = (
        coevo.Objective("hit_pct", "maximize", "%", "expensive", bounds=(0.0, 100.0)),
        coevo.Objective("tile_kib", "minimize", "KiB", "cheap", depends_on=("element_bytes",), bounds=(0.0, None)),
    )

    def __init__(self, options: CacheTilingOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        self.config = CacheConfig(**self.options.model_dump())

    def evaluate(self, point: Any) -> dict[str, float]:
        tm, tn, tk, order = point
        return {"hit_pct": simulate(self.config, tm, tn, tk, order).hit_pct, "tile_kib": tile_kib(self.config, tm, tn, tk)}

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"tile_kib": np.array([tile_kib(self.config, *p[:3]) for p in points], dtype=float)}
