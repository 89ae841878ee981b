"""A GCN layer whose aggregation is the degree-block SpMM, differentiable through :class:`torch.autograd.Function`.

``H' = act(Â H W + b)`` with ``Â = D^-1/2 (A + I) D^-1/2`` (Kipf & Welling 2017). The
aggregation ``Y = Â X`` runs :func:`sim.graph.spmm.spmm_blocked`; its backward is
``dL/dX = Â^T dL/dY``, another SpMM with the transpose, whose CSR and plan are built once
with the layer (for the symmetric Â of an undirected graph the transpose equals Â, but a
directed graph needs its own).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from coevo.sim.graph.csr import Csr, from_scipy
from coevo.sim.graph.spmm import BlockParams, Plan, plan, spmm_blocked


def gcn_normalize(a: Csr, *, self_loops: bool = True) -> Csr:
    """``D^-1/2 (A + I) D^-1/2`` with D the row sums of ``A + I`` (float64; A's values are edge weights)."""
    m = a.to_scipy().astype(np.float64)
    if self_loops:
        m = m + sp.identity(a.shape[0], format="csr", dtype=np.float64)
    deg = np.asarray(m.sum(axis=1)).ravel()
    inv = np.where(deg > 0, deg**-0.5, 0.0)
    out = sp.diags(inv) @ m @ sp.diags(inv)
    out = sp.csr_matrix(out)
    out.sort_indices()
    return from_scipy(out, what="normalized adjacency")


class SparseOperator:
    """A fixed sparse matrix with plans for ``A X`` and ``A^T G`` (built once, reused every call).

    Args:
        a: the matrix; its transpose is built here, once.
        params: degree-block parameters (a plan is made per feature width and dtype on first use, then reused).
    """

    def __init__(self, a: Csr, params: BlockParams | None = None) -> None:
        self.a = a
        self.at = a.transpose()
        self.params = params or BlockParams()
        self._plans: dict[tuple[bool, int, str], tuple[Csr, Plan]] = {}

    def _plan(self, transpose: bool, f: int, dtype: Any) -> tuple[Csr, Plan]:
        key = (transpose, f, np.dtype(dtype).name)
        if key not in self._plans:
            m = (self.at if transpose else self.a).astype(dtype)
            self._plans[key] = (m, plan(m, f, self.params))
        return self._plans[key]

    def matmul(self, x: np.ndarray, *, transpose: bool = False) -> np.ndarray:
        """``A @ x`` (or ``A^T @ x``) by the degree-block SpMM."""
        m, p = self._plan(transpose, x.shape[1], x.dtype)
        return spmm_blocked(m, x, p)


class SpmmFunction(torch.autograd.Function):
    """``Y = A X`` for a fixed sparse A: forward and backward both SpMM (module doc)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, op: SparseOperator) -> torch.Tensor:
        ctx.op = op
        y = op.matmul(x.detach().contiguous().numpy())
        return torch.from_numpy(y)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        g = ctx.op.matmul(grad.detach().contiguous().numpy(), transpose=True)
        return torch.from_numpy(g), None


def spmm(op: SparseOperator, x: torch.Tensor) -> torch.Tensor:
    """Differentiable ``op.a @ x`` (CPU tensors, float32 or float64)."""
    out: torch.Tensor = SpmmFunction.apply(x, op)
    return out


class GCNLayer(nn.Module):
    """One graph convolution ``Â (H W) + b`` on a fixed graph, aggregation by the degree-block SpMM.

    The product with W comes first when it narrows the features (fewer columns to aggregate).

    Args:
        a: the graph's adjacency (normalized here with :func:`gcn_normalize` unless ``normalize`` is False).
        in_features: input width.
        out_features: output width.
        params: degree-block parameters.
        normalize: apply the GCN normalization.

    Example:
        >>> from coevo.sim.graph.generators import load_graph
        >>> layer = GCNLayer(load_graph("karate"), 4, 2)
        >>> layer(torch.ones(34, 4)).shape
        torch.Size([34, 2])
    """

    def __init__(self, a: Csr, in_features: int, out_features: int, *, params: BlockParams | None = None, normalize: bool = True) -> None:
        super().__init__()
        self.op = SparseOperator(gcn_normalize(a) if normalize else a, params)
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """``Â H W + b``."""
        if self.linear.out_features <= self.linear.in_features:
            return spmm(self.op, h @ self.linear.weight.T) + self.linear.bias
        return spmm(self.op, h) @ self.linear.weight.T + self.linear.bias
