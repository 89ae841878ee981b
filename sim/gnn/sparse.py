"""Row-wise top-k dynamic ReLU and the sparse-feature aggregation it feeds, with autograd.

Dynamic ReLU keeps, in each row of ``h``, the ``k`` largest entries (ReLU-ed) and zeroes
the rest, so a row is ``k`` (column, value) pairs instead of ``H`` values. Aggregating such
rows over a relation's adjacency ``A`` (CSR, rows = destinations) only touches the stored
pairs::

    Y[i, idx[j, t]] += A[i, j] * val[j, t]          for j in row i of A, t < k

which is ``nnz(A) * k`` multiply-adds instead of ``nnz(A) * H``. The backward pass is the
same gather on ``A^T`` (CSR of the transpose, rows = sources)::

    dval[j, t] = sum_i A[i, j] * dY[i, idx[j, t]]

The kernels are numba functions compiled ``nogil``: :func:`aggregate` splits every
relation into row blocks of balanced nonzeros and runs all blocks of all relations on a
thread pool, forward and backward (the backward is inside one autograd node, so torch's
single CPU autograd thread does not serialise it). A dense-feature kernel (every column,
no top-k) gives the ablation without dynamic ReLU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
import warnings
from typing import Any

import numba
import numpy as np
import scipy.sparse as sp
import torch


@numba.njit(nogil=True, cache=True)
def _spfeat_forward(indptr, indices, data, idx, val, out, r0, r1):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    k = idx.shape[1]
    for i in range(r0, r1):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            a = data[p]
            for t in range(k):
                out[i, idx[j, t]] += a * val[j, t]


@numba.njit(nogil=True, cache=True)
def _spfeat_backward(t_indptr, t_indices, t_data, idx, grad, dval, r0, r1):  # type: ignore[no-untyped-def]  # pragma: no cover
    k = idx.shape[1]
    for j in range(r0, r1):
        for p in range(t_indptr[j], t_indptr[j + 1]):
            i = t_indices[p]
            a = t_data[p]
            for t in range(k):
                dval[j, t] += a * grad[i, idx[j, t]]


@numba.njit(nogil=True, cache=True)
def _dense_spmm(indptr, indices, data, x, out, r0, r1):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    h = x.shape[1]
    for i in range(r0, r1):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            a = data[p]
            for c in range(h):
                out[i, c] += a * x[j, c]


def balanced_blocks(indptr: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """Split rows ``0..n`` into at most ``parts`` contiguous blocks of about equal nonzeros (none empty)."""
    n = len(indptr) - 1
    if n == 0:
        return []
    nnz = int(indptr[-1])
    if parts <= 1 or nnz == 0:
        return [(0, n)]
    cuts = np.searchsorted(indptr, np.linspace(0, nnz, parts + 1)[1:-1], side="left")
    bounds = sorted({0, n, *(int(c) for c in cuts)})
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


@dataclass
class RelationCSR:
    """One relation's adjacency ready for the kernels: CSR of A and of A^T, and row blocks of each.

    Attributes:
        n_dst: rows of A; n_src: columns.
        a: (indptr, indices, data) of A; at: the same for A^T.
        blocks: row blocks of A (forward); t_blocks: row blocks of A^T (backward).
        torch_csr: A as a torch sparse CSR tensor (the torch-aggregation baselines).
    """

    n_dst: int
    n_src: int
    a: tuple[np.ndarray, np.ndarray, np.ndarray]
    at: tuple[np.ndarray, np.ndarray, np.ndarray]
    blocks: list[tuple[int, int]] = field(default_factory=list)
    t_blocks: list[tuple[int, int]] = field(default_factory=list)
    torch_csr: torch.Tensor | None = None

    @classmethod
    def from_scipy(cls, a: sp.csr_matrix, parts: int = 1) -> RelationCSR:
        """From a scipy CSR matrix (rows = destinations), split into ``parts`` blocks per direction."""
        a = sp.csr_matrix(a, dtype=np.float32)
        a.sort_indices()
        at = sp.csr_matrix(a.T, dtype=np.float32)
        at.sort_indices()

        def arrays(m: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            return m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data.astype(np.float32)

        with warnings.catch_warnings():  # "sparse CSR support is in beta": known, and the matrix is valid by construction
            warnings.simplefilter("ignore", UserWarning)
            tcsr = torch.sparse_csr_tensor(
                torch.from_numpy(a.indptr.astype(np.int64)),
                torch.from_numpy(a.indices.astype(np.int64)),
                torch.from_numpy(a.data.astype(np.float32)),
                size=a.shape,
                check_invariants=False,
            )
        rel = cls(a.shape[0], a.shape[1], arrays(a), arrays(at), torch_csr=tcsr)
        rel.reblock(parts)
        return rel

    def reblock(self, parts: int) -> None:
        """Recompute the row blocks for ``parts`` workers."""
        self.blocks = balanced_blocks(self.a[0], parts)
        self.t_blocks = balanced_blocks(self.at[0], parts)


def _run(tasks: Sequence[Callable[[], None]], pool: Executor | None) -> None:
    if pool is None or len(tasks) <= 1:
        for t in tasks:
            t()
        return
    for f in [pool.submit(t) for t in tasks]:
        f.result()


class _Aggregate(torch.autograd.Function):
    """Aggregate source features over several relations at once: forward and backward blocks run on the pool."""

    @staticmethod
    def forward(ctx: Any, plan: dict[str, Any], *vals: torch.Tensor) -> tuple[torch.Tensor, ...]:  # type: ignore[override]
        rels: list[RelationCSR] = plan["rels"]
        src: list[int] = plan["src"]
        idx: list[torch.Tensor | None] = plan["idx"]
        width: int = plan["width"]
        xs = [v.detach().contiguous().numpy() for v in vals]
        ids = [None if i is None else i.contiguous().numpy() for i in idx]
        outs = [np.zeros((r.n_dst, width), dtype=np.float32) for r in rels]
        tasks: list[Callable[[], None]] = []
        for r, s, out in zip(rels, src, outs, strict=True):
            for r0, r1 in r.blocks:
                if ids[s] is None:
                    tasks.append(lambda r=r, s=s, out=out, r0=r0, r1=r1: _dense_spmm(*r.a, xs[s], out, r0, r1))
                else:
                    tasks.append(lambda r=r, s=s, out=out, r0=r0, r1=r1: _spfeat_forward(*r.a, ids[s], xs[s], out, r0, r1))
        _run(tasks, plan["pool"])
        ctx.plan = plan
        ctx.shapes = [tuple(v.shape) for v in vals]
        return tuple(torch.from_numpy(o) for o in outs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[Any, ...]:
        plan = ctx.plan
        rels: list[RelationCSR] = plan["rels"]
        src: list[int] = plan["src"]
        ids = [None if i is None else i.contiguous().numpy() for i in plan["idx"]]
        gs = [g.contiguous().numpy() for g in grads]
        # one gradient buffer per relation (blocks of one relation write disjoint rows; two
        # relations sharing a source would race), summed per source afterwards
        dvals = [np.zeros(ctx.shapes[s], dtype=np.float32) for s in src]
        tasks: list[Callable[[], None]] = []
        for r, s, g, d in zip(rels, src, gs, dvals, strict=True):
            for r0, r1 in r.t_blocks:
                if ids[s] is None:
                    tasks.append(lambda r=r, g=g, d=d, r0=r0, r1=r1: _dense_spmm(*r.at, g, d, r0, r1))
                else:
                    tasks.append(lambda r=r, s=s, g=g, d=d, r0=r0, r1=r1: _spfeat_backward(*r.at, ids[s], g, d, r0, r1))
        _run(tasks, plan["pool"])
        out: list[torch.Tensor | None] = [None] * len(ctx.shapes)
        for s, d in zip(src, dvals, strict=True):
            t = torch.from_numpy(d)
            prev = out[s]
            out[s] = t if prev is None else prev + t
        return (None, *out)


def aggregate(
    rels: Sequence[RelationCSR],
    src: Sequence[int],
    feats: Sequence[tuple[torch.Tensor | None, torch.Tensor]],
    width: int,
    pool: Executor | None = None,
) -> tuple[torch.Tensor, ...]:
    """``A_r @ X_src(r)`` for every relation r, in one autograd node.

    Args:
        rels: the relations.
        src: for each relation, which entry of ``feats`` is its source.
        feats: per source, ``(idx, val)``: top-k columns (int64, N x k) and values (N x k), or
            ``(None, X)`` for dense features (N x width).
        width: the feature width H of the outputs.
        pool: a thread pool for the row blocks (None: sequential).

    Returns:
        One dense (n_dst x width) float32 tensor per relation; gradients flow to the values.
    """
    plan = {"rels": list(rels), "src": list(src), "idx": [i for i, _ in feats], "width": width, "pool": pool}
    out: tuple[torch.Tensor, ...] = _Aggregate.apply(plan, *[v for _, v in feats])
    return out


def topk_relu(h: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic ReLU: per row the ``k`` largest entries, ReLU-ed: ``(columns int64, values)``, both N x k."""
    vals, idx = torch.topk(h, min(k, h.shape[1]), dim=1, sorted=False)
    return idx, torch.relu(vals)


def densify(idx: torch.Tensor, val: torch.Tensor, width: int) -> torch.Tensor:
    """The dense N x width matrix of top-k rows (zeros elsewhere); differentiable in ``val``."""
    return torch.zeros(val.shape[0], width, dtype=val.dtype).scatter(1, idx, val)
