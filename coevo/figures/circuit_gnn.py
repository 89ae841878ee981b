"""Issue 19 item 2 figures: circuit GNN forward/backward speed-up vs the dense model (ablations, PyG) and label error.

Writes docs/bench/gnn/circuit.md from the CSVs it writes beside it (circuit.csv: timing,
circuit_labels.csv: label error). Run from the repository root::

    nice -n 10 python -m coevo.figures circuit-gnn            # full (about 15 min on 2 shared cores)
    nice -n 10 python -m coevo.figures circuit-gnn --quick    # smoke run
    python -m coevo.figures circuit-gnn --report-only         # circuit.md again from the saved CSVs
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from coevo.figures._common import command_line, figure_parser, load_text, read_csv, write_csv, write_markdown
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
RUN_JSON = "circuit_run.json"
"""The measuring run's facts (command, loads before and after, wall time, machine, threads): a re-render reads them."""

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


MECHANISMS = (
    "DR-CircuitGNN's three mechanisms, and what is here: (1) **row-wise top-k dynamic ReLU**: implemented (numba kernel, "
    "its own backward); (2) **sparse-feature SpMM** for the weight products of the top-k rows, forward and backward: "
    "implemented (numba); (3) **concurrent processing of the independent subgraphs** of a heterogeneous layer (the paper "
    "runs each relation's subgraph at the same time, on CUDA streams): implemented on CPU threads as `parallel=relations` "
    "(sim/gnn/subgraphs.py: each node type's top-k + product and each relation's aggregation one task of the thread pool, "
    "forward and backward; the numba kernels release the GIL), measured below against the sequential order "
    "(`no_concurrency`) and against threads over row blocks inside every kernel (`full`, `parallel=blocks`, the tool's "
    "default). Replaced: the GPU (CUDA streams, cuSPARSE-class kernels, large graphs) by a 2-core CPU and circuits of "
    "0.6k-6k cells, since no GPU is in the test or CI machines."
)
"""What the page says first: the paper's mechanisms, which exist, what replaces what."""


def _ms(r: dict[str, str]) -> str:
    return f"{float(r['forward_ms']):.1f} / {float(r['backward_ms']):.1f}"


def _up(base: dict[str, str], r: dict[str, str]) -> str:
    fwd, bwd = float(base["forward_ms"]) / float(r["forward_ms"]), float(base["backward_ms"]) / float(r["backward_ms"])
    return f"{fwd:.2f}x / {bwd:.2f}x"


def _concurrency_rows(timing: list[dict[str, str]]) -> list[str]:
    """Sequential vs threads over row blocks vs threads over relations, per design and width (speed-up over sequential)."""
    lines = [
        "| design | H | sequential fwd / bwd ms | row blocks fwd / bwd ms | relations fwd / bwd ms | "
        "row blocks speed-up fwd / bwd | relations speed-up fwd / bwd |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for design, hidden in dict.fromkeys((r["design"], r["hidden"]) for r in timing):
        mine = {r["variant"]: r for r in timing if (r["design"], r["hidden"]) == (design, hidden)}
        if not {"no_concurrency", "full", "parallel_relations"} <= set(mine):
            continue
        seq, blk, rel = mine["no_concurrency"], mine["full"], mine["parallel_relations"]

        lines.append(f"| {design} | {hidden} | {_ms(seq)} | {_ms(blk)} | {_ms(rel)} | {_up(seq, blk)} | {_up(seq, rel)} |")
    return lines


SPARSE_MODELS = ("full", "parallel_relations", "no_concurrency")
"""The dynamic-ReLU model with the sparse product and numba aggregation, at each thread setting (the headline takes the fastest)."""


def _headline(timing: list[dict[str, str]]) -> list[str]:
    """The best sparse model per design and width against both dense references (the numba-aggregation one first)."""
    lines = [
        "| design | H | best sparse variant | fwd vs dense_numba_aggregation | bwd vs dense_numba_aggregation "
        "| fwd vs dense (torch.sparse) | bwd vs dense (torch.sparse) |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    ratios = []
    for design, hidden in dict.fromkeys((r["design"], r["hidden"]) for r in timing):
        mine = [r for r in timing if (r["design"], r["hidden"]) == (design, hidden) and r["variant"] in SPARSE_MODELS]
        best = min(mine, key=lambda r: float(r["forward_ms"]) + float(r["backward_ms"]))
        f_dn, b_dn = float(best["forward_speedup_vs_dense_numba"]), float(best["backward_speedup_vs_dense_numba"])
        ratios.append((f_dn, b_dn))
        lines.append(
            f"| {design} | {hidden} | {best['variant']} | {f_dn:.2f}x | {b_dn:.2f}x | "
            f"{float(best['forward_speedup']):.2f}x | {float(best['backward_speedup']):.2f}x |"
        )
    fs, bs = [f for f, _ in ratios], [b for _, b in ratios]
    lines += [
        "",
        f"Against the dense model on the project's own aggregation kernel the best sparse model runs at {min(fs):.2f}-{max(fs):.2f}x "
        f"forward and {min(bs):.2f}-{max(bs):.2f}x backward. The paper reports up to 3.51x forward and 4.09x backward "
        "(GPU, large circuit graphs); "
        + ("that is reached here." if max(fs) >= 3.5 and max(bs) >= 4.09 else "that is **not reached** here (see the notes)."),
    ]
    return lines


def write_md(out: Path, run: dict[str, object], command: str) -> None:
    """circuit.md from circuit.csv, circuit_labels.csv and circuit_run.json (the measuring run's facts) in ``out``."""
    timing = read_csv(out / "circuit.csv")
    labels = read_csv(out / "circuit_labels.csv")
    lines = [
        "# Circuit GNN (DR-CircuitGNN) on Yosys netlists: time against dense models, one part removed at a time; label error",
        "",
        MECHANISMS,
        "",
        f"Command: `{run['command']}` (one run, {float(str(run['wall_s'])) / 60:.1f} min). Machine: {run['machine']}, "
        f"{run['cpus']} cores (load average before: {run['load_before']}; after: {run['load_after']}); torch {run['torch']} at "
        f"{run['torch_threads']} intra-op thread, model threads {CONCURRENCY}, {run['yosys']}. Netlists: the shipped Verilog "
        "designs synthesised by `synth -flatten; abc -g simple` (sim/gnn/designs/).",
        "",
        f"Model: {GNN.layers} layers, 8 relations (typed pin edges, both directions), mean aggregation, weight product before aggregation. "
        f"`full` = dynamic ReLU (top-{K}) + sparse-feature SpMM (numba) + fused numba CSR aggregation + {CONCURRENCY} threads "
        "over row blocks of every kernel; `parallel_relations` = the same with the threads over the layer's independent "
        "subgraphs instead; each `no_*` row removes one part (`no_concurrency`: one thread); `torch_aggregation` swaps the numba "
        "aggregation for torch.sparse.mm; `dense` = ReLU, dense products, torch.sparse.mm, sequential; `dense_numba_aggregation` "
        "= the same with the numba aggregation kernel, the dense reference of the headline (torch.sparse.mm's backward "
        "re-sorts the CSR matrix for its transpose on every call, which flatters anything compared with `dense`); "
        "`pyg_heteroconv` = PyTorch Geometric HeteroConv of GraphConv(mean) per relation (same widths and depth, plain ReLU, "
        "its own scatter kernels, one root weight per relation). All variants of a design run interleaved in the same process "
        "on the same weights; times are medians of the repeats (wall clock, ms); speed-up = reference time / variant time. "
        "CPU ms is the process's CPU time (all threads): the work done, not reduced by threads.",
        "",
        "## Headline: the best sparse model against both dense references",
        "",
        *_headline(timing),
        "",
        f"## Concurrency: {CONCURRENCY} threads over row blocks or over the independent subgraphs, against one thread",
        "",
        "All three with dynamic ReLU, the sparse product and the numba aggregation.",
        "",
        *_concurrency_rows(timing),
        "",
        "## Every variant",
        "",
        "| design | cells | nets | H | variant | forward ms | backward ms | fwd vs dense | bwd vs dense "
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
    lines += [
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
        f"Seeds: {', '.join(sorted({r['seed'] for r in labels}))}. Raw numbers: circuit.csv, circuit_labels.csv; the run's facts: "
        "circuit_run.json.",
        "",
        "## Notes",
        "",
        "- Why the published gain does not carry over at this scale: circuit graphs have about two pins per node, so the "
        "aggregations are cheap and the per-relation weight products (N x H x (1+R)H) dominate. Dynamic ReLU cuts those to "
        f"N x k x (1+R)H ({K}/H of the multiply-adds), but the dense product runs in MKL at tens of GFLOP/s while the "
        "sparse-row kernel gathers weight rows and the per-row top-k selection has its own cost, so the time saved is far "
        "less than the multiply-adds saved. The saving grows with H (the dense product grows with H^2, the sparse one with H) "
        "and with the graph (fixed costs per call weigh less); the paper's graphs are far larger than these.",
        "- Concurrency on 2 cores can at best halve a stage. Over relations the tasks are uneven (the relations of a circuit "
        "differ several-fold in edges, and one layer has only 2 node types to run products for), so the busiest task bounds a "
        "stage; over row blocks the work is balanced but every kernel pays a hand-off and a join. Torch's autograd engine runs "
        "the backward nodes one after another either way; each node's backward dispatches its own tasks.",
        "- Timings are wall-clock medians of interleaved runs; the load averages above say how quiet the machine was.",
        "- PyG's HeteroConv: one GraphConv module and scatter per relation, a root weight per relation.",
    ]
    write_markdown(out / "circuit.md", "\n".join(lines) + "\n", command)


def parser() -> argparse.ArgumentParser:
    """The figure's options (its model settings are the family's: ``GNN``)."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--quick", action="store_true", help="small designs, few repeats, one seed (smoke run)")
    ap.add_argument("--timing-only", action="store_true", help="redo the timing table only; keep circuit_labels.csv")
    return ap


def main(argv: list[str] | None = None) -> None:
    """Measure (unless ``--report-only``), then write circuit.md from the CSVs and the run's facts."""
    args = parser().parse_args(argv)
    torch.set_num_threads(1)
    out, command = args.out, command_line(NAME, argv)
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        if args.timing_only and not (out / "circuit_labels.csv").exists():
            raise SystemExit("--timing-only keeps circuit_labels.csv, and there is none: run without --timing-only")
        run: dict[str, object] = {
            "command": command,
            "load_before": load_text(),
            "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "yosys": _yosys(),
        }
        start = time.perf_counter()
        assert all(d in DESIGNS for d in TIMING_DESIGNS + TRAIN + TEST)
        np.random.seed(0)
        designs, hidden, repeats = (["alu16"], [64], 3) if args.quick else (TIMING_DESIGNS, HIDDEN, 9)
        write_csv(out / "circuit.csv", timing_rows(designs, hidden, repeats), command=command)
        if not args.timing_only:
            # 150 epochs, not GNN.epochs (60, the tool's): the committed label table's experiment setting
            labels, seeds, epochs = (["depth"], [0], 20) if args.quick else (LABEL_NAMES, SEEDS, 150)
            write_csv(out / "circuit_labels.csv", label_rows(labels, seeds, epochs), command=command)
        run |= {"load_after": load_text(), "wall_s": round(time.perf_counter() - start, 1)}
        (out / RUN_JSON).write_text(json.dumps(run, indent=1) + "\n")
    write_md(out, json.loads((out / RUN_JSON).read_text()), command)
    print(f"wrote {out / 'circuit.md'}", file=sys.stderr)
