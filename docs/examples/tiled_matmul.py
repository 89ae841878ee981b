"""A whole coevo problem in one file: tiling a blocked matrix multiplication, timed for real.

A design is a tiling of ``C = A @ B`` (square ``size x size`` matrices) into blocks of
``tile_m x tile_k`` times ``tile_k x tile_n``, computed by numpy one block product at a time,
in one of two loop orders. Objectives:

* ``gflops`` (maximised, expensive): measured throughput, the median of ``repeats`` timed runs
  after one warm-up run. Small tiles spend their time in Python's loop, large ones in BLAS.
* ``tile_kib`` (minimised, cheap): the working set of one step, the three tiles in KiB: what
  has to stay in cache (or in an accelerator's scratchpad) at once.

Run it with the command line (nothing to register)::

    coevo search --problem docs/examples/tiled_matmul.py:TiledMatmul --proposer pelnas --budget 30 --options '{"size": 256}'

or from Python::

    import coevo
    from tiled_matmul import TiledMatmul
    result = coevo.optimize(TiledMatmul(size=256), proposer="pelnas", budget=30)

The measured objective is noisy (``noisy = True``): coevo's conformance suite then checks that
evaluations are finite and positive instead of identical.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, NamedTuple

import numpy as np
from pydantic import Field

import coevo

TILES = (8, 16, 32, 64, 128, 256)
ORDERS = ("ikj", "kij")


class Tiling(NamedTuple):
    """One design: tile sizes and the loop order."""

    tile_m: int
    tile_n: int
    tile_k: int
    order: str


LEVELS = {
    "tile_m": coevo.Levels(TILES),
    "tile_n": coevo.Levels(TILES),
    "tile_k": coevo.Levels(TILES),
    "order": coevo.Levels(ORDERS, ordered=False),
}
"""The space: each parameter's choices (the base class derives the encoding, ids, text form and operators from it)."""


class TiledMatmulOptions(coevo.ProblemOptions):
    """Options of the tiled matmul problem."""

    size: int = Field(256, ge=16, le=2048, description="matrix side n: C = A @ B with n x n float32 matrices")
    repeats: int = Field(3, ge=1, le=50, description="timed runs per design (the median is kept)")
    dtype: Literal["float32", "float64"] = Field("float32", description="element type")


class TiledMatmul(coevo.LevelProblem):
    """Tilings of a blocked numpy matmul: throughput against working set (module doc)."""

    name = "tiled-matmul"
    Options = TiledMatmulOptions
    objectives = (
        coevo.Objective("gflops", "maximize", "GFLOP/s", "expensive", bounds=(0.0, None)),
        coevo.Objective("tile_kib", "minimize", "KiB", "cheap", depends_on=("dtype",), bounds=(0.0, None)),
    )
    example_options: ClassVar[Mapping[str, Any]] = {"size": 64, "repeats": 1}
    noisy = True
    design_label = "tiling"
    design_noun = "a tiling"
    levels = LEVELS
    point_type = Tiling
    design_format = (
        f"key=value pairs: tile_m=T tile_n=T tile_k=T order=O, T one of {', '.join(map(str, TILES))}, O one of {', '.join(ORDERS)}"
    )

    def __init__(self, options: TiledMatmulOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        rng = np.random.default_rng(0)
        n, dtype = self.options.size, np.dtype(self.options.dtype)
        self.a = rng.standard_normal((n, n)).astype(dtype)
        self.b = rng.standard_normal((n, n)).astype(dtype)

    # ---- the space (encoding and operators come from LEVELS; the point id keeps its own form)

    def point_id(self, point: Any) -> str:
        t = Tiling(*point)
        return f"{t.tile_m}x{t.tile_n}x{t.tile_k}-{t.order}"

    def niches(self) -> tuple[coevo.Niche, ...]:
        def kib(t: Any) -> float:
            return self._kib(Tiling(*t))

        return (
            coevo.Niche("l1", "working set up to 32 KiB (fits a typical L1 data cache)", lambda t: kib(t) <= 32),
            coevo.Niche("l2", "working set over 32 KiB and up to 1 MiB (an L2 cache)", lambda t: 32 < kib(t) <= 1024),
            coevo.Niche("big", "working set over 1 MiB: only a large cache holds it", lambda t: kib(t) > 1024),
        )

    # ---- the objectives

    def _kib(self, t: Tiling) -> float:
        itemsize = np.dtype(self.options.dtype).itemsize
        return (t.tile_m * t.tile_k + t.tile_k * t.tile_n + t.tile_m * t.tile_n) * itemsize / 1024

    def _multiply(self, t: Tiling) -> np.ndarray:
        a, b = self.a, self.b
        n = len(a)
        c = np.zeros((n, n), dtype=a.dtype)
        if t.order == "ikj":  # rows of C outermost: each C block is finished before the next
            for i in range(0, n, t.tile_m):
                for k in range(0, n, t.tile_k):
                    for j in range(0, n, t.tile_n):
                        c[i : i + t.tile_m, j : j + t.tile_n] += (
                            a[i : i + t.tile_m, k : k + t.tile_k] @ b[k : k + t.tile_k, j : j + t.tile_n]
                        )
        else:  # kij: one A column block and B row block at a time, every C block revisited
            for k in range(0, n, t.tile_k):
                for i in range(0, n, t.tile_m):
                    for j in range(0, n, t.tile_n):
                        c[i : i + t.tile_m, j : j + t.tile_n] += (
                            a[i : i + t.tile_m, k : k + t.tile_k] @ b[k : k + t.tile_k, j : j + t.tile_n]
                        )
        return c

    def evaluate(self, point: Any) -> dict[str, float]:
        t = Tiling(*point)
        self._multiply(t)  # warm-up: first-touch allocation, BLAS thread start
        times = []
        for _ in range(self.options.repeats):
            started = time.perf_counter()
            self._multiply(t)
            times.append(time.perf_counter() - started)
        n = self.options.size
        return {"gflops": 2 * n**3 / statistics.median(times) / 1e9, "tile_kib": self._kib(t)}

    def acquisition_bounds(self) -> tuple[float, float]:
        # floor 0 GFLOP/s; the largest working set of the space as the reference
        return 0.0, self._kib(Tiling(TILES[-1], TILES[-1], TILES[-1], ORDERS[0])) * 1.01

    # ---- what the surrogate models and the engine read

    def features(self, points: Sequence[Any]) -> np.ndarray:
        return np.array([[math.log2(p[0]), math.log2(p[1]), math.log2(p[2]), float(p[3] == "ikj")] for p in points]).reshape(-1, 4)

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"tile_kib": np.array([self._kib(Tiling(*p)) for p in points])}
