"""Autotuning the degree-block SpMM on measured time: a coevo problem whose objective is a timing.

A point is a setting of the degree-block method (:mod:`sim.graph.spmm`): block work target,
long-row threshold, columns per work unit (Accel-GCN's combined column strategy), degree sort on/off, and threads (up to the
``threads`` option). Objectives:

* ``gflops`` (maximised, expensive): ``2 nnz F / t`` with ``t`` the median of ``repeats``
  timed runs after one warm-up run (the JIT compile and the plan are not timed).
* ``threads`` (minimised, cheap): the cores the setting holds, the design's cost on a shared
  machine; the front is the best throughput at each thread count.
* ``time_ms`` (minimised, expensive, reported): the median time itself.
* ``time_iqr_ms`` (minimised, expensive, reported): the interquartile range of the timed
  runs, so a result measured during a noisy spell can be told apart.

Measurements are noisy (``noisy = True``): the same design timed twice differs. Each
evaluation repeats the timing and keeps the median; the search engine never re-evaluates a
design it has (points are cached by id), so a lucky or unlucky median stays as measured.
Niches: ``serial`` (one thread) and ``parallel`` (more). No exact front is known.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple

import numpy as np
from pydantic import Field

from coevo.search.errors import UserInputError
from coevo.search.niches import Niche
from coevo.search.problem import LevelProblem, Levels, Objective, ProblemOptions, config_field, level_format
from coevo.sim.graph.config import WIDTH_ALL, SpmmConfig
from coevo.sim.graph.csr import Csr
from coevo.sim.graph.generators import load_graph

if TYPE_CHECKING:  # numba loads when a problem is built, not when it is listed
    from coevo.sim.graph.spmm import BlockParams

BLOCK_WORK = (1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22)
LONG_ROW = (256, 1024, 4096, 16384, 1 << 30)
"""The last long-row threshold never splits a row (the ablation of splitting)."""
WIDTHS = (8, 16, 32, 64, WIDTH_ALL)
"""Feature columns per work unit; WIDTH_ALL (the largest feature_dim allowed) means one unit per block."""
SORTS = (True, False)


class SpmmDesign(NamedTuple):
    """One setting of the degree-block SpMM (a point of the ``spmm`` problem)."""

    block_work: int
    long_row: int
    width: int
    sort: bool
    threads: int


class SpmmOptions(ProblemOptions):
    """Options of the ``spmm`` problem: the matrix and features every design multiplies."""

    graph: str = config_field(SpmmConfig, "search_graph")
    feature_dim: int = config_field(SpmmConfig, "feature_dim")
    threads: int = Field(2, ge=1, le=256, description="most threads a design may use (at most numba's pool, NUMBA_NUM_THREADS)")
    repeats: int = config_field(SpmmConfig, "repeats", description="timed runs per design after one warm-up (the median is kept)")
    dtype: Literal["float32", "float64"] = config_field(SpmmConfig, "dtype")


def _threads(point: Any) -> int:
    return int(SpmmDesign(*point).threads)


@functools.lru_cache(maxsize=4)
def _graph(graph: str) -> Csr:
    return load_graph(graph)


class SpmmProblem(LevelProblem):
    """Degree-block SpMM settings timed on one graph (module doc)."""

    name = "spmm"
    Options = SpmmOptions
    run_group = "graph"
    noisy = True
    design_label = "setting"
    design_noun = "an SpMM setting"
    point_type = SpmmDesign
    example_options: ClassVar[Mapping[str, Any]] = {"graph": "karate", "feature_dim": 16, "threads": 1, "repeats": 2}
    objectives = (
        Objective("gflops", "maximize", "GFLOP/s", "expensive", bounds=(0.0, None)),
        Objective("threads", "minimize", "threads", "cheap", depends_on=(), bounds=(1.0, None)),
        Objective("time_ms", "minimize", "ms", "expensive", bounds=(0.0, None)),
        Objective("time_iqr_ms", "minimize", "ms", "expensive", bounds=(0.0, None)),
    )

    def __init__(self, options: SpmmOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        from coevo.sim.graph.spmm import pool_threads

        o = self.options
        if o.threads > pool_threads():
            raise UserInputError(f"threads={o.threads} exceeds numba's pool of {pool_threads()}; lower it or set NUMBA_NUM_THREADS")
        self.thread_choices = tuple(range(1, o.threads + 1))
        choices = (BLOCK_WORK, LONG_ROW, WIDTHS, SORTS, self.thread_choices)
        self.levels = {f: Levels(c) for f, c in zip(SpmmDesign._fields, choices, strict=True)}
        self.design_format = level_format(self.levels)
        self._x: np.ndarray | None = None

    @property
    def graph(self) -> Csr:
        """The matrix (loaded once per process; named graphs are cached on disk)."""
        return _graph(self.options.graph).astype(np.dtype(self.options.dtype))

    def niches(self) -> tuple[Niche, ...]:
        return (
            Niche("serial", "one thread: no parallel overhead, the least of a shared machine", lambda p: _threads(p) == 1),
            Niche("parallel", "two or more threads: load balance across threads matters", lambda p: _threads(p) > 1),
        )

    def point_id(self, point: Any) -> str:
        d = SpmmDesign(*point)
        return f"w{d.block_work}-l{d.long_row}-c{d.width}-{'s' if d.sort else 'n'}-p{d.threads}"

    def explain_encoding(self) -> str:
        return (
            "A design sets the degree-block SpMM Y = A X: block_work (target multiply-adds per block of rows), long_row (rows "
            "with more nonzeros are split into chunks this long, merged by a reduction; 1073741824 never splits), width (feature "
            f"columns per parallel work unit; {WIDTH_ALL} means all columns), sort (rows by degree, longest first) and threads. "
            "Objective: measured "
            f"GFLOP/s (median of {self.options.repeats} runs) on {self.options.graph} with {self.options.feature_dim} features. "
            f"It is written as {self.design_format}."
        )

    def params_of(self, point: Any) -> BlockParams:
        """The :class:`BlockParams` of a design."""
        from coevo.sim.graph.spmm import BlockParams

        d = SpmmDesign(*point)
        return BlockParams(block_work=d.block_work, long_row=d.long_row, width=d.width, sort=d.sort, threads=d.threads)

    def evaluate(self, point: Any) -> dict[str, float]:
        from coevo.sim.graph.spmm import plan, spmm_blocked

        d = SpmmDesign(*point)
        a = self.graph
        f = self.options.feature_dim
        if self._x is None:
            self._x = np.random.default_rng(0).standard_normal((a.shape[1], f)).astype(np.dtype(self.options.dtype))
        schedule = plan(a, f, self.params_of(d))
        spmm_blocked(a, self._x, schedule)  # warm-up: the JIT compile (or cache load) and first touch are not timed
        times = []
        for _ in range(self.options.repeats):
            t0 = time.perf_counter()
            spmm_blocked(a, self._x, schedule)
            times.append(time.perf_counter() - t0)
        median = statistics.median(times)
        q1, q3 = np.percentile(times, [25, 75])
        return {
            "gflops": 2 * a.nnz * f / median / 1e9,
            "threads": float(d.threads),
            "time_ms": median * 1e3,
            "time_iqr_ms": float(q3 - q1) * 1e3,
        }

    def acquisition_bounds(self) -> tuple[float, float]:
        return 0.0, float(self.options.threads) + 1.0

    # ---- operators for the co-evolution engine (Evolvable)

    def features(self, points: Sequence[Any]) -> np.ndarray:
        """log2 of the sizes, sort as 0/1, threads."""
        rows = [
            [np.log2(d.block_work), np.log2(d.long_row), np.log2(min(d.width, self.options.feature_dim)), float(d.sort), float(d.threads)]
            for d in (SpmmDesign(*p) for p in points)
        ]
        return np.asarray(rows, dtype=float).reshape(len(rows), 5)

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"threads": np.array([float(SpmmDesign(*p).threads) for p in points])}
