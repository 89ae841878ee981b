"""Issue 18 figures: PULSE against three block-wise baselines at the same PP x DP, and activation memory checked on CPU.

    python -m coevo.figures pipeline-fair [--only fair|best|memory] [--memory-repeats 3]
    python -m coevo.figures pipeline-fair --report-only     # the tables again from the saved CSVs

Writes CSVs and markdown tables under ``--out`` (``docs/bench/pipeline/``) (the tables are rendered from
the CSVs) and prints the headline numbers quoted in ``docs/pipeline.md``.

* ``fair.csv``: unet-sd (64 x 64 latents) and uvit-h (32 x 32), microbatch 8, global batch
  128 on 16 V100-like devices (50 TFLOP/s, 10 us per compute op, 32 GB); two topologies:
  one GPU per node (every link inter-node: the communication-bound case) and nodes of 8
  (NVLink 150 GB/s inside); inter-node 10 or 100 GB/s (clusters built here with the
  cluster file fields, not presets). Pipeline degree 4, 8 and 16 with data parallelism over
  the rest (PP x DP = 16), and the deepest skip-aware depth (one encoder/decoder pair per
  device: 12 for unet-sd, 14 for uvit-h, DP 1, leaving 4 and 2 devices idle); skip-aware
  plans cannot have 16 stages on these models, so PP 16 lists the baselines only. Every
  method runs at the same PP and DP in a row. Methods, each 1F1B (wave on the skip-aware plan): ``blockwise``
  (skips relayed), ``blockwise-direct`` (skips point to point), ``blockwise-bytes`` and
  ``skip-aware`` at balance tolerance 0 and 0.2 (the same for both). The ``dp`` replicas,
  their ring all-reduce flows and the pipelines' transfers (direct skips: one flow each)
  are simulated together on the cluster's max-min fair network (NICs shared per node).
* ``best.csv``: the best configuration per partitioner over the whole ``pipeline`` search
  space (every point evaluated) on v100x16-ib10 / ib300 and a 100 GB/s variant.
* ``memory.csv``: predicted vs measured activation memory of a one-device step (two
  microbatches, forwards then backwards) of the small presets on this CPU, with and without
  recompute, ``--memory-repeats`` fresh processes each (:mod:`sim.pipeline.memcheck`).

Everything except ``memory.csv`` is simulated and deterministic (no random seed enters).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from collections.abc import Iterable

import torch

from coevo.figures._common import Output, command_line, figure_parser
from coevo.search.pipeline.problem import PipelineProblem
from coevo.sim.pipeline.cluster import PRESETS, Cluster
from coevo.sim.pipeline.config import PIPELINE
from coevo.sim.pipeline.memcheck import measure_step, predicted_step
from coevo.sim.pipeline.partition import TOLERANT, Plan, partition, units
from coevo.sim.pipeline.profile import ModelProfile, profile
from coevo.sim.pipeline.simulate import memory_bound, simulate
from coevo.sim.pipeline.tune import hybrid_step_s

NAME = "pipeline-fair"

MODELS = ((PIPELINE.model, PIPELINE.resolution), ("uvit-h", 32))
"""The family's model at its resolution, and the figure's second model."""
METHODS = ("blockwise", "blockwise-direct", "blockwise-bytes", "skip-aware")
BASELINES = METHODS[:3]
GLOBAL_BATCH = PIPELINE.global_batch
# 16 devices and microbatch 8, not PIPELINE.devices (8) and PIPELINE.microbatch (1): the figure's own experiment settings
DEVICES, MICROBATCH = 16, 8


def cluster(per_node: int, inter_gbs: float) -> Cluster:
    """16 V100-like devices; ``per_node`` GPUs share NVLink (150 GB/s), nodes joined at ``inter_gbs``."""
    base = PRESETS[PIPELINE.cluster]
    intra = 150.0 if per_node > 1 else inter_gbs
    return dataclasses.replace(base, name=f"{per_node}pn-{inter_gbs:g}", per_node=per_node, intra_gbs=intra, inter_gbs=inter_gbs)


def _run(p: ModelProfile, plan: Plan, c: Cluster, pp: int) -> dict[str, object]:
    dp = DEVICES // pp
    micro = GLOBAL_BATCH // (dp * MICROBATCH)
    schedule = "wave" if plan.method == "skip-aware" else "1f1b"
    # dp replicas and their ring all-reduce flows simulated together, sharing NICs with the pipelines' transfers
    step = simulate(p, plan, c, schedule=schedule, microbatches=micro, data_parallel=dp)
    return {
        "dp": dp,
        "microbatches": micro,
        "schedule": schedule,
        "mb_per_microbatch": round(plan.total_bytes / 1e6, 3),
        "imbalance": round(plan.imbalance, 4),
        "samples_per_s": round(GLOBAL_BATCH / hybrid_step_s(c, plan, step, dp), 2),
        "bubble": round(step.bubble_ratio, 4),
        "memory_bound_gb": round(max(memory_bound(p, plan, schedule=schedule, microbatches=micro)) / 1e9, 3),
    }


def facts(o: Output) -> None:
    """Per-model profile facts quoted in docs/pipeline.md: compute ops, their fixed cost, and activation bytes."""
    rows: list[dict[str, object]] = []
    c = PRESETS[PIPELINE.cluster]
    for model, res in MODELS:
        for mb in (1, 8):
            p = profile(model, resolution=res, microbatch=mb)
            rows.append(
                {
                    "model": model,
                    "resolution": res,
                    "microbatch": mb,
                    "compute_ops": p.total("kernels"),
                    "flop_ms": round(p.total("flops") / c.flops_per_s * 1e3, 2),
                    "op_overhead_ms": round(p.total("kernels") * c.kernel_s * 1e3, 2),
                    "saved_mb": round(p.activation_bytes(range(len(p.blocks))) / 1e6, 1),
                    "block_outputs_mb": round(p.total("out_bytes") / 1e6, 1),
                }
            )
    o.write_csv("facts.csv", rows)
    print("| " + " | ".join(map(str, rows[0])) + " |")
    for r in rows:
        print("| " + " | ".join(map(str, r.values())) + " |")
    print()


def fair(o: Output) -> None:
    facts(o)
    rows: list[dict[str, object]] = []
    for model, res in MODELS:
        p = profile(model, resolution=res, microbatch=MICROBATCH)
        pairs = len(units(p))
        for per_node in (1, 8):
            for gbs in (10.0, 100.0):
                c = cluster(per_node, gbs)
                for pp in sorted({4, 8, pairs, 16}):
                    for tol in (0.0, 0.2):
                        for method in METHODS:
                            if method == "skip-aware" and pp > pairs:
                                continue
                            if tol and method not in TOLERANT:
                                continue  # the compute-balanced baselines have no tolerance: their tol-0 row serves both
                            plan = partition(p, method, pp, **c.rates, balance_tolerance=tol)
                            head = {"model": model, "per_node": per_node, "inter_gbs": gbs, "pp": pp, "tolerance": tol, "method": method}
                            rows.append(head | _run(p, plan, c, pp))
    o.write_csv("fair.csv", rows)
    render_fair(o)


def render_fair(o: Output) -> None:
    rows = o.read_csv("fair.csv")
    key = {(r["model"], r["per_node"], r["inter_gbs"], r["pp"], r["tolerance"], r["method"]): r for r in rows}
    lines = [
        "# PULSE vs three block-wise baselines at the same PP x DP (simulated; `python -m coevo.figures pipeline-fair --only fair`)",
        "",
        f"{DEVICES} devices, global batch {GLOBAL_BATCH}, microbatch {MICROBATCH}; 1F1B (wave on skip-aware). "
        "bw: blockwise (skips relayed), "
        "direct: blockwise-direct (skips point to point), bytes: blockwise-bytes (byte-aware cuts at the same tolerance "
        "as skip-aware; bw and direct take none). MB/mb: forward MB per microbatch crossing devices. Ratio: skip-aware "
        "samples/s over each baseline's. Deterministic simulation: no seed.",
        "",
        "| model | GPUs/node | inter GB/s | PP x DP | tol | MB/mb bw / direct / bytes / skip-aware | reduction vs bw / direct / bytes |"
        " samples/s bw / direct / bytes / skip-aware | ratio vs bw / direct / bytes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    combos = dict.fromkeys((r["model"], r["per_node"], r["inter_gbs"], r["pp"], r["tolerance"], r["dp"]) for r in rows)
    for model, per_node, gbs, pp, tol, dp in combos:
        base = (model, per_node, gbs, pp)
        got = [key.get((*base, tol if m in TOLERANT else "0.0", m)) for m in METHODS]
        ours = got[3]
        if ours is None and tol != "0.0":
            continue  # no skip-aware plan this deep: the tolerance-0 row lists the baselines
        mb = " / ".join(g["mb_per_microbatch"] if g else "n/a" for g in got)
        sps = " / ".join(g["samples_per_s"] if g else "n/a" for g in got)
        if ours is None:
            red = ratio = "n/a (more stages than encoder/decoder pairs)"
        else:
            red = " / ".join(f"{1 - float(ours['mb_per_microbatch']) / float(g['mb_per_microbatch']):.1%}" for g in got[:3] if g)
            ratio = " / ".join(f"{float(ours['samples_per_s']) / float(g['samples_per_s']):.2f}x" for g in got[:3] if g)
        lines.append(f"| {model} | {per_node} | {float(gbs):g} | {pp} x {dp} | {float(tol):g} | {mb} | {red} | {sps} | {ratio} |")
    largest = max(float(r["memory_bound_gb"]) for r in rows)
    lines += ["", f"Largest memory bound of any row: {largest:.1f} GB per device (32 GB devices: all fit)."]
    o.write_markdown("fair.md", "\n".join(lines) + "\n")
    print("\n".join(lines) + "\n")


def best(o: Output) -> None:
    rows: list[dict[str, object]] = []
    clusters: Iterable[tuple[str, str]] = ((PIPELINE.cluster, PIPELINE.cluster), ("v100x16-ib300", "v100x16-ib300"))
    for model, res in MODELS:
        for label, spec in clusters:
            problem = PipelineProblem(model=model, cluster=spec, global_batch=GLOBAL_BATCH, resolution=res)
            found: dict[str, tuple[float, str, float]] = {}
            for c in problem.all_points():
                if problem.infeasible(c) is None:
                    values = problem.evaluate(c)
                    if values["samples_per_s"] > found.get(c.partitioner, (0.0, "", 0.0))[0]:
                        found[c.partitioner] = (values["samples_per_s"], problem.describe(c), values["memory_gb"])
            for method in METHODS:
                value, described, memory = found[method]
                rows.append(
                    {
                        "model": model,
                        "cluster": label,
                        "method": method,
                        "best": described,
                        "samples_per_s": round(value, 2),
                        "memory_gb": round(memory, 3),
                    }
                )
    o.write_csv("best.csv", rows)
    render_best(o)


def render_best(o: Output) -> None:
    rows = o.read_csv("best.csv")
    lines = [
        "# Best configuration per partitioner over the whole `pipeline` search space",
        "",
        "Simulated; `python -m coevo.figures pipeline-fair --only best`; deterministic, no seed.",
        "",
        f"Global batch {GLOBAL_BATCH}, every point evaluated (pp x microbatch x schedule x balance x recompute).",
        "",
        "| model | cluster | partitioner | best configuration | samples/s | memory bound GB | skip-aware / this |",
        "|---|---|---|---|---|---|---|",
    ]
    ours = {(r["model"], r["cluster"]): float(r["samples_per_s"]) for r in rows if r["method"] == "skip-aware"}
    for r in rows:
        ratio = ours[r["model"], r["cluster"]] / float(r["samples_per_s"])
        lines.append(
            f"| {r['model']} | {r['cluster']} | {r['method']} | {r['best']} | {r['samples_per_s']} | {r['memory_gb']} | {ratio:.2f}x |"
        )
    o.write_markdown("best.md", "\n".join(lines) + "\n")
    print("\n".join(lines) + "\n")


MEMORY_CASES = (("unet-tiny", 32, 16), ("uvit-tiny", 32, 16), ("unet-small", 32, 4), ("uvit-small", 16, 4))


def memory(o: Output, repeats: int) -> None:
    torch.set_num_threads(1)
    rows: list[dict[str, object]] = []
    for model, res, mb in MEMORY_CASES:
        for recompute in (False, True):
            held, peak = predicted_step(model, resolution=res, microbatch=mb, microbatches=2, recompute=recompute)
            for run in range(repeats):
                m = measure_step(model, resolution=res, microbatch=mb, microbatches=2, recompute=recompute)
                rows.append(
                    {
                        "model": model,
                        "resolution": res,
                        "microbatch": mb,
                        "recompute": recompute,
                        "run": run,
                        "predicted_held_mb": round(held / 1e6, 3),
                        "measured_held_mb": round(m.held_bytes / 1e6, 3),
                        "predicted_peak_mb": round(peak / 1e6, 3),
                        "measured_peak_mb": round(m.peak_bytes / 1e6, 3),
                    }
                )
    o.write_csv("memory.csv", rows)
    render_memory(o)


def render_memory(o: Output) -> None:
    rows = o.read_csv("memory.csv")
    lines = [
        "# Predicted vs measured activation memory on CPU (`python -m coevo.figures pipeline-fair --only memory`)",
        "",
        "One device, two microbatches: all forwards, then all backwards (GPipe on one stage), float32. Measured: resident "
        "memory over the size before the first forward (held: after the forwards; peak: high-water mark through the "
        "backwards), median and range over fresh processes. Predicted: the planner's stash (autograd's saved tensors from "
        "the meta-device profile; with recompute, block inputs) and, for the peak, the recompute transient; activation "
        "gradients during backward are not modelled.",
        "",
        "| model | res | microbatch | recompute | runs | held MB predicted | held MB measured (median, range) | error |"
        " peak MB predicted | peak MB measured (median, range) | error |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["resolution"], r["microbatch"], r["recompute"]), []).append(r)
    for (model, res, mb, rc), rs in groups.items():
        held = [float(r["measured_held_mb"]) for r in rs]
        peak = [float(r["measured_peak_mb"]) for r in rs]
        ph, pp = float(rs[0]["predicted_held_mb"]), float(rs[0]["predicted_peak_mb"])
        mh, mp = statistics.median(held), statistics.median(peak)
        lines.append(
            f"| {model} | {res} | {mb} | {rc} | {len(rs)} | {ph:.2f} | {mh:.2f} ({min(held):.2f}-{max(held):.2f}) | {mh / ph - 1:+.1%} | "
            f"{pp:.2f} | {mp:.2f} ({min(peak):.2f}-{max(peak):.2f}) | {mp / pp - 1:+.1%} |"
        )
    o.write_markdown("memory.md", "\n".join(lines) + "\n")
    print("\n".join(lines) + "\n")


def parser() -> argparse.ArgumentParser:
    """The figure's options (its model, cluster and global batch are the family's: ``PIPELINE``)."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--only", choices=("fair", "best", "memory"), default=None)
    ap.add_argument("--memory-repeats", type=int, default=3)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Measure the chosen parts (unless ``--report-only``), then write their pages."""
    args = parser().parse_args(argv)
    o = Output(args.out, command_line(NAME, argv))
    steps = {"fair": (fair, render_fair), "best": (best, render_best), "memory": (lambda o: memory(o, args.memory_repeats), render_memory)}
    for name, (run, render) in steps.items():
        if args.only in (None, name):
            (render if args.report_only else run)(o)
    return 0
