"""Issue 19 item 2 figures: circuit GNN forward/backward speed-up vs the dense model (ablations, PyG) and label error.

Writes docs/bench/gnn/circuit.md from the CSVs it writes beside it (circuit.csv: timing,
circuit_labels.csv: label error). Run from the repository root::

    nice -n 10 python -m coevo.figures circuit-gnn            # full (about 15 min on 2 shared cores)
    nice -n 10 python -m coevo.figures circuit-gnn --quick    # smoke run
    python -m coevo.figures circuit-gnn --report-only         # circuit.md again from the saved CSVs
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from coevo.figures._common import command_line, figure_parser, read_csv, write_csv, write_markdown
from coevo.sim.gnn import (
    DESIGNS,
    Config,
    ablations,
    batch,
    build,
    build_pyg,
    load_graph,
    model_variant,
    prepare,
    pyg_available,
    time_variants,
    train_eval,
)
from coevo.sim.gnn.config import GNN
from coevo.sim.gnn.yosys import YosysNotFoundError, yosys_version

NAME = "circuit-gnn"

TIMING_DESIGNS = ["alu16", "alu64", "mul32"]
HIDDEN = [GNN.hidden, 128]
"""Hidden widths of the timing table: the family's, and the figure's wider one."""
K = GNN.dynamic_relu_k
CONCURRENCY = GNN.tool_concurrency
"""Threads of the ``full`` variant: the tool's (``GNN.tool_concurrency``), not a bare Config's 1."""
LR_TEXT = f"{GNN.lr:.0e}".replace("e-0", "e-")
"""The learning rate as the page writes it (5e-3)."""
TRAIN = ["adder16", "cla16", "mul8", "alu16", "fifo8x16"]
TEST = ["adder32", "cla32", "mul12", "alu32", "fifo16x16"]
LABEL_NAMES = ["depth", "arrival", "fanout_cone"]
SEEDS = [0, 1, 2]


def timing_rows(designs: list[str], hidden: list[int], repeats: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for design in designs:
        g = load_graph(design)
        for h in hidden:
            data = prepare(g, "depth")
            cfg = Config(hidden=h, layers=GNN.layers, k=K, concurrency=CONCURRENCY)
            model = build(data, cfg, seed=0)
            variants = {name: model_variant(model, data, c) for name, c in ablations(cfg).items()}
            if pyg_available():
                run = build_pyg(data, h, 3, seed=0)
                variants["pyg_heteroconv"] = (run, list(run.modules.parameters()))  # type: ignore[attr-defined]
            t = time_variants(variants, repeats)
            model.close()
            dense, dn = t["dense"], t["dense_numba_aggregation"]
            for name, v in t.items():
                rows.append(
                    {
                        "design": design,
                        "cells": g.num_nodes("cell"),
                        "nets": g.num_nodes("net"),
                        "hidden": h,
                        "k": K,
                        "concurrency": CONCURRENCY,
                        "variant": name,
                        "forward_ms": round(v.forward_ms, 3),
                        "backward_ms": round(v.backward_ms, 3),
                        "forward_cpu_ms": round(v.forward_cpu_ms, 3),
                        "backward_cpu_ms": round(v.backward_cpu_ms, 3),
                        "forward_speedup": round(dense.forward_ms / v.forward_ms, 3),
                        "backward_speedup": round(dense.backward_ms / v.backward_ms, 3),
                        "forward_speedup_vs_dense_numba": round(dn.forward_ms / v.forward_ms, 3),
                        "backward_speedup_vs_dense_numba": round(dn.backward_ms / v.backward_ms, 3),
                        "repeats": repeats,
                    }
                )
            print(design, h, {k: (round(v.forward_ms, 1), round(v.backward_ms, 1)) for k, v in t.items()}, flush=True)
    return rows


def label_rows(labels: list[str], seeds: list[int], epochs: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    train_g, test_g = batch([load_graph(d) for d in TRAIN]), batch([load_graph(d) for d in TEST])
    for label in labels:
        train, test = prepare(train_g, label), prepare(test_g, label)
        for seed in seeds:
            for variant, cfg in {
                f"dynamic_relu_k{K}": Config(hidden=GNN.hidden, layers=GNN.layers, k=K, concurrency=CONCURRENCY),
                "relu": Config(hidden=GNN.hidden, layers=GNN.layers, k=None, product="dense", concurrency=CONCURRENCY),
            }.items():
                start = time.perf_counter()
                fit = train_eval(train, test, cfg, seed=seed, epochs=epochs, lr=GNN.lr)
                rows.append(
                    {
                        "label": label,
                        "variant": variant,
                        "seed": seed,
                        "epochs": epochs,
                        "train_mae": round(fit.train_mae, 4),
                        "test_mae": round(fit.test_mae, 4),
                        "mean_predictor_test_mae": round(fit.baseline_test_mae, 4),
                        "train_s": round(time.perf_counter() - start, 2),
                    }
                )
                print(rows[-1], flush=True)
    return rows


def mean_std(xs: list[float]) -> str:
    return f"{statistics.mean(xs):.3f} ± {statistics.stdev(xs) if len(xs) > 1 else 0.0:.3f}"


def _yosys() -> str:
    """Yosys's version line; a re-render on a machine without Yosys says so instead of failing (the netlists are cached)."""
    try:
        return yosys_version()
    except YosysNotFoundError:
        return "Yosys (not installed where this page was re-rendered)"


def write_md(out: Path, cmd: str, load_before: str, load_after: str, wall_s: float, command: str) -> None:
    """circuit.md from circuit.csv and circuit_labels.csv in ``out``."""
    timing = read_csv(out / "circuit.csv")
    labels = read_csv(out / "circuit_labels.csv")
    lines = [
        "# Issue 19 item 2: heterogeneous circuit GNN with dynamic ReLU (measured)",
        "",
        f"Command: `{cmd}` ({wall_s / 60:.1f} min). Machine: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores shared with other engineers' jobs (load average before: {load_before}; after: {load_after}); "
        f"torch {torch.__version__} at 1 intra-op thread, {_yosys()}. Netlists: the shipped Verilog designs synthesised by "
        "`synth -flatten; abc -g simple` (sim/gnn/designs/).",
        "",
        f"Model: {GNN.layers} layers, 8 relations (typed pin edges, both directions), mean aggregation, weight product before aggregation. "
        f"`full` = dynamic ReLU (top-{K}) + sparse-feature SpMM (numba) + fused numba CSR aggregation + {CONCURRENCY} threads "
        "over row blocks; each `no_*` row removes one part; `torch_aggregation` swaps the numba aggregation for "
        "torch.sparse.mm; `dense` = ReLU, dense products, torch.sparse.mm, sequential; `dense_numba_aggregation` = the same "
        "with the numba aggregation kernel (so `full` vs it isolates dynamic ReLU + sparse product + threads); "
        "`pyg_heteroconv` = PyTorch Geometric HeteroConv of GraphConv(mean) per relation (same widths and depth, plain ReLU, "
        "its own scatter kernels, one root weight per relation). All variants of a design run interleaved in the same process "
        "on the same weights; times are medians of the repeats (wall clock, ms); speed-up = reference time / variant time. "
        "CPU ms is the process's CPU time (all threads): the work done, not inflated by other jobs' load, not reduced by threads.",
        "",
        "## Forward / backward time and speed-up vs dense",
        "",
        "| design | cells | nets | H | variant | forward ms | backward ms | fwd speed-up vs dense | bwd vs dense "
        "| fwd vs dense_numba_aggregation | bwd vs dense_numba_aggregation | fwd CPU ms | bwd CPU ms |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in timing:
        lines.append(
            f"| {r['design']} | {r['cells']} | {r['nets']} | {r['hidden']} | {r['variant']} | {float(r['forward_ms']):.1f} | "
            f"{float(r['backward_ms']):.1f} | {float(r['forward_speedup']):.2f}x | {float(r['backward_speedup']):.2f}x | "
            f"{float(r['forward_speedup_vs_dense_numba']):.2f}x | {float(r['backward_speedup_vs_dense_numba']):.2f}x | "
            f"{float(r['forward_cpu_ms']):.1f} | {float(r['backward_cpu_ms']):.1f} |"
        )
    full = [r for r in timing if r["variant"] == "full"]
    best_f = max(full, key=lambda r: float(r["forward_speedup"]))
    best_b = max(full, key=lambda r: float(r["backward_speedup"]))
    lines += [
        "",
        f"Best `full` speed-up here: forward {float(best_f['forward_speedup']):.2f}x ({best_f['design']}, H={best_f['hidden']}), "
        f"backward {float(best_b['backward_speedup']):.2f}x ({best_b['design']}, H={best_b['hidden']}) over `dense`. "
        "The literature reports up to 3.5x forward and 4.1x backward (GPU, large circuit graphs); "
        + (
            "that is reached here."
            if float(best_f["forward_speedup"]) >= 3.5 and float(best_b["backward_speedup"]) >= 4.1
            else "that is **not reached** at this scale on 2 shared CPU cores (see the notes below)."
        ),
        "",
        "## Label error on held-out designs (mean ± std over seeds)",
        "",
        f"Train on {', '.join(TRAIN)}; test on {', '.join(TEST)} (other widths/depths of the same families). "
        f"MAE in the label's units (depth: cells; arrival: delay units of `GATE_DELAY`; fan-out cone: cells); hidden {GNN.hidden}, "
        f"{GNN.layers} layers, full-batch Adam (lr {LR_TEXT}, {labels[0]['epochs']} epochs). "
        "The mean predictor predicts the training mean.",
        "",
        f"| label | dynamic ReLU (k={K}) test MAE | ReLU test MAE | dynamic ReLU train MAE | ReLU train MAE | mean predictor |",
        "|---|---|---|---|---|---:|",
    ]
    for label in dict.fromkeys(r["label"] for r in labels):
        rs = [r for r in labels if r["label"] == label]
        dyn = [r for r in rs if r["variant"].startswith("dynamic")]
        relu = [r for r in rs if r["variant"] == "relu"]
        lines.append(
            f"| {label} | {mean_std([float(r['test_mae']) for r in dyn])} | {mean_std([float(r['test_mae']) for r in relu])} | "
            f"{mean_std([float(r['train_mae']) for r in dyn])} | {mean_std([float(r['train_mae']) for r in relu])} | "
            f"{float(rs[0]['mean_predictor_test_mae']):.3f} |"
        )
    lines += [
        "",
        f"Seeds: {', '.join(sorted({r['seed'] for r in labels}))}. Raw numbers: circuit.csv, circuit_labels.csv.",
        "",
        "## Notes",
        "",
        "- Why the published gain does not carry over at this scale: circuit graphs have about two pins per node, so the "
        "aggregations are cheap and the per-relation weight products (N x H x (1+R)H) dominate. Dynamic ReLU cuts those to "
        f"N x k x (1+R)H ({K}/H of the multiply-adds), but the dense product runs in MKL at tens of GFLOP/s while the "
        "sparse-row kernel gathers weight rows, and the per-row top-k selection costs about as much as the dense product "
        "it saves at H=64. The gain grows with H (the dense product grows with H^2, the sparse one with H).",
        "- Concurrency: two threads on a 2-core machine shared by several engineers; the row-block threads can at best halve "
        "the kernel time and in practice compete with other jobs. Backward concurrency is real (each kernel's backward "
        "dispatches its own blocks), but torch's autograd engine still runs the nodes one after another.",
        "- The backward gain of `full` over `dense` comes mostly from the aggregation: torch.sparse.mm's backward re-sorts "
        "the CSR matrix for its transpose on every call, the numba kernel reads a transpose built once.",
        "- Timings are wall-clock medians under load from other jobs (load average about 20 on 2 cores during these runs); "
        "interleaving spreads that load over all variants alike, but single numbers can still be off by tens of percent, and "
        "the thread pool's effect depends on whether a second core happens to be free. An earlier full run of the same "
        "script (commit 'circuit figures (first full run)', load 19-25, before the calling thread ran one block itself) "
        "measured `full` at 2.11x forward / 3.48x backward over `dense` on alu64 at H=128, with threads worth 1.4x/1.6x "
        "over `no_concurrency`; in the run above threads gained nothing. The CPU-time columns, which load does not "
        "inflate, are the steadier measure of the work dynamic ReLU saves: at H=128 the sequential sparse model does "
        "about 0.7x the forward and 0.5x the backward CPU work of `dense`, at H=64 about the same forward work.",
        "- PyG's HeteroConv is slower than our dense model in the forward pass here (one GraphConv module and scatter per "
        "relation, a root weight per relation); its backward is competitive with the numba-aggregation models.",
    ]
    write_markdown(out / "circuit.md", "\n".join(lines) + "\n", command)


def parser() -> argparse.ArgumentParser:
    """The figure's options (its model settings are the family's: ``GNN``)."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--quick", action="store_true", help="small designs, few repeats, one seed (smoke run)")
    ap.add_argument("--timing-only", action="store_true", help="redo the timing table only; keep circuit_labels.csv")
    return ap


def main(argv: list[str] | None = None) -> None:
    """Measure (unless ``--report-only``), then write circuit.md from the CSVs."""
    args = parser().parse_args(argv)
    torch.set_num_threads(1)
    out, command = args.out, command_line(NAME, argv)
    out.mkdir(parents=True, exist_ok=True)
    cmd = "nice -n 10 python -m coevo.figures circuit-gnn" + (" --quick" if args.quick else "")
    if args.timing_only:
        cmd += " --timing-only  # the label table: the same command without --timing-only"
    load_before = " ".join(subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.split()[-3:])
    start = time.perf_counter()
    if not args.report_only:
        assert all(d in DESIGNS for d in TIMING_DESIGNS + TRAIN + TEST)
        np.random.seed(0)
        designs, hidden, repeats = (["alu16"], [64], 3) if args.quick else (TIMING_DESIGNS, HIDDEN, 9)
        write_csv(out / "circuit.csv", timing_rows(designs, hidden, repeats), command=command)
        if not args.timing_only:
            # 150 epochs, not GNN.epochs (60, the tool's): the committed label table's experiment setting
            labels, seeds, epochs = (["depth"], [0], 20) if args.quick else (LABEL_NAMES, SEEDS, 150)
            write_csv(out / "circuit_labels.csv", label_rows(labels, seeds, epochs), command=command)
    load_after = " ".join(subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.split()[-3:])
    write_md(out, cmd, load_before, load_after, time.perf_counter() - start, command)
    print(f"wrote {out / 'circuit.md'}", file=sys.stderr)
