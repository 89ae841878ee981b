"""Loading designs as graphs, timing model variants (interleaved, medians) and training for label error."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from coevo.sim.errors import UserInputError
from coevo.sim.gnn.config import GNN
from coevo.sim.gnn.designs import get_design
from coevo.sim.gnn.graph import HeteroGraph, batch, to_hetero
from coevo.sim.gnn.model import Config, HeteroCircuitGNN, Prepared, build
from coevo.sim.gnn.netlist import Netlist, from_yosys
from coevo.sim.gnn.yosys import synthesize_text


def load_netlist(design: str, top: str | None = None) -> Netlist:
    """A named design (:data:`sim.gnn.designs.DESIGNS`) or a Verilog file (``path.v``, with ``top``) synthesised and parsed."""
    if design.endswith((".v", ".sv")):
        path = Path(design)
        if not path.is_file():
            raise UserInputError(f"Verilog file {design!r} does not exist")
        if not top:
            raise UserInputError(f"a Verilog file needs its top module: pass top (the module name in {path.name})")
        return from_yosys(synthesize_text(path.read_text(), top, name=path.stem, source_name=str(path)), path.stem)
    d = get_design(design)
    verilog = synthesize_text(d.verilog(), d.top, d.params, name=d.name, source_name=f"sim/gnn/designs/{d.source}")
    return from_yosys(verilog, d.name)


@lru_cache(maxsize=64)
def _graph_cached(design: str) -> HeteroGraph:
    return to_hetero(load_netlist(design))


def load_graph(design: str, top: str | None = None) -> HeteroGraph:
    """The heterogeneous graph of a design (named designs are kept in memory once built)."""
    if design.endswith((".v", ".sv")):
        return to_hetero(load_netlist(design, top))
    return _graph_cached(design)


def load_batch(designs: Sequence[str]) -> HeteroGraph:
    """Several named designs as one block-diagonal graph."""
    return batch([load_graph(d) for d in designs])


@dataclass
class Timing:
    """Median forward and backward time of one variant over ``repeats`` runs, in milliseconds.

    ``*_ms`` is wall-clock time; ``*_cpu_ms`` the process's CPU time (all threads): the work
    done, which other jobs on a shared machine do not inflate and threads do not reduce.
    """

    forward_ms: float
    backward_ms: float
    repeats: int
    forward_cpu_ms: float = 0.0
    backward_cpu_ms: float = 0.0


def _step(run: Callable[[], torch.Tensor], params: list[torch.Tensor]) -> tuple[float, float, float, float]:
    for p in params:
        p.grad = None
    t0, c0 = time.perf_counter(), time.process_time()
    out = run()
    loss = (out * out).mean()
    t1, c1 = time.perf_counter(), time.process_time()
    loss.backward()
    t2, c2 = time.perf_counter(), time.process_time()
    return t1 - t0, t2 - t1, c1 - c0, c2 - c1


def time_variants(
    variants: dict[str, tuple[Callable[[], torch.Tensor], list[torch.Tensor]]], repeats: int, warmup: int = 2
) -> dict[str, Timing]:
    """Forward and backward time of each variant, interleaved (one run of each per round), medians.

    Interleaving spreads a shared machine's load over all variants alike.
    """
    for _ in range(warmup):
        for run, params in variants.values():
            _step(run, params)
    samples: dict[str, list[tuple[float, float, float, float]]] = {k: [] for k in variants}
    for _ in range(repeats):
        for name, (run, params) in variants.items():
            samples[name].append(_step(run, params))

    def med(name: str, i: int) -> float:
        return 1e3 * statistics.median(s[i] for s in samples[name])

    return {k: Timing(med(k, 0), med(k, 1), repeats, med(k, 2), med(k, 3)) for k in variants}


def model_variant(model: HeteroCircuitGNN, data: Prepared, config: Config) -> tuple[Callable[[], torch.Tensor], list[torch.Tensor]]:
    """A closure running ``model`` under ``config`` (the same weights for every variant)."""

    def run() -> torch.Tensor:
        if model.config != config:
            model.configure(config)
        out: torch.Tensor = model(data)
        return out

    return run, list(model.parameters())


@dataclass
class Fit:
    """Label error of one trained model: MAE in the label's units on train and test cells, and the mean predictor's."""

    train_mae: float
    test_mae: float
    baseline_test_mae: float
    epochs: int


def train_eval(
    train: Prepared,
    test: Prepared,
    config: Config,
    *,
    seed: int,
    epochs: int,
    lr: float = GNN.lr,
    train_mask: np.ndarray | None = None,
    test_mask: np.ndarray | None = None,
) -> Fit:
    """Train on ``train``'s cells (MSE on the standardised label, Adam, full batch), report MAE on ``test``'s.

    ``train`` and ``test`` may be the same graph with disjoint masks (held-out cells) or
    different graphs (held-out designs). The baseline predicts the training mean. The model
    has weights for the relations present in ``train``; a relation only ``test`` has (flip-flop
    pins when training on combinational designs only) is not used.
    """
    model = build(train, config, seed)
    try:
        tm = torch.ones(len(train.y), dtype=torch.bool) if train_mask is None else torch.from_numpy(train_mask)
        em = torch.ones(len(test.y), dtype=torch.bool) if test_mask is None else torch.from_numpy(test_mask)
        if not bool(tm.any()) or not bool(em.any()):
            raise UserInputError("the train or test split holds no cells; use a larger design or another split")
        mu, sd = float(train.y[tm].mean()), float(train.y[tm].std()) or 1.0
        target = (train.y - mu) / sd
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        for _ in range(epochs):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(train)[tm], target[tm])
            loss.backward()
            opt.step()
        with torch.no_grad():
            tr = model(train) * sd + mu
            te = model(test) * sd + mu
        return Fit(
            train_mae=float((tr[tm] - train.y[tm]).abs().mean()),
            test_mae=float((te[em] - test.y[em]).abs().mean()),
            baseline_test_mae=float((test.y[em] - mu).abs().mean()),
            epochs=epochs,
        )
    finally:
        model.close()
