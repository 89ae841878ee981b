"""Kernel tools: SpMM (``Y = A X``) by the degree-sorted block method against its baselines, timed in one run."""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from coevo.search.errors import UserInputError
from coevo.search.problem import config_field
from coevo.search.stats import verdict
from coevo.sim.graph.bench import METHODS, Timings, benchmark
from coevo.sim.graph.config import SpmmConfig
from coevo.sim.graph.generators import GRAPHS, load_graph
from coevo.sim.graph.spmm import BlockParams
from coevo.sim.zoo.cache_files import collected_notes
from coevo.tools._base import Tool, ToolArgs, ToolResult


class SpmmParams(BaseModel):
    """Tunable parameters of the degree-block method (defaults: :class:`sim.graph.spmm.BlockParams`)."""

    model_config = ConfigDict(extra="forbid")
    block_work: int = Field(BlockParams.block_work, ge=1, description="target multiply-adds ((nnz + 1) x F) per block")
    long_row: int = Field(BlockParams.long_row, ge=1, description="rows with more nonzeros are split into chunks this long and merged")
    width: int = Field(
        BlockParams.width,
        ge=1,
        description="feature columns per work unit (Accel-GCN's combined column strategy: a block and a column group is one "
        "parallel unit); >= feature_dim: one unit per block",
    )
    sort: bool = Field(BlockParams.sort, description="sort rows by degree (longest first) before grouping them into blocks")
    threads: int | None = Field(None, ge=1, description="threads for degree-block, naive and torch (default: numba's count)")
    schedule: Literal["static", "dynamic"] = Field(
        BlockParams.schedule, description="static: equal block counts per thread; dynamic: threads take the next block when free"
    )


class SpmmArgs(ToolArgs):
    """Arguments of ``kernel.spmm``."""

    graph: str = config_field(
        SpmmConfig,
        "graph",
        description=f"a named graph ({', '.join(GRAPHS)}; generated ones take a seed suffix, e.g. rmat-1m@1) or the path "
        "of a CSR .npz file (arrays indptr, indices, data, shape; or scipy.sparse.save_npz's)",
    )
    feature_dim: int = config_field(SpmmConfig, "feature_dim", description="columns F of the dense X (Y = A X); >= 1")
    method: Literal["degree-block", "naive", "scipy", "torch", "all"] = Field(
        "all",
        description="degree-block: ours; naive: row loop in the same numba JIT; scipy: scipy.sparse CSR @ dense; torch: "
        "torch.sparse_csr @ dense; all: every method, interleaved in one run (degree-block's speedups need the others)",
    )
    params: SpmmParams = Field(
        default_factory=lambda: SpmmParams.model_validate({}), description="degree-block parameters (and the threads of every method)"
    )
    repeats: int = config_field(SpmmConfig, "repeats", description="timed runs per method after one warm-up run (the median is reported)")
    dtype: Literal["float32", "float64"] = config_field(SpmmConfig, "dtype", description="value type of A, X and Y")
    seed: int = Field(0, ge=0, description="seed of the random X and of the shuffled order of the timed runs")


class KernelSpmm(Tool):
    """Time ``Y = A X`` by the degree-block method and its baselines on one graph."""

    name = "kernel.spmm"
    measured_fields = frozenset({"timings", "speedup_of_degree_block", "plan_ms", "wall_s", "verdicts"})  # the timed runs
    description = (
        "Sparse x dense matrix product Y = A X (A: a graph's CSR adjacency, X: F dense feature columns), the aggregation of "
        "a GCN layer. Methods: degree-block (rows sorted by degree, grouped into blocks of balanced work, long rows split "
        "and merged, work units of a block and a group of feature columns; numba, parallel), naive (row loop in the same JIT), "
        "scipy.sparse, "
        "torch.sparse_csr. Returns median time and IQR (ms), GFLOP/s (2 nnz F / time), speedups of degree-block over each "
        "baseline (median of paired per-round ratios), load balance (max/mean work per block and per thread), error vs scipy."
    )
    Args = SpmmArgs
    example: ClassVar[dict[str, Any]] = {"graph": "rmat-100k", "feature_dim": 32, "method": "all", "repeats": 3}
    long_running = True

    def run(self, args: SpmmArgs) -> ToolResult:
        started = time.perf_counter()
        with collected_notes() as rebuilt:  # a damaged cache entry is generated again: say so in the messages
            a = load_graph(args.graph)
        if a.nnz == 0:
            raise UserInputError(f"graph {args.graph!r} has no nonzeros; there is nothing to multiply")
        params = BlockParams(**args.params.model_dump())
        methods = list(METHODS) if args.method == "all" else [args.method]
        timings = benchmark(a, args.feature_dim, methods=methods, params=params, repeats=args.repeats, seed=args.seed, dtype=args.dtype)
        summary = timings.summary()
        value = {
            "graph": args.graph,
            "rows": a.shape[0],
            "cols": a.shape[1],
            "nnz": a.nnz,
            "max_degree": int(a.degrees.max()),
            "feature_dim": args.feature_dim,
            "dtype": args.dtype,
            "params": {**args.params.model_dump(), "threads": timings.threads},
            "repeats": args.repeats,
            **summary,
            "wall_s": round(time.perf_counter() - started, 3),
            # timed, so they differ between two calls: a value field (listed in measured_fields), not a message
            "verdicts": _verdicts(timings),
        }
        return ToolResult(value=value, messages=[*rebuilt, *timings.notes])


NOISY_IQR = 0.2
"""An IQR above this share of the median marks a method's timings as noisy (a loaded machine, too few repeats)."""


def _verdicts(timings: Timings) -> list[str]:
    """Degree-block's paired per-round speed-up over each baseline with its verdict, and a warning per noisy method."""
    lines = []
    if "degree-block" in timings.times_s:
        mine = np.asarray(timings.times_s["degree-block"])
        for other, times in timings.times_s.items():
            if other != "degree-block":
                ratios = (np.asarray(times) / mine).tolist()
                # the mean of paired per-round ratios; speedup_of_degree_block beside it is the ratio of the medians
                what = f"degree-block vs {other} (mean of the rounds' paired ratios)"
                lines.append(verdict(what, ratios, unit="x speed-up", null=1.0, unit_of_pairing="rounds"))
    for m in timings.times_s:
        spread = timings.iqr_s(m) / timings.median_s(m)
        if spread > NOISY_IQR:
            lines.append(
                f"warning: {m}'s timings are noisy (IQR {100 * spread:.0f} % of the median); rerun on a quiet machine or with more repeats"
            )
    return lines
