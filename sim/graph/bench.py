"""Timing SpMM methods against each other in one run: warm-up (JIT compile) excluded, repeats interleaved in shuffled order.

On a machine other processes share, a slow spell hits whichever method happens to run; so
every round times each method once, in a fresh random order, and speedups are the median
of the per-round (paired) ratios rather than a ratio of medians taken at different times.
"""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from coevo.sim.errors import UserInputError
from coevo.sim.graph.csr import Csr
from coevo.sim.graph.spmm import (
    BlockParams,
    Plan,
    check_feature_dim,
    current_threads,
    naive_balance,
    plan,
    pool_threads,
    spmm_blocked,
    spmm_naive,
)

METHODS = ("degree-block", "naive", "scipy", "torch")
"""Methods :func:`benchmark` times: ours, the naive row loop in the same JIT, scipy.sparse CSR, torch.sparse CSR."""


@dataclass
class Timings:
    """What :func:`benchmark` measured.

    Attributes:
        times_s: per method, the timed runs in seconds (round order).
        max_rel_error: per method, max |Y - Y_scipy| / max |Y_scipy| after the warm-up.
        plan_ms: the degree-block inspector's time (sorting, splitting, grouping), not in its SpMM time.
        balance: load balance of the degree-block plan and of the naive loop's static split.
        flops: 2 * nnz * F, the multiply-adds counted twice.
    """

    times_s: dict[str, list[float]]
    max_rel_error: dict[str, float]
    plan_ms: float
    balance: dict[str, Any]
    flops: int
    threads: int
    notes: list[str] = field(default_factory=list)

    def median_s(self, method: str) -> float:
        """Median time of ``method``."""
        return float(np.median(self.times_s[method]))

    def iqr_s(self, method: str) -> float:
        """Interquartile range of ``method``'s times."""
        q1, q3 = np.percentile(self.times_s[method], [25, 75])
        return float(q3 - q1)

    def gflops(self, method: str) -> float:
        """GFLOP/s at the median time."""
        return self.flops / self.median_s(method) / 1e9

    def speedup(self, method: str, over: str) -> float:
        """Median over rounds of ``time(over) / time(method)`` (paired: both timed in the same round)."""
        return float(np.median(np.asarray(self.times_s[over]) / np.asarray(self.times_s[method])))

    def summary(self) -> dict[str, Any]:
        """JSON-ready: ``timings`` per method (median/IQR ms, GFLOP/s, error), speedups of degree-block, plan time, balance."""
        out: dict[str, Any] = {
            "timings": {
                m: {
                    "median_ms": round(self.median_s(m) * 1e3, 4),
                    "iqr_ms": round(self.iqr_s(m) * 1e3, 4),
                    "gflops": float(f"{self.gflops(m):.4g}"),
                    "max_rel_error": float(f"{self.max_rel_error[m]:.3g}"),
                }
                for m in self.times_s
            },
            "threads": self.threads,
            "plan_ms": round(self.plan_ms, 3),
            "balance": self.balance,
        }
        if "degree-block" in self.times_s:
            out["speedup_of_degree_block"] = {m: round(self.speedup("degree-block", m), 4) for m in self.times_s if m != "degree-block"}
        return out


def torch_csr(a: Csr, dtype: Any) -> Any:
    """``a`` as a ``torch.sparse_csr_tensor`` (int64 ids, torch's usual index type)."""
    import torch

    with warnings.catch_warnings():  # "sparse CSR support is in beta state"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(
            torch.from_numpy(a.indptr), torch.from_numpy(a.indices.astype(np.int64)), torch.from_numpy(a.data.astype(dtype)),
            size=a.shape, check_invariants=False,  # validate_csr already checked them
        )  # fmt: skip


def _blocked_call(a: Csr, x: np.ndarray, schedule: Plan) -> Callable[[], Any]:
    return lambda: spmm_blocked(a, x, schedule)


def _warm_up(
    run: dict[str, Callable[[], Any]], methods: Sequence[str], reference: np.ndarray, warmup: int, *, empty: bool
) -> dict[str, float]:
    """Run each method ``warmup`` times (at least once) untimed; its largest error relative to the reference's largest entry.

    ``empty``: the matrix has no entries, every method's error is 0.
    """
    scale = max(float(np.abs(reference).max()), 1e-30)
    errors = {}
    for m in methods:
        for _ in range(max(1, warmup)):  # the first call compiles (numba) or allocates (torch): never timed
            y = np.asarray(run[m]())
        errors[m] = 0.0 if empty else float(np.abs(y - reference).max() / scale)
    return errors


def _time_runs(run: dict[str, Callable[[], Any]], methods: Sequence[str], repeats: int, seed: int) -> dict[str, list[float]]:
    """Wall seconds of each method's call, ``repeats`` rounds, the methods in a fresh seeded random order each round."""
    times: dict[str, list[float]] = {m: [] for m in methods}
    order = list(methods)
    rng = random.Random(seed)
    for _ in range(repeats):
        rng.shuffle(order)
        for m in order:
            t0 = time.perf_counter()
            run[m]()
            times[m].append(time.perf_counter() - t0)
    return times


def benchmark(
    a: Csr, feature_dim: int, *, methods: Sequence[str] = METHODS, params: BlockParams | None = None, repeats: int = 5,
    warmup: int = 1, seed: int = 0, dtype: Any = np.float32, variants: dict[str, BlockParams] | None = None,
) -> Timings:  # fmt: skip
    """Time ``methods`` on ``Y = A X`` with a random (seeded) X of ``feature_dim`` columns.

    Every method gets the same X, the same output dtype, and the same threads (``params.threads``,
    else numba's count; torch's intra-op pool is set to it too). scipy's SpMM is single-threaded
    (it has no thread option): the notes say so.

    Raises:
        UserInputError: unknown method, ``repeats < 1`` or ``feature_dim < 1``.
    """
    import torch

    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise UserInputError(f"unknown SpMM method(s) {unknown or methods}; methods: {', '.join(METHODS)}")
    if repeats < 1:
        raise UserInputError(f"repeats must be >= 1, got {repeats}")
    check_feature_dim(feature_dim)
    p = params or BlockParams()
    threads = current_threads(p.threads)
    p = BlockParams(**{**p.__dict__, "threads": threads})
    x = np.random.default_rng(seed).standard_normal((a.shape[1], feature_dim)).astype(dtype)
    a = a.astype(dtype)
    scipy_a = a.to_scipy()
    started = time.perf_counter()
    schedule = plan(a, feature_dim, p) if "degree-block" in methods else None
    plan_ms = (time.perf_counter() - started) * 1e3
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    xt = torch.from_numpy(x)
    at = torch_csr(a, dtype) if "torch" in methods else None
    run: dict[str, Callable[[], Any]] = {
        "degree-block": lambda: spmm_blocked(a, x, schedule),
        "naive": lambda: spmm_naive(a, x, threads),
        "scipy": lambda: scipy_a @ x,
        "torch": lambda: torch.matmul(cast(Any, at), xt).numpy(),
    }
    variant_plans = {name: plan(a, feature_dim, BlockParams(**{**v.__dict__, "threads": threads})) for name, v in (variants or {}).items()}
    for name, vp in variant_plans.items():
        run[name] = _blocked_call(a, x, vp)
    methods = [*methods, *variant_plans]
    try:
        reference = (scipy_a.astype(np.float64) @ x.astype(np.float64)) if a.nnz else np.zeros((a.shape[0], feature_dim))
        errors = _warm_up(run, methods, reference, warmup, empty=not a.nnz)
        times = _time_runs(run, methods, repeats, seed)
    finally:
        torch.set_num_threads(torch_threads)
    balance: dict[str, Any] = {"naive": naive_balance(a, feature_dim, threads)}
    for name, sched in [("degree-block", schedule), *variant_plans.items()]:
        if sched is not None:
            balance[name] = {k: round(v, 4) if isinstance(v, float) else v for k, v in sched.balance().items()}
    notes = [
        f"{threads} thread(s) for degree-block, naive and torch (numba pool {pool_threads()}); "
        "scipy.sparse's CSR @ dense is single-threaded",
        "times exclude the warm-up call (JIT compile) and the degree-block plan (plan_ms, built once per matrix and width)",
    ]
    return Timings(times, errors, plan_ms, balance, 2 * a.nnz * feature_dim, threads, notes)
