"""DR-CircuitGNN's concurrency: the independent subgraphs of one layer processed at the same time.

One heterogeneous layer is a set of independent pieces of work: per node type, the dynamic ReLU
and the weight product of its rows; per relation (one subgraph: the edges of one pin type), the
aggregation of its source's messages into its destinations. None reads what another writes
within a stage, so each piece is one task of a thread pool, forward and backward, and since the
kernels are numba ``nogil`` the tasks really run at once:

* products: node type ``s``'s top-k selection and sparse-feature product (and, backward, the
  product's gradients and the top-k scatter) are one task;
* forward aggregation: relation ``r`` gathers its messages into a buffer of its own (relations
  into the same destination type would race on one); a destination's buffers are summed after;
* backward aggregation: relation ``r`` writes the column block of its source's gradient that
  only it owns (each relation has its own weight block), so the tasks write disjoint memory.

This is the other way to spend the same threads as :mod:`sim.gnn.sparse`'s row blocks, which
split every kernel by rows and join after each one: here each subgraph is one sequential task and
a layer joins once per stage. :class:`sim.gnn.model.Config`'s ``parallel`` picks one. The
per-task work is uneven (relations differ in edges), which row blocks balance and subgraphs do not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from functools import partial
from itertools import pairwise
from typing import Any

import numpy as np
import torch

from coevo.sim.gnn import sparse
from coevo.sim.gnn.sparse import RelationCSR

# The kernels are looked up on :mod:`sim.gnn.sparse` when a task runs (not bound here), so one
# replaced there (a test's slowed kernel) is the one every task calls.


def _product_task(h: np.ndarray, w: np.ndarray, k: int, idx: np.ndarray, val: np.ndarray, z: np.ndarray) -> None:
    sparse._K_TOPK(h, k, idx, val, 0, h.shape[0])
    sparse._K_SPROW(idx, val, w, z, 0, h.shape[0])


def _product_backward_task(idx: np.ndarray, val: np.ndarray, w: np.ndarray, g: np.ndarray, dh: np.ndarray, dw: np.ndarray) -> None:
    dval = np.zeros(val.shape, dtype=np.float32)
    sparse._K_SPROW_BW(idx, val, w, g, dval, dw, 0, idx.shape[0])
    # the top-k ReLU's backward: each kept, positive entry passes its gradient back to its column
    np.put_along_axis(dh, idx, dval * (val > 0), axis=1)


class _TypedProducts(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, k: int, pool: Executor | None, n_types: int, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        hs = [t.detach().contiguous().numpy() for t in tensors[:n_types]]
        ws = [t.detach().contiguous().numpy() for t in tensors[n_types:]]
        idxs = [np.zeros((h.shape[0], k), dtype=np.int64) for h in hs]
        vals = [np.zeros((h.shape[0], k), dtype=np.float32) for h in hs]
        zs = [np.zeros((h.shape[0], w.shape[1]), dtype=np.float32) for h, w in zip(hs, ws, strict=True)]
        sparse._run([partial(_product_task, *args) for args in zip(hs, ws, [k] * n_types, idxs, vals, zs, strict=True)], pool)
        ctx.idxs, ctx.vals, ctx.ws, ctx.pool = idxs, vals, ws, pool
        ctx.widths = [h.shape[1] for h in hs]
        return tuple(torch.from_numpy(z) for z in zs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[Any, ...]:
        gs = [
            np.zeros((idx.shape[0], w.shape[1]), dtype=np.float32) if g is None else g.contiguous().numpy()
            for g, idx, w in zip(grads, ctx.idxs, ctx.ws, strict=True)
        ]
        dhs = [np.zeros((idx.shape[0], width), dtype=np.float32) for idx, width in zip(ctx.idxs, ctx.widths, strict=True)]
        dws = [np.zeros(w.shape, dtype=np.float32) for w in ctx.ws]
        tasks = [partial(_product_backward_task, *args) for args in zip(ctx.idxs, ctx.vals, ctx.ws, gs, dhs, dws, strict=True)]
        sparse._run(tasks, ctx.pool)
        return (None, None, None, *(torch.from_numpy(d) for d in dhs), *(torch.from_numpy(d) for d in dws))


def typed_products(hs: Sequence[torch.Tensor], ws: Sequence[torch.Tensor], k: int, pool: Executor | None) -> list[torch.Tensor]:
    """Per node type ``i``, dynamic ReLU (top ``k`` per row) of ``hs[i]`` times ``ws[i]``: one task per type.

    The same values and gradients as :func:`sim.gnn.sparse.topk_relu` followed by
    :func:`sim.gnn.sparse.sparse_row_mm`, type by type.
    """
    if len(hs) != len(ws):
        raise ValueError(f"{len(hs)} feature matrices but {len(ws)} weight matrices")
    for h in hs:
        if not 1 <= k <= h.shape[1]:
            raise ValueError(f"k = {k} must be in 1..{h.shape[1]}")
    return list(_TypedProducts.apply(k, pool, len(hs), *hs, *ws))


class _AggregateRelations(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, plan: dict[str, Any], *zs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        xs = [z.detach().contiguous().numpy() for z in zs]
        width = plan["width"]
        bufs = [np.zeros((rel.n_dst, width), dtype=np.float32) for rel, _, _, _ in plan["rels"]]
        tasks: list[Callable[[], None]] = [
            partial(sparse._K_GATHER, *rel.a, xs[s], c0, buf, 0, rel.n_dst) for (rel, s, c0, _), buf in zip(plan["rels"], bufs, strict=True)
        ]
        sparse._run(tasks, plan["pool"])
        outs = [np.zeros((n, width), dtype=np.float32) for n in plan["n_dst"]]
        for (_, _, _, d), buf in zip(plan["rels"], bufs, strict=True):
            outs[d] += buf
        ctx.plan = plan
        ctx.shapes = [tuple(z.shape) for z in zs]
        return tuple(torch.from_numpy(o) for o in outs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[Any, ...]:
        plan = ctx.plan
        gs = [
            np.zeros((n, plan["width"]), dtype=np.float32) if g is None else g.contiguous().numpy()
            for g, n in zip(grads, plan["n_dst"], strict=True)
        ]
        dxs = [np.zeros(s, dtype=np.float32) for s in ctx.shapes]
        # each relation owns its column block of its source's gradient: the tasks write disjoint memory
        tasks: list[Callable[[], None]] = [
            partial(sparse._K_GATHER_INTO, *rel.at, gs[d], dxs[s], c0, 0, rel.n_src) for rel, s, c0, d in plan["rels"]
        ]
        sparse._run(tasks, plan["pool"])
        return (None, *(torch.from_numpy(d) for d in dxs))


def aggregate_relations(
    rels: Sequence[tuple[RelationCSR, int, int, int]],
    zs: Sequence[torch.Tensor],
    n_dst: Sequence[int],
    width: int,
    pool: Executor | None,
) -> list[torch.Tensor]:
    """Per destination type ``d``: ``sum_r A_r @ zs[s_r][:, c0_r : c0_r + width]`` over its relations, one task per relation.

    Args:
        rels: per relation its adjacency, the index of its source in ``zs``, the first column
            of its block there, and the index of its destination type.
        zs: the source matrices.
        n_dst: rows of each destination type (a type no relation reaches gets zeros).
        width: columns of each output.
        pool: the threads the relations share (None: one after another, in order).

    Raises:
        ValueError: two relations of one source that share columns (their backward tasks would race).
    """
    blocks: dict[int, list[tuple[int, int]]] = {}
    for rel, s, c0, d in rels:
        if not 0 <= d < len(n_dst) or rel.n_dst != n_dst[d] or rel.n_src != zs[s].shape[0]:
            raise ValueError(f"a relation of shape {rel.n_dst} x {rel.n_src} does not fit source {s} / destination {d}")
        blocks.setdefault(s, []).append((c0, c0 + width))
    for spans in blocks.values():
        spans.sort()
        if any(b0 < a1 for (_, a1), (b0, _) in pairwise(spans)):
            raise ValueError("two relations of one source read overlapping columns; each needs its own block")
    plan = {"rels": list(rels), "n_dst": list(n_dst), "width": width, "pool": pool}
    return list(_AggregateRelations.apply(plan, *zs))


__all__ = ["aggregate_relations", "typed_products"]
