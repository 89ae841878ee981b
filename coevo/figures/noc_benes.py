"""Issue 18 figures: the Benes optical NoC with path set-up latency, ACK and holding (sim/noc/benes.py).

Every run is simulated (a cycle-level model, not measured hardware). Seeds 0..``--seeds``-1 of each point; every
interval is a 95 % Student t interval over those seeds (seeds as the unit, search.stats.t_interval).

* zero_load.csv: the zero-load delay measured on a trace of isolated packets vs the hand formula
  ``(2 log2 N - 1)(setup + ack) + flits``.
* runs.csv, part sweep: delay, throughput and blocking vs packet length (N = 16) and vs N (16-flit packets), at two loads,
  for bit, bit + hold, adaptive-local, adaptive (look-ahead) and adaptive + hold.
* runs.csv, part model: first-attempt blocking of bit routing at low loads vs the analytical model
  (sim.noc.benes.bit_blocking_model), and link utilisation vs Little's law.
* runs.csv, part curve: load curves for N = 16 and 64 (the Benes headline of docs/bench/noc/issue8-noc.md, rewritten here,
  with docs/bench/noc/noc-benes16.png and noc-benes64.png).

Writes the CSVs and benes.md into ``--out`` (docs/bench/noc) and the Benes section of ``--issue8`` (default: issue8-noc.md
in ``--out``, docs/bench/noc/issue8-noc.md; left alone when there is none).

    nice -n 10 python -m coevo.figures noc-benes --jobs 2        # everything (21 minutes on a 2-core machine shared with other jobs)
    python -m coevo.figures noc-benes --report-only              # rewrite the markdown from the CSVs
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from coevo.figures._common import command_line, figure_parser, read_numbers, write_csv, write_markdown
from coevo.search.stats import t_interval
from coevo.sim.noc.benes import (
    BenesConfig,
    BenesStats,
    bit_blocking_model,
    mean_link_utilisation_model,
    simulate_benes,
    zero_load_delay,
)
from coevo.sim.noc.common import NocResult
from coevo.sim.noc.config import NOC
from coevo.sim.noc.curves import AnyResult, plot_curves

NAME = "noc-benes"

SETUP, ACK = NOC.setup_cycles, NOC.ack_cycles
"""The model's defaults (setup cycles per stage, ACK cycles per stage), the family's."""
N_PORTS, FLITS = NOC.n_ports, NOC.benes_packet_flits
"""The size of the packet-length sweep and the first load curve, and the packet length of the rest: the family's."""
HOLD = 16
"""The hold variants' bound (cycles): the figure's own setting (``NOC.hold_cycles`` is 0, no holding)."""
VARIANTS: dict[str, tuple[str, int]] = {
    "bit": ("bit", 0),
    "bit+hold": ("bit", HOLD),
    "adaptive-local": ("adaptive-local", 0),
    "adaptive": ("adaptive", 0),
    "adaptive+hold": ("adaptive", HOLD),
}
LENGTHS = (4, 8, 16, 32, 64)
SIZES = (8, 16, 32, 64)
SWEEP_LOADS = (0.05, 0.15)
MODEL_LOADS = (0.005, 0.01, 0.02, 0.05, 0.1)
CURVE_LOADS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)
CURVE_VARIANTS = ("bit", "adaptive", "adaptive+hold")
FIELDS = [
    "part",
    "variant",
    "routing",
    "hold_cycles",
    "n",
    "packet_flits",
    "load",
    "seed",
    "cycles",
    "throughput",
    "mean_delay",
    "p99_delay",
    "delivered_packets",
    "blocking_rate",
    "first_attempt_blocking",
    "retries_per_packet",
    "hold_per_packet",
    "link_utilisation",
    "zero_load_delay",
    "queued_at_end",
    "cycles_per_s",
]


def _run(task: dict[str, Any]) -> dict[str, Any]:
    routing, hold = VARIANTS[task["variant"]]
    r = simulate_benes(
        task["n"],
        routing=routing,
        hold_cycles=hold,
        load=task["load"],
        packet_flits=task["packet_flits"],
        setup_cycles=SETUP,
        ack_cycles=ACK,
        cycles=task["cycles"],
        seed=task["seed"],
    )
    s = r.stats
    return {
        **task,
        "routing": routing,
        "hold_cycles": hold,
        "throughput": r.throughput,
        "mean_delay": r.mean_delay,
        "p99_delay": r.p99_delay,
        "delivered_packets": r.delivered_packets,
        "blocking_rate": s.blocking_rate,
        "first_attempt_blocking": s.first_attempt_blocking,
        "retries_per_packet": s.retries_per_packet,
        "hold_per_packet": s.hold_per_packet,
        "link_utilisation": s.link_utilisation,
        "zero_load_delay": s.zero_load_delay,
        "queued_at_end": s.queued_at_end,
        "cycles_per_s": round(r.cycles_per_s),
    }


def _model_cycles(n: int, load: float) -> int:
    """Enough cycles for about 4,000 first attempts a seed (at most 400,000 cycles; at least 40,000)."""
    return int(min(max(4000 / (n * load / FLITS), 40_000), 400_000))


def tasks(seeds: int, cycles: int) -> list[dict[str, Any]]:
    """Every run of every part."""
    out: list[dict[str, Any]] = []
    sweep = {(N_PORTS, flits) for flits in LENGTHS} | {(n, FLITS) for n in SIZES}
    for n, flits in sorted(sweep):
        for variant in VARIANTS:
            for load in SWEEP_LOADS:
                out += [
                    dict(part="sweep", variant=variant, n=n, packet_flits=flits, load=load, seed=s, cycles=cycles) for s in range(seeds)
                ]
    for n in SIZES:
        for load in MODEL_LOADS:
            c = _model_cycles(n, load)
            out += [dict(part="model", variant="bit", n=n, packet_flits=FLITS, load=load, seed=s, cycles=c) for s in range(seeds)]
    for n in (N_PORTS, 64):
        for variant in CURVE_VARIANTS:
            for load in CURVE_LOADS:
                out += [
                    dict(part="curve", variant=variant, n=n, packet_flits=FLITS, load=load, seed=s, cycles=cycles) for s in range(seeds)
                ]
    return out


def simulate_all(todo: list[dict[str, Any]], jobs: int) -> list[dict[str, Any]]:
    """Run ``todo`` on ``jobs`` processes (longest first), printing progress to stderr."""
    todo = sorted(todo, key=lambda t: -t["cycles"] * t["n"])
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    with multiprocessing.Pool(jobs) as pool:
        for i, row in enumerate(pool.imap_unordered(_run, todo), 1):
            rows.append(row)
            if i % 25 == 0 or i == len(todo):
                print(f"{i}/{len(todo)} runs, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return rows


def zero_load_rows() -> list[dict[str, Any]]:
    """Isolated packets (a trace, one circuit at a time, every source) against the hand formula."""
    rows = []
    for n in SIZES:
        for flits in (4, 16, 64):
            for setup, ack in ((1, 0), (2, 1), (3, 2)):
                expected = (2 * int(math.log2(n)) - 1) * (setup + ack) + flits  # by hand, not from the simulator
                gap = expected + 1
                start = 2 * n * gap // 9 + 10
                trace = [(start + k * gap, k % n, (k % n + 1 + 3 * k) % n) for k in range(2 * n)]
                trace = [(w, s, d if d != s else (d + 1) % n) for w, s, d in trace]
                r = simulate_benes(
                    n,
                    routing="adaptive",
                    packet_flits=flits,
                    setup_cycles=setup,
                    ack_cycles=ack,
                    trace=trace,
                    cycles=start + 2 * n * gap + 10,
                )
                rows.append(
                    {
                        "n": n,
                        "packet_flits": flits,
                        "setup_cycles": setup,
                        "ack_cycles": ack,
                        "formula": expected,
                        "simulator_zero_load_delay": zero_load_delay(n, flits, setup, ack),
                        "measured_mean": r.mean_delay,
                        "measured_p99": r.p99_delay,
                        "packets": r.delivered_packets,
                    }
                )
    return rows


def ci(values: Sequence[float], fmt: str = ".1f") -> str:
    """``mean ± half`` over seeds (nan values dropped; ``n/a`` when none is left)."""
    vals = [v for v in values if not math.isnan(v)]
    if not vals:
        return "n/a"
    mean, half = t_interval(vals)
    return f"{mean:{fmt}}" if math.isnan(half) else f"{mean:{fmt}} ± {half:{fmt.lstrip('+')}}"


Key = tuple[Any, ...]


def group(rows: Iterable[dict[str, Any]], part: str, *keys: str) -> dict[Key, list[dict[str, Any]]]:
    out: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["part"] == part:
            out[tuple(r[k] for k in keys)].append(r)
    return out


def saturated(runs: Sequence[dict[str, Any]]) -> bool:
    """Delivered under 90 % of the offered load, or more than one packet a source left queued at the end (seed means):
    packets pile up, and the delay grows with the run's length."""
    short = statistics.fmean(r["throughput"] for r in runs) < 0.9 * runs[0]["load"]
    return short or statistics.fmean(r["queued_at_end"] for r in runs) > runs[0]["n"]


def col(runs: Sequence[dict[str, Any]], key: str, fmt: str = ".1f") -> str:
    return ci([float(r[key]) for r in runs], fmt)


def sweep_section(rows: list[dict[str, Any]], seeds: int, cycles: int) -> list[str]:
    g = group(rows, "sweep", "variant", "n", "packet_flits", "load")
    out = [
        "## Delay vs packet length and N",
        "",
        f"Uniform traffic, Poisson arrivals, setup {SETUP} cycles a stage, ACK {ACK} cycle a stage, holding variants wait at "
        f"most {HOLD} cycles; {cycles:,} cycles a run (10 % warm-up), seeds 0-{seeds - 1}; mean ± 95 % t interval over seeds. "
        "Zero-load delay is (2 log2 N - 1)(setup + ack) + flits. **sat**: delivered throughput under 90 % of the offered "
        "load, or over one packet a source still queued at the end (saturated: the delay then grows with the run's "
        "length and is a lower bound). Blocking: torn-down setups / setup attempts (holding turns most blocks into "
        "waits: the wait cycles per packet, hold_per_packet, are in runs.csv).",
        "",
    ]
    for title, axis, points in (
        (f"Packet length, N = {N_PORTS}", "flits", [(N_PORTS, f) for f in LENGTHS]),
        (f"Network size, {FLITS}-flit packets", "N", [(n, FLITS) for n in SIZES]),
    ):
        for load in SWEEP_LOADS:
            out += [f"### {title}, load {load}", ""]
            out.append(f"| {axis} | zero-load | " + " | ".join(f"{v} delay | {v} blocking" for v in VARIANTS) + " |")
            out.append("|---|---|" + "---|---|" * len(VARIANTS))
            for n, flits in points:
                cells = []
                for v in VARIANTS:
                    runs = g[(v, n, flits, load)]
                    mark = " **sat**" if saturated(runs) else ""
                    cells.append(f"{col(runs, 'mean_delay')}{mark} | {col(runs, 'blocking_rate', '.3f')}")
                zero = zero_load_delay(n, flits, SETUP, ACK)
                out.append(f"| {flits if axis == 'flits' else n} | {zero} | " + " | ".join(cells) + " |")
            out.append("")
    # the claims the text makes, computed here
    a = g[("adaptive", 64, FLITS, 0.05)]
    b = g[("bit", 64, FLITS, 0.05)]
    h = g[("adaptive+hold", 64, FLITS, 0.05)]
    cap = 4 / zero_load_delay(N_PORTS, 4, SETUP, ACK)  # flits a cycle a source can move in 4-flit circuits, never blocked
    out.append(
        f"At N = 64, load 0.05: mean delay bit {col(b, 'mean_delay')}, adaptive {col(a, 'mean_delay')}, adaptive + hold "
        f"{col(h, 'mean_delay')} cycles (zero-load {zero_load_delay(64, FLITS, SETUP, ACK)}). Short packets pay the set-up "
        f"and ACK for few flits: at N = {N_PORTS} a 4-flit circuit holds its source for {zero_load_delay(N_PORTS, 4, SETUP, ACK)} cycles "
        f"to move 4 flits, so a source can carry at most {cap:.3f} flits a cycle even without blocking; at load 0.15 it "
        f"would be busy {0.15 / cap:.0%} of the time before any blocking, and 4- and 8-flit packets saturate there.\n"
    )
    return out


def independent_links(n: int, load: float) -> float:
    """The crude model: every link of the path busy independently with its whole utilisation (own source included)."""
    stages = 2 * int(math.log2(n)) - 1
    hold = zero_load_delay(n, FLITS, SETUP, ACK)
    return 1 - math.prod(1 - load / FLITS * (hold - (j + 1) * SETUP + 1) for j in range(stages))


def model_section(rows: list[dict[str, Any]], seeds: int) -> list[str]:
    g = group(rows, "model", "n", "load")
    out = [
        "## Bit-routing blocking at low load vs the analytical model",
        "",
        "First-attempt blocking (blocked first setups / first setups) of destination-tag routing, uniform Poisson traffic, "
        f"{FLITS}-flit packets, setup {SETUP}, ACK {ACK}, no holding, seeds 0-{seeds - 1} (cycles per run in runs.csv, part model: "
        "about 4,000 first attempts a seed, 40,000-400,000 cycles). Model: `sim.noc.benes.bit_blocking_model` "
        "(a fresh setup is blocked by another source's circuit iff that circuit started within D - (j1 + 1) setup + 1 "
        "cycles before it, j1 the first stage the two paths share, D the circuit's holding time; circuits start at "
        "load / flits per source per cycle; sources independent). Link utilisation: Little's law, rate load / flits per "
        "link x the mean holding time of a link (`mean_link_utilisation_model`). The model neglects blocked setups' "
        "partial paths, retries and queueing (second order in the blocking probability), so it is meant for low loads; "
        "tests/sim/test_noc.py checks it within 3 binomial standard errors + P^2. Independent links: the crude "
        "alternative, every link of the path busy independently with its whole utilisation; it counts the source's own "
        "traffic (most of an early stage's) and a circuit sharing several links several times.",
        "",
        "| N | load | measured first-attempt blocking | model | measured / model | independent links | link utilisation | model |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in SIZES:
        for load in MODEL_LOADS:
            runs = g[(n, load)]
            model = bit_blocking_model(n, load, FLITS, SETUP, ACK)
            util = mean_link_utilisation_model(n, load, FLITS, SETUP, ACK)
            ratio = statistics.fmean(r["first_attempt_blocking"] for r in runs) / model
            out.append(
                f"| {n} | {load} | {col(runs, 'first_attempt_blocking', '.4f')} | {model:.4f} | {ratio:.3f} | "
                f"{independent_links(n, load):.4f} | "
                f"{col(runs, 'link_utilisation', '.4f')} | {util:.4f} |"
            )
    ratios = {
        (n, load): statistics.fmean(r["first_attempt_blocking"] for r in g[(n, load)]) / bit_blocking_model(n, load, FLITS, SETUP, ACK)
        for n in SIZES
        for load in MODEL_LOADS
    }
    low = [v for (n, load), v in ratios.items() if load <= 0.02]
    high = [v for (n, load), v in ratios.items() if load > 0.02]
    out += [
        "",
        f"Measured / model at loads <= 0.02: {min(low):.3f}-{max(low):.3f}; at 0.05 and 0.1: {min(high):.3f}-{max(high):.3f} "
        "(the model's neglected terms grow with the blocking probability and all add blocking).",
        "",
    ]
    return out


def _mean_result(runs: Sequence[dict[str, Any]], label: str) -> AnyResult:
    """A result carrying the seed means (for plot_curves), labelled ``label`` as its routing."""
    m: Callable[[str], float] = lambda k: statistics.fmean(float(r[k]) for r in runs)  # noqa: E731
    first = runs[0]
    config = replace(
        BenesConfig(first["n"], first["routing"], "uniform", "poisson", FLITS, SETUP, ACK, first["hold_cycles"]), routing=label
    )
    stats = BenesStats(2 * int(math.log2(first["n"])) - 1, m("blocking_rate"), m("retries_per_packet"), int(first["zero_load_delay"]), 0)
    return NocResult(
        config, first["cycles"], first["load"], int(m("delivered_packets")), m("throughput"), m("mean_delay"), m("p99_delay"), 0.0, stats
    )


def curve_section(rows: list[dict[str, Any]], seeds: int, cycles: int, bench: Path) -> list[str]:
    g = group(rows, "curve", "variant", "n", "load")
    out = [
        f"### Benes optical NoC (uniform traffic, Poisson, {FLITS}-flit packets; issue 18 model: setup {SETUP} cycles and ACK "
        f"{ACK} cycle per stage)",
        "",
        f"Rewritten by `python -m coevo.figures noc-benes` (issue 18, seeds 0-{seeds - 1}, {cycles:,} cycles a run; mean ± "
        "95 % t interval over seeds; simulated). The issue 8 tables (1-cycle setup, no ACK, local adaptive choice, medians "
        "of seeds 0-2) measured a different model and are gone; `simulate_benes(..., setup_cycles=1, ack_cycles=0, "
        "routing='adaptive-local')` is that model, bit for bit (a golden test). More in docs/bench/noc/benes.md.",
        "",
    ]
    for n in (N_PORTS, 64):
        zero = zero_load_delay(n, FLITS, SETUP, ACK)
        sat: dict[str, float | None] = {}
        for v in CURVE_VARIANTS:
            over = [x for x in CURVE_LOADS if statistics.fmean(r["mean_delay"] for r in g[(v, n, x)]) > 3 * zero]
            sat[v] = min(over) if over else None
        results = [_mean_result(g[(v, n, x)], v) for v in CURVE_VARIANTS for x in CURVE_LOADS]
        png = plot_curves(results, f"Benes N={n}, uniform, {FLITS}-flit packets (mean of {seeds} seeds)", bench / f"noc-benes{n}.png")
        out.append(
            f"N={n} ({png.name}), zero-load delay {zero} cycles; saturation (mean delay > 3x zero-load): "
            + ", ".join(f"{v} {sat[v]}" for v in CURVE_VARIANTS)
            + "\n"
        )
        out.append("| load | " + " | ".join(f"{v} thr | {v} delay | {v} blocking" for v in CURVE_VARIANTS) + " |")
        out.append("|---|" + "---|---|---|" * len(CURVE_VARIANTS))
        for x in CURVE_LOADS:
            cells = [
                " | ".join(
                    col(g[(v, n, x)], key, fmt) for key, fmt in (("throughput", ".3f"), ("mean_delay", ".1f"), ("blocking_rate", ".3f"))
                )
                for v in CURVE_VARIANTS
            ]
            out.append(f"| {x} | " + " | ".join(cells) + " |")
        at = sat["bit"]
        if at is not None:
            b, a = g[("bit", n, at)], g[("adaptive", n, at)]
            paired = [ra["mean_delay"] / rb["mean_delay"] - 1 for rb in b for ra in a if ra["seed"] == rb["seed"]]
            thr = [ra["throughput"] / rb["throughput"] - 1 for rb in b for ra in a if ra["seed"] == rb["seed"]]
            out.append(
                f"\n**Headline N={n}**: at load {at} (where bit-controlled routing saturates), adaptive (look-ahead) vs bit: "
                f"mean delay {ci([r['mean_delay'] for r in a], '.0f')} vs {ci([r['mean_delay'] for r in b], '.0f')} cycles, "
                f"paired change {ci([100 * p for p in paired], '+.1f')} %; throughput change {ci([100 * p for p in thr], '+.1f')} %."
            )
        speeds = [r["cycles_per_s"] for x in CURVE_LOADS for v in CURVE_VARIANTS for r in g[(v, n, x)]]
        out.append(
            f"\nSimulator speed N={n}: median {statistics.median(speeds):,.0f} simulated cycles/s a run "
            "(2 processes on a 2-core machine shared with other jobs: a lower bound).\n"
        )
    return out


def replace_issue8_section(path: Path, section: list[str]) -> None:
    """Swap the Benes section of docs/bench/noc/issue8-noc.md (up to the next ### heading) for ``section``."""
    text = path.read_text()
    pattern = re.compile(r"### Benes optical NoC.*?(?=^### )", re.S | re.M)
    if not pattern.search(text):
        raise SystemExit(f"{path}: no '### Benes optical NoC' section to replace")
    path.write_text(pattern.sub(lambda _: "\n".join(section).rstrip() + "\n\n", text, count=1))


def parser() -> argparse.ArgumentParser:
    """The figure's options; a run's length is the family's (``NOC.benes_cycles``)."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--issue8", type=Path, default=None, help="the page whose Benes section to rewrite (default: OUT/issue8-noc.md)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--cycles", type=int, default=NOC.benes_cycles, help="cycles of a sweep or load-curve run")
    ap.add_argument("--jobs", type=int, default=2)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Simulate (unless ``--report-only``), then write the pages and plots from runs.csv and zero_load.csv."""
    args = parser().parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    command = command_line(NAME, argv)
    issue8 = args.issue8 if args.issue8 is not None else args.out / "issue8-noc.md"
    runs_csv, zero_csv = args.out / "runs.csv", args.out / "zero_load.csv"
    if not args.report_only:
        zero = zero_load_rows()
        write_csv(zero_csv, zero, list(zero[0]), command=command)
        rows = simulate_all(tasks(args.seeds, args.cycles), args.jobs)
        rows.sort(key=lambda r: [r[k] for k in ("part", "variant", "n", "packet_flits", "load", "seed")])
        write_csv(runs_csv, rows, FIELDS, command=command)
    zero, rows = read_numbers(zero_csv), read_numbers(runs_csv)
    seeds = 1 + max(int(r["seed"]) for r in rows)
    cycles = max(int(r["cycles"]) for r in rows if r["part"] == "sweep")
    exact = all(r["formula"] == r["simulator_zero_load_delay"] == r["measured_mean"] == r["measured_p99"] for r in zero)
    doc = [
        "# Issue 18: Benes optical NoC with path set-up latency, ACK and holding",
        "",
        "`nice -n 10 python -m coevo.figures noc-benes --jobs 2` wrote this page, runs.csv (every run: part, variant, N, "
        "flits, load, seed, metrics) and zero_load.csv. Simulated (sim/noc/benes.py, a cycle-level model), not measured "
        "hardware. Variants: bit (destination tag), adaptive-local (issue 8's adaptive: a free output at random), "
        f"adaptive (look-ahead one switch downstream), +hold (a blocked header waits up to {HOLD} cycles at the switch "
        "before tearing down).",
        "",
        "## Zero-load delay",
        "",
        f"{len(zero)} configurations (N = 8..64, 4/16/64 flits, (setup, ack) = (1, 0), (2, 1), (3, 2)), "
        f"{sum(int(r['packets']) for r in zero)} isolated packets from a trace: measured delay equals the hand formula "
        f"(2 log2 N - 1)(setup + ack) + flits in every one: **{'yes' if exact else 'NO'}** (zero_load.csv).",
        "",
        *sweep_section(rows, seeds, cycles),
        *model_section(rows, seeds),
        "## Load curves (also the Benes section of docs/bench/noc/issue8-noc.md)",
        "",
    ]
    section = curve_section(rows, seeds, cycles, issue8.parent)
    doc += [line.replace("### Benes optical NoC", "### N = 16 and 64") for line in section]
    write_markdown(args.out / "benes.md", "\n".join(doc).rstrip() + "\n", command)
    if issue8.exists():
        replace_issue8_section(issue8, section)
    else:
        print(f"{issue8}: not there, its Benes section left unwritten", file=sys.stderr)
    print("\n".join(doc))
    return 0
