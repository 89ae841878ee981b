"""Issue 18 figures: GT routing on the 8x8 SDM mesh, distributed bee foraging vs widest-shortest, k-shortest, XY, adaptive.

    python -m coevo.figures noc-bee [--out docs/bench/noc] [--seeds 5] [--cycles 6000]
    python -m coevo.figures noc-bee --report-only     # the tables again from the saved bee-runs.csv (same --seeds, --cycles)

Writes ``bee-runs.csv`` (one row per simulation), ``bee-summary.csv`` (mean and 95 % interval over
seeds per traffic, load and routing), ``bee-paired.csv`` (bee-qos minus each baseline, paired
by seed: every routing sees the same requests for a seed) and ``bee.md`` into ``--out``, and
rewrites the marked mesh headline blocks of issue8-noc.md in ``--out`` and, when ``--out`` is the checkout's
docs/bench/noc, of docs/noc.md.
Everything is simulated (sim/noc/mesh.py), not measured hardware.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from scipy import stats as scistats

from coevo.figures import get
from coevo.figures._common import CHECKOUT, command_line, figure_parser, out_dir, read_csv, splice_block, write_csv, write_markdown
from coevo.sim.noc.config import NOC
from coevo.sim.noc.mesh import simulate_mesh

NAME = "noc-bee"

ROUTINGS = ("xy", "adaptive", "widest-shortest", "k-shortest", "bee-qos")
BASELINES = ("widest-shortest", "k-shortest", "xy", "adaptive")
TRAFFIC = ("uniform", "hotspot")
LOADS = (0.2, 0.4, 0.6)
GT_SHARE = 0.5
"""Share of the offered load in GT flows: the figure's own experiment setting (``NOC.gt_share`` is 0.3)."""
SETUP: dict[str, Any] = {
    "k": NOC.k,
    "subchannels": NOC.subchannels,
    "packet_flits": NOC.mesh_packet_flits,
    "gt_share": GT_SHARE,
    "gt_width": NOC.gt_width,
    "gt_hold": NOC.gt_hold,
    "gt_fill": NOC.gt_fill,
}
"""The mesh every routing runs on: the family's, but for the GT share."""
METRICS = (
    ("gt_acceptance", "GT acceptance"),
    ("gt_latency_mean", "GT latency mean"),
    ("gt_latency_p50", "GT latency p50"),
    ("gt_latency_p99", "GT latency p99"),
    ("gt_jitter", "GT jitter p99-p50"),
    ("gt_latency_std", "GT latency std"),
    ("gt_setup_mean", "set-up mean"),
    ("gt_setup_p99", "set-up p99"),
    ("mean_delay", "BE mean latency"),
    ("p99_delay", "BE p99"),
    ("throughput", "BE throughput"),
    ("control_flits_per_node_cycle", "control flit-hops/node/cycle"),
    ("bee_flits", "bee flit-hops"),
    ("gt_violations", "violations"),
)
PAIRED = ("gt_acceptance", "gt_latency_mean", "gt_jitter", "gt_setup_mean", "mean_delay")
MARKER = "bee_figures:headline"
"""The marker of the block this figure writes into its pages."""


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % t-interval (0 for a single value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, float(scistats.t.ppf(0.975, len(values) - 1)) * statistics.stdev(values) / math.sqrt(len(values))


def fmt(mean: float, half: float, digits: int) -> str:
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def simulate(seeds: int, cycles: int, out: Path, command: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    total = len(TRAFFIC) * len(LOADS) * len(ROUTINGS) * seeds
    started = time.perf_counter()
    for traffic in TRAFFIC:
        for load in LOADS:
            for routing in ROUTINGS:
                for seed in range(seeds):
                    r = simulate_mesh(routing=routing, traffic=traffic, load=load, cycles=cycles, seed=seed, **SETUP).as_dict()
                    rows.append({"seed": seed, **r})
                    print(
                        f"[{len(rows)}/{total} {time.perf_counter() - started:.0f}s] {traffic} load={load} {routing} seed={seed}: "
                        f"accept {r['gt_acceptance']:.3f} GT p50/p99 {r['gt_latency_p50']:g}/{r['gt_latency_p99']:g} "
                        f"setup {r['gt_setup_mean']:.1f} BE {r['mean_delay']:.1f}",
                        file=sys.stderr,
                    )
    write_csv(out / "bee-runs.csv", rows, command=command)
    return rows


def load_rows(out: Path) -> list[dict[str, Any]]:
    return [
        {k: (v if k in ("topology", "routing", "traffic", "stopped_early") else float(v)) for k, v in row.items()}
        for row in read_csv(out / "bee-runs.csv")
    ]


def summarise(rows: list[dict[str, Any]], out: Path) -> dict[tuple[str, float, str], dict[str, tuple[float, float]]]:
    table: dict[tuple[str, float, str], dict[str, tuple[float, float]]] = {}
    for traffic in TRAFFIC:
        for load in LOADS:
            for routing in ROUTINGS:
                runs = [r for r in rows if r["traffic"] == traffic and float(r["offered_load"]) == load and r["routing"] == routing]
                if runs:
                    table[traffic, load, routing] = {m: interval([float(r[m]) for r in runs]) for m, _ in METRICS}
    with (out / "bee-summary.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["traffic", "load", "routing", "seeds", *[f"{m}_{s}" for m, _ in METRICS for s in ("mean", "ci95")]])
        for (traffic, load, routing), values in table.items():
            n = sum(1 for r in rows if r["traffic"] == traffic and float(r["offered_load"]) == load and r["routing"] == routing)
            writer.writerow([traffic, load, routing, n, *[f"{v:.6g}" for m, _ in METRICS for v in values[m]]])
    return table


def paired(rows: list[dict[str, Any]], out: Path) -> dict[tuple[str, float, str, str], tuple[float, float]]:
    """bee-qos minus each baseline per seed (same requests), mean and 95 % interval of the difference."""
    diffs: dict[tuple[str, float, str, str], tuple[float, float]] = {}
    by = {(r["traffic"], float(r["offered_load"]), r["routing"], int(r["seed"])): r for r in rows}
    seeds = sorted({int(r["seed"]) for r in rows})
    for traffic in TRAFFIC:
        for load in LOADS:
            for base in BASELINES:
                for metric in PAIRED:
                    d = [float(by[traffic, load, "bee-qos", s][metric]) - float(by[traffic, load, base, s][metric]) for s in seeds]
                    diffs[traffic, load, base, metric] = interval(d)
    with (out / "bee-paired.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["traffic", "load", "baseline", "metric", "bee_minus_baseline_mean", "ci95"])
        for (traffic, load, base, metric), (m, h) in diffs.items():
            writer.writerow([traffic, load, base, metric, f"{m:.6g}", f"{h:.6g}"])
    return diffs


def verdict(m: float, h: float, higher_is_better: bool) -> str:
    if abs(m) <= h:
        return "no significant difference"
    better = (m > 0) == higher_is_better
    return "bee better" if better else "bee worse"


def bee_markdown(
    table: dict[tuple[str, float, str], dict[str, tuple[float, float]]],
    diffs: dict[tuple[str, float, str, str], tuple[float, float]],
    seeds: int,
    cycles: int,
    out: Path,
    command: str,
) -> str:
    """bee.md in ``out``; returns its headline (spliced into docs/noc.md and issue8-noc.md)."""
    cmd = f"python -m coevo.figures noc-bee --out {out.as_posix()} --seeds {seeds} --cycles {cycles}"
    lines = [
        "# Issue 18: bee QoS routing on the SDM mesh (simulated)",
        "",
        f"`{cmd}` (seeds 0-{seeds - 1}; each cell mean ± half-width of the 95 % t-interval over the seeds). Written by the "
        "script from bee-runs.csv / bee-summary.csv / bee-paired.csv next to this file. "
        "Simulated (sim/noc/mesh.py), not measured hardware.",
        "",
        f"Set-up: {SETUP['k']}x{SETUP['k']} mesh, {SETUP['subchannels']} sub-channels per link, GT flows of {SETUP['gt_width']} "
        f"sub-channel, mean lifetime {SETUP['gt_hold']} cycles, sending {SETUP['gt_fill']:.0%} of it flit by flit; "
        f"{SETUP['packet_flits']}-flit BE packets; {SETUP['gt_share'] * 100:g} % of the offered load GT; {cycles} cycles "
        "(first 10 % warm-up). Every routing sets a flow up with a one-flit header hop by hop and an acknowledgement back; "
        "widest-shortest and k-shortest (k = 8) compute the header's path centrally from the true link state at request "
        "time (a best case for them: no controller round trip, no stale state); bee-qos knows only what its scouts and "
        "foragers (8 scouts per unknown destination, alpha 2, detour 0.1, half-life 400 cycles) carried back, and pays "
        "for them in link slots (control flit-hops). GT latency: cycles from a flit's production to its arrival; it "
        "includes the wait for set-up and acknowledgement (data are produced from the request on). Jitter: p99 - p50 of "
        "it over all GT flits of a run. Violations (a link over-committed or a flow exceeding its reservation) are "
        "checked every cycle.",
        "",
    ]
    for traffic in TRAFFIC:
        lines += [
            f"## {traffic} traffic",
            "",
            "| load | routing | GT acceptance | GT latency mean | GT p50 | GT p99 | GT jitter p99-p50 | set-up mean | BE mean latency "
            "| control flit-hops/node/cycle | violations |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for load in LOADS:
            for routing in ROUTINGS:
                v = table.get((traffic, load, routing))
                if v is None:
                    continue
                lines.append(
                    f"| {load} | {routing} | {fmt(*v['gt_acceptance'], 3)} | {fmt(*v['gt_latency_mean'], 1)} | "
                    f"{fmt(*v['gt_latency_p50'], 1)} | {fmt(*v['gt_latency_p99'], 0)} | {fmt(*v['gt_jitter'], 0)} | "
                    f"{fmt(*v['gt_setup_mean'], 1)} | {fmt(*v['mean_delay'], 1)} | "
                    f"{fmt(*v['control_flits_per_node_cycle'], 3)} | {v['gt_violations'][0]:g} |"
                )
        lines.append("")
    lines += [
        "## bee-qos minus each baseline, paired by seed",
        "",
        "Mean difference ± 95 % interval (same requests per seed). Acceptance: higher is better; latency, jitter, set-up: lower.",
        "",
        "| traffic | load | baseline | Δ acceptance | Δ GT latency | Δ GT jitter | Δ set-up | Δ BE latency | acceptance verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for traffic in TRAFFIC:
        for load in LOADS:
            for base in BASELINES:
                d = {
                    m: diffs[traffic, load, base, m]
                    for m in ("gt_acceptance", "gt_latency_mean", "gt_jitter", "gt_setup_mean", "mean_delay")
                }
                lines.append(
                    f"| {traffic} | {load} | {base} | {d['gt_acceptance'][0]:+.3f} ± {d['gt_acceptance'][1]:.3f} | "
                    f"{d['gt_latency_mean'][0]:+.1f} ± {d['gt_latency_mean'][1]:.1f} | "
                    f"{d['gt_jitter'][0]:+.0f} ± {d['gt_jitter'][1]:.0f} | "
                    f"{d['gt_setup_mean'][0]:+.1f} ± {d['gt_setup_mean'][1]:.1f} | {d['mean_delay'][0]:+.1f} ± {d['mean_delay'][1]:.1f} | "
                    f"{verdict(*d['gt_acceptance'], higher_is_better=True)} |"
                )
    headline = headline_text(table, diffs, cmd, seeds)
    lines += ["", "## Headline", "", headline, ""]
    write_markdown(out / "bee.md", "\n".join(lines), command)
    return headline


def headline_text(
    table: dict[tuple[str, float, str], dict[str, tuple[float, float]]],
    diffs: dict[tuple[str, float, str, str], tuple[float, float]],
    cmd: str,
    seeds: int,
) -> str:
    parts = []
    for traffic in TRAFFIC:
        load = max(LOADS)
        acc = ", ".join(f"{rt} {fmt(*table[traffic, load, rt]['gt_acceptance'], 3)}" for rt in ROUTINGS)
        lat = ", ".join(f"{rt} {fmt(*table[traffic, load, rt]['gt_latency_mean'], 1)}" for rt in ("widest-shortest", "xy", "bee-qos"))
        jit = ", ".join(f"{rt} {fmt(*table[traffic, load, rt]['gt_jitter'], 0)}" for rt in ("widest-shortest", "xy", "bee-qos"))
        setup = ", ".join(f"{rt} {fmt(*table[traffic, load, rt]['gt_setup_mean'], 1)}" for rt in ("widest-shortest", "bee-qos"))
        over = fmt(*table[traffic, load, "bee-qos"]["control_flits_per_node_cycle"], 3)
        over_ws = fmt(*table[traffic, load, "widest-shortest"]["control_flits_per_node_cycle"], 3)
        parts.append(
            f"- {traffic}, load {load}: GT acceptance {acc}; GT latency (cycles) {lat}; GT jitter p99-p50 {jit}; "
            f"set-up time {setup}; control flit-hops/node/cycle bee-qos {over} vs widest-shortest {over_ws}."
        )
    points = [(traffic, ld) for traffic in TRAFFIC for ld in LOADS]
    verdicts = []
    for base in BASELINES:
        v = [verdict(*diffs[traffic, ld, base, "gt_acceptance"], higher_is_better=True) for traffic, ld in points]
        better, worse = v.count("bee better"), v.count("bee worse")
        lower_latency = sum(
            diffs[traffic, ld, base, "gt_latency_mean"][0] + diffs[traffic, ld, base, "gt_latency_mean"][1] < 0 for traffic, ld in points
        )
        lower_jitter = sum(
            diffs[traffic, ld, base, "gt_jitter"][0] + diffs[traffic, ld, base, "gt_jitter"][1] < 0 for traffic, ld in points
        )
        if worse == 0:
            beats = "beats" if better == len(points) else ("is level with or above" if better else "is level with")
        else:
            beats = "does not beat" if better == 0 else "is mixed against"
        verdicts.append(
            f"- bee-qos {beats} {base} on GT acceptance: significantly higher at {better}, lower at {worse}, level at "
            f"{len(points) - better - worse} of the {len(points)} (traffic, load) points; significantly lower GT latency at "
            f"{lower_latency} and lower jitter at {lower_jitter} of them."
        )
    return (
        f"8x8 SDM mesh, 4 sub-channels, 50 % GT (simulated; `{cmd}`, seeds 0-{seeds - 1}, mean ± 95 % interval, "
        "paired differences by seed; details in docs/bench/noc/bee.md):\n\n"
        + "\n".join(parts)
        + "\n\nOver loads "
        + ", ".join(map(str, LOADS))
        + " and both traffics (the baselines widest-shortest and k-shortest compute paths centrally from the true link "
        "state at no cost):\n\n" + "\n".join(verdicts)
    )


def parser() -> argparse.ArgumentParser:
    """The figure's options."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--seeds", type=int, default=5)
    # 6,000, not NOC.cycles (10,000): the committed figure's experiment setting
    ap.add_argument("--cycles", type=int, default=6000)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Simulate (unless ``--report-only``), then write the tables and splice the headline into the pages."""
    args = parser().parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    command = command_line(NAME, argv)
    rows = load_rows(args.out) if args.report_only else simulate(args.seeds, args.cycles, args.out, command)
    table = summarise(rows, args.out)
    diffs = paired(rows, args.out)
    headline = bee_markdown(table, diffs, args.seeds, args.cycles, args.out, command)
    # the headline blocks of the page beside the tables, and of docs/noc.md when the tables are the checkout's own
    pages = [args.out / "issue8-noc.md"]
    if args.out.resolve() == (CHECKOUT / out_dir(get(NAME).topic)).resolve():
        pages.append(CHECKOUT / "docs" / "noc.md")
    for doc in pages:
        if doc.exists():
            splice_block(doc, MARKER, headline)
    print(headline)
    return 0
