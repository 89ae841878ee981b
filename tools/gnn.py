"""Circuit GNN tool: a Yosys-synthesised design as a heterogeneous graph; a dynamic-ReLU GNN trained on its labels, timed vs dense."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field

from coevo.search.problem import config_field
from coevo.sim.gnn import DENSE, DESIGNS, Config, build, load_graph, model_variant, prepare, time_variants, train_eval
from coevo.sim.gnn.config import GnnFamilyConfig, Parallel
from coevo.tools._base import Tool, ToolArgs, ToolResult


class GnnCircuitArgs(ToolArgs):
    """Arguments of ``gnn.circuit``: the Verilog design and label, the circuit GNN's size and training, the timing comparison."""

    design: str = config_field(
        GnnFamilyConfig,
        "design",
        description=(
            "a shipped design (adder<W> ripple, cla<W> carry lookahead, mul<W> array multiplier, alu<W>, fifo<DEPTH>x<WIDTH>; "
            "e.g. alu32, adder16, mul8, fifo8x16) or a Verilog file path ending in .v (then give top)"
        ),
    )
    top: str | None = Field(None, description="top module of a Verilog file given as design (ignored for shipped designs)")
    label: Literal["depth", "arrival", "fanout_cone"] = config_field(
        GnnFamilyConfig,
        "label",
        description="per-cell target from the netlist: logic depth, static-timing arrival time (per-gate delays) or fan-out cone size",
    )
    dynamic_relu_k: int = config_field(GnnFamilyConfig, "dynamic_relu_k")
    concurrency: int = config_field(GnnFamilyConfig, "tool_concurrency")
    parallel: Parallel = config_field(GnnFamilyConfig, "parallel")
    hidden: int = config_field(GnnFamilyConfig, "hidden")
    layers: int = config_field(GnnFamilyConfig, "layers")
    epochs: int = config_field(GnnFamilyConfig, "epochs")
    test_share: float = config_field(GnnFamilyConfig, "test_share")
    compare_dense: bool = config_field(
        GnnFamilyConfig, "compare_dense", description="also train the dense model (plain ReLU, dense products, torch.sparse.mm, sequential)"
    )
    timing_repeats: int = config_field(GnnFamilyConfig, "timing_repeats")
    seed: int = config_field(GnnFamilyConfig, "seed")


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    # the measured concurrency is the tool's own thread pool; torch's intra-op threads would blur it
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class GnnCircuit(Tool):
    """Train and time the heterogeneous circuit GNN (dynamic ReLU, sparse-feature SpMM, concurrency) on a real netlist."""

    name = "gnn.circuit"
    measured_fields = frozenset({"timing", "wall_s"})  # timing: forward/backward times
    programs = ("yosys",)  # synthesises the Verilog designs into netlists
    description = (
        "Synthesise a Verilog design with Yosys to a gate-level netlist (cached), build its heterogeneous graph (cell and "
        "net nodes, typed pin edges) and per-cell labels (logic depth, arrival time, fan-out cone), train a heterogeneous "
        "message-passing GNN with row-wise top-k dynamic ReLU on part of the cells and report the label MAE on held-out "
        "cells (and the dense model's), plus forward/backward time of the configured model vs the dense one."
    )
    Args = GnnCircuitArgs
    example: ClassVar[dict[str, Any]] = {
        "design": "adder8",
        "dynamic_relu_k": 4,
        "concurrency": 2,
        "hidden": 16,
        "epochs": 20,
        "timing_repeats": 2,
    }
    long_running = True

    def run(self, args: GnnCircuitArgs) -> ToolResult:
        start = time.perf_counter()
        k = args.dynamic_relu_k or None
        cfg = Config(
            hidden=args.hidden,
            layers=args.layers,
            k=k,
            product="sparse" if k else "dense",
            concurrency=args.concurrency,
            parallel=args.parallel,
        )
        dense = Config(hidden=args.hidden, layers=args.layers, k=None, product=DENSE.product, aggregation=DENSE.aggregation)
        graph = load_graph(args.design, args.top)
        with _one_torch_thread():
            data = prepare(graph, args.label)
            n = len(data.y)
            test = np.zeros(n, dtype=bool)
            test[np.random.default_rng(args.seed).permutation(n)[: max(1, round(args.test_share * n))]] = True
            value: dict[str, Any] = {
                "design": graph.designs[0],
                "graph": graph.summary(),
                "label": args.label,
                "label_mean": float(data.y.mean()),
                "label_max": float(data.y.max()),
                "config": {
                    "dynamic_relu_k": args.dynamic_relu_k,
                    "concurrency": args.concurrency,
                    "parallel": args.parallel,
                    "hidden": args.hidden,
                    "layers": args.layers,
                },
            }
            if args.epochs:
                fits = {"model": cfg, **({"dense": dense} if args.compare_dense else {})}
                for name, c in fits.items():
                    fit = train_eval(data, data, c, seed=args.seed, epochs=args.epochs, train_mask=~test, test_mask=test)
                    value[f"{name}_test_mae"] = round(fit.test_mae, 6)
                    value[f"{name}_train_mae"] = round(fit.train_mae, 6)
                value["mean_predictor_test_mae"] = round(fit.baseline_test_mae, 6)
                value["held_out_cells"] = int(test.sum())
            if args.timing_repeats:
                model = build(data, cfg, args.seed)
                try:
                    t = time_variants(
                        {"model": model_variant(model, data, cfg), "dense": model_variant(model, data, dense)}, args.timing_repeats
                    )
                finally:
                    model.close()
                value["timing"] = {
                    "forward_ms": round(t["model"].forward_ms, 3),
                    "backward_ms": round(t["model"].backward_ms, 3),
                    "dense_forward_ms": round(t["dense"].forward_ms, 3),
                    "dense_backward_ms": round(t["dense"].backward_ms, 3),
                    "forward_speedup": round(t["dense"].forward_ms / t["model"].forward_ms, 3),
                    "backward_speedup": round(t["dense"].backward_ms / t["model"].backward_ms, 3),
                    "repeats": args.timing_repeats,
                }
        value["wall_s"] = round(time.perf_counter() - start, 3)
        messages = [
            f"labels computed from the synthesised netlist ({value['graph']['cells']} cells); MAE in the label's units on "
            f"{args.test_share:.0%} held-out cells of the same design; mean_predictor_test_mae predicts the training mean",
            "timing: medians of interleaved runs on this machine's CPU with torch at one thread; the thread pool is the only parallelism",
        ]
        if args.design not in DESIGNS:
            messages.append(f"design synthesised from {args.design} (top {args.top})")
        return ToolResult(value=value, messages=messages)
