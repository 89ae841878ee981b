"""Issue 8 figures: GT routings on an 8x8 SDM mesh with best-effort latency, XY saturation, simulator speed.

    python -m coevo.figures noc [--out docs/bench/noc] [--seeds 3] [--cycles 20000]
    python -m coevo.figures noc --report-only     # the tables again from the saved mesh-runs.csv

Simulates every (traffic, load, routing) point and the XY saturation sweep once per seed and
writes ``mesh-runs.csv`` (one row per simulation) and the plots ``noc-mesh8-uniform.png`` and
``noc-mesh8-hotspot.png`` into ``--out``; then renders the tables from the CSV into the marked
mesh section of ``issue8-noc.md`` there. Every number is a median over the seeds (the page's
convention since issue 8); the GT-routing comparison with intervals and paired differences is
``python -m coevo.figures noc-bee``, the Benes curves ``noc-benes``, the energy-aware
compression ``noc-energy``. Everything is simulated (sim/noc/mesh.py), not measured hardware.
The GT-mix runs last ``--cycles // 2`` cycles, the saturation runs ``--cycles // 4``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from coevo.figures._common import command_line, figure_parser, read_csv, splice_block, write_csv
from coevo.sim.noc.config import NOC
from coevo.sim.noc.curves import plot_curves
from coevo.sim.noc.mesh import ROUTINGS as MESH_ROUTINGS
from coevo.sim.noc.mesh import MeshResult, simulate_mesh

NAME = "noc"
GT_SHARE = 0.5
"""Share of the load in GT flows: the figure's own experiment setting (``NOC.gt_share`` is 0.3)."""
TRAFFIC = ("uniform", "hotspot")
LOADS = (0.2, 0.4, 0.6)
SATURATION_LOADS = (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)
"""Offered loads of the XY sweep (uniform best-effort traffic only), around the bisection bound 4/k = 0.5."""
RUNS_CSV = "mesh-runs.csv"
PAGE = "issue8-noc.md"
MARKER = "noc_figures:mesh"
"""The marker of the block this figure writes into its pages."""
MESH_COLUMNS = (
    ("gt_acceptance", ".3f"),
    ("gt_violations", "g"),
    ("gt_latency_p50", ".1f"),
    ("gt_latency_p99", ".1f"),
    ("gt_setup_mean", ".1f"),
    ("mean_delay", ".1f"),
    ("p99_delay", ".0f"),
    ("throughput", ".3f"),
)
"""The mesh tables' columns after load and routing: the CSV column and its format."""
TEXT_COLUMNS = ("experiment", "topology", "routing", "traffic", "stopped_early")


def _runs(seeds: int, cycles: int) -> list[tuple[str, dict[str, Any]]]:
    """Every simulation of the figure: (experiment, keyword arguments of :func:`simulate_mesh`)."""
    runs = [
        ("gt-mix", {"routing": r, "load": x, "gt_share": GT_SHARE, "traffic": t, "cycles": cycles // 2, "seed": s})
        for t in TRAFFIC
        for x in LOADS
        for r in MESH_ROUTINGS
        for s in range(seeds)
    ]
    runs += [
        ("xy-saturation", {"routing": "xy", "load": x, "gt_share": 0.0, "traffic": "uniform", "cycles": cycles // 4, "seed": s})
        for x in SATURATION_LOADS
        for s in range(seeds)
    ]
    return runs


def simulate(seeds: int, cycles: int, out: Path, command: str) -> list[dict[str, Any]]:
    """Run every simulation, save ``mesh-runs.csv`` and the two plots; return the rows."""
    rows: list[dict[str, Any]] = []
    first_seed: dict[str, list[MeshResult]] = {t: [] for t in TRAFFIC}
    runs = _runs(seeds, cycles)
    started = time.perf_counter()
    for i, (experiment, kwargs) in enumerate(runs, 1):
        r = simulate_mesh(NOC.k, **kwargs)
        rows.append({"experiment": experiment, "seed": kwargs["seed"], **r.as_dict(), "wall_s": round(r.wall_s, 3)})
        if experiment == "gt-mix" and kwargs["seed"] == 0:
            first_seed[kwargs["traffic"]].append(r)
        print(
            f"[{i}/{len(runs)} {time.perf_counter() - started:.0f}s] {experiment} {kwargs['traffic']} load={kwargs['load']} "
            f"{kwargs['routing']} seed={kwargs['seed']}: {r.cycles_per_s:.0f} cycles/s",
            file=sys.stderr,
        )
    write_csv(out / RUNS_CSV, rows, command=command)
    for traffic, curves in first_seed.items():
        # one seed's curves per plot (seed 0): a plot of medians would mix runs; the tables give the medians
        plot_curves(curves, f"8x8 SDM mesh, {traffic} traffic, 50% GT (seed 0)", out / f"noc-mesh8-{traffic}.png")
    return rows


def load_rows(out: Path) -> list[dict[str, Any]]:
    """The saved rows of ``mesh-runs.csv``, numbers as floats."""
    path = out / RUNS_CSV
    if not path.exists():
        raise SystemExit(f"{path} is missing: run `python -m coevo.figures {NAME}` without --report-only first")
    return [{k: (v if k in TEXT_COLUMNS else float(v)) for k, v in row.items()} for row in read_csv(path)]


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(r[key]) for r in rows)


def _mesh_table(rows: list[dict[str, Any]], traffic: str) -> list[str]:
    lines = [
        f"### 8x8 SDM mesh (4 sub-channels per link, 4-flit BE packets, {traffic} traffic, 50 % of the load GT)",
        "",
        "| load | routing | GT acceptance | GT violations | GT latency p50 | GT p99 | set-up | BE mean latency | BE p99 | BE thr |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    mix = [r for r in rows if r["experiment"] == "gt-mix"]
    for load in LOADS:
        for routing in MESH_ROUTINGS:
            point = [r for r in mix if r["traffic"] == traffic and r["offered_load"] == load and r["routing"] == routing]
            if not point:
                continue
            cells = [f"{_median(point, key):{spec}}" for key, spec in MESH_COLUMNS]
            lines.append(f"| {load:g} | {routing} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _saturation_table(rows: list[dict[str, Any]]) -> list[str]:
    sweep = [r for r in rows if r["experiment"] == "xy-saturation"]
    if not sweep:
        return []
    zero = _median(sweep, "be_zero_load_latency_uniform")
    lines = ["XY saturation, uniform BE traffic only (8x8, 4 sub-channels):", "", "| load | throughput | mean latency |", "|---|---|---|"]
    saturated: float | None = None
    best = 0.0
    for load in sorted({float(r["offered_load"]) for r in sweep}):
        point = [r for r in sweep if r["offered_load"] == load]
        thr, delay = _median(point, "throughput"), _median(point, "mean_delay")
        best = max(best, thr)
        if saturated is None and (delay != delay or delay > 3 * zero):
            saturated = load
        lines.append(f"| {load:g} | {thr:.3f} | {delay:.1f} |")
    bound = _median(sweep, "xy_saturation_bound_uniform")
    at = f"at load {saturated:g}" if saturated is not None else "not reached in the sweep"
    lines += [
        "",
        f"Saturation (median mean latency > 3x zero-load {zero:.3f} cycles) {at}; bisection bound 4/k = {bound:g}; "
        f"highest delivered throughput {best:.3f}.",
        "",
    ]
    return lines


def render(rows: list[dict[str, Any]], command: str) -> str:
    """The page's mesh section from the saved rows."""
    seeds = sorted({int(r["seed"]) for r in rows})
    cycles = {r["experiment"]: int(r["cycles"]) for r in rows}
    speeds = [float(r["cycles_per_s"]) for r in rows]
    lines = [
        f"Rendered by `{command}` from {RUNS_CSV} (its run: provenance.json). Seeds {seeds[0]}-{seeds[-1]}, medians over seeds; "
        f"{cycles.get('gt-mix', 0):,} cycles a GT-mix point, {cycles.get('xy-saturation', 0):,} a saturation point. GT latency: cycles "
        "from a flit's production to its arrival, including the wait for set-up; set-up: cycles from request to reservation; "
        "BE: best-effort packets. The GT comparison with intervals is bee.md.",
        "",
    ]
    for traffic in TRAFFIC:
        lines += _mesh_table(rows, traffic)
    lines += _saturation_table(rows)
    lines.append(
        f"Simulator speed, 8x8 mesh: median {statistics.median(speeds):,.0f} simulated cycles/s over the {len(speeds)} runs "
        "(the machine and its load when they ran: provenance.json)."
    )
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    """The figure's options; the run length is the family's ``NOC.benes_cycles`` (the mesh runs halves and quarters of it)."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--cycles", type=int, default=NOC.benes_cycles)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Simulate (unless ``--report-only``), save the runs, and render the mesh section of issue8-noc.md."""
    args = parser().parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    given = sys.argv[1:] if argv is None else argv
    command = command_line(NAME, [a for a in given if a != "--report-only"])
    rows = load_rows(args.out) if args.report_only else simulate(args.seeds, args.cycles, args.out, command)
    section = render(rows, command)
    page = args.out / PAGE
    if page.exists():
        splice_block(page, MARKER, section)
    print(section)
    return 0
