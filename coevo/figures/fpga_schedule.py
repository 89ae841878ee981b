"""Length-aware scheduling (issue 20): docs/bench/fpga/schedule.md from schedule.csv, schedule_cpsat.csv, schedule_run.json.

Usage::

    python -m coevo.figures fpga-schedule            # writes the CSVs, then the table
    python -m coevo.figures fpga-schedule --report-only  # only rewrites the .md from the saved CSVs

Part 1: random batches of pydoc sentences (byte lengths; seeds 0..draws-1 per batch size) scheduled by
pad-to-batch-max, bucketing, length-aware (upward rank) and FIFO on the same accelerator (lm-pydoc's
shape, zcu102, 64 PEs), with dense and top-k attention; medians and 10-90 % ranges over the draws,
speed-ups paired per draw. Part 2: small batches (lm-pydoc-tiny, 4 sentences) where CP-SAT gives the
optimum or a bound; the gap of each list scheduler to CP-SAT's bound.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from collections.abc import Sequence

import numpy as np

from coevo.figures._common import command_line, figure_parser, read_csv, write_csv, write_markdown
from coevo.sim.fpga import (
    Accelerator,
    AttentionConfig,
    build_tasks,
    check_schedule,
    corpus_lengths,
    cpsat_schedule,
    device,
    draw_batches,
    groups_for,
    lower_bound,
    metrics,
    model_shape,
    schedule_batch,
    split_pes,
)
from coevo.sim.fpga.config import FpgaConfig

NAME = "fpga-schedule"
METHODS = ("padding", "bucketing", "length-aware", "fifo")
ATTN = {"dense": AttentionConfig("dense"), "topk-32-4bit": AttentionConfig("topk", top_k=32, key_bits=4)}


def _shares(split: str) -> tuple[float, float, float]:
    """``"4:3:1"`` as the PE shares (matmul, attention, softmax)."""
    a, b, c = split.split(":")
    return float(a), float(b), float(c)


SPLITS = {split: _shares(split) for split in (FpgaConfig.split, "12:3:1")}
"""Part 1's PE splits: the family's (the tool's default) and 12:3:1, near what the fpga-transformer search prefers."""
CPSAT_SPLIT = (6.0, 1.0, 1.0)
"""Part 2's PE split matmul:attention:softmax: the committed figure's experiment setting, not ``FpgaConfig.split``."""


def run_batches(batch_sizes: list[int], draws: int) -> list[dict[str, object]]:
    shape, lengths = model_shape(FpgaConfig.model), corpus_lengths()
    rows: list[dict[str, object]] = []
    for split_name, shares in SPLITS.items():
        accel = Accelerator(device(FpgaConfig.device), split_pes(FpgaConfig.pes, shares))
        for batch in batch_sizes:
            for seed, lens in enumerate(draw_batches(lengths, batch, draws, seed=FpgaConfig.seed)):
                for attn_name, attn in ATTN.items():
                    for method in METHODS:
                        s = schedule_batch(lens, accel, shape, attn, method, buckets=FpgaConfig.buckets)
                        check_schedule(s, accel)
                        m = metrics(s, accel, lens, shape, attn)
                        bound = lower_bound(list(s.tasks), accel)
                        rows.append(
                            {
                                "split": split_name, "batch": batch, "draw": seed, "attention": attn_name, "method": method,
                                "max_len": max(lens), "median_len": float(np.median(lens)), "makespan_cycles": m.makespan_cycles,
                                "lower_bound_cycles": bound, "makespan_ms": round(m.makespan_ms, 5),
                                "pe_utilization": round(m.pe_utilization, 5),
                                "padding_waste": round(m.padding_waste, 5), "matmul_busy": round(m.engine_busy["matmul"], 5),
                                "attention_busy": round(m.engine_busy["attention"], 5), "softmax_busy": round(m.engine_busy["softmax"], 5),
                            }
                        )  # fmt: skip
    return rows


def run_cpsat(seeds: int, time_limit: float, batch: int) -> list[dict[str, object]]:
    shape, lengths = model_shape(FpgaConfig.search_model), corpus_lengths()
    rows: list[dict[str, object]] = []
    for cores in ((1, 1, 1), (2, 2, 1)):
        accel = Accelerator(device(FpgaConfig.device), split_pes(FpgaConfig.pes, CPSAT_SPLIT), cores=cores)
        # draws of their own (seed 100, an experiment setting), apart from part 1's
        for seed, lens in enumerate(draw_batches(lengths, batch, seeds, seed=100)):
            attn = ATTN["dense"]
            tasks = build_tasks(groups_for(lens, "length-aware"), accel, shape, attn)
            best = cpsat_schedule(tasks, accel, time_limit_s=time_limit, workers=1, seed=0)
            check_schedule(best.schedule, accel)
            row: dict[str, object] = {
                "cores": ":".join(map(str, cores)), "draw": seed, "lengths": " ".join(map(str, lens)), "tasks": len(tasks),
                "cpsat_status": best.status, "cpsat_cycles": best.schedule.makespan, "cpsat_bound_cycles": best.bound_cycles,
                "simple_bound_cycles": lower_bound(tasks, accel), "solve_s": round(best.solve_s, 2),
            }  # fmt: skip
            for method in METHODS:
                row[f"{method}_cycles"] = schedule_batch(lens, accel, shape, attn, method).makespan
            rows.append(row)
    return rows


def q(values: list[float], fmt: str = "{:.3g}") -> str:
    """Median [10 %, 90 %]."""
    a = np.asarray(values, dtype=float)
    return f"{fmt.format(np.median(a))} [{fmt.format(np.percentile(a, 10))}, {fmt.format(np.percentile(a, 90))}]"


def render(rows: list[dict[str, str]], gaps: list[dict[str, str]], command: str, load: str, took: str) -> str:
    lines = [
        "# Issue 20 (item 2): length-aware scheduling on a cycle-level FPGA transformer accelerator model",
        "",
        f"Written by `{command}` ({took}). Machine: {platform.machine()} {os.cpu_count()}-core CPU, **shared** with other "
        f"engineers (`uptime` at the start: `{load}`). The makespans are cycle counts of the model (`sim/fpga`), so the load "
        "does not change them; it only changes how far CP-SAT gets within its time limit (part 2). Data: "
        "`schedule.csv`, `schedule_cpsat.csv` beside this file.",
        "",
        "Workload: sentences of Python's `pydoc_data` topics (4,405 sentences; length = UTF-8 bytes, the zoo LMs' tokens; "
        "median 80, 95th percentile 220, max 2,857). Each batch size draws 10 random batches (draws 0-9, "
        "`numpy.random.default_rng([0, draw])`); every scheduler gets the same batches, the same accelerator and the same "
        "list-scheduling engine (they differ in padding/grouping and priority only). Accelerator: zcu102 preset "
        "(2,520 DSP, 4 MiB on-chip, 19.2 GB/s DDR, 200 MHz), 64 PEs of 16 int8 MACs, tiles 32x64x64, lm-pydoc's shape "
        "(d=256, 4 layers, 4 heads, d_ff=1024), causal attention. Two PE splits (matmul:attention:softmax): the tool's "
        "default 4:3:1 and 12:3:1 (near what the fpga-transformer search prefers).",
        "",
        "## 1. Makespan, PE utilisation and padding waste (median [10 %, 90 %] over 10 draws)",
        "",
        "Speed-up = padding's makespan / the method's, paired per draw. Utilisation = useful lane operations / (all lanes x makespan).",
        "",
        "| split | attention | batch | method | makespan ms | speed-up vs padding | PE utilisation | padding waste |",
        "|---|---|---:|---|---|---|---|---|",
    ]
    key = lambda r: (r["split"], r["attention"], int(r["batch"]), int(r["draw"]))  # noqa: E731
    pad = {key(r): float(r["makespan_cycles"]) for r in rows if r["method"] == "padding"}
    groups: dict[tuple[str, str, int, str], list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault((r["split"], r["attention"], int(r["batch"]), r["method"]), []).append(r)
    for (split, attn, batch, method), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2], METHODS.index(kv[0][3]))):
        speed = [pad[key(r)] / float(r["makespan_cycles"]) for r in rs]
        lines.append(
            f"| {split} | {attn} | {batch} | {method} | {q([float(r['makespan_ms']) for r in rs])} | {q(speed, '{:.2f}')} | "
            f"{q([float(r['pe_utilization']) for r in rs], '{:.2f}')} | {q([float(r['padding_waste']) for r in rs], '{:.2f}')} |"
        )
    la_rows = [r for r in rows if r["method"] == "length-aware"]
    at_bound = sum(r["makespan_cycles"] == r["lower_bound_cycles"] for r in la_rows)
    worst_la = max(float(r["makespan_cycles"]) / float(r["lower_bound_cycles"]) - 1 for r in la_rows)
    la = [pad[key(r)] / float(r["makespan_cycles"]) for r in rows if r["method"] == "length-aware"]
    bu = {key(r): float(r["makespan_cycles"]) for r in rows if r["method"] == "bucketing"}
    over_bucket = [bu[key(r)] / float(r["makespan_cycles"]) for r in rows if r["method"] == "length-aware"]
    fifo = {key(r): float(r["makespan_cycles"]) for r in rows if r["method"] == "fifo"}
    rank_vs_fifo = [fifo[key(r)] / float(r["makespan_cycles"]) for r in rows if r["method"] == "length-aware"]
    lines += [
        "",
        f"Over all {len(la)} (split, attention, batch, draw) cases: length-aware vs padding {q(la, '{:.2f}')}x, vs bucketing "
        f"{q(over_bucket, '{:.2f}')}x; the upward rank vs FIFO order (the ablation) {q(rank_vs_fifo, '{:.3f}')}x.",
        "",
        "## 2. Gap to the CP-SAT bound on small instances",
        "",
        "4 pydoc sentences (draws 0-5 of `default_rng([100, draw])`), lm-pydoc-tiny's shape (d=64, 2 layers, 2 heads), dense "
        "causal attention, 64 PEs split 6:1:1, one core per engine or two matmul and two attention cores; CP-SAT (OR-Tools, "
        "1 worker, the upward-rank schedule as hint) under the time limit. Gap = (method - CP-SAT bound) / method.",
        "",
        "| cores | draw | lengths | tasks | CP-SAT | bound | status | length-aware / CP-SAT best | length-aware gap | FIFO gap "
        "| bucketing gap | padding gap |",
        "|---|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for g in gaps:
        bound = float(g["cpsat_bound_cycles"])
        gap = {m: (float(g[f"{m}_cycles"]) - bound) / float(g[f"{m}_cycles"]) for m in METHODS}
        lines.append(
            f"| {g['cores']} | {g['draw']} | {g['lengths']} | {g['tasks']} | {g['cpsat_cycles']} | {g['cpsat_bound_cycles']} | "
            f"{g['cpsat_status']} | {float(g['length-aware_cycles']) / float(g['cpsat_cycles']):.3f} | "
            f"{gap['length-aware']:.1%} | {gap['fifo']:.1%} | {gap['bucketing']:.1%} | {gap['padding']:.1%} |"
        )
    la_best = [float(g["length-aware_cycles"]) / float(g["cpsat_cycles"]) for g in gaps]
    la_gap = [(float(g["length-aware_cycles"]) - float(g["cpsat_bound_cycles"])) / float(g["length-aware_cycles"]) for g in gaps]
    lines += [
        "",
        f"Length-aware gap to the bound: median {np.median(la_gap):.1%}, max {max(la_gap):.1%} over {len(gaps)} instances; "
        f"length-aware / CP-SAT's best schedule: median {np.median(la_best):.3f}, max {max(la_best):.3f}. "
        "Where CP-SAT stops at `feasible` the gap mixes the list scheduler's loss with CP-SAT's unproved bound (the time "
        "limit runs on a shared machine). With 4 sentences and 4 buckets, bucketing is one sentence per bucket: the same "
        "groups as length-aware, hence the same numbers.",
        "",
        "## What this shows and what it does not",
        "",
        "- Removing padding is where the gain comes from: on these real sentence lengths a padded lockstep batch spends most of "
        "its lane operations on padding, bucketing a good part of it; the length-aware scheduler spends none. The speed-up "
        "grows with the batch (the batch maximum moves further from the median).",
        "- The upward-rank priority itself adds little over FIFO order on full batches: with 64 PEs the matmul engine is the "
        "bottleneck and any non-delay order keeps it busy: the length-aware schedule meets the simple lower bound (critical "
        f"path or busiest engine's load) in {at_bound} of {len(la_rows)} cases and is within {worst_la:.2%} of it in all. "
        "On the small CP-SAT instances (4 sentences) the order matters: FIFO is clearly worse than the rank, and CP-SAT "
        f"finds shorter schedules than the rank's (the rank's is up to {max(la_best):.3f}x CP-SAT's best); its bounds are "
        "rarely proved within the time limit, so the true optimum lies between the two columns.",
        "- Top-k attention hardly changes the makespan at these lengths (sentences are mostly shorter than a few hundred bytes, "
        "and the low-bit pre-score is still quadratic); its linear part pays on long sequences (see sim/attention's figures).",
        "- **Not checked here: the published 80.2x over CPU, 2.6x over GPU and 4x energy efficiency.** This is one modelled "
        "accelerator compared with itself under other schedules; there is no CPU/GPU baseline of the same model at the "
        "paper's scale, no FPGA synthesis (clock, resource use) and no power model, so none of those three numbers appears or "
        "is contradicted by these figures.",
        "",
    ]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    """The figure's options (the accelerator, the models and the bucketing are the family's: ``FpgaConfig``)."""
    ap = figure_parser(NAME, __doc__)
    # 10, not FpgaConfig.draws (5): the committed figure's experiment setting
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--batches", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--cpsat-seeds", type=int, default=6)
    ap.add_argument("--cpsat-batch", type=int, default=4)
    ap.add_argument("--time-limit", type=float, default=20.0)
    return ap


def main(argv: Sequence[str] | None = None) -> None:
    """Measure (unless ``--report-only``) and render schedule.md."""
    args = parser().parse_args(argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    meta_path = out / "schedule_run.json"
    command = command_line(NAME, argv)
    if not args.report_only:
        load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
        began = time.perf_counter()
        write_csv(out / "schedule.csv", run_batches(args.batches, args.draws), command=command)
        write_csv(out / "schedule_cpsat.csv", run_cpsat(args.cpsat_seeds, args.time_limit, args.cpsat_batch), command=command)
        meta = {"load": load, "took": f"{time.perf_counter() - began:.0f} s", "command": command}
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    meta = json.loads(meta_path.read_text())
    md = render(read_csv(out / "schedule.csv"), read_csv(out / "schedule_cpsat.csv"), meta["command"], meta["load"], meta["took"])
    print(write_markdown(out / "schedule.md", md, command))
