"""Issue 7 figures: CP-SAT schedules, gloo check and calibration.

    python -m coevo.figures pipeline-cpsat-gloo [--cpsat-limit 30] [--calibration-runs 3]

The bytes, throughput and best-configuration tables moved to ``python -m coevo.figures pipeline-fair``
(issue 18), which compares skip-aware plans with three block-wise baselines at the same
pipeline and data-parallel degrees (the tables here had compared block-wise PP16 with
skip-aware PP8 x DP2).

* CP-SAT on 8 stages x 16 microbatches of the block-wise plan vs 1F1B (unet-sd, 64x64
  latents, microbatch 8; every stage-to-stage link the given one, 10 or 300 GB/s; devices
  as the V100 presets: 50 TFLOP/s, 10 us per compute op, 32 GB; CP-SAT capped by the 32 GB, not by
  1F1B's memory bound, the default since issue 18).
* gloo: bytes sent forward and backward vs the plan (relayed, direct and skip-aware plans),
  and the simulator's step-time error.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics

from coevo.figures._common import plain_parser
from coevo.sim.pipeline.cluster import PRESETS, Cluster
from coevo.sim.pipeline.config import PIPELINE
from coevo.sim.pipeline.gloo_check import calibrate, check
from coevo.sim.pipeline.ilp import synthesize
from coevo.sim.pipeline.partition import blockwise
from coevo.sim.pipeline.profile import profile
from coevo.sim.pipeline.simulate import simulate


def _link(devices: int, gbs: float) -> Cluster:
    return dataclasses.replace(PRESETS[PIPELINE.cluster], name=f"{gbs:g}GBs", devices=devices, per_node=1, intra_gbs=gbs, inter_gbs=gbs)


def cpsat(limit: float) -> None:
    print(f"### CP-SAT, {PIPELINE.model} block-wise, 8 stages x {PIPELINE.microbatches} microbatches, time limit {limit:g} s\n")
    p = profile(PIPELINE.model, resolution=PIPELINE.resolution, microbatch=8)  # 8, not PIPELINE.microbatch (1): the figure's own
    for gbs in (10.0, 300.0):
        cluster = _link(8, gbs)
        plan = blockwise(p, 8, **cluster.rates)
        one = simulate(p, plan, cluster, schedule="1f1b", microbatches=PIPELINE.microbatches)
        syn = synthesize(
            p, plan, cluster, microbatches=PIPELINE.microbatches, time_limit_s=limit, memory="device"
        )  # issue 7: cap = device memory
        rep = simulate(p, plan, cluster, schedule="ilp", microbatches=PIPELINE.microbatches, order=syn.starts)
        print(
            f"- {gbs:g} GB/s: status {syn.status}, solve {syn.solve_s:.1f} s; "
            f"bubble {rep.bubble_ratio:.3f} vs 1F1B {one.bubble_ratio:.3f}; "
            f"makespan {rep.makespan_s * 1e3:.0f} ms vs {one.makespan_s * 1e3:.0f} ms"
        )
    print()


def gloo(runs: int) -> None:
    print("### gloo (2 processes, loopback)\n")
    for model, res in (("unet-small", 16), ("uvit-tiny", 8)):
        for method in ("blockwise", "blockwise-direct", "skip-aware"):
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


def parser() -> argparse.ArgumentParser:
    """The figure's options; the CP-SAT limit is ``synthesize``'s own default (``PIPELINE.synthesize_time_limit_s``)."""
    ap = plain_parser("pipeline-cpsat-gloo", __doc__)
    ap.add_argument("--cpsat-limit", type=float, default=PIPELINE.synthesize_time_limit_s)
    ap.add_argument("--calibration-runs", type=int, default=3)
    ap.add_argument("--only", choices=("cpsat", "gloo"), default=None)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Print the CP-SAT and the gloo sections (fresh runs; no saved data)."""
    args = parser().parse_args(argv)
    if args.only in (None, "cpsat"):
        cpsat(args.cpsat_limit)
    if args.only in (None, "gloo"):
        gloo(args.calibration_runs)
    return 0
