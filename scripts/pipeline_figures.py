"""Issue 7 figures: bytes per microbatch, stage imbalance, simulated throughput, CP-SAT schedules, gloo check and calibration.

    python scripts/pipeline_figures.py [--cpsat-limit 30] [--calibration-runs 3]

Models: the SD-like UNet (``unet-sd``, 64x64 latents) and a UViT-H/2 (``uvit-h``, 32x32
latents), microbatch 8. Pipelines whose every stage-to-stage link is the given one (one GPU
per node: the communication-bound case) at 10 GB/s and 300 GB/s; devices as the V100 presets
(50 TFLOP/s, 10 us per compute op, 32 GB).

* 8 devices: one pipeline, 16 microbatches per step: block-wise 1F1B vs skip-aware wave
  (balance tolerance 0 and 0.2).
* 16 devices, global batch 128: block-wise 1F1B over 16 stages vs skip-aware wave over 8
  stages x 2 data-parallel replicas (skip-aware places at most one encoder/decoder pair
  per device, and these models have 12 and 14 pairs), each with its ring all-reduce.
* CP-SAT on 8 stages x 16 microbatches of the block-wise plan vs 1F1B.
* gloo: bytes sent forward and backward vs the plan, and the simulator's step-time error.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search.pipeline.problem import PipelineProblem
from sim.pipeline.cluster import PRESETS, Cluster
from sim.pipeline.gloo_check import calibrate, check
from sim.pipeline.ilp import synthesize
from sim.pipeline.partition import Plan, blockwise, skip_aware
from sim.pipeline.profile import ModelProfile, profile
from sim.pipeline.simulate import simulate
from sim.pipeline.tune import hybrid_step_s

MODELS = (("unet-sd", 64), ("uvit-h", 32))


def _link(devices: int, gbs: float) -> Cluster:
    return dataclasses.replace(PRESETS["v100x16-ib10"], name=f"{gbs:g}GBs", devices=devices, per_node=1, intra_gbs=gbs, inter_gbs=gbs)


def _hybrid_samples_per_s(p: ModelProfile, plan: Plan, cluster: Cluster, schedule: str, dp: int, global_batch: int) -> float:
    micro = global_batch // (dp * p.microbatch)
    step = simulate(p, plan, cluster, schedule=schedule, microbatches=micro)
    return global_batch / hybrid_step_s(cluster, plan, step, dp)


def table_8() -> None:
    print("### 8 devices, one pipeline, 16 microbatches of 8\n")
    print(
        "| model | link GB/s | block-wise MB/mb | skip-aware MB/mb (tol 0 / 0.2) | reduction | imbalance bw / sa / sa0.2 |"
        " 1F1B bw samples/s | wave sa samples/s (tol 0 / 0.2) | ratio | bubble 1F1B / wave |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model, res in MODELS:
        p = profile(model, resolution=res, microbatch=8)
        for gbs in (10.0, 300.0):
            cluster = _link(8, gbs)
            b, s, s2 = (
                blockwise(p, 8, **cluster.rates),
                skip_aware(p, 8, **cluster.rates),
                skip_aware(p, 8, **cluster.rates, balance_tolerance=0.2),
            )
            rb = simulate(p, b, cluster, schedule="1f1b", microbatches=16)
            rs = simulate(p, s, cluster, schedule="wave", microbatches=16)
            rs2 = simulate(p, s2, cluster, schedule="wave", microbatches=16)
            best = max(rs.samples_per_s, rs2.samples_per_s)
            print(
                f"| {model} | {gbs:g} | {b.total_bytes / 1e6:.2f} | {s.total_bytes / 1e6:.2f} / {s2.total_bytes / 1e6:.2f} | "
                f"{1 - s.total_bytes / b.total_bytes:.1%} / {1 - s2.total_bytes / b.total_bytes:.1%} | "
                f"{b.imbalance:.2f} / {s.imbalance:.2f} / {s2.imbalance:.2f} | {rb.samples_per_s:.1f} | "
                f"{rs.samples_per_s:.1f} / {rs2.samples_per_s:.1f} | {best / rb.samples_per_s:.2f}x | "
                f"{rb.bubble_ratio:.3f} / {rs.bubble_ratio:.3f} |"
            )
    print()


def table_16() -> None:
    print("### 16 devices, global batch 128, microbatch 8\n")
    print(
        "| model | link GB/s | bw PP16 1F1B MB/mb | sa PP8xDP2 MB/mb | reduction | bw PP16 samples/s | sa PP8xDP2 wave samples/s | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for model, res in MODELS:
        p = profile(model, resolution=res, microbatch=8)
        for gbs in (10.0, 300.0):
            cluster = _link(16, gbs)
            b, s = blockwise(p, 16, **cluster.rates), skip_aware(p, 8, **cluster.rates, balance_tolerance=0.2)
            tb = _hybrid_samples_per_s(p, b, cluster, "1f1b", 1, 128)
            ts = _hybrid_samples_per_s(p, s, cluster, "wave", 2, 128)
            print(
                f"| {model} | {gbs:g} | {b.total_bytes / 1e6:.2f} | {s.total_bytes / 1e6:.2f} | {1 - s.total_bytes / b.total_bytes:.1%} | "
                f"{tb:.1f} | {ts:.1f} | {ts / tb:.2f}x |"
            )
    print()


def cpsat(limit: float) -> None:
    print(f"### CP-SAT, unet-sd block-wise, 8 stages x 16 microbatches, time limit {limit:g} s\n")
    p = profile("unet-sd", resolution=64, microbatch=8)
    for gbs in (10.0, 300.0):
        cluster = _link(8, gbs)
        plan = blockwise(p, 8, **cluster.rates)
        one = simulate(p, plan, cluster, schedule="1f1b", microbatches=16)
        syn = synthesize(p, plan, cluster, microbatches=16, time_limit_s=limit)
        rep = simulate(p, plan, cluster, schedule="ilp", microbatches=16, order=syn.starts)
        print(
            f"- {gbs:g} GB/s: status {syn.status}, solve {syn.solve_s:.1f} s; "
            f"bubble {rep.bubble_ratio:.3f} vs 1F1B {one.bubble_ratio:.3f}; "
            f"makespan {rep.makespan_s * 1e3:.0f} ms vs {one.makespan_s * 1e3:.0f} ms"
        )
    print()


def gloo(runs: int) -> None:
    print("### gloo (2 processes, loopback)\n")
    for model, res in (("unet-small", 16), ("uvit-tiny", 8)):
        for method in ("blockwise", "skip-aware"):
            r = check(model, devices=2, method=method, resolution=res)
            print(
                f"- {model} {method}: forward sent {r.bytes_sent} B, backward sent {r.backward_bytes_sent} B, planned {r.bytes_planned} B; "
                f"output equal {r.output_matches}, gradients equal {r.grads_match}"
            )
    pairs = [(calibrate("unet-small", method="blockwise"), calibrate("unet-small", method="skip-aware")) for _ in range(runs)]
    for k, method in enumerate(("blockwise", "skip-aware")):
        cals = [pair[k] for pair in pairs]
        print(
            f"- step time unet-small 32x32 mb4 {method}: measured {statistics.median(c.measured_s for c in cals) * 1e3:.1f} ms, "
            f"predicted {statistics.median(c.predicted_s for c in cals) * 1e3:.1f} ms "
            f"(median error {statistics.median(c.error for c in cals):+.1%} "
            f"over {runs} runs; measured {statistics.median(c.flops_per_s for c in cals) / 1e9:.0f} GFLOP/s per rank, "
            f"{statistics.median(c.link_gbs for c in cals):.2f} GB/s, {statistics.median(c.latency_us for c in cals):.0f} us)"
        )
    # calibrate the compute rate on the block-wise run, predict the skip-aware run of the same round
    cross = [sa.predicted_s * (bw.measured_s / bw.predicted_s) / sa.measured_s - 1 for bw, sa in pairs]
    med = statistics.median(cross)
    print(f"- calibrated on the block-wise run (rate x measured/predicted), the skip-aware prediction errs {med:+.1%} (median)")
    print()


def best_per_partitioner() -> None:
    print("### Best configuration per partitioner (every point of the pipeline search space, global batch 128)\n")
    print("| model | cluster | best block-wise | samples/s | best skip-aware | samples/s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for model, res in MODELS:
        for cluster in ("v100x16-ib10", "v100x16-ib300"):
            problem = PipelineProblem(model=model, cluster=cluster, global_batch=128, resolution=res)
            best: dict[str, tuple[float, str]] = {}
            for c in problem.all_points():
                if problem.infeasible(c) is None:
                    value = problem.evaluate(c)["samples_per_s"]
                    if value > best.get(c.partitioner, (0.0, ""))[0]:
                        best[c.partitioner] = (value, problem.describe(c))
            (b, bd), (s, sd) = best["blockwise"], best["skip-aware"]
            print(f"| {model} | {cluster} | {bd} | {b:.1f} | {sd} | {s:.1f} | {s / b:.2f}x |")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpsat-limit", type=float, default=30.0)
    parser.add_argument("--calibration-runs", type=int, default=3)
    parser.add_argument("--only", choices=("tables", "best", "cpsat", "gloo"), default=None)
    args = parser.parse_args()
    if args.only in (None, "tables"):
        table_8()
        table_16()
    if args.only in (None, "best"):
        best_per_partitioner()
    if args.only in (None, "cpsat"):
        cpsat(args.cpsat_limit)
    if args.only in (None, "gloo"):
        gloo(args.calibration_runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
