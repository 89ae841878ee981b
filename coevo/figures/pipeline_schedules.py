"""Pipeline schedules on PULSE's plans, simulated: 1F1B, Megatron's interleaved 1F1B, ZB-H1 and CP-SAT (issue 18).

For each cluster, model, pipeline degree and microbatch count: the block-wise plan under
1F1B, interleaved 1F1B (the plan cut into 2p stages placed round-robin, chunk c of device d
= stage ``c p + d``, Megatron's loop placement) and ZB-H1; the skip-aware (V-shaped) plan
under wave (1F1B over its virtual stages), Megatron's interleaved order on the same virtual
stages, ZB-H1, and a CP-SAT schedule capped at 1F1B's memory (one run per seed; several
workers, so runs vary with the seed and the machine's load; time limit per run below).
Then the hybrid PP x DP step with one, four or eight NICs per node (network part). Writes
``docs/bench/pipeline/pipeline-schedules.csv``, ``pipeline-network.csv`` and
``pipeline-schedules.md`` from them::

    nice -n 10 python -m coevo.figures pipeline-schedules [--time-limit 10] [--seeds 0 1 2] [--micro 8 16] [--pp 4 8] [--workers 4]
    python -m coevo.figures pipeline-schedules --report-only [the same options]   # the .md again from the CSVs

Everything here is simulated (sim/pipeline), nothing is measured on GPUs.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import sys
import time
from typing import Any

from coevo.figures._common import Output, command_line, figure_parser, mean_interval
from coevo.sim.pipeline.cluster import PRESETS, Cluster
from coevo.sim.pipeline.config import PIPELINE
from coevo.sim.pipeline.ilp import synthesize
from coevo.sim.pipeline.partition import Plan, blockwise, from_mapping, partition
from coevo.sim.pipeline.profile import ModelProfile, profile
from coevo.sim.pipeline.simulate import StepResult, simulate
from coevo.sim.pipeline.tune import hybrid_step_s

NAME = "pipeline-schedules"

MODELS = ((PIPELINE.model, PIPELINE.resolution), ("uvit-h", 32))
"""The family's model at its resolution, and the figure's second model."""
MICROBATCH = 8
CLUSTERS = {
    PIPELINE.cluster: PRESETS[PIPELINE.cluster],
    "v100x16-2pn-ib10": dataclasses.replace(PRESETS[PIPELINE.cluster], name="v100x16-2pn-ib10", per_node=2),
}
"""The preset (a pipeline of up to 8 stays inside one NVLink node) and nodes of 2 V100s sharing one 10 GB/s NIC."""
FIELDS = (
    "cluster",
    "model",
    "pp",
    "microbatches",
    "plan",
    "schedule",
    "seed",
    "makespan_ms",
    "samples_per_s",
    "bubble",
    "peak_memory_gb",
    "solver_status",
    "bound_ms",
    "gap",
    "solve_s",
)


def loop_plan(p: ModelProfile, pp: int, cluster: Cluster) -> Plan:
    """Block-wise cut into ``2 pp`` stages, stage j on device ``j mod pp`` (Megatron's interleaved placement)."""
    cut = blockwise(p, 2 * pp, **cluster.rates)
    return from_mapping(p, "blockwise", [d % pp for d in cut.device_of], **cluster.rates)


def row(cluster: str, model: str, pp: int, micro: int, plan: str, schedule: str, r: StepResult, seed: str = "") -> dict[str, Any]:
    return {
        "cluster": cluster,
        "model": model,
        "pp": pp,
        "microbatches": micro,
        "plan": plan,
        "schedule": schedule,
        "seed": seed,
        "makespan_ms": round(r.makespan_s * 1e3, 3),
        "samples_per_s": round(r.samples_per_s, 2),
        "bubble": round(r.bubble_ratio, 4),
        "peak_memory_gb": round(max(r.peak_memory_bytes) / 1e9, 3),
        "solver_status": "",
        "bound_ms": "",
        "gap": "",
        "solve_s": "",
    }


def run(time_limit: float, seeds: list[int], micros: list[int], pps: list[int], workers: int) -> list[dict[str, Any]]:
    rows = []
    for cname, cluster in CLUSTERS.items():
        for model, res in MODELS:
            p = profile(model, resolution=res, microbatch=MICROBATCH)
            for pp in pps:
                bw, sa, loop = (
                    partition(p, "blockwise", pp, **cluster.rates),
                    partition(p, "skip-aware", pp, **cluster.rates),
                    loop_plan(p, pp, cluster),
                )
                for micro in micros:
                    for plan_name, plan, schedule in (
                        ("blockwise", bw, "1f1b"),
                        ("blockwise-loop", loop, "interleaved"),
                        ("blockwise", bw, "zb-h1"),
                        ("skip-aware", sa, "wave"),
                        ("skip-aware", sa, "interleaved"),
                        ("skip-aware", sa, "zb-h1"),
                    ):
                        rows.append(
                            row(
                                cname,
                                model,
                                pp,
                                micro,
                                plan_name,
                                schedule,
                                simulate(p, plan, cluster, schedule=schedule, microbatches=micro),
                            )
                        )
                    for seed, (name, split) in itertools.product(seeds, (("ilp", False), ("ilp-zb", True))):
                        began = time.perf_counter()
                        syn = synthesize(
                            p,
                            sa,
                            cluster,
                            microbatches=micro,
                            time_limit_s=time_limit,
                            workers=workers,
                            seed=seed,
                            split_backward=split,
                            memory="1f1b-peak" if split else "1f1b",
                        )
                        replayed = "zb-h1" if split else "ilp"
                        r = simulate(p, sa, cluster, schedule=replayed, microbatches=micro, order=syn.starts)
                        entry = row(cname, model, pp, micro, "skip-aware", name, r, str(seed))
                        entry |= {
                            "solver_status": syn.status,
                            "bound_ms": round(syn.bound_s * 1e3, 3),
                            "gap": round(syn.gap, 4),
                            "solve_s": round(syn.solve_s, 2),
                        }
                        rows.append(entry)
                        print(
                            f"{cname} {model} pp{pp} m{micro} {name} seed {seed}: {syn.status} gap {syn.gap:.3f} "
                            f"({time.perf_counter() - began:.1f} s)",
                            file=sys.stderr,
                            flush=True,
                        )
    return rows


def network() -> list[dict[str, Any]]:
    """Hybrid PP x DP steps on 16 V100s in 2 nodes: one shared NIC per node, four, or one per GPU (nothing shared)."""
    base = PRESETS[PIPELINE.cluster]
    clusters = {
        "1 x 10 GB/s": base,
        "4 x 10 GB/s": dataclasses.replace(base, nics_per_node=4),
        "8 x 10 GB/s (one per GPU)": dataclasses.replace(base, nics_per_node=8),
    }
    out = []
    for model, res in MODELS:
        p = profile(model, resolution=res, microbatch=MICROBATCH)
        for pp, dp in ((8, 2), (4, 4), (2, 8)):
            micro = 128 // (dp * MICROBATCH)
            for method, schedule in (("blockwise", "1f1b"), ("skip-aware", "wave")):
                for name, cluster in clusters.items():
                    plan = partition(p, method, pp, **cluster.rates)
                    step = simulate(p, plan, cluster, schedule=schedule, microbatches=micro, data_parallel=dp)
                    alone = simulate(p, plan, cluster, schedule=schedule, microbatches=micro)
                    out.append(
                        {
                            "model": model,
                            "pp": pp,
                            "dp": dp,
                            "microbatches": micro,
                            "plan": method,
                            "schedule": schedule,
                            "nics": name,
                            "pipeline_ms": round(alone.makespan_s * 1e3, 2),
                            "step_ms": round(step.step_s * 1e3, 2),
                            "estimate_ms": round(hybrid_step_s(cluster, plan, alone, dp) * 1e3, 2),
                            "samples_per_s": round(128 / step.step_s, 1),
                            "allreduce_gb": round(step.allreduce_bytes / 1e9, 3),
                        }
                    )
    return out


def network_report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "## Hybrid PP x DP with shared NICs (global batch 128, microbatch 8)",
        "",
        "`v100x16-ib10` (2 nodes of 8 V100s, NVLink inside) with one, four or eight 10 GB/s NICs per node. Replica r of "
        "stage s on device r pp + s, so each pipeline (pp = 8) or pairs of them (pp = 4, 2) sit inside a node and the "
        "gradient rings cross the nodes. step: replicas, ring all-reduce flows and pipeline transfers simulated together "
        "(each device's all-reduce starts when its last backward ends, overlapping earlier stages' backward; NIC "
        "and link shares max-min fair). estimate: a single pipeline's simulated step plus the analytic all-reduce of "
        "`tune.allreduce_s` (every stage's ring at once on the NICs, no pipeline traffic). pipeline: one pipeline, no "
        "all-reduce.",
        "",
        "| model | pp x dp | plan / schedule | NICs per node | pipeline ms | step ms | estimate ms | samples/s | all-reduce GB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['pp']} x {r['dp']} | {r['plan']} / {r['schedule']} | {r['nics']} | {r['pipeline_ms']} | "
            f"{r['step_ms']} | {r['estimate_ms']} | {r['samples_per_s']} | {r['allreduce_gb']} |"
        )
    return "\n".join(lines) + "\n"


def report(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        "# Pipeline schedules on PULSE's plans (issue 18, simulated)",
        "",
        f"Written by `python -m coevo.figures pipeline-schedules --time-limit {args.time_limit:g} --workers {args.workers} "
        f"--seeds {' '.join(map(str, args.seeds))} "
        f"--micro {' '.join(map(str, args.micro))} --pp {' '.join(map(str, args.pp))}` from `pipeline-schedules.csv` "
        f"(same folder), {time.strftime('%Y-%m-%d', time.gmtime())}. Every number is simulated by `sim/pipeline` (V100 presets: "
        "50 TFLOP/s, 10 us per compute op, 32 GB; microbatch 8; unet-sd at 64 x 64 latents, uvit-h at 32 x 32); the only "
        f"randomness is CP-SAT's ({args.workers} workers on a shared 2-core machine, seeds as listed), whose cells give the "
        "mean ± 95 % t-interval over seeds.",
        "",
        "Clusters: `v100x16-ib10` (nodes of 8 V100s on NVLink 150 GB/s: these pipelines stay inside one node) and "
        "`v100x16-2pn-ib10` (nodes of 2 V100s sharing one 10 GB/s NIC: stages on different nodes, the two GPUs of a node "
        "contend for its NIC). Plans: block-wise (contiguous, compute-balanced); block-wise-loop (2p stages, stage j on "
        "device j mod p: Megatron's interleaved placement); skip-aware (PULSE's V shape, 2p - 1 virtual stages). "
        "Schedules: 1f1b; interleaved (Megatron's order); zb-h1 (backward split into B and W, W deferred within 1F1B's "
        "peak memory); wave (1F1B over the V); ilp (CP-SAT over F and B ops, stashed activations capped at 1F1B's bound per "
        "device; CP-SAT B/W: backward split into B and W ops as ZB-H1, every device capped at the fullest device's 1F1B "
        "activations, ZB-H1's rule; "
        f"{args.time_limit:g} s per run; bound = CP-SAT's ObjectiveBound on the makespan, gap = (makespan - bound) / makespan "
        "in the solver's model, whose transfers queue per NIC/link where the simulator shares them fairly).",
        "",
        "| cluster | model | pp | m | bw 1F1B | bw-loop interleaved | bw ZB-H1 | sa wave | sa interleaved | sa ZB-H1 | sa CP-SAT |"
        " sa CP-SAT B/W | CP-SAT bound (F/B / B/W) | gap (F/B / B/W) | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted(
        {(r["cluster"], r["model"], r["pp"], r["microbatches"]) for r in rows}, key=lambda k: (str(k[0]), str(k[1]), int(k[2]), int(k[3]))
    )
    for key in keys:
        sel = [r for r in rows if (r["cluster"], r["model"], r["pp"], r["microbatches"]) == key]

        def cell(plan: str, schedule: str, sel: list[dict[str, Any]] = sel) -> str:
            got = [r for r in sel if r["plan"] == plan and r["schedule"] == schedule]
            rate = mean_interval([float(r["samples_per_s"]) for r in got], 1)
            bubble = statistics.mean(float(r["bubble"]) for r in got)
            memory = max(float(r["peak_memory_gb"]) for r in got)
            return f"{rate} / {bubble:.3f} / {memory:.2f}"

        solved = [[r for r in sel if r["schedule"] == name] for name in ("ilp", "ilp-zb")]
        bound = " / ".join(mean_interval([float(r["bound_ms"]) for r in ilp], 1) for ilp in solved)
        gap = " / ".join(mean_interval([100 * float(r["gap"]) for r in ilp], 1) for ilp in solved)
        status = ", ".join(sorted({str(r["solver_status"]) for ilp in solved for r in ilp}))
        cells = [cell("blockwise", "1f1b"), cell("blockwise-loop", "interleaved"), cell("blockwise", "zb-h1")]
        cells += [cell("skip-aware", "wave"), cell("skip-aware", "interleaved"), cell("skip-aware", "zb-h1"), cell("skip-aware", "ilp")]
        cells.append(cell("skip-aware", "ilp-zb"))
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | " + " | ".join(cells) + f" | {bound} ms | {gap} % | {status} |")
    lines += [
        "",
        "Cells: samples/s (one pipeline) / bubble ratio / peak memory on the fullest device, GB (parameters with Adam state "
        "plus stashed activations).",
        "",
        *summary(rows),
        "",
    ]
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """Ratios of samples/s between schedules over every (cluster, model, pp, m) case: min, median, max (CP-SAT: seed mean)."""

    def rate(key: tuple[Any, ...], plan: str, schedule: str) -> float:
        got = [
            float(r["samples_per_s"])
            for r in rows
            if (r["cluster"], r["model"], r["pp"], r["microbatches"]) == key and r["plan"] == plan and r["schedule"] == schedule
        ]
        return statistics.mean(got)

    keys = sorted({(r["cluster"], r["model"], r["pp"], r["microbatches"]) for r in rows})
    out = ["Samples/s ratios over the " + str(len(keys)) + " cases above (min / median / max):", ""]
    for label, num, den in (
        ("skip-aware CP-SAT / skip-aware wave (equal memory cap)", ("skip-aware", "ilp"), ("skip-aware", "wave")),
        ("skip-aware ZB-H1 / skip-aware wave", ("skip-aware", "zb-h1"), ("skip-aware", "wave")),
        ("skip-aware CP-SAT B/W / skip-aware ZB-H1 (equal peak-memory rule)", ("skip-aware", "ilp-zb"), ("skip-aware", "zb-h1")),
        ("block-wise ZB-H1 / block-wise 1F1B", ("blockwise", "zb-h1"), ("blockwise", "1f1b")),
        ("block-wise-loop interleaved / block-wise 1F1B", ("blockwise-loop", "interleaved"), ("blockwise", "1f1b")),
        ("skip-aware interleaved (Megatron's order on the V) / skip-aware wave", ("skip-aware", "interleaved"), ("skip-aware", "wave")),
        ("skip-aware ZB-H1 / block-wise ZB-H1", ("skip-aware", "zb-h1"), ("blockwise", "zb-h1")),
        ("skip-aware wave / block-wise 1F1B", ("skip-aware", "wave"), ("blockwise", "1f1b")),
    ):
        ratios = sorted(rate(k, *num) / rate(k, *den) for k in keys)
        out.append(f"* {label}: {ratios[0]:.3f} / {statistics.median(ratios):.3f} / {ratios[-1]:.3f}")
    best: dict[str, int] = {}
    for k in keys:
        options = {f"{plan} {schedule}": rate(k, plan, schedule) for plan, schedule in {(r["plan"], r["schedule"]) for r in rows}}
        name = max(options, key=lambda o: options[o])
        best[name] = best.get(name, 0) + 1
    out += ["", "Fastest per case: " + ", ".join(f"{name} {n}x" for name, n in sorted(best.items(), key=lambda kv: -kv[1])) + "."]
    return out


def parser() -> argparse.ArgumentParser:
    """The figure's options; the CP-SAT limit is a ``pipeline.simulate`` call's (``PIPELINE.ilp_time_limit_s``)."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument(
        "--time-limit", type=float, default=PIPELINE.ilp_time_limit_s, help="CP-SAT seconds per run (at most 20 on the shared machine)"
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--micro", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--pp", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--workers", type=int, default=4, help="CP-SAT workers (several: its LNS improves on the 1F1B hint; runs vary by seed)")
    return ap


def main(argv: list[str] | None = None) -> None:
    """Solve and simulate (unless ``--report-only``), then write pipeline-schedules.md from the CSVs."""
    args = parser().parse_args(argv)
    o = Output(args.out, command_line(NAME, argv))
    rows: list[dict[str, Any]]
    net: list[dict[str, Any]]
    if args.report_only:
        rows, net = list(o.read_csv("pipeline-schedules.csv")), list(o.read_csv("pipeline-network.csv"))
    else:
        rows = run(args.time_limit, args.seeds, args.micro, args.pp, args.workers)
        o.write_csv("pipeline-schedules.csv", rows, FIELDS)
        net = network()
        o.write_csv("pipeline-network.csv", net)
    print(o.write_markdown("pipeline-schedules.md", report(rows, args) + "\n" + network_report(net)))
