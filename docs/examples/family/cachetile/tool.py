"""The tool of the example family: one tiled multiplication on the toy cache, as the agent and ``coevo tools run`` call it.

Its arguments take their defaults and bounds from :class:`cachetile.sim.CacheConfig`, the same
declaration the problem reads; the simulator's own checks word any cross-field error.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from coevo.search.problem import config_field
from coevo.tools._base import Tool, ToolArgs, ToolResult

from .sim import CacheConfig, simulate, tile_kib


class CacheMatmulArgs(ToolArgs):
    size: int = config_field(CacheConfig, "size")
    capacity_kib: float = config_field(CacheConfig, "capacity_kib")
    line_bytes: int = config_field(CacheConfig, "line_bytes")
    element_bytes: int = config_field(CacheConfig, "element_bytes")
    tile_m: int = config_field(CacheConfig, "tile", description="tile rows of A and C")
    tile_n: int = config_field(CacheConfig, "tile", description="tile columns of B and C")
    tile_k: int = config_field(CacheConfig, "tile", description="tile depth (columns of A, rows of B)")
    order: Literal["ijk", "ikj", "kij"] = config_field(CacheConfig, "order")


class CacheMatmul(Tool):
    """Accesses, misses and hit rate of one tiled matmul on a fully associative LRU cache."""

    name = "cache.matmul"
    description = (
        "Simulate C = A @ B (n x n, row-major) computed tile by tile on a fully associative LRU cache; returns element "
        "accesses, misses, the hit rate in percent and the tiles' working set in KiB."
    )
    Args = CacheMatmulArgs
    example: ClassVar[dict[str, Any]] = {"size": 16, "tile_m": 4, "tile_n": 4, "tile_k": 4}

    def run(self, args: CacheMatmulArgs) -> ToolResult:
        fields = ("size", "capacity_kib", "line_bytes", "element_bytes")
        config = CacheConfig(**{f: getattr(args, f) for f in fields}, tile=args.tile_m, order=args.order)
        stats = simulate(config, args.tile_m, args.tile_n, args.tile_k, args.order)
        value = {
            "accesses": stats.accesses,
            "misses": stats.misses,
            "hit_pct": round(stats.hit_pct, 4),
            "tile_kib": tile_kib(config, args.tile_m, args.tile_n, args.tile_k),
        }
        return ToolResult(value=value, messages=["fully associative LRU cache, no prefetching; every element touch is one access"])
