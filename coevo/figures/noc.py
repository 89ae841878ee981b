"""Issue 8 figures: GT routings on an 8x8 mesh, XY saturation, simulator speed.

The Benes load curves moved to python -m coevo.figures noc-benes with issue 18's model (set-up latency, ACK, holding).
The energy-aware compression figures are python -m coevo.figures noc-energy (issue 18).
The fair bee-QoS comparison (5 seeds, 95 % intervals, GT latency and jitter) is python -m coevo.figures noc-bee (issue 18).

    python -m coevo.figures noc [--out docs/bench] [--seeds 3] [--cycles 20000]

Prints markdown; writes noc-mesh8-uniform.png and noc-mesh8-hotspot.png into ``--out``.
Every number is a median over ``--seeds`` seeds unless said otherwise.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path

from coevo.figures._common import figure_parser
from coevo.sim.noc.common import NocResult
from coevo.sim.noc.config import NOC
from coevo.sim.noc.curves import AnyResult, plot_curves, saturation
from coevo.sim.noc.mesh import ROUTINGS as MESH_ROUTINGS
from coevo.sim.noc.mesh import simulate_mesh

NAME = "noc"
GT_SHARE = 0.5
"""Share of the load in GT flows: the figure's own experiment setting (``NOC.gt_share`` is 0.3)."""


def _median_result(runs: list[AnyResult]) -> AnyResult:
    """A result whose numbers are the medians of ``runs`` (same configuration, different seeds)."""
    first = runs[0]
    med: Callable[[Callable[[AnyResult], float]], float] = lambda f: statistics.median(f(r) for r in runs)  # noqa: E731
    numeric = [f.name for f in fields(first.stats) if isinstance(getattr(first.stats, f.name), int | float)]
    stats = replace(first.stats, **{name: statistics.median(getattr(r.stats, name) for r in runs) for name in numeric})
    return NocResult(
        first.config,
        first.cycles,
        first.offered_load,
        int(med(lambda r: r.delivered_packets)),
        med(lambda r: r.throughput),
        med(lambda r: r.mean_delay),
        med(lambda r: r.p99_delay),
        med(lambda r: r.wall_s),
        stats,
    )


def mesh(out: Path, seeds: int, cycles: int) -> None:
    every: list[AnyResult] = []
    for traffic in ("uniform", "hotspot"):
        curves: list[AnyResult] = []
        print(f"### 8x8 SDM mesh (4 sub-channels per link, 4-flit BE packets, {traffic} traffic, 50 % of the load GT)\n")
        print("| load | routing | GT acceptance | GT violations | GT latency p50 | GT p99 | set-up | BE mean latency | BE p99 | BE thr |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for load in (0.2, 0.4, 0.6):
            for routing in MESH_ROUTINGS:
                r = _median_result(
                    [
                        simulate_mesh(NOC.k, routing=routing, load=load, gt_share=GT_SHARE, traffic=traffic, cycles=cycles // 2, seed=s)
                        for s in range(seeds)
                    ]
                )
                curves.append(r)
                print(
                    f"| {load} | {routing} | {r.stats.gt_acceptance:.3f} | {r.stats.gt_violations:g} | {r.stats.gt_latency_p50:g} | "
                    f"{r.stats.gt_latency_p99:g} | {r.stats.gt_setup_mean:.1f} | {r.mean_delay:.1f} | "
                    f"{r.p99_delay:.0f} | {r.throughput:.3f} |"
                )
        print()
        plot_curves(curves, f"8x8 SDM mesh, {traffic} traffic, 50% GT (median of {seeds} seeds)", out / f"noc-mesh8-{traffic}.png")
        every += curves
    print("\nXY saturation, uniform BE traffic only (8x8, 4 sub-channels):\n")
    rows = [
        _median_result([simulate_mesh(NOC.k, routing="xy", load=x, gt_share=0.0, cycles=cycles // 4, seed=s) for s in range(seeds)])
        for x in (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)
    ]
    zero = rows[0].stats.zero_load
    sat = saturation(rows, zero)
    print("| load | throughput | mean latency |\n|---|---|---|")
    for r in rows:
        print(f"| {r.offered_load} | {r.throughput:.3f} | {r.mean_delay:.1f} |")
    print(
        f"\nSaturation (mean latency > 3x zero-load {zero:g} cycles) at load {sat}; bisection bound 4/k = "
        f"{rows[0].stats.xy_saturation_bound_uniform}; highest delivered throughput {max(r.throughput for r in rows):.3f}."
    )
    speeds = [r.cycles / r.wall_s for r in every + rows]
    print(f"\nSimulator speed 8x8 mesh: median {statistics.median(speeds):,.0f} simulated cycles/s.\n")


def compression(seeds: int) -> None:
    """The compression figures moved to python -m coevo.figures noc-energy (issue 18), which also rewrites this page's section."""
    print(f"### Energy-aware compression\n\nRun `python -m coevo.figures noc-energy --seeds {seeds}` (docs/bench/noc/energy.md).\n")


def parser() -> argparse.ArgumentParser:
    """The figure's options; the run length is the family's ``NOC.benes_cycles`` (the mesh runs halves and quarters of it)."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--cycles", type=int, default=NOC.benes_cycles)
    ap.add_argument("--only", choices=("benes", "mesh", "compression"), default=None)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Simulate the mesh and print its tables (no saved data: ``--report-only`` is refused)."""
    ap = parser()
    args = ap.parse_args(argv)
    if args.report_only:
        ap.error("noc prints its tables from a fresh simulation and saves no data to re-render from")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "benes"):  # issue 18 changed the Benes model; its figures have their own script
        print("Benes figures: python -m coevo.figures noc-benes (docs/bench/noc/, the Benes section of issue8-noc.md)\n")
    if args.only in (None, "mesh"):
        mesh(args.out, args.seeds, args.cycles)
    if args.only in (None, "compression"):
        compression(args.seeds)
    return 0
