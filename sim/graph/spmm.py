"""SpMM ``Y = A X`` (A sparse CSR, X dense row-major) compiled with numba: the degree-sorted block method and a naive row loop.

The degree-block method is an inspector-executor kernel. The inspector (:func:`plan`, numpy,
run once per matrix and feature width) turns the rows into *segments* and the segments into
*blocks*:

1. rows are sorted by degree, longest first (``sort``; off keeps the natural order);
2. a row longer than ``long_row`` nonzeros is split into chunks of at most ``long_row``
   nonzeros, each its own segment writing a private partial row; a reduction pass merges
   the partial rows of each split row afterwards (so one hub row is shared by all threads
   instead of stalling one);
3. consecutive segments are grouped into blocks of about ``block_work`` multiply-adds
   (``(nnz + 1) * F`` per segment: the ``+ 1`` is the output row write, so empty rows are
   not free);
4. work units (a block and a group of ``width`` feature columns, below) are dealt to the
   threads: an equal count of consecutive units each (static) or one unit at a time as threads
   become free (dynamic).

The executor (one ``prange`` over *work units*, no Python in the loop) is Accel-GCN's combined
column strategy on a CPU: a work unit is one block and one group of ``width`` consecutive feature
columns, so the column dimension is a second axis of parallelism (the paper combines warps over
the dense matrix's columns) and every load of X and store of Y in the inner loop is a contiguous
run of ``width`` values that LLVM vectorises. The units of one block are consecutive, so threads
taking units one at a time work on the same rows' indices together. ``width >= F`` makes one unit
per block (all columns of a row at once, accumulated in the output row, as the naive loop does).

:func:`spmm_naive` is the baseline in the same JIT: ``prange`` over rows with numba's static
schedule (equal row counts per thread), every nonzero updating the output row in place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numba
import numpy as np
from numba import njit, prange

from coevo.sim.errors import UserInputError
from coevo.sim.graph.config import WIDTH_ALL
from coevo.sim.graph.csr import Csr


@dataclass(frozen=True)
class BlockParams:
    """Tunable parameters of the degree-block method.

    Attributes:
        block_work: target multiply-adds per block, ``sum((nnz + 1) * F)`` over its segments.
        long_row: rows with more nonzeros are split into chunks of this many, merged afterwards.
        width: feature columns per work unit (Accel-GCN's combined column strategy; >= F: one unit per block, all
            columns).
        sort: sort rows by degree (descending) before grouping.
        threads: threads to run on (None: numba's current count).
        schedule: ``static``: each thread gets an equal count of consecutive blocks (equal work, since
            blocks are balanced); ``dynamic``: threads take the next block when done (numba's
            parallel chunk size 1), which absorbs interference from other processes.
    """

    block_work: int = 1 << 18
    long_row: int = 4096
    width: int = WIDTH_ALL  # no column split: narrower units lost on the 2-core Xeon here (docs/kernels.md)
    sort: bool = True
    threads: int | None = None
    schedule: Literal["static", "dynamic"] = "dynamic"

    def check(self) -> None:
        """Raise :class:`UserInputError` on a parameter out of its domain."""
        if self.block_work < 1:
            raise UserInputError(f"block_work must be >= 1 multiply-add, got {self.block_work}")
        if self.long_row < 1:
            raise UserInputError(f"long_row must be >= 1 nonzero, got {self.long_row}")
        if self.width < 1:
            raise UserInputError(f"width must be >= 1 feature column per work unit, got {self.width}")
        if self.schedule not in ("static", "dynamic"):
            raise UserInputError(f"schedule must be 'static' or 'dynamic', got {self.schedule!r}")
        if self.threads is not None and not 1 <= self.threads <= pool_threads():
            raise UserInputError(
                f"threads must be between 1 and {pool_threads()} (numba's pool; set NUMBA_NUM_THREADS to raise it), got {self.threads}"
            )


@dataclass(frozen=True)
class Plan:
    """The inspector's output for one matrix, feature width and :class:`BlockParams` (arrays read by the executor)."""

    params: BlockParams
    feature_dim: int
    threads: int
    indices: np.ndarray
    data: np.ndarray
    seg_ptr: np.ndarray
    seg_row: np.ndarray
    seg_slot: np.ndarray
    block_ptr: np.ndarray
    split_rows: np.ndarray
    split_ptr: np.ndarray
    block_work: np.ndarray
    thread_work: np.ndarray

    @property
    def width(self) -> int:
        """Feature columns per work unit: ``params.width``, at most F."""
        return min(self.params.width, self.feature_dim)

    @property
    def column_groups(self) -> int:
        """Work units per block: ``ceil(F / width)`` column groups."""
        return -(-self.feature_dim // self.width)

    @property
    def partial_rows(self) -> int:
        """Rows of the partial-result buffer (segments of split rows)."""
        return int(self.split_ptr[-1]) if len(self.split_ptr) else 0

    def balance(self) -> dict[str, float]:
        """Load balance: max/mean work over blocks and over threads (1.0 is perfect), counts and the extra memory."""
        return {
            "blocks": len(self.block_work),
            "units": len(self.block_work) * self.column_groups,
            "segments": len(self.seg_row),
            "split_rows": len(self.split_rows),
            "block_max_over_mean": _ratio(self.block_work),
            "thread_max_over_mean": _ratio(self.thread_work),
            "partial_kib": self.partial_rows * self.feature_dim * 4 / 1024,
        }


def pool_threads() -> int:
    """Threads in numba's pool (``NUMBA_NUM_THREADS``; default: the CPU count): the most a kernel may use."""
    return int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]


def _ratio(work: np.ndarray) -> float:
    return float(work.max() / work.mean()) if len(work) and work.mean() > 0 else 1.0


def current_threads(threads: int | None) -> int:
    """``threads`` checked against numba's pool, or numba's current thread count."""
    if threads is None:
        return int(numba.get_num_threads())
    BlockParams(threads=threads).check()
    return threads


def plan(a: Csr, feature_dim: int, params: BlockParams | None = None) -> Plan:
    """Sort, split and group the rows of ``a`` into balanced blocks for ``feature_dim`` features (module doc, steps 1-4).

    Raises:
        UserInputError: a parameter out of its domain, or ``feature_dim < 1``.
    """
    p = params or BlockParams()
    p.check()
    check_feature_dim(feature_dim)
    threads = current_threads(p.threads)
    deg = a.degrees
    n = len(deg)
    order = np.argsort(-deg, kind="stable") if p.sort else np.arange(n, dtype=np.int64)
    d = deg[order]
    pieces = np.maximum(1, -(-d // p.long_row))  # ceil(d / long_row), an empty row is one (empty) segment
    seg_row = np.repeat(order, pieces)
    first = np.repeat(np.cumsum(pieces) - pieces, pieces)
    k = np.arange(len(seg_row), dtype=np.int64) - first  # chunk number within its row
    # the rows' entries copied in the sorted order, so the executor streams them (the copy is the inspector's memory cost)
    if p.sort:
        take = np.repeat(a.indptr[order] - np.cumsum(np.concatenate([[0], d[:-1]])), d) + np.arange(int(d.sum()), dtype=np.int64)
        indices, data = a.indices[take], a.data[take]
    else:
        indices, data = a.indices, a.data
    row_ptr = np.concatenate([[0], np.cumsum(d)]).astype(np.int64)
    seg_start = row_ptr[np.repeat(np.arange(n), pieces)] + k * p.long_row
    seg_end = np.minimum(seg_start + p.long_row, row_ptr[np.repeat(np.arange(n), pieces) + 1])
    split = np.repeat(pieces > 1, pieces)
    seg_slot = np.full(len(seg_row), -1, dtype=np.int64)
    seg_slot[split] = np.arange(int(split.sum()), dtype=np.int64)  # a split row's chunks are consecutive: so are their slots
    split_rows = order[pieces > 1]
    split_ptr = np.concatenate([[0], np.cumsum(pieces[pieces > 1])]).astype(np.int64)
    work = (seg_end - seg_start + 1) * feature_dim
    cum = np.cumsum(work)
    total = int(cum[-1]) if len(cum) else 0
    n_blocks = max(1, math.ceil(total / p.block_work))
    # block b ends after the first segment whose cumulative work reaches (b + 1) * total / n_blocks
    cuts = np.searchsorted(cum, np.arange(1, n_blocks) * (total / n_blocks), side="left") + 1
    block_ptr = np.unique(np.concatenate([[0], cuts, [len(seg_row)]])).astype(np.int64)
    block_work = np.add.reduceat(work, block_ptr[:-1]) if len(seg_row) else np.zeros(1, dtype=np.int64)
    # a block's work split over its column groups (work units); numba's static schedule gives each thread an equal
    # count of consecutive units, dynamic deals them one at a time
    width = min(p.width, feature_dim)
    group_cols = np.minimum(width, feature_dim - np.arange(0, feature_dim, width))
    unit_work = (block_work[:, None] * group_cols[None, :]) // feature_dim
    thread_work = np.array([w.sum() for w in np.array_split(unit_work.ravel(), threads)], dtype=np.int64)
    return Plan(
        params=p,
        feature_dim=feature_dim,
        threads=threads,
        indices=indices,
        data=data,
        seg_ptr=np.concatenate([seg_start, [row_ptr[-1]]]).astype(np.int64),  # segments tile the entries: end = next start
        seg_row=seg_row.astype(np.int64),
        seg_slot=seg_slot,
        block_ptr=block_ptr,
        split_rows=split_rows.astype(np.int64),
        split_ptr=split_ptr,
        block_work=block_work.astype(np.int64),
        thread_work=thread_work,
    )


def check_feature_dim(feature_dim: int) -> None:
    """Raise :class:`UserInputError` unless ``feature_dim`` >= 1."""
    if feature_dim < 1:
        raise UserInputError(f"feature_dim must be >= 1 (columns of the dense X in Y = A X), got {feature_dim}")


def _operands(a: Csr, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x`` as a C-contiguous float array matching ``a``'s columns, and ``a``'s values in x's type."""
    x = np.asarray(x)
    if x.ndim != 2:
        raise UserInputError(f"X must be a 2-D (n_cols, feature_dim) array, got shape {x.shape}")
    if x.shape[0] != a.shape[1]:
        raise UserInputError(f"X has {x.shape[0]} rows but A has {a.shape[1]} columns; Y = A X needs them equal")
    check_feature_dim(x.shape[1])
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    return np.ascontiguousarray(x), a.data.astype(x.dtype, copy=False)


def spmm_blocked(a: Csr, x: np.ndarray, schedule: Plan | None = None, params: BlockParams | None = None) -> np.ndarray:
    """``A @ X`` by the degree-block method (module doc); ``schedule`` from :func:`plan` (built here when None).

    Example:
        >>> from coevo.sim.graph.csr import validate_csr
        >>> a = validate_csr([0, 2, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0], (3, 3))
        >>> spmm_blocked(a, np.eye(3), params=BlockParams(long_row=1, width=2)).tolist()
        [[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [0.0, 3.0, 0.0]]
    """
    x, _ = _operands(a, x)
    s = schedule if schedule is not None else plan(a, x.shape[1], params)
    if s.feature_dim != x.shape[1]:
        raise UserInputError(f"the plan was built for {s.feature_dim} features, X has {x.shape[1]}; build it with plan(a, {x.shape[1]})")
    y = np.empty((a.shape[0], x.shape[1]), dtype=x.dtype)
    partial = np.empty((s.partial_rows, x.shape[1]), dtype=x.dtype)
    previous = numba.get_num_threads()
    numba.set_num_threads(s.threads)
    chunk = numba.set_parallel_chunksize(1 if s.params.schedule == "dynamic" else 0)
    try:
        _blocked_kernel(
            s.indices, s.data.astype(x.dtype, copy=False), x, y, partial, s.seg_ptr, s.seg_row, s.seg_slot, s.block_ptr,
            s.width, s.split_rows, s.split_ptr,
        )  # fmt: skip
    finally:
        numba.set_parallel_chunksize(chunk)
        numba.set_num_threads(previous)
    return y


def spmm_naive(a: Csr, x: np.ndarray, threads: int | None = None) -> np.ndarray:
    """``A @ X`` by a parallel row loop (numba static schedule: equal row counts per thread)."""
    x, data = _operands(a, x)
    y = np.empty((a.shape[0], x.shape[1]), dtype=x.dtype)
    previous = numba.get_num_threads()
    numba.set_num_threads(current_threads(threads))
    try:
        _naive_kernel(a.indptr, a.indices, data, x, y)
    finally:
        numba.set_num_threads(previous)
    return y


def naive_balance(a: Csr, feature_dim: int, threads: int) -> dict[str, float]:
    """Load balance of :func:`spmm_naive`: work ``(nnz + 1) * F`` per thread under equal row counts per thread."""
    work = (a.degrees + 1) * feature_dim
    per_thread = np.array([w.sum() for w in np.array_split(work, threads)])
    return {"thread_max_over_mean": round(_ratio(per_thread), 4)}


@njit(parallel=True, cache=True, nogil=True)
def _naive_kernel(indptr: Any, indices: Any, data: Any, x: Any, y: Any) -> None:  # pragma: no cover - compiled
    n = len(indptr) - 1
    nf = x.shape[1]
    for i in prange(n):
        for f in range(nf):
            y[i, f] = 0
        for j in range(indptr[i], indptr[i + 1]):
            v = data[j]
            c = indices[j]
            for f in range(nf):
                y[i, f] += v * x[c, f]


@njit(parallel=True, cache=True, nogil=True)
def _blocked_kernel(
    indices: Any, data: Any, x: Any, y: Any, partial: Any, seg_ptr: Any, seg_row: Any, seg_slot: Any, block_ptr: Any,
    width: int, split_rows: Any, split_ptr: Any,
) -> None:  # fmt: skip  # pragma: no cover - compiled
    nf = x.shape[1]
    if width >= nf:  # one unit per block: accumulate in the output row itself, as the naive loop does
        for b in prange(len(block_ptr) - 1):
            for s in range(block_ptr[b], block_ptr[b + 1]):
                slot = seg_slot[s]
                if slot < 0:  # two copies of the loop: a view chosen at run time costs 10-40 % here (measured)
                    r = seg_row[s]
                    for f in range(nf):
                        y[r, f] = 0
                    for j in range(seg_ptr[s], seg_ptr[s + 1]):
                        v = data[j]
                        c = indices[j]
                        for f in range(nf):
                            y[r, f] += v * x[c, f]
                else:  # a split row's chunk writes its own partial row, merged below
                    for f in range(nf):
                        partial[slot, f] = 0
                    for j in range(seg_ptr[s], seg_ptr[s + 1]):
                        v = data[j]
                        c = indices[j]
                        for f in range(nf):
                            partial[slot, f] += v * x[c, f]
    else:
        groups = (nf + width - 1) // width
        for u in prange((len(block_ptr) - 1) * groups):  # a work unit (block, column group) is one iteration
            b = u // groups
            f0 = (u - b * groups) * width
            f1 = min(nf, f0 + width)
            for s in range(block_ptr[b], block_ptr[b + 1]):
                slot = seg_slot[s]
                # the unit's columns of the output row, or of the split row's partial row: contiguous views (indexing
                # y[r, f0 + f] instead is not vectorised by numba: 3-7x slower, measured)
                out = y[seg_row[s], f0:f1] if slot < 0 else partial[slot, f0:f1]
                out[:] = 0
                for j in range(seg_ptr[s], seg_ptr[s + 1]):
                    v = data[j]
                    xr = x[indices[j], f0:f1]
                    for f in range(f1 - f0):
                        out[f] += v * xr[f]

    # the reduction merge, serial after the parallel region: a second region would cost a second barrier (ms on a
    # busy machine) for a few adds per split row
    for k in range(len(split_rows)):
        r = split_rows[k]
        for f in range(nf):
            y[r, f] = 0
        for q in range(split_ptr[k], split_ptr[k + 1]):
            for f in range(nf):
                y[r, f] += partial[q, f]
