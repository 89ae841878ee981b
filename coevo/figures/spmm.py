"""SpMM figures (issues 19, 30): degree-block variants, each naming Accel-GCN's parts, vs naive / scipy / torch.sparse.

Writes docs/bench/spmm/spmm.csv (one row per graph, width, thread count and method),
spmm-tuning.csv (the short searches' evaluations), spmm-run.json (loads before and after, the
duration) and spmm.md (tables built from those files), all from one run.

    python -m coevo.figures spmm                      # full run (1e5..1e7 edges)
    python -m coevo.figures spmm --sizes 100k --repeats 3 --budget 6   # quick check

Variants of the degree-block kernel, by Accel-GCN's three parts (1 degree sorting, 2 block-level
partition, 3 combined column strategy): ``degree-block`` (the defaults: 1 and 2, every column of
a row in one work unit), ``blocks-unsorted`` (2 only), ``combined-w16`` (1, 2 and 3 with 16
columns per work unit), and ``tuned`` (what a short ``spmm`` search picked at that width).

Tuning: at each reported width, a ``spmm`` search (pelnas, offline reasoner) on rmat-1m@1 (R-MAT
seed 1) picks the parameters, ``width`` among them; they are then timed at that same width on the
seed-0 graphs (graphs the search never saw), beside the defaults, in the same interleaved rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numba
import numpy as np
import optuna
import torch

from coevo.figures._common import command_line, figure_parser, read_numbers, write_csv, write_markdown
from coevo.search.runner import run_search
from coevo.search.spmm.problem import SpmmProblem
from coevo.sim.graph.bench import METHODS, benchmark
from coevo.sim.graph.config import SpmmConfig
from coevo.sim.graph.generators import load_graph
from coevo.sim.graph.spmm import BlockParams, spmm_naive

NAME = "spmm"

BASELINES = ("naive", "scipy", "torch")
TUNE_GRAPH = f"{SpmmConfig.search_graph}@1"
"""The tuning search's graph: the family's search graph drawn with R-MAT seed 1, so the tuned parameters are timed on
seed-0 graphs the search never saw (an experiment setting)."""


def uptime() -> str:
    """The load line of ``uptime`` (the box is shared)."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


COMBINED_WIDTH = 16
"""Columns per work unit of the fixed ``combined`` variant (2 groups at F = 32, 8 at F = 128)."""


def variants(tuned: BlockParams | None, threads: int) -> dict[str, BlockParams]:
    """The degree-block variants timed beside the defaults (``degree-block``), at ``threads``."""
    defaults = BlockParams(threads=threads)
    out = {"blocks-unsorted": replace(defaults, sort=False), f"combined-w{COMBINED_WIDTH}": replace(defaults, width=COMBINED_WIDTH)}
    if tuned is not None:
        out["tuned"] = replace(tuned, threads=threads)
    return out


def parts(method: str, params: BlockParams | None, feature_dim: int) -> str:
    """Which of Accel-GCN's three parts a method has (1 degree sorting, 2 block partition, 3 combined columns)."""
    if params is None:
        return {"naive": "none (rows split evenly)", "scipy": "library (1 thread)", "torch": "library"}[method]
    named = ["1 sort"] if params.sort else []
    named.append("2 blocks")
    if params.width < feature_dim:
        named.append(f"3 combined ({params.width} cols/unit)")
    return ", ".join(named)


def tune(budget: int, threads: int, feature_dim: int, seed: int) -> tuple[BlockParams, list[dict[str, Any]]]:
    """A short pelnas search on rmat-1m@1 at ``feature_dim``; the design with the best measured GFLOP/s at the most threads."""
    problem = SpmmProblem(graph=TUNE_GRAPH, feature_dim=feature_dim, threads=threads, repeats=SpmmConfig.repeats)
    with tempfile.TemporaryDirectory() as folder:
        storage = f"sqlite:///{folder}/spmm.sqlite3"
        run_search(problem, "pelnas", budget=budget, storage=storage, study_name="spmm-tune", seed=seed)
        study = optuna.load_study(study_name="spmm-tune", storage=storage)
        rows = []
        for t in study.trials:
            if t.values is None or not t.user_attrs.get("query", True):
                continue
            d = problem.from_params(t.params)
            values = dict(zip([o.name for o in problem.objectives], t.values, strict=True))
            # the design's int threads, not the objective's float
            rows.append({"feature_dim": feature_dim, "trial": t.number, **values, **d._asdict()})
    return pick(rows, threads), rows


def _threading_layer() -> str:
    """numba's threading layer; the first parallel call chooses it, so a re-render (which timed nothing) makes one."""
    try:
        return str(numba.threading_layer())
    except ValueError:
        a = load_graph("rmat-100k")
        spmm_naive(a, np.zeros((a.shape[0], 8), dtype=np.float32))
        return str(numba.threading_layer())


def pick(rows: list[dict[str, Any]], threads: int) -> BlockParams:
    """The design kept from the search's rows: the best measured GFLOP/s at ``threads`` if it tried that count, else at any."""
    at_threads = [r for r in rows if r["threads"] == threads] or rows  # the baselines' thread count, if the search tried it
    best = max(at_threads, key=lambda r: r["gflops"])
    return BlockParams(
        block_work=best["block_work"], long_row=best["long_row"], width=best["width"], sort=best["sort"], threads=best["threads"]
    )


def tuned_by_width(tuning: list[dict[str, Any]], threads: int) -> dict[int, BlockParams]:
    """Per tuned width, the design :func:`pick` keeps from that width's search."""
    return {f: pick([r for r in tuning if r["feature_dim"] == f], threads) for f in sorted({int(r["feature_dim"]) for r in tuning})}


def report_only(out: Path, args: argparse.Namespace, command: str) -> None:
    """spmm.md again from spmm.csv, spmm-tuning.csv and spmm-run.json."""
    rows, tuning = read_numbers(out / "spmm.csv"), read_numbers(out / "spmm-tuning.csv")
    for r in tuning:
        r["sort"] = r["sort"] == "True"
    meta = json.loads((out / "spmm-run.json").read_text())
    write_md(out, rows, tuning, args, meta, command)


def parser() -> argparse.ArgumentParser:
    """The figure's options."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--sizes", nargs="+", default=["100k", "1m", "10m"])
    ap.add_argument("--kinds", nargs="+", default=["rmat", "ba"])
    ap.add_argument("--widths", nargs="+", type=int, default=[32, 128], help="feature widths F timed (the search tunes at each)")
    ap.add_argument("--repeats", type=int, default=7, help="timed rounds (5 for the 1e7-edge graphs)")
    ap.add_argument("--budget", type=int, default=16, help="evaluations of each tuning search")
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2], help="thread counts to time (the search tunes up to the largest)")
    return ap


def _row(name: str, kind: str, a: Any, width: int, method: str, t: Any, repeats: int, params: BlockParams | None) -> dict[str, Any]:
    bal = t.balance.get(method, {})
    return {
        "graph": name, "kind": kind, "rows": a.shape[0], "nnz": a.nnz, "max_degree": int(a.degrees.max()),
        "feature_dim": width, "method": method, "parts": parts(method, params, width), "threads": t.threads,
        "repeats": repeats, "median_ms": round(t.median_s(method) * 1e3, 3), "iqr_ms": round(t.iqr_s(method) * 1e3, 3),
        "gflops": round(t.gflops(method), 4), "max_rel_error": f"{t.max_rel_error[method]:.2g}",
        **{f"speedup_over_{b}": round(t.speedup(method, b), 3) for b in BASELINES},
        "speedup_over_degree_block": round(t.speedup(method, "degree-block"), 3),
        "block_max_over_mean": bal.get("block_max_over_mean", ""), "thread_max_over_mean": bal.get("thread_max_over_mean", ""),
        "plan_ms": round(t.plan_ms, 1) if method == "degree-block" else "",
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """Tune at each width and time (unless ``--report-only``), then write spmm.md from the files this run saved."""
    args = parser().parse_args(argv)
    out, command = args.out, command_line(NAME, argv)
    if args.report_only:
        report_only(out, args, command)
        return
    top = max(args.threads)
    out.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {"load_before": uptime(), "commit": _commit(), "threads": args.threads}
    started = time.time()
    tuning_rows: list[dict[str, Any]] = []
    for width in args.widths:
        tuned, rows_w = tune(args.budget, top, width, seed=0)
        print(f"tuned at F={width}:", tuned, flush=True)
        tuning_rows += rows_w
        write_csv(out / "spmm-tuning.csv", tuning_rows, command=command)
    tuned_at = tuned_by_width(tuning_rows, top)
    rows: list[dict[str, Any]] = []
    for size in args.sizes:
        for kind in args.kinds:
            name = f"{kind}-{size}"
            a = load_graph(name)
            print(f"{name}: {a.shape[0]} rows, {a.nnz} nnz, max degree {int(a.degrees.max())}", flush=True)
            for width, threads in [(w, n) for w in args.widths for n in args.threads]:
                extra = variants(tuned_at.get(width), threads)
                repeats = 5 if size == "10m" else args.repeats
                t = benchmark(a, width, methods=METHODS, params=BlockParams(threads=threads), repeats=repeats, seed=0, variants=extra)
                params_of = {"degree-block": BlockParams(threads=threads), **extra}
                rows += [_row(name, kind, a, width, m, t, repeats, params_of.get(m)) for m in t.times_s]
                print(f"  F={width}, {threads} thread(s): " + ", ".join(f"{m} {t.median_s(m) * 1e3:.1f} ms" for m in t.times_s), flush=True)
                write_csv(out / "spmm.csv", rows, command=command)  # rewritten as rows come: a long run keeps its partial data
    meta.update(load_after=uptime(), took=f"{(time.time() - started) / 60:.1f} min")
    (out / "spmm-run.json").write_text(json.dumps(meta) + "\n")
    write_md(out, rows, tuning_rows, args, meta, command)


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()


ORDER = ("degree-block", "blocks-unsorted", f"combined-w{COMBINED_WIDTH}", "tuned", "naive", "scipy", "torch")


def write_md(out: Path, rows: list[dict[str, Any]], tuning: list[dict[str, Any]], args: argparse.Namespace, meta: dict[str, Any],
             command: str) -> None:  # fmt: skip
    """spmm.md in ``out`` from the rows of this run (saved in spmm.csv, spmm-tuning.csv, spmm-run.json)."""
    defaults = BlockParams()
    tuned_at = tuned_by_width(tuning, max(args.threads))
    lines = [
        "# Degree-block SpMM on this CPU: Accel-GCN's parts, one run",
        "",
        f"Written by `{'OMP_WAIT_POLICY=' + os.environ['OMP_WAIT_POLICY'] + ' ' if 'OMP_WAIT_POLICY' in os.environ else ''}"
        f"{command.replace(' --report-only', '')}` from `spmm.csv`, `spmm-tuning.csv` and `spmm-run.json`, all from one run "
        f"(commit {meta['commit']}, {meta['took']}).",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
        f"(`uptime` before: `{meta['load_before']}`; after: `{meta['load_after']}`). numba {numba.__version__} "
        f"(threading layer `{_threading_layer()}`) with the thread count of each row, torch {torch.__version__} with as "
        "many intra-op threads, scipy single-threaded (its CSR @ dense has no thread option). float32, X ~ N(0, 1) seed 0.",
        "",
        "Each cell: median of the timed rounds after one warm-up call per method (JIT compile and first allocation "
        "excluded); in every round each method runs once, in a fresh random order, and speedups are medians of the "
        "per-round ratios (paired). The degree-block plan (built once per matrix and width) is not in the time "
        "(`plan_ms` in the CSV). GFLOP/s = 2 nnz F / median time. R-MAT: Graph500 (0.57, 0.19, 0.19, 0.05), edge factor "
        "16, vertex ids permuted; BA: m = 8, symmetric.",
        "",
        "Accel-GCN's parts: **1** degree sorting, **2** block-level partition (blocks of balanced work, long rows "
        f"split), **3** combined column strategy (a work unit is a block and a group of `width` feature columns). Defaults "
        f"(`degree-block`): block_work {defaults.block_work}, long_row {defaults.long_row}, width {defaults.width} (all "
        f"columns), sort {defaults.sort}, schedule {defaults.schedule}.",
        "",
    ]
    by = {(r["graph"], r["feature_dim"], r["threads"], r["method"]): r for r in rows}
    cases = {(r["graph"], r["feature_dim"], r["threads"]) for r in rows}
    keys = sorted(cases, key=lambda k: (k[0].split("-")[0], _nnz(rows, k[0]), k[1], k[2]))
    for fdim in sorted({k[1] for k in keys}):
        lines += [
            f"## F = {fdim}",
            "",
            "| graph | threads | method | paper parts | GFLOP/s | vs naive | vs scipy | vs torch | vs degree-block | thread max/mean |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for g, f, nt in (k for k in keys if k[1] == fdim):
            for m in (m for m in ORDER if (g, f, nt, m) in by):
                r = by[(g, f, nt, m)]
                vs = [f"{r[f'speedup_over_{b}']:.2f}x" for b in (*BASELINES, "degree_block")]
                balance = r["thread_max_over_mean"] or "-"
                lines.append(f"| {g} | {nt} | {m} | {r['parts']} | {r['gflops']:.2f} | {' | '.join(vs)} | {balance} |")
        lines.append("")
    lines += _goal(by, keys) + _ranges(rows) + _tuning(tuning, tuned_at, args)
    write_markdown(out / "spmm.md", "\n".join(lines) + "\n", command)


LARGE_NNZ = 1_000_000
"""The graphs issue 19's goal and the speedup ranges are about: at least this many edges."""


def _goal(by: dict[tuple[Any, ...], dict[str, Any]], keys: list[tuple[Any, ...]]) -> list[str]:
    """Issue 19's goal: the best degree-block variant >= 1.2x over the best baseline on power-law graphs at >= 1e6 edges."""
    verdicts = []
    for g, fdim, nt in keys:
        if by[(g, fdim, nt, "degree-block")]["nnz"] < LARGE_NNZ:
            continue
        base = max(BASELINES, key=lambda b: by[(g, fdim, nt, b)]["gflops"])
        ours = max((m for m in ORDER[:4] if (g, fdim, nt, m) in by), key=lambda m: by[(g, fdim, nt, m)]["gflops"])
        verdicts.append((f"{g} F={fdim} {nt}t", by[(g, fdim, nt, ours)][f"speedup_over_{base}"], ours, base))
    met = [v for v in verdicts if v[1] >= 1.2]
    return [
        "## Issue 19's goal: >= 1.2x over the best baseline on power-law graphs at >= 1e6 edges",
        "",
        f"The fastest degree-block variant of each case against the fastest baseline: met in {len(met)} of {len(verdicts)} cases"
        + (": " + ", ".join(f"{k} ({s:.2f}x, {m} over {b})" for k, s, m, b in met) if met else "")
        + ". Not met: "
        + (", ".join(f"{k} ({s:.2f}x, {m} over {b})" for k, s, m, b in verdicts if s < 1.2) or "none")
        + ".",
        "",
    ]


RANGES = (
    ("degree-block", "scipy"),
    ("degree-block", "torch"),
    ("degree-block", "naive"),
    (f"combined-w{COMBINED_WIDTH}", "degree_block"),
    ("blocks-unsorted", "degree_block"),
    ("tuned", "degree_block"),
)
"""The (variant, reference) pairs whose speedup ranges at >= 1e6 edges the page lists (docs/kernels.md quotes them)."""


def _ranges(rows: list[dict[str, Any]]) -> list[str]:
    """Min-max of each :data:`RANGES` speedup over the cases at >= 1e6 edges (graphs x threads), per width and over all."""
    big = [r for r in rows if int(r["nnz"]) >= LARGE_NNZ]
    widths = sorted({int(r["feature_dim"]) for r in big})
    lines = [
        "## Speedup ranges at >= 1e6 edges",
        "",
        "Lowest-highest paired speedup of a variant over a reference across the graphs and thread counts at >= 1e6 edges "
        "(from the tables above).",
        "",
        "| variant | over | " + " | ".join(f"F = {f}" for f in widths) + " | all | cases |",
        "|---|---|" + "---|" * len(widths) + "---|---|",
    ]
    for method, ref in RANGES:
        mine = [r for r in big if r["method"] == method]
        if not mine:
            continue
        cells = []
        for f in [*widths, None]:
            vals = [float(r[f"speedup_over_{ref}"]) for r in mine if f is None or int(r["feature_dim"]) == f]
            cells.append(f"{min(vals):.2f}-{max(vals):.2f}x" if vals else "-")
        lines.append(f"| {method} | {ref.replace('_', '-')} | {' | '.join(cells)} | {len(mine)} |")
    return [*lines, ""]


def _tuning(tuning: list[dict[str, Any]], tuned_at: dict[int, BlockParams], args: argparse.Namespace) -> list[str]:
    lines = [
        "## Tuned parameters (a short `spmm` search per width)",
        "",
        f"`spmm` search, proposer pelnas (offline reasoner), budget {args.budget}, on **{TUNE_GRAPH}** (R-MAT seed 1) at each "
        f"width F, up to {max(args.threads)} threads, {SpmmConfig.repeats} timed runs per design; `width` (columns per "
        "work unit) is one of the searched parameters. Kept: the best design at the most threads where the search tried "
        "one. The `tuned` rows above time it at its own F on seed-0 graphs the search never saw.",
        "",
        "| F | block_work | long_row | width | sort | found at threads | GFLOP/s in the search | evaluations |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f, p in tuned_at.items():
        mine = [r for r in tuning if r["feature_dim"] == f]
        best = max(r["gflops"] for r in mine if r["threads"] == p.threads)
        lines.append(f"| {f} | {p.block_work} | {p.long_row} | {p.width} | {p.sort} | {p.threads} | {best:.2f} | {len(mine)} |")
    return [*lines, ""]


def _nnz(rows: list[dict[str, Any]], graph: str) -> int:
    return next(int(r["nnz"]) for r in rows if r["graph"] == graph)
