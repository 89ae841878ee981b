"""Issue 7 figures available so far: bytes per microbatch, stage imbalance and simulated throughput.

    python scripts/pipeline_figures.py

SD-like UNet (``unet-sd``, 64x64 latents, microbatch 8, 16 microbatches per step), pipelines of 8
devices whose every stage-to-stage link is the given one (one GPU per node: the
communication-bound case) at 10 GB/s and 300 GB/s. 16-device pipelines are reported for the
block-wise plan only: the skip-aware plan places one encoder/decoder pair per device at
most, and this UNet has 12 pairs.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search.errors import UserInputError
from sim.pipeline.cluster import Cluster
from sim.pipeline.partition import blockwise, skip_aware
from sim.pipeline.profile import profile
from sim.pipeline.simulate import simulate


def main() -> int:
    p = profile("unet-sd", resolution=64, microbatch=8)
    print(
        "| devices | link GB/s | block-wise MB/microbatch | skip-aware MB/microbatch | reduction | imbalance bw / sa | "
        "1F1B block-wise samples/s | wave skip-aware samples/s | ratio | bubble 1F1B / wave |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for devices in (8, 16):
        for link in (10.0, 300.0):
            cluster = Cluster(
                f"{link:g}GBs", devices=devices, per_node=1, device_tflops=50.0, memory_gb=32.0, intra_gbs=link, inter_gbs=link
            )
            rate = cluster.device_tflops * 1e12
            b = blockwise(p, devices, flops_per_s=rate)
            rb = simulate(p, b, cluster, schedule="1f1b", microbatches=16)
            try:
                s = skip_aware(p, devices, flops_per_s=rate)
            except UserInputError as exc:
                cells = [f"{b.total_bytes / 1e6:.2f}", "-", "-", f"{b.imbalance:.2f} / -", f"{rb.samples_per_s:.1f}", "-", "-"]
                print(f"| {devices} | {link:g} | " + " | ".join(cells) + f" | {rb.bubble_ratio:.3f} / - | ({exc})")
                continue
            rs = simulate(p, s, cluster, schedule="wave", microbatches=16)
            cells = [
                f"{b.total_bytes / 1e6:.2f}",
                f"{s.total_bytes / 1e6:.2f}",
                f"{1 - s.total_bytes / b.total_bytes:.1%}",
                f"{b.imbalance:.2f} / {s.imbalance:.2f}",
                f"{rb.samples_per_s:.1f}",
                f"{rs.samples_per_s:.1f}",
                f"{rs.samples_per_s / rb.samples_per_s:.2f}x",
                f"{rb.bubble_ratio:.3f} / {rs.bubble_ratio:.3f}",
            ]
            print(f"| {devices} | {link:g} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
