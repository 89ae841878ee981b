"""Row-wise top-k dynamic ReLU, the sparse-feature SpMM it feeds, and CSR aggregation; numba kernels with autograd.

Dynamic ReLU keeps, in each row of ``h`` (N x H), the ``k`` largest entries (ReLU-ed) and
zeroes the rest: a row becomes ``k`` (column, value) pairs. The layer's weight product
then reads only those pairs (the sparse-feature SpMM, X sparse by rows times a dense W)::

    Z[i, :] = sum_t val[i, t] * W[idx[i, t], :]        (N k M multiply-adds, not N H M)

and its backward is ``dval[i, t] = <dZ[i, :], W[idx[i, t], :]>`` and
``dW[idx[i, t], :] += val[i, t] dZ[i, :]``. The messages are then aggregated over each
relation's adjacency (CSR, rows = destinations), all relations into one destination type
fused in one pass; the backward reads the CSR of the transpose.

Every kernel is numba-compiled ``nogil`` and takes a row range, so a thread pool runs row
blocks (of balanced work) concurrently, forward and backward: each op is one autograd node
whose backward dispatches its own blocks, so torch's single CPU autograd thread does not
serialise them. Blocks write disjoint rows; the weight gradient, which all rows touch, gets
one buffer per block, summed afterwards.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise
from typing import Any, cast

import numba
import numpy as np
import scipy.sparse as sp
import torch

# The kernels below are compiled by numba; coverage and mypy see only their Python shells.


@numba.njit(nogil=True, cache=True, fastmath=True)
def _topk_relu(h, k, idx, val, r0, r1):  # type: ignore[no-untyped-def]  # pragma: no cover
    width = h.shape[1]
    for i in range(r0, r1):
        n = 0
        for c in range(width):
            x = h[i, c]
            if n < k:
                p = n
                n += 1
            elif x > val[i, k - 1]:
                p = k - 1
            else:
                continue
            while p > 0 and val[i, p - 1] < x:  # insertion into the row's descending buffer
                val[i, p] = val[i, p - 1]
                idx[i, p] = idx[i, p - 1]
                p -= 1
            val[i, p] = x
            idx[i, p] = c
        for t in range(k):
            if val[i, t] < 0:
                val[i, t] = 0.0


@numba.njit(nogil=True, cache=True, fastmath=True)
def _sprow_mm(idx, val, w, z, r0, r1):  # type: ignore[no-untyped-def]  # pragma: no cover
    k = idx.shape[1]
    m = w.shape[1]
    for i in range(r0, r1):
        for t in range(k):
            v = val[i, t]
            if v != 0.0:
                j = idx[i, t]
                for c in range(m):
                    z[i, c] += v * w[j, c]


@numba.njit(nogil=True, cache=True, fastmath=True)
def _sprow_mm_backward(idx, val, w, g, dval, dw, r0, r1):  # type: ignore[no-untyped-def]  # pragma: no cover
    k = idx.shape[1]
    m = w.shape[1]
    for i in range(r0, r1):
        for t in range(k):
            j = idx[i, t]
            s = 0.0
            for c in range(m):
                s += g[i, c] * w[j, c]
            dval[i, t] = s
            v = val[i, t]
            if v != 0.0:
                for c in range(m):
                    dw[j, c] += v * g[i, c]


@numba.njit(nogil=True, cache=True, fastmath=True)
def _csr_gather(indptr, indices, data, x, c0, out, r0, r1):  # type: ignore[no-untyped-def]  # pragma: no cover
    # out[i, :] += sum_p data[p] * x[indices[p], c0 : c0 + width]
    width = out.shape[1]
    for i in range(r0, r1):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            a = data[p]
            for c in range(width):
                out[i, c] += a * x[j, c0 + c]


@numba.njit(nogil=True, cache=True, fastmath=True)
def _csr_gather_into(indptr, indices, data, g, dx, c0, r0, r1):  # type: ignore[no-untyped-def]  # pragma: no cover
    # dx[j, c0 : c0 + width] += sum_p data[p] * g[indices[p], :]   (rows j of the transpose)
    width = g.shape[1]
    for j in range(r0, r1):
        for p in range(indptr[j], indptr[j + 1]):
            i = indices[p]
            a = data[p]
            for c in range(width):
                dx[j, c0 + c] += a * g[i, c]


# numba's Dispatcher type does not describe the kernels' signatures: call them through Any
_K_TOPK: Any = cast(Any, _topk_relu)
_K_SPROW: Any = cast(Any, _sprow_mm)
_K_SPROW_BW: Any = cast(Any, _sprow_mm_backward)
_K_GATHER: Any = cast(Any, _csr_gather)
_K_GATHER_INTO: Any = cast(Any, _csr_gather_into)


def even_blocks(n: int, parts: int) -> list[tuple[int, int]]:
    """Rows ``0..n`` in at most ``parts`` contiguous blocks of (almost) equal size."""
    cuts = np.linspace(0, n, max(1, min(parts, n)) + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in pairwise(cuts) if b > a]


def balanced_blocks(indptr: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """Rows ``0..n`` of a CSR row pointer in at most ``parts`` contiguous blocks of about equal nonzeros (none empty)."""
    n = len(indptr) - 1
    if n <= 0:
        return []
    nnz = int(indptr[-1])
    if parts <= 1 or nnz == 0:
        return [(0, n)]
    targets = np.linspace(0, nnz, parts + 1)[1:-1]
    hi = np.clip(np.searchsorted(indptr, targets, side="left"), 1, n)
    # cut at whichever row boundary is nearer the target share of the work
    cuts = np.where(np.abs(indptr[hi - 1] - targets) <= np.abs(indptr[hi] - targets), hi - 1, hi)
    bounds = sorted({0, n, *(int(c) for c in cuts)})
    return [(a, b) for a, b in pairwise(bounds) if b > a]


CSRArrays = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass
class RelationCSR:
    """One relation's adjacency for the kernels: CSR of A (rows = destinations) and of A^T, plus torch's CSR of A.

    Attributes:
        n_dst: rows of A; n_src: columns.
        a: (indptr int64, indices int64, data float32) of A; at: the same for A^T.
        t_cache: row blocks of A^T (the backward's tasks) per number of parts (see :meth:`t_blocks`).
        torch_csr: A as a torch sparse CSR tensor (the torch-aggregation baseline).
    """

    n_dst: int
    n_src: int
    a: CSRArrays
    at: CSRArrays
    t_cache: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    torch_csr: torch.Tensor | None = None

    def t_blocks(self, parts: int) -> list[tuple[int, int]]:
        """Row blocks of A^T of balanced nonzeros for ``parts`` workers (computed once per ``parts``)."""
        if parts not in self.t_cache:
            self.t_cache[parts] = balanced_blocks(self.at[0], parts)
        return self.t_cache[parts]

    @classmethod
    def from_scipy(cls, a: sp.csr_matrix) -> RelationCSR:
        """From a scipy CSR matrix (rows = destinations)."""
        a = sp.csr_matrix(a, dtype=np.float32)
        a.sort_indices()
        at = sp.csr_matrix(a.T, dtype=np.float32)
        at.sort_indices()

        def arrays(m: sp.csr_matrix) -> CSRArrays:
            return m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data.astype(np.float32)

        with warnings.catch_warnings():  # "sparse CSR support is in beta": known; the matrix is valid by construction
            warnings.simplefilter("ignore", UserWarning)
            tcsr = torch.sparse_csr_tensor(
                torch.from_numpy(a.indptr.astype(np.int64)),
                torch.from_numpy(a.indices.astype(np.int64)),
                torch.from_numpy(a.data.astype(np.float32)),
                size=a.shape,
                check_invariants=False,
            )
        return cls(a.shape[0], a.shape[1], arrays(a), arrays(at), torch_csr=tcsr)


def _run(tasks: Sequence[Callable[[], None]], pool: Executor | None) -> None:
    if pool is None or len(tasks) <= 1:
        for t in tasks:
            t()
        return
    # the calling thread runs the last block itself: one hand-off fewer per kernel call
    futures = [pool.submit(t) for t in tasks[:-1]]
    tasks[-1]()
    for f in futures:
        f.result()


class _TopKReLU(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, h: torch.Tensor, k: int, blocks: list[tuple[int, int]], pool: Executor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hn = h.detach().contiguous().numpy()
        idx = np.zeros((hn.shape[0], k), dtype=np.int64)
        val = np.zeros((hn.shape[0], k), dtype=np.float32)
        _run([partial(_K_TOPK, hn, k, idx, val, r0, r1) for r0, r1 in blocks], pool)
        ti, tv = torch.from_numpy(idx), torch.from_numpy(val)
        ctx.save_for_backward(ti, tv)
        ctx.width = hn.shape[1]
        ctx.mark_non_differentiable(ti)
        return ti, tv

    @staticmethod
    def backward(ctx: Any, _gi: Any, gv: torch.Tensor) -> tuple[Any, ...]:
        idx, val = ctx.saved_tensors
        dh = torch.zeros(val.shape[0], ctx.width, dtype=gv.dtype).scatter_(1, idx, gv * (val > 0))
        return dh, None, None, None


class _SparseRowMM(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, idx: torch.Tensor, val: torch.Tensor, w: torch.Tensor, blocks: list[tuple[int, int]], pool: Executor | None
    ) -> torch.Tensor:
        i, v, wn = idx.contiguous().numpy(), val.detach().contiguous().numpy(), w.detach().contiguous().numpy()
        z = np.zeros((i.shape[0], wn.shape[1]), dtype=np.float32)
        _run([partial(_K_SPROW, i, v, wn, z, r0, r1) for r0, r1 in blocks], pool)
        ctx.save_for_backward(idx, val, w)
        ctx.blocks, ctx.pool = blocks, pool
        return torch.from_numpy(z)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        idx, val, w = ctx.saved_tensors
        i, v, wn, gn = idx.numpy(), val.detach().numpy(), w.detach().contiguous().numpy(), g.contiguous().numpy()
        dval = np.zeros(v.shape, dtype=np.float32)
        dws = [np.zeros(wn.shape, dtype=np.float32) for _ in ctx.blocks]
        _run(
            [partial(_K_SPROW_BW, i, v, wn, gn, dval, dw, r0, r1) for (r0, r1), dw in zip(ctx.blocks, dws, strict=True)],
            ctx.pool,
        )
        return None, torch.from_numpy(dval), torch.from_numpy(np.sum(dws, axis=0, dtype=np.float32)), None, None


class _Aggregate(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, plan: dict[str, Any], *zs: torch.Tensor) -> torch.Tensor:
        xs = [z.detach().contiguous().numpy() for z in zs]
        out = np.zeros((plan["n_dst"], plan["width"]), dtype=np.float32)

        def block(r0: int, r1: int) -> None:
            for rel, s, c0 in plan["rels"]:
                _K_GATHER(*rel.a, xs[s], c0, out, r0, r1)

        _run([partial(block, r0, r1) for r0, r1 in plan["blocks"]], plan["pool"])
        ctx.plan = plan
        ctx.shapes = [tuple(z.shape) for z in zs]
        return torch.from_numpy(out)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        plan = ctx.plan
        gn = g.contiguous().numpy()
        dxs = [np.zeros(s, dtype=np.float32) for s in ctx.shapes]
        # relations write disjoint column ranges of their source's gradient, blocks disjoint rows: no races
        tasks: list[Callable[[], None]] = []
        for rel, s, c0 in plan["rels"]:
            for r0, r1 in rel.t_blocks(plan["parts"]):
                tasks.append(partial(_K_GATHER_INTO, *rel.at, gn, dxs[s], c0, r0, r1))
        _run(tasks, plan["pool"])
        return (None, *(torch.from_numpy(d) for d in dxs))


def topk_relu(
    h: torch.Tensor, k: int, blocks: list[tuple[int, int]] | None = None, pool: Executor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic ReLU: per row the ``k`` largest entries, ReLU-ed, as ``(columns int64, values float32)``, both N x k.

    Gradients reach ``h`` at the kept positions whose value is positive.
    """
    if not 1 <= k <= h.shape[1]:
        raise ValueError(f"k = {k} must be in 1..{h.shape[1]}")
    out: tuple[torch.Tensor, torch.Tensor] = _TopKReLU.apply(h, k, blocks or even_blocks(h.shape[0], 1), pool)
    return out


def sparse_row_mm(
    idx: torch.Tensor, val: torch.Tensor, w: torch.Tensor, blocks: list[tuple[int, int]] | None = None, pool: Executor | None = None
) -> torch.Tensor:
    """``X @ w`` where row i of X holds ``val[i]`` at columns ``idx[i]`` (zeros elsewhere); gradients to ``val`` and ``w``."""
    out: torch.Tensor = _SparseRowMM.apply(idx, val, w, blocks or even_blocks(idx.shape[0], 1), pool)
    return out


def aggregate(
    rels: Sequence[tuple[RelationCSR, int, int]],
    zs: Sequence[torch.Tensor],
    n_dst: int,
    width: int,
    blocks: list[tuple[int, int]] | None = None,
    pool: Executor | None = None,
    parts: int | None = None,
) -> torch.Tensor:
    """``sum_r A_r @ zs[s_r][:, c0_r : c0_r + width]`` over relations ``(A_r, s_r, c0_r)`` into one destination type.

    Args:
        rels: per relation its adjacency, the index of its source in ``zs`` and the first column of its block.
        zs: the source matrices (each relation reads its own column block).
        n_dst: number of destination rows.
        width: columns of the output.
        blocks: destination row blocks (the forward's tasks; default one block).
        pool: thread pool for the blocks (None: sequential).
        parts: how many blocks the backward splits each transpose into (default: as many as ``blocks``).
    """
    blocks = blocks or even_blocks(n_dst, 1)
    plan = {"rels": list(rels), "n_dst": n_dst, "width": width, "blocks": blocks, "pool": pool, "parts": parts or len(blocks)}
    out: torch.Tensor = _Aggregate.apply(plan, *zs)
    return out


def densify(idx: torch.Tensor, val: torch.Tensor, width: int) -> torch.Tensor:
    """The dense N x width matrix of top-k rows (zeros elsewhere); differentiable in ``val``."""
    return torch.zeros(val.shape[0], width, dtype=val.dtype).scatter(1, idx, val)
