"""Heterogeneous message passing for circuit graphs, with dynamic ReLU, sparse aggregation and concurrency as switches.

Layer ``l`` (per node type t, relations r: s -> t, one weight matrix per relation)::

    x_s   = act(h_s)                                  # ReLU, or the row-wise top-k dynamic ReLU
    h'_t  = W_t x_t + b_t + sum_r (A_r x_s) W_r        # A_r row-normalised (mean over the pins)

The aggregation ``A_r x_s`` is computed before the weight product, so with dynamic ReLU
it only reads the k stored columns of each source row (:mod:`sim.gnn.sparse`). The three
switches of :class:`Config` are the ablations: ``k`` (None: plain ReLU), ``aggregation``
(``"sparse"``: the numba kernels of :mod:`sim.gnn.sparse`; ``"torch"``: ``torch.sparse.mm``
on dense features, zero-filled after top-k) and ``concurrency`` (threads over relation row
blocks; 1 = sequential). ``Config(k=None, aggregation="torch", concurrency=1)`` is the dense
model the others are compared with.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from sim.errors import UserInputError
from sim.gnn.graph import NODE_TYPES, RELATIONS, HeteroGraph, Relation
from sim.gnn.sparse import RelationCSR, aggregate, densify, topk_relu


@dataclass(frozen=True)
class Config:
    """Model shape and the three switches (see the module docstring)."""

    hidden: int = 64
    layers: int = 3
    k: int | None = 8
    aggregation: Literal["sparse", "torch"] = "sparse"
    concurrency: int = 1

    def __post_init__(self) -> None:
        if self.hidden < 1 or self.layers < 1:
            raise UserInputError(f"hidden ({self.hidden}) and layers ({self.layers}) must be >= 1")
        if self.k is not None and not 1 <= self.k <= self.hidden:
            raise UserInputError(f"dynamic_relu_k = {self.k} must be in 1..hidden ({self.hidden}), or 0/None for plain ReLU")
        if self.concurrency < 1:
            raise UserInputError(f"concurrency must be >= 1, got {self.concurrency}")


DENSE = Config(k=None, aggregation="torch", concurrency=1)
"""The dense reference: plain ReLU, torch.sparse.mm over all H columns, sequential."""


@dataclass
class Prepared:
    """A graph as tensors: features, relation adjacencies (kernel CSR + torch CSR), one label."""

    x: dict[str, torch.Tensor]
    rels: dict[Relation, RelationCSR]
    y: torch.Tensor
    graph: HeteroGraph

    def reblock(self, parts: int) -> None:
        """Split every relation into ``parts`` row blocks (the concurrent tasks)."""
        for r in self.rels.values():
            r.reblock(parts)


def prepare(graph: HeteroGraph, label: str, parts: int = 1) -> Prepared:
    """Tensors for ``graph`` with target ``label`` (relations without edges are left out)."""
    if label not in graph.y:
        raise UserInputError(f"unknown label {label!r}; valid labels: {', '.join(graph.y)}")
    rels = {r: RelationCSR.from_scipy(graph.adjacency(r), parts) for r in RELATIONS if len(graph.edges[r][0])}
    return Prepared({t: torch.from_numpy(graph.x[t]) for t in NODE_TYPES}, rels, torch.from_numpy(graph.y[label]), graph)


class HeteroCircuitGNN(nn.Module):
    """The heterogeneous GNN; predicts one scalar per cell.

    Args:
        in_dims: feature width per node type.
        relations: the relations it has weights for.
        config: shape and switches (:class:`Config`); :meth:`configure` changes the switches
            of a built model (same weights), which is how ablations are timed.
    """

    def __init__(self, in_dims: dict[str, int], relations: list[Relation], config: Config) -> None:
        super().__init__()
        self.relations = list(relations)
        h = config.hidden
        self.inp = nn.ModuleDict({t: nn.Linear(d, h) for t, d in in_dims.items()})
        self.self_w = nn.ModuleList([nn.ModuleDict({t: nn.Linear(h, h) for t in in_dims}) for _ in range(config.layers)])
        self.rel_w = nn.ModuleList([nn.ModuleDict({"__".join(r): nn.Linear(h, h, bias=False) for r in relations}) for _ in range(config.layers)])
        self.head = nn.Linear(h, 1)
        self.config = config
        self._pool: ThreadPoolExecutor | None = None
        self.configure(config)

    def configure(self, config: Config) -> None:
        """Switch dynamic ReLU / aggregation / concurrency (hidden and layers must match the weights)."""
        if (config.hidden, config.layers) != (self.config.hidden, self.config.layers):
            raise UserInputError("configure may change k, aggregation and concurrency, not hidden or layers")
        if self._pool is not None:
            self._pool.shutdown()
        self.config = config
        self._pool = ThreadPoolExecutor(config.concurrency, thread_name_prefix="gnn") if config.concurrency > 1 else None

    def close(self) -> None:
        """Stop the thread pool."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def _act(self, h: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        if self.config.k is None:
            return None, torch.relu(h)
        return topk_relu(h, self.config.k)

    def _aggregate(self, data: Prepared, feats: dict[str, tuple[torch.Tensor | None, torch.Tensor]]) -> dict[Relation, torch.Tensor]:
        rels = [r for r in self.relations if r in data.rels]
        cfg = self.config
        if cfg.aggregation == "sparse":
            order = list(NODE_TYPES)
            outs = aggregate([data.rels[r] for r in rels], [order.index(r[0]) for r in rels], [feats[t] for t in order], cfg.hidden, self._pool)
            return dict(zip(rels, outs, strict=True))
        dense = {t: v if i is None else densify(i, v, cfg.hidden) for t, (i, v) in feats.items()}

        def one(r: Relation) -> torch.Tensor:
            a = data.rels[r].torch_csr
            assert a is not None
            return torch.sparse.mm(a, dense[r[0]])

        if self._pool is None:
            return {r: one(r) for r in rels}
        futures = {r: self._pool.submit(one, r) for r in rels}
        return {r: f.result() for r, f in futures.items()}

    def forward(self, data: Prepared) -> torch.Tensor:
        """Per-cell prediction (shape: number of cells)."""
        h = {t: self.inp[t](data.x[t]) for t in NODE_TYPES}
        for layer in range(self.config.layers):
            feats = {t: self._act(h[t]) for t in NODE_TYPES}
            msgs = self._aggregate(data, feats)
            new = {}
            for t in NODE_TYPES:
                i, v = feats[t]
                x = v if i is None else densify(i, v, self.config.hidden)
                out = self.self_w[layer][t](x)
                for r, m in msgs.items():
                    if r[2] == t:
                        out = out + self.rel_w[layer]["__".join(r)](m)
                new[t] = out
            h = new
        return self.head(torch.relu(h["cell"])).squeeze(1)


def build(data: Prepared, config: Config, seed: int = 0) -> HeteroCircuitGNN:
    """A model for ``data``'s node types and relations, weights drawn from ``seed``."""
    torch.manual_seed(seed)
    return HeteroCircuitGNN({t: int(x.shape[1]) for t, x in data.x.items()}, list(data.rels), config)


def pyg_available() -> bool:
    """Whether PyTorch Geometric imports (its HeteroConv baseline is optional)."""
    try:
        import torch_geometric.nn  # noqa: F401
    except Exception:  # an incompatible build fails with errors other than ImportError
        return False
    return True


def build_pyg(data: Prepared, hidden: int, layers: int, seed: int = 0) -> Callable[[], torch.Tensor]:
    """PyTorch Geometric's HeteroConv with one GraphConv (mean) per relation, summed: a closure computing the per-cell output.

    GraphConv is ``W_root x_i + W_rel mean_j x_j``: the same per-relation weights as
    :class:`HeteroCircuitGNN`, with one root weight per relation instead of per node type.
    """
    from torch_geometric.nn import GraphConv, HeteroConv

    torch.manual_seed(seed)
    rels = list(data.rels)
    inp = nn.ModuleDict({t: nn.Linear(int(x.shape[1]), hidden) for t, x in data.x.items()})
    convs = nn.ModuleList([HeteroConv({r: GraphConv((hidden, hidden), hidden, aggr="mean") for r in rels}, aggr="sum") for _ in range(layers)])
    head = nn.Linear(hidden, 1)
    edge_index = {r: torch.from_numpy(np.stack(data.graph.edges[r])) for r in rels}
    modules: Any = nn.ModuleList([inp, convs, head])

    def run() -> torch.Tensor:
        h = {t: inp[t](data.x[t]) for t in NODE_TYPES}
        for conv in convs:
            h = conv({t: torch.relu(v) for t, v in h.items()}, edge_index)
        out: torch.Tensor = head(torch.relu(h["cell"])).squeeze(1)
        return out

    run.modules = modules  # type: ignore[attr-defined]  # keep the parameters reachable for the caller
    return run
