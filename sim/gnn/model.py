"""Heterogeneous message passing for circuit graphs, with dynamic ReLU, a sparse-feature SpMM and concurrency as switches.

Layer ``l``, per node type t (relations r: s -> t, one weight matrix per relation)::

    x_s  = act(h_s)                                  # ReLU, or the row-wise top-k dynamic ReLU
    Z_s  = x_s @ [W_s | W_r for r leaving s]         # one product per source type
    h'_t = b_t + Z_t[:, self] + sum_r A_r Z_s[:, r]  # A_r row-normalised (mean over the pins)

The product comes before the aggregation: circuit graphs have about two pins per node, so
the N H^2 weight products, not the aggregations, carry the work, and with dynamic ReLU the
product reads only the k stored entries of each row (:func:`sim.gnn.sparse.sparse_row_mm`).
The switches of :class:`Config` are the ablations: ``k`` (None: plain ReLU); ``product``
(``"sparse"``: the sparse-feature kernel; ``"dense"``: ``torch.mm`` on the zero-filled
matrix); ``aggregation`` (``"numba"``: the fused CSR kernel; ``"torch"``: ``torch.sparse.mm``
per relation); ``concurrency`` (threads; 1 = sequential) and ``parallel``, what they run:
``"blocks"``, row blocks of every kernel (:mod:`sim.gnn.sparse`), or ``"relations"``,
DR-CircuitGNN's independent subgraphs: each node type's sparse product and each relation's
numba aggregation one task (:mod:`sim.gnn.subgraphs`; a dense product or the torch aggregation
stays sequential there). :data:`DENSE` is the dense model the others are compared with.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from coevo.sim.errors import UserInputError
from coevo.sim.gnn.config import GNN, PARALLEL, Parallel
from coevo.sim.gnn.graph import NODE_TYPES, RELATIONS, HeteroGraph, Relation
from coevo.sim.gnn.sparse import RelationCSR, aggregate, balanced_blocks, densify, even_blocks, sparse_row_mm, topk_relu
from coevo.sim.gnn.subgraphs import aggregate_relations, typed_products


@dataclass(frozen=True)
class Config:
    """Model shape and the switches (see the module docstring)."""

    hidden: int = GNN.hidden
    layers: int = GNN.layers
    k: int | None = GNN.dynamic_relu_k
    product: Literal["sparse", "dense"] = "sparse"
    aggregation: Literal["numba", "torch"] = "numba"
    concurrency: int = GNN.concurrency
    parallel: Parallel = GNN.parallel

    def __post_init__(self) -> None:
        if self.hidden < 1 or self.layers < 1:
            raise UserInputError(f"hidden ({self.hidden}) and layers ({self.layers}) must be >= 1")
        if self.k is not None and not 1 <= self.k <= self.hidden:
            raise UserInputError(f"dynamic_relu_k = {self.k} must be in 1..hidden ({self.hidden}), or 0 for plain ReLU")
        if self.k is None and self.product == "sparse":
            raise UserInputError("the sparse-feature product needs dynamic ReLU (k); with plain ReLU use product='dense'")
        if self.concurrency < 1:
            raise UserInputError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.parallel not in PARALLEL:
            raise UserInputError(f"parallel = {self.parallel!r}: use one of {', '.join(PARALLEL)}")


DENSE = Config(k=None, product="dense", aggregation="torch", concurrency=1)
"""The dense reference: plain ReLU, dense weight products, torch.sparse.mm aggregation, sequential."""


def ablations(config: Config) -> dict[str, Config]:
    """``config`` (dynamic ReLU + sparse product + numba aggregation + concurrency), each part removed in turn, and two dense models.

    ``dense`` aggregates with torch.sparse.mm (what a PyTorch model would use);
    ``dense_numba_aggregation`` with this package's CSR kernel, sequential: the dense model
    with the aggregation kernel of ``config``, so what remains is dynamic ReLU + concurrency.
    ``parallel_relations`` (or ``parallel_blocks``): the same threads running the other way.
    """
    other: Parallel = "relations" if config.parallel == "blocks" else "blocks"
    return {
        "full": config,
        "no_dynamic_relu": replace(config, k=None, product="dense"),
        "no_sparse_product": replace(config, product="dense"),
        "no_concurrency": replace(config, concurrency=1),
        f"parallel_{other}": replace(config, parallel=other),
        "torch_aggregation": replace(config, aggregation="torch"),
        "dense": replace(DENSE, hidden=config.hidden, layers=config.layers),
        "dense_numba_aggregation": replace(DENSE, hidden=config.hidden, layers=config.layers, aggregation="numba"),
    }


Blocks = list[tuple[int, int]]


@dataclass
class Prepared:
    """A graph as tensors: features, relation adjacencies (kernel CSR + torch CSR), one label."""

    x: dict[str, torch.Tensor]
    rels: dict[Relation, RelationCSR]
    y: torch.Tensor
    graph: HeteroGraph
    _blocks: dict[int, tuple[dict[str, Blocks], dict[str, Blocks]]] = field(default_factory=dict)

    def blocks(self, parts: int) -> tuple[dict[str, Blocks], dict[str, Blocks]]:
        """Per node type, row blocks for ``parts`` workers: even rows (top-k, products) and balanced in-edges (aggregation)."""
        if parts not in self._blocks:
            rows = {t: even_blocks(int(x.shape[0]), parts) for t, x in self.x.items()}
            agg = {}
            for t in NODE_TYPES:
                work = np.zeros(int(self.x[t].shape[0]) + 1, dtype=np.int64)
                for r, rel in self.rels.items():
                    if r[2] == t:
                        work += rel.a[0]
                agg[t] = balanced_blocks(work, parts)
            self._blocks[parts] = (rows, agg)
        return self._blocks[parts]


def prepare(graph: HeteroGraph, label: str) -> Prepared:
    """Tensors for ``graph`` with target ``label`` (relations without edges are left out)."""
    if label not in graph.y:
        raise UserInputError(f"unknown label {label!r}; valid labels: {', '.join(graph.y)}")
    rels = {r: RelationCSR.from_scipy(graph.adjacency(r)) for r in RELATIONS if len(graph.edges[r][0])}
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
        # per layer and source type s: [W_self(s) | W_r for r leaving s], one H x (1 + R_s) H matrix
        self.out_rels = {s: [r for r in self.relations if r[0] == s] for s in in_dims}
        bound = 1.0 / math.sqrt(h)
        self.w = nn.ParameterList()
        self.b = nn.ParameterList()
        for _ in range(config.layers):
            for s in in_dims:
                self.w.append(nn.Parameter(torch.empty(h, h * (1 + len(self.out_rels[s]))).uniform_(-bound, bound)))
                self.b.append(nn.Parameter(torch.empty(h).uniform_(-bound, bound)))
        self.types = list(in_dims)
        self.head = nn.Linear(h, 1)
        self.config = config
        self._pools: dict[int, ThreadPoolExecutor] = {}

    def configure(self, config: Config) -> None:
        """Switch dynamic ReLU / product / aggregation / concurrency (hidden and layers must match the weights)."""
        if (config.hidden, config.layers) != (self.config.hidden, self.config.layers):
            raise UserInputError("configure may change k, product, aggregation and concurrency, not hidden or layers")
        self.config = config

    def _pool(self) -> ThreadPoolExecutor | None:
        # one pool per thread count, kept: switching variants back and forth starts no threads
        n = self.config.concurrency
        if n == 1:
            return None
        if n not in self._pools:
            self._pools[n] = ThreadPoolExecutor(n, thread_name_prefix="gnn")
        return self._pools[n]

    def close(self) -> None:
        """Stop the thread pools."""
        for pool in self._pools.values():
            pool.shutdown()
        self._pools.clear()

    def forward(self, data: Prepared) -> torch.Tensor:
        """Per-cell prediction (shape: number of cells)."""
        cfg, pool = self.config, self._pool()
        row_blocks, agg_blocks = data.blocks(cfg.concurrency if cfg.parallel == "blocks" else 1)
        h = {t: self.inp[t](data.x[t]) for t in self.types}
        for layer in range(cfg.layers):
            ws = [self.w[layer * len(self.types) + n] for n in range(len(self.types))]
            z = self._products(h, ws, row_blocks, pool)
            messages = self._aggregations(z, data, agg_blocks, pool)
            h = {t: z[t][:, : cfg.hidden] + self.b[layer * len(self.types) + n] + messages[t] for n, t in enumerate(self.types)}
        return self.head(torch.relu(h["cell"])).squeeze(1)

    def _products(
        self, h: dict[str, torch.Tensor], ws: list[torch.Tensor], row_blocks: dict[str, Blocks], pool: ThreadPoolExecutor | None
    ) -> dict[str, torch.Tensor]:
        """Per source type s: ``act(h_s) @ W_s`` (dynamic ReLU and the sparse product, or ReLU and a dense product)."""
        cfg = self.config
        if cfg.k is None:
            return {s: torch.relu(h[s]) @ w for s, w in zip(self.types, ws, strict=True)}
        if cfg.parallel == "relations" and cfg.product == "sparse":
            return dict(zip(self.types, typed_products([h[s] for s in self.types], ws, cfg.k, pool), strict=True))
        block_pool = pool if cfg.parallel == "blocks" else None
        z = {}
        for s, w in zip(self.types, ws, strict=True):
            idx, val = topk_relu(h[s], cfg.k, row_blocks[s], block_pool)
            z[s] = sparse_row_mm(idx, val, w, row_blocks[s], block_pool) if cfg.product == "sparse" else densify(idx, val, cfg.hidden) @ w
        return z

    def _aggregations(
        self, z: dict[str, torch.Tensor], data: Prepared, agg_blocks: dict[str, Blocks], pool: ThreadPoolExecutor | None
    ) -> dict[str, torch.Tensor | float]:
        """Per destination type t: ``sum_r A_r Z_s[:, r]`` over the relations into t (0.0 where none)."""
        cfg, hid = self.config, self.config.hidden
        col = {r: hid * (1 + self.out_rels[r[0]].index(r)) for r in self.relations}
        present = [r for r in self.relations if r in data.rels]
        if cfg.aggregation == "numba" and cfg.parallel == "relations" and present:
            rels = [(data.rels[r], self.types.index(r[0]), col[r], self.types.index(r[2])) for r in present]
            rows = [int(data.x[t].shape[0]) for t in self.types]
            outs = aggregate_relations(rels, [z[s] for s in self.types], rows, hid, pool)
            return {t: outs[n] if any(r[2] == t for r in present) else 0.0 for n, t in enumerate(self.types)}
        messages: dict[str, torch.Tensor | float] = {}
        for t in self.types:
            into = [r for r in present if r[2] == t]
            if cfg.aggregation == "numba" and into:
                srcs = [(data.rels[r], self.types.index(r[0]), col[r]) for r in into]
                n_dst = int(data.x[t].shape[0])
                messages[t] = aggregate(srcs, [z[s] for s in self.types], n_dst, hid, agg_blocks[t], pool, cfg.concurrency)
                continue
            total: torch.Tensor | float = 0.0
            for r in into:
                a = data.rels[r].torch_csr
                assert a is not None
                total = total + torch.sparse.mm(a, z[r[0]][:, col[r] : col[r] + hid])
            messages[t] = total
        return messages


def build(data: Prepared, config: Config, seed: int = GNN.seed) -> HeteroCircuitGNN:
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
    convs = nn.ModuleList(
        [HeteroConv({r: GraphConv((hidden, hidden), hidden, aggr="mean") for r in rels}, aggr="sum") for _ in range(layers)]
    )
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
