"""Heterogeneous circuit graphs: cell and net nodes joined by typed pin edges.

Relations (``(source type, relation, destination type)``):

* ``cell -drives-> net``: a cell's output pin (Y, Q) to the net it drives;
* ``net -in_a/in_b/in_sel-> cell``: a net into a gate's A, B or MUX select pin;
* ``net -in_d/in_ctl-> cell``: into a flip-flop's data pin, or its clock/enable/reset pins;
* ``net -driven_by-> cell`` and ``cell -reads-> net``: the same pins reversed, so messages
  also flow against the signal (what a cell feeds tells its fan-out cone).

Features: a cell is its type one-hot (:data:`sim.gnn.netlist.CELL_TYPES`), its number of
input pins and log(1 + fan-out); a net is [primary input, primary output, constant 0,
constant 1, has a driver, log(1 + sinks)]. Several designs batch into one graph (block
diagonal); ``design_of`` keeps which design each cell came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from coevo.sim.gnn.netlist import CELL_TYPES, LABELS, Netlist, labels

Relation = tuple[str, str, str]

RELATIONS: tuple[Relation, ...] = (
    ("cell", "drives", "net"),
    ("net", "in_a", "cell"),
    ("net", "in_b", "cell"),
    ("net", "in_sel", "cell"),
    ("net", "in_d", "cell"),
    ("net", "in_ctl", "cell"),
    ("net", "driven_by", "cell"),
    ("cell", "reads", "net"),
)
"""Every relation, in a fixed order."""

NODE_TYPES = ("cell", "net")
N_CELL_FEATURES = len(CELL_TYPES) + 2
N_NET_FEATURES = 6


def pin_relation(kind: str, pin: str) -> str:
    """The relation of a net entering ``pin`` of a cell of vocabulary type ``kind``."""
    if kind == "DFF":
        return "in_d" if pin == "D" else "in_ctl"
    return {"A": "in_a", "B": "in_b", "S": "in_sel"}.get(pin, "in_b")


@dataclass
class HeteroGraph:
    """A heterogeneous graph with cell labels.

    Attributes:
        x: node type -> float32 feature matrix.
        edges: relation -> (source indices, destination indices), int64.
        y: label name -> float32 per cell.
        design_of: per cell, the index into ``designs``.
        designs: the design names batched here.
    """

    x: dict[str, np.ndarray]
    edges: dict[Relation, tuple[np.ndarray, np.ndarray]]
    y: dict[str, np.ndarray]
    design_of: np.ndarray
    designs: list[str] = field(default_factory=list)

    def num_nodes(self, node_type: str) -> int:
        """Number of nodes of a type."""
        return int(self.x[node_type].shape[0])

    def adjacency(self, rel: Relation, *, normalize: bool = True) -> sp.csr_matrix:
        """The relation's adjacency as CSR (rows = destinations, columns = sources), float32.

        With ``normalize`` each row is divided by its number of entries (mean aggregation),
        so a net with a fan-out of 500 does not swamp its driver.
        """
        src, dst = self.edges[rel]
        shape = (self.num_nodes(rel[2]), self.num_nodes(rel[0]))
        a = sp.csr_matrix((np.ones(len(src), dtype=np.float32), (dst, src)), shape=shape)
        a.sum_duplicates()
        a.sort_indices()
        if normalize:
            deg = np.diff(a.indptr).astype(np.float32)
            a = sp.csr_matrix(sp.diags(1.0 / np.maximum(deg, 1.0)) @ a, dtype=np.float32)
            a.sort_indices()
        return a

    def summary(self) -> dict[str, object]:
        """Counts: nodes per type, edges per relation, cells per type."""
        kinds = self.x["cell"][:, : len(CELL_TYPES)].sum(axis=0)
        return {
            "cells": self.num_nodes("cell"),
            "nets": self.num_nodes("net"),
            "edges": {"->".join(r): len(self.edges[r][0]) for r in RELATIONS},
            "cell_types": {k: int(n) for k, n in zip(CELL_TYPES, kinds, strict=True) if n},
        }


def to_hetero(netlist: Netlist) -> HeteroGraph:
    """The heterogeneous graph of one netlist, with its labels."""
    n_cells = len(netlist.cells)
    sinks = netlist.sink_count()
    cx = np.zeros((n_cells, N_CELL_FEATURES), dtype=np.float32)
    e: dict[Relation, tuple[list[int], list[int]]] = {r: ([], []) for r in RELATIONS}
    for i, c in enumerate(netlist.cells):
        cx[i, CELL_TYPES.index(c.kind)] = 1.0
        cx[i, len(CELL_TYPES)] = len(c.inputs)
        cx[i, len(CELL_TYPES) + 1] = np.log1p(sum(int(sinks[n]) for n in c.outputs.values()))
        for net in c.outputs.values():
            _add(e, ("cell", "drives", "net"), i, net)
            _add(e, ("net", "driven_by", "cell"), net, i)
        for pin, net in c.inputs.items():
            _add(e, ("net", pin_relation(c.kind, pin), "cell"), net, i)
            _add(e, ("cell", "reads", "net"), i, net)
    nx_ = np.zeros((netlist.n_nets, N_NET_FEATURES), dtype=np.float32)
    nx_[netlist.inputs, 0] = 1.0
    nx_[netlist.outputs, 1] = 1.0
    for net, v in netlist.const.items():
        nx_[net, 2 + v] = 1.0
    nx_[list(netlist.driver), 4] = 1.0
    nx_[:, 5] = np.log1p(sinks)
    lab = labels(netlist)
    return HeteroGraph(
        x={"cell": cx, "net": nx_},
        edges={r: (np.asarray(s, dtype=np.int64), np.asarray(d, dtype=np.int64)) for r, (s, d) in e.items()},
        y={k: lab[k].astype(np.float32) for k in LABELS},
        design_of=np.zeros(n_cells, dtype=np.int64),
        designs=[netlist.name],
    )


def _add(e: dict[Relation, tuple[list[int], list[int]]], rel: Relation, s: int, d: int) -> None:
    e[rel][0].append(s)
    e[rel][1].append(d)


def batch(graphs: Sequence[HeteroGraph]) -> HeteroGraph:
    """Several graphs as one block-diagonal graph (indices offset per node type)."""
    if not graphs:
        raise ValueError("batch needs at least one graph")
    offsets = {t: np.cumsum([0] + [g.num_nodes(t) for g in graphs]) for t in NODE_TYPES}
    edges = {}
    for r in RELATIONS:
        edges[r] = (
            np.concatenate([g.edges[r][0] + offsets[r[0]][i] for i, g in enumerate(graphs)]),
            np.concatenate([g.edges[r][1] + offsets[r[2]][i] for i, g in enumerate(graphs)]),
        )
    design_of, names, base = [], [], 0
    for g in graphs:
        design_of.append(g.design_of + base)
        names.extend(g.designs)
        base += len(g.designs)
    return HeteroGraph(
        x={t: np.concatenate([g.x[t] for g in graphs]) for t in NODE_TYPES},
        edges=edges,
        y={k: np.concatenate([g.y[k] for g in graphs]) for k in graphs[0].y},
        design_of=np.concatenate(design_of),
        designs=names,
    )
